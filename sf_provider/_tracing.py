"""OpenTelemetry spans for queries and tool calls, after the GenAI semantic conventions.

Through `opentelemetry-api` only (the `sf-provider[otel]` extra); the application configures the
SDK and its exporters (OTLP, Logfire, ...). Spans:

- one per query (`start_query`, from `ClaudeAgentProvider._run`, so every front door is traced
  alike): kind CLIENT, named `chat <model>`, with `gen_ai.operation.name`, `gen_ai.provider.name`,
  `gen_ai.request.model`, and when the query ends `gen_ai.response.model`,
  `gen_ai.response.finish_reasons`, `gen_ai.usage.*` (input tokens include cache reads and
  writes, as the conventions ask) and `sf_provider.*` (mode, cost in USD, session id, turns,
  API calls, process: fresh, warm or continued). A failed query has status ERROR and
  `error.type`: the `ProviderError`'s class name (`APIError`, `QueryTimeoutError`, ...), else the
  exception's qualified name. Inside a caller's own inference span (pydantic-ai's
  instrumentation traces each model request as `chat`, with the usage), the query span is an
  INTERNAL `sf_provider.query` with only the `sf_provider.*` attributes, so usage is counted once.
  The span ends after the tasks of its tool calls (and their spans) are done, also when the
  query is stopped while a tool runs.
- `refused`: the same span, failed and ended at once, for a request refused before its query
  started (nothing was sent).
- the GenAI client metrics, on the global meter provider, for each query span (so only while a
  tracer provider is configured) that is not inside a caller's inference span (whose
  instrumentation records its own):
  `gen_ai.client.token.usage` (`gen_ai.token.type` input, with cache tokens, and output) and
  `gen_ai.client.operation.duration` (with `error.type` when it failed; none for a query the
  application stopped before it finished).
- one per tool invocation (`tool_span`, from `invoke_tool`, so whichever transport ran it):
  kind INTERNAL, named `execute_tool <tool>`, with `gen_ai.tool.name`, `gen_ai.tool.call.id`,
  `sf_provider.transport`; status ERROR and `error.type` when the call failed: `gate_denied`,
  `invalid_arguments`, `timeout`, `no_executor`, `invalid_result`, `tool_error` (an executor's
  own error result) or the exception's qualified name. Through the bridge it runs in the
  query's context, under the `mcp` SDK's `tools/call` span, under the query's span.
- `continue_trace`: the gateway's requests continue an incoming `traceparent`.

Message contents (prompt, system instructions, replies, a structured answer's JSON, tool arguments
and results) are recorded only when the application opts in with the conventions' switch,
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` (or `SPAN_ONLY` / `SPAN_AND_EVENT`).

Cost: `import sf_provider` imports nothing of OpenTelemetry from here; the API is imported when
the first query or tool call starts, and whether it is there is learnt once. Whether a tracer
provider is configured is checked per query and per call (an app may configure it late): without
one, each function here returns a shared no-op object after a global read and an `isinstance`.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._outcome import response_model
from ._text import clip

if TYPE_CHECKING:
    import asyncio
    from contextvars import Token

    from opentelemetry.context import Context
    from opentelemetry.metrics import Histogram
    from opentelemetry.trace import Span, Tracer

    from ._mapping import ResultCollector
    from .gates import CallContext
    from .tools import FunctionTool, ToolOutput
    from .types import FinishPart, Mode

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "NO_QUERY",
    "NO_TOOL",
    "QueryTrace",
    "ToolTrace",
    "TracedRequest",
    "capture_content",
    "continue_trace",
    "flush",
    "refused",
    "start_query",
    "tool_span",
]

#: The GenAI conventions' switch for recording message contents; off unless set to one of
#: `_CAPTURE_ON` (case-insensitive).
CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_CAPTURE_ON = frozenset({"true", "1", "span_only", "span_and_event"})

# Attribute names of the GenAI semantic conventions (written out: the constants in
# `opentelemetry-semantic-conventions` are incubating and deprecated there for a new package).
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
OUTPUT_TYPE = "gen_ai.output.type"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_CREATION_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_NAME = "gen_ai.tool.name"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_DESCRIPTION = "gen_ai.tool.description"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT = "gen_ai.tool.call.result"
TOKEN_TYPE = "gen_ai.token.type"
ERROR_TYPE = "error.type"
TOKEN_USAGE_METRIC = "gen_ai.client.token.usage"
DURATION_METRIC = "gen_ai.client.operation.duration"

#: The buckets the conventions advise for the two metrics.
_TOKEN_BUCKETS = [4.0**i for i in range(14)]  # 1, 4, 16, ... 67108864
_DURATION_BUCKETS = [0.01 * 2.0**i for i in range(14)]  # 0.01, 0.02, ... 81.92 s

#: The context manager of "nothing to attach" (reusable).
_NOTHING: AbstractContextManager[None] = contextlib.nullcontext()

#: `FinishReason` -> the conventions' finish reasons (the others are spelt alike).
_FINISH_REASON = {"tool-calls": "tool_call", "content-filter": "content_filter"}


# --------------------------------------------------------------------------- the API, lazily


class _API:
    """The parts of `opentelemetry-api` used here, imported on first use."""

    def __init__(self) -> None:
        from opentelemetry import context, propagate, trace

        self.context = context
        self.propagate = propagate
        self.trace = trace
        #: What `get_tracer_provider()` answers when the application configured none.
        self.unconfigured = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
        self.provider: object = None
        self.tracer: Tracer | None = None
        #: The context key under which a query's context holds its `_QuerySpan`.
        self.query_key = context.create_key("sf_provider.query")
        self._metrics: _Metrics | None = None

    def metrics(self) -> _Metrics:
        """The GenAI client metrics, made on first use."""
        if self._metrics is None:
            self._metrics = _Metrics()
        return self._metrics


class _Metrics:
    """The GenAI client metrics, on the global meter provider (a no-op until the application
    configures one; instruments made before that record into it once it does)."""

    def __init__(self) -> None:
        from opentelemetry import metrics

        from ._version import __version__

        meter = metrics.get_meter("sf_provider", __version__)
        self.tokens: Histogram = meter.create_histogram(
            TOKEN_USAGE_METRIC,
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
        )
        self.duration: Histogram = meter.create_histogram(
            DURATION_METRIC,
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
        )


#: Whether the API was looked for, and what was found (None: not installed). The benchmark
#: sets both to measure the package with tracing absent.
_looked = False
_api: _API | None = None


def _load() -> _API | None:
    global _looked, _api
    if not _looked:
        _looked = True
        try:
            _api = _API()
        except (ImportError, AttributeError):  # not installed, or too old to use
            _api = None
    return _api


def _tracer() -> tuple[_API, Tracer] | None:
    """The API and this package's tracer, or None when no tracer provider is configured."""
    api = _api if _looked else _load()
    if api is None:
        return None
    provider = api.trace.get_tracer_provider()
    if isinstance(provider, api.unconfigured):
        return None
    tracer = api.tracer
    if provider is not api.provider or tracer is None:
        from ._version import __version__

        tracer = provider.get_tracer("sf_provider", __version__)
        api.provider, api.tracer = provider, tracer
    return api, tracer


