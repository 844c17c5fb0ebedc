"""`ScriptedMessagesAPI`: the scripted Messages API, driven over real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from itertools import groupby
from typing import Any

import anyio
import httpx
import pytest
from pydantic import ValidationError

from sf_provider.capabilities import check_auth, cloud_switches
from sf_provider.scenarios import Scenario
from sf_provider.testing import (
    ROUTES_AWAY,
    FaultReply,
    RecordedRequest,
    Reply,
    ScriptedMessagesAPI,
    SentToolResult,
    fault,
    http_error,
    reply,
    text,
    thinking,
    tool_use,
)

pytestmark = pytest.mark.anyio

TOOLS = [
    {"name": "mcp__sf__add", "input_schema": {"type": "object"}},
    {"name": "mcp__sf__echo", "input_schema": {"type": "object"}},
]


def body(*, stream: bool = False, **extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-test",
        "max_tokens": 1024,
        "stream": stream,
        "messages": [{"role": "user", "content": "What is 2+3?"}],
        "tools": TOOLS,
        **extra,
    }


def client_for(api: ScriptedMessagesAPI) -> httpx.AsyncClient:
    # Plain HTTP on loopback: verify=False skips loading the CA bundle (about 0.3 s per client).
    return httpx.AsyncClient(base_url=api.base_url, timeout=5, verify=False)


async def post(api: ScriptedMessagesAPI, payload: dict[str, Any]) -> httpx.Response:
    async with client_for(api) as client:
        return await client.post("/v1/messages?beta=true", json=payload)


def sse_events(response: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) pairs of an SSE body."""
    events = []
    for chunk in response.text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in chunk.splitlines())
        events.append((fields["event"], json.loads(fields["data"])))
    return events


async def streamed(script_reply: Reply) -> list[tuple[str, dict[str, Any]]]:
    async with ScriptedMessagesAPI([script_reply]) as api:
        response = await post(api, body(stream=True))
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    return sse_events(response)


def deltas(events: list[tuple[str, dict[str, Any]]], index: int) -> list[dict[str, Any]]:
    return [
        data["delta"]
        for name, data in events
        if name == "content_block_delta" and data["index"] == index
    ]


# -- SSE answers


async def test_streamed_reply_is_the_standard_event_sequence() -> None:
    events = await streamed(reply(thinking("hmm"), text("Let me add."), tool_use("add", {"a": 2})))

    # Runs of deltas collapse to one entry: how many there are depends on the chunk size.
    names = [name for name, _ in groupby(name for name, _ in events)]
    block = ["content_block_start", "content_block_delta", "content_block_stop"]
    assert names == ["message_start", *block, *block, *block, "message_delta", "message_stop"]


async def test_streamed_blocks_are_numbered_in_order() -> None:
    events = await streamed(reply(thinking("hmm"), text("Let me add."), tool_use("add", {"a": 2})))

    starts = [
        (d["index"], d["content_block"]["type"]) for n, d in events if n == "content_block_start"
    ]
    assert starts == [(0, "thinking"), (1, "text"), (2, "tool_use")]


async def test_message_start_has_no_content_yet() -> None:
    events = await streamed(reply(text("Hi")))

    name, data = events[0]
    assert name == "message_start"
    assert data["message"]["content"] == []
    assert data["message"]["stop_reason"] is None
    assert data["message"]["model"] == "claude-test"


async def test_streamed_text_deltas_concatenate_to_the_text() -> None:
    events = await streamed(reply(text("The sum of two and three is five.")))

    parts = deltas(events, 0)
    assert len(parts) > 1
    assert {d["type"] for d in parts} == {"text_delta"}
    assert "".join(d["text"] for d in parts) == "The sum of two and three is five."


async def test_streamed_tool_input_deltas_concatenate_to_the_input_json() -> None:
    tool_input = {"a": 2, "b": 3, "note": "an argument long enough to need several chunks"}
    events = await streamed(reply(tool_use("add", tool_input)))

    parts = deltas(events, 0)
    assert len(parts) > 1
    assert {d["type"] for d in parts} == {"input_json_delta"}
    assert json.loads("".join(d["partial_json"] for d in parts)) == tool_input


