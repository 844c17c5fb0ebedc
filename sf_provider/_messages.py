"""Request messages -> Messages API turns: prior history plus the user turn to answer.

Input format (a list of dicts; a plain string is one user turn):

- `{"role": "system", "content": str}`: joined into the system prompt.
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
breakpoints. The turn to answer must hold something: a last user turn of blank text only is
refused, as an empty prompt string is.

An assistant turn with no content (`""`, `[]`, blank text blocks only) holds nothing to send
(the Messages API refuses empty turns): it is left out, and the user turns around it reach the
model as one turn.

Every tool call in the history needs a result, and every result a call. A reasoning block
without a signature cannot be replayed natively: it is sent as text in a `<reasoning>` element
and a `history-flattened` warning says so.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidMessagesError
from .types import CallWarning

__all__ = [
    "TOOLS_NEEDED",
    "Conversation",
    "MessagesInput",
    "convert_messages",
    "holds_tool_blocks",
]

#: A plain string (one user turn) or a list of `{"role": ..., "content": ...}` dicts.
MessagesInput = str | Sequence[Mapping[str, Any]]

_ROLES = {"system", "user", "assistant", "tool"}

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

#: Image `detail` values that can be honoured, here and in the OpenAI-format readers (the gateway,
#: LiteLLM, LangChain's `image_url`): Claude has no low-detail mode.
IMAGE_DETAIL = ("auto", "high")
#: Why `detail: "low"` is refused, wherever it is.
NO_LOW_DETAIL = (
    "'low' cannot be honoured: Claude has no low-detail mode and reads an image at the "
    "resolution it is sent; send 'auto' or 'high' or leave it out (to spend fewer tokens, send a "
    "smaller image)"
)
#: Why a request whose messages hold tool calls or results needs tools (`holds_tool_blocks`,
#: `Conversation.has_tool_blocks`): said by the provider and both gateway endpoints.
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


def holds_tool_blocks(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether request messages (this module's input format) hold a tool call or a tool result:
    the Messages API refuses them in a request that defines no tools (`Conversation`'s
    `has_tool_blocks` says the same of converted turns)."""
    return any(
        message.get("role") == "tool"
        or (
            isinstance(message.get("content"), list)
            and any(
                isinstance(block, Mapping) and block.get("type") == "tool-call"
                for block in message["content"]
            )
        )
        for message in messages
    )


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


def _text_block(block: Any, where: str) -> dict[str, Any]:
    if not isinstance(block, Mapping):
        raise _fail(where, f"a text block must be a dict, not {type(block).__name__}")
    _check_keys(block, where, _BLOCK_KEYS["text"], "a text block")
    text = block.get("text")
    if not isinstance(text, str):
        raise _fail(where, "a text block needs a string 'text'")
    return {"type": "text", "text": text}


def _image_block(block: Mapping[str, Any], where: str) -> dict[str, Any]:
    _check_keys(block, where, _BLOCK_KEYS["image"], "an image block")
    detail = block.get("detail")
    if detail == "low":
        raise _fail(where, f"image detail {NO_LOW_DETAIL}")
    if detail is not None and detail not in IMAGE_DETAIL:
        raise _fail(where, f"image detail {detail!r} is not one of 'auto', 'high'")
    if "data" in block and "url" in block:
        raise _fail(where, "an image block has 'data' or 'url', not both; keep one")
    if "url" in block and "media_type" in block:
        raise _fail(
            where,
            "'media_type' goes with 'data'; an image 'url' carries its own type (a data: URL "
            "names it), so remove 'media_type'",
        )
    if isinstance(block.get("data"), str):
        media = block.get("media_type")
        if not isinstance(media, str):
            raise _fail(where, "a base64 image needs 'media_type' (e.g. 'image/png')")
        data = str(block["data"])
    elif isinstance(block.get("url"), str):
        url = str(block["url"])
        match = _DATA_URL.match(url)
        if match:
            media, data = match["media"], match["data"]
        elif url.startswith(("https://", "http://")):
            return {"type": "image", "source": {"type": "url", "url": url}}
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


def _media_blocks(content: Any, where: str, what: str) -> list[dict[str, Any]]:
    """Text and image blocks (a user turn's, a tool result's content)."""
    blocks = []
    for i, block in enumerate(_blocks(content, where)):
        here = f"{where}, block {i}"
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text":
            blocks.append(_text_block(block, here))
        elif kind == "image":
            blocks.append(_image_block(block, here))
        else:
            raise _fail(here, f"{what} must be 'text' or 'image', not {kind!r}")
    return blocks


