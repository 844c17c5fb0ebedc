"""Prior turns handed to the CLI natively: a session transcript it resumes from.

The CLI replays a resumed session to the API as native content blocks. The transcript holds the
history up to the last assistant turn; the turn to answer (user text, or the tool results the
application produced) is sent as the prompt, and `resume_session_at` pins the resume point to the
transcript's last entry, so the CLI neither repairs the pending tool calls nor inserts a reply of
its own. The request log then shows the app's `tool_use` / `tool_result` blocks with their ids.

`TurnRecorder` goes the other way: it records the turns a live CLI process adds to its
conversation during a query, in the same form, so that the next request's history can be
compared with what the process holds (continuation on a live process, ADR 0004).
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from claude_agent_sdk import (
    AssistantMessage,
    ConversationResetMessage,
    StreamEvent,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
    project_key_for_directory,
)

from ._bridge import app_tool_name, bridge_tool_name

__all__ = ["TurnRecorder", "held_prompt", "same_turns", "write_transcript"]

#: The transcript's model when the query's model is not known (the CLI's default).
_UNKNOWN_MODEL = "history"
#: Images of a prompt the CLI surely passes on unchanged (read in CLI 2.1.332): it scales an
#: image down to its model's limits, never below 1568 px a side nor 1568 image tokens (tiles
#: of 28x28 px: 1568 x 720 px is at most 1512 of them), and recompresses one over 5 MiB of
#: base64.
_KEPT_SIDE = 1568
_KEPT_PIXELS = 1568 * 720
_KEPT_BASE64 = 5 * 1024 * 1024


def _api_blocks(blocks: list[dict[str, Any]], bridge: str) -> list[dict[str, Any]]:
    named = []
    for block in blocks:
        if block.get("type") == "tool_use":
            block = {**block, "name": bridge_tool_name(bridge, str(block["name"]))}
        named.append(block)
    return named


def write_transcript(
    config_dir: Path,
    cwd: str,
    history: list[dict[str, Any]],
    *,
    bridge: str,
    model: str | None = None,
) -> tuple[str, str]:
    """Write `history` as a session of the CLI; return (session id, uuid of the last entry).

    Assistant turns are recorded as answers of `model`, the query's model: the CLI replays
    thinking blocks only from turns of the model it runs (their signatures are the model's).
    """
    session_id = str(uuid.uuid4())
    project = config_dir / "projects" / project_key_for_directory(cwd)
    project.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    parent: str | None = None
    lines = []
    for index, turn in enumerate(history):
        entry_id = str(uuid.uuid4())
        message: dict[str, Any] = {
            "role": turn["role"],
            "content": _api_blocks(turn["content"], bridge),
        }
        if turn["role"] == "assistant":
            message |= {
                "id": f"msg_history_{index}",
                "type": "message",
                "model": model or _UNKNOWN_MODEL,
                "stop_reason": "tool_use"
                if any(b.get("type") == "tool_use" for b in turn["content"])
                else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 0, "output_tokens": 0},
            }
        lines.append(
            json.dumps(
                {
                    "parentUuid": parent,
                    "isSidechain": False,
                    "type": turn["role"],
                    "message": message,
                    "uuid": entry_id,
                    "timestamp": now,
                    "userType": "external",
                    "cwd": cwd,
                    "sessionId": session_id,
                },
                # Escaped, as the SDK writes a prompt: text may hold half an emoji (a lone
                # surrogate, from a client that cuts text by UTF-16 units), which UTF-8 cannot
                # encode; the CLI reads the escape as it reads it in a prompt.
            )
        )
        parent = entry_id
    (project / f"{session_id}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert parent is not None
    return session_id, parent


def held_prompt(prompt: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The user turn a live process holds after it was sent `prompt`, as far as known.

    The CLI scales down (and notes the original size of) a large image it receives in a user
    message, but replays a history's images as written: a continued conversation would then
    send the model another image than the fresh path (measured: 3000x2500 continued as
    2000x1667 plus a note, replayed at 3000x2500). Such a turn is held as unknown, so the
    conversation is never continued (the process can still be emptied for a new one).
    """
    if any(block.get("type") == "image" and not _kept_as_sent(block) for block in prompt):
        return [{"type": "unrecorded", "reason": "an image the CLI may have scaled"}]
    return prompt


def _kept_as_sent(image: dict[str, Any]) -> bool:
    """Whether the CLI surely passes this image block on as it is: a URL (measured), or a
    base64 image small enough."""
    source = image.get("source") or {}
    if source.get("type") == "url":
        return True
    data = source.get("data")
    if source.get("type") != "base64" or not isinstance(data, str) or len(data) > _KEPT_BASE64:
        return False
    try:
        size = _image_size(base64.b64decode(data))
    except (binascii.Error, ValueError, struct.error):
        return False
    if size is None:
        return False
    width, height = size
    return max(width, height) <= _KEPT_SIDE and width * height <= _KEPT_PIXELS


def _image_size(raw: bytes) -> tuple[int, int] | None:
    """Width and height of a PNG, GIF, JPEG or WebP image (None: not one, or not readable)."""
    if raw.startswith(b"\x89PNG\r\n\x1a\n"):
        width, height = struct.unpack(">II", raw[16:24])
        return width, height
    if raw.startswith((b"GIF87a", b"GIF89a")):
        width, height = struct.unpack("<HH", raw[6:10])
        return width, height
    if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
        chunk = raw[12:16]
        if chunk == b"VP8X":
            width, height = raw[24:27], raw[27:30]
            return 1 + int.from_bytes(width, "little"), 1 + int.from_bytes(height, "little")
        if chunk == b"VP8 ":
            width, height = struct.unpack("<HH", raw[26:30])
            return width & 0x3FFF, height & 0x3FFF
        if chunk == b"VP8L":
            bits = int.from_bytes(raw[21:25], "little")
            return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
        return None
    if raw.startswith(b"\xff\xd8"):
        at = 2
        while at + 9 <= len(raw) and raw[at] == 0xFF:
            marker, length = raw[at + 1], int.from_bytes(raw[at + 2 : at + 4], "big")
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a frame header
                height, width = struct.unpack(">HH", raw[at + 5 : at + 9])
                return width, height
            at += 2 + length
    return None


def same_turns(held: object, history: object) -> bool:
    """Whether a conversation a process holds is exactly `history`, as JSON: Python's `==`
    finds `True == 1`, `1.0 == 1` and dicts in another key order equal, but the API request
    (and the tokens the model reads) would differ, so those never continue a conversation."""
    pending = [(held, history)]  # a loop, not recursion: tool input may nest deeply
    while pending:
        a, b = pending.pop()
        if type(a) is not type(b):
            return False
        if isinstance(a, dict):
            assert isinstance(b, dict)
            if list(a) != list(b):
                return False
            pending += [(a[key], b[key]) for key in a]
        elif isinstance(a, list):
            assert isinstance(b, list)
            if len(a) != len(b):
                return False
            pending += zip(a, b, strict=True)
        elif a != b:
            return False
    return True


class TurnRecorder:
    """The turns a CLI process adds to its conversation during one query, as Messages API turns
    with the app's tool names (the form `convert_messages` gives a request's history).

    Assistant blocks (text, signed thinking, tool calls) and the tool results the CLI ran in
    executor mode are recorded as the CLI holds them. Anything else makes the record
    `complete=False`: such a conversation is never continued.
    """

    def __init__(self, bridge: str) -> None:
        self._bridge = bridge
        self.turns: list[dict[str, Any]] = []
        self.complete = True
        # Redacted thinking blocks seen in the stream, not yet recorded: the SDK drops them
        # from the AssistantMessage, which then arrives with no content.
        self._redacted: list[str] = []

    def add(self, message: object) -> None:
        """Take one SDK message into account (messages that add no turn are ignored).

        A compaction or a reset replaces the conversation with something the app's history
        does not hold: the record is then incomplete.
        """
        if isinstance(message, ConversationResetMessage) or (
            isinstance(message, SystemMessage) and message.subtype == "compact_boundary"
        ):
            self.complete = False
        elif isinstance(message, StreamEvent) and message.parent_tool_use_id is None:
            block = message.event.get("content_block")
            if (
                message.event.get("type") == "content_block_start"
                and isinstance(block, dict)
                and block.get("type") == "redacted_thinking"
            ):
                self._redacted.append(str(block.get("data", "")))
        elif isinstance(message, AssistantMessage) and message.parent_tool_use_id is None:
            if message.error is not None or message.model == "<synthetic>":
                self.complete = False  # an API failure: the query fails anyway
                return
            if not message.content and self._redacted:
                block = {"type": "redacted_thinking", "data": self._redacted.pop(0)}
                self._append("assistant", [block])
                return
            self._append("assistant", [self._assistant_block(b) for b in message.content])
        elif isinstance(message, UserMessage) and message.parent_tool_use_id is None:
            content = message.content
            if isinstance(content, str):
                self._append("user", [{"type": "text", "text": content}])
                return
            self._append("user", [self._user_block(b) for b in content])

    def _assistant_block(self, block: object) -> dict[str, Any]:
        match block:
            case TextBlock():
                return {"type": "text", "text": block.text}
            case ThinkingBlock() if block.signature:
                signature = block.signature
                return {"type": "thinking", "thinking": block.thinking, "signature": signature}
            case ToolUseBlock():
                name = app_tool_name(self._bridge, block.name)
                return {"type": "tool_use", "id": block.id, "name": name, "input": block.input}
            case _:
                self.complete = False
                return {"type": "unrecorded"}

    def _user_block(self, block: object) -> dict[str, Any]:
        match block:
            case ToolResultBlock():
                result: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": block.tool_use_id,
                    "content": "" if block.content is None else block.content,
                }
                if block.is_error:
                    result["is_error"] = True
                return result
            case TextBlock():
                return {"type": "text", "text": block.text}
            case _:
                self.complete = False
                return {"type": "unrecorded"}

    def _append(self, role: str, blocks: list[dict[str, Any]]) -> None:
        # The SDK yields one message per content block; the API turn holds them all.
        if self.turns and self.turns[-1]["role"] == role:
            self.turns[-1]["content"].extend(blocks)
        else:
            self.turns.append({"role": role, "content": blocks})
