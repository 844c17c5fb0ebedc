"""Typed request messages -> Messages API turns: prior history plus the user turn to answer.

The messages are `sf_provider._request`'s types (its docstring also gives the dict format that
`generate` and `stream` take, read by `parse_messages`). Here the rules across messages are
checked and the turns built:

- System messages go into the system prompt.
- Image data is checked: base64 data must decode, its media type must be one the Messages API
  takes (`IMAGE_MEDIA_TYPES`) and its first bytes must be of that type; otherwise the CLI would
  send the model a text note in its place, so it is refused. `detail: "low"` is refused.
- An assistant turn with no content (`""`, `[]`, blank text blocks only) holds nothing to send
  (the Messages API refuses empty turns): it is left out, and the user turns around it reach the
  model as one turn.
- Every tool call in the history needs a result, and every result a call (once). A reasoning
  block without a signature cannot be replayed natively: it is sent as text in a `<reasoning>`
  element and a `history-flattened` warning says so.
- The turn to answer must hold something: a last user turn of blank text only is refused, as an
  empty prompt string is.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._request import (
    AssistantMessage,
    Image,
    Message,
    MessagesInput,
    Reasoning,
    SystemMessage,
    Text,
    ToolCall,
    ToolMessage,
    UserMessage,
    parse_messages,
)
from .errors import InvalidMessagesError
from .types import CallWarning

__all__ = [
    "TOOLS_NEEDED",
    "Conversation",
    "MessagesInput",
    "convert_messages",
]

#: Image `detail` values that can be honoured, here and in the OpenAI-format readers (the gateway,
#: LiteLLM, LangChain's `image_url`): Claude has no low-detail mode.
IMAGE_DETAIL = ("auto", "high")
#: Why `detail: "low"` is refused, wherever it is.
NO_LOW_DETAIL = (
    "'low' cannot be honoured: Claude has no low-detail mode and reads an image at the "
    "resolution it is sent; send 'auto' or 'high' or leave it out (to spend fewer tokens, send a "
    "smaller image)"
)
#: Why a request whose messages hold tool calls or results needs tools
#: (`_request.holds_tool_blocks`, `Conversation.has_tool_blocks`): said by the provider and both
#: gateway endpoints.
TOOLS_NEEDED = (
    "the messages hold tool calls or results, and the Messages API refuses those in a request "
    "that defines no tools: send in 'tools' the tools the history calls (with tool_choice "
    "'none' if the model must not call them now)"
)
#: The image media types the Messages API takes, and the first bytes of each (`_image_type`).
IMAGE_MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
_DATA_URL = re.compile(r"^data:(?P<media>[\w.+-]+/[\w.+-]+);base64,(?P<data>.+)$", re.DOTALL)


@dataclass
class Conversation:
    """What a request's messages become: Messages API turns with the app's tool names.

    `history` holds the turns before the one to answer (alternating roles, starting with a user
    turn, ending with an assistant turn); `prompt` is the user turn to answer, as content blocks.
    """

    prompt: list[dict[str, Any]]
    history: list[dict[str, Any]] = field(default_factory=list)
    system: list[str] = field(default_factory=list)
    warnings: list[CallWarning] = field(default_factory=list)

    @property
    def has_tool_blocks(self) -> bool:
        """Whether any turn holds a tool call or a tool result (the Messages API then refuses a
        request that defines no tools)."""
        return any(
            block.get("type") in ("tool_use", "tool_result")
            for turn in [*self.history, {"content": self.prompt}]
            for block in turn["content"]
        )

    @property
    def prompt_text(self) -> str | None:
        """The prompt as plain text when it is exactly one text block, else None."""
        if len(self.prompt) == 1 and self.prompt[0].get("type") == "text":
            return str(self.prompt[0]["text"])
        return None


def _fail(where: str, problem: str) -> InvalidMessagesError:
    return InvalidMessagesError(f"{where}: {problem}")


def _image_block(image: Image, where: str) -> dict[str, Any]:
    detail = image.detail
    if detail == "low":
        raise _fail(where, f"image detail {NO_LOW_DETAIL}")
    if detail is not None and detail not in IMAGE_DETAIL:
        raise _fail(where, f"image detail {detail!r} is not one of 'auto', 'high'")
    if image.data is not None and image.url is not None:
        raise _fail(where, "an image block has 'data' or 'url', not both; keep one")
    if image.url is not None and image.media_type is not None:
        raise _fail(
            where,
            "'media_type' goes with 'data'; an image 'url' carries its own type (a data: URL "
            "names it), so remove 'media_type'",
        )
    if image.data is not None:
        media = image.media_type
        if media is None:
            raise _fail(where, "a base64 image needs 'media_type' (e.g. 'image/png')")
        data = image.data
    elif image.url is not None:
        match = _DATA_URL.match(image.url)
        if match:
            media, data = match["media"], match["data"]
        elif image.url.startswith(("https://", "http://")):
            return {"type": "image", "source": {"type": "url", "url": image.url}}
        else:
            raise _fail(where, "an image url must be a data: URL (base64) or http(s)")
    else:
        raise _fail(where, "an image block needs 'data' + 'media_type' or 'url'")
    _check_image(media, data, where)
    return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}


def _image_type(head: bytes) -> str | None:
    """The media type the first bytes of an image's data show (None: none the API takes)."""
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def _check_image(media: str, data: str, where: str) -> None:
    """Refuse base64 image data the CLI would not send as an image: it would replace it by the
    text "[Image could not be processed ...]" and the model would never see it. Decoded once;
    only the first bytes are looked at for the type."""
    if media not in IMAGE_MEDIA_TYPES:
        raise _fail(
            where,
            f"image media type {media!r} is not one the Messages API takes "
            f"({', '.join(IMAGE_MEDIA_TYPES)}); convert the image to one of them",
        )
    try:
        # Missing padding is unambiguous (and the CLI reads it): added, not refused.
        head = base64.b64decode(data + "=" * (-len(data) % 4), validate=True)[:12]
    except ValueError:  # binascii.Error, or a non-ASCII character
        raise _fail(
            where,
            "the image data is not valid base64 (the standard alphabet A-Z a-z 0-9 + /, "
            "without spaces or line breaks); send the image's bytes base64-encoded",
        ) from None
    found = _image_type(head)
    if found != media:
        seen = f"is {found} data" if found else "is not a JPEG, PNG, GIF or WebP image"
        if not head:
            seen = "is empty"
        raise _fail(
            where,
            f"the image is declared {media!r}, but its data {seen}; send the image's own "
            f"media type (one of {', '.join(IMAGE_MEDIA_TYPES)})",
        )


