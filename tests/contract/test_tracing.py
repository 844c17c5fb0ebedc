"""Tracing (OpenTelemetry GenAI conventions) through the real CLI, recorded by the OpenTelemetry
SDK's in-memory exporter as an application would configure it: one span per query, one
`execute_tool` span per tool run inside it, the `mcp` SDK's spans nested under the query, and
nothing at all without a configured tracer provider."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from conftest import gateway_url, serving
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from tracing_support import ancestors, by_name, measuring, parent_of, recording, roots

from sf_provider import (
    APIError,
    ClaudeAgentProvider,
    FunctionTool,
    GateDecision,
    GateRequest,
    MissingExecutorError,
    ToolRegistry,
    UnsupportedRequestError,
)
from sf_provider._tracing import CAPTURE_CONTENT_ENV
from sf_provider.gateway import GatewaySettings, create_app
from sf_provider.testing import (
    ScriptedMessagesAPI,
    fault,
    http_error,
    offline_env,
    reply,
    text,
    tool_use,
)

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

MODEL = "claude-sonnet-5-5"
ADD_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    with recording() as exporter:
        yield exporter


def _adder(calls: list[dict[str, Any]] | None = None) -> FunctionTool:
    def add(arguments: dict[str, Any]) -> int:
        if calls is not None:
            calls.append(arguments)
        return int(arguments["a"]) + int(arguments["b"])

    return FunctionTool("add", "Add two integers.", ADD_SCHEMA, executor=add)


def _round_trip(**usage: int) -> list[Any]:
    return [
        reply(text("Adding."), tool_use("add", {"a": 2, "b": 3}), **usage),
        reply(text("It is 5."), **usage),
    ]


def _query_span(finished: tuple[ReadableSpan, ...]) -> ReadableSpan:
    (query,) = [s for s in finished if s.name.startswith("chat")]
    return query


async def test_an_executor_query_is_one_span_with_its_tool_call_inside(
    spans: InMemorySpanExporter,
) -> None:
    calls: list[dict[str, Any]] = []
    script = _round_trip(cache_read_input_tokens=100, cache_creation_input_tokens=7)
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(model=MODEL, warm_processes=0))
        result = await provider.generate("2+3?", tools=[_adder(calls)])
    assert calls == [{"a": 2, "b": 3}] and result.text == "It is 5."
    finished = spans.get_finished_spans()
    query = _query_span(finished)
    assert roots(finished) == [query], "every span of the query is inside it"
    assert {s.context.trace_id for s in finished} == {query.context.trace_id}
    assert query.name == f"chat {MODEL}" and query.kind is SpanKind.CLIENT
    assert query.status.status_code is StatusCode.UNSET
    attributes = dict(query.attributes or {})
    usage = result.usage
    assert attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": MODEL,
        "gen_ai.response.model": MODEL,  # what the scripted API answered with
        "gen_ai.response.id": "msg_scripted_0003",  # the last API message (see below)
        "gen_ai.response.finish_reasons": ("stop",),
        # Input counts cache reads and writes, as the conventions ask: 2 calls x (25 + 100 + 7).
        "gen_ai.usage.input_tokens": 264,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": 200,
        "gen_ai.usage.cache_creation.input_tokens": 14,
        "sf_provider.mode": "executor",
        "sf_provider.process": "fresh",
        "sf_provider.cost_usd": result.cost_usd,
        "sf_provider.session_id": result.session_id,
        "sf_provider.num_turns": result.num_turns,
        "sf_provider.api_calls": 2,
    }
    assert usage.input_tokens == 50 and usage.cache_read_input_tokens == 200
    (tool,) = by_name(finished, "execute_tool add")
    call_id = api.requests[1].tool_results()[0]["tool_use_id"]
    assert tool.kind is SpanKind.INTERNAL and tool.status.status_code is StatusCode.UNSET
    assert dict(tool.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Add two integers.",
        "gen_ai.tool.call.id": call_id,
        "sf_provider.transport": "sdk-bridge",
    }
    # The mcp SDK's own span of the call wraps the run, inside the query's span.
    assert ancestors(tool, finished) == ["tools/call add", query.name]
    assert (query.start_time or 0) <= (tool.start_time or 0) <= (tool.end_time or 0)
    assert (tool.end_time or 0) <= (query.end_time or 0)


async def test_the_query_span_has_the_last_api_messages_id_as_response_id(
    spans: InMemorySpanExporter,
) -> None:
    async with ScriptedMessagesAPI(_round_trip()) as api:
        provider = ClaudeAgentProvider(api.settings(model=MODEL, warm_processes=0))
        await provider.generate("2+3?", tools=[_adder()])
    attributes = dict(_query_span(spans.get_finished_spans()).attributes or {})
    # The scripted API numbers tool calls and messages alike: toolu_..._0001 in the first
    # answer (msg_..._0002), then the last answer, msg_..._0003.
    assert attributes["gen_ai.response.id"] == "msg_scripted_0003"


async def test_a_query_records_the_genai_client_metrics(spans: InMemorySpanExporter) -> None:
    """`gen_ai.client.token.usage` (input with the cache, as on the span) and
    `gen_ai.client.operation.duration`, as dashboards built on the conventions read them."""
    script = _round_trip(cache_read_input_tokens=100, cache_creation_input_tokens=7)
    with measuring() as measured:
        async with ScriptedMessagesAPI(script) as api:
            provider = ClaudeAgentProvider(api.settings(model=MODEL, warm_processes=0))
            result = await provider.generate("2+3?", tools=[_adder()])
    common = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": MODEL,
        "gen_ai.response.model": MODEL,
    }
    assert sorted(measured.of("gen_ai.client.token.usage"), key=repr) == [
        ({**common, "gen_ai.token.type": "input"}, 264, 1),
        ({**common, "gen_ai.token.type": "output"}, result.usage.output_tokens, 1),
    ]
    ((attributes, seconds, count),) = measured.of("gen_ai.client.operation.duration")
    assert (attributes, count) == (common, 1)
    # The duration is the query span's own (measured within it), not some other interval.
    query = _query_span(spans.get_finished_spans())
    assert seconds * 1e9 <= (query.end_time or 0) - (query.start_time or 0)


async def test_a_failed_query_records_its_duration_with_the_error_type(
    spans: InMemorySpanExporter,
) -> None:
    with measuring() as measured:
        async with ScriptedMessagesAPI([http_error(500)]) as api:
            provider = ClaudeAgentProvider(api.settings(model=MODEL, warm_processes=0))
            with pytest.raises(APIError):
                await provider.generate("2+3?")
    assert measured.of("gen_ai.client.token.usage") == []  # nothing was used
    ((attributes, _seconds, count),) = measured.of("gen_ai.client.operation.duration")
    assert count == 1 and attributes["error.type"] == "APIError"


async def test_a_warm_process_nests_its_spans_under_the_query_it_serves(
    spans: InMemorySpanExporter,
) -> None:
    """A warm process's bridge was started by the first query; the second query's mcp and tool
    spans still belong to the second query, not the first."""
    tool = _adder()
    async with (
        ScriptedMessagesAPI([*_round_trip(), *_round_trip()]) as api,
        ClaudeAgentProvider(api.settings(model=MODEL, warm_processes=1)) as provider,
    ):
        first = await provider.generate("2+3?", tools=[tool])
        second = await provider.generate("2+3 again?", tools=[tool])
    assert first.session_id == second.session_id, "the second query ran on the warm process"
    finished = spans.get_finished_spans()
    queries = [s for s in finished if s.name.startswith("chat")]
    assert [dict(q.attributes or {})["sf_provider.process"] for q in queries] == ["fresh", "warm"]
    assert roots(finished) == queries
    for query in queries:
        trace = [s for s in finished if s.context.trace_id == query.context.trace_id]
        (tool_span,) = by_name(trace, "execute_tool add")
        assert ancestors(tool_span, finished) == ["tools/call add", query.name]
        assert all(ancestors(s, finished)[-1:] == [query.name] for s in trace if s is not query)
    # The mcp SDK's handshake with the bridge (docs/tracing.md): once per process, so under the
    # query that started it, and none under a query on the warm process.
    handshake = ["initialize", "notifications/initialized", "tools/list"]
    for query, expected in zip(queries, [handshake, []], strict=True):
        children = [s.name for s in finished if parent_of(s, finished) is query]
        assert sorted(n for n in children if n in handshake) == sorted(expected)


#: An API error that quotes the prompt back, as a 400 about the request can.
SECRET_PROMPT = "my card is 4111 1111 1111 1111, add 2 and 3"


@pytest.mark.parametrize("capture", [False, True], ids=["no-capture", "capture"])
async def test_a_failed_query_has_error_status_and_the_provider_error_type(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch, capture: bool
) -> None:
    if capture:
        monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    quoting = http_error(500, f"could not process: {SECRET_PROMPT}")
    async with ScriptedMessagesAPI([quoting]) as api:
        provider = ClaudeAgentProvider(api.settings(model=MODEL, warm_processes=0))
        with pytest.raises(APIError) as raised:
            await provider.generate(SECRET_PROMPT, tools=[_adder()])
    assert SECRET_PROMPT in str(raised.value)
    query = _query_span(spans.get_finished_spans())
    assert query.status.status_code is StatusCode.ERROR
    attributes = dict(query.attributes or {})
    assert attributes["error.type"] == "APIError"
    assert attributes["gen_ai.response.finish_reasons"] == ("error",)
    (event,) = query.events
    assert event.name == "exception"
    recorded = dict(event.attributes or {})
    assert recorded["exception.type"].endswith("APIError")
    if capture:
        assert query.status.description == str(raised.value)
        assert SECRET_PROMPT in recorded["exception.message"]
    else:
        # Without content capture, nothing of the error's message: a fixed one with its type.
        assert query.status.description == (
            f"the query failed with APIError (its message is recorded only with content "
            f"capture: {CAPTURE_CONTENT_ENV}=true)"
        )
        assert recorded["exception.message"] == query.status.description
        assert "4111" not in json.dumps(
            [dict(span.attributes or {}) for span in spans.get_finished_spans()]
            + [dict(e.attributes or {}) for span in spans.get_finished_spans() for e in span.events]
        )


async def test_a_request_refused_before_its_query_starts_is_a_failed_span(
    spans: InMemorySpanExporter,
) -> None:
    """A request refused before any process starts (here a tool without an executor in
    executor mode) left no span: a trace showed nothing of a failed request."""
    remote = FunctionTool("add", "Add two integers.", ADD_SCHEMA)  # no executor
    async with ScriptedMessagesAPI([reply(text("unused"))]) as api:
        provider = ClaudeAgentProvider(api.settings(model=MODEL, warm_processes=0))
        with pytest.raises(MissingExecutorError) as raised:
            await provider.generate("2+3?", tools=[remote], mode="executor")
    assert api.requests == []
    (query,) = spans.get_finished_spans()
    assert (query.name, query.kind) == (f"chat {MODEL}", SpanKind.CLIENT)
    assert query.status.status_code is StatusCode.ERROR
    assert query.status.description.startswith("the query failed with MissingExecutorError")
    assert "add" not in query.status.description  # the message names the request's tools
    assert "add" in str(raised.value)
    assert dict(query.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": MODEL,
        "error.type": "MissingExecutorError",
    }
    (event,) = query.events
    assert dict(event.attributes or {})["exception.type"].endswith("MissingExecutorError")


async def test_a_door_traces_a_refused_request_with_the_providers_model(
    spans: InMemorySpanExporter,
) -> None:
    # A door's options are checked in `_door.request`, which traced the request's model only:
    # a call relying on the provider's model was a span without one.
    from sf_provider.adapters.langchain import ChatClaudeAgent

    async with ScriptedMessagesAPI([]) as api:
        chat = ChatClaudeAgent(provider=ClaudeAgentProvider(api.settings(model=MODEL)))
        with pytest.raises(UnsupportedRequestError, match="max_tokens"):
            await chat.ainvoke("2+3?", max_tokens=0)
    assert api.requests == []
    (query,) = spans.get_finished_spans()
    assert query.name == f"chat {MODEL}"
    assert dict(query.attributes or {})["gen_ai.request.model"] == MODEL
    assert query.status.status_code is StatusCode.ERROR


@pytest.mark.parametrize("call", ["stream", "invoke in a running loop"])
def test_a_sync_adapter_call_traces_its_query_under_the_callers_span(
    spans: InMemorySpanExporter, call: str
) -> None:
    # The sync bridge runs the query on a worker thread (a sync stream always; a sync call when
    # the caller's thread runs an event loop): the caller's context went missing there, so the
    # query span started a trace of its own instead of nesting under the application's span.
    from opentelemetry import trace

    from sf_provider.adapters.langchain import ChatClaudeAgent

    async def in_a_loop(chat: ChatClaudeAgent) -> None:
        chat.invoke("Hi")

    with ScriptedMessagesAPI([reply(text("Hello."))]) as api:
        chat = ChatClaudeAgent(settings=api.settings(model=MODEL, warm_processes=0))
        with trace.get_tracer("the-app").start_as_current_span("the app's request"):
            if call == "stream":
                assert "".join(chunk.text for chunk in chat.stream("Hi")) == "Hello."
            else:
                asyncio.run(in_a_loop(chat))
    finished = spans.get_finished_spans()
    assert parent_of(_query_span(finished), finished).name == "the app's request"


@pytest.mark.parametrize("how", ["cancelled", "left"])
async def test_a_query_the_application_stops_is_closed_early_not_an_error(
    spans: InMemorySpanExporter, how: str
) -> None:
    # Cancelling the call (the app's own timeout, a gateway client gone) is no provider failure,
    # like leaving the stream.
    async with ScriptedMessagesAPI([fault("hang", seconds=30)]) as api:
        provider = ClaudeAgentProvider(api.settings(model=MODEL, warm_processes=0))
        if how == "cancelled":
            # Cancelled once the model holds the request (not after a fixed delay, which a
            # loaded machine's CLI start-up can outlast).
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as group:
                    group.start_soon(provider.generate, "2+3?")
                    while not api.requests:  # noqa: ASYNC110 - the scripted API has no event
                        await anyio.sleep(0.05)
                    scope.cancel()
            assert scope.cancelled_caught
        else:
            async with provider.stream("2+3?") as parts:
                async for _ in parts:
                    break  # the stream-start part
    query = _query_span(spans.get_finished_spans())
    assert query.status.status_code is StatusCode.UNSET
    attributes = dict(query.attributes or {})
    assert attributes["sf_provider.closed_early"] is True
    assert "error.type" not in attributes


def _ended_within(query: ReadableSpan, finished: tuple[ReadableSpan, ...]) -> list[str]:
    """The spans of the query's trace that ended after it."""
    trace = [s for s in finished if s.context.trace_id == query.context.trace_id]
    return [s.name for s in trace if (s.end_time or 0) > (query.end_time or 0)]


