"""The gateway's OpenAI Responses API (`/v1/responses`), through the official `openai` client and
an OpenAI Agents SDK agent on its default model (the Responses API), served by uvicorn on a
loopback port, the real CLI behind it. Each test proves what the client gets from what the
scripted Messages API saw."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import openai
import pytest
from conftest import serving
from openai import AsyncOpenAI
from openai.types.responses import ResponseCreatedEvent
from pydantic import BaseModel

from sf_provider.gateway import GatewaySettings, create_app
from sf_provider.settings import ProviderSettings
from sf_provider.testing import (
    RecordedRequest,
    Reply,
    ScriptedMessagesAPI,
    fault,
    http_error,
    redacted_thinking,
    reply,
    result_text,
    text,
    thinking,
    tool_use,
)

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

MODEL = "claude-sonnet-5-5"
WEATHER_TOOL: Any = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}
# A 1x1 transparent PNG.
PIXEL_URL = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgAAACAAEA5ScN"
    "5AAAAABJRU5ErkJggg=="
)


@asynccontextmanager
async def gateway(
    provider: ProviderSettings, *, key: str = "sk-test", **settings: Any
) -> AsyncIterator[tuple[str, AsyncOpenAI]]:
    """The gateway on a free loopback port: its base URL and an official client for it (no
    retries: every answer is seen as it is)."""
    app = create_app(GatewaySettings(provider=provider, **settings))
    async with serving(app) as base_url:
        client = AsyncOpenAI(base_url=f"{base_url}/v1", api_key=key, max_retries=0)
        try:
            yield base_url, client
        finally:
            await client.close()


def weather_model(request: RecordedRequest) -> Reply:
    """Calls get_weather, then answers from its result."""
    results = [result_text(b) for b in request.tool_results()]
    if not results:
        return reply(tool_use("get_weather", {"city": "Paris"}))
    return reply(text(f"Paris: {results[0].splitlines()[0]}."))


# --------------------------------------------------------------------------- answers


async def test_a_string_input_gets_a_completed_response_with_usage() -> None:
    async with (
        ScriptedMessagesAPI([reply(text("Paris is sunny."))]) as api,
        gateway(api.settings()) as (_, client),
    ):
        response = await client.responses.create(
            model=MODEL, input="Weather in Paris?", instructions="Be brief."
        )
    assert response.object == "response"
    assert response.id.startswith("resp_")
    assert response.status == "completed"
    assert response.model == MODEL
    assert response.output_text == "Paris is sunny."
    [item] = response.output
    assert item.type == "message" and item.role == "assistant"
    assert response.usage is not None
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    assert response.usage.total_tokens == response.usage.input_tokens + response.usage.output_tokens
    assert response.instructions == "Be brief."
    assert response.completed_at is not None and response.completed_at >= response.created_at
    sent = api.requests[0]
    assert sent.body["model"] == MODEL
    assert "Be brief." in json.dumps(sent.body["system"])
    assert "Weather in Paris?" in json.dumps(sent.messages)


async def test_a_two_step_tool_loop_sends_the_output_back_under_the_call_id() -> None:
    async with (
        ScriptedMessagesAPI(weather_model) as api,
        gateway(api.settings()) as (_, client),
    ):
        question: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
        first = await client.responses.create(model=MODEL, input=question, tools=[WEATHER_TOOL])
        [call] = first.output
        assert call.type == "function_call"
        assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Paris"})
        output = {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}
        second = await client.responses.create(
            model=MODEL,
            input=[*question, call.model_dump(exclude_none=True), output],
            tools=[WEATHER_TOOL],
        )
    assert first.status == "completed"
    assert second.output_text == "Paris: sunny."
    offered = api.requests[0].tools
    assert [t["name"] for t in offered] == ["mcp__sf__get_weather"]
    last = api.requests[-1]
    assert [b["id"] for b in last.tool_uses()] == [call.call_id]
    assert [r.as_dict() for r in last.results()] == [
        {"tool_use_id": call.call_id, "is_error": False, "text": "sunny"}
    ]


async def test_streaming_sends_the_documented_event_sequence() -> None:
    script = [
        reply(
            thinking("Let me look."), text("Checking."), tool_use("get_weather", {"city": "Paris"})
        )
    ]
    async with (
        ScriptedMessagesAPI(script) as api,
        gateway(api.settings()) as (_, client),
    ):
        stream = await client.responses.create(
            model=MODEL, input="Weather in Paris?", tools=[WEATHER_TOOL], stream=True
        )
        events = [event async for event in stream]
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    final = events[-1].response  # type: ignore[union-attr]
    assert isinstance(events[0], ResponseCreatedEvent)
    assert events[0].response.completed_at is None, "not before it is"
    assert final.completed_at is not None and final.completed_at >= final.created_at
    assert [i.type for i in final.output] == ["reasoning", "message", "function_call"]
    assert final.output[1].content[0].text == "Checking."
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == "Checking."
    arguments = "".join(
        e.delta for e in events if e.type == "response.function_call_arguments.delta"
    )
    assert json.loads(arguments) == {"city": "Paris"}
    assert len(api.requests) == 1


async def test_a_streamed_item_opens_its_content_before_the_deltas_and_closes_it_after() -> None:
    async with (
        ScriptedMessagesAPI([reply(text("Sunny."))]) as api,
        gateway(api.settings()) as (_, client),
    ):
        stream = await client.responses.create(model=MODEL, input="Weather?", stream=True)
        kinds = [event.type async for event in stream]
    assert kinds[0:2] == ["response.created", "response.in_progress"]
    body = [k for k in kinds[2:-1] if k != "response.output_text.delta"]
    assert body == [
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
    ]
    assert kinds[-1] == "response.completed"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_json_schema_text_format_answers_with_the_object(stream: bool) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
        "required": ["city", "celsius"],
        "additionalProperties": False,
    }
    text_format: Any = {"format": {"type": "json_schema", "name": "weather", "schema": schema}}

    def model(request: RecordedRequest) -> Reply:
        if request.tool_results():
            return reply(text("done"))
        return reply(tool_use("StructuredOutput", {"city": "Paris", "celsius": 18}))

    async with ScriptedMessagesAPI(model) as api, gateway(api.settings()) as (_, client):
        if stream:
            events = await client.responses.create(
                model=MODEL, input="Weather?", text=text_format, stream=True
            )
            done = [e async for e in events][-1]
            assert done.type == "response.completed"
            response = done.response
        else:
            response = await client.responses.create(
                model=MODEL, input="Weather?", text=text_format
            )
    assert json.loads(response.output_text) == {"city": "Paris", "celsius": 18}
    assert [i.type for i in response.output] == ["message"], "the CLI's own call is no output"
    assert api.requests[0].tool_names == ["StructuredOutput"]
    offered = api.requests[0].tools[0]["input_schema"]
    assert (offered["title"], offered["required"]) == ("weather", ["city", "celsius"])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_json_schema_answer_that_calls_a_tool_hands_back_the_call_only(
    stream: bool,
) -> None:
    """With `text.format` a json_schema, every message is the structured output: the words the
    model writes before a call are no message, streamed or not, so `responses.parse` (which
    parses every message as the format) gets the call and no text it cannot parse."""

    class Weather(BaseModel):
        city: str

    script = [reply(text("Let me check."), tool_use("get_weather", {"city": "Paris"}))]
    async with ScriptedMessagesAPI(script) as api, gateway(api.settings()) as (_, client):
        request: Any = {"model": MODEL, "input": "Weather?", "tools": [WEATHER_TOOL]}
        if stream:
            async with client.responses.stream(**request, text_format=Weather) as events:
                response = await events.get_final_response()
        else:
            response = await client.responses.parse(**request, text_format=Weather)
    assert [i.type for i in response.output] == ["function_call"]
    assert response.output_parsed is None
    assert len(api.requests) == 1


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_max_output_tokens_leaves_the_response_incomplete(stream: bool) -> None:
    # Cut at the limit four times: the CLI resumes a cut answer three times, then stops.
    pieces = ["Paris is ", "sunny, ", "warm ", "and"]
    script = [reply(text(p), stop_reason="max_tokens") for p in pieces]
    async with ScriptedMessagesAPI(script) as api, gateway(api.settings()) as (_, client):
        if stream:
            events = [
                e
                async for e in await client.responses.create(
                    model=MODEL, input="Weather?", max_output_tokens=20, stream=True
                )
            ]
            assert events[-1].type == "response.incomplete"
            response = events[-1].response  # type: ignore[union-attr]
        else:
            response = await client.responses.create(
                model=MODEL, input="Weather?", max_output_tokens=20
            )
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.output_text == "".join(pieces)
    assert response.max_output_tokens == 20
    assert api.requests[0].body["max_tokens"] == 20


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_signed_and_redacted_thinking_come_back_as_reasoning_items(stream: bool) -> None:
    script = [
        reply(
            thinking("A tool knows the weather."),
            redacted_thinking("opaque"),
            tool_use("get_weather", {"city": "Paris"}),
        ),
        reply(text("Sunny.")),
    ]
    async with ScriptedMessagesAPI(script) as api, gateway(api.settings()) as (_, client):
        question: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
        if stream:
            events = [
                e
                async for e in await client.responses.create(
                    model=MODEL, input=question, tools=[WEATHER_TOOL], stream=True
                )
            ]
            first = events[-1].response  # type: ignore[union-attr]
            summary = "".join(
                e.delta for e in events if e.type == "response.reasoning_summary_text.delta"
            )
            assert summary == "A tool knows the weather."
        else:
            first = await client.responses.create(model=MODEL, input=question, tools=[WEATHER_TOOL])
        signed, redacted, call = first.output
        assert signed.type == redacted.type == "reasoning"
        assert [s.text for s in signed.summary] == ["A tool knows the weather."]
        assert redacted.summary == []
        output = {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}
        sent_back = [item.model_dump(exclude_none=True) for item in first.output]
        second = await client.responses.create(
            model=MODEL, input=[*question, *sent_back, output], tools=[WEATHER_TOOL]
        )
    assert second.output_text == "Sunny."
    assistant = next(m for m in api.requests[-1].messages if m["role"] == "assistant")
    assert assistant["content"][:2] == [
        {
            "type": "thinking",
            "thinking": "A tool knows the weather.",
            "signature": "scripted-signature",
        },
        {"type": "redacted_thinking", "data": "opaque"},
    ]
    assert assistant["content"][2]["type"] == "tool_use"


async def test_an_image_and_system_and_developer_messages_reach_the_model() -> None:
    items: Any = [
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": [{"type": "input_text", "text": "Answer in French."}]},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What is this?"},
                {"type": "input_image", "image_url": PIXEL_URL, "detail": "auto"},
            ],
        },
    ]
    async with (
        ScriptedMessagesAPI([reply(text("Un pixel."))]) as api,
        gateway(api.settings()) as (_, client),
    ):
        response = await client.responses.create(model=MODEL, input=items)
    assert response.output_text == "Un pixel."
    sent = api.requests[0]
    system = json.dumps(sent.body["system"])
    assert "Be brief." in system and "Answer in French." in system
    [image] = sent.blocks("image")
    assert image["source"]["media_type"] == "image/png"


# --------------------------------------------------------------------------- stored responses


def chained_model(request: RecordedRequest) -> Reply:
    """Calls get_weather for the first question, answers from its result, then answers the
    follow-up from what the conversation holds."""
    if "And tomorrow?" in json.dumps(request.messages):
        return reply(text("Tomorrow too."))
    return weather_model(request)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_previous_response_id_sends_the_model_the_whole_conversation(stream: bool) -> None:
    async def create(client: AsyncOpenAI, **request: Any) -> Any:
        if not stream:
            return await client.responses.create(model=MODEL, tools=[WEATHER_TOOL], **request)
        events = await client.responses.create(
            model=MODEL, tools=[WEATHER_TOOL], stream=True, **request
        )
        return [e async for e in events][-1].response

    async with ScriptedMessagesAPI(chained_model) as api, gateway(api.settings()) as (_, client):
        first = await create(client, input="Weather in Paris?", instructions="Be brief.")
        [call] = first.output
        output = {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}
        second = await create(
            client, input=[output], previous_response_id=first.id, instructions="Be brief."
        )
        third = await create(client, input="And tomorrow?", previous_response_id=second.id)
    assert second.output_text == "Paris: sunny."
    assert second.previous_response_id == first.id
    assert third.output_text == "Tomorrow too."
    # The model got the whole conversation each time, only the new input from the client.
    second_sent, third_sent = api.requests[1], api.requests[2]
    assert "Weather in Paris?" in json.dumps(second_sent.messages)
    assert [b["id"] for b in second_sent.tool_uses()] == [call.call_id]
    assert [r.as_dict() for r in second_sent.results()] == [
        {"tool_use_id": call.call_id, "is_error": False, "text": "sunny"}
    ]
    assert "Be brief." in json.dumps(second_sent.body["system"])
    conversation = json.dumps(third_sent.messages)
    for said in ("Weather in Paris?", "Paris: sunny.", "And tomorrow?"):
        assert said in conversation
    assert [b["id"] for b in third_sent.tool_uses()] == [call.call_id]
    # Instructions are the request's own: the first ones are not carried over.
    assert "Be brief." not in json.dumps(third_sent.body["system"])


def comparable(request: RecordedRequest) -> dict[str, Any]:
    """What the model is given, volatile fields aside (as in test_continuation.py): `metadata`
    names the process, `cache_control` markers sit on the newest blocks, and the CLI's own
    `role: system` entries in `messages` are placed once per process."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "cache_control"}
        return [strip(v) for v in value] if isinstance(value, list) else value

    messages = [m for m in request.messages if m.get("role") != "system"]
    return strip({"messages": messages, **{k: request.body.get(k) for k in ("tools", "system")}})


