"""An HTTP gateway speaking the OpenAI Chat Completions and Anthropic Messages APIs, with real
tool calling, over one shared `ClaudeAgentProvider` (the extra `sf-provider[gateway]`).

Run it with `sf-provider gateway`, or serve `create_app(GatewaySettings(...))` with any ASGI
server. Tools come with each request and go back as tool calls (single-turn): the client runs
them, as with any model API.
"""

from __future__ import annotations

import importlib.util

if importlib.util.find_spec("starlette") is None:  # pragma: no cover - only without the extra
    raise ImportError("sf_provider.gateway needs the extra: pip install 'sf-provider[gateway]'")

from ._http import GatewaySettings
from .app import create_app

__all__ = ["GatewaySettings", "create_app"]
