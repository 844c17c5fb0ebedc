"""`call_each_tool`, the scripted model of `sf-provider gateway --offline`, and `arguments_for`,
the arguments it makes from a tool's schema: pure functions of a recorded request."""

from __future__ import annotations

from typing import Any

import pytest

from sf_provider.testing import RecordedRequest, arguments_for, call_each_tool

WEATHER = {
    "name": "mcp__sf__get_weather",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
TIME = {"name": "mcp__sf__get_time", "input_schema": {"type": "object", "properties": {}}}


def request(
    *messages: dict[str, Any], tools: Any = (WEATHER, TIME), **body: Any
) -> RecordedRequest:
    return RecordedRequest(
        "POST",
        "/v1/messages",
        {},
        {"messages": list(messages), "tools": list(tools), **body},
    )


USER = {"role": "user", "content": "Weather and time in Paris?"}


def calls(request: RecordedRequest) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls of its reply (none for a text answer)."""
    content = call_each_tool(request).content
    return [(b["name"], b["input"]) for b in content if b["type"] == "tool_use"]


def test_it_calls_every_offered_tool_at_once_with_arguments_from_its_schema() -> None:
    assert calls(request(USER)) == [
        ("mcp__sf__get_time", {}),
        ("mcp__sf__get_weather", {"city": "example"}),
    ], "in name order"


def test_then_it_answers_quoting_the_results_in_the_order_of_the_calls() -> None:
    turn = {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "a", "name": "mcp__sf__get_weather", "input": {}},
            {"type": "tool_use", "id": "b", "name": "mcp__sf__get_time", "input": {}},
        ],
    }
    results = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "b", "content": "noon"},
            {
                "type": "tool_result",
                "tool_use_id": "a",
                "content": [
                    {"type": "text", "text": "sunny\n<system-reminder>x</system-reminder>"}
                ],
            },
        ],
    }
    [block] = call_each_tool(request(USER, turn, results)).content
    assert block == {
        "type": "text",
        "text": "Offline model: get_weather returned 'sunny'; get_time returned 'noon'.",
    }


def test_without_tools_it_repeats_what_the_user_said_last() -> None:
    later = {"role": "user", "content": [{"type": "text", "text": "And now?"}]}
    [block] = call_each_tool(request(USER, later, tools=())).content
    assert block["text"] == "Offline model: you said 'And now?'."


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ({"type": "none"}, []),
        ({"type": "tool", "name": "mcp__sf__get_time"}, ["mcp__sf__get_time"]),
        ({"type": "auto", "disable_parallel_tool_use": True}, ["mcp__sf__get_time"]),
    ],
    ids=["none", "named", "one-at-a-time"],
)
def test_it_keeps_the_tool_choice(choice: dict[str, Any], expected: list[str]) -> None:
    assert [name for name, _ in calls(request(USER, tool_choice=choice))] == expected


def test_a_required_call_is_made_even_when_every_tool_was_called() -> None:
    turn = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "a", "name": "mcp__sf__get_weather", "input": {}}],
    }
    results = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}]}
    answered = request(USER, turn, results, tools=[WEATHER], tool_choice={"type": "any"})
    assert [name for name, _ in calls(answered)] == ["mcp__sf__get_weather"]


def test_structured_output_is_called_last_in_place_of_the_text() -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    output = {"name": "StructuredOutput", "input_schema": schema}
    assert calls(request(USER, tools=[WEATHER, output])) == [
        ("mcp__sf__get_weather", {"city": "example"})
    ]
    turn = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "a", "name": "mcp__sf__get_weather", "input": {}}],
    }
    assert calls(request(USER, turn, tools=[WEATHER, output])) == [
        ("StructuredOutput", {"ok": False})
    ]


def test_arguments_fill_required_properties_nested_objects_arrays_enums_and_defaults() -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string", "enum": ["Paris", "Tokyo"]},
            "nights": {"type": "integer", "minimum": 2},
            "unit": {"type": "string", "default": "celsius"},
            "guest": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "age": {"type": "number"}},
                "required": ["name", "age"],
            },
            "tags": {"type": "array", "items": {"type": "boolean"}, "minItems": 2},
            "when": {"type": ["null", "string"], "format": "date"},
            "note": {"type": "string"},
        },
        "required": ["city", "nights", "unit", "guest", "tags", "when"],
    }
    assert arguments_for(schema) == {
        "city": "Paris",
        "nights": 2,
        "unit": "celsius",
        "guest": {"name": "example", "age": 1.0},
        "tags": [False, False],
        "when": "2024-01-01",
    }