def process_of(request: RecordedRequest) -> str:
    """The CLI session (one per process) a request came from."""
    return str(json.loads(request.body["metadata"]["user_id"])["session_id"])


def output(call: Any) -> dict[str, Any]:
    """The result of a `function_call` item: its own call id as the output."""
    return {"type": "function_call_output", "call_id": call.call_id, "output": call.call_id}


def three_calls(request: RecordedRequest) -> Reply:
    """Thinks and calls get_weather three times, one step each, then answers."""
    done = len(request.tool_results())
    if done == 3:
        return reply(text("Three cities: " + ", ".join(request.tool_result_texts()) + "."))
    return reply(
        thinking(f"City {done} next.", signature=f"sig-{done}"),
        tool_use("get_weather", {"city": f"C{done}"}, id=f"toolu_{done}"),
    )


async def test_a_chain_of_four_steps_sends_what_stateless_calls_send_on_one_process() -> None:
    """A `previous_response_id` chain replays the stored conversation; the warm pool finds the
    process that holds exactly it and continues there (ADR 0004). The model gets the same
    requests as from four stateless calls with the full input, each on a fresh process."""

    async with ScriptedMessagesAPI(three_calls) as api, gateway(api.settings()) as (_, client):
        raw = await client.responses.with_raw_response.create(
            model=MODEL, input="Weather?", tools=[WEATHER_TOOL]
        )
        served = [raw.headers["sf-provider-process"]]
        chained = [raw.parse()]
        while chained[-1].output[-1].type == "function_call":
            raw = await client.responses.with_raw_response.create(
                model=MODEL,
                input=[output(chained[-1].output[-1])],
                previous_response_id=chained[-1].id,
                tools=[WEATHER_TOOL],
                stream=len(chained) == 2,  # the header comes with a stream too
            )
            served.append(raw.headers["sf-provider-process"])
            parsed = raw.parse()
            if len(chained) == 2:
                async for event in parsed:
                    if event.type == "response.completed":
                        chained.append(event.response)
            else:
                chained.append(parsed)
        chained_requests = api.requests
    async with (
        ScriptedMessagesAPI(three_calls) as api,
        gateway(api.settings(warm_processes=0)) as (_, client),
    ):
        items: list[Any] = [{"role": "user", "content": "Weather?"}]
        stateless = []
        while not stateless or stateless[-1].output[-1].type == "function_call":
            stateless.append(
                await client.responses.create(model=MODEL, input=items, tools=[WEATHER_TOOL])
            )
            items += [i.model_dump(exclude_none=True) for i in stateless[-1].output]
            if stateless[-1].output[-1].type == "function_call":
                items.append(output(stateless[-1].output[-1]))
        stateless_requests = api.requests
    assert chained[-1].output_text == stateless[-1].output_text
    assert chained[-1].output_text == "Three cities: toolu_0, toolu_1, toolu_2."
    assert len(chained_requests) == len(stateless_requests) == 4
    for index, (warm, fresh) in enumerate(zip(chained_requests, stateless_requests, strict=True)):
        assert comparable(warm) == comparable(fresh), f"request {index} differs"
    assert [b["signature"] for b in chained_requests[-1].blocks("thinking")] == [
        "sig-0",
        "sig-1",
        "sig-2",
    ]
    assert len({process_of(r) for r in chained_requests}) == 1, "every step continued"
    assert served == ["fresh", "continued", "continued", "continued"]
    assert len({process_of(r) for r in stateless_requests}) == 4