@pytest.mark.parametrize("how", ["cancelled", "left"])
async def test_a_query_stopped_while_a_tool_runs_ends_after_its_tool_spans(
    spans: InMemorySpanExporter, how: str
) -> None:
    """Stopping a query stops its tool call, whose spans (the tool's, the mcp SDK's) ended
    after the query's: a backend drew the call outside its query, or dropped it."""
    started = anyio.Event()

    async def slow(_arguments: dict[str, Any]) -> str:
        started.set()
        await anyio.sleep(30)
        return "late"

    tool = FunctionTool("slow", "Slow.", {"type": "object", "properties": {}}, executor=slow)
    script = [reply(tool_use("slow", {})), reply(text("Done."))]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(model=MODEL, warm_processes=0))
        if how == "cancelled":

            async def ask() -> None:
                await provider.generate("Go.", tools=[tool])

            async with anyio.create_task_group() as group:
                group.start_soon(ask)
                await started.wait()
                group.cancel_scope.cancel()
        else:
            async with provider.stream("Go.", tools=[tool]) as parts:
                async for part in parts:
                    if part.type == "tool-call":
                        await started.wait()
                        break
    finished = spans.get_finished_spans()
    query = _query_span(finished)
    (call,) = by_name(finished, "execute_tool slow")
    assert ancestors(call, finished) == ["tools/call slow", query.name]
    assert dict(call.attributes or {})["sf_provider.closed_early"] is True
    assert _ended_within(query, finished) == []


