"""The legacy JSON envelope: tool calls written as JSON in the reply text.

Older prompts (and some models without native tools) answer with a JSON object instead of
`tool_use` blocks. Accepted shapes, alone in the text (surrounding whitespace and one Markdown
code fence tolerated):

- `{"type": "tool-calls", "calls": [{"toolName": "...", "input": {...}}, ...]}`
- `{"type": "text", "text": "..."}`
- a single call: `{"tool" | "toolName": "...", "input" | "parameters" | "arguments": {...}}`
- a list: `{"tool_calls": [<single calls>]}`

Text that merely contains JSON in prose is never an envelope.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["EnvelopeCall", "ParsedEnvelope", "could_be_envelope", "parse_envelope"]

_FENCE = re.compile(r"^```[a-zA-Z0-9_-]*[ \t]*\n(?P<body>.*)\n```$", re.DOTALL)
_NAME_KEYS = ("toolName", "tool", "tool_name", "name")
_INPUT_KEYS = ("input", "parameters", "arguments", "args")


@dataclass(frozen=True)
class EnvelopeCall:
    """One call found in an envelope; `problem` says why it cannot be a valid call, if so."""

    tool_name: str
    input: dict[str, Any]
    problem: str | None = None


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
    if not isinstance(raw, Mapping):
        return None
    name = next((raw[k] for k in _NAME_KEYS if k in raw), None)
    if not isinstance(name, str) or not name:
        return None
    arguments: Any = next((raw[k] for k in _INPUT_KEYS if k in raw), {})
    if isinstance(arguments, str):
        # Some models double-encode the arguments.
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return EnvelopeCall(name, {}, problem="its arguments are a string that is not JSON")
    if not isinstance(arguments, Mapping):
        return EnvelopeCall(
            name, {}, problem=f"its arguments must be an object, not {type(arguments).__name__}"
        )
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
    kind = data.get("type")
    if kind == "text" and isinstance(data.get("text"), str) and set(data) <= {"type", "text"}:
        return ParsedEnvelope(text=data["text"])
    if kind == "tool-calls":
        calls = _call_list(data.get("calls"))
        return ParsedEnvelope(calls=calls) if calls else None
    if "tool_calls" in data and set(data) <= {"tool_calls", "type"}:
        calls = _call_list(data["tool_calls"])
        return ParsedEnvelope(calls=calls) if calls else None
    allowed = {*_NAME_KEYS, *_INPUT_KEYS, "type", "id"}
    if set(data) <= allowed:
        call = _single_call(data)
        if call is not None:
            return ParsedEnvelope(calls=[call])
    return None
