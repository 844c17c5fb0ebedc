"""`POST /v1/messages` through the official `anthropic` client: the gateway served by uvicorn on
loopback, the real CLI behind it, the scripted Messages API behind that.

Each test proves what the client gets from what the scripted API saw: the tools offered, the ids
and results sent back, images, thinking, and errors in the API's own shape.
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anthropic
import anyio
import httpx
import pytest
from conftest import cli_processes, no_cli_left, serving

from sf_provider.gateway import GatewaySettings, create_app
from sf_provider.gateway._http import MAX_JSON_DEPTH
from sf_provider.testing import (
    HTTPErrorReply,
    RecordedRequest,
    Reply,
    ScriptedMessagesAPI,
    fault,
    http_error,
    redacted_thinking,
    reply,
    text,
    thinking,
    tool_use,
)

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

MODEL = "claude-haiku-4-5"
HI = {"role": "user", "content": "hi"}
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city.",
    "input_schema": WEATHER_SCHEMA,
}
# A 1x1 transparent PNG.
PIXEL = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000100e5270de40000000049454e44ae426082"
    )
).decode()


@asynccontextmanager
async def gateway(
    api: ScriptedMessagesAPI,
    *,
    api_key: str = "gateway-test-key",
    provider: dict[str, Any] | None = None,
    **gateway: Any,
) -> AsyncIterator[anthropic.AsyncAnthropic]:
    """The gateway app on a free loopback port, its provider talking to `api` (with `provider`
    settings); yields an official client for it (no client retries: each scripted answer
    serves the request it was meant for)."""
    app = create_app(GatewaySettings(provider=api.settings(**(provider or {})), **gateway))
    async with (
        serving(app) as url,
        anthropic.AsyncAnthropic(base_url=url, api_key=api_key, max_retries=0) as client,
    ):
        yield client


def system_text(request: RecordedRequest) -> str:
    system = request.body.get("system")
    if isinstance(system, str):
        return system
    return "\n".join(str(b.get("text", "")) for b in system or [])


# -- answers


#: A reply that goes on past a stop sequence and calls a tool after it.
PAST_THE_STOP = reply(
    text("Thought: I know it.\nObservation: made up"), tool_use("get_weather", {"city": "Paris"})
)


@pytest.mark.parametrize("stream", [False, True], ids=["message", "events"])
async def test_stop_sequences_end_the_answer_with_stop_reason_stop_sequence(stream: bool) -> None:
    """They were refused; now the provider's `stop_sequences`, answered as the API answers."""
    async with ScriptedMessagesAPI([PAST_THE_STOP]) as api, gateway(api) as client:
        create = functools.partial(
            client.messages.create,
            model=MODEL,
            max_tokens=300,
            tools=[WEATHER],
            stop_sequences=["Calling tools:", "Observation:"],
            messages=[{"role": "user", "content": "Weather in Paris?"}],
        )
        if stream:
            events = [event async for event in await create(stream=True)]
            blocks = [e.content_block.type for e in events if e.type == "content_block_start"]
            said = "".join(
                e.delta.text for e in events if e.type == "content_block_delta"
                and e.delta.type == "text_delta"
            )  # fmt: skip
            delta = next(e.delta for e in events if e.type == "message_delta")
            reason, sequence = delta.stop_reason, delta.stop_sequence
        else:
            message = await create()
            blocks = [b.type for b in message.content]
            said = "".join(b.text for b in message.content if b.type == "text")
            reason, sequence = message.stop_reason, message.stop_sequence
    assert (said, blocks) == ("Thought: I know it.\n", ["text"]), "no call after the stop"
    assert (reason, sequence) == ("stop_sequence", "Observation:")
    assert len(api.requests) == 1


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
    "past a stop sequence": PAST_THE_STOP,
}


@pytest.mark.parametrize("script", SAME_EITHER_WAY.values(), ids=SAME_EITHER_WAY)
async def test_a_streamed_answer_adds_up_to_the_whole_message_in_the_anthropic_client(
    script: Reply,
) -> None:
    """The client's stream helper builds the message from the events: it is the message the
    same script answers whole (blocks, stop reason and sequence, usage with the cache)."""
    async with ScriptedMessagesAPI([script, script]) as api, gateway(api) as client:
        asked: Any = {
            "model": MODEL,
            "max_tokens": 300,
            "tools": [WEATHER],
            "stop_sequences": ["Observation:"],
            "messages": [HI],
        }
        whole = await client.messages.create(**asked)
        async with client.messages.stream(**asked) as stream:
            streamed = await stream.get_final_message()
    assert streamed.model_dump(exclude={"id"}) == whole.model_dump(exclude={"id"})
    assert not api.errors


