"""Single-turn mode through the real CLI: calls come back to the app, nothing runs."""

from __future__ import annotations

from typing import Any

import pytest

from sf_provider import (
    ClaudeAgentProvider,
    EmptyToolRoutingError,
    ErrorPart,
    FinishPart,
    FunctionTool,
    StreamPart,
    StrictToolCallError,
    TextDeltaPart,
    ToolCallPart,
    ToolChoiceViolationError,
)
from sf_provider.testing import Reply, ScriptedMessagesAPI, reply, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}


def counted_weather(calls: list[dict[str, Any]], name: str = "get_weather") -> FunctionTool:
    return FunctionTool(
        name=name,
        input_schema=WEATHER_SCHEMA,
        executor=lambda arguments: calls.append(arguments) or "sunny",
    )


async def run_stream(
    script: list[Reply], tools: list[FunctionTool], **options: Any
) -> tuple[list[StreamPart], ScriptedMessagesAPI]:
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings())
        parts = [p async for p in provider.stream("go", tools=tools, **options)]
    return parts, api


async def test_forced_single_turn_runs_no_executor_and_makes_one_api_call() -> None:
    calls: list[dict[str, Any]] = []
    script = [
        reply(tool_use("get_weather", {"city": "Paris"}), tool_use("get_weather", {"city": "Oslo"}))
    ]
    parts, api = await run_stream(script, [counted_weather(calls)], mode="single-turn")
    tool_calls = [p for p in parts if isinstance(p, ToolCallPart)]
    assert [(c.tool_name, c.input, c.provider_executed) for c in tool_calls] == [
        ("get_weather", {"city": "Paris"}, False),
        ("get_weather", {"city": "Oslo"}, False),
    ]
    assert calls == [], "no executor ran"
    assert len(api.requests) == 1, "the CLI stopped after one model turn"
    assert not [p for p in parts if p.type == "tool-result"]
    finish = parts[-1]
    assert isinstance(finish, FinishPart) and finish.finish_reason == "tool-calls"
    assert finish.raw_stop_reason == "tool_deferred"


async def test_tool_input_streams_before_the_tool_call_in_single_turn() -> None:
    parts, _ = await run_stream(
        [reply(tool_use("get_weather", {"city": "Paris"}))], [FunctionTool(name="get_weather")]
    )
    kinds = [p.type for p in parts if p.type.startswith("tool")]
    assert kinds[0] == "tool-input-start" and kinds[-1] == "tool-call"
    assert kinds.index("tool-input-end") < kinds.index("tool-call")


async def test_plain_text_streams_as_it_arrives_in_single_turn() -> None:
    answer = "Plain answer, not an envelope, streamed in small pieces."
    script = [Reply(content=[text(answer)], chunk_size=4)]
    parts, _ = await run_stream(script, [FunctionTool(name="get_weather")])
    deltas = [p for p in parts if isinstance(p, TextDeltaPart)]
    assert len(deltas) > 3, "the text was not held back until the end"
    assert "".join(d.delta for d in deltas) == answer


async def test_an_envelope_reply_yields_tool_calls_and_no_text() -> None:
    envelope = '{"tool_calls": [{"toolName": "get_weather", "arguments": {"city": "Rome"}}]}'
    parts, _ = await run_stream([reply(text(envelope))], [FunctionTool(name="get_weather")])
    assert not [p for p in parts if p.type.startswith("text")]
    calls = [p for p in parts if isinstance(p, ToolCallPart)]
    assert [(c.tool_name, c.input, c.invalid) for c in calls] == [
        ("get_weather", {"city": "Rome"}, False)
    ]
    assert calls[0].tool_call_id, "a recovered call gets an id"
    assert isinstance(parts[-1], FinishPart) and parts[-1].finish_reason == "tool-calls"


async def test_native_tool_use_wins_over_an_envelope_shaped_text() -> None:
    envelope = '{"tool": "get_weather", "input": {"city": "Rome"}}'
    script = [reply(text(envelope), tool_use("get_weather", {"city": "Oslo"}))]
    parts, _ = await run_stream(script, [FunctionTool(name="get_weather")])
    calls = [p for p in parts if isinstance(p, ToolCallPart)]
    assert [c.input for c in calls] == [{"city": "Oslo"}]
    assert "".join(p.delta for p in parts if isinstance(p, TextDeltaPart)) == envelope


async def test_a_reply_with_nothing_routable_raises_empty_tool_routing() -> None:
    # The CLI itself asks once more after an empty reply, so the script has two.
    async with ScriptedMessagesAPI([reply(), reply()]) as api:
        provider = ClaudeAgentProvider(api.settings())
        with pytest.raises(EmptyToolRoutingError, match="neither a tool call nor text"):
            await provider.generate("go", tools=[FunctionTool(name="get_weather")])
    assert len(api.requests) == 2
    parts: list[StreamPart] = []
    async with ScriptedMessagesAPI([reply(), reply()]) as api:
        provider = ClaudeAgentProvider(api.settings())
        with pytest.raises(EmptyToolRoutingError):
            async for part in provider.stream("go", tools=[FunctionTool(name="get_weather")]):
                parts.append(part)
    assert isinstance(parts[-2], ErrorPart) and parts[-2].error_type == "EmptyToolRoutingError"
    assert isinstance(parts[-1], FinishPart) and parts[-1].finish_reason == "error"