def _media_blocks(parts: Sequence[Text | Image], where: str) -> list[dict[str, Any]]:
    """Text and image parts (a user turn's, a tool result's content) as API blocks."""
    return [
        {"type": "text", "text": part.text}
        if isinstance(part, Text)
        else _image_block(part, f"{where}, block {i}")
        for i, part in enumerate(parts)
    ]


def _tool_result(
    call_id: str, output: str | list[dict[str, Any]], is_error: bool
) -> dict[str, Any]:
    """A tool result the way the CLI records its own: a success as one text block, an error as
    plain text. History and live conversations then send the API the same request. Content
    blocks (text and images) go as they are."""
    if isinstance(output, list):
        return {"type": "tool_result", "tool_use_id": call_id, "content": output} | (
            {"is_error": True} if is_error else {}
        )
    if is_error:
        return {"type": "tool_result", "tool_use_id": call_id, "content": output, "is_error": True}
    content: str | list[dict[str, Any]] = [{"type": "text", "text": output}] if output else ""
    return {"type": "tool_result", "tool_use_id": call_id, "content": content}


class _Builder:
    def __init__(self) -> None:
        self.turns: list[dict[str, Any]] = []
        self.system: list[str] = []
        self.warnings: list[CallWarning] = []
        self.open_calls: dict[str, str] = {}  # tool call id -> where it was made
        self.seen_calls: set[str] = set()
        self.call_names: dict[str, str] = {}  # tool call id -> the tool it calls

    def add(self, role: str, blocks: list[dict[str, Any]]) -> None:
        if self.turns and self.turns[-1]["role"] == role:
            self.turns[-1]["content"].extend(blocks)
        else:
            self.turns.append({"role": role, "content": blocks})

    def user(self, message: UserMessage, where: str) -> None:
        blocks = _media_blocks(message.parts, where)
        self._close_calls(where)
        self.add("user", blocks)

    def assistant(self, message: AssistantMessage, where: str) -> None:
        self._close_calls(where)
        blocks = []
        for i, part in enumerate(message.parts):
            here = f"{where}, block {i}"
            match part:
                case Text():
                    blocks.append({"type": "text", "text": part.text})
                case Reasoning():
                    blocks.append(self._reasoning(part, here))
                case ToolCall():
                    blocks.append(self._tool_call(part, here))
        if all(_blank(block) for block in blocks):
            # No content: nothing to send (the Messages API refuses empty turns). Left out, the
            # user turns around it join into one, as pydantic-ai's Anthropic model sends them.
            return
        self.add("assistant", blocks)

    def _reasoning(self, part: Reasoning, where: str) -> dict[str, Any]:
        if part.redacted is not None:  # a redacted thinking block: its data goes back as it came
            if not part.redacted:
                raise _fail(where, "a redacted reasoning block needs its data as a string")
            return {"type": "redacted_thinking", "data": part.redacted}
        if part.signature:
            return {"type": "thinking", "thinking": part.text, "signature": part.signature}
        self.warnings.append(
            CallWarning(
                code="history-flattened",
                message=f"{where}: reasoning without a signature was replayed as text",
            )
        )
        return {"type": "text", "text": f"<reasoning>{part.text}</reasoning>"}

    def _tool_call(self, call: ToolCall, where: str) -> dict[str, Any]:
        if not call.id:
            raise _fail(where, "a tool-call needs a string 'tool_call_id'")
        if not call.name:
            raise _fail(where, "a tool-call needs a string 'tool_name'")
        if call.id in self.seen_calls:
            raise _fail(where, f"tool call id {call.id!r} is used twice")
        self.seen_calls.add(call.id)
        self.open_calls[call.id] = where
        self.call_names[call.id] = call.name
        return {"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.input)}

    def tool(self, message: ToolMessage, where: str) -> None:
        blocks = []
        for i, result in enumerate(message.results):
            here = f"{where}, block {i}"
            call_id = result.call_id
            if call_id not in self.open_calls:
                raise _fail(
                    here,
                    f"tool result for {call_id!r} has no matching tool call before it "
                    f"(or that call already has a result)",
                )
            del self.open_calls[call_id]
            tool_name = result.tool_name or self.call_names[call_id]
            if tool_name != self.call_names[call_id]:
                raise _fail(
                    here,
                    f"the tool-result for {call_id!r} names the tool {tool_name!r}, but that call "
                    f"is of {self.call_names[call_id]!r}; fix 'tool_name' or leave it out",
                )
            output: str | list[dict[str, Any]]
            if isinstance(result.output, str):
                output = result.output
            else:
                if not result.output:
                    raise _fail(here, "a tool-result's 'content' is empty; give some blocks")
                output = _media_blocks(result.output, here)
            blocks.append(_tool_result(call_id, output, result.is_error))
        self.add("user", blocks)

    def _close_calls(self, where: str) -> None:
        if self.open_calls:
            missing = ", ".join(sorted(self.open_calls))
            raise _fail(
                where,
                f"the tool call(s) {missing} before it have no result; a 'tool' message with "
                f"their results must come right after the assistant message making them",
            )


def _blank(block: Mapping[str, Any]) -> bool:
    """A text block with nothing but whitespace."""
    return block.get("type") == "text" and not str(block.get("text", "")).strip()


_ROLE = {SystemMessage: "system", UserMessage: "user", AssistantMessage: "assistant",
         ToolMessage: "tool"}  # fmt: skip


def convert_messages(messages: MessagesInput) -> Conversation:
    """Check the messages (typed, or in the dict format `parse_messages` reads) and turn them
    into Messages API turns (see the module docstring)."""
    typed: list[Message] = parse_messages(messages)
    builder = _Builder()
    last_turn: str | None = None  # the role of the last message that is a turn, not system
    for i, message in enumerate(typed):
        role = _ROLE[type(message)]
        where = f"message {i} ({role})"
        last_turn = last_turn if role == "system" else role
        match message:
            case SystemMessage():
                builder.system.append(message.text)
            case UserMessage():
                builder.user(message, where)
            case AssistantMessage():
                builder.assistant(message, where)
            case ToolMessage():
                builder.tool(message, where)
    turns = builder.turns
    if builder.open_calls:
        missing = ", ".join(sorted(builder.open_calls))
        raise InvalidMessagesError(
            f"the last tool call(s) {missing} have no result; add a 'tool' message with their "
            f"results, or drop the calls"
        )
    if not turns or turns[-1]["role"] != "user" or last_turn == "assistant":
        raise InvalidMessagesError(
            f"message {len(typed) - 1}: the conversation must end with a user or tool message "
            f"(the turn to answer)"
        )
    if turns[0]["role"] != "user":
        raise InvalidMessagesError("message 0: the conversation must start with a user message")
    if all(_blank(block) for block in turns[-1]["content"]):
        # The CLI would send "(no content)" in its place; an empty prompt string is refused too.
        raise InvalidMessagesError(
            f"message {len(typed) - 1}: the last user turn is empty (its text is blank and it "
            f"holds no image or tool result); send some text"
        )
    return Conversation(
        prompt=turns[-1]["content"],
        history=turns[:-1],
        system=builder.system,
        warnings=builder.warnings,
    )