async def test_a_plain_answer_is_a_message_with_usage() -> None:
    async with ScriptedMessagesAPI([reply(text("Hello there."))]) as api, gateway(api) as client:
        message = await client.messages.create(
            model=MODEL,
            max_tokens=300,
            system="You are terse.",
            messages=[{"role": "user", "content": "Hi"}],
            metadata={"user_id": "ignored"},
        )
    assert message.type == "message" and message.role == "assistant"
    assert message.id.startswith("msg_")
    assert message.model == MODEL
    assert [(b.type, getattr(b, "text", None)) for b in message.content] == [
        ("text", "Hello there.")
    ]
    assert message.stop_reason == "end_turn" and message.stop_sequence is None
    assert (message.usage.input_tokens, message.usage.output_tokens) == (25, 12)
    assert message.usage.cache_read_input_tokens == 0
    sent = api.requests[0].body
    assert sent["model"] == MODEL
    assert sent["max_tokens"] == 300
    assert "You are terse." in system_text(api.requests[0])
    assert "temperature" not in sent, "none asked for, none sent"


async def test_tools_come_back_as_tool_use_blocks_with_the_models_ids() -> None:
    script = [
        reply(
            text("Checking both."),
            tool_use("get_weather", {"city": "Paris"}, id="toolu_paris"),
            tool_use("get_weather", {"city": "Tokyo"}, id="toolu_tokyo"),
        )
    ]
    async with ScriptedMessagesAPI(script) as api, gateway(api) as client:
        message = await client.messages.create(
            model=MODEL,
            max_tokens=300,
            tools=[WEATHER],
            tool_choice={"type": "any"},
            messages=[{"role": "user", "content": "Weather in Paris and Tokyo?"}],
        )
    assert message.stop_reason == "tool_use"
    uses = [b for b in message.content if b.type == "tool_use"]
    assert [(u.id, u.name, u.input) for u in uses] == [
        ("toolu_paris", "get_weather", {"city": "Paris"}),
        ("toolu_tokyo", "get_weather", {"city": "Tokyo"}),
    ]
    assert message.content[0].type == "text"
    offered = api.requests[0].tools
    assert [t["name"] for t in offered] == ["mcp__sf__get_weather"]
    assert offered[0]["input_schema"]["properties"] == WEATHER_SCHEMA["properties"]
    assert len(api.requests) == 1, "nothing ran on the server: one model turn"
    assert api.requests[0].body["tool_choice"] == {"type": "any"}
    assert api.requests[0].body["thinking"] == {"type": "disabled"}, (
        "the API's rule for a forced choice"
    )


async def test_tool_results_as_text_blocks_and_errors_reach_the_model() -> None:
    script = [
        reply(tool_use("get_weather", {"city": "Paris"}), tool_use("get_weather", {"city": "Oz"})),
        reply(text("Paris is mild; Oz is unknown.")),
    ]
    async with ScriptedMessagesAPI(script) as api, gateway(api) as client:
        messages: list[Any] = [{"role": "user", "content": "Paris and Oz?"}]
        first = await client.messages.create(
            model=MODEL, max_tokens=300, tools=[WEATHER], messages=messages
        )
        paris, oz = (b.id for b in first.content if b.type == "tool_use")
        messages += [
            {"role": "assistant", "content": first.content},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": paris,
                        "content": [{"type": "text", "text": "18 °C"},
                                    {"type": "text", "text": "light wind"}],
                    },
                    {"type": "tool_result", "tool_use_id": oz, "content": "no such city",
                     "is_error": True},
                    {"type": "text", "text": "Be brief."},
                ],
            },
        ]  # fmt: skip
        await client.messages.create(
            model=MODEL, max_tokens=300, tools=[WEATHER], messages=messages
        )
    results = {r["tool_use_id"]: r for r in api.requests[1].tool_results()}
    assert not results[paris].get("is_error")
    assert results[oz]["is_error"] is True
    # Two text blocks stay two blocks (they were joined into "18 °C\nlight wind").
    assert results[paris]["content"] == [
        {"type": "text", "text": "18 °C"},
        {"type": "text", "text": "light wind"},
    ]
    texts = api.requests[1].tool_result_texts()
    assert texts[1].startswith("no such city")
    last_turn = api.requests[1].messages[-1]["content"]
    assert any(b.get("type") == "text" and "Be brief." in b["text"] for b in last_turn)


