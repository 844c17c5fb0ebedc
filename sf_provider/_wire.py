"""What the wire formats read and write alike: the Messages API's thinking blocks (which LiteLLM's
`thinking_blocks` carry on the OpenAI side too), the hint of a stream taken back, and two rules
of OpenAI's formats (Chat Completions and Responses): a JSON-schema output format's name and
description, and the tools a history calls.

Imports neither `provider` nor a wire-format module: they import it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._request import AssistantMessage, Message, Reasoning, ToolCall
from .errors import InvalidMessagesError
from .tools import FunctionTool

__all__ = ["RESEND", "called_tools", "described", "reasoning", "thinking_block"]

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
