"""Request options that go to the Messages API as the caller wrote them (ADR 0009): stop
sequences, tool_choice, parallel_tool_calls and sampling, through the real CLI against the
scripted API, which honours `stop_sequences` and refuses a forced tool choice with thinking as
the API does. What each door sends is in `test_adapters_agree.py`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sf_provider import (
    ClaudeAgentProvider,
    FunctionTool,
    NamedToolChoice,
    ProviderSettings,
    ToolChoiceViolationError,
    UnsupportedRequestError,
    UnsupportedSettingError,
)
from sf_provider.testing import ScriptedMessagesAPI, http_error, reply, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

WEATHER = FunctionTool(
    name="get_weather",
    description="Weather in a city.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)

#: Settings that pass the capability check (no query runs with them).
KEYED = ProviderSettings(env={"ANTHROPIC_API_KEY": "sk-ant-test"})

#: A reply that goes on past a stop sequence and calls a tool after it: the API stops at it.
PAST_THE_STOP = reply(
    text("Thought: I know it.\nObservation: made up"), tool_use("get_weather", {"city": "Paris"})
)


async def test_stop_sequences_reach_the_api_which_ends_the_answer_there() -> None:
    stops = ["Calling tools:", "Observation:", "Observation:"]  # a repeated one counts once
    async with ScriptedMessagesAPI([PAST_THE_STOP, PAST_THE_STOP]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=1))
        try:
            first = await provider.generate("Weather?", tools=[WEATHER], stop_sequences=stops)
            async with provider.stream("Again?", tools=[WEATHER], stop_sequences=stops) as parts:
                streamed = [p async for p in parts]
        finally:
            await provider.aclose()
    assert api.requests[0].body["stop_sequences"] == ["Calling tools:", "Observation:"]
    assert first.text == "Thought: I know it.\n"
    assert first.tool_calls == []
    assert first.finish_reason == "stop"
    assert first.provider_details["stop_sequence"] == "Observation:"
    deltas = "".join(getattr(p, "delta", "") for p in streamed if p.type == "text-delta")
    assert deltas == "Thought: I know it.\n"
    finish = streamed[-1]
    assert finish.type == "finish" and finish.provider_details["stop_sequence"] == "Observation:"
    assert finish.provider_details["process"] == "warm", "same options: the same process"
    assert len(api.requests) == 2


async def test_other_request_options_take_a_fresh_process() -> None:
    """The options are in the CLI's environment, read at its start: a process started with
    other ones cannot serve the request."""
    script = [reply(text("One.")), reply(text("Two.")), reply(text("Three."))]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=2))
        try:
            served = []
            for options in ({"stop_sequences": ["A"]}, {"stop_sequences": ["B"]}, {}):
                async with provider.stream("Hi", **options) as parts:
                    served.append([p async for p in parts][-1].provider_details["process"])
        finally:
            await provider.aclose()
    assert served == ["fresh", "fresh", "fresh"]
    assert [r.body.get("stop_sequences") for r in api.requests] == [["A"], ["B"], None]


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
    ("choice", "sent"),
    [
        ("required", {"type": "any"}),
        (NamedToolChoice(name="get_weather"), {"type": "tool", "name": "mcp__sf__get_weather"}),
    ],
)
async def test_a_forced_choice_is_one_api_call_with_thinking_off(
    choice: Any, sent: dict[str, Any]
) -> None:
    async with ScriptedMessagesAPI([reply(tool_use("get_weather", {"city": "Oslo"}))]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        result = await provider.generate("Weather?", tools=[WEATHER], tool_choice=choice)
    assert [c.tool_name for c in result.tool_calls] == ["get_weather"]
    (request,) = api.requests
    assert request.body["tool_choice"] == sent
    assert request.body["thinking"] == {"type": "disabled"}
    assert "thinking" in result.provider_details
    system = json.dumps(request.body.get("system"))
    assert "You must answer by calling" not in system, "native: no instruction in the prompt"


async def test_a_reply_without_the_forced_call_is_still_refused() -> None:
    async with ScriptedMessagesAPI([reply(text("No tool for you."))]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        with pytest.raises(ToolChoiceViolationError):
            await provider.generate("Weather?", tools=[WEATHER], tool_choice="required")
    assert api.requests[0].body["tool_choice"] == {"type": "any"}


async def test_choice_none_over_tool_history_and_parallel_off_are_sent() -> None:
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": [{"type": "tool-call", "tool_call_id": "c1", "tool_name": "get_weather",
                         "input": {"city": "Oslo"}}],
        },
        {
            "role": "tool",
            "content": [{"type": "tool-result", "tool_call_id": "c1", "tool_name": "get_weather",
                         "output": "18 C"}],
        },
    ]  # fmt: skip
    script = [reply(text("It is 18 C.")), reply(tool_use("get_weather", {"city": "Rome"}))]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        answer = await provider.generate(history, tools=[WEATHER], tool_choice="none")
        one = await provider.generate("Rome?", tools=[WEATHER], parallel_tool_calls=False)
    assert answer.text == "It is 18 C."
    assert api.requests[0].body["tool_choice"] == {"type": "none"}
    assert api.requests[1].body["tool_choice"] == {
        "type": "auto",
        "disable_parallel_tool_use": True,
    }
    assert [c.tool_name for c in one.tool_calls] == ["get_weather"]
    assert not api.errors


async def test_sampling_is_sent_as_written_and_left_out_when_unset() -> None:
    async with ScriptedMessagesAPI([reply(text("A.")), reply(text("B."))]) as api:
        settings = api.settings(warm_processes=0, max_tokens=500)
        tier = '{"service_tier": "standard_only"}'  # passed on, merged with the call's
        settings = settings.model_copy(
            update={"env": {**settings.env, "CLAUDE_CODE_EXTRA_BODY": tier}}
        )
        provider = ClaudeAgentProvider(settings)
        await provider.generate("Hi", temperature=0, top_p=0.5, top_k=5)
        await provider.generate("Hi", tools=[WEATHER])
    sent, plain = (r.body for r in api.requests)
    assert (sent["temperature"], sent["top_p"], sent["top_k"]) == (0, 0.5, 5)
    assert not {"temperature", "top_p", "top_k", "tool_choice", "stop_sequences"} & plain.keys()
    # The keys the CLI writes itself are all still there, as it wrote them.
    for body in (sent, plain):
        assert body["service_tier"] == "standard_only"
        assert body["max_tokens"] == 500
        assert {"model", "messages", "system", "thinking", "metadata"} <= body.keys()
    assert plain["tools"] and "thinking" in sent and sent["thinking"] == plain["thinking"]


async def test_an_api_refusal_of_a_sampling_setting_is_named() -> None:
    refusal = http_error(400, "temperature is deprecated for this model.")
    # A function, not a list: the CLI tries a plain 400 three times (CLI 2.1.332), whatever
    # CLAUDE_CODE_MAX_RETRIES says.
    async with ScriptedMessagesAPI(lambda _request: refusal) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0, model="claude-opus-5-5"))
        with pytest.raises(UnsupportedSettingError) as caught:
            await provider.generate("Hi", temperature=0.2)
    assert caught.value.setting == "temperature"
    assert caught.value.model == "claude-opus-5-5"
    assert caught.value.status == 400
    assert "temperature is deprecated" in str(caught.value)
    assert isinstance(caught.value, UnsupportedRequestError)
    assert all(r.body["temperature"] == 0.2 for r in api.requests)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"stop_sequences": ["END", ""]}, "must not be empty"),
        ({"stop_sequences": [3]}, "stop_sequences"),
        ({"stop_sequences": "END"}, "stop_sequences"),
        ({"stop_sequences": ["END"], "output_schema": {"type": "object"}}, "with output_schema"),
        ({"temperature": "hot"}, "temperature"),
        ({"top_k": 2.5}, "top_k"),
        ({"tool_choice": "required", "mode": "executor"}, "loop|single-turn"),
        ({"tool_choice": "required", "thinking": "adaptive", "mode": "single-turn"}, "adaptive"),
        (
            {
                "tool_choice": NamedToolChoice(name="get_weather"),
                "thinking": 2048,
                "mode": "single-turn",
            },
            "=2048",
        ),
    ],
)
def test_refused_before_any_process_starts(options: dict[str, Any], message: str) -> None:
    weather = WEATHER.model_copy(update={"executor": lambda _arguments: "18 C"})
    provider = ClaudeAgentProvider(KEYED)
    with pytest.raises(UnsupportedRequestError, match=message):
        provider.stream("Weather?", tools=[weather], **options)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('{"max_tokens": 5}', "'max_tokens', which the CLI writes itself; use max_tokens="),
        ('{"temperature": 1}', "sets 'temperature' to 1, and the call asks for 0.5"),
        ("[1]", "must be a JSON object"),
        ("{", "is not JSON"),
    ],
)
def test_a_body_in_settings_env_never_replaces_what_the_cli_or_the_call_sets(
    extra: str, message: str
) -> None:
    env = {**KEYED.env, "CLAUDE_CODE_EXTRA_BODY": extra}
    provider = ClaudeAgentProvider(KEYED.model_copy(update={"env": env}))
    with pytest.raises(UnsupportedRequestError, match=message):
        provider.stream("Hi", temperature=0.5)