async def test_a_call_the_gate_denied_is_an_execute_tool_span_with_error_status(
    spans: InMemorySpanExporter,
) -> None:
    ran: list[dict[str, Any]] = []

    def deny(request: GateRequest) -> GateDecision:
        return GateDecision.deny(f"{request.tool.name} is off limits")

    def delete(arguments: dict[str, Any]) -> str:
        ran.append(arguments)
        return "deleted"

    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    registry = ToolRegistry(
        [FunctionTool("delete_file", "Delete a file.", schema, executor=delete, mutating=True)],
        gate=deny,
    )
    script = [
        reply(tool_use("delete_file", {"path": "/tmp/x"})),
        reply(text("It was not allowed.")),
    ]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0), registry=registry)
        result = await provider.generate("Delete /tmp/x")
    assert ran == [] and result.text == "It was not allowed."
    finished = spans.get_finished_spans()
    (tool,) = by_name(finished, "execute_tool delete_file")
    assert tool.status.status_code is StatusCode.ERROR
    # The gate's reason may hold the call's content: only with content capture (tests/unit).
    assert tool.status.description == "tool 'delete_file': gate_denied"
    assert dict(tool.attributes or {})["error.type"] == "gate_denied"
    query = _query_span(finished)
    assert query.status.status_code is StatusCode.UNSET, "the query itself went well"
    assert ancestors(tool, finished)[-1] == query.name == "chat"  # no model asked: the default


