"""The recorder's pure pieces: an SSE answer assembled into its message, a message turned into a
script reply that serves it again, and upstream errors turned into scripted errors."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from sf_provider._recording import (
    PLACEHOLDER_KEY,
    UpstreamRecorder,
    _error_item,
    _StreamError,
    assemble_stream,
    reply_from_message,
)
from sf_provider.testing import (
    HTTPErrorReply,
    RecordedRequest,
    Reply,
    ScriptedMessagesAPI,
    _sse_events,
    reply,
    text,
)

MESSAGE: dict[str, Any] = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-real",
    "content": [
        {"type": "thinking", "thinking": "Let me look it up.", "signature": "sig-abc"},
        {"type": "text", "text": "Looking up the weather in Paris, France."},
        {
            "type": "tool_use",
            "id": "toolu_real",
            "name": "mcp__sf__get_weather",
            "input": {"city": "Paris", "days": [1, 2]},
        },
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 100, "output_tokens": 40, "service_tier": "standard"},
}


def data_lines(events: list[bytes]) -> list[str]:
    return [line for event in events for line in event.decode().splitlines()]


@pytest.mark.parametrize("chunk_size", [1, 5, 1000])
def test_a_streamed_message_assembles_to_the_message(chunk_size: int) -> None:
    assembled = assemble_stream(data_lines(_sse_events(MESSAGE, chunk_size)))

    assert assembled["content"] == MESSAGE["content"]
    assert assembled["stop_reason"] == "tool_use"
    assert assembled["model"] == "claude-real"
    assert assembled["usage"]["output_tokens"] == 40


def test_an_error_event_in_the_stream_is_a_stream_error() -> None:
    lines = [
        'data: {"type": "message_start", "message": {"usage": {}}}',
        'data: {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}',
    ]

    with pytest.raises(_StreamError) as caught:
        assemble_stream(lines)

    assert caught.value.error_type == "overloaded_error"
    assert _error_item(529, caught.value.body, None).message == "busy"


def test_a_stream_cut_before_message_stop_is_refused() -> None:
    events = _sse_events(MESSAGE, 8)[:-1]

    with pytest.raises(ValueError, match="before message_stop"):
        assemble_stream(data_lines(events))


def test_a_reply_uses_the_apps_tool_names_no_ids_and_integer_usage_only() -> None:
    recorded = reply_from_message(MESSAGE, "sf")

    assert recorded.content == [
        {"type": "thinking", "thinking": "Let me look it up.", "signature": "sig-abc"},
        {"type": "text", "text": "Looking up the weather in Paris, France."},
        {"type": "tool_use", "name": "get_weather", "input": {"city": "Paris", "days": [1, 2]}},
    ]
    assert recorded.usage == {"input_tokens": 100, "output_tokens": 40}
    assert recorded.model == "claude-real"
    assert recorded.stop_reason is None  # what the scripted API says anyway


def test_an_unusual_stop_reason_and_unknown_blocks_are_kept() -> None:
    message = {
        "content": [{"type": "redacted_thinking", "data": "opaque"}, {"type": "text", "text": "x"}],
        "stop_reason": "max_tokens",
    }

    recorded = reply_from_message(message, "sf")

    assert recorded.content[0] == {"type": "redacted_thinking", "data": "opaque"}
    assert recorded.stop_reason == "max_tokens"


@pytest.mark.anyio
async def test_a_recorded_reply_serves_what_was_recorded() -> None:
    # Round trip: the scripted API's own answer, assembled and served again, is the same answer.
    body = {"stream": False, "tools": [{"name": "mcp__sf__get_weather"}], "messages": []}
    async with (
        ScriptedMessagesAPI([reply_from_message(MESSAGE, "sf")]) as api,
        httpx.AsyncClient(base_url=api.base_url, verify=False) as client,
    ):
        answer = (await client.post("/v1/messages", json=body)).json()

    assert [b.get("name") for b in answer["content"]] == [None, None, "mcp__sf__get_weather"]
    assert answer["content"][2]["input"] == {"city": "Paris", "days": [1, 2]}


@pytest.mark.parametrize(
    ("status", "body", "retry_after", "expected"),
    [
        (
            429,
            json.dumps({"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}),
            "30",
            HTTPErrorReply(
                status=429, error_type="rate_limit_error", message="slow", retry_after=30
            ),
        ),
        (
            502,
            "<html>bad gateway</html>",
            "soon",
            HTTPErrorReply(status=502, error_type="api_error", message="HTTP 502"),
        ),
    ],
)
def test_upstream_errors_become_scripted_errors(
    status: int, body: str, retry_after: str, expected: HTTPErrorReply
) -> None:
    assert _error_item(status, body.encode(), retry_after) == expected


def test_a_text_reply_round_trips() -> None:
    message = {"content": [text("hello")], "stop_reason": "end_turn", "usage": {}}

    assert reply_from_message(message, "sf") == reply(text("hello"))


@pytest.mark.parametrize(
    ("credential", "forwarded"),
    [
        ({"x-api-key": PLACEHOLDER_KEY}, {}),
        ({"Authorization": f"Bearer {PLACEHOLDER_KEY}"}, {}),
        ({"x-api-key": "sk-ant-real"}, {"x-api-key": "sk-ant-real"}),
        ({"Authorization": "Bearer gw-key"}, {"authorization": "Bearer gw-key"}),
    ],
)
def test_the_placeholder_credential_is_never_forwarded(
    credential: dict[str, str], forwarded: dict[str, str]
) -> None:
    """With no credential configured, the CLI records on a placeholder key: the upstream must
    get no credential at all, while a real one is forwarded as the CLI sent it."""
    with ScriptedMessagesAPI([reply(text("hi"))]) as upstream:
        recorder = UpstreamRecorder(upstream.base_url, withhold=PLACEHOLDER_KEY)
        request = RecordedRequest(
            method="POST",
            path="/v1/messages",
            headers={"anthropic-version": "2023-06-01", **credential},
            body={"model": "m", "max_tokens": 10, "messages": []},
        )
        answer = recorder._forward(request)
    assert isinstance(answer, Reply)
    assert answer.content == [text("hi")]
    [sent] = upstream.requests
    got = {k.lower(): v for k, v in sent.headers.items()}
    assert {k: got[k] for k in ("x-api-key", "authorization") if k in got} == forwarded
    assert got["anthropic-version"] == "2023-06-01"