async def test_a_stored_response_is_read_and_deleted_and_then_unknown() -> None:
    async with (
        ScriptedMessagesAPI([reply(text("Sunny."))]) as api,
        gateway(api.settings()) as (_, client),
    ):
        created = await client.responses.create(model=MODEL, input="Weather?")
        read = await client.responses.retrieve(created.id)
        await client.responses.delete(created.id)
        with pytest.raises(openai.NotFoundError):
            await client.responses.retrieve(created.id)
        with pytest.raises(openai.NotFoundError):
            await client.responses.delete(created.id)
        with pytest.raises(openai.BadRequestError) as continued:
            await client.responses.create(
                model=MODEL, input="And?", previous_response_id=created.id
            )
    assert read.model_dump() == created.model_dump()
    assert continued.value.code == "previous_response_not_found"
    assert continued.value.param == "previous_response_id"
    assert len(api.requests) == 1, "nothing ran for the unknown id"


async def test_reading_a_stored_response_refuses_a_query_it_cannot_honour_by_name() -> None:
    """Only a background response can be streamed again (none is run here), and every response
    holds all the gateway can include: `stream`, another `include`, or any other query of GET
    /v1/responses/{id} is a 400 naming it, never a JSON body the client reads as an empty
    stream."""
    async with (
        ScriptedMessagesAPI([reply(text("Sunny."))]) as api,
        gateway(api.settings()) as (base_url, client),
        httpx.AsyncClient(timeout=60, headers={"authorization": "Bearer sk-test"}) as http,
    ):
        created = await client.responses.create(model=MODEL, input="Weather?")
        read = await client.responses.retrieve(created.id, include=["reasoning.encrypted_content"])
        with pytest.raises(openai.BadRequestError) as streamed:
            await client.responses.retrieve(created.id, stream=True)
        with pytest.raises(openai.BadRequestError) as resumed:
            async with client.responses.stream(response_id=created.id, starting_after=2):
                pass
        with pytest.raises(openai.BadRequestError) as logprobs:
            await client.responses.retrieve(created.id, include=["message.output_text.logprobs"])
        unknown = await http.get(f"{base_url}/v1/responses/{created.id}?page=2")
    assert read.output_text == "Sunny."
    assert streamed.value.param == resumed.value.param == "stream"
    assert "background" in streamed.value.message
    assert logprobs.value.param == "include"
    assert unknown.status_code == 400, unknown.text
    assert unknown.json()["error"]["param"] == "page"
    assert len(api.requests) == 1


