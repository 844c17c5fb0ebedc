"""Request messages -> what the CLI receives (a system prompt and one user turn)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidMessagesError
from .types import CallWarning

__all__ = ["Conversation", "MessagesInput", "convert_messages"]

#: A plain string (one user turn) or a list of `{"role": ..., "content": ...}` dicts.
MessagesInput = str | Sequence[Mapping[str, Any]]

_ROLES = {"system", "user", "assistant"}


@dataclass
class Conversation:
    """What a request's messages become for the CLI."""

    prompt: str
    system: list[str] = field(default_factory=list)
    warnings: list[CallWarning] = field(default_factory=list)


def _text_of(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        texts: list[str] = []
        for i, block in enumerate(content):
            if isinstance(block, str):
                texts.append(block)
            elif isinstance(block, Mapping) and block.get("type") == "text":
                texts.append(str(block.get("text", "")))
            else:
                kind = block.get("type") if isinstance(block, Mapping) else type(block).__name__
                raise InvalidMessagesError(
                    f"{where}, block {i}: content of type {kind!r} is not supported yet; "
                    f"send text blocks (or a string)"
                )
        return "\n".join(texts)
    raise InvalidMessagesError(
        f"{where}: content must be a string or a list of blocks, got {type(content).__name__}"
    )


def convert_messages(messages: MessagesInput) -> Conversation:
    """Validate `messages` and turn them into a prompt (and system text).

    A conversation with prior turns is replayed as a labelled transcript in one user turn, and a
    `history-flattened` warning says so.
    """
    if isinstance(messages, str):
        if not messages.strip():
            raise InvalidMessagesError("the prompt is empty; send some text")
        return Conversation(prompt=messages)
    if not isinstance(messages, Sequence) or not messages:
        raise InvalidMessagesError(
            "messages must be a non-empty string or list of role/content dicts"
        )
    system: list[str] = []
    turns: list[tuple[str, str]] = []
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
        text = _text_of(message["content"], f"message {i} ({role})")
        if role == "system":
            system.append(text)
        else:
            turns.append((str(role), text))
    if not turns or turns[-1][0] != "user":
        where = f"message {len(messages) - 1}" if turns else "messages"
        raise InvalidMessagesError(
            f"{where}: the last non-system message must come from the user (role 'user')"
        )
    if len(turns) == 1:
        return Conversation(prompt=turns[0][1], system=system)
    transcript = "\n\n".join(f"[{role}]\n{text}" for role, text in turns[:-1])
    prompt = f"Conversation so far:\n\n{transcript}\n\n[user]\n{turns[-1][1]}"
    warning = CallWarning(
        code="history-flattened",
        message=f"{len(turns) - 1} earlier turn(s) were replayed as text in one user message",
    )
    return Conversation(prompt=prompt, system=system, warnings=[warning])