async def test_images_reach_the_model_as_base64_and_url_sources() -> None:
    async with (
        ScriptedMessagesAPI([reply(text("A pixel and a cat."))]) as api,
        gateway(api) as client,
    ):
        message = await client.messages.create(
            model=MODEL,
            max_tokens=300,
            messages=[
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": PIXEL},
                        },
                        {
                            "type": "image",
                            "source": {"type": "url", "url": "https://example.com/cat.png"},
                        },
                        {"type": "text", "text": "What are these?"},
                    ],
                }
            ],
        )
    assert message.content[0].type == "text"
    sources = [b["source"] for b in api.requests[0].blocks("image")]
    assert {"type": "base64", "media_type": "image/png", "data": PIXEL} in sources
    assert {"type": "url", "url": "https://example.com/cat.png"} in sources


async def test_an_image_in_a_tool_result_reaches_the_model_inside_the_result() -> None:
    screenshot = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                              "data": PIXEL}}  # fmt: skip
    async with ScriptedMessagesAPI([reply(text("A pixel."))]) as api, gateway(api) as client:
        await client.messages.create(
            model=MODEL,
            max_tokens=300,
            tools=[WEATHER],
            messages=[
                {"role": "user", "content": "Look at the screen."},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                     "input": {"city": "Paris"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1",
                     "content": [{"type": "text", "text": "the screen:"}, screenshot]}]},
            ],
        )  # fmt: skip
    (result,) = api.requests[0].blocks("tool_result")
    # (The CLI may append its own reminders to the last result.)
    assert result["content"][:2] == [{"type": "text", "text": "the screen:"}, screenshot]


# -- streaming


async def test_streaming_sends_text_and_tool_input_deltas_and_final_usage() -> None:
    script = [
        reply(
            text("Let me check the weather for you."),
            tool_use("get_weather", {"city": "Paris, France"}, id="toolu_stream"),
            output_tokens=40,
        )
    ]
    async with (
        ScriptedMessagesAPI(script) as api,
        gateway(api) as client,
        client.messages.stream(
            model=MODEL,
            max_tokens=300,
            tools=[WEATHER],
            messages=[{"role": "user", "content": "Weather in Paris?"}],
        ) as stream,
    ):
        events = [event async for event in stream]
        final = await stream.get_final_message()
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start"
    assert kinds[-1] == "message_stop"
    text_deltas = [e.delta.text for e in events if e.type == "content_block_delta"
                   and e.delta.type == "text_delta"]  # fmt: skip
    assert len(text_deltas) > 1, "text arrives in pieces, as the model writes it"
    assert "".join(text_deltas) == "Let me check the weather for you."
    json_deltas = [e.delta.partial_json for e in events if e.type == "content_block_delta"
                   and e.delta.type == "input_json_delta"]  # fmt: skip
    assert json.loads("".join(json_deltas)) == {"city": "Paris, France"}
    starts = [e.content_block for e in events if e.type == "content_block_start"]
    assert [b.type for b in starts] == ["text", "tool_use"]
    assert (starts[1].id, starts[1].name) == ("toolu_stream", "get_weather")
    assert final.stop_reason == "tool_use"
    assert final.content[1].type == "tool_use"
    assert final.content[1].input == {"city": "Paris, France"}
    assert (final.usage.input_tokens, final.usage.output_tokens) == (25, 40)
    assert api.requests[0].body["stream"] is True


async def test_streaming_a_plain_answer_ends_with_end_turn() -> None:
    async with (
        ScriptedMessagesAPI([reply(text("Short."))]) as api,
        gateway(api) as client,
        client.messages.stream(
            model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "Hi"}]
        ) as stream,
    ):
        answer = await stream.get_final_text()
        final = await stream.get_final_message()
    assert answer == "Short."
    assert final.stop_reason == "end_turn"


# -- thinking