async def test_the_store_keeps_as_many_responses_as_the_gateway_is_told() -> None:
    script = [reply(text("One.")), reply(text("Two."))]
    async with (
        ScriptedMessagesAPI(script) as api,
        gateway(api.settings(), response_store_size=1) as (_, client),
    ):
        first = await client.responses.create(model=MODEL, input="One?")
        second = await client.responses.create(model=MODEL, input="Two?")
        with pytest.raises(openai.NotFoundError):
            await client.responses.retrieve(first.id)
        assert (await client.responses.retrieve(second.id)).output_text == "Two."


async def test_store_false_keeps_nothing() -> None:
    async with (
        ScriptedMessagesAPI([reply(text("Sunny."))]) as api,
        gateway(api.settings()) as (_, client),
    ):
        created = await client.responses.create(model=MODEL, input="Weather?", store=False)
        with pytest.raises(openai.NotFoundError):
            await client.responses.retrieve(created.id)
        with pytest.raises(openai.BadRequestError) as continued:
            await client.responses.create(
                model=MODEL, input="And?", previous_response_id=created.id
            )
    assert created.store is False
    assert continued.value.code == "previous_response_not_found"
    assert len(api.requests) == 1


async def test_an_unknown_id_is_a_400_on_create_and_a_404_on_get_and_delete() -> None:
    async with ScriptedMessagesAPI([]) as api, gateway(api.settings()) as (base_url, client):
        with pytest.raises(openai.BadRequestError) as created:
            await client.responses.create(
                model=MODEL, input="And?", previous_response_id="resp_unknown"
            )
        with pytest.raises(openai.NotFoundError) as read:
            await client.responses.retrieve("resp_unknown")
        async with httpx.AsyncClient(timeout=60) as http:
            deleted = await http.delete(f"{base_url}/v1/responses/resp_unknown")
    assert created.value.status_code == 400
    assert created.value.type == "invalid_request_error"
    assert created.value.code == "previous_response_not_found"
    assert read.value.status_code == 404
    assert deleted.status_code == 404
    assert set(deleted.json()["error"]) == {"message", "type", "param", "code"}
    assert api.all_requests == []