def flush() -> None:
    """Export the spans still buffered, when the application configured a tracer provider: for
    servers whose process may end without `atexit` (uvicorn re-raises SIGTERM after a graceful
    shutdown; `sf-provider serve` can leave with `os._exit`)."""
    found = _tracer()
    if found is not None:
        force_flush = getattr(found[0].trace.get_tracer_provider(), "force_flush", None)
        if callable(force_flush):
            force_flush()


#: What a span without content capture says instead of an error's message.
_UNCAPTURED = f"its message is recorded only with content capture: {CAPTURE_CONTENT_ENV}=true"


def capture_content() -> bool:
    """Whether the application opted in to message contents on spans (`CAPTURE_CONTENT_ENV`)."""
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in _CAPTURE_ON


def error_type(exc: BaseException) -> str:
    """`error.type` for an exception: a `ProviderError`'s class name, else the qualified name."""
    from .errors import ProviderError

    cls = type(exc)
    if isinstance(exc, ProviderError) or cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=repr)


# --------------------------------------------------------------------------- the query span


class QueryTrace:
    """What a query tells its span. This base does nothing: the query when tracing is off."""

    __slots__ = ()

    def current(self) -> AbstractContextManager[None]:
        """The span as the current one, around an `await` (never across a `yield`)."""
        return _NOTHING

    def served_by(self, process: str) -> None:
        """Which process serves the query: `fresh`, `warm` or `continued`."""

    def finish(self, finish: FinishPart, collector: ResultCollector) -> None:
        """The query's finish part (model, usage, cost, ...); `collector` has every part."""

    def end(self, exc: BaseException | None = None) -> None:
        """End the span (once), failed when `exc` is given."""


