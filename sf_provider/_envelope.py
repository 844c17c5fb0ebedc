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
JSON inside prose, a list with one item that is not a call.

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

__all__ = ["EnvelopeCall", "ParsedEnvelope", "could_be_envelope", "parse_envelope"]

_FENCE = re.compile(r"^```[a-zA-Z0-9_-]*[ \t]*\n(?P<body>.*)\n```$", re.DOTALL)
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
        # Some models double-encode the arguments.
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
    if body is None:
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