async def test_streamed_tool_use_block_starts_with_id_name_and_empty_input() -> None:
    events = await streamed(reply(tool_use("add", {"a": 2}, id="toolu_fixed")))

    [start] = [d["content_block"] for n, d in events if n == "content_block_start"]
    assert start == {"type": "tool_use", "id": "toolu_fixed", "name": "mcp__sf__add", "input": {}}


async def test_streamed_thinking_has_thinking_deltas_then_a_signature_delta() -> None:
    events = await streamed(reply(thinking("I should add these.", signature="sig-1")))

    parts = deltas(events, 0)
    assert "".join(d["thinking"] for d in parts[:-1]) == "I should add these."
    assert {d["type"] for d in parts[:-1]} == {"thinking_delta"}
    assert parts[-1] == {"type": "signature_delta", "signature": "sig-1"}


@pytest.mark.parametrize(
    ("content", "stop_reason"),
    [
        ([text("Five.")], "end_turn"),
        ([text("Adding."), tool_use("add", {"a": 2})], "tool_use"),
    ],
    ids=["text-only", "with-tool-use"],
)
async def test_message_delta_stop_reason_follows_the_content(
    content: list[dict[str, Any]], stop_reason: str
) -> None:
    events = await streamed(reply(*content))

    [delta] = [d for n, d in events if n == "message_delta"]
    assert delta["delta"]["stop_reason"] == stop_reason


async def test_explicit_stop_reason_wins() -> None:
    events = await streamed(reply(text("cut"), stop_reason="max_tokens"))

    [delta] = [d for n, d in events if n == "message_delta"]
    assert delta["delta"]["stop_reason"] == "max_tokens"


async def test_message_delta_reports_scripted_output_tokens() -> None:
    events = await streamed(reply(text("Hi"), output_tokens=77))

    [delta] = [d for n, d in events if n == "message_delta"]
    assert delta["usage"] == {"output_tokens": 77}


# -- plain JSON answers


async def test_non_streamed_reply_is_a_json_message() -> None:
    async with ScriptedMessagesAPI([reply(text("Five."), input_tokens=9)]) as api:
        response = await post(api, body(stream=False))

    message = response.json()
    assert response.status_code == 200
    assert message["type"] == "message"
    assert message["role"] == "assistant"
    assert message["content"] == [{"type": "text", "text": "Five."}]
    assert message["stop_reason"] == "end_turn"
    assert message["usage"]["input_tokens"] == 9


async def test_tool_name_resolves_against_the_requests_tools() -> None:
    async with ScriptedMessagesAPI([reply(tool_use("add", {"a": 2}))]) as api:
        message = (await post(api, body())).json()

    [block] = message["content"]
    assert block["name"] == "mcp__sf__add"
    assert block["id"].startswith("toolu_")
    assert message["stop_reason"] == "tool_use"


async def test_a_call_of_a_tool_not_offered_is_a_mistake_naming_the_offered_ones() -> None:
    async with ScriptedMessagesAPI([reply(tool_use("ad", {"a": 2}))]) as api:
        response = await post(api, body(stream=True))

    problem = (
        "ScriptedMessagesAPI: the scripted reply to request #0 calls 'ad', a tool the request "
        "does not offer (offered: add, echo); fix the name in the script, or script "
        "tool_use('ad', ..., offered=False) for a call of an unknown tool on purpose"
    )
    assert api.errors == [problem]
    # Answered as an error the CLI ends the query with, at once and with this text.
    assert (response.status_code, response.headers["x-should-retry"]) == (410, "false")
    assert response.json()["error"]["message"] == problem


async def test_a_call_in_a_request_without_tools_says_none_is_offered() -> None:
    async with ScriptedMessagesAPI([reply(tool_use("add"))]) as api:
        await post(api, body(tools=[]))

    assert "(offered: none)" in api.errors[0]


async def test_a_call_scripted_as_not_offered_is_sent_as_written() -> None:
    async with ScriptedMessagesAPI([reply(tool_use("multiply", offered=False))]) as api:
        message = (await post(api, body())).json()

    [block] = message["content"]
    assert (block["name"], "offered" in block) == ("multiply", False)
    assert api.errors == []


async def test_script_items_may_be_mappings() -> None:
    script: list[dict[str, Any]] = [{"content": [text("from a dict")]}, {"status": 503}]
    async with ScriptedMessagesAPI(script) as api:
        first = await post(api, body())
        second = await post(api, body())

    assert first.json()["content"] == [{"type": "text", "text": "from a dict"}]
    assert second.status_code == 503


