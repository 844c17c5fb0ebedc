"""What both wire formats read and write alike: the Messages API's thinking blocks (which LiteLLM's
`thinking_blocks` carry on the OpenAI side too), and the hint of a stream taken back.

Imports neither `provider` nor a wire-format module: they import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._request import Reasoning
from .errors import InvalidMessagesError

__all__ = ["RESEND", "reasoning", "thinking_block"]

#: What a client whose stream was taken back after it was sent (`SentParts.discard`) can do.
RESEND = "send the request again (without stream, the redo is folded in correctly)"


def thinking_block(text: str, signature: str | None, redacted: str | None) -> dict[str, Any]:
    """Reasoning as the Messages API's block to replay: `redacted_thinking` with its data, or
    signed `thinking` ({} for unsigned reasoning, which cannot be replayed as thinking)."""
    if redacted:
        return {"type": "redacted_thinking", "data": redacted}
    if signature:
        return {"type": "thinking", "thinking": text, "signature": signature}
    return {}


def reasoning(block: Mapping[str, Any], where: str) -> Reasoning:
    """A `thinking` or `redacted_thinking` block (checked to be one of them by the caller) as a
    `Reasoning` part; a redacted block needs its data."""
    if block.get("type") == "redacted_thinking":
        data = block.get("data")
        if not isinstance(data, str) or not data:
            raise InvalidMessagesError(f"{where}: a redacted_thinking block needs its 'data'")
        return Reasoning("", redacted=data)
    signature = block.get("signature")
    return Reasoning(
        str(block.get("thinking", "")),
        signature if isinstance(signature, str) and signature else None,
    )
