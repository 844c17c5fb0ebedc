"""ClaudeAgentProvider through the real bundled CLI against the scripted Messages API."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from sf_provider import (
    ClaudeAgentProvider,
    DuplicateToolNameError,
    ErrorPart,
    FinishPart,
    FunctionTool,
    InvalidMessagesError,
    InvalidToolSchemaError,
    MissingExecutorError,
    RateLimitError,
    StreamPart,
    StreamStartPart,
    UnsupportedRequestError,
)
from sf_provider.testing import ScriptedMessagesAPI, http_error, reply, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

BUILT_IN_TOOLS = {"Bash", "Read", "Write", "Edit", "Glob", "Grep", "WebFetch", "WebSearch", "Task"}


def _adder(calls: list[tuple[dict[str, Any], int]]) -> FunctionTool:
    def executor(arguments: dict[str, Any]) -> int:
        calls.append((arguments, os.getpid()))
        return int(arguments["a"]) + int(arguments["b"])

    return FunctionTool(
        name="add",
        description="Add two integers.",
        input_schema={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
        executor=executor,
    )


def _round_trip_script() -> list[Any]:
    return [reply(text("Adding."), tool_use("add", {"a": 2, "b": 3})), reply(text("It is 5."))]


async def test_stream_yields_parts_in_order_for_a_tool_round_trip() -> None:
    calls: list[tuple[dict[str, Any], int]] = []
    async with ScriptedMessagesAPI(_round_trip_script()) as api:
        provider = ClaudeAgentProvider(api.settings())
        parts = [p async for p in provider.stream("2+3?", tools=[_adder(calls)])]
    kinds = [p.type for p in parts]
    assert kinds == [
        "stream-start",
        "text-start", "text-delta", "text-end",
        "tool-input-start", "tool-input-delta", "tool-input-end",
        "tool-call",
        "tool-result",
        "text-start", "text-delta", "text-end",
        "finish",
    ]  # fmt: skip
    call = parts[7]
    result = parts[8]
    assert call.type == "tool-call" and call.provider_executed and call.input == {"a": 2, "b": 3}
    assert result.type == "tool-result" and result.output == "5" and not result.is_error
    assert (
        result.tool_call_id == call.tool_call_id == api.requests[1].tool_results()[0]["tool_use_id"]
    )
    assert calls == [({"a": 2, "b": 3}, os.getpid())], "the executor ran once, in this process"


async def test_generate_is_the_stream_folded() -> None:
    calls: list[tuple[dict[str, Any], int]] = []
    async with ScriptedMessagesAPI(_round_trip_script()) as api:
        provider = ClaudeAgentProvider(api.settings())
        result = await provider.generate("2+3?", tools=[_adder(calls)])
    assert result.text == "It is 5."
    assert result.all_text == "Adding.It is 5."
    assert result.finish_reason == "stop"
    assert [
        (c.tool_name, c.input, c.result.output if c.result else None) for c in result.tool_calls
    ] == [("add", {"a": 2, "b": 3}, "5")]
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    assert result.cost_usd is not None and result.cost_usd > 0
    assert result.session_id and result.num_turns >= 2 and result.raw_stop_reason == "end_turn"


async def test_the_model_is_offered_only_the_bridge_tools() -> None:
    async with ScriptedMessagesAPI(_round_trip_script()) as api:
        provider = ClaudeAgentProvider(api.settings())
        await provider.generate("2+3?", tools=[_adder([])])
    for request in api.requests:
        assert request.tool_names == ["mcp__sf__add"]
        assert not BUILT_IN_TOOLS & set(request.tool_names)


async def test_a_role_content_message_list_is_accepted_and_system_text_reaches_the_api() -> None:
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        provider = ClaudeAgentProvider(api.settings())
        result = await provider.generate(
            [
                {"role": "system", "content": "Answer tersely, pirate style."},
                {"role": "user", "content": [{"type": "text", "text": "Hello there"}]},
            ]
        )
    assert result.text == "ok"
    system = str(api.requests[0].body.get("system"))
    assert "Answer tersely, pirate style." in system
    assert "Hello there" in str(api.requests[0].messages[0]["content"])


async def test_no_tools_runs_a_plain_text_query() -> None:
    async with ScriptedMessagesAPI([reply(text("just text"))]) as api:
        provider = ClaudeAgentProvider(api.settings())
        result = await provider.generate("hi")
    assert result.text == "just text"
    assert api.requests[0].tool_names == []


async def test_executors_run_in_the_event_loop_thread_or_a_worker_but_in_process() -> None:
    seen: list[int] = []

    async def async_executor(arguments: dict[str, Any]) -> str:
        seen.append(threading.get_ident())
        return "async ok"

    tool = FunctionTool(name="ping", executor=async_executor)
    async with ScriptedMessagesAPI([reply(tool_use("ping")), reply(text("done"))]) as api:
        provider = ClaudeAgentProvider(api.settings())
        result = await provider.generate("ping", tools=[tool])
    assert seen == [threading.get_ident()]
    assert result.tool_calls[0].result is not None
    assert result.tool_calls[0].result.output == "async ok"


@pytest.mark.parametrize(
    ("make_request", "error"),
    [
        (lambda p, t: p.stream("x", tools=[t, t]), DuplicateToolNameError),
        (lambda p, t: p.stream("x", tools=[t], seed=7), UnsupportedRequestError),
        (
            lambda p, t: p.stream([{"role": "robot", "content": "x"}], tools=[t]),
            InvalidMessagesError,
        ),
        (
            lambda p, t: p.stream("x", tools=[FunctionTool(name="manual")], mode="executor"),
            MissingExecutorError,
        ),
        (
            lambda p, t: p.stream("x", tools=[t], tool_choice={"type": "tool", "name": "nope"}),
            UnsupportedRequestError,
        ),
    ],
    ids=[
        "duplicate-names",
        "unknown-option",
        "unknown-role",
        "forced-executor-without-executor",
        "tool-choice-names-unknown-tool",
    ],
)
async def test_bad_requests_fail_before_anything_is_spawned(
    make_request: Any, error: type[Exception]
) -> None:
    async with ScriptedMessagesAPI([]) as api:
        provider = ClaudeAgentProvider(api.settings())
        with pytest.raises(error) as info:
            make_request(provider, _adder([]))
    assert str(info.value)
    assert api.all_requests == []


def test_an_invalid_schema_is_rejected_when_the_tool_is_built() -> None:
    with pytest.raises(InvalidToolSchemaError, match="not a valid JSON Schema"):
        FunctionTool(name="bad", input_schema={"type": "object", "properties": {"a": {"type": 5}}})


async def test_an_api_error_streams_an_error_part_then_raises() -> None:
    async with ScriptedMessagesAPI([http_error(429, "slow down", retry_after=7)]) as api:
        provider = ClaudeAgentProvider(api.settings())
        parts: list[StreamPart] = []
        with pytest.raises(RateLimitError) as info:
            async for part in provider.stream("hi"):
                parts.append(part)
    assert isinstance(parts[0], StreamStartPart)
    assert isinstance(parts[-2], ErrorPart) and parts[-2].error_type == "RateLimitError"
    assert isinstance(parts[-1], FinishPart) and parts[-1].finish_reason == "error"
    assert info.value.status == 429 and info.value.retryable
    assert "429" in str(info.value)


async def test_each_query_uses_and_removes_its_own_temp_dir(tmp_path: Path) -> None:
    before = set(Path(os.environ["TMPDIR"]).glob("sf-provider-*"))
    async with ScriptedMessagesAPI([reply(text("a")), reply(text("b"))]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))  # a process per query
        await provider.generate("one")
        await provider.generate("two")
    assert set(Path(os.environ["TMPDIR"]).glob("sf-provider-*")) == before
    devices = {json.loads(r.body["metadata"]["user_id"])["device_id"] for r in api.requests}
    assert len(devices) == 2, "each query ran with a fresh config dir (a new device id)"