async def test_thinking_streams_with_its_signature_and_is_replayed_signed() -> None:
    script = [
        reply(
            thinking("The user wants Paris weather.", signature="sig-paris"),
            tool_use("get_weather", {"city": "Paris"}),
        ),
        reply(text("18 °C in Paris.")),
    ]
    thinking_config: Any = {"type": "enabled", "budget_tokens": 2048}
    async with ScriptedMessagesAPI(script) as api, gateway(api) as client:
        messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
        async with client.messages.stream(
            model=MODEL,
            max_tokens=4096,
            thinking=thinking_config,
            tools=[WEATHER],
            messages=messages,
        ) as stream:
            events = [event async for event in stream]
            first = await stream.get_final_message()
        call = first.content[1]
        assert call.type == "tool_use"
        messages += [
            {"role": "assistant", "content": first.content},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": call.id, "content": "18 °C"}]},
        ]  # fmt: skip
        second = await client.messages.create(
            model=MODEL, max_tokens=4096, thinking=thinking_config, tools=[WEATHER],
            messages=messages,
        )  # fmt: skip
    deltas = [e.delta for e in events if e.type == "content_block_delta"]
    assert "".join(d.thinking for d in deltas if d.type == "thinking_delta") == (
        "The user wants Paris weather."
    )
    assert [d.signature for d in deltas if d.type == "signature_delta"] == ["sig-paris"]
    block = first.content[0]
    assert block.type == "thinking"
    assert (block.thinking, block.signature) == ("The user wants Paris weather.", "sig-paris")
    assert second.content[0].type == "text"
    sent_thinking = api.requests[0].body["thinking"]
    assert (sent_thinking["type"], sent_thinking["budget_tokens"]) == ("enabled", 2048)
    replayed = api.requests[1].blocks("thinking")
    assert [(b["thinking"], b["signature"]) for b in replayed] == [
        ("The user wants Paris weather.", "sig-paris")
    ]


# -- errors


#: An assistant turn calling get_weather (for history in the refused requests below).
CALLED_WEATHER = {
    "role": "assistant",
    "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}
    ],
}

BAD_REQUESTS: dict[str, tuple[dict[str, Any], str]] = {
    "unknown role": (
        {"messages": [{"role": "tool", "content": "hi"}]},
        "messages[0].role: unknown role 'tool'",
    ),
    "invalid tool schema": (
        {
            "tools": [
                {
                    "name": "bad",
                    "input_schema": {"type": "object", "properties": {"a": {"type": "nope"}}},
                }
            ]
        },
        "properties/a/type",
    ),
    "server tool": (
        {"tools": [{"type": "web_search_20250305", "name": "web_search"}]},
        "web_search (web_search_20250305)",
    ),
    "temperature not a number": (
        {"extra_body": {"temperature": "warm"}},
        "temperature: must be a number",
    ),
    "prefill": (
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "{"}]},
        "final assistant message",
    ),
    "metadata other than user_id": (
        {"metadata": {"user_id": "u-1", "team": "a"}},
        "metadata.team",
    ),
    "tool_result after text": (
        {
            "tools": [WEATHER],
            "messages": [
                {"role": "user", "content": "Weather?"},
                CALLED_WEATHER,
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Here you go:"},
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "21C"},
                    ],
                },
            ],
        },
        "requires a user message's tool_result blocks first",
    ),
    "tool history without tools": (
        {
            "messages": [
                {"role": "user", "content": "Weather?"},
                CALLED_WEATHER,
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "21C"}
                    ],
                },
            ],
        },
        "send in 'tools' the tools the history calls",
    ),
    "image data that is not base64": (
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is this?"},
                        {
                            "type": "image",
                            "source": {
                                "type": "base64",
                                "media_type": "image/png",
                                "data": "notbase64!!",
                            },
                        },
                    ],
                }
            ]
        },
        "block 1: the image data is not valid base64",
    ),
    "image data of another type": (
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/jpeg", "data": PIXEL},
                        }
                    ],
                }
            ]
        },
        "the image is declared 'image/jpeg', but its data is image/png data",
    ),
}