NO_QUERY = QueryTrace()


@dataclass(frozen=True)
class TracedRequest:
    """What a query's span says of its request."""

    mode: Mode
    #: The model asked for (None: the CLI's default).
    model: str | None
    max_tokens: int | None
    #: An object matching an output schema was asked for.
    structured: bool
    #: System prompt parts.
    system: Sequence[str]
    #: The conversation's earlier turns (Messages API turns) and its new user content.
    history: Sequence[Mapping[str, Any]]
    prompt: Any


def start_query(request: TracedRequest) -> QueryTrace:
    """The span of a query about to run `request`, a child of the current span; `NO_QUERY` when
    no tracer provider is configured. Named after the model the request asks for (`chat` alone
    for the CLI's default: the answering model is `gen_ai.response.model`)."""
    found = _tracer()
    if found is None:
        return NO_QUERY
    api, tracer = found
    model = request.model
    if _inside_inference(api.trace.get_current_span()):
        # The caller (pydantic-ai's instrumentation, say) traces this model call already, with
        # its usage: a second inference span would count every token twice.
        inner: dict[str, Any] = {"sf_provider.mode": request.mode}
        if model:
            inner["sf_provider.request.model"] = model
        span = tracer.start_span(_NESTED_NAME, kind=api.trace.SpanKind.INTERNAL, attributes=inner)
        return _QuerySpan(api, span, capture=False, nested=True)
    attributes: dict[str, Any] = {
        OPERATION: "chat",
        PROVIDER: "anthropic",
        "sf_provider.mode": request.mode,
    }
    if model:
        attributes[REQUEST_MODEL] = model
    if request.max_tokens is not None:
        attributes[REQUEST_MAX_TOKENS] = request.max_tokens
    if request.structured:
        attributes[OUTPUT_TYPE] = "json"
    span = tracer.start_span(
        f"chat {model}" if model else "chat", kind=api.trace.SpanKind.CLIENT, attributes=attributes
    )
    measure = {k: attributes[k] for k in _METRIC_KEYS if k in attributes}
    capture = span.is_recording() and capture_content()
    if capture:
        if request.system:
            span.set_attribute(
                SYSTEM_INSTRUCTIONS, _json([{"type": "text", "content": s} for s in request.system])
            )
        turns = [*request.history, {"role": "user", "content": request.prompt}]
        span.set_attribute(INPUT_MESSAGES, _json(input_messages(turns)))
    return _QuerySpan(api, span, capture, measure=measure)


#: The query span's attributes its metrics carry too.
_METRIC_KEYS = (OPERATION, PROVIDER, REQUEST_MODEL)


