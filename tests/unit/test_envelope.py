"""The legacy JSON envelope parser and the single-turn text holding built on it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import sf_provider._envelope as envelope_module
from sf_provider._envelope import (
    MAX_DEPTH,
    EnvelopeCall,
    HeldText,
    ParsedEnvelope,
    could_be_envelope,
    parse_envelope,
)
from sf_provider._mapping import PartMapper, ResultCollector
from sf_provider.tools import FunctionTool

CALL = {"toolName": "get_weather", "input": {"city": "Paris"}}


@pytest.mark.parametrize(
    "payload",
    [
        {"type": "tool-calls", "calls": [CALL]},
        {"tool": "get_weather", "input": {"city": "Paris"}},
        {"toolName": "get_weather", "parameters": {"city": "Paris"}},
        {"tool": "get_weather", "arguments": {"city": "Paris"}},
        {"tool_calls": [{"tool": "get_weather", "arguments": {"city": "Paris"}}]},
    ],
    ids=["tool-calls", "tool+input", "toolName+parameters", "tool+arguments", "tool_calls-list"],
)
@pytest.mark.parametrize("wrap", ["{}", "  \n{}\n ", "```json\n{}\n```", "```\n{}\n```"])
def test_every_call_shape_is_recognised_bare_and_fenced(payload: dict[str, Any], wrap: str) -> None:
    parsed = parse_envelope(wrap.replace("{}", json.dumps(payload)))
    assert parsed == ParsedEnvelope(calls=[EnvelopeCall("get_weather", {"city": "Paris"})])


def test_a_text_envelope_is_unwrapped() -> None:
    assert parse_envelope('{"type": "text", "text": "hello"}') == ParsedEnvelope(text="hello")


def test_parallel_calls_keep_their_order() -> None:
    second = {"toolName": "get_time", "input": {}}
    parsed = parse_envelope(json.dumps({"type": "tool-calls", "calls": [CALL, second]}))
    assert parsed is not None
    assert [c.tool_name for c in parsed.calls] == ["get_weather", "get_time"]


def test_double_encoded_arguments_are_decoded() -> None:
    parsed = parse_envelope(json.dumps({"tool": "x", "arguments": json.dumps({"a": 1})}))
    assert parsed == ParsedEnvelope(calls=[EnvelopeCall("x", {"a": 1})])


def test_a_documented_call_naming_any_tool_is_a_call() -> None:
    # Whether the tool exists is for the mapper to judge (an invalid call), not the parser.
    parsed = parse_envelope(json.dumps({"toolName": "launch_rocket", "input": {}}))
    assert parsed == ParsedEnvelope(calls=[EnvelopeCall("launch_rocket", {})])


@pytest.mark.parametrize(
    "payload",
    [
        {"name": "Paris"},
        {"id": 7, "name": "Widget"},
        {"tool": "hammer"},
        {"toolName": "hammer"},
        {"name": "get_weather", "arguments": {"city": "Paris"}},
        {"tool_name": "get_weather", "input": {"city": "Paris"}},
        {"tool": "get_weather", "args": {"city": "Paris"}},
        {"tool": "get_weather", "input": {}, "id": "call_1"},
        {"tool": "get_weather", "toolName": "get_weather", "input": {}},
        {"tool": "get_weather", "input": {}, "arguments": {}},
        {"type": "tool-call", "tool": "get_weather", "input": {}},
        {"tool": "get_weather", "input": [1, 2]},
        {"tool": "get_weather", "input": "Paris"},
        {"tool": "get_weather", "input": None},
        {"tool": 5, "input": {}},
        {"tool": "", "input": {}},
        {"type": "tool-calls", "calls": [{"name": "get_weather", "arguments": {}}]},
        {"type": "tool-calls", "calls": [CALL], "reason": "weather"},
        {"type": "tool-calls", "tool_calls": [CALL]},
        {"tool_calls": [CALL, {"name": "Paris"}]},
        {"tool_calls": [CALL], "type": "tool-calls"},
        {"tool_calls": []},
        {"type": "text", "text": "hi", "lang": "en"},
    ],
    ids=lambda payload: json.dumps(payload),
)
def test_json_in_no_documented_shape_is_text(payload: dict[str, Any]) -> None:
    assert parse_envelope(json.dumps(payload)) is None


@pytest.mark.parametrize(
    "text",
    [
        'You would send {"tool": "get_weather", "input": {"city": "Paris"}} to it.',
        'Here:\n```json\n{"tool": "get_weather", "input": {}}\n```\nthat is all.',
        '{"tool": "get_weather", "input": {}',  # truncated
        '{"city": "Paris"}',  # an object, but not a call
        '{"tool": "get_weather", "input": {}, "confidence": 0.9}',  # extra keys: not a call
        '{"type": "tool-calls", "calls": []}',
        '{"type": "text", "text": 5}',
        "[1, 2, 3]",
        "plain text",
        "",
    ],
)
def test_text_that_is_not_exactly_an_envelope_is_not_one(text: str) -> None:
    assert parse_envelope(text) is None


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [("", True), ("  ", True), ("{", True), ('  {"to', True), ("`", True), ("``", True),
     ("```js", True), ("Hello", False), ("  Sure, {", False), ("`x", False), ("[", False)],
)  # fmt: skip
def test_could_be_envelope_holds_back_only_what_starts_like_one(
    prefix: str, expected: bool
) -> None:
    assert could_be_envelope(prefix) is expected


@given(st.text())
def test_the_parser_never_raises_on_arbitrary_text(text: str) -> None:
    parsed = parse_envelope(text)
    assert parsed is None or isinstance(parsed, ParsedEnvelope)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(st.dictionaries(st.sampled_from(["type", "tool", "toolName", "input", "parameters",
                                        "arguments", "calls", "tool_calls", "text", "name"]),
                       _json, max_size=4))  # fmt: skip
def test_the_parser_never_raises_on_arbitrary_envelope_like_json(data: dict[str, Any]) -> None:
    parsed = parse_envelope(json.dumps(data))
    if parsed is not None:
        assert all(isinstance(c.input, dict) for c in parsed.calls)


def _events(text: str, chunk: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"id": "m1"}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ]
    for i in range(0, len(text), chunk):
        events.append({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "text_delta", "text": text[i : i + chunk]}})  # fmt: skip
    events.append({"type": "content_block_stop", "index": 0})
    return events


def _map(text: str, chunk: int = 3) -> tuple[PartMapper, list[Any]]:
    from claude_agent_sdk import StreamEvent

    tools = {"get_weather": FunctionTool(name="get_weather")}
    mapper = PartMapper("sf", provider_executed=False, tools=tools, hold_envelopes=True)
    parts = []
    for event in _events(text, chunk):
        parts += mapper.map(StreamEvent(uuid="u", session_id="s", event=event))
    return mapper, parts


def test_plain_text_is_released_as_soon_as_it_cannot_be_an_envelope() -> None:
    _, parts = _map("Hello there, friend", chunk=3)
    assert [p.type for p in parts[:2]] == ["text-start", "text-delta"]
    assert parts[1].delta == "Hel"
    assert len([p for p in parts if p.type == "text-delta"]) > 3


def test_an_envelope_is_held_until_the_turn_ends_then_becomes_calls() -> None:
    mapper, parts = _map(json.dumps(CALL), chunk=5)
    assert parts == []
    flushed = mapper.flush()
    assert [(p.type, p.tool_name, p.input) for p in flushed] == [
        ("tool-call", "get_weather", {"city": "Paris"})
    ]
    # Held, then handed out as calls: no text, one call, and the turn ends as tool-calls.
    collector = ResultCollector()
    for part in flushed:
        collector.add(part)
    assert collector.result().all_text == "" and len(collector.result().tool_calls) == 1


def test_json_that_turns_out_not_to_be_an_envelope_is_released_whole_at_block_end() -> None:
    _, parts = _map('{"city": "Paris"} is what I found', chunk=4)
    text = "".join(p.delta for p in parts if p.type == "text-delta")
    assert text == '{"city": "Paris"} is what I found'
    assert parts[-1].type == "text-end"


# -- hostile replies: deep nesting, long held text


def _nested(depth: int, opener: str = '{"a": ', closer: str = "}") -> str:
    return opener * depth + "1" + closer * depth


@pytest.mark.parametrize(
    "text",
    [
        _nested(5000),
        _nested(5000, "[", "]"),
        '{"tool": "get_weather", "input": ' + _nested(5000) + "}",
        json.dumps({"type": "tool-calls", "calls": [CALL]})[:-1] + ', "x": ' + _nested(5000) + "}",
        "```json\n" + '{"tool": "get_weather", "input": ' + _nested(MAX_DEPTH) + "}\n```",
    ],
    ids=["objects", "arrays", "call-shaped", "tool-calls-shaped", "fenced-one-over"],
)
def test_json_nested_deeper_than_the_limit_is_not_an_envelope(text: str) -> None:
    assert parse_envelope(text) is None  # no RecursionError: the depth is counted, not parsed


def test_an_envelope_nested_exactly_to_the_limit_is_parsed() -> None:
    arguments = json.loads(_nested(MAX_DEPTH - 1))  # in the envelope: MAX_DEPTH levels
    parsed = parse_envelope(json.dumps({"tool": "get_weather", "input": arguments}))
    assert parsed == ParsedEnvelope(calls=[EnvelopeCall("get_weather", arguments)])
    one_over = {"tool": "get_weather", "input": json.loads(_nested(MAX_DEPTH))}
    assert parse_envelope(json.dumps(one_over)) is None


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    arguments = {"pattern": "[" * 5000 + '{\\"' + "{" * 5000, "quote": 'a "quoted" }'}
    parsed = parse_envelope(json.dumps({"tool": "grep", "input": arguments}))
    assert parsed == ParsedEnvelope(calls=[EnvelopeCall("grep", arguments)])


@pytest.mark.parametrize("text", ['{"a": "' + '\\"[' * 5000, '{"a": "unterminated [[[[ }'])
def test_an_unterminated_string_is_not_an_envelope(text: str) -> None:
    assert parse_envelope(text) is None


@given(st.lists(st.text(alphabet=" \n\t{}`[a", max_size=4), max_size=8))
def test_holding_decides_like_could_be_envelope_on_everything_so_far(deltas: list[str]) -> None:
    held = HeldText()
    for i, delta in enumerate(deltas):
        assert held.add(delta) is could_be_envelope("".join(deltas[: i + 1]))
    assert held.text() == "".join(deltas)


def test_a_long_reply_starting_with_a_brace_is_held_with_work_linear_in_its_length(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each delta costs work in its own length: the text held so far is not re-joined or
    re-checked per delta (that was quadratic: 26.9 s of event-loop CPU for 400 K chars)."""
    checked: list[int] = []  # characters handed to each envelope check
    parsed: list[int] = []
    could_be, parse = envelope_module.could_be_envelope, envelope_module.parse_envelope
    monkeypatch.setattr(
        envelope_module, "could_be_envelope", lambda p: checked.append(len(p)) or could_be(p)
    )
    # `_mapping` imports the parser when single-turn mode holds a block: it finds this one.
    monkeypatch.setattr(
        envelope_module, "parse_envelope", lambda t: parsed.append(len(t)) or parse(t)
    )
    answer = json.dumps({"rows": [{"id": i, "note": "x" * 40} for i in range(8000)]})  # ~440 K

    _, parts = _map(answer, chunk=8)

    deltas = -(-len(answer) // 8)
    assert len(checked) == deltas and max(checked) <= 3
    assert parsed == [len(answer)], "parsed once, when the text block ended"
    assert "".join(p.delta for p in parts if p.type == "text-delta") == answer


@pytest.mark.parametrize("key", ["input", "arguments", "parameters"])
def test_double_encoded_arguments_nested_past_the_limit_are_text_not_a_recursion_error(
    key: str,
) -> None:
    deep = '{"a": ' * 5000 + "1" + "}" * 5000
    assert parse_envelope(json.dumps({"tool": "get_weather", key: deep})) is None
    within = '{"a": ' * (MAX_DEPTH - 1) + "1" + "}" * (MAX_DEPTH - 1)
    parsed = parse_envelope(json.dumps({"tool": "get_weather", key: within}))
    assert parsed is not None and parsed.calls[0].tool_name == "get_weather"
