"""The gateway's OpenAI Chat Completions API, through the official `openai` client and an OpenAI
Agents SDK agent, served by uvicorn on a loopback port, the real CLI behind it."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import openai
import pytest
from conftest import cli_processes, no_cli_left, serving
from openai import AsyncOpenAI

from sf_provider import CallWarning
from sf_provider.gateway import GatewaySettings, create_app
from sf_provider.gateway._http import KEYS_ENV as SF_KEYS
from sf_provider.gateway._http import MAX_JSON_DEPTH, WARNINGS_HEADER, warnings_header
from sf_provider.settings import ProviderSettings
from sf_provider.testing import (
    HTTPErrorReply,
    RecordedRequest,
    Reply,
    ScriptedMessagesAPI,
    fault,
    http_error,
    offline_env,
    redacted_thinking,
    reply,
    result_text,
    text,
    thinking,
    tool_use,
)

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

MODEL = "claude-sonnet-5-5"
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
QUESTION = [{"role": "user", "content": "Weather in Paris?"}]
# A 1x1 transparent PNG.
PIXEL_URL = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgAAACAAEA5ScN"
    "5AAAAABJRU5ErkJggg=="
)


@asynccontextmanager
async def gateway(
    provider: ProviderSettings, **settings: Any
) -> AsyncIterator[tuple[str, AsyncOpenAI]]:
    """The gateway served by uvicorn on a free loopback port: its base URL and an official
    client for it (no retries: every answer is seen as it is). Stopping it runs the app's
    shutdown."""
    app = create_app(GatewaySettings(provider=provider, **settings))
    async with serving(app) as base_url:
        client = AsyncOpenAI(base_url=f"{base_url}/v1", api_key="sk-test", max_retries=0)
        try:
            yield base_url, client
        finally:
            await client.close()


async def health(base_url: str) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=60) as http:
        response = await http.get(f"{base_url}/healthz")
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


async def healthy(base_url: str) -> None:
    """The gateway still answers, with nothing in flight."""
    assert (await health(base_url))["in_flight"] == 0


def weather_model(request: RecordedRequest) -> Reply:
    """Calls get_weather, then answers from its result."""
    results = [result_text(b) for b in request.tool_results()]
    if not results:
        return reply(tool_use("get_weather", {"city": "Paris"}))
    return reply(text(f"Paris: {results[0].splitlines()[0]}."))


# --------------------------------------------------------------------------- answers


async def test_a_question_gets_a_chat_completion_with_usage() -> None:
    async with (
        ScriptedMessagesAPI([reply(text("Paris is sunny."))]) as api,
        gateway(api.settings()) as (_, client),
    ):
        answer = await client.chat.completions.create(model=MODEL, messages=QUESTION)
    assert answer.object == "chat.completion"
    assert answer.model == MODEL
    choice = answer.choices[0]
    assert choice.message.content == "Paris is sunny."
    assert choice.message.tool_calls is None
    assert choice.finish_reason == "stop"
    assert answer.usage is not None
    assert answer.usage.prompt_tokens > 0 and answer.usage.completion_tokens > 0
    assert answer.usage.total_tokens == answer.usage.prompt_tokens + answer.usage.completion_tokens
    assert api.requests[0].body["model"] == MODEL


async def test_tools_go_to_the_model_and_calls_come_back_to_the_client() -> None:
    async with (
        ScriptedMessagesAPI([reply(text("Checking."), tool_use("get_weather", {"city": "Paris"}))])
        as api,
        gateway(api.settings()) as (_, client),
    ):  # fmt: skip
        answer = await client.chat.completions.create(
            model=MODEL, messages=QUESTION, tools=[WEATHER_TOOL]
        )
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Checking."
    calls = choice.message.tool_calls or []
    assert [(c.type, c.function.name) for c in calls] == [("function", "get_weather")]
    assert json.loads(calls[0].function.arguments) == {"city": "Paris"}
    offered = api.requests[0].tools
    assert [t["name"] for t in offered] == ["mcp__sf__get_weather"]
    assert offered[0]["input_schema"]["required"] == ["city"]
    assert len(api.requests) == 1, "single-turn: the call is the client's to run"


TIME_TOOL = {
    "type": "function",
    "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
}


@pytest.mark.parametrize("mode", ["auto", "required"])
async def test_allowed_tools_offers_the_model_only_those_tools(mode: str) -> None:
    """`tool_choice: {"type": "allowed_tools"}` (OpenAI's way to narrow the tools without
    changing the tools list) was a 400; now the model is offered just the allowed ones."""
    async with (
        ScriptedMessagesAPI([reply(tool_use("get_time", {}))]) as api,
        gateway(api.settings()) as (_, client),
    ):
        answer = await client.chat.completions.create(
            model=MODEL,
            messages=QUESTION,
            tools=[WEATHER_TOOL, TIME_TOOL],  # type: ignore[list-item]
            tool_choice={
                "type": "allowed_tools",
                "allowed_tools": {
                    "mode": mode,
                    "tools": [{"type": "function", "function": {"name": "get_time"}}],
                },
            },  # type: ignore[arg-type]
        )
    calls = answer.choices[0].message.tool_calls or []
    assert [c.function.name for c in calls] == ["get_time"]  # type: ignore[union-attr]
    assert api.requests[0].tool_names == ["mcp__sf__get_time"]
    forced = {"auto": None, "required": {"type": "any"}}[mode]
    assert api.requests[0].body.get("tool_choice") == forced


async def test_a_two_step_tool_loop_sends_the_result_back_under_the_call_id() -> None:
    async with (
        ScriptedMessagesAPI(weather_model) as api,
        gateway(api.settings()) as (base_url, client),
    ):
        messages: list[Any] = [{"role": "system", "content": "Be brief."}, *QUESTION]
        first = await client.chat.completions.create(
            model=MODEL, messages=messages, tools=[WEATHER_TOOL]
        )
        call = (first.choices[0].message.tool_calls or [])[0]
        messages.append(first.choices[0].message.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 °C"})
        second = await client.chat.completions.create(
            model=MODEL, messages=messages, tools=[WEATHER_TOOL]
        )
        await healthy(base_url)
    assert second.choices[0].message.content == "Paris: sunny, 21 °C."
    assert second.choices[0].finish_reason == "stop"
    last = api.requests[-1]
    assert [b["id"] for b in last.tool_uses()] == [call.id]
    assert [b["tool_use_id"] for b in last.tool_results()] == [call.id]
    assert result_text(last.tool_results()[0]).startswith("sunny, 21 °C")
    assert "Be brief." in json.dumps(last.body["system"])


async def test_streaming_sends_content_and_tool_call_deltas_then_the_usage_chunk() -> None:
    script = [
        Reply(
            content=[
                text("Let me check."),
                tool_use("get_weather", {"city": "Paris"}, id="toolu_1"),
            ],
            chunk_size=4,
        )
    ]
    async with ScriptedMessagesAPI(script) as api, gateway(api.settings()) as (_, client):
        stream = await client.chat.completions.create(
            model=MODEL,
            messages=QUESTION,
            tools=[WEATHER_TOOL],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    assert {c.object for c in chunks} == {"chat.completion.chunk"}
    assert len({c.id for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    content = [d.content for d in deltas if d.content]
    assert len(content) > 1, "the text streams in pieces"
    assert "".join(content) == "Let me check."
    call_deltas = [t for d in deltas for t in d.tool_calls or []]
    assert call_deltas[0].index == 0
    assert call_deltas[0].id == "toolu_1"
    assert call_deltas[0].function is not None and call_deltas[0].function.name == "get_weather"
    assert all(t.index == 0 and t.id is None for t in call_deltas[1:])
    fragments = [t.function.arguments or "" for t in call_deltas if t.function]
    assert len([f for f in fragments if f]) > 1, "the arguments stream in fragments"
    assert json.loads("".join(fragments)) == {"city": "Paris"}
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert [f for f in finishes if f] == ["tool_calls"]
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None and last.usage.completion_tokens > 0
    assert all(c.usage is None for c in chunks[:-1])


async def test_a_stream_without_include_usage_has_no_usage_chunk() -> None:
    async with (
        ScriptedMessagesAPI([reply(text("Sunny."))]) as api,
        gateway(api.settings()) as (_, client),
    ):
        stream = await client.chat.completions.create(model=MODEL, messages=QUESTION, stream=True)
        chunks = [chunk async for chunk in stream]
    assert all(c.choices for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Sunny."


def comparable(completion: Any) -> dict[str, Any]:
    """A completion as JSON, without what differs between any two (`id`, `created`) and what
    the openai client's stream helper adds of its own (`parsed`, and a call's `index` and
    `parsed_arguments`)."""
    answer: dict[str, Any] = json.loads(completion.model_dump_json(exclude={"id", "created"}))
    for choice in answer["choices"]:
        choice["message"].pop("parsed", None)
        for call in choice["message"].get("tool_calls") or []:
            call.pop("index", None)
            call["function"].pop("parsed_arguments", None)
    return answer


SAME_EITHER_WAY = {
    "calls only": reply(
        tool_use("get_weather", {"city": "Paris"}, id="toolu_paris"),
        tool_use("get_weather", {"city": "Rome"}, id="toolu_rome"),
        cache_read_input_tokens=100,
        cache_creation_input_tokens=7,
    ),
    "signed and redacted thinking": reply(
        thinking("Two cities."), redacted_thinking("opaque"), text("Sunny in both.")
    ),
    "text and a call": reply(
        text("Checking."), tool_use("get_weather", {"city": "Paris"}, id="toolu_paris")
    ),
}


@pytest.mark.parametrize("script", SAME_EITHER_WAY.values(), ids=SAME_EITHER_WAY)
async def test_a_streamed_answer_adds_up_to_the_whole_answer_in_the_openai_client(
    script: Reply,
) -> None:
    """The openai client's stream helper builds the completion from the chunks: it must be the
    completion the same script answers whole. A reply of calls only had `content` "" streamed
    (null whole), and a second thinking block broke the helper (`thinking_blocks` deltas are
    a list the helper merges by `index`, which they do not carry)."""
    async with (
        ScriptedMessagesAPI([script, script]) as api,
        gateway(api.settings()) as (_, client),
    ):
        asked: Any = {"model": MODEL, "messages": QUESTION, "tools": [WEATHER_TOOL]}
        whole = await client.chat.completions.create(**asked)
        async with client.chat.completions.stream(
            **asked, stream_options={"include_usage": True}
        ) as stream:
            streamed = await stream.get_final_completion()
    assert comparable(streamed) == comparable(whole)
    assert not api.errors


async def test_cache_reads_and_writes_are_in_the_usage_details() -> None:
    """The cache writes were left out of the details (the Responses door has them): a client
    could not tell them from uncached input, which costs less."""
    script = reply(text("Sunny."), cache_read_input_tokens=100, cache_creation_input_tokens=7)
    async with ScriptedMessagesAPI([script]) as api, gateway(api.settings()) as (_, client):
        answer = await client.chat.completions.create(model=MODEL, messages=QUESTION)
    assert answer.usage is not None and answer.usage.prompt_tokens_details is not None
    assert answer.usage.prompt_tokens == 25 + 100 + 7
    assert answer.usage.prompt_tokens_details.cached_tokens == 100
    assert answer.usage.prompt_tokens_details.cache_write_tokens == 7


WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
    "required": ["city", "celsius"],
    "additionalProperties": False,
}


def structured_model(request: RecordedRequest) -> Reply:
    if request.tool_results():
        return reply(text("done"))
    return reply(tool_use("StructuredOutput", {"city": "Paris", "celsius": 18}))


@pytest.mark.parametrize("stream", [False, True])
async def test_a_json_schema_response_format_answers_with_the_object(stream: bool) -> None:
    response_format: Any = {
        "type": "json_schema",
        "json_schema": {"name": "weather", "schema": WEATHER_SCHEMA, "strict": True},
    }
    async with (
        ScriptedMessagesAPI(structured_model) as api,
        gateway(api.settings()) as (_, client),
    ):
        if stream:
            chunks = await client.chat.completions.create(
                model=MODEL, messages=QUESTION, response_format=response_format, stream=True
            )
            choices = [c.choices[0] async for c in chunks if c.choices]
            content = "".join(c.delta.content or "" for c in choices)
            reasons = [c.finish_reason for c in choices if c.finish_reason]
        else:
            answer = await client.chat.completions.create(
                model=MODEL, messages=QUESTION, response_format=response_format
            )
            content = answer.choices[0].message.content or ""
            reasons = [answer.choices[0].finish_reason]
            assert answer.choices[0].message.tool_calls is None
    assert json.loads(content) == {"city": "Paris", "celsius": 18}
    # An answer, not tool calls: the CLI's own StructuredOutput call is no call of the client's.
    assert reasons == ["stop"]
    assert api.requests[0].tool_names == ["StructuredOutput"]
    assert api.requests[0].tools[0]["input_schema"]["required"] == ["city", "celsius"]


async def test_the_name_and_description_of_a_json_schema_format_reach_the_model() -> None:
    # OpenAI shows the model what the format is for; the CLI offers it only the schema.
    response_format: Any = {
        "type": "json_schema",
        "json_schema": {
            "name": "weather_report",
            "description": "The weather where the user is going next.",
            "schema": WEATHER_SCHEMA,
        },
    }
    async with (
        ScriptedMessagesAPI(structured_model) as api,
        gateway(api.settings()) as (_, client),
    ):
        answer = await client.chat.completions.create(
            model=MODEL, messages=QUESTION, response_format=response_format
        )
        with pytest.raises(openai.BadRequestError) as info:
            await client.chat.completions.create(
                model=MODEL,
                messages=QUESTION,
                response_format={
                    "type": "json_schema",
                    "json_schema": {"name": "w", "schema": WEATHER_SCHEMA, "examples": [{}]},
                },
            )
    assert json.loads(answer.choices[0].message.content or "") == {"city": "Paris", "celsius": 18}
    offered = api.requests[0].tools[0]["input_schema"]
    assert offered["title"] == "weather_report"
    assert offered["description"] == "The weather where the user is going next."
    assert offered["required"] == ["city", "celsius"]
    body: Any = info.value.body
    assert body["param"] == "response_format.json_schema.examples"
    assert len(api.requests) == 1


async def test_signed_thinking_goes_out_and_comes_back_natively() -> None:
    script = [
        reply(thinking("A tool knows the weather."), tool_use("get_weather", {"city": "Paris"})),
        reply(text("Sunny.")),
    ]
    async with ScriptedMessagesAPI(script) as api, gateway(api.settings()) as (_, client):
        first = await client.chat.completions.create(
            model=MODEL, messages=QUESTION, tools=[WEATHER_TOOL]
        )
        message = first.choices[0].message.model_dump(exclude_none=True)
        assert message["reasoning_content"] == "A tool knows the weather."
        assert message["thinking_blocks"] == [
            {"type": "thinking", "thinking": "A tool knows the weather.",
             "signature": "scripted-signature"}
        ]  # fmt: skip
        call_id = message["tool_calls"][0]["id"]
        await client.chat.completions.create(
            model=MODEL,
            messages=[
                *QUESTION,
                message,
                {"role": "tool", "tool_call_id": call_id, "content": "ok"},
            ],
            tools=[WEATHER_TOOL],
        )
    # The CLI may add its own `role: system` note among the messages: find the turn by role.
    assistant = next(m for m in api.requests[-1].messages if m["role"] == "assistant")
    assert [b["type"] for b in assistant["content"]] == ["thinking", "tool_use"]
    assert assistant["content"][0]["signature"] == "scripted-signature"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_redacted_thinking_goes_out_and_comes_back_natively(stream: bool) -> None:
    script = [
        reply(redacted_thinking("opaque"), tool_use("get_weather", {"city": "Paris"})),
        reply(text("Sunny.")),
    ]
    async with ScriptedMessagesAPI(script) as api, gateway(api.settings()) as (_, client):
        if stream:
            chunks = await client.chat.completions.create(
                model=MODEL, messages=QUESTION, tools=[WEATHER_TOOL], stream=True
            )
            deltas = [c.choices[0].delta.model_dump(exclude_none=True) async for c in chunks
                      if c.choices]  # fmt: skip
            blocks = [b for d in deltas for b in d.get("thinking_blocks", [])]
            calls = [c for d in deltas for c in d.get("tool_calls", [])]
            call_id = calls[0]["id"]
            function = {"name": "get_weather", "arguments": '{"city": "Paris"}'}
            call = {"id": call_id, "type": "function", "function": function}
            message = {"role": "assistant", "thinking_blocks": blocks, "tool_calls": [call]}
        else:
            first = await client.chat.completions.create(
                model=MODEL, messages=QUESTION, tools=[WEATHER_TOOL]
            )
            message = first.choices[0].message.model_dump(exclude_none=True)
            blocks = message["thinking_blocks"]
            call_id = message["tool_calls"][0]["id"]
        assert blocks == [{"type": "redacted_thinking", "data": "opaque"}]
        await client.chat.completions.create(
            model=MODEL,
            messages=[
                *QUESTION,
                message,
                {"role": "tool", "tool_call_id": call_id, "content": "ok"},
            ],
            tools=[WEATHER_TOOL],
        )
    assistant = next(m for m in api.requests[-1].messages if m["role"] == "assistant")
    assert assistant["content"][0] == {"type": "redacted_thinking", "data": "opaque"}
    assert [b["type"] for b in assistant["content"]] == ["redacted_thinking", "tool_use"]


async def test_an_openai_agents_sdk_agent_runs_its_function_tool_through_the_gateway() -> None:
    import agents

    agents.set_tracing_disabled(True)
    runs: list[str] = []

    # The Agents SDK's default: strict: true on every tool (held by checking each call).
    @agents.function_tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        runs.append(city)
        return "sunny, 21 °C"

    async with ScriptedMessagesAPI(weather_model) as api, gateway(api.settings()) as (_, client):
        agent = agents.Agent(
            name="weather",
            instructions="You answer weather questions.",
            tools=[get_weather],
            model=agents.OpenAIChatCompletionsModel(model=MODEL, openai_client=client),
        )
        result = await agents.Runner.run(agent, "Weather in Paris?")
    assert result.final_output == "Paris: sunny, 21 °C."
    assert runs == ["Paris"]
    first, second = api.requests
    assert first.tool_names == ["mcp__sf__get_weather"]
    assert "You answer weather questions." in json.dumps(first.body["system"])
    assert [b["tool_use_id"] for b in second.tool_results()] == [
        b["id"] for b in second.tool_uses()
    ]


# --------------------------------------------------------------------------- request options


async def test_sampling_and_one_call_per_turn_reach_the_request_as_written() -> None:
    """As LlamaIndex sends them (temperature 0.1 by default, `parallel_tool_calls=False` in
    `structured_predict`); `top_k` is not OpenAI's, but clients send it in `extra_body`."""
    async with (
        ScriptedMessagesAPI([reply(text("Sunny."))]) as api,
        gateway(api.settings()) as (_, client),
    ):
        await client.chat.completions.create(
            model=MODEL,
            messages=QUESTION,
            tools=[WEATHER_TOOL],
            temperature=0.1,
            top_p=0.9,
            parallel_tool_calls=False,
            extra_body={"top_k": 5},
        )
    sent = api.requests[0].body
    assert (sent["temperature"], sent["top_p"], sent["top_k"]) == (0.1, 0.9, 5)
    assert sent["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_drop_params_leaves_sampling_out_and_says_so_in_the_warnings_header(
    stream: bool,
) -> None:
    """`--drop-params`, for frameworks that always send a temperature: nothing of it is sent,
    and the client is told, as LiteLLM's `drop_params` does."""
    async with (
        ScriptedMessagesAPI([reply(text("Sunny."))]) as api,
        gateway(api.settings(), drop_params=True) as (_, client),
    ):
        raw = await client.chat.completions.with_raw_response.create(
            model=MODEL,
            messages=QUESTION,
            temperature=0.1,
            top_p=0.9,
            seed=7,
            extra_body={"top_k": 5},
            stream=stream,
        )
        if stream:
            _ = [chunk async for chunk in raw.parse()]
    warnings = json.loads(raw.headers[WARNINGS_HEADER])
    assert [w["code"] for w in warnings] == ["parameter-dropped"] * 4
    named = {w["message"].split("'")[1] for w in warnings}
    assert named == {"temperature", "top_p", "top_k", "seed"}
    assert not {"temperature", "top_p", "top_k", "seed"} & api.requests[0].body.keys()


