"""Tracing without the CLI: the `execute_tool` span of every transport but the SDK bridge (that
one is in tests/contract/test_tracing.py), its failure kinds, and the pure attribute and content
mappings."""

from __future__ import annotations

import contextvars
import json
from collections.abc import Iterator
from typing import Any

import anyio
import mcp
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from tracing_support import ancestors, by_name, recording

from sf_provider import FunctionTool, GateDecision, ToolOutput, ToolRegistry
from sf_provider._bridge import build_mcp_server
from sf_provider._outcome import response_model
from sf_provider._tracing import (
    CAPTURE_CONTENT_ENV,
    capture_content,
    error_type,
    finish_attributes,
    input_messages,
    output_messages,
    refused,
)
from sf_provider.errors import QueryTimeoutError, UnsupportedRequestError
from sf_provider.types import FinishPart, Usage

pytestmark = pytest.mark.anyio

ADD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}
APP = trace.get_tracer("the-app")


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    with recording() as exporter:
        yield exporter


def _add(arguments: dict[str, Any]) -> int:
    return int(arguments["a"]) + int(arguments["b"])


ADD = FunctionTool("add", "Add two integers.", ADD_SCHEMA, executor=_add)


class _Unsendable:
    def __repr__(self) -> str:
        raise RuntimeError("no text form")


def _only(spans: InMemorySpanExporter, name: str) -> Any:
    (span,) = by_name(spans.get_finished_spans(), name)
    return span


async def test_a_direct_call_is_a_child_of_the_callers_span(spans: InMemorySpanExporter) -> None:
    with APP.start_as_current_span("app step"):
        assert (await ADD.call({"a": 2, "b": 3})).text == "5"
    span = _only(spans, "execute_tool add")
    assert ancestors(span, spans.get_finished_spans()) == ["app step"]
    assert dict(span.attributes)["sf_provider.transport"] == "direct"
    assert span.status.status_code is StatusCode.UNSET


async def test_a_direct_call_without_a_current_span_is_a_root(spans: InMemorySpanExporter) -> None:
    await ADD.call({"a": 2, "b": 3})
    assert _only(spans, "execute_tool add").parent is None


async def test_the_executor_runs_inside_its_span(spans: InMemorySpanExporter) -> None:
    """What an executor traces itself (an HTTP call, a query) nests under `execute_tool`, sync
    executors (in their own thread) and async ones alike."""

    def sync_tool(_arguments: dict[str, Any]) -> str:
        with APP.start_as_current_span("inside sync"):
            return "ok"

    async def async_tool(_arguments: dict[str, Any]) -> str:
        with APP.start_as_current_span("inside async"):
            return "ok"

    await FunctionTool("sync_tool", executor=sync_tool).call({})
    await FunctionTool("async_tool", executor=async_tool).call({})
    finished = spans.get_finished_spans()
    assert ancestors(_only(spans, "inside sync"), finished) == ["execute_tool sync_tool"]
    assert ancestors(_only(spans, "inside async"), finished) == ["execute_tool async_tool"]


async def test_a_served_call_nests_under_the_mcp_span_and_the_clients_trace(
    spans: InMemorySpanExporter,
) -> None:
    """`sf-provider serve`'s server: the mcp SDK's `tools/call` span continues the client's
    trace (sent in `_meta`), and the tool's span is inside it."""
    server = build_mcp_server("sf", [ADD], default_timeout=5, transport="stdio")
    async with mcp.Client(server, mode="legacy") as client:
        with APP.start_as_current_span("client step"):
            result = await client.call_tool("add", {"a": 2, "b": 3})
    assert not result.is_error
    span = _only(spans, "execute_tool add")
    assert dict(span.attributes)["sf_provider.transport"] == "stdio"
    chain = ancestors(span, spans.get_finished_spans())
    assert chain[0] == "tools/call add" and chain[-1] == "client step"


async def test_the_bridge_handles_each_message_in_the_context_run_in_gives() -> None:
    """The bridge's middleware: the mcp SDK's handling (its span) and the tool call run in the
    query's context, whatever context the message arrived in."""
    request: contextvars.ContextVar[str] = contextvars.ContextVar("request", default="server")
    seen: list[str] = []

    def whoami(_arguments: dict[str, Any]) -> str:
        seen.append(request.get())
        return "ok"

    query = contextvars.copy_context()
    query.run(request.set, "query")
    scope: list[contextvars.Context | None] = [None]
    server = build_mcp_server(
        "sf", [FunctionTool("whoami", executor=whoami)], default_timeout=5, run_in=lambda: scope[0]
    )
    async with mcp.Client(server, mode="legacy") as client:
        await client.call_tool("whoami", {})
        scope[0] = query
        await client.call_tool("whoami", {})
    assert seen == ["server", "query"]