async def test_a_failing_executor_is_an_execute_tool_span_with_its_exception_type(
    spans: InMemorySpanExporter,
) -> None:
    def add(arguments: dict[str, Any]) -> int:
        raise ValueError("no numbers today")

    script = [reply(tool_use("add", {"a": 2, "b": 3})), reply(text("It failed."))]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        await provider.generate("2+3?", tools=[FunctionTool("add", "", ADD_SCHEMA, executor=add)])
    (tool,) = by_name(spans.get_finished_spans(), "execute_tool add")
    assert tool.status.status_code is StatusCode.ERROR
    assert tool.status.description == "tool 'add': ValueError"  # no content without capture
    assert dict(tool.attributes or {})["error.type"] == "ValueError"


async def test_single_turn_is_one_span_finishing_with_tool_call_and_runs_nothing(
    spans: InMemorySpanExporter,
) -> None:
    tool = FunctionTool("add", "Add two integers.", ADD_SCHEMA)  # no executor: single-turn
    async with ScriptedMessagesAPI([reply(tool_use("add", {"a": 2, "b": 3}))]) as api:
        provider = ClaudeAgentProvider(api.settings(model=MODEL, warm_processes=0))
        result = await provider.generate("2+3?", tools=[tool])
    assert result.finish_reason == "tool-calls"
    finished = spans.get_finished_spans()
    query = _query_span(finished)
    attributes = dict(query.attributes or {})
    assert attributes["sf_provider.mode"] == "single-turn"
    assert attributes["gen_ai.response.finish_reasons"] == ("tool_call",)
    assert not [s for s in finished if s.name.startswith(("execute_tool", "tools/call"))]
    assert roots(finished) == [query]