# --------------------------------------------------------------------------- agent frameworks

#: What smolagents' ToolCallingAgent sends on every request (its ReAct-style stop sequences).
SMOLAGENTS_STOP = ["Observation:", "Calling tools:"]
#: A reply that goes on past a stop sequence (split across the scripted API's SSE chunks) and
#: calls a tool after it.
PAST_THE_STOP = reply(
    text("Thought: I know it.\nObservation: made up"), tool_use("get_weather", {"city": "Paris"})
)


async def test_stop_ends_the_answer_before_the_first_stop_sequence() -> None:
    async with (
        ScriptedMessagesAPI([PAST_THE_STOP]) as api,
        gateway(api.settings()) as (_, client),
    ):
        answer = await client.chat.completions.create(
            model=MODEL, messages=QUESTION, tools=[WEATHER_TOOL], stop=SMOLAGENTS_STOP
        )
    choice = answer.choices[0]
    assert choice.message.content == "Thought: I know it.\n"
    assert choice.message.tool_calls is None, "written after the stop: never generated"
    assert choice.finish_reason == "stop"
    assert api.requests[0].tool_names == ["mcp__sf__get_weather"]


async def test_a_streamed_answer_stops_before_a_stop_sequence_split_across_chunks() -> None:
    async with (
        ScriptedMessagesAPI([PAST_THE_STOP]) as api,
        gateway(api.settings()) as (_, client),
    ):
        stream = await client.chat.completions.create(
            model=MODEL, messages=QUESTION, tools=[WEATHER_TOOL], stop="Observation:", stream=True
        )
        chunks = [chunk async for chunk in stream]
    deltas = [c.choices[0].delta for c in chunks]
    assert "".join(d.content or "" for d in deltas) == "Thought: I know it.\n"
    assert not any(d.tool_calls for d in deltas)
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert len(api.requests) == 1