@pytest.mark.parametrize(
    ("tool", "arguments", "kind", "message"),
    [
        (ADD, {"a": "two"}, "invalid_arguments", "Invalid arguments for tool 'add': "),
        (FunctionTool("remote"), {}, "no_executor", "tool 'remote' has no executor"),
        (
            FunctionTool("boom", executor=lambda _a: 1 / 0),
            {},
            "ZeroDivisionError",
            "Tool 'boom' failed: ZeroDivisionError: division by zero",
        ),
        (
            FunctionTool("exits", executor=lambda _a: exit(3)),
            {},
            "SystemExit",
            "Tool 'exits' failed: SystemExit: exit code 3",
        ),
        (
            FunctionTool("says_no", executor=lambda _a: ToolOutput.from_text("no", is_error=True)),
            {},
            "tool_error",
            "no",
        ),
        (
            FunctionTool("unsendable", executor=lambda _a: _Unsendable()),
            {},
            "invalid_result",
            "Tool 'unsendable' returned a value that cannot be sent",
        ),
    ],
)
@pytest.mark.parametrize("capture", [True, False], ids=["content", "no-content"])
async def test_a_failed_call_is_an_error_span_saying_why(
    spans: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
    tool: FunctionTool,
    arguments: Any,
    kind: str,
    message: str,
    capture: bool,
) -> None:
    """The failure's message can hold the call's content (an error result's text, an argument
    a schema error repeats): in the status only with content capture on."""
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true" if capture else "false")
    output = await tool.call(arguments)
    assert output.is_error
    span = _only(spans, f"execute_tool {tool.name}")
    assert span.status.status_code is StatusCode.ERROR
    if capture:
        assert span.status.description.startswith(message)
    else:
        assert span.status.description == f"tool {tool.name!r}: {kind}"
    assert dict(span.attributes)["error.type"] == kind


async def test_a_failure_status_is_clipped_even_with_content(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    huge = FunctionTool(
        "huge", executor=lambda _a: ToolOutput.from_text("x" * 10**6, is_error=True)
    )
    await huge.call({})
    description = _only(spans, "execute_tool huge").status.description
    assert len(description) < 1100 and description.endswith("more characters]")


async def test_a_timed_out_call_is_an_error_span(spans: InMemorySpanExporter) -> None:
    async def slow(_arguments: dict[str, Any]) -> str:
        await anyio.sleep(10)
        return "late"

    await FunctionTool("slow", executor=slow, timeout=0.05).call({})
    assert dict(_only(spans, "execute_tool slow").attributes)["error.type"] == "timeout"


async def test_a_gate_denial_is_an_error_span_on_the_registry_path(
    spans: InMemorySpanExporter,
) -> None:
    registry = ToolRegistry(
        [FunctionTool("wipe", executor=lambda _a: "wiped", mutating=True)],
        gate=lambda _request: GateDecision.deny("not today"),
    )
    output = await registry.call("wipe", {})
    assert output.is_error
    span = _only(spans, "execute_tool wipe")
    assert dict(span.attributes)["error.type"] == "gate_denied"
    assert span.status.description == "tool 'wipe': gate_denied"  # the reason is content


async def test_a_call_the_application_cancelled_is_closed_early_not_an_error(
    spans: InMemorySpanExporter,
) -> None:
    """As on the query's span; it was an ERROR whose status held anyio's task repr (names and
    paths). A tool's own timeout is a `timeout` failure (above)."""

    async def hangs(_arguments: dict[str, Any]) -> str:
        await anyio.sleep(10)
        return "never"

    with anyio.move_on_after(0.05):
        await FunctionTool("hangs", executor=hangs).call({})
    span = _only(spans, "execute_tool hangs")
    assert span.status.status_code is StatusCode.UNSET
    assert dict(span.attributes)["sf_provider.closed_early"] is True
    assert "error.type" not in dict(span.attributes)


async def test_tool_contents_only_with_the_switch(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    await ADD.call({"a": 2, "b": 3})
    assert "gen_ai.tool.call.arguments" not in _only(spans, "execute_tool add").attributes
    spans.clear()
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "SPAN_ONLY")
    await ADD.call({"a": 2, "b": 3})
    attributes = dict(_only(spans, "execute_tool add").attributes)
    assert json.loads(attributes["gen_ai.tool.call.arguments"]) == {"a": 2, "b": 3}
    assert attributes["gen_ai.tool.call.result"] == "5"


@pytest.mark.parametrize(
    ("value", "on"),
    [("true", True), ("TRUE", True), ("1", True), ("span_only", True), ("SPAN_AND_EVENT", True),
     ("", False), ("false", False), ("NO_CONTENT", False), ("EVENT_ONLY", False)],
)  # fmt: skip
def test_the_content_switch_follows_the_conventions(
    monkeypatch: pytest.MonkeyPatch, value: str, on: bool
) -> None:
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, value)
    assert capture_content() is on


