"""Structured output: `output_schema` through the CLI's StructuredOutput tool."""

from __future__ import annotations

from typing import Any

import pytest

from sf_provider import (
    ClaudeAgentProvider,
    FunctionTool,
    StructuredOutputError,
    ToolCallPart,
    UnsupportedRequestError,
)
from sf_provider.testing import RecordedRequest, Reply, ScriptedMessagesAPI, reply, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
    "required": ["city", "celsius"],
}


def complying(request: RecordedRequest) -> Reply:
    if request.tool_results():
        return reply(text("done"))
    return reply(tool_use("StructuredOutput", {"city": "Paris", "celsius": 18}))


async def test_the_answer_object_arrives_as_structured_output() -> None:
    async with ScriptedMessagesAPI(complying) as api:
        provider = ClaudeAgentProvider(api.settings())
        parts = [p async for p in provider.stream("Weather?", output_schema=WEATHER)]
        result = await ClaudeAgentProvider(api.settings()).generate(
            "Weather?", output_schema=WEATHER
        )
    assert result.structured_output == {"city": "Paris", "celsius": 18}
    assert result.tool_calls == [], "the CLI's own StructuredOutput tool is not an app tool call"
    assert not [p for p in parts if isinstance(p, ToolCallPart)]
    assert api.requests[0].tool_names == ["StructuredOutput"]


@pytest.mark.parametrize("mode", ["executor", "single-turn"])
async def test_an_answer_that_is_only_the_object_finishes_with_stop(mode: str) -> None:
    # The CLI ends the query on the StructuredOutput call (stop reason tool_use): there is no
    # call for the application to answer, so a `while finish_reason == "tool-calls"` loop ends.
    script = [reply(tool_use("StructuredOutput", {"city": "Paris", "celsius": 18}))]
    tools = [FunctionTool(name="get_weather", executor=lambda arguments: "18")]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        result = await provider.generate("Weather?", tools=tools, output_schema=WEATHER, mode=mode)
    assert result.structured_output == {"city": "Paris", "celsius": 18}
    assert (result.finish_reason, result.tool_calls, len(api.requests)) == ("stop", [], 1)


async def test_an_object_after_calls_the_provider_ran_finishes_with_stop() -> None:
    # The app's call was answered by its executor, then the CLI ended on the StructuredOutput
    # call: no call is left for the application, whatever the earlier turns did.
    script = [
        reply(tool_use("get_weather", {"city": "Paris"})),
        reply(tool_use("StructuredOutput", {"city": "Paris", "celsius": 18})),
    ]
    tools = [FunctionTool(name="get_weather", executor=lambda arguments: "18")]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        result = await provider.generate("Weather?", tools=tools, output_schema=WEATHER)
    assert result.structured_output == {"city": "Paris", "celsius": 18}
    assert [c.tool_name for c in result.tool_calls] == ["get_weather"]
    assert (result.finish_reason, result.raw_stop_reason, len(api.requests)) == (
        "stop",
        "tool_use",
        2,
    )


async def test_single_turn_does_not_defer_the_structured_output_tool() -> None:
    async with ScriptedMessagesAPI(complying) as api:
        provider = ClaudeAgentProvider(api.settings())
        result = await provider.generate(
            "Weather?", tools=[FunctionTool(name="get_weather")], output_schema=WEATHER
        )
    assert result.mode == "single-turn"
    assert result.structured_output == {"city": "Paris", "celsius": 18}


async def test_single_turn_hands_back_a_tool_call_first_and_the_object_comes_after() -> None:
    """The model calls the app's tool before it can answer: that call comes back (it used to be
    a StructuredOutputError claiming the CLI had asked again, and the call was lost), and the
    object is the answer of the turn that carries its result."""

    def model(request: RecordedRequest) -> Reply:
        if request.tool_results():
            return reply(tool_use("StructuredOutput", {"city": "Paris", "celsius": 18}))
        return reply(tool_use("mcp__sf__get_weather", {"city": "Paris"}))

    tools = [FunctionTool(name="get_weather")]  # no executor: the app runs it
    async with ScriptedMessagesAPI(model) as api:
        provider = ClaudeAgentProvider(api.settings())
        messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
        first = await provider.generate(messages, tools=tools, output_schema=WEATHER)
        [call] = first.tool_calls
        result = {"type": "tool-result", "tool_call_id": call.tool_call_id, "output": "18"}
        messages += [first.assistant_message(), {"role": "tool", "content": [result]}]
        second = await provider.generate(messages, tools=tools, output_schema=WEATHER)
    assert (first.finish_reason, call.tool_name, first.structured_output) == (
        "tool-calls",
        "get_weather",
        None,
    )
    assert (second.finish_reason, second.structured_output) == (
        "stop",
        {"city": "Paris", "celsius": 18},
    )
    assert len(api.requests) == 2


async def test_a_model_that_never_complies_raises_structured_output_error() -> None:
    async with ScriptedMessagesAPI(lambda _request: reply(text("No JSON today."))) as api:
        provider = ClaudeAgentProvider(api.settings(env={"MAX_STRUCTURED_OUTPUT_RETRIES": "1"}))
        with pytest.raises(StructuredOutputError, match="output_schema") as info:
            await provider.generate("Weather?", output_schema=WEATHER)
    assert len(api.requests) == 2, "the CLI asked once more before giving up"
    assert info.value.partial.text == "No JSON today."


async def test_single_turn_text_without_the_object_raises_after_one_call() -> None:
    """Single-turn: the CLI's request for the object would be a second model turn, which the
    one turn does not allow. The text answer came back as a success with finish reason
    "length" and no object; it is a StructuredOutputError holding the text."""
    async with ScriptedMessagesAPI(lambda _request: reply(text("No JSON today."))) as api:
        provider = ClaudeAgentProvider(api.settings())
        with pytest.raises(StructuredOutputError, match="output_schema") as info:
            await provider.generate("Weather?", output_schema=WEATHER, mode="single-turn")
    assert len(api.requests) == 1
    assert info.value.partial.text == "No JSON today."
    assert "asked it again" not in str(info.value)
    assert info.value.partial.finish_reason == "stop", "the reply ended; no output limit was hit"


async def test_an_invalid_output_schema_fails_before_anything_starts() -> None:
    async with ScriptedMessagesAPI([]) as api:
        provider = ClaudeAgentProvider(api.settings())
        with pytest.raises(UnsupportedRequestError, match="output_schema"):
            provider.stream("x", output_schema={"type": "string"})
    assert api.all_requests == []