#: AutoGen's AssistantAgent after running a tool (reflect_on_tool_use, the default with an
#: output_content_type): the conversation with the call and its result, and no `tools`, as it
#: sends it (autogen-ext 0.7.5).
AUTOGEN_REFLECTION = {
    "model": MODEL,
    "stream": False,
    "messages": [
        {"content": "You are a helpful AI assistant.", "role": "system"},
        {"role": "user", "name": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "toolu_1",
                    "function": {"arguments": '{"city": "Paris"}', "name": "get_weather"},
                    "type": "function",
                }
            ],
            "content": "Let me check.",
        },
        {"content": "Paris: 18 C", "role": "tool", "tool_call_id": "toolu_1"},
    ],
}


async def test_a_history_with_tool_calls_needs_no_tools_the_model_answers_in_text() -> None:
    # OpenAI's API takes it; the Messages API refuses tool calls without tools, so the called
    # tools are defined again with tool_choice "none" (sent as the API's own).
    async with (
        ScriptedMessagesAPI([reply(text("Paris: 18 C."))]) as api,
        gateway(api.settings()) as (base_url, _),
        # httpx's default 5 s read timeout: a loaded machine's CLI can take longer to answer.
        httpx.AsyncClient(timeout=60) as http,
    ):
        response = await http.post(f"{base_url}/v1/chat/completions", json=AUTOGEN_REFLECTION)
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    assert (choice["message"]["content"], choice["finish_reason"]) == ("Paris: 18 C.", "stop")
    [request] = api.requests
    assert request.tool_names == ["mcp__sf__get_weather"]
    assert [r.as_dict() for r in request.results()] == [
        {"tool_use_id": "toolu_1", "is_error": False, "text": "Paris: 18 C"}
    ]
    assert request.body["tool_choice"] == {"type": "none"}