def refused(exc: BaseException, model: object = None) -> None:
    """Trace a request refused before its query started (bad input, a tool without an executor
    in executor mode, a missing CLI, ...): without it a failed request left no span at all.
    The span is the query's would have been (`chat <model>`, or `sf_provider.query` inside a
    caller's inference span), failed with the error, and ends at once: nothing was sent.
    `model` is the model asked for (anything but a string is left out)."""
    found = _tracer()
    if found is None:
        return
    api, tracer = found
    name = model if isinstance(model, str) and model else None
    if _inside_inference(api.trace.get_current_span()):
        attributes: dict[str, Any] = {"sf_provider.request.model": name} if name else {}
        span = tracer.start_span(
            _NESTED_NAME, kind=api.trace.SpanKind.INTERNAL, attributes=attributes
        )
        measure = None
    else:
        attributes = {OPERATION: "chat", PROVIDER: "anthropic"}
        if name:
            attributes[REQUEST_MODEL] = name
        span = tracer.start_span(
            f"chat {name}" if name else "chat",
            kind=api.trace.SpanKind.CLIENT,
            attributes=attributes,
        )
        measure = dict(attributes)
    _QuerySpan(api, span, capture_content(), measure=measure).end(exc)


#: The query span's name inside a caller's inference span (see `_inside_inference`).
_NESTED_NAME = "sf_provider.query"

#: `gen_ai.operation.name` values of a model call (inference) in the conventions.
_INFERENCE_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})


def _inside_inference(span: object) -> bool:
    """Whether `span` (the caller's current one) is a GenAI inference span: one whose
    attributes (an SDK span's, read-only) say `gen_ai.operation.name` is a model call."""
    attributes = getattr(span, "attributes", None)
    return isinstance(attributes, Mapping) and attributes.get(OPERATION) in _INFERENCE_OPERATIONS


class _QuerySpan(QueryTrace):
    __slots__ = ("_api", "_capture", "_context", "_ended", "_finished", "_held", "_measure",
                 "_nested", "_span", "_started", "_task")  # fmt: skip

    def __init__(
        self,
        api: _API,
        span: Span,
        capture: bool,
        nested: bool = False,
        measure: dict[str, Any] | None = None,
    ) -> None:
        self._api = api
        self._span = span
        self._started = time.monotonic()
        #: The attributes of the query's metrics; None: no metrics (inside a caller's inference
        #: span, whose instrumentation records its own: they would count every token twice).
        self._measure = measure
        context = api.trace.set_span_in_context(span)
        self._context: Context = api.context.set_value(api.query_key, self, context)
        self._capture = capture
        self._nested = nested
        self._finished = False
        self._ended = False
        #: Tool calls of this query still running (with the mcp SDK's span around each).
        self._held = 0
        self._task = _current_task()

    def hold_until_done(self) -> None:
        """A tool call of this query starts: the span ends only after the task running it is
        done (its spans have ended then), even when the query is stopped meanwhile."""
        task = _current_task()
        if task is None or task is self._task:  # nothing to wait for / it would wait for itself
            return
        self._held += 1
        task.add_done_callback(self._release)

    def _release(self, _task: asyncio.Task[Any]) -> None:
        self._held -= 1
        if self._held == 0 and self._ended:
            self._span.end()

    @contextlib.contextmanager
    def current(self) -> Iterator[None]:
        token = self._api.context.attach(self._context)
        try:
            yield
        finally:
            self._api.context.detach(token)

    def served_by(self, process: str) -> None:
        self._span.set_attribute("sf_provider.process", process)

    def finish(self, finish: FinishPart, collector: ResultCollector) -> None:
        self._finished = True
        span = self._span
        attributes = finish_attributes(finish)
        if self._measure is not None:  # sampled or not
            self._count_tokens(attributes)
        if not span.is_recording():
            return
        if self._nested:  # only this package's own: usage and model are the caller's span's
            attributes = {k: v for k, v in attributes.items() if k.startswith("sf_provider.")}
        span.set_attributes(attributes)
        if self._capture:
            result = collector.result()
            messages = output_messages(
                result.response_messages, finish.finish_reason, finish.structured_output
            )
            span.set_attribute(OUTPUT_MESSAGES, _json(messages))

    def end(self, exc: BaseException | None = None) -> None:
        if self._ended:
            return
        self._ended = True
        span = self._span
        if _stopped(exc):
            # The application left the stream, or cancelled the call (its own timeout, a client
            # that went away): an error only when it says so (its own span).
            if not self._finished:
                span.set_attribute("sf_provider.closed_early", True)
        elif exc is not None:
            kind = error_type(exc)
            span.set_attribute(ERROR_TYPE, kind)
            if self._capture:
                span.record_exception(exc)
                message = clip(str(exc) or type(exc).__name__, 1000)
            else:
                # An error's message can quote the prompt (an API 400 does) or the client's
                # data: without content capture, its type and a fixed message only.
                message = f"the query failed with {kind} ({_UNCAPTURED})"
                span.add_event("exception", {"exception.type": kind, "exception.message": message})
            span.set_status(self._api.trace.Status(self._api.trace.StatusCode.ERROR, message))
        if self._measure is not None and (self._finished or not _stopped(exc)):
            measure = dict(self._measure)
            if exc is not None and not _stopped(exc):
                measure[ERROR_TYPE] = error_type(exc)
            duration = time.monotonic() - self._started
            self._api.metrics().duration.record(duration, measure)
        if not self._held:  # else when the last of its tool calls is done (`hold_until_done`)
            span.end()

    def _count_tokens(self, usage: Mapping[str, Any]) -> None:
        """The token metric from the query's finish attributes (`finish_attributes`)."""
        assert self._measure is not None
        if RESPONSE_MODEL in usage:
            self._measure[RESPONSE_MODEL] = usage[RESPONSE_MODEL]
        if not usage[INPUT_TOKENS] and not usage[OUTPUT_TOKENS]:
            return  # no answer counted (an API error): nothing was used
        tokens = self._api.metrics().tokens
        for kind, key in (("input", INPUT_TOKENS), ("output", OUTPUT_TOKENS)):
            tokens.record(usage[key], {**self._measure, TOKEN_TYPE: kind})


