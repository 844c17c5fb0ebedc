"""The request every front door builds: typed messages, tools and call options (ADR 0008).

A front door is a pair of conversions: its wire format (Chat Completions, Anthropic Messages,
LiteLLM's parameters, pydantic-ai's `ModelRequest`s, LangChain's messages) is parsed into a
`Request`, and the provider's stream parts and result are rendered back into the wire format.
Every door builds the same typed messages, so what a history may hold, and how it reaches the
model, is decided once (`sf_provider._messages` turns them into Messages API turns).
`CallOptions` is defined in `sf_provider._options` and re-exported here: the provider imports
that model at import, and this module (its frozen dataclasses) only when it reads a request.

The message types, after the Vercel AI SDK's prompt and pydantic-ai's message parts:

- `SystemMessage(text)`: joined into the system prompt (only before the conversation starts).
- `UserMessage(parts)`: `Text` and `Image` parts.
- `AssistantMessage(parts)`: `Text`, `Reasoning` (signed, redacted, or plain: plain reasoning
  cannot be replayed as thinking and goes as text, with a `history-flattened` warning) and
  `ToolCall` parts.
- `ToolMessage(results)`: `ToolResult`s answering the calls of the assistant message before it.

`generate` and `stream` also take the dict format below (and a plain string, one user turn);
`parse_messages` reads it into these types, and refuses anything that would not reach the model.

- `{"role": "system", "content": str | [text blocks]}`.
- `{"role": "user", "content": str | [blocks]}` with blocks `{"type": "text", "text"}` and
  `{"type": "image", "data": <base64>, "media_type": "image/png"}` or
  `{"type": "image", "url": "data:image/png;base64,..." | "https://..."}` (one of the two; an
  optional `"detail"` may be `"auto"` or `"high"`: Claude has no low-detail mode). Base64 image
  data must decode, its media type must be one the Messages API takes (`IMAGE_MEDIA_TYPES`) and
  its first bytes must be of that type; otherwise the CLI would send the model a text note in
  its place, so it is refused.
- `{"role": "assistant", "content": str | [blocks]}` with blocks `{"type": "text", "text"}`,
  `{"type": "reasoning", "text", "signature"}`, a redacted thinking block
  `{"type": "reasoning", "text": "", "redacted": <data>}` (sent back as the API's
  `redacted_thinking`) and `{"type": "tool-call", "tool_call_id", "tool_name", "input"}`.
- `{"role": "tool", "content": [{"type": "tool-result", "tool_call_id", "output", "is_error"}]}`:
  results the application produced; `output` is text, or any JSON value (sent as JSON);
  `is_error` is a bool (default false); an optional `tool_name` must name the call's tool. A
  result with images gives `"content": [blocks]` instead of `output`: text and image blocks as
  in a user turn (sent as the result's content blocks).

Only these keys are read; any other key on a message or a block is refused (it would not reach
the model), except `cache_control`, a caching hint, which is ignored: the CLI sets its own cache
breakpoints. The rules across messages (every call answered, the last turn not empty, ...) are
checked when the messages become turns (`sf_provider._messages.convert_messages`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._options import CallOptions, call_options
from .errors import InvalidMessagesError
from .tools import FunctionTool

__all__ = [
    "AssistantMessage",
    "AssistantPart",
    "CallOptions",
    "Image",
    "Message",
    "MessagesInput",
    "Reasoning",
    "Request",
    "SystemMessage",
    "Text",
    "ToolCall",
    "ToolMessage",
    "ToolResult",
    "UserMessage",
    "UserPart",
    "call_options",
    "holds_tool_blocks",
    "media_parts",
    "parse_messages",
]


# --------------------------------------------------------------------------- parts


@dataclass(frozen=True, slots=True)
class Text:
    """Text, in any turn."""

    text: str


@dataclass(frozen=True, slots=True)
class Image:
    """An image: base64 `data` with its `media_type`, or a `url` (a `data:` URL or http(s)).

    `detail` is OpenAI's hint: `auto` and `high` are what Claude does anyway; `low` is refused
    (Claude has no low-detail mode).
    """

    data: str | None = None
    media_type: str | None = None
    url: str | None = None
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class Reasoning:
    """A reasoning (thinking) block of an assistant turn: signed (replayed as thinking),
    redacted (`redacted` holds the API's opaque data; `text` is empty) or plain (replayed as
    text, with a warning)."""

    text: str
    signature: str | None = None
    redacted: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the model made: `id`, the tool's `name` (the application's) and its `input`."""

    id: str
    name: str
    input: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The application's result of the call `call_id`: text, or text and image parts.

    `tool_name`, when given, must name the call's tool (a check, nothing is sent).
    """

    call_id: str
    output: str | tuple[Text | Image, ...]
    is_error: bool = False
    tool_name: str | None = None


UserPart = Text | Image
AssistantPart = Text | Reasoning | ToolCall


# --------------------------------------------------------------------------- messages


@dataclass(frozen=True, slots=True)
class SystemMessage:
    """Instructions, joined into the system prompt."""

    text: str


@dataclass(frozen=True, slots=True)
class UserMessage:
    """A user turn."""

    parts: tuple[UserPart, ...]


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """An earlier reply of the model."""

    parts: tuple[AssistantPart, ...]


@dataclass(frozen=True, slots=True)
class ToolMessage:
    """The application's results of the calls in the assistant message before it."""

    results: tuple[ToolResult, ...]