# -- HTTP errors


async def test_http_error_has_status_retry_after_and_an_anthropic_error_body() -> None:
    async with ScriptedMessagesAPI([http_error(429, "slow down", retry_after=3)]) as api:
        response = await post(api, body(stream=True))

    assert response.status_code == 429
    assert response.headers["retry-after"] == "3"
    assert response.json() == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "slow down"},
    }


async def test_http_error_without_retry_after_has_no_header() -> None:
    async with ScriptedMessagesAPI([http_error(529)]) as api:
        response = await post(api, body())

    assert "retry-after" not in response.headers
    assert response.json()["error"]["type"] == "overloaded_error"


async def test_exhausted_script_answers_410_and_records_an_error() -> None:
    async with ScriptedMessagesAPI([reply(text("only one"))]) as api:
        await post(api, body())
        response = await post(api, body())

    problem = (
        "ScriptedMessagesAPI: no scripted reply left for request #1 (the script held 1 "
        "item(s)); script one reply for each model request the query makes"
    )
    assert api.errors == [problem]
    assert (response.status_code, response.headers["x-should-retry"]) == (410, "false")
    assert response.json()["error"]["message"] == problem


async def test_a_good_run_has_no_errors_and_nothing_remaining() -> None:
    async with ScriptedMessagesAPI([reply(text("a")), reply(text("b"))]) as api:
        await post(api, body())
        assert api.remaining == 1
        await post(api, body())

    assert (api.errors, api.remaining) == ([], 0)


# -- network faults


async def test_drop_closes_the_connection_without_an_answer() -> None:
    async with ScriptedMessagesAPI([fault("drop")]) as api:
        with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
            await post(api, body(stream=True))

    assert len(api.requests) == 1
    assert (api.errors, api.remaining) == ([], 0)


async def test_a_fault_answers_one_request_and_the_next_item_the_next() -> None:
    async with ScriptedMessagesAPI([fault("drop"), reply(text("after the drop"))]) as api:
        with pytest.raises(httpx.RemoteProtocolError):
            await post(api, body())
        response = await post(api, body())

    assert response.json()["content"] == [{"type": "text", "text": "after the drop"}]
    assert len(api.requests) == 2


async def test_drop_mid_stream_sends_the_first_events_then_closes() -> None:
    partial = reply(text("The sum of two and three is five."))
    async with ScriptedMessagesAPI([fault("drop_mid_stream", reply=partial, events=4)]) as api:
        response = await post(api, body(stream=True))

    # No content-length on a stream: the body simply ends where the connection closed.
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    events = sse_events(response)
    names = [name for name, _ in events]
    assert names == ["message_start", "content_block_start", *["content_block_delta"] * 2]
    assert "".join(d["text"] for d in deltas(events, 0)) == "The sum of two a"


async def test_drop_mid_stream_events_are_a_prefix_of_the_full_stream() -> None:
    def script_reply() -> Reply:
        return reply(text("Hello there"), tool_use("add", {"a": 1}))

    full = await streamed(script_reply())
    async with ScriptedMessagesAPI(
        [fault("drop_mid_stream", reply=script_reply(), events=6)]
    ) as api:
        cut = sse_events(await post(api, body(stream=True)))

    assert cut == full[:6]
    assert ("message_stop", {"type": "message_stop"}) not in cut


async def test_drop_mid_stream_with_zero_events_sends_only_the_headers() -> None:
    async with ScriptedMessagesAPI([fault("drop_mid_stream", events=0)]) as api:
        response = await post(api, body(stream=True))

    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert response.content == b""


async def test_drop_mid_stream_default_reply_is_a_text() -> None:
    async with ScriptedMessagesAPI([fault("drop_mid_stream")]) as api:
        events = sse_events(await post(api, body(stream=True)))

    assert [name for name, _ in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
    ]
    assert events[1][1]["content_block"]["type"] == "text"


async def test_drop_mid_stream_of_a_json_request_cuts_the_body_short() -> None:
    async with ScriptedMessagesAPI([fault("drop_mid_stream")]) as api:
        with pytest.raises(httpx.RemoteProtocolError, match="without sending complete message"):
            await post(api, body(stream=False))