async def test_another_key_cannot_read_continue_or_delete_a_response() -> None:
    async with (
        ScriptedMessagesAPI([reply(text("Sunny."))]) as api,
        gateway(api.settings(), key="key-a", api_keys=["key-a", "key-b"]) as (url, first),
        AsyncOpenAI(base_url=f"{url}/v1", api_key="key-b", max_retries=0) as second,
    ):
        created = await first.responses.create(model=MODEL, input="Weather?")
        with pytest.raises(openai.NotFoundError) as read:
            await second.responses.retrieve(created.id)
        with pytest.raises(openai.BadRequestError) as continued:
            await second.responses.create(
                model=MODEL, input="And?", previous_response_id=created.id
            )
        with pytest.raises(openai.NotFoundError):
            await second.responses.delete(created.id)
        with pytest.raises(openai.NotFoundError) as unknown:
            await second.responses.retrieve("resp_unknown")
        kept = await first.responses.retrieve(created.id)
    assert continued.value.code == "previous_response_not_found"
    assert kept.id == created.id, "the owner's response survived the other key's delete"
    # To another key it is exactly an unknown id: the same answer, word for word.
    assert read.value.message.replace(created.id, "ID") == unknown.value.message.replace(
        "resp_unknown", "ID"
    )
    assert len(api.requests) == 1