async def test_bad_requests_are_400s_in_the_api_shape_and_the_gateway_keeps_answering() -> None:
    async with ScriptedMessagesAPI([reply(text("Still here."))]) as api, gateway(api) as client:
        for name, (overrides, named) in BAD_REQUESTS.items():
            params: dict[str, Any] = {
                "model": MODEL,
                "max_tokens": 100,
                "messages": [{"role": "user", "content": "hi"}],
                **overrides,
            }
            with pytest.raises(anthropic.BadRequestError) as info:
                await client.messages.create(**params)
            assert info.value.status_code == 400, name
            body: Any = info.value.body
            assert body["type"] == "error", name
            assert body["error"]["type"] == "invalid_request_error", name
            assert named in body["error"]["message"], name
        async with httpx.AsyncClient(timeout=60) as http:
            malformed = await http.post(
                str(client.base_url).rstrip("/") + "/v1/messages",
                content=b'{"model": "x", "messages": [',
                headers={"content-type": "application/json"},
            )
            deep = await http.post(  # json.loads raised RecursionError: a 500
                str(client.base_url).rstrip("/") + "/v1/messages",
                content=b"[" * 2000 + b"]" * 2000,
                headers={"content-type": "application/json"},
            )
        assert malformed.status_code == 400
        assert malformed.json()["error"]["type"] == "invalid_request_error"
        assert "not valid JSON" in malformed.json()["error"]["message"]
        assert deep.status_code == 400
        assert deep.json()["error"] == {
            "type": "invalid_request_error",
            "message": f"the request body nests deeper than {MAX_JSON_DEPTH} levels, the "
            f"gateway's limit; flatten it",
        }
        assert api.requests == [], "nothing bad reached the model"
        after = await client.messages.create(
            model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hi"}]
        )
    assert after.content[0].type == "text" and after.content[0].text == "Still here."


@pytest.mark.parametrize("empty", ["", []], ids=["string", "list"])
async def test_an_assistant_message_with_no_content_is_left_out_and_the_user_turns_join(
    empty: Any,
) -> None:
    # As the README says: not a made-up "(no content)" turn (for []), nor "first\n" (for "").
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api, gateway(api) as client:
        await client.messages.create(
            model=MODEL,
            max_tokens=100,
            messages=[{"role": "user", "content": "first"},
                      {"role": "assistant", "content": empty},
                      {"role": "user", "content": "second"}],
        )  # fmt: skip
    turns = [m for m in api.requests[0].messages if m["role"] in ("user", "assistant")]
    assert [m["role"] for m in turns] == ["user"]
    texts = [b["text"] for b in turns[0]["content"] if b.get("type") == "text"]
    assert texts[-2:] == ["first", "second"]


async def test_an_api_error_is_the_matching_status_and_type() -> None:
    script = [http_error(529, "overloaded"), http_error(529, "overloaded")]
    async with ScriptedMessagesAPI(script) as api, gateway(api) as client:
        with pytest.raises(anthropic.APIStatusError) as plain:
            await client.messages.create(
                model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hi"}]
            )
        with pytest.raises(anthropic.APIStatusError) as streamed:
            async with client.messages.stream(
                model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hi"}]
            ) as stream:
                await stream.get_final_message()
    for error in (plain.value, streamed.value):
        assert error.status_code == 529
        body: Any = error.body
        assert body["error"]["type"] == "overloaded_error"
    assert len(api.requests) == 2


@pytest.mark.parametrize("stream", [False, True], ids=["message", "stream"])
async def test_an_upstream_rate_limit_passes_its_retry_after_on(stream: bool) -> None:
    """The CLI retries a 429 after its `retry-after` (max_retries=1 here); when the retry is
    limited too, the delay the API asked for is the gateway's `retry-after`."""
    script = [http_error(429, "slow down", retry_after=2), http_error(429, "slow down")]
    async with (
        ScriptedMessagesAPI(script) as api,
        gateway(api, provider={"max_retries": 1}) as client,
    ):
        with pytest.raises(anthropic.RateLimitError) as info:
            params: Any = {"model": MODEL, "max_tokens": 100, "messages": [HI]}
            if stream:
                async with client.messages.stream(**params) as events:
                    await events.get_final_message()
            else:
                await client.messages.create(**params)
    assert len(api.requests) == 2, "the CLI retried once"
    body: Any = info.value.body
    assert body["error"]["type"] == "rate_limit_error"
    assert int(info.value.response.headers["retry-after"]) >= 2