def _stopped(exc: BaseException | None) -> bool:
    """Whether `exc` is the application stopping the query: leaving its stream, cancelling.
    (Cancellation is never an `Exception`; outside an event loop, nothing is cancelled.)"""
    if exc is None or isinstance(exc, Exception):
        return False
    if isinstance(exc, GeneratorExit):
        return True
    import anyio

    try:
        return isinstance(exc, anyio.get_cancelled_exc_class())
    except RuntimeError:  # no event loop (anyio's NoEventLoopError is one)
        return False


def _current_task() -> asyncio.Task[Any] | None:
    """The asyncio task running (None: none, or another event loop)."""
    import asyncio

    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


def finish_attributes(finish: FinishPart) -> dict[str, Any]:
    """The span attributes of a query's finish part."""
    usage = finish.usage
    attributes: dict[str, Any] = {
        FINISH_REASONS: [_FINISH_REASON.get(finish.finish_reason, finish.finish_reason)],
        # The conventions count cache reads and writes as input; the Messages API does not.
        INPUT_TOKENS: usage.input_total,
        OUTPUT_TOKENS: usage.output_tokens,
        CACHE_CREATION_TOKENS: usage.cache_creation_input_tokens,
        CACHE_READ_TOKENS: usage.cache_read_input_tokens,
        "sf_provider.num_turns": finish.num_turns,
        "sf_provider.api_calls": finish.api_calls,
    }
    if finish.cost_usd is not None:
        attributes["sf_provider.cost_usd"] = finish.cost_usd
    if finish.session_id:
        attributes["sf_provider.session_id"] = finish.session_id
    details = finish.provider_details
    if isinstance(details.get("process"), str):
        attributes["sf_provider.process"] = details["process"]
    model = response_model(details)
    if model:
        attributes[RESPONSE_MODEL] = model
    if isinstance(details.get("response_id"), str):  # the last API message's id (`msg_...`)
        attributes[RESPONSE_ID] = details["response_id"]
    return attributes


# --------------------------------------------------------------------------- contents (opt-in)