async def test_malformed_sse_sends_data_lines_that_are_not_json() -> None:
    garbage = ["{not json", "<html>502 Bad Gateway</html>"]
    async with ScriptedMessagesAPI([fault("malformed_sse", garbage=garbage)]) as api:
        response = await post(api, body(stream=True))

    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    chunks = [
        dict(line.split(": ", 1) for line in c.splitlines())
        for c in response.text.strip().split("\n\n")
    ]
    assert [c["data"] for c in chunks] == garbage
    assert {c["event"] for c in chunks} == {"message_start"}
    for chunk in chunks:
        with pytest.raises(ValueError):
            json.loads(chunk["data"])


async def test_malformed_sse_default_garbage_is_invalid_json() -> None:
    async with ScriptedMessagesAPI([fault("malformed_sse")]) as api:
        response = await post(api, body(stream=True))

    data = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    assert len(data) >= 1
    for line in data:
        with pytest.raises(ValueError):
            json.loads(line)


async def test_malformed_sse_of_a_json_request_is_a_200_that_is_not_json() -> None:
    async with ScriptedMessagesAPI([fault("malformed_sse", garbage=["<html>oops</html>"])]) as api:
        response = await post(api, body(stream=False))

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.text == "<html>oops</html>"
    with pytest.raises(ValueError):
        response.json()


async def test_hang_never_answers() -> None:
    async with ScriptedMessagesAPI([fault("hang")]) as api:
        async with httpx.AsyncClient(base_url=api.base_url, timeout=0.3, verify=False) as client:
            with pytest.raises(httpx.ReadTimeout):
                await client.post("/v1/messages", json=body(stream=True))
        assert len(api.requests) == 1


async def test_hang_with_seconds_closes_the_connection_afterwards() -> None:
    outcome: list[BaseException] = []

    async def ask(api: ScriptedMessagesAPI) -> None:
        try:
            await post(api, body(stream=True))
        except httpx.HTTPError as exc:
            outcome.append(exc)

    async with ScriptedMessagesAPI([fault("hang", seconds=0.3)]) as api:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(ask, api)
            while not api.requests:
                await anyio.wait_all_tasks_blocked()
            # Every task waits: the server holds the request it read, unanswered.
            assert outcome == []
        [error] = outcome
    assert isinstance(error, httpx.RemoteProtocolError), "then closed, without an answer"


async def test_leaving_the_server_ends_a_hang_at_once() -> None:
    arrived = asyncio.Event()

    def hang(_request: RecordedRequest) -> FaultReply:
        arrived.set()
        return fault("hang")

    async with ScriptedMessagesAPI(hang) as api:
        client = asyncio.create_task(post(api, body(stream=True)))
        await arrived.wait()
    # The hang has no end: a leaving that waited for it would never get here (pytest-timeout).
    with pytest.raises(httpx.RemoteProtocolError):
        await client


async def test_leaving_the_server_ends_a_slow_function_script_at_once() -> None:
    arrived = asyncio.Event()

    stopped: list[bool] = []

    async def slow(_request: RecordedRequest) -> Reply:
        arrived.set()
        try:
            await asyncio.Event().wait()  # never answers by itself
        finally:
            stopped.append(True)
        return reply(text("too late"))  # pragma: no cover

    async with ScriptedMessagesAPI(slow) as api:
        client = asyncio.create_task(post(api, body()))
        await arrived.wait()
    assert stopped == [True], "__aexit__ stopped the responder instead of waiting for it"
    with pytest.raises(httpx.RemoteProtocolError):
        await client


async def test_function_script_may_return_a_fault() -> None:
    async with ScriptedMessagesAPI(lambda _request: fault("drop")) as api:
        for _ in range(2):
            with pytest.raises(httpx.RemoteProtocolError):
                await post(api, body())

    assert len(api.requests) == 2


@pytest.mark.parametrize("kind", ["drop", "drop_mid_stream", "malformed_sse", "hang"])
def test_fault_items_may_be_mappings(kind: str) -> None:
    item = {"kind": kind, "events": 2} if kind == "drop_mid_stream" else {"kind": kind}
    api = ScriptedMessagesAPI([item])

    assert api.remaining == 1
    assert FaultReply.model_validate(item).kind == kind