async def test_a_model_setting_the_model_cannot_take_is_a_400_before_any_api_call() -> None:
    async with ScriptedMessagesAPI([reply(text("unused"))]) as api, gateway(api) as client:
        with pytest.raises(anthropic.BadRequestError, match="thinking='adaptive'"):
            async with client.messages.stream(
                model=MODEL,
                max_tokens=100,
                thinking={"type": "adaptive"},
                messages=[{"role": "user", "content": "hi"}],
            ) as stream:
                await stream.get_final_message()
    assert api.requests == []


async def test_a_failure_after_the_answer_began_is_an_error_event() -> None:
    # The stream is cut after some text; the CLI's non-streaming fallback then fails.
    script = [fault("drop_mid_stream", events=4), http_error(500, "upstream broke")]
    async with ScriptedMessagesAPI(script) as api, gateway(api) as client:
        received: list[str] = []
        with pytest.raises(anthropic.APIStatusError) as info:
            async with client.messages.stream(
                model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hi"}]
            ) as stream:
                async for event in stream:
                    received.append(event.type)
    assert "content_block_delta" in received, "the answer had begun"
    body: Any = info.value.body
    assert body["type"] == "error"
    assert body["error"]["type"] == "api_error"
    assert len(api.requests) == 2


async def test_an_answer_asked_again_after_a_cut_is_never_doubled() -> None:
    """Not streamed, the retried answer replaces the cut one; streamed, the text already sent
    cannot be taken back, so the client gets an error event instead of a doubled answer."""
    script = [
        fault("drop_mid_stream", events=4),
        reply(text("Five.")),
        fault("drop_mid_stream", events=4),
        reply(text("Five.")),
    ]
    async with ScriptedMessagesAPI(script) as api, gateway(api) as client:
        message = await client.messages.create(
            model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "2+3?"}]
        )
        with pytest.raises(anthropic.APIStatusError, match="cannot be taken back"):
            async with client.messages.stream(
                model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "2+3?"}]
            ) as stream:
                await stream.get_final_message()
    assert [(b.type, getattr(b, "text", None)) for b in message.content] == [("text", "Five.")]
    assert len(api.requests) == 4


async def test_a_wrong_key_is_an_authentication_error_and_the_right_one_is_served() -> None:
    async with ScriptedMessagesAPI([reply(text("Welcome."))]) as api:
        async with gateway(api, api_key="wrong", api_keys=["right"]) as client:
            with pytest.raises(anthropic.AuthenticationError) as info:
                await client.messages.create(
                    model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hi"}]
                )
        async with gateway(api, api_key="right", api_keys=["right"]) as client:
            message = await client.messages.create(
                model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hi"}]
            )
    body: Any = info.value.body
    assert body["type"] == "error" and body["error"]["type"] == "authentication_error"
    assert message.content[0].type == "text" and message.content[0].text == "Welcome."
    assert len(api.requests) == 1


@pytest.mark.parametrize("stream", [False, True], ids=["message", "stream"])
async def test_a_client_that_leaves_stops_the_query_and_its_cli(stream: bool) -> None:
    asked = anyio.Event()

    async def first_never_answers(_request: RecordedRequest) -> Reply:
        if asked.is_set():
            return reply(text("Back."))
        asked.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    hi: Any = [{"role": "user", "content": "hi"}]
    async with ScriptedMessagesAPI(first_never_answers) as api, gateway(api) as client:
        async with anyio.create_task_group() as group:
            group.start_soon(
                functools.partial(
                    client.messages.create, model=MODEL, max_tokens=100, messages=hi, stream=stream
                )
            )
            await asked.wait()  # the CLI is waiting for the model
            group.cancel_scope.cancel()  # the client leaves
        await no_cli_left()
        assert not cli_processes(), "the gateway stopped the CLI of the abandoned query"
        after = await client.messages.create(model=MODEL, max_tokens=100, messages=hi)
    assert after.content[0].type == "text" and after.content[0].text == "Back."


# -- request options


async def test_sampling_and_one_call_per_turn_reach_the_request_as_written() -> None:
    # Not parameters of anthropic 2.12's create(); older clients and other languages send them.
    sampling = {"temperature": 0.2, "top_p": 0.9, "top_k": 5}
    choice: Any = {"type": "auto", "disable_parallel_tool_use": True}
    async with ScriptedMessagesAPI([reply(text("Sunny."))]) as api, gateway(api) as client:
        await client.messages.create(
            model=MODEL,
            max_tokens=100,
            messages=[HI],
            tools=[WEATHER],
            tool_choice=choice,
            extra_body=sampling,
        )
    sent = api.requests[0].body
    assert {k: sent[k] for k in sampling} == sampling
    assert sent["tool_choice"] == choice