async def test_a_call_made_anyway_after_a_history_without_tools_is_an_error() -> None:
    script = [reply(tool_use("get_weather", {"city": "Lyon"}))]
    async with (
        ScriptedMessagesAPI(script) as api,
        gateway(api.settings()) as (base_url, _),
        # httpx's default 5 s read timeout: a loaded machine's CLI can take longer to answer.
        httpx.AsyncClient(timeout=60) as http,
    ):
        response = await http.post(f"{base_url}/v1/chat/completions", json=AUTOGEN_REFLECTION)
    assert response.status_code == 502
    assert "tool_choice='none' forbade tool calls" in response.json()["error"]["message"]
    assert len(api.requests) == 1


# --------------------------------------------------------------------------- errors


async def test_a_failure_after_the_answer_began_is_an_error_chunk_without_a_finish() -> None:
    """A finish chunk (`finish_reason: "stop"`) came right before the error: a client that
    ends at the finish took the cut text for the whole answer. As on /v1/messages, an answer
    that fails has no finish."""
    # The stream is cut after some text; the CLI's non-streaming fallback then fails.
    script = [fault("drop_mid_stream", events=4), http_error(500, "upstream broke")]
    async with ScriptedMessagesAPI(script) as api, gateway(api.settings()) as (_, client):
        stream = await client.chat.completions.create(
            model=MODEL,
            messages=QUESTION,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = []
        with pytest.raises(openai.APIError) as info:
            async for chunk in stream:
                chunks.append(chunk)
    assert any(c.choices and c.choices[0].delta.content for c in chunks), "the answer had begun"
    assert [c.choices[0].finish_reason for c in chunks if c.choices] == [None] * len(chunks)
    assert "upstream broke" in info.value.message
    assert len(api.requests) == 2


async def test_api_failures_keep_their_meaning_in_the_openai_shape() -> None:
    script = [http_error(429, retry_after=7), http_error(529), http_error(401)]
    async with (
        ScriptedMessagesAPI(script) as api,
        gateway(api.settings()) as (base_url, client),
    ):
        with pytest.raises(openai.RateLimitError) as limited:
            await client.chat.completions.create(model=MODEL, messages=QUESTION)
        with pytest.raises(openai.InternalServerError) as overloaded:
            await client.chat.completions.create(model=MODEL, messages=QUESTION, stream=True)
        with pytest.raises(openai.AuthenticationError) as rejected:
            await client.chat.completions.create(model=MODEL, messages=QUESTION)
        await healthy(base_url)
    assert limited.value.status_code == 429
    assert limited.value.type == "rate_limit_error"
    assert overloaded.value.status_code == 503, "an error before any content keeps its status"
    assert overloaded.value.type == "overloaded_error"
    assert rejected.value.status_code == 401
    assert "not your key" in rejected.value.message


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_an_upstream_rate_limit_passes_its_retry_after_on(stream: bool) -> None:
    """The CLI retries a 429 after its `retry-after` (max_retries=1 here); when the retry is
    limited too, the delay the API asked for is the gateway's `Retry-After`."""
    script = [http_error(429, "slow down", retry_after=2), http_error(429, "slow down")]
    async with (
        ScriptedMessagesAPI(script) as api,
        gateway(api.settings(max_retries=1)) as (base_url, client),
    ):
        with pytest.raises(openai.RateLimitError) as info:
            if stream:
                chunks = await client.chat.completions.create(
                    model=MODEL, messages=QUESTION, stream=True
                )
                _ = [chunk async for chunk in chunks]
            else:
                await client.chat.completions.create(model=MODEL, messages=QUESTION)
        await healthy(base_url)
    assert len(api.requests) == 2, "the CLI retried once"
    assert info.value.status_code == 429
    assert int(info.value.response.headers["retry-after"]) >= 2


def refuse_temperature(_request: RecordedRequest) -> HTTPErrorReply:
    """The API's answer to a temperature on Opus 4.7 and later (a function: the CLI tries a
    plain 400 three times)."""
    return http_error(400, "temperature is deprecated for this model.")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_an_api_refusal_of_a_sampling_setting_is_a_400_naming_it(stream: bool) -> None:
    async with (
        ScriptedMessagesAPI(refuse_temperature) as api,
        gateway(api.settings()) as (_, client),
    ):
        with pytest.raises(openai.BadRequestError) as info:
            answer = await client.chat.completions.create(
                model=MODEL, messages=QUESTION, temperature=0.3, stream=stream
            )
            if stream:
                _ = [chunk async for chunk in answer]
    assert (info.value.type, info.value.param) == ("invalid_request_error", "temperature")
    assert "temperature is deprecated for this model" in info.value.message
    assert {r.body["temperature"] for r in api.requests} == {0.3}


async def test_a_prompt_too_long_is_context_length_exceeded() -> None:
    script = [http_error(400, "prompt is too long: 250000 tokens > 200000 maximum")]
    async with ScriptedMessagesAPI(script) as api, gateway(api.settings()) as (_, client):
        with pytest.raises(openai.BadRequestError) as info:
            await client.chat.completions.create(model=MODEL, messages=QUESTION)
    assert info.value.code == "context_length_exceeded"
    assert info.value.param == "messages"
    assert "Prompt is too long" in info.value.message
    assert len(api.requests) == 1


async def raw_post(base_url: str, body: bytes, **headers: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=60) as http:
        return await http.post(
            f"{base_url}/v1/chat/completions",
            content=body,
            headers={"content-type": "application/json", **headers},
        )


def assert_openai_error(response: httpx.Response, status: int, error_type: str) -> dict[str, Any]:
    assert response.status_code == status
    error: dict[str, Any] = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == error_type
    return error


async def test_malformed_json_is_a_400_and_the_gateway_stays_up() -> None:
    async with ScriptedMessagesAPI([]) as api, gateway(api.settings()) as (base_url, _):
        response = await raw_post(base_url, b'{"model": "x", "messages": [')
        listed = await raw_post(base_url, b"[1, 2]")
        await healthy(base_url)
    assert (
        "not valid JSON" in assert_openai_error(response, 400, "invalid_request_error")["message"]
    )
    assert "JSON object" in assert_openai_error(listed, 400, "invalid_request_error")["message"]
    assert api.all_requests == []


async def test_a_deeply_nested_body_is_a_400_not_a_500() -> None:
    # json.loads raised RecursionError, answered 500 with a traceback in the log.
    deep = "[" * 2000 + "]" * 2000
    body = json.dumps({"model": MODEL, "messages": QUESTION, "metadata": {"x": None}})
    async with ScriptedMessagesAPI([]) as api, gateway(api.settings()) as (base_url, _):
        response = await raw_post(base_url, body.replace("null", deep).encode())
        await healthy(base_url)
    error = assert_openai_error(response, 400, "invalid_request_error")
    assert error["message"] == (
        f"the request body nests deeper than {MAX_JSON_DEPTH} levels, the gateway's limit; "
        f"flatten it"
    )
    assert error["code"] == "json_too_deep"
    assert api.all_requests == []


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16", "utf-32"])
async def test_a_body_not_in_utf8_is_a_400_before_its_shape_is_read(encoding: str) -> None:
    # json.loads reads UTF-16 and UTF-32 bytes, but the shape check scans the bytes as UTF-8,
    # where an escaped quote pairs the string quotes wrongly: this body, nested 600 deep,
    # passed the depth limit and was parsed.
    deep = "[" * 600 + "]" * 600
    metadata = {"quote": '"', "x": None, "after": "a string"}
    body = json.dumps({"model": MODEL, "metadata": metadata, "messages": QUESTION})
    async with ScriptedMessagesAPI([]) as api, gateway(api.settings()) as (base_url, _):
        response = await raw_post(base_url, body.replace("null", deep).encode(encoding))
        await healthy(base_url)
    error = assert_openai_error(response, 400, "invalid_request_error")
    assert error["message"] == (
        "the request body is not UTF-8, as JSON must be (RFC 8259); send UTF-8"
    )
    assert api.all_requests == []


async def test_a_utf8_body_with_a_byte_order_mark_is_read() -> None:
    body = json.dumps({"model": MODEL, "messages": QUESTION}).encode("utf-8-sig")
    async with (
        ScriptedMessagesAPI([reply(text("Hello."))]) as api,
        gateway(api.settings()) as (base_url, _),
    ):
        response = await raw_post(base_url, body)
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "Hello."


def _asking_about(image_url: dict[str, Any]) -> list[dict[str, Any]]:
    """A user message asking about one image (`image_url` as the client sends it)."""
    content = [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": image_url},
    ]
    return [{"role": "user", "content": content}]


BAD_REQUESTS: list[tuple[str, dict[str, Any], str, str | None]] = [
    (
        "unknown role",
        {"messages": [{"role": "robot", "content": "hi"}]},
        "unknown role 'robot'",
        None,
    ),
    (
        "invalid tool schema",
        {
            "messages": QUESTION,
            "tools": [{"type": "function", "function": {"name": "x", "parameters": {"type": 3}}}],
        },
        "tool 'x'",
        None,
    ),
    (
        "bad tool name",
        {"messages": QUESTION, "tools": [{"type": "function", "function": {"name": "a b"}}]},
        "tool name 'a b'",
        None,
    ),
    (
        "temperature not a number",
        {"messages": QUESTION, "temperature": "0.1"},
        "a number",
        "temperature",
    ),
    ("n > 1", {"messages": QUESTION, "n": 2}, "one choice", "n"),
    ("stop not text", {"messages": QUESTION, "stop": [3]}, "list of strings", "stop"),
    (
        "stop with response_format",
        {"messages": QUESTION, "stop": "x", "response_format": {"type": "json_object"}},
        "stop_sequences cannot be honoured with output_schema",  # the provider's refusal
        None,
    ),
    ("logprobs", {"messages": QUESTION, "logprobs": True}, "log probabilities", "logprobs"),
    (
        "unknown parameter",
        {"messages": QUESTION, "extra_body": {"frobnicate": 1}},
        "frobnicate",
        "frobnicate",
    ),
    (
        "tool_choice naming no tool",
        {
            "messages": QUESTION,
            "tools": [WEATHER_TOOL],
            "tool_choice": {"type": "function", "function": {"name": "nope"}},
        },
        "'nope'",
        "tool_choice",
    ),
    (
        "allowed_tools naming no tool",
        {
            "messages": QUESTION,
            "tools": [WEATHER_TOOL],
            "tool_choice": {
                "type": "allowed_tools",
                "allowed_tools": {
                    "mode": "auto",
                    "tools": [{"type": "function", "function": {"name": "nope"}}],
                },
            },
        },
        "'nope'",
        "tool_choice.allowed_tools",
    ),
    (
        "allowed_tools with an unknown mode",
        {
            "messages": QUESTION,
            "tools": [WEATHER_TOOL],
            "tool_choice": {
                "type": "allowed_tools",
                "allowed_tools": {"mode": "none", "tools": [WEATHER_TOOL]},
            },
        },
        "'auto' or 'required'",
        "tool_choice.allowed_tools.mode",
    ),
    (
        "a system message mid-conversation",
        {
            "messages": [
                *QUESTION,
                {"role": "assistant", "content": "Paris?"},
                {"role": "developer", "content": "From now on, answer in French."},
                {"role": "user", "content": "Yes."},
            ]
        },
        "cannot be kept in its place",
        None,
    ),
    (
        "participant names",
        {
            "messages": [
                {"role": "user", "content": "Hi", "name": "alice"},
                {"role": "assistant", "content": "Hello."},
                {"role": "user", "content": "Weather in Paris?", "name": "bob"},
            ]
        },
        "Put the speaker into the content",
        "messages[2].name",
    ),
    (
        "an unknown message field",
        {"messages": [{"role": "user", "content": "Weather in Paris?", "mood": "curious"}]},
        "not a field of a user message",
        "messages[0].mood",
    ),
    (
        "image detail low",
        {"messages": _asking_about({"url": PIXEL_URL, "detail": "low"})},
        "no low-detail mode",
        "messages[0].content[1].image_url.detail",
    ),
    (
        "a call without its result",
        {
            "messages": [
                *QUESTION,
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "user", "content": "and?"},
            ],
            "tools": [WEATHER_TOOL],
        },
        "c1",
        None,
    ),
    (
        "history calls without tools, a call required",
        {
            "tool_choice": "required",
            "messages": [
                *QUESTION,
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
            ],
        },
        "tool_choice 'required' needs at least one tool",  # the core's words, on every door
        "tool_choice",
    ),
    (
        "max_tokens contradicting max_completion_tokens",
        {"messages": QUESTION, "max_tokens": 50, "max_completion_tokens": 4000},
        "4000 contradicts max_tokens 50",
        "max_completion_tokens",
    ),
    (
        "stream_options without stream",
        {"messages": QUESTION, "stream_options": {"include_usage": True}},
        "only allowed when 'stream' is true",
        "stream_options",
    ),
    (
        "image data that is not base64",
        {"messages": _asking_about({"url": "data:image/png;base64,@@@not-base64@@@"})},
        "message 0 (user), block 1: the image data is not valid base64",
        None,
    ),
    (
        "a data URL that is no image",
        {"messages": _asking_about({"url": "data:application/pdf;base64,JVBERi0xLjQ="})},
        "image media type 'application/pdf' is not one the Messages API takes",
        None,
    ),
]