def test_scenario_replies_accept_faults() -> None:
    scenario = Scenario.model_validate(
        {
            "name": "dropped then answered",
            "prompt": "hi",
            "replies": [
                {"kind": "drop_mid_stream", "events": 2},
                {"kind": "hang", "seconds": 1},
                {"status": 529},
                {"content": [text("ok")]},
            ],
        }
    )

    kinds = [type(r).__name__ for r in scenario.replies]
    assert kinds == ["FaultReply", "FaultReply", "HTTPErrorReply", "Reply"]
    first = scenario.replies[0]
    assert isinstance(first, FaultReply)
    assert (first.kind, first.events) == ("drop_mid_stream", 2)


@pytest.mark.parametrize(
    "bad",
    [{"kind": "explode"}, {"kind": "drop_mid_stream", "events": -1}, {"kind": "drop", "x": 1}],
    ids=["unknown-kind", "negative-events", "unknown-field"],
)
def test_invalid_faults_are_rejected(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        FaultReply.model_validate(bad)


def test_unknown_script_item_kinds_are_rejected() -> None:
    with pytest.raises(TypeError, match="FaultReply"):
        ScriptedMessagesAPI([42])  # type: ignore[list-item]


async def test_requests_record_when_they_arrived() -> None:
    async with ScriptedMessagesAPI([reply(text("a")), reply(text("b"))]) as api:
        before = time.monotonic()
        await post(api, body())
        await asyncio.sleep(0.05)
        await post(api, body())

    first, second = api.requests
    assert before <= first.received_at
    assert second.received_at - first.received_at >= 0.05


# -- function scripts


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_function_script_receives_the_recorded_request(kind: str) -> None:
    seen: list[RecordedRequest] = []

    def answer(request: RecordedRequest) -> Reply:
        seen.append(request)
        return reply(text(f"you offered {len(request.tools)} tools"))

    async def answer_async(request: RecordedRequest) -> Reply:
        return answer(request)

    async with ScriptedMessagesAPI(answer if kind == "sync" else answer_async) as api:
        message = (await post(api, body())).json()

    assert message["content"] == [{"type": "text", "text": "you offered 2 tools"}]
    [request] = seen
    assert request.body["messages"] == [{"role": "user", "content": "What is 2+3?"}]
    assert request.index == 0


# -- recorded requests


FOLLOW_UP: list[dict[str, Any]] = [
    {"role": "user", "content": "What is 2+3?"},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Adding."},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "mcp__sf__add",
                "input": {"a": 2, "b": 3},
            },
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": [{"type": "text", "text": "5"}],
            },
        ],
    },
]


async def test_requests_are_recorded_with_method_path_headers_and_body() -> None:
    async with ScriptedMessagesAPI([reply(text("a"))]) as api:
        await post(api, body())

    [request] = api.requests
    assert (request.method, request.path) == ("POST", "/v1/messages?beta=true")
    assert request.headers["content-type"] == "application/json"
    assert request.body["model"] == "claude-test"


async def test_recorded_request_lists_tool_names() -> None:
    async with ScriptedMessagesAPI([reply(text("a"))]) as api:
        await post(api, body())

    assert api.requests[0].tool_names == ["mcp__sf__add", "mcp__sf__echo"]


async def test_recorded_request_finds_tool_uses_and_tool_results() -> None:
    async with ScriptedMessagesAPI([reply(text("a"))]) as api:
        await post(api, body(messages=FOLLOW_UP))

    request = api.requests[0]
    assert [b["id"] for b in request.tool_uses()] == ["toolu_1"]
    assert request.tool_results() == [FOLLOW_UP[2]["content"][0]]


async def test_unknown_path_is_404_and_recorded_only_in_all_requests() -> None:
    async with ScriptedMessagesAPI([reply(text("a"))]) as api, client_for(api) as client:
        response = await client.head("/api/hello")

    assert response.status_code == 404
    assert [(r.method, r.path) for r in api.all_requests] == [("HEAD", "/api/hello")]
    assert api.requests == []
    assert api.remaining == 1


async def test_count_tokens_request_is_not_a_model_turn() -> None:
    async with ScriptedMessagesAPI([reply(text("a"))]) as api, client_for(api) as client:
        response = await client.post("/v1/messages/count_tokens?beta=true", json=body())

    assert response.status_code == 404
    assert api.requests == []