async def test_required_tool_choice_rejects_a_text_only_reply() -> None:
    async with ScriptedMessagesAPI([reply(text("I'd rather chat."))]) as api:
        provider = ClaudeAgentProvider(api.settings())
        with pytest.raises(ToolChoiceViolationError, match="without one"):
            await provider.generate(
                "go", tools=[FunctionTool(name="get_weather")], tool_choice="required"
            )
    assert api.requests[0].body["tool_choice"] == {"type": "any"}  # sent, and then checked


async def test_a_named_tool_choice_exposes_only_that_tool() -> None:
    tools = [FunctionTool(name="get_weather"), FunctionTool(name="get_time")]
    parts, api = await run_stream(
        [reply(tool_use("get_time"))], tools, tool_choice={"type": "tool", "name": "get_time"}
    )
    assert api.requests[0].tool_names == ["mcp__sf__get_time"]
    assert [p.tool_name for p in parts if isinstance(p, ToolCallPart)] == ["get_time"]


async def test_tool_choice_none_exposes_no_tool() -> None:
    parts, api = await run_stream([reply(text("ok"))], [counted_weather([])], tool_choice="none")
    assert api.requests[0].tool_names == []
    assert isinstance(parts[-1], FinishPart) and parts[-1].finish_reason == "stop"


TOOL_HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": [
            {"type": "tool-call", "tool_call_id": "toolu_1", "tool_name": "get_weather",
             "input": {"city": "Paris"}},
        ],
    },
    {
        "role": "tool",
        "content": [{"type": "tool-result", "tool_call_id": "toolu_1", "output": "sunny"}],
    },
]  # fmt: skip


async def test_tool_choice_none_after_tool_calls_keeps_the_tools_defined_and_forbids_calls() -> (
    None
):
    # The Messages API refuses tool_use / tool_result blocks in a request without tools (the
    # scripted API answers it so); "none" keeps them defined and sends tool_choice none.
    calls: list[dict[str, Any]] = []
    async with ScriptedMessagesAPI([reply(text("It is sunny in Paris."))]) as api:
        provider = ClaudeAgentProvider(api.settings())
        result = await provider.generate(
            TOOL_HISTORY, tools=[counted_weather(calls)], tool_choice="none"
        )
    assert result.text == "It is sunny in Paris." and result.finish_reason == "stop"
    assert api.requests[0].tool_names == ["mcp__sf__get_weather"]
    assert api.requests[0].body["tool_choice"] == {"type": "none"}
    assert result.mode == "single-turn" and calls == []


async def test_tool_choice_none_after_tool_calls_refuses_a_call_and_runs_nothing() -> None:
    calls: list[dict[str, Any]] = []
    async with ScriptedMessagesAPI([reply(tool_use("get_weather", {"city": "Oslo"}))]) as api:
        provider = ClaudeAgentProvider(api.settings())
        with pytest.raises(ToolChoiceViolationError, match="tool_choice='none' forbade"):
            await provider.generate(
                TOOL_HISTORY, tools=[counted_weather(calls)], tool_choice="none"
            )
    assert calls == [] and len(api.requests) == 1


async def test_calls_are_recovered_from_tool_use_blocks_after_error_max_turns() -> None:
    # A CLI whose hooks do not run (bare mode disables them): nothing defers the call, the CLI
    # asks the bridge (which refuses a tool without an executor), then stops at max_turns=1
    # with error_max_turns. The calls are still recovered from the tool_use blocks: a normal
    # tool-calls finish. `extra_args` refuses --bare, so it is put in after validation here.
    script = [reply(tool_use("get_weather", {"city": "Paris"}))]
    async with ScriptedMessagesAPI(script) as api:
        settings = api.settings()
        settings.extra_args["bare"] = None
        provider = ClaudeAgentProvider(settings)
        result = await provider.generate("go", tools=[FunctionTool(name="get_weather")])
    assert result.provider_details["subtype"] == "error_max_turns"
    assert result.finish_reason == "tool-calls"
    assert [(c.tool_name, c.input) for c in result.tool_calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert len(api.requests) == 1


@pytest.mark.parametrize("strict", [True, False])
async def test_a_call_off_a_strict_tools_schema_is_an_error_not_a_call(strict: bool) -> None:
    """`strict` (OpenAI's and Anthropic's tool flag, set by the OpenAI Agents SDK on every
    tool) promises calls that match the schema; the CLI cannot constrain the arguments, so the
    provider holds the promise by a check: such a call never reaches the application."""
    weather = FunctionTool(name="get_weather", input_schema=WEATHER_SCHEMA, strict=strict)
    off_schema = [reply(tool_use("get_weather", {"town": "Paris"}))]
    async with ScriptedMessagesAPI(off_schema) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        if strict:
            with pytest.raises(StrictToolCallError, match="'get_weather' does not match") as e:
                await provider.generate("Weather?", tools=[weather])
            assert e.value.retryable
        else:
            result = await provider.generate("Weather?", tools=[weather])
            assert [(c.input, c.invalid) for c in result.tool_calls] == [({"town": "Paris"}, True)]
    assert len(api.requests) == 1
    on_schema = [reply(tool_use("get_weather", {"city": "Paris"}))]
    async with ScriptedMessagesAPI(on_schema) as api:
        result = await ClaudeAgentProvider(api.settings()).generate("Weather?", tools=[weather])
    assert [(c.input, c.invalid) for c in result.tool_calls] == [({"city": "Paris"}, False)]
