"""`stop_sequences` in the core, through the real CLI: the provider's own parts are cut
before the first stop sequence (`sf_provider._stop.StopCutter`, unit-tested in
`tests/unit/test_stop_cutter.py`), so every front door only passes its stop field through."""

from __future__ import annotations

from typing import Any

import pytest

from sf_provider import (
    ClaudeAgentProvider,
    FunctionTool,
    ToolChoiceViolationError,
    UnsupportedRequestError,
)
from sf_provider.testing import ScriptedMessagesAPI, reply, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

WEATHER = FunctionTool(
    name="get_weather",
    description="Weather in a city.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)

#: A reply that goes on past a stop sequence (split across the scripted API's SSE chunks) and
#: calls a tool after it.
PAST_THE_STOP = reply(
    text("Thought: I know it.\nObservation: made up"), tool_use("get_weather", {"city": "Paris"})
)


async def test_the_answer_ends_before_the_stop_and_the_process_is_reused() -> None:
    stops = ["Calling tools:", "Observation:", "Observation:"]  # a repeated one counts once
    async with ScriptedMessagesAPI([PAST_THE_STOP, PAST_THE_STOP]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=1))
        try:
            first = await provider.generate("Weather?", tools=[WEATHER], stop_sequences=stops)
            async with provider.stream("Again?", tools=[WEATHER], stop_sequences=stops) as parts:
                streamed = [p async for p in parts]
        finally:
            await provider.aclose()
    assert first.text == "Thought: I know it.\n"
    assert first.tool_calls == [], "written after the stop: the API would never have sent it"
    assert first.finish_reason == "stop"
    assert first.provider_details["stop_sequence"] == "Observation:"
    deltas = "".join(getattr(p, "delta", "") for p in streamed if p.type == "text-delta")
    assert deltas == "Thought: I know it.\n"
    assert not [p for p in streamed if p.type in ("tool-call", "tool-input-start")]
    finish = streamed[-1]
    assert finish.type == "finish" and finish.finish_reason == "stop"
    # The first query ran to its end, so its process served the second one.
    assert finish.provider_details["process"] == "warm"
    assert len(api.requests) == 2


async def test_without_a_stop_in_the_text_the_answer_comes_whole() -> None:
    script = [reply(text("Calling the weather tool."), tool_use("get_weather", {"city": "Paris"}))]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        result = await provider.generate(
            "Weather?", tools=[WEATHER], stop_sequences=["Calling tools:"]
        )
    assert result.text == "Calling the weather tool."
    assert [c.tool_name for c in result.tool_calls] == ["get_weather"]
    assert result.finish_reason == "tool-calls"
    assert "stop_sequence" not in result.provider_details


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"stop_sequences": ["END", ""]}, "must not be empty"),
        ({"stop_sequences": [3]}, "stop_sequences"),
        ({"stop_sequences": "END"}, "stop_sequences"),
        ({"stop_sequences": ["END"], "output_schema": {"type": "object"}}, "with output_schema"),
        ({"parallel_tool_calls": False}, "cannot limit a turn to one call"),
        ({"parallel_tool_calls": False, "tool_choice": "required"}, "one call"),
    ],
)
def test_refused_before_any_process_starts(options: dict[str, Any], message: str) -> None:
    provider = ClaudeAgentProvider()
    with pytest.raises(UnsupportedRequestError, match=message):
        provider.stream("Weather?", tools=[WEATHER], **options)


async def test_parallel_tool_calls_false_without_callable_tools_asks_for_nothing() -> None:
    async with ScriptedMessagesAPI([reply(text("Sunny.")), reply(text("Sunny."))]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        alone = await provider.generate("Weather?", parallel_tool_calls=False)
        none = await provider.generate(
            "Weather?", tools=[WEATHER], tool_choice="none", parallel_tool_calls=False
        )
    assert alone.text == none.text == "Sunny."


async def test_in_executor_mode_a_tool_called_after_the_stop_still_runs_and_is_warned_of() -> None:
    calls: list[dict[str, Any]] = []

    def look_up(arguments: dict[str, Any]) -> str:
        calls.append(arguments)
        return "18 C"

    weather = WEATHER.model_copy(update={"executor": look_up})
    script = [PAST_THE_STOP, reply(text("Sunny."))]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        result = await provider.generate("Weather?", tools=[weather], stop_sequences=["Obs"])
    assert result.text == "Thought: I know it.\n"
    assert calls == [{"city": "Paris"}], "the CLI's loop ran it: the stop cannot reach it"
    assert [w.code for w in result.warnings] == ["stop-after-tools"]
    assert len(api.requests) == 2


async def test_a_required_call_written_after_the_stop_does_not_count() -> None:
    """The result rules judge the answer the caller gets: a call the cut left out cannot meet
    tool_choice='required' (the answer came back as a success with no call)."""
    async with ScriptedMessagesAPI([PAST_THE_STOP]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        with pytest.raises(ToolChoiceViolationError, match="without one"):
            await provider.generate(
                "Weather?", tools=[WEATHER], tool_choice="required", stop_sequences=["Observation:"]
            )
    assert len(api.requests) == 1