async def test_under_an_instrumented_pydantic_ai_agent_usage_is_counted_once(
    spans: InMemorySpanExporter,
) -> None:
    """pydantic-ai's instrumentation makes a `chat` span with the usage for each model request;
    the query inside it is an `sf_provider.query` span, so a backend summing `gen_ai.usage.*`
    over inference spans counts the tokens once."""
    from pydantic_ai import Agent
    from pydantic_ai.capabilities import Instrumentation

    from sf_provider.adapters.pydantic_ai import ClaudeAgentModel

    script = [reply(text("Hello."), input_tokens=11, output_tokens=7)]
    with measuring() as measured:
        async with ScriptedMessagesAPI(script) as api:
            provider = ClaudeAgentProvider(api.settings(model=MODEL, warm_processes=0))
            agent = Agent(ClaudeAgentModel(provider), capabilities=[Instrumentation()])
            result = await agent.run("Hi")
    assert result.output == "Hello."
    # pydantic-ai records the request's metrics itself: none of ours, or they count twice.
    assert measured.points == {}
    finished = spans.get_finished_spans()
    counted = [s for s in finished if (s.attributes or {}).get("gen_ai.usage.input_tokens")]
    assert [(s.name, s.attributes["gen_ai.usage.output_tokens"]) for s in counted] == [
        (f"chat {MODEL}", 7)
    ]
    (ours,) = by_name(finished, "sf_provider.query")
    assert parent_of(ours, finished) is counted[0]  # the caller's span, which has the usage
    assert ours.kind == SpanKind.INTERNAL
    attributes = dict(ours.attributes or {})
    assert not [k for k in attributes if k.startswith("gen_ai.")]
    assert attributes["sf_provider.mode"] == "single-turn"
    assert attributes["sf_provider.api_calls"] == 1