# --------------------------------------------------------------------------- refusals and errors


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("tools", [{"type": "web_search"}], "web_search"),
        ("tools", [{"type": "file_search", "vector_store_ids": ["vs"]}], "file_search"),
        (
            "tools",
            [{"type": "code_interpreter", "container": {"type": "auto"}}],
            "code_interpreter",
        ),
        ("tools", [{"type": "computer_use_preview"}], "computer_use_preview"),
        ("tools", [{"type": "mcp", "server_label": "x", "server_url": "https://x"}], "mcp"),
        ("tool_choice", {"type": "web_search_preview"}, "web_search_preview"),
        ("background", True, "background"),
        ("truncation", "auto", "truncation"),
        ("include", ["file_search_call.results"], "file_search_call.results"),
        ("text", {"verbosity": "low"}, "text.verbosity"),
        ("conversation", "conv_1", "conversation"),
        ("input", [{"type": "input_file"}], "input_file"),
        ("reasoning", {"effort": "extreme"}, "reasoning.effort"),
    ],
)
async def test_what_cannot_be_honoured_is_a_400_naming_it(
    field: str, value: Any, named: str
) -> None:
    body = {"model": MODEL, "input": "Weather?", field: value}
    async with (
        ScriptedMessagesAPI([]) as api,
        gateway(api.settings()) as (base_url, _),
        httpx.AsyncClient(timeout=60) as http,
    ):
        answer = await http.post(f"{base_url}/v1/responses", json=body)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert named in error["message"]
    assert api.all_requests == []


async def test_drop_params_leaves_out_what_cannot_be_honoured_and_says_so() -> None:
    """`--drop-params` on the Responses API as on Chat Completions: an OpenAI Agents SDK
    `ModelSettings(truncation="auto", verbosity="low", temperature=...)` is served, each setting
    left out with a warning in the `sf-provider-warnings` header."""
    async with (
        ScriptedMessagesAPI([reply(text("Sunny."))]) as api,
        gateway(api.settings(), drop_params=True) as (_, client),
    ):
        raw = await client.responses.with_raw_response.create(
            model=MODEL,
            input="Weather?",
            temperature=0.1,
            truncation="auto",
            service_tier="priority",
            text={"verbosity": "low"},
        )
    response = raw.parse()
    assert response.output_text == "Sunny."
    assert (response.truncation, response.service_tier) == ("disabled", "default")
    warnings = json.loads(raw.headers["sf-provider-warnings"])
    assert {w["code"] for w in warnings} == {"parameter-dropped"}
    named = {w["message"].split("'")[1] for w in warnings}
    assert named == {"temperature", "truncation", "service_tier", "text.verbosity"}
    assert "temperature" not in api.requests[0].body


async def test_an_upstream_error_before_any_content_keeps_its_status() -> None:
    script = [http_error(429, retry_after=7), http_error(529)]
    async with ScriptedMessagesAPI(script) as api, gateway(api.settings()) as (_, client):
        with pytest.raises(openai.RateLimitError) as limited:
            await client.responses.create(model=MODEL, input="Weather?")
        with pytest.raises(openai.InternalServerError) as overloaded:
            await client.responses.create(model=MODEL, input="Weather?", stream=True)
    assert limited.value.status_code == 429
    assert overloaded.value.status_code == 503
    assert len(api.requests) == 2


async def test_a_stream_taken_back_after_it_was_sent_ends_in_response_failed() -> None:
    script = [fault("drop_mid_stream", events=5), reply(text("Five, said twice over."))]
    async with ScriptedMessagesAPI(script) as api, gateway(api.settings()) as (_, client):
        stream = await client.responses.create(model=MODEL, input="Count.", stream=True)
        events = [e async for e in stream]
        error, failed = events[-2:]
        # Kept as OpenAI keeps a failed response: it is read back as the stream ended it.
        read = await client.responses.retrieve(failed.response.id)  # type: ignore[union-attr]
        # It is no answer to go on from: the input is sent again instead.
        with pytest.raises(openai.BadRequestError) as continued:
            await client.responses.create(
                model=MODEL,
                input="Go on.",
                previous_response_id=read.id,
            )
    assert error.type == "error"
    assert "cannot be taken back" in error.message  # type: ignore[union-attr]
    assert failed.type == "response.failed"
    assert failed.response.status == "failed"  # type: ignore[union-attr]
    assert failed.response.error is not None  # type: ignore[union-attr]
    assert read.model_dump() == failed.response.model_dump()  # type: ignore[union-attr]
    assert read.error is not None and read.error.code == failed.response.error.code  # type: ignore[union-attr]
    assert continued.value.code == "previous_response_failed"
    assert continued.value.param == "previous_response_id"
    assert "send its input again with no previous_response_id" in continued.value.message
    assert len(api.requests) == 2, "nothing ran for the failed response's continuation"


# --------------------------------------------------------------------------- item ids