@pytest.mark.parametrize(
    ("body", "says", "param"),
    [case[1:] for case in BAD_REQUESTS],
    ids=[case[0] for case in BAD_REQUESTS],
)
async def test_bad_input_is_a_400_naming_the_problem(
    body: dict[str, Any], says: str, param: str | None
) -> None:
    async with ScriptedMessagesAPI([]) as api, gateway(api.settings()) as (base_url, client):
        with pytest.raises(openai.BadRequestError) as info:
            await client.chat.completions.create(model=MODEL, **body)
        await healthy(base_url)
    assert info.value.type == "invalid_request_error"
    assert says in info.value.message
    assert info.value.param == param
    assert api.all_requests == [], "refused before any process started"


async def test_messages_sent_back_as_openai_python_dumps_them_reach_the_model() -> None:
    """`message.model_dump()` has every field of an answer (`refusal`, `annotations`, `audio`,
    `function_call` null): nothing in it is refused, and what it says reaches the model; a tool
    message's `name` repeats its call id."""
    script = [reply(tool_use("get_weather", {"city": "Paris"})), reply(text("Sunny."))]
    async with ScriptedMessagesAPI(script) as api, gateway(api.settings()) as (_, client):
        first = await client.chat.completions.create(
            model=MODEL, messages=QUESTION, tools=[WEATHER_TOOL]
        )
        dumped = first.choices[0].message.model_dump()
        assert {"refusal", "annotations", "audio", "function_call"} <= set(dumped)
        call_id = dumped["tool_calls"][0]["id"]
        result = {
            "role": "tool",
            "tool_call_id": call_id,
            "name": "get_weather",
            "content": "21 °C",
        }
        second = await client.chat.completions.create(
            model=MODEL, messages=[*QUESTION, dumped, result], tools=[WEATHER_TOOL]
        )
    assert second.choices[0].message.content == "Sunny."
    sent = api.requests[1]
    assert [(b["id"], b["input"]) for b in sent.tool_uses()] == [(call_id, {"city": "Paris"})]
    assert [(r["tool_use_id"], result_text(r)) for r in sent.tool_results()] == [(call_id, "21 °C")]