async def test_under_a_span_that_is_not_a_model_call_the_query_is_the_chat_span(
    spans: InMemorySpanExporter,
) -> None:
    from opentelemetry import trace

    tracer = trace.get_tracer("the-app")
    async with ScriptedMessagesAPI([reply(text("Hello."))]) as api:
        provider = ClaudeAgentProvider(api.settings(model=MODEL, warm_processes=0))
        with tracer.start_as_current_span(
            "invoke_agent helper", attributes={"gen_ai.operation.name": "invoke_agent"}
        ):
            await provider.generate("Hi")
    finished = spans.get_finished_spans()
    assert not by_name(finished, "sf_provider.query")
    query = _query_span(finished)
    assert (query.kind, query.attributes["gen_ai.operation.name"]) == (SpanKind.CLIENT, "chat")
    assert parent_of(query, finished).name == "invoke_agent helper"


async def test_message_contents_are_recorded_only_when_the_app_opts_in(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = _adder()
    contents = {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    }
    async with ScriptedMessagesAPI([*_round_trip(), *_round_trip()]) as api:
        provider = ClaudeAgentProvider(
            api.settings(warm_processes=0, system_prompt="You add numbers.")
        )
        monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
        await provider.generate("What is 2+3?", tools=[tool])
        without = spans.get_finished_spans()
        spans.clear()
        monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
        await provider.generate("What is 2+3?", tools=[tool])
        with_contents = spans.get_finished_spans()
    assert not [key for s in without for key in s.attributes or {} if key in contents]
    query = dict(_query_span(with_contents).attributes or {})
    assert json.loads(query["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "You add numbers."}
    ]
    assert json.loads(query["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "What is 2+3?"}]}
    ]
    output = json.loads(query["gen_ai.output.messages"])
    assert [m["finish_reason"] for m in output] == ["tool_call", "stop"]
    assert output[-1]["parts"] == [{"type": "text", "content": "It is 5."}]
    assert output[0]["parts"][-1]["name"] == "add"
    (call,) = by_name(with_contents, "execute_tool add")
    attributes = dict(call.attributes or {})
    assert json.loads(attributes["gen_ai.tool.call.arguments"]) == {"a": 2, "b": 3}
    assert attributes["gen_ai.tool.call.result"] == "5"


async def test_a_structured_answer_is_in_the_output_messages_with_contents(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The object of an `output_schema` query is the model's answer (through the CLI's hidden
    StructuredOutput tool): the output messages were empty."""
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    async with ScriptedMessagesAPI([reply(tool_use("StructuredOutput", {"n": 5}))]) as api:
        provider = ClaudeAgentProvider(api.settings(model=MODEL, warm_processes=0))
        result = await provider.generate("How many?", output_schema=schema)
    assert result.structured_output == {"n": 5}
    attributes = dict(_query_span(spans.get_finished_spans()).attributes or {})
    assert attributes["gen_ai.output.type"] == "json"
    assert json.loads(attributes["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": '{"n": 5}'}],
            "finish_reason": "stop",
        }
    ]


@asynccontextmanager
async def _gateway(api: ScriptedMessagesAPI) -> AsyncIterator[str]:
    app = create_app(GatewaySettings(provider=api.settings(model=MODEL, warm_processes=0)))
    async with serving(app) as url:
        yield url


async def test_the_gateway_continues_an_incoming_traceparent(
    spans: InMemorySpanExporter,
) -> None:
    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    async with (
        ScriptedMessagesAPI([reply(text("Hello."))]) as api,
        _gateway(api) as base_url,
        httpx.AsyncClient(timeout=60) as http,
    ):
        response = await http.post(
            f"{base_url}/v1/chat/completions",
            json={"model": MODEL, "messages": [{"role": "user", "content": "Hi"}]},
            headers={"traceparent": f"00-{trace_id}-{parent_id}-01"},
        )
    assert response.status_code == 200, response.text
    query = _query_span(spans.get_finished_spans())
    assert f"{query.context.trace_id:032x}" == trace_id
    assert query.parent is not None and query.parent.is_remote
    assert f"{query.parent.span_id:016x}" == parent_id
    assert parent_of(query, spans.get_finished_spans()) is None


_UNCONFIGURED = textwrap.dedent(
    """
    import asyncio, json, sys

    def otel():
        return {m for m in sys.modules if m.startswith("opentelemetry")}

    import sf_provider

    bare = sorted(otel())
    import claude_agent_sdk  # loads opentelemetry-api (through mcp)

    before = otel()
    from sf_provider import ClaudeAgentProvider, FunctionTool, _bridge, _invoke, _tracing
    from sf_provider.gateway import _http

    added = sorted(otel() - before)
    looked_at_import = _tracing._looked

    from opentelemetry import trace

    from sf_provider.testing import ScriptedMessagesAPI, reply, text, tool_use

    current = []

    def add(arguments):
        current.append(trace.get_current_span().get_span_context().is_valid)
        return arguments["a"] + arguments["b"]

    schema = {"type": "object", "properties": {"a": {"type": "integer"},
              "b": {"type": "integer"}}}
    script = [reply(tool_use("add", {"a": 2, "b": 3})), reply(text("5"))] * 2

    async def main():
        tool = FunctionTool("add", "Add.", schema, executor=add)
        async with ScriptedMessagesAPI(script) as api:
            provider = ClaudeAgentProvider(api.settings(warm_processes=0))
            await provider.generate("2+3?", tools=[tool])
            sdk_loaded = any(m.startswith("opentelemetry.sdk") for m in sys.modules)
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
                InMemorySpanExporter,
            )

            exporter = InMemorySpanExporter()
            configured = TracerProvider()
            configured.add_span_processor(SimpleSpanProcessor(exporter))
            trace.set_tracer_provider(configured)  # configured late: the next query sees it
            await provider.generate("2+3?", tools=[tool])
        return sdk_loaded, sorted(s.name for s in exporter.get_finished_spans())

    sdk_loaded, names = asyncio.run(main())
    print(json.dumps({"bare": bare, "added": added, "looked_at_import": looked_at_import,
                      "current": current, "sdk_loaded": sdk_loaded, "names": names}))
    """
)


#: `sf-provider gateway` in a process whose OpenTelemetry SDK batches spans (as
#: `opentelemetry-instrument` configures it), writing the names of exported spans to a file.
_TRACED_GATEWAY = """
import sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
class ToFile(SpanExporter):
    def export(self, spans):
        with open(sys.argv[1], "a") as out:
            out.writelines(f"{span.name}\\n" for span in spans)
        return SpanExportResult.SUCCESS
provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(ToFile(), schedule_delay_millis=600_000))
trace.set_tracer_provider(provider)
from sf_provider.cli import main
sys.exit(main(["gateway", "--port", "0", "--api-key", "key"]))
"""


async def test_the_gateway_commands_spans_are_exported_when_it_is_stopped(
    tmp_path: Path,
) -> None:
    # uvicorn ends the process by re-raising SIGTERM after its graceful shutdown, so no atexit
    # handler (the SDK's own flush) runs: the spans still batched were lost.
    exported = tmp_path / "spans.txt"
    async with ScriptedMessagesAPI([reply(text("Sunny."))]) as api:
        env = {**os.environ, **offline_env(api.base_url)}
        command = [sys.executable, "-c", _TRACED_GATEWAY, str(exported)]
        async with await anyio.open_process(command, env=env) as gateway_process:
            url, log = await gateway_url(gateway_process)
            assert gateway_process.stderr is not None
            async with httpx.AsyncClient(base_url=url, timeout=60) as client:
                answer = await client.post(
                    "/v1/chat/completions",
                    headers={"authorization": "Bearer key"},
                    json={"model": MODEL, "messages": [{"role": "user", "content": "Sunny?"}]},
                )
            assert answer.status_code == 200, answer.text
            assert not exported.exists(), "batched, not exported yet"
            gateway_process.send_signal(signal.SIGTERM)
            async for chunk in gateway_process.stderr:
                log += chunk.decode()
            await gateway_process.wait()
    assert "Application shutdown complete" in log
    assert f"chat {MODEL}" in exported.read_text().splitlines()


def test_without_a_tracer_provider_nothing_is_traced_and_nothing_imported() -> None:
    """`import sf_provider` imports nothing of OpenTelemetry, and its traced modules import
    nothing beyond what the Agent SDK does (through mcp) nor look for it; a query without a
    configured tracer provider makes no span (its tools see none), and one configured later is
    used from the next query on."""
    out = subprocess.run(
        [sys.executable, "-c", _UNCONFIGURED],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    probe = json.loads(out.strip().splitlines()[-1])
    assert probe["bare"] == [] and probe["added"] == []
    assert probe["looked_at_import"] is False
    assert probe["current"] == [False, True]
    assert probe["sdk_loaded"] is False
    assert "chat" in probe["names"] and "execute_tool add" in probe["names"]