async def item_ids(client: AsyncOpenAI, response_id: str) -> list[str]:
    """The ids of a stored response's input items, oldest first."""
    listed = await client.responses.input_items.list(response_id, order="asc")
    return [item.id for item in listed.data]  # type: ignore[union-attr]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_an_item_reference_is_replaced_by_the_stored_item_it_names(stream: bool) -> None:
    """Items are named by id, input and output alike, and an `item_reference` (its `type` may be
    left out) stands for the item: the model gets the item itself."""
    script = [reply(text("Sunny.")), reply(text("Tomorrow too."))]
    async with ScriptedMessagesAPI(script) as api, gateway(api.settings()) as (_, client):
        if stream:
            events = await client.responses.create(model=MODEL, input="Weather?", stream=True)
            first = [e async for e in events][-1].response  # type: ignore[union-attr]
        else:
            first = await client.responses.create(model=MODEL, input="Weather?")
        [question] = await item_ids(client, first.id)
        [answer] = first.output
        second = await client.responses.create(
            model=MODEL,
            input=[
                {"type": "item_reference", "id": question},
                {"id": answer.id},  # type: ignore[list-item]
                {"role": "user", "content": "And tomorrow?"},
            ],
        )
        kept = (await client.responses.retrieve(first.id)).output[0].id
    assert second.output_text == "Tomorrow too."
    assert kept == answer.id, "an item's id is the same when the response is read back"
    sent = api.requests[1].messages
    assert [(m["role"], m["content"][0]["text"]) for m in sent if m["role"] != "system"] == [
        ("user", "Weather?"),
        ("assistant", "Sunny."),
        ("user", "And tomorrow?"),
    ]


async def test_an_item_reference_no_store_holds_is_a_404_naming_it() -> None:
    """Unknown, another key's, or from a `store: false` response: the same 404 OpenAI gives,
    before anything runs."""
    async with (
        ScriptedMessagesAPI([reply(text("Kept.")), reply(text("Not kept."))]) as api,
        gateway(api.settings(), key="key-a", api_keys=["key-a", "key-b"]) as (url, first),
        AsyncOpenAI(base_url=f"{url}/v1", api_key="key-b", max_retries=0) as second,
    ):
        kept = await first.responses.create(model=MODEL, input="Weather?")
        unkept = await first.responses.create(model=MODEL, input="Weather?", store=False)
        refused = {}
        for name, client, item in [
            ("unknown", first, "msg_1"),
            ("unknown here", first, kept.output[0].id.rsplit("_", 1)[0] + "_9"),
            ("another key's", second, kept.output[0].id),
            ("not stored", first, unkept.output[0].id),
        ]:
            with pytest.raises(openai.NotFoundError) as error:
                await client.responses.create(
                    model=MODEL,
                    input=[
                        {"role": "user", "content": "Hi."},
                        {"type": "item_reference", "id": item},
                    ],
                )
            refused[name] = error.value
    for error in refused.values():
        assert error.code == "item_not_found"
        assert error.param == "input[1]"
        assert "send the item itself" in error.message
    assert "'msg_1' not found" in refused["unknown"].message
    assert len(api.requests) == 2, "nothing ran for a reference to no stored item"


async def test_an_item_given_twice_is_a_400_naming_it() -> None:
    """By reference after the conversation `previous_response_id` continues, which holds it
    already (the mistake OpenAI refuses), or twice in one input: the model would get it twice."""
    async with (
        ScriptedMessagesAPI([reply(text("Sunny."))]) as api,
        gateway(api.settings()) as (_, client),
    ):
        first = await client.responses.create(model=MODEL, input="Weather?")
        again: Any = {"type": "item_reference", "id": first.output[0].id}
        refused = []
        for request in [
            {"input": [again], "previous_response_id": first.id},
            {"input": [{"role": "user", "content": "Weather?"}, again, again]},
        ]:
            with pytest.raises(openai.BadRequestError) as error:
                await client.responses.create(model=MODEL, **request)
            refused.append(error.value)
    assert [e.code for e in refused] == ["duplicate_item"] * 2
    assert [e.param for e in refused] == ["input[0]", "input[2]"]
    assert all(first.output[0].id in e.message for e in refused)
    assert len(api.requests) == 1


# --------------------------------------------------------------------------- input items


async def test_input_items_lists_the_whole_input_a_response_was_given() -> None:
    """OpenAI's list shape; `order` (newest first unless asc), `limit`, `after`; the input
    includes the conversation `previous_response_id` continued."""
    async with (
        ScriptedMessagesAPI(weather_model) as api,
        gateway(api.settings()) as (base_url, client),
        httpx.AsyncClient(timeout=60, headers={"authorization": "Bearer sk-test"}) as http,
    ):
        first = await client.responses.create(model=MODEL, input="Weather?", tools=[WEATHER_TOOL])
        [call] = first.output
        second = await client.responses.create(
            model=MODEL, input=[output(call)], previous_response_id=first.id, tools=[WEATHER_TOOL]
        )
        newest = (await http.get(f"{base_url}/v1/responses/{second.id}/input_items")).json()
        oldest = await client.responses.input_items.list(second.id, order="asc", limit=2)
        rest = await client.responses.input_items.list(
            second.id, order="asc", after=oldest.data[-1].id
        )
        [asked] = await item_ids(client, first.id)
    assert second.output_text == f"Paris: {call.call_id}."
    assert set(newest) == {"object", "data", "first_id", "last_id", "has_more"}
    assert newest["object"] == "list" and newest["has_more"] is False
    assert [i["type"] for i in newest["data"]] == [
        "function_call_output",
        "function_call",
        "message",
    ]
    assert [newest["first_id"], newest["last_id"]] == [newest["data"][0]["id"], asked]
    assert newest["data"][1]["id"] == call.id, "an output item keeps its id as input"
    assert newest["data"][2]["content"] == [{"type": "input_text", "text": "Weather?"}]
    assert [i.id for i in oldest.data] == [asked, call.id]
    assert oldest.has_more is True
    assert [i.id for i in rest.data] == [newest["first_id"]]
    assert rest.has_more is False