@pytest.mark.parametrize("detail", ["auto", "high"])
async def test_an_image_with_detail_auto_or_high_reaches_the_model(detail: str) -> None:
    async with (
        ScriptedMessagesAPI([reply(text("A pixel."))]) as api,
        gateway(api.settings()) as (_, client),
    ):
        answer = await client.chat.completions.create(
            model=MODEL,
            messages=_asking_about({"url": PIXEL_URL, "detail": detail}),  # type: ignore[arg-type]
        )
    assert answer.choices[0].message.content == "A pixel."
    (image,) = api.requests[0].blocks("image")
    assert image["source"]["type"] == "base64"
    assert image["source"]["media_type"] == "image/png"
    assert PIXEL_URL.endswith(image["source"]["data"])


UNSIGNED = [
    *QUESTION,
    {"role": "assistant", "content": "Which Paris?", "thinking_blocks": [
        {"type": "thinking", "thinking": "Paris, Texas?"}]},
    {"role": "user", "content": "France."},
]  # fmt: skip


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_warning_of_the_query_is_in_the_sf_provider_warnings_header(stream: bool) -> None:
    """Thinking without a signature cannot go back as thinking: it is replayed as text, and the
    client is told so (`history-flattened`), streamed or not."""
    async with (
        ScriptedMessagesAPI([reply(text("Sunny."))]) as api,
        gateway(api.settings()) as (_, client),
    ):
        raw = await client.chat.completions.with_raw_response.create(
            model=MODEL, messages=UNSIGNED, stream=stream
        )
        if stream:
            chunks = raw.parse()  # the legacy raw response: parse() is not awaited
            content = "".join([c.choices[0].delta.content or "" async for c in chunks
                               if c.choices])  # fmt: skip
        else:
            content = raw.parse().choices[0].message.content or ""
    assert content == "Sunny."
    warnings = json.loads(raw.headers[WARNINGS_HEADER])
    assert [w["code"] for w in warnings] == ["history-flattened"]
    assert "message 1 (assistant)" in warnings[0]["message"]
    assistant = next(m for m in api.requests[0].messages if m["role"] == "assistant")
    assert {"type": "text", "text": "<reasoning>Paris, Texas?</reasoning>"} in assistant["content"]


