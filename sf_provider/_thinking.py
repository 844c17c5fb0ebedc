"""The Messages API's `thinking` object as the provider's `thinking` option: one reader for every
door that takes it (`/v1/messages`, `thinking` on `/v1/chat/completions` and in LiteLLM,
`ChatClaudeAgent(thinking={...})`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import UnsupportedRequestError

__all__ = ["thinking_option"]


def thinking_option(config: Any) -> str | int | None:
    """`config` as the provider's `thinking` option: a budget, `"adaptive"` or `"disabled"`
    (None: not given); an `UnsupportedRequestError` naming the field otherwise."""
    if config is None:
        return None
    if not isinstance(config, Mapping):
        raise UnsupportedRequestError("thinking: must be an object")
    kind = config.get("type")
    if config.get("display") is not None:
        raise UnsupportedRequestError(
            "thinking.display: the CLI cannot choose how thinking is displayed (the model's "
            "default applies); drop it"
        )
    known = {"type", "budget_tokens"} if kind == "enabled" else {"type"}
    extra = sorted(k for k, v in config.items() if k not in known | {"display"} and v is not None)
    if extra and kind in ("enabled", "adaptive", "disabled"):
        raise UnsupportedRequestError(
            f"thinking.{extra[0]}: not supported by this gateway (the Claude Code CLI cannot "
            f"honour it); drop it"
        )
    if kind == "enabled":
        budget = config.get("budget_tokens")
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1024:
            raise UnsupportedRequestError(
                "thinking.budget_tokens: required: an integer of at least 1024"
            )
        return budget
    if kind in ("adaptive", "disabled"):
        return str(kind)
    raise UnsupportedRequestError(
        f"thinking.type: {kind!r} is not supported; use 'enabled' (with budget_tokens), "
        f"'adaptive' or 'disabled'"
    )