def refuse_temperature(_request: RecordedRequest) -> HTTPErrorReply:
    """The API's answer to a temperature on Opus 4.7 and later (a function: the CLI tries a
    plain 400 three times)."""
    return http_error(400, "temperature is deprecated for this model.")


@pytest.mark.parametrize("stream", [False, True], ids=["message", "stream"])
async def test_an_api_refusal_of_a_sampling_setting_is_an_invalid_request(stream: bool) -> None:
    async with ScriptedMessagesAPI(refuse_temperature) as api, gateway(api) as client:
        with pytest.raises(anthropic.BadRequestError) as info:
            params: Any = {"model": MODEL, "max_tokens": 100, "messages": [HI]}
            params["extra_body"] = {"temperature": 0.3}
            if stream:
                async with client.messages.stream(**params) as events:
                    await events.get_final_message()
            else:
                await client.messages.create(**params)
    body: Any = info.value.body
    assert body["error"]["type"] == "invalid_request_error"
    assert "temperature is deprecated for this model" in body["error"]["message"]
    assert {r.body["temperature"] for r in api.requests} == {0.3}


@pytest.mark.parametrize("stream", [False, True], ids=["message", "stream"])
async def test_drop_params_leaves_sampling_out_and_says_so_in_the_warnings_header(
    stream: bool,
) -> None:
    async with (
        ScriptedMessagesAPI([reply(text("Sunny."))]) as api,
        gateway(api, drop_params=True) as client,
    ):
        raw = await client.messages.with_raw_response.create(
            model=MODEL,
            max_tokens=100,
            messages=[HI],
            stream=stream,
            extra_body={"temperature": 0.2, "top_k": 5, "speed": "fast"},
        )
        if stream:
            _ = [event async for event in await raw.parse()]
    warnings = json.loads(raw.headers["sf-provider-warnings"])
    assert [w["code"] for w in warnings] == ["parameter-dropped"] * 3
    assert [w["message"].split("'")[1] for w in warnings] == ["temperature", "top_k", "speed"]
    assert not {"temperature", "top_k", "speed"} & api.requests[0].body.keys()


# -- warnings


@pytest.mark.parametrize("stream", [False, True], ids=["message", "stream"])
async def test_a_warning_of_the_query_is_in_the_sf_provider_warnings_header(stream: bool) -> None:
    """A thinking block without a signature cannot go back as thinking: it is replayed as text,
    and the client is told so (`history-flattened`), streamed or not."""
    unsigned = {"type": "thinking", "thinking": "Paris, Texas?", "signature": ""}
    messages: Any = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [unsigned, {"type": "text", "text": "Which Paris?"}]},
        {"role": "user", "content": "France."},
    ]
    async with ScriptedMessagesAPI([reply(text("Sunny."))]) as api, gateway(api) as client:
        raw = await client.messages.with_raw_response.create(
            model=MODEL, max_tokens=100, messages=messages, stream=stream
        )
        if stream:
            events = await raw.parse()
            types = [event.type async for event in events]
            assert types[-1] == "message_stop"
        else:
            answer = await raw.parse()
            assert answer.content[0].type == "text" and answer.content[0].text == "Sunny."
    warnings = json.loads(raw.headers["sf-provider-warnings"])
    assert [w["code"] for w in warnings] == ["history-flattened"]
    assistant = next(m for m in api.requests[0].messages if m["role"] == "assistant")
    assert {"type": "text", "text": "<reasoning>Paris, Texas?</reasoning>"} in assistant["content"]


# -- betas


async def test_a_beta_the_cli_sends_itself_is_accepted_and_on_the_request() -> None:
    async with ScriptedMessagesAPI([reply(text("Thinking along."))]) as api, gateway(api) as client:
        message = await client.beta.messages.create(
            model=MODEL,
            max_tokens=100,
            messages=[HI],
            betas=["interleaved-thinking-2025-05-14", "context-management-2025-06-27"],
        )
    assert message.content[0].type == "text"
    sent = api.requests[0].headers["anthropic-beta"].split(",")
    assert {"interleaved-thinking-2025-05-14", "context-management-2025-06-27"} <= set(sent)