def test_error_type_is_the_provider_error_name_or_the_qualified_name() -> None:
    assert error_type(QueryTimeoutError("t", kind="timeout", seconds=1.0)) == "QueryTimeoutError"
    assert error_type(ValueError("x")) == "ValueError"
    assert error_type(json.JSONDecodeError("x", "", 0)) == "json.decoder.JSONDecodeError"


def test_finish_attributes_count_cache_tokens_as_input() -> None:
    finish = FinishPart(
        finish_reason="tool-calls",
        usage=Usage(input_tokens=10, output_tokens=5, cache_creation_input_tokens=3,
                    cache_read_input_tokens=100),
        cost_usd=0.25,
        session_id="s-1",
        num_turns=1,
        api_calls=1,
        provider_details={"process": "continued",
                          "model_usage": {"claude-haiku": {"outputTokens": 1},
                                          "claude-sonnet": {"outputTokens": 4}}},
    )  # fmt: skip
    assert finish_attributes(finish) == {
        "gen_ai.response.finish_reasons": ["tool_call"],
        "gen_ai.usage.input_tokens": 113,
        "gen_ai.usage.output_tokens": 5,
        "gen_ai.usage.cache_creation.input_tokens": 3,
        "gen_ai.usage.cache_read.input_tokens": 100,
        "sf_provider.num_turns": 1,
        "sf_provider.api_calls": 1,
        "sf_provider.cost_usd": 0.25,
        "sf_provider.session_id": "s-1",
        "sf_provider.process": "continued",
        "gen_ai.response.model": "claude-sonnet",
    }
    assert response_model({}) is None and response_model({"model_usage": {}}) is None


def test_finish_attributes_carry_the_response_id_when_the_finish_has_one() -> None:
    finish = FinishPart(finish_reason="stop", provider_details={"response_id": "msg_01abc"})
    assert finish_attributes(finish)["gen_ai.response.id"] == "msg_01abc"
    assert "gen_ai.response.id" not in finish_attributes(FinishPart(finish_reason="stop"))


def test_history_becomes_the_conventions_input_messages() -> None:
    turns = [
        {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hm", "signature": "sig"},
            {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Paris"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1",
             "content": [{"type": "text", "text": "21"}]},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "x"}},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
        ]},
    ]  # fmt: skip
    assert input_messages(turns) == [
        {"role": "user", "parts": [{"type": "text", "content": "Weather?"}]},
        {"role": "assistant", "parts": [
            {"type": "reasoning", "content": "hm"},
            {"type": "tool_call", "id": "t1", "name": "weather", "arguments": {"city": "Paris"}},
        ]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "t1", "response": "21"}]},
        {"role": "user", "parts": [
            {"type": "image", "modality": "image", "mime_type": "image/png"},
            {"type": "uri", "modality": "image", "uri": "https://example.com/a.png"},
        ]},
    ]  # fmt: skip


def test_a_reply_becomes_the_conventions_output_messages() -> None:
    response = [
        {"role": "assistant", "content": [
            {"type": "tool-call", "tool_call_id": "t1", "tool_name": "add", "input": {"a": 1}},
        ]},
        {"role": "tool", "content": [{"type": "tool-result", "tool_call_id": "t1", "output": "2"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "2."}]},
    ]  # fmt: skip
    assert output_messages(response, "length") == [
        {"role": "assistant", "finish_reason": "tool_call",
         "parts": [{"type": "tool_call", "id": "t1", "name": "add", "arguments": {"a": 1}}]},
        {"role": "assistant", "finish_reason": "length",
         "parts": [{"type": "text", "content": "2."}]},
    ]  # fmt: skip


def test_a_refused_request_is_a_failed_chat_span(spans: InMemorySpanExporter) -> None:
    refused(UnsupportedRequestError("no such option"), model=["not", "a", "name"])
    span = _only(spans, "chat")
    assert span.kind is SpanKind.CLIENT and span.status.status_code is StatusCode.ERROR
    assert dict(span.attributes) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "error.type": "UnsupportedRequestError",
    }


def test_a_refused_request_inside_a_callers_inference_span_is_our_internal_span(
    spans: InMemorySpanExporter,
) -> None:
    with APP.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat"}):
        refused(UnsupportedRequestError("no such option"), model="claude-x")
    span = _only(spans, "sf_provider.query")
    assert span.kind is SpanKind.INTERNAL and span.status.status_code is StatusCode.ERROR
    assert dict(span.attributes) == {
        "sf_provider.request.model": "claude-x",
        "error.type": "UnsupportedRequestError",
    }