@pytest.mark.parametrize(
    ("query", "named"),
    [("limit=0", "limit"), ("order=newest", "order"), ("after=msg_1", "after"), ("page=2", "page")],
)
async def test_input_items_refuses_a_query_it_cannot_honour_by_name(query: str, named: str) -> None:
    async with (
        ScriptedMessagesAPI([reply(text("Sunny."))]) as api,
        gateway(api.settings()) as (base_url, client),
        httpx.AsyncClient(timeout=60, headers={"authorization": "Bearer sk-test"}) as http,
    ):
        created = await client.responses.create(model=MODEL, input="Weather?")
        answer = await http.get(f"{base_url}/v1/responses/{created.id}/input_items?{query}")
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == named


async def test_input_items_of_another_keys_response_is_an_unknown_id() -> None:
    async with (
        ScriptedMessagesAPI([reply(text("Sunny."))]) as api,
        gateway(api.settings(), key="key-a", api_keys=["key-a", "key-b"]) as (url, first),
        AsyncOpenAI(base_url=f"{url}/v1", api_key="key-b", max_retries=0) as second,
    ):
        created = await first.responses.create(model=MODEL, input="Weather?")
        with pytest.raises(openai.NotFoundError) as theirs:
            await second.responses.input_items.list(created.id)
        with pytest.raises(openai.NotFoundError) as unknown:
            await second.responses.input_items.list("resp_unknown")
        assert len((await first.responses.input_items.list(created.id)).data) == 1
    assert theirs.value.message.replace(created.id, "ID") == unknown.value.message.replace(
        "resp_unknown", "ID"
    )


# --------------------------------------------------------------------------- the Agents SDK


def travel_model(request: RecordedRequest) -> Reply:
    """Calls get_weather and get_time together, then answers from both results."""
    results = sorted(result_text(b).splitlines()[0] for b in request.tool_results())
    if not results:
        return reply(
            text("Checking."),
            tool_use("get_weather", {"city": "Paris"}),
            tool_use("get_time", {"city": "Paris"}),
        )
    return reply(text(f"Paris: {' and '.join(results)}."))


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
async def test_an_agents_sdk_agent_on_its_default_model_runs_two_tools(streamed: bool) -> None:
    """The Agents SDK's default model is the Responses API (`OpenAIResponsesModel`), with
    strict: true on every tool (held by checking each call)."""
    import agents

    agents.set_tracing_disabled(True)
    runs: list[str] = []

    @agents.function_tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        runs.append(f"weather {city}")
        return "sunny"

    @agents.function_tool
    def get_time(city: str) -> str:
        """Local time in a city."""
        runs.append(f"time {city}")
        return "noon"

    paths: list[str] = []

    async def record(request: httpx.Request) -> None:
        paths.append(f"{request.method} {request.url.path}")

    async with (
        ScriptedMessagesAPI(travel_model) as api,
        gateway(api.settings()) as (url, _),
        httpx.AsyncClient(timeout=60, event_hooks={"request": [record]}) as http,
    ):
        client = AsyncOpenAI(base_url=f"{url}/v1", api_key="k", http_client=http, max_retries=0)
        agent = agents.Agent(
            name="travel",
            instructions="You answer travel questions.",
            tools=[get_weather, get_time],
            model=MODEL,
        )
        config = agents.RunConfig(model_provider=agents.OpenAIProvider(openai_client=client))
        if streamed:
            run = agents.Runner.run_streamed(agent, "Paris?", run_config=config)
            kinds = [event.type async for event in run.stream_events()]
            assert "raw_response_event" in kinds
            final = run.final_output
        else:
            final = (await agents.Runner.run(agent, "Paris?", run_config=config)).final_output
    assert final == "Paris: noon and sunny."
    assert paths == ["POST /v1/responses"] * 2
    assert sorted(runs) == ["time Paris", "weather Paris"]
    first, second = api.requests
    assert sorted(first.tool_names) == ["mcp__sf__get_time", "mcp__sf__get_weather"]
    assert "You answer travel questions." in json.dumps(first.body["system"])
    assert [b["tool_use_id"] for b in second.tool_results()] == [
        b["id"] for b in second.tool_uses()
    ]