def _tool_output(block: Mapping[str, Any]) -> str:
    output = block.get("output", "")
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)


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

    def user(self, content: Any, where: str) -> None:
        blocks = _media_blocks(content, where, "a user block")
        self._close_calls(where)
        self.add("user", blocks)

    def assistant(self, content: Any, where: str) -> None:
        self._close_calls(where)
        blocks = []
        for i, block in enumerate(_blocks(content, where)):
            here = f"{where}, block {i}"
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind == "text":
                blocks.append(_text_block(block, here))
            elif kind == "reasoning":
                blocks.append(self._reasoning(block, here))
            elif kind == "tool-call":
                blocks.append(self._tool_call(block, here))
            else:
                raise _fail(
                    here,
                    f"an assistant block must be 'text', 'reasoning' or 'tool-call', not {kind!r}",
                )
        if all(_blank(block) for block in blocks):
            # No content: nothing to send (the Messages API refuses empty turns). Left out, the
            # user turns around it join into one, as pydantic-ai's Anthropic model sends them.
            return
        self.add("assistant", blocks)

    def _reasoning(self, block: Mapping[str, Any], where: str) -> dict[str, Any]:
        _check_keys(block, where, _BLOCK_KEYS["reasoning"], "a reasoning block")
        redacted = block.get("redacted")
        if redacted is not None:  # a redacted thinking block: its data goes back as it came
            if not isinstance(redacted, str) or not redacted:
                raise _fail(where, "a redacted reasoning block needs its data as a string")
            return {"type": "redacted_thinking", "data": redacted}
        text = block.get("text")
        if not isinstance(text, str):
            raise _fail(where, "a reasoning block needs a string 'text'")
        signature = block.get("signature")
        if isinstance(signature, str) and signature:
            return {"type": "thinking", "thinking": text, "signature": signature}
        self.warnings.append(
            CallWarning(
                code="history-flattened",
                message=f"{where}: reasoning without a signature was replayed as text",
            )
        )
        return {"type": "text", "text": f"<reasoning>{text}</reasoning>"}

    def _tool_call(self, block: Mapping[str, Any], where: str) -> dict[str, Any]:
        _check_keys(block, where, _BLOCK_KEYS["tool-call"], "a tool-call")
        call_id, name, arguments = (block.get(k) for k in ("tool_call_id", "tool_name", "input"))
        if not isinstance(call_id, str) or not call_id:
            raise _fail(where, "a tool-call needs a string 'tool_call_id'")
        if not isinstance(name, str) or not name:
            raise _fail(where, "a tool-call needs a string 'tool_name'")
        if not isinstance(arguments, Mapping):
            raise _fail(where, "a tool-call needs an object 'input'")
        if call_id in self.seen_calls:
            raise _fail(where, f"tool call id {call_id!r} is used twice")
        self.seen_calls.add(call_id)
        self.open_calls[call_id] = where
        self.call_names[call_id] = name
        return {"type": "tool_use", "id": call_id, "name": name, "input": dict(arguments)}

    def tool(self, content: Any, where: str) -> None:
        blocks = []
        for i, block in enumerate(_blocks(content, where)):
            here = f"{where}, block {i}"
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind != "tool-result":
                raise _fail(here, f"a tool message holds 'tool-result' blocks, not {kind!r}")
            _check_keys(block, here, _BLOCK_KEYS["tool-result"], "a tool-result")
            call_id = block.get("tool_call_id")
            if not isinstance(call_id, str) or call_id not in self.open_calls:
                raise _fail(
                    here,
                    f"tool result for {call_id!r} has no matching tool call before it "
                    f"(or that call already has a result)",
                )
            del self.open_calls[call_id]
            is_error = block.get("is_error", False)
            if not isinstance(is_error, bool):
                raise _fail(
                    here,
                    f"a tool-result's 'is_error' must be true or false (a bool), not {is_error!r}",
                )
            tool_name = block.get("tool_name", self.call_names[call_id])
            if tool_name != self.call_names[call_id]:
                raise _fail(
                    here,
                    f"the tool-result for {call_id!r} names the tool {tool_name!r}, but that call "
                    f"is of {self.call_names[call_id]!r}; fix 'tool_name' or leave it out",
                )
            output: str | list[dict[str, Any]]
            if "content" in block:
                if "output" in block:
                    raise _fail(here, "a tool-result has 'output' or 'content', not both")
                output = _media_blocks(block["content"], here, "a tool-result content block")
                if not output:
                    raise _fail(here, "a tool-result's 'content' is empty; give some blocks")
            else:
                output = _tool_output(block)
            blocks.append(_tool_result(call_id, output, is_error))
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


def convert_messages(messages: MessagesInput) -> Conversation:
    """Validate `messages` and turn them into Messages API turns (see the module docstring)."""
    if isinstance(messages, str):
        if not messages.strip():
            raise InvalidMessagesError("the prompt is empty; send some text")
        return Conversation(prompt=[{"type": "text", "text": messages}])
    if not isinstance(messages, Sequence) or not messages:
        raise InvalidMessagesError(
            "messages must be a non-empty string or list of role/content dicts"
        )
    builder = _Builder()
    last_turn: str | None = None  # the role of the last message that is a turn, not system
    for i, message in enumerate(messages):
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
        last_turn = last_turn if role == "system" else role
        if role == "system":
            blocks = [_text_block(b, where) for b in _blocks(message["content"], where)]
            builder.system.append("\n".join(b["text"] for b in blocks))
        elif role == "user":
            builder.user(message["content"], where)
        elif role == "assistant":
            builder.assistant(message["content"], where)
        else:
            builder.tool(message["content"], where)
    turns = builder.turns
    if builder.open_calls:
        missing = ", ".join(sorted(builder.open_calls))
        raise InvalidMessagesError(
            f"the last tool call(s) {missing} have no result; add a 'tool' message with their "
            f"results, or drop the calls"
        )
    if not turns or turns[-1]["role"] != "user" or last_turn == "assistant":
        raise InvalidMessagesError(
            f"message {len(messages) - 1}: the conversation must end with a user or tool message "
            f"(the turn to answer)"
        )
    if turns[0]["role"] != "user":
        raise InvalidMessagesError("message 0: the conversation must start with a user message")
    if all(_blank(block) for block in turns[-1]["content"]):
        # The CLI would send "(no content)" in its place; an empty prompt string is refused too.
        raise InvalidMessagesError(
            f"message {len(messages) - 1}: the last user turn is empty (its text is blank and it "
            f"holds no image or tool result); send some text"
        )
    return Conversation(
        prompt=turns[-1]["content"],
        history=turns[:-1],
        system=builder.system,
        warnings=builder.warnings,
    )