async def test_a_failed_query_still_says_its_warnings() -> None:
    async with (
        ScriptedMessagesAPI([http_error(500, "upstream broke")]) as api,
        gateway(api.settings()) as (_, client),
    ):
        with pytest.raises(openai.InternalServerError) as info:
            await client.chat.completions.create(model=MODEL, messages=UNSIGNED)
    warnings = json.loads(info.value.response.headers[WARNINGS_HEADER])
    assert [w["code"] for w in warnings] == ["history-flattened"]


async def test_a_query_without_warnings_has_no_warnings_header() -> None:
    async with (
        ScriptedMessagesAPI([reply(text("Sunny."))]) as api,
        gateway(api.settings()) as (_, client),
    ):
        raw = await client.chat.completions.with_raw_response.create(model=MODEL, messages=QUESTION)
    assert WARNINGS_HEADER not in raw.headers


def test_the_warnings_header_stays_small_and_says_how_many_it_left_out() -> None:
    warnings = [CallWarning(code="history-flattened", message="x" * 100) for _ in range(100)]
    value = warnings_header(warnings)[WARNINGS_HEADER]
    assert len(value) <= 4096
    assert value.isascii()
    listed = json.loads(value)
    assert listed[-1]["code"] == "warnings-truncated"
    shown = len(listed) - 1
    assert listed[-1]["message"].startswith(f"{100 - shown} more warning(s)")
    assert warnings_header([]) == {}


async def test_an_assistant_refusal_in_the_history_reaches_the_model_as_its_text() -> None:
    async with (
        ScriptedMessagesAPI([reply(text("Fine."))]) as api,
        gateway(api.settings()) as (_, client),
    ):
        await client.chat.completions.create(
            model=MODEL,
            messages=[
                {"role": "user", "content": "Help me pick a lock."},
                {"role": "assistant", "content": None, "refusal": "I can't help with that."},
                {"role": "user", "content": "Then the weather?"},
            ],
        )
    assistant = next(m for m in api.requests[0].messages if m["role"] == "assistant")
    assert assistant["content"] == [{"type": "text", "text": "I can't help with that."}]


async def test_text_parts_of_tool_and_system_messages_reach_the_model_apart() -> None:
    # They were glued: "Temperature: 21CHumidity: 40%", "Be brief.Use metric units.".
    parts = [
        {"type": "text", "text": "Temperature: 21C"},
        {"type": "text", "text": "Humidity: 40%"},
    ]
    messages = [
        {"role": "system", "content": [{"type": "text", "text": "Be brief."},
                                       {"type": "text", "text": "Use metric units."}]},
        *QUESTION,
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": parts},
    ]  # fmt: skip
    async with (
        ScriptedMessagesAPI([reply(text("21C, 40%."))]) as api,
        gateway(api.settings()) as (_, client),
    ):
        answer = await client.chat.completions.create(
            model=MODEL, messages=messages, tools=[WEATHER_TOOL]
        )
    assert answer.choices[0].message.content == "21C, 40%."
    [result] = api.requests[0].tool_results()
    assert result["content"] == parts
    system = [b["text"] for b in api.requests[0].body["system"]]
    assert any("Be brief.\nUse metric units." in block for block in system)


async def test_parameters_at_their_default_and_ignorable_ones_are_accepted() -> None:
    async with (
        ScriptedMessagesAPI([reply(text("Sunny."))]) as api,
        gateway(api.settings()) as (_, client),
    ):
        answer = await client.chat.completions.create(
            model=MODEL,
            messages=QUESTION,
            n=1,
            logprobs=False,
            user="u-1",
            metadata={"team": "a"},
            max_completion_tokens=50,
        )
    assert answer.choices[0].message.content == "Sunny."
    assert api.requests[0].body["max_tokens"] == 50


async def test_an_oversized_body_is_a_413() -> None:
    async with (
        ScriptedMessagesAPI([]) as api,
        gateway(api.settings(), max_body_bytes=4096) as (base_url, client),
    ):
        with pytest.raises(openai.APIStatusError) as info:
            await client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "x" * 10_000}]
            )
        await healthy(base_url)
    assert info.value.status_code == 413
    assert "4,096 bytes" in info.value.message
    assert api.all_requests == []


async def test_a_wrong_or_missing_key_is_a_401_and_the_right_one_passes() -> None:
    async with (
        ScriptedMessagesAPI([reply(text("Sunny."))]) as api,
        gateway(api.settings(), api_keys=["key-one", "key-two"]) as (base_url, client),
    ):
        with pytest.raises(openai.AuthenticationError) as wrong:
            await client.chat.completions.create(model=MODEL, messages=QUESTION)
        async with httpx.AsyncClient(timeout=60) as http:
            missing = await http.get(f"{base_url}/v1/models")
            by_header = await http.get(f"{base_url}/v1/models", headers={"x-api-key": "key-one"})
        right = client.with_options(api_key="key-two")
        answer = await right.chat.completions.create(model=MODEL, messages=QUESTION)
        await healthy(base_url)  # /healthz needs no key: load balancers probe it
    assert wrong.value.status_code == 401
    assert wrong.value.code == "invalid_api_key"
    assert_openai_error(missing, 401, "authentication_error")
    assert by_header.status_code == 200
    assert answer.choices[0].message.content == "Sunny."
    assert len(api.requests) == 1


