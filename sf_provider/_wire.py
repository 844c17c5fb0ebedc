"""What the wire formats read and write alike: the Messages API's thinking blocks (which LiteLLM's
`thinking_blocks` carry on the OpenAI side too), the sampling settings and what `drop_params`
says of them, the hint of a stream taken back, and two rules of OpenAI's formats (Chat
Completions and Responses): a JSON-schema output format's name and description, and the tools a
history calls.

Imports neither `provider` nor a wire-format module: they import it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._request import AssistantMessage, Message, Reasoning, ToolCall
from .errors import InvalidMessagesError, UnsupportedRequestError
from .tools import FunctionTool
from .types import CallWarning

__all__ = [
    "RESEND",
    "SAMPLING",
    "UnsupportedParameterError",
    "called_tools",
    "described",
    "dropped",
    "reasoning",
    "sampling",
    "thinking_block",
]


class UnsupportedParameterError(UnsupportedRequestError):
    """A request parameter of an OpenAI-shaped API the provider cannot honour; `param` names
    it (the error body's `param`)."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(f"parameter {param!r}: {message}")
        self.param = param


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


def described(
    schema: Mapping[str, Any], name: str | None, description: str | None
) -> dict[str, Any]:
    """An OpenAI JSON-schema output format's schema with the format's `name` and `description`,
    which OpenAI shows the model to say what the answer is for: the CLI offers the model only
    the schema (as its StructuredOutput tool's input), so they go into it as its `title` and
    `description`."""
    schema = dict(schema)
    if name and "title" not in schema:
        schema["title"] = name
    own = schema.get("description")
    if description and not own:
        schema["description"] = description
    elif description and own != description:
        schema["description"] = f"{description}\n\n{own}"
    return schema


def called_tools(messages: Sequence[Message]) -> list[FunctionTool]:
    """The tools a history calls, defined again for a request without tools: the Messages API
    refuses tool calls in a request that defines none, and OpenAI's API takes them (AutoGen's
    reflection after a tool call sends the calls and results without `tools`). Offered with
    tool_choice "none", so the provider tells the model to answer in text and refuses a call;
    their schemas are unknown here and admit any arguments."""
    names = dict.fromkeys(
        part.name
        for message in messages
        if isinstance(message, AssistantMessage)
        for part in message.parts
        if isinstance(part, ToolCall)
    )
    later = "Called earlier in this conversation; not available for this reply."
    return [FunctionTool(name, later, {"type": "object"}) for name in names]


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
