"""The legacy JSON envelope: tool calls written as JSON in the reply text.

Older prompts (and some models without native tools) answer with a JSON object instead of
`tool_use` blocks. Only these shapes are envelopes, alone in the text (surrounding whitespace
and one Markdown code fence tolerated), with exactly the keys shown:

- `{"type": "tool-calls", "calls": [<call>, ...]}`
- `{"type": "text", "text": "..."}`
- `{"tool_calls": [<call>, ...]}`
- a single `<call>`: `{"tool" | "toolName": "<name>", "input" | "parameters" | "arguments": {...}}`
  (one name key and one arguments key; the arguments an object, or a string holding one)

Anything else is the text it is: a plain JSON answer (`{"name": "Paris"}`,
`{"id": 7, "name": "Widget"}`, `{"tool": "hammer"}` without arguments, a call with extra keys),
JSON inside prose, a list with one item that is not a call, and JSON nested deeper than
`MAX_DEPTH`, double-encoded arguments included (it is never parsed: a hostile reply cannot make
the parser recurse out of the stack).

A call in a documented shape is the model's declared intent to call a tool, so it stays a call
even when it names a tool the request does not expose: it comes back as an invalid call whose
reason names the exposed tools (`PartMapper`), exactly like a native `tool_use` block naming an
unknown tool, so an agent framework can tell the model and let it try again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MAX_DEPTH",
    "EnvelopeCall",
    "HeldText",
    "ParsedEnvelope",
    "could_be_envelope",
    "parse_envelope",
]

#: How deeply an envelope's JSON may nest (objects and arrays, the envelope itself included).
#: Deeper text is not parsed, so it is text; the calls of real envelopes nest a few levels.
MAX_DEPTH = 200

_FENCE = re.compile(r"^```[a-zA-Z0-9_-]*[ \t]*\n(?P<body>.*)\n```$", re.DOTALL)
# Outside a JSON string, the characters that open or close one; inside, the rest of it
# (possessive, so an unterminated string costs one linear scan, never backtracking).
_STRUCTURE = re.compile(r'[\[\]{}"]')
_STRING_REST = re.compile(r'(?:[^"\\]++|\\.)*+"', re.DOTALL)
_NAME_KEYS = frozenset({"toolName", "tool"})
_INPUT_KEYS = frozenset({"input", "parameters", "arguments"})


@dataclass(frozen=True)
class EnvelopeCall:
    """One call found in an envelope."""

    tool_name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class ParsedEnvelope:
    """What an envelope held: tool calls, or text (the `{"type": "text"}` shape)."""

    calls: list[EnvelopeCall] = field(default_factory=list)
    text: str | None = None


def could_be_envelope(prefix: str) -> bool:
    """True while `prefix` (the start of a reply) may still turn out to be an envelope.

    Only a reply whose first non-blank character opens a JSON object or a code fence qualifies;
    everything else can be shown as it arrives.
    """
    stripped = prefix.lstrip()
    if not stripped:
        return True
    if stripped[0] == "{":
        return True
    if stripped.startswith("```"):
        return True
    return "```".startswith(stripped)


class HeldText:
    """A reply held back while it may be an envelope, at a cost linear in its length.

    The deltas are kept as they arrive and joined once, when the reply is decided. Whether it
    may still be an envelope depends only on its first three non-blank characters, which are
    kept apart, so a delta costs work in its own length, never in the length held so far.
    """

    __slots__ = ("_chunks", "_lead")

    def __init__(self) -> None:
        self._chunks: list[str] = []
        self._lead = ""  # the reply's first non-blank characters, at most three

    def add(self, delta: str) -> bool:
        """Hold `delta`; True while the reply so far may still be an envelope."""
        self._chunks.append(delta)
        if len(self._lead) < 3:
            rest = delta if self._lead else delta.lstrip()
            self._lead += rest[: 3 - len(self._lead)]
        return could_be_envelope(self._lead)

    def text(self) -> str:
        """Everything held so far."""
        if len(self._chunks) > 1:
            self._chunks = ["".join(self._chunks)]
        return self._chunks[0] if self._chunks else ""


def _deeper_than(body: str, limit: int) -> bool:
    """Whether the JSON text `body` nests objects and arrays deeper than `limit`.

    One left-to-right scan, without recursion: brackets inside strings do not count. Text that
    is not JSON gets some answer; `json.loads` rejects it afterwards anyway.
    """
    depth, pos = 0, 0
    while (found := _STRUCTURE.search(body, pos)) is not None:
        char, pos = found.group(), found.end()
        if char == '"':
            rest = _STRING_REST.match(body, pos)
            if rest is None:
                return False  # an unterminated string: not JSON
            pos = rest.end()
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def _unwrap(text: str) -> str | None:
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group("body").strip()
    return body if body.startswith("{") and body.endswith("}") else None


def _single_call(raw: Any) -> EnvelopeCall | None:
    """The call `raw` is, when it has exactly one name key and one arguments key."""
    if not isinstance(raw, Mapping):
        return None
    name_keys, input_keys = _NAME_KEYS.intersection(raw), _INPUT_KEYS.intersection(raw)
    if len(name_keys) != 1 or len(input_keys) != 1 or len(raw) != 2:
        return None
    name, arguments = raw[next(iter(name_keys))], raw[next(iter(input_keys))]
    if not isinstance(name, str) or not name:
        return None
    if isinstance(arguments, str):
        # Some models double-encode the arguments: a string nested past the limit is text too.
        if _deeper_than(arguments, MAX_DEPTH):
            return None
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(arguments, Mapping):
        return None
    return EnvelopeCall(name, dict(arguments))


def _call_list(raw: Any) -> list[EnvelopeCall] | None:
    if not isinstance(raw, list) or not raw:
        return None
    calls = [_single_call(item) for item in raw]
    if any(call is None for call in calls):
        return None
    return [call for call in calls if call is not None]


def parse_envelope(text: str) -> ParsedEnvelope | None:
    """The envelope `text` is, or None when it is not one (plain text, prose with JSON, ...)."""
    body = _unwrap(text)
    if body is None or _deeper_than(body, MAX_DEPTH):
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, Mapping):
        return None
    keys = set(data)
    if keys == {"type", "text"} and data["type"] == "text" and isinstance(data["text"], str):
        return ParsedEnvelope(text=data["text"])
    if keys == {"type", "calls"} and data["type"] == "tool-calls":
        calls = _call_list(data["calls"])
    elif keys == {"tool_calls"}:
        calls = _call_list(data["tool_calls"])
    else:
        call = _single_call(data)
        calls = None if call is None else [call]
    return ParsedEnvelope(calls=calls) if calls else None