# -- settings


def test_settings_before_start_raise() -> None:
    with pytest.raises(RuntimeError, match="async with"):
        ScriptedMessagesAPI([]).settings()


async def test_settings_point_the_cli_at_the_server_offline() -> None:
    async with ScriptedMessagesAPI([]) as api:
        env = api.settings().env

    assert api.base_url.startswith("http://127.0.0.1:")
    assert env["ANTHROPIC_BASE_URL"] == api.base_url
    assert api.settings().max_retries == 0
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"


async def test_settings_keep_this_machines_credentials_and_cloud_switches_from_the_cli(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ROUTES_AWAY:
        monkeypatch.setenv(name, "1")
    async with ScriptedMessagesAPI([]) as api:
        settings = api.settings(isolate=False)  # even without the per-query isolation
        asked = api.settings(env={"CLAUDE_CODE_USE_BEDROCK": "1"})

    assert {name: settings.env[name] for name in ROUTES_AWAY} == dict.fromkeys(ROUTES_AWAY, "")
    assert cloud_switches(settings) == []
    assert check_auth(settings).detail == "ANTHROPIC_API_KEY is set"  # the placeholder
    assert cloud_switches(asked) == ["CLAUDE_CODE_USE_BEDROCK"]  # what the caller sets back


async def test_settings_overrides_and_extra_env_are_applied() -> None:
    async with ScriptedMessagesAPI([]) as api:
        settings = api.settings(model="claude-x", env={"EXTRA": "1"})

    assert settings.model == "claude-x"
    assert settings.env["EXTRA"] == "1"
    assert settings.env["ANTHROPIC_BASE_URL"] == api.base_url


async def test_settings_max_retries_override_reaches_the_cli() -> None:
    async with ScriptedMessagesAPI([]) as api:
        settings = api.settings(max_retries=3)
        from_env = api.settings(env={"CLAUDE_CODE_MAX_RETRIES": "4"})

    assert settings.max_retries == 3
    assert "CLAUDE_CODE_MAX_RETRIES" not in settings.env  # one source: the typed setting
    assert from_env.env["CLAUDE_CODE_MAX_RETRIES"] == "4"
    assert "max_retries" not in from_env.model_fields_set


# -- one shape for every tool result


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        (  # a success of this query's tools: a list of text blocks, no is_error
            {
                "type": "tool_result",
                "tool_use_id": "t1",
                "content": [{"type": "text", "text": "5"}],
            },
            SentToolResult("t1", False, "5", [{"type": "text", "text": "5"}]),
        ),
        (  # an error: a plain string
            {"type": "tool_result", "tool_use_id": "t2", "content": "boom", "is_error": True},
            SentToolResult("t2", True, "boom", [{"type": "text", "text": "boom"}]),
        ),
        (  # replayed from history: a plain string, is_error false
            {"type": "tool_result", "tool_use_id": "t3", "content": "5", "is_error": False},
            SentToolResult("t3", False, "5", [{"type": "text", "text": "5"}]),
        ),
        (  # several blocks, one of them not text; no content at all
            {
                "type": "tool_result",
                "tool_use_id": "t4",
                "content": [
                    {"type": "text", "text": "a"},
                    {"type": "image", "source": {}},
                    {"type": "text", "text": "b"},
                ],
            },
            SentToolResult("t4", False, "ab", []),
        ),
        ({"type": "tool_result", "tool_use_id": "t5"}, SentToolResult("t5", False, "", [])),
    ],
)
def test_every_tool_result_reads_in_one_shape(
    block: dict[str, Any], expected: SentToolResult
) -> None:
    sent = SentToolResult.from_block(block)

    assert sent == expected  # content is not compared: checked below
    assert all(isinstance(b, dict) for b in sent.content)
    assert sent.as_dict() == {
        "tool_use_id": expected.tool_use_id,
        "is_error": expected.is_error,
        "text": expected.text,
    }


def test_string_content_becomes_one_text_block() -> None:
    sent = SentToolResult.from_block({"tool_use_id": "t", "content": "boom", "is_error": True})

    assert sent.content == [{"type": "text", "text": "boom"}]


