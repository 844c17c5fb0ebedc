"""What both wire formats read and write alike: the Messages API's thinking blocks (which LiteLLM's
`thinking_blocks` carry on the OpenAI side too), the sampling settings and what `drop_params`
says of them, and the hint of a stream taken back.

Imports neither `provider` nor a wire-format module: they import it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ._request import Reasoning
from .errors import InvalidMessagesError
from .types import CallWarning

__all__ = ["RESEND", "SAMPLING", "dropped", "reasoning", "sampling", "thinking_block"]

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


#: The sampling settings: sent as written (ADR 0009), so the model and the API version judge them.
SAMPLING = ("temperature", "top_p", "top_k")


def sampling(body: Mapping[str, Any], refuse: Callable[[str, str], Exception]) -> dict[str, Any]:
    """The sampling settings of a request body as call options; one that is not a number
    (`top_k`: an integer) raises `refuse(name, problem)`. Their values are the API's to judge."""
    settings: dict[str, Any] = {}
    for name in SAMPLING:
        value = body.get(name)
        if value is None:
            continue
        integer = name == "top_k"
        if isinstance(value, bool) or not isinstance(value, int if integer else float | int):
            raise refuse(name, "must be an integer" if integer else "must be a number")
        settings[name] = value
    return settings


def dropped(name: str, why: str = "") -> CallWarning:
    """The `parameter-dropped` warning for a parameter `drop_params` left out (LiteLLM's, or the
    gateway's `--drop-params`)."""
    return CallWarning(
        code="parameter-dropped",
        message=f"the parameter {name!r} was dropped (drop_params) and did not reach the model"
        + (f": {why}" if why else ""),
    )