Message = SystemMessage | UserMessage | AssistantMessage | ToolMessage

#: A plain string (one user turn) or a list of messages: typed (`Message`) or dicts in the format
#: of the module docstring (both may be mixed).
MessagesInput = str | Sequence[Mapping[str, Any] | Message]


@dataclass(frozen=True)
class Request:
    """One call of the provider, as a front door parsed it: typed messages, the tools offered
    and the call options."""

    messages: tuple[Message, ...]
    tools: tuple[FunctionTool, ...] = ()
    options: CallOptions = field(default_factory=lambda: CallOptions())


def holds_tool_blocks(messages: Sequence[Message]) -> bool:
    """Whether typed messages hold a tool call or a tool result: the Messages API refuses them
    in a request that defines no tools."""
    return any(
        isinstance(message, ToolMessage)
        or (
            isinstance(message, AssistantMessage)
            and any(isinstance(part, ToolCall) for part in message.parts)
        )
        for message in messages
    )


# --------------------------------------------------------------------------- the dict format

_ROLES = ("system", "user", "assistant", "tool")

#: The keys each block type is read with (any other is refused, except `_IGNORED_KEYS`).
_BLOCK_KEYS = {
    "text": {"type", "text"},
    "image": {"type", "data", "media_type", "url", "detail"},
    "reasoning": {"type", "text", "signature", "redacted"},
    "tool-call": {"type", "tool_call_id", "tool_name", "input"},
    "tool-result": {"type", "tool_call_id", "tool_name", "output", "content", "is_error"},
}

#: Caching hints: caching changes cost, never the answer, and the CLI sets its own cache
#: breakpoints. Accepted on messages and blocks, and ignored.
_IGNORED_KEYS = frozenset({"cache_control"})


def _fail(where: str, problem: str) -> InvalidMessagesError:
    return InvalidMessagesError(f"{where}: {problem}")


def _check_keys(item: Mapping[str, Any], where: str, allowed: set[str], what: str) -> None:
    """Refuse a key of `item` (a message or a block) that would not reach the model."""
    unknown = sorted(str(k) for k in item if k not in allowed and k not in _IGNORED_KEYS)
    if not unknown:
        return
    named = ", ".join(repr(k) for k in unknown)
    hint = (
        " (the Messages API has no participant names: put the speaker in the content)"
        if "name" in unknown and what.endswith("message")
        else ""
    )
    raise _fail(
        where,
        f"{what} has unknown key(s) {named}{hint}; it is read with "
        f"{', '.join(repr(k) for k in sorted(allowed))} only, so remove them "
        f"('cache_control' is accepted and ignored)",
    )


def _blocks(content: Any, where: str) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, Sequence) and not isinstance(content, bytes | bytearray):
        return list(content)
    raise _fail(
        where, f"content must be a string or a list of blocks, not {type(content).__name__}"
    )


def _kind(block: Any) -> Any:
    return block.get("type") if isinstance(block, Mapping) else None


def _text(block: Any, where: str) -> Text:
    if not isinstance(block, Mapping):
        raise _fail(where, f"a text block must be a dict, not {type(block).__name__}")
    _check_keys(block, where, _BLOCK_KEYS["text"], "a text block")
    text = block.get("text")
    if not isinstance(text, str):
        raise _fail(where, "a text block needs a string 'text'")
    return Text(text)


def _image(block: Mapping[str, Any], where: str) -> Image:
    _check_keys(block, where, _BLOCK_KEYS["image"], "an image block")
    values = {key: block.get(key) for key in ("data", "media_type", "url", "detail")}
    for key, value in values.items():
        if value is not None and not isinstance(value, str):
            raise _fail(where, f"an image block's {key!r} must be a string")
    if "data" in block and "url" in block:
        raise _fail(where, "an image block has 'data' or 'url', not both; keep one")
    return Image(**values)


def media_parts(
    content: Any, where: str, what: str = "a content block"
) -> tuple[Text | Image, ...]:
    """Text and image blocks in the dict format (a user turn's, a tool result's content) as
    parts."""
    parts: list[Text | Image] = []
    for i, block in enumerate(_blocks(content, where)):
        here = f"{where}, block {i}"
        kind = _kind(block)
        if kind == "text":
            parts.append(_text(block, here))
        elif kind == "image":
            parts.append(_image(block, here))
        else:
            raise _fail(here, f"{what} must be 'text' or 'image', not {kind!r}")
    return tuple(parts)