async def test_results_of_a_request_are_in_one_shape_and_in_order() -> None:
    mixed = [
        *FOLLOW_UP[:2],
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "no", "is_error": True}
            ],
        },
    ]
    async with ScriptedMessagesAPI([reply(text("a")), reply(text("b"))]) as api:
        await post(api, body(messages=FOLLOW_UP))
        await post(api, body(messages=mixed))

    assert [r.as_dict() for r in api.requests[0].results()] == [
        {"tool_use_id": "toolu_1", "is_error": False, "text": "5"}
    ]
    assert [r.as_dict() for r in api.requests[1].results()] == [
        {"tool_use_id": "toolu_1", "is_error": True, "text": "no"}
    ]
    assert api.requests[1].tool_result_texts() == ["no"]


# -- add(): a script built step by step


async def test_add_appends_items_answered_in_order_and_chains() -> None:
    api = ScriptedMessagesAPI([reply(text("first"))])
    assert api.add(reply(text("second"))).add({"content": [text("third")]}) is api
    async with api:
        api.add(http_error(529))  # while it runs, too
        answers = [await post(api, body()) for _ in range(4)]

    assert [r.json()["content"][0]["text"] for r in answers[:3]] == ["first", "second", "third"]
    assert answers[3].status_code == 529
    assert api.remaining == 0


def test_add_to_a_function_script_is_refused() -> None:
    api = ScriptedMessagesAPI(lambda request: reply(text("x")))

    with pytest.raises(TypeError, match="function"):
        api.add(reply(text("y")))


# -- served on a thread of its own (`with`)


def test_a_plain_with_serves_from_a_thread_for_sync_code() -> None:
    with ScriptedMessagesAPI([reply(text("from a thread"))]) as api:
        settings = api.settings()
        response = httpx.post(f"{api.base_url}/v1/messages", json=body(), timeout=5)

    assert response.json()["content"] == [{"type": "text", "text": "from a thread"}]
    assert settings.env["ANTHROPIC_BASE_URL"] == api.base_url
    assert len(api.requests) == 1
    with pytest.raises(httpx.ConnectError):  # stopped on leaving
        httpx.post(f"{api.base_url}/v1/messages", json=body(), timeout=5)


def test_leaving_a_plain_with_ends_a_hang_at_once() -> None:
    failures: list[httpx.HTTPError] = []

    def ask(url: str) -> None:
        try:
            httpx.post(f"{url}/v1/messages", json=body(), timeout=60)
        except httpx.HTTPError as exc:
            failures.append(exc)

    with ScriptedMessagesAPI([fault("hang")]) as api:
        thread = threading.Thread(target=ask, args=(api.base_url,), daemon=True)
        thread.start()
        for _ in range(3000):  # until the hang is under way (a bound, not a speed claim)
            if api.requests:
                break
            time.sleep(0.01)
    thread.join(timeout=30)

    assert not thread.is_alive()
    assert len(failures) == 1  # closed, never answered


async def test_a_server_already_running_cannot_be_entered_again() -> None:
    async with ScriptedMessagesAPI([]) as api:
        with pytest.raises(RuntimeError, match="already running"):
            api.__enter__()


# -- a script's own mistakes are named


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        ({"type": "text", "txt": "ok"}, r"content\[0\]: a text block needs 'text' \(str\)"),
        ({"type": "txt", "text": "ok"}, r"content\[0\]: type 'txt' is not one of text"),
        ({"type": "tool_use", "input": {}}, r"content\[0\]: a tool_use block needs 'name'"),
        ({"type": "tool_use", "name": "t", "input": "x"}, "'input' must be an object"),
    ],
)
def test_a_reply_block_the_server_could_not_send_is_refused_when_scripted(
    block: dict[str, Any], problem: str
) -> None:
    # Sent, it failed far away: a dropped connection, then "no scripted reply left".
    with pytest.raises(ValidationError, match=problem):
        reply(block)


async def test_a_script_function_that_fails_is_a_410_naming_its_error() -> None:
    def script(request: RecordedRequest) -> Reply:
        raise RuntimeError("no answer for this question")

    async with ScriptedMessagesAPI(script) as api:
        response = await post(api, body())
    expected = "the script failed on request #0: RuntimeError: no answer for this question"
    assert response.status_code == 410
    assert expected in response.json()["error"]["message"]
    assert api.errors == [f"ScriptedMessagesAPI: {expected}"]