async def test_a_full_gateway_answers_429_with_retry_after() -> None:
    release = anyio.Event()

    async def slow_model(_request: RecordedRequest) -> Reply:
        await release.wait()
        return reply(text("Sunny."))

    answers: list[str | None] = []
    async with (
        ScriptedMessagesAPI(slow_model) as api,
        gateway(api.settings(), max_concurrency=1, retry_after=3) as (base_url, client),
    ):

        async def first() -> None:
            answer = await client.chat.completions.create(model=MODEL, messages=QUESTION)
            answers.append(answer.choices[0].message.content)

        async with anyio.create_task_group() as group:
            group.start_soon(first)
            for _ in range(600):  # until the first request holds the one slot (a bound, no clock)
                if api.requests:
                    break
                await anyio.sleep(0.05)
            with pytest.raises(openai.RateLimitError) as info:
                await client.chat.completions.create(model=MODEL, messages=QUESTION)
            release.set()
        await healthy(base_url)
    assert info.value.status_code == 429
    assert info.value.response.headers["retry-after"] == "3"
    assert info.value.code == "concurrency_limit"
    assert answers == ["Sunny."]
    assert len(api.requests) == 1


async def test_a_client_that_leaves_stops_the_query_and_its_cli() -> None:
    release = anyio.Event()

    async def never(_request: RecordedRequest) -> Reply:
        await release.wait()
        return reply(text("too late"))

    async with (
        ScriptedMessagesAPI(never) as api,
        gateway(api.settings(warm_processes=0)) as (base_url, client),
    ):
        async with anyio.create_task_group() as group:

            async def ask() -> None:
                await client.chat.completions.create(model=MODEL, messages=QUESTION, stream=True)

            group.start_soon(ask)
            for _ in range(600):
                if api.requests:
                    break
                await anyio.sleep(0.05)
            assert cli_processes(), "the query's CLI runs"
            group.cancel_scope.cancel()  # the client hangs up
        await no_cli_left()
        assert cli_processes() == []
        for _ in range(100):  # the slot comes back once the query is stopped
            if (await health(base_url))["in_flight"] == 0:
                break
            await anyio.sleep(0.05)
        await healthy(base_url)
        release.set()


async def test_shutdown_stops_every_cli() -> None:
    async with ScriptedMessagesAPI([reply(text("Sunny."))]) as api:
        async with gateway(api.settings(warm_processes=2)) as (_, client):
            await client.chat.completions.create(model=MODEL, messages=QUESTION)
            assert cli_processes(), "a warm process is kept for the next request"
        await no_cli_left()
        assert cli_processes() == []


async def test_models_and_unknown_routes() -> None:
    async with (
        ScriptedMessagesAPI([]) as api,
        gateway(api.settings(model="opus")) as (base_url, client),
    ):
        models = await client.models.list()
        async with httpx.AsyncClient(timeout=60) as http:
            anthropic_style = await http.get(
                f"{base_url}/v1/models", headers={"anthropic-version": "2023-06-01"}
            )
            missing = await http.get(f"{base_url}/v1/nothing")
    assert [m.id for m in models.data] == ["opus", "sonnet", "haiku"]
    assert [m["type"] for m in anthropic_style.json()["data"]] == ["model"] * 3
    assert_openai_error(missing, 404, "not_found_error")


async def test_a_model_is_retrieved_and_an_unknown_one_is_a_404_in_the_clients_shape() -> None:
    async with (
        ScriptedMessagesAPI([]) as api,
        gateway(api.settings()) as (base_url, client),
    ):
        sonnet = await client.models.retrieve("sonnet")
        with pytest.raises(openai.NotFoundError) as unknown:
            await client.models.retrieve("gpt-4o")
        async with httpx.AsyncClient(timeout=60) as http:
            anthropic_headers = {"anthropic-version": "2023-06-01"}
            as_anthropic = await http.get(f"{base_url}/v1/models/gpt-4o", headers=anthropic_headers)
            by_x_api_key = await http.get(
                f"{base_url}/v1/models/gpt-4o", headers={"x-api-key": "k"}
            )
            found = await http.get(f"{base_url}/v1/models/haiku", headers=anthropic_headers)
    assert (sonnet.id, sonnet.object) == ("sonnet", "model")
    assert unknown.value.code == "model_not_found"
    assert "'gpt-4o' is not listed" in unknown.value.message
    for response in (as_anthropic, by_x_api_key):
        assert response.status_code == 404
        body = response.json()
        assert body["type"] == "error"
        assert body["error"]["type"] == "not_found_error"
        assert "'gpt-4o' is not listed" in body["error"]["message"]
    assert found.json()["type"] == "model" and found.json()["id"] == "haiku"


# --------------------------------------------------------------------------- the command


def test_a_public_host_without_keys_is_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from sf_provider.cli import main

    monkeypatch.delenv(SF_KEYS, raising=False)
    assert main(["gateway", "--host", "0.0.0.0"]) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert "--host 0.0.0.0 is reachable from other machines, and no API key is set" in said
    assert "anyone there could spend your Claude account" in said
    assert f"Pass --api-key KEY (or set {SF_KEYS}), or --allow-no-auth if something" in said


async def test_the_gateway_command_serves_and_its_shutdown_stops_every_cli() -> None:
    """`sf-provider gateway` as a user runs it: the CLI it starts reads the scripted API's
    address from the environment, as it would read ANTHROPIC_API_KEY. With `--drop-params` the
    client's temperature is left out."""
    async with ScriptedMessagesAPI([reply(text("Sunny."))]) as api:
        env = {**os.environ, **offline_env(api.base_url), SF_KEYS: "key-a,key-b"}
        command = [sys.executable, "-m", "sf_provider.cli", "gateway", "--port=0", "--drop-params"]
        async with await anyio.open_process(command, env=env) as gateway_process:
            assert gateway_process.stderr is not None
            log = ""
            async for chunk in gateway_process.stderr:  # uvicorn says where it listens
                log += chunk.decode()
                if "Uvicorn running on" in log:
                    break
            url = log.split("Uvicorn running on ")[1].split()[0]
            client = AsyncOpenAI(base_url=f"{url}/v1", api_key="key-b", max_retries=0)
            answer = await client.chat.completions.create(
                model=MODEL, messages=QUESTION, temperature=0.2
            )
            await client.close()
            ps = ["ps", "-o", "pid=", "--ppid", str(gateway_process.pid)]
            children = (await anyio.run_process(ps, check=False)).stdout.decode().split()
            assert children, "a warm CLI process is kept"
            gateway_process.send_signal(signal.SIGTERM)
            async for chunk in gateway_process.stderr:
                log += chunk.decode()
            # uvicorn re-raises the signal once it has shut down: exit status -SIGTERM.
            assert await gateway_process.wait() in (0, -signal.SIGTERM)
    assert "Application shutdown complete" in log, "the app's shutdown ran: provider closed"
    assert answer.choices[0].message.content == "Sunny."
    assert "temperature" not in api.requests[0].body
    for pid in children:
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid), 0)