async def test_a_clients_beta_reaches_the_api_request_of_that_call_only() -> None:
    script = [reply(text("Long context on.")), reply(text("Plain."))]
    async with ScriptedMessagesAPI(script) as api, gateway(api) as client:
        await client.beta.messages.create(
            model=MODEL,
            max_tokens=100,
            messages=[HI],
            betas=["interleaved-thinking-2025-05-14", "context-1m-2025-08-07"],
        )
        await client.messages.create(model=MODEL, max_tokens=100, messages=[HI])
    first, second = (r.headers["anthropic-beta"].split(",") for r in api.requests)
    assert "context-1m-2025-08-07" in first and "context-1m-2025-08-07" not in second
    assert first.count("interleaved-thinking-2025-05-14") == 1


async def test_a_malformed_beta_is_a_400_before_any_api_call() -> None:
    async with ScriptedMessagesAPI([]) as api, gateway(api) as client:
        with pytest.raises(anthropic.BadRequestError) as info:
            await client.beta.messages.create(
                model=MODEL, max_tokens=100, messages=[HI], betas=["Not A Beta!"]
            )
    body: Any = info.value.body
    assert body["error"]["type"] == "invalid_request_error"
    assert "betas" in body["error"]["message"]
    assert api.all_requests == []


# -- models


async def test_models_answer_an_anthropic_client_in_its_shape_even_a_404() -> None:
    async with ScriptedMessagesAPI([]) as api, gateway(api) as client:
        haiku = await client.models.retrieve("haiku")
        listed = [m.id async for m in client.models.list()]
        with pytest.raises(anthropic.NotFoundError) as info:
            await client.models.retrieve("gpt-4o")
    assert (haiku.type, haiku.id) == ("model", "haiku")
    assert listed == ["sonnet", "opus", "haiku"]
    body: Any = info.value.body
    assert body["type"] == "error"
    assert body["error"]["type"] == "not_found_error"
    assert "'gpt-4o' is not listed" in body["error"]["message"]


async def test_the_model_list_pages_as_an_anthropic_client_asks() -> None:
    """`limit`, `after_id`, `before_id` and `lifecycle` were ignored: a page of one held every
    model, and a list of retired models the active ones."""
    async with ScriptedMessagesAPI([]) as api, gateway(api) as client:
        first = await client.models.list(limit=1)
        after = await client.models.list(limit=1, after_id="sonnet")
        before = await client.models.list(before_id="haiku")
        paged = [m.id async for m in client.models.list(limit=2)]  # two pages
        active = await client.models.list(lifecycle=["active", "deprecated"])
        retired = await client.models.list(lifecycle=["retired"])
        with pytest.raises(anthropic.BadRequestError) as unknown:
            await client.models.list(after_id="gpt-4o")
        with pytest.raises(anthropic.BadRequestError) as too_many:
            await client.models.list(limit=1001)
    assert [m.id for m in first.data] == ["sonnet"]
    assert (first.has_more, first.first_id, first.last_id) == (True, "sonnet", "sonnet")
    assert ([m.id for m in after.data], after.has_more) == (["opus"], True)
    assert ([m.id for m in before.data], before.has_more) == (["sonnet", "opus"], False)
    assert paged == ["sonnet", "opus", "haiku"]
    assert [m.id for m in active.data] == ["sonnet", "opus", "haiku"]
    assert (retired.data, retired.has_more, retired.first_id) == ([], False, None)
    assert "after_id" in unknown.value.message and "'gpt-4o'" in unknown.value.message
    assert "limit" in too_many.value.message


async def test_counting_tokens_is_a_404_that_says_why_and_what_to_do() -> None:
    """It was the 404 of a route that does not exist ("Not Found: POST ..."), which says
    neither that the gateway cannot count tokens nor what to do instead."""
    async with ScriptedMessagesAPI([]) as api, gateway(api) as client:
        with pytest.raises(anthropic.NotFoundError) as info:
            await client.messages.count_tokens(model=MODEL, messages=[HI])
    body: Any = info.value.body
    assert body["error"]["type"] == "not_found_error"
    assert "cannot count tokens" in body["error"]["message"]
    assert "usage" in body["error"]["message"]
    assert api.all_requests == []