def _reasoning(block: Mapping[str, Any], where: str) -> Reasoning:
    _check_keys(block, where, _BLOCK_KEYS["reasoning"], "a reasoning block")
    redacted = block.get("redacted")
    if redacted is not None:  # a redacted thinking block: its data goes back as it came
        if not isinstance(redacted, str) or not redacted:
            raise _fail(where, "a redacted reasoning block needs its data as a string")
        return Reasoning("", redacted=redacted)
    text = block.get("text")
    if not isinstance(text, str):
        raise _fail(where, "a reasoning block needs a string 'text'")
    signature = block.get("signature")
    return Reasoning(text, signature if isinstance(signature, str) and signature else None)


def _tool_call(block: Mapping[str, Any], where: str) -> ToolCall:
    _check_keys(block, where, _BLOCK_KEYS["tool-call"], "a tool-call")
    call_id, name, arguments = (block.get(k) for k in ("tool_call_id", "tool_name", "input"))
    if not isinstance(call_id, str) or not call_id:
        raise _fail(where, "a tool-call needs a string 'tool_call_id'")
    if not isinstance(name, str) or not name:
        raise _fail(where, "a tool-call needs a string 'tool_name'")
    if not isinstance(arguments, Mapping):
        raise _fail(where, "a tool-call needs an object 'input'")
    return ToolCall(call_id, name, dict(arguments))


def _assistant(content: Any, where: str) -> AssistantMessage:
    parts: list[AssistantPart] = []
    for i, block in enumerate(_blocks(content, where)):
        here = f"{where}, block {i}"
        kind = _kind(block)
        if kind == "text":
            parts.append(_text(block, here))
        elif kind == "reasoning":
            parts.append(_reasoning(block, here))
        elif kind == "tool-call":
            parts.append(_tool_call(block, here))
        else:
            raise _fail(
                here, f"an assistant block must be 'text', 'reasoning' or 'tool-call', not {kind!r}"
            )
    return AssistantMessage(tuple(parts))


def _tool_result(block: Any, where: str) -> ToolResult:
    kind = _kind(block)
    if kind != "tool-result":
        raise _fail(where, f"a tool message holds 'tool-result' blocks, not {kind!r}")
    _check_keys(block, where, _BLOCK_KEYS["tool-result"], "a tool-result")
    call_id = block.get("tool_call_id")
    if not isinstance(call_id, str):
        raise _fail(
            where,
            f"tool result for {call_id!r} has no matching tool call before it "
            f"(or that call already has a result)",
        )
    is_error = block.get("is_error", False)
    if not isinstance(is_error, bool):
        raise _fail(
            where, f"a tool-result's 'is_error' must be true or false (a bool), not {is_error!r}"
        )
    tool_name = block.get("tool_name")
    if tool_name is not None and not isinstance(tool_name, str):
        raise _fail(where, "a tool-result's 'tool_name' must be a string")
    output: str | tuple[Text | Image, ...]
    if "content" in block:
        if "output" in block:
            raise _fail(where, "a tool-result has 'output' or 'content', not both")
        output = media_parts(block["content"], where, "a tool-result content block")
        if not output:
            raise _fail(where, "a tool-result's 'content' is empty; give some blocks")
    else:
        value = block.get("output", "")
        output = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return ToolResult(call_id, output, is_error, tool_name)


def _message(message: Any, i: int) -> Message:
    if not isinstance(message, Mapping):
        raise InvalidMessagesError(f"message {i} must be a dict, got {type(message).__name__}")
    role = message.get("role")
    if not isinstance(role, str) or role not in _ROLES:
        raise InvalidMessagesError(
            f"message {i}: unknown role {role!r}; use one of {sorted(_ROLES)}"
        )
    if "content" not in message:
        raise InvalidMessagesError(f"message {i} ({role}) has no 'content'")
    where = f"message {i} ({role})"
    _check_keys(message, where, {"role", "content"}, f"a {role} message")
    content = message["content"]
    if role == "system":
        return SystemMessage("\n".join(_text(b, where).text for b in _blocks(content, where)))
    if role == "user":
        return UserMessage(media_parts(content, where, "a user block"))
    if role == "assistant":
        return _assistant(content, where)
    blocks = _blocks(content, where)
    return ToolMessage(tuple(_tool_result(b, f"{where}, block {j}") for j, b in enumerate(blocks)))


def parse_messages(messages: MessagesInput) -> list[Message]:
    """The request's messages as typed messages: a string is one user turn, typed messages are
    kept, dicts are read in the format of the module docstring (refusing what would not reach
    the model, naming the message and block)."""
    if isinstance(messages, str):
        if not messages.strip():
            raise InvalidMessagesError("the prompt is empty; send some text")
        return [UserMessage((Text(messages),))]
    if not isinstance(messages, Sequence) or not messages:
        raise InvalidMessagesError(
            "messages must be a non-empty string or list of role/content dicts"
        )
    return [
        message if isinstance(message, Message) else _message(message, i)
        for i, message in enumerate(messages)
    ]