def input_messages(turns: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Messages API turns (the app's tool names) in the conventions' input-message shape."""
    messages: list[dict[str, Any]] = []
    for turn in turns:
        content = turn.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        parts, answers = [], []
        for block in blocks:
            kind = block.get("type")
            if kind == "tool_result":
                answers.append(
                    {"type": "tool_call_response", "id": block.get("tool_use_id"),
                     "response": _result_text(block.get("content"))}
                )  # fmt: skip
            else:
                parts.append(_part(block))
        if answers:  # tool results are the tool's messages in the conventions
            messages.append({"role": "tool", "parts": answers})
        if parts:
            messages.append({"role": turn.get("role", "user"), "parts": parts})
    return messages


def _part(block: Mapping[str, Any]) -> dict[str, Any]:
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "content": block.get("text", "")}
    if kind == "thinking":
        return {"type": "reasoning", "content": block.get("thinking", "")}
    if kind == "tool_use":
        return {"type": "tool_call", "id": block.get("id"), "name": block.get("name"),
                "arguments": block.get("input")}  # fmt: skip
    if kind == "image":
        source = block.get("source") or {}
        if source.get("type") == "url":  # the conventions' UriPart
            return {"type": "uri", "modality": "image", "uri": source.get("url")}
        part = {"type": "image", "modality": "image"}  # the data left out: it can be megabytes
        if source.get("media_type"):
            part["mime_type"] = source["media_type"]
        return part
    return {"type": str(kind)}


def _result_text(content: Any) -> Any:
    if isinstance(content, list):
        texts = [b.get("text", "") for b in content if isinstance(b, Mapping)]
        return "\n".join(str(t) for t in texts)
    return content


def output_messages(
    response: Sequence[Mapping[str, Any]], reason: str, structured: Any = None
) -> list[dict[str, Any]]:
    """The model's turns of a reply (`GenerateResult.response_messages`) as the conventions'
    output messages: a turn that ended in calls the provider ran finished with `tool_call`.
    `structured`: the object of an `output_schema` query (not None), which the model gave
    through the CLI's hidden tool: its JSON ends the last turn, as a text part."""
    turns = [m for m in response if m.get("role") == "assistant"]
    messages: list[dict[str, Any]] = []
    for index, turn in enumerate(turns):
        parts: list[dict[str, Any]] = []
        for block in turn.get("content") or []:
            kind = block.get("type")
            if kind == "text":
                parts.append({"type": "text", "content": block.get("text", "")})
            elif kind == "reasoning":
                parts.append({"type": "reasoning", "content": block.get("text", "")})
            elif kind == "tool-call":
                parts.append(
                    {"type": "tool_call", "id": block.get("tool_call_id"),
                     "name": block.get("tool_name"), "arguments": block.get("input")}
                )  # fmt: skip
        last = index == len(turns) - 1
        finish = _FINISH_REASON.get(reason, reason) if last else "tool_call"
        messages.append({"role": "assistant", "parts": parts, "finish_reason": finish})
    if structured is not None:
        answer = {"type": "text", "content": _json(structured)}
        if messages:
            messages[-1]["parts"].append(answer)
        else:
            reason = _FINISH_REASON.get(reason, reason)
            messages.append({"role": "assistant", "parts": [answer], "finish_reason": reason})
    return messages


# --------------------------------------------------------------------------- the tool span


class ToolTrace:
    """What a tool invocation tells its span. This base does nothing (tracing off).

    Used as `with tool_span(...) as span:`; the span is the current one inside, so what the
    executor traces itself nests under it."""

    __slots__ = ()

    def __enter__(self) -> ToolTrace:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def failed(self, kind: str, message: str) -> None:
        """The call failed (`kind` is its `error.type`); the first failure counts."""

    def done(self, output: ToolOutput) -> None:
        """The call's result (an error result without a recorded failure is `tool_error`)."""


NO_TOOL = ToolTrace()


def tool_span(
    tool: FunctionTool, context: CallContext, arguments: Mapping[str, Any] | None
) -> ToolTrace:
    """The span of one invocation of `tool`; `NO_TOOL` when no tracer provider is configured."""
    found = _tracer()
    if found is None:
        return NO_TOOL
    api, tracer = found
    return _ToolSpan(api, tracer, tool, context, arguments)


class _ToolSpan(ToolTrace):
    __slots__ = ("_api", "_arguments", "_capture", "_context", "_failed", "_span", "_token",
                 "_tool", "_tracer")  # fmt: skip

    def __init__(
        self,
        api: _API,
        tracer: Tracer,
        tool: FunctionTool,
        context: CallContext,
        arguments: Mapping[str, Any] | None,
    ) -> None:
        self._api = api
        self._tracer = tracer
        self._tool = tool
        self._context = context
        self._arguments = arguments
        self._failed = False
        self._capture = False
        self._token: Token[Context] | None = None

    def __enter__(self) -> ToolTrace:
        tool, context = self._tool, self._context
        attributes: dict[str, Any] = {
            OPERATION: "execute_tool",
            TOOL_NAME: tool.name,
            TOOL_TYPE: "function",
            "sf_provider.transport": context.transport,
        }
        if tool.description:
            attributes[TOOL_DESCRIPTION] = tool.description
        if context.tool_call_id:
            attributes[TOOL_CALL_ID] = context.tool_call_id
        span = self._tracer.start_span(
            f"execute_tool {tool.name}",
            kind=self._api.trace.SpanKind.INTERNAL,
            attributes=attributes,
        )
        self._span = span
        self._capture = span.is_recording() and capture_content()
        if self._capture:
            span.set_attribute(TOOL_CALL_ARGUMENTS, _json(dict(self._arguments or {})))
        query = self._api.context.get_value(self._api.query_key)
        if isinstance(query, _QuerySpan):  # a call of a traced query (through its bridge)
            query.hold_until_done()
        self._token = self._api.context.attach(self._api.trace.set_span_in_context(span))
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._token is not None:
            self._api.context.detach(self._token)
        exc = exc_info[1]
        if isinstance(exc, BaseException) and _stopped(exc):
            # The query was stopped by the application (as on the query's span): not an error.
            self._span.set_attribute("sf_provider.closed_early", True)
        elif isinstance(exc, BaseException):
            self.failed(error_type(exc), str(exc) or type(exc).__name__)
        self._span.end()

    def failed(self, kind: str, message: str) -> None:
        if self._failed:
            return
        self._failed = True
        span = self._span
        span.set_attribute(ERROR_TYPE, kind)
        # The message may hold the call's arguments or result (an error result's text, a
        # schema error repeating a value): recorded only with content capture, and clipped.
        what = clip(message, 1000) if self._capture else f"tool {self._tool.name!r}: {kind}"
        span.set_status(self._api.trace.Status(self._api.trace.StatusCode.ERROR, what))

    def done(self, output: ToolOutput) -> None:
        if output.is_error:
            self.failed("tool_error", output.text)
        if self._capture:
            self._span.set_attribute(TOOL_CALL_RESULT, output.text)


# --------------------------------------------------------------------------- the gateway


def continue_trace(headers: Mapping[str, str]) -> AbstractContextManager[None]:
    """The trace an incoming request carries (its `traceparent`, W3C Trace Context, and whatever
    else the configured propagators read) as the current context: the query's span becomes its
    child. Nothing when tracing is off, the request carries none, or a span is already current
    (an ASGI instrumentation's server span, which continued it already)."""
    found = _tracer()
    if found is None or "traceparent" not in headers:
        return _NOTHING
    api = found[0]
    if api.trace.get_current_span().get_span_context().is_valid:
        return _NOTHING
    return _attached(api, api.propagate.extract(headers))


@contextlib.contextmanager
def _attached(api: _API, context: Context) -> Iterator[None]:
    token = api.context.attach(context)
    try:
        yield
    finally:
        api.context.detach(token)
