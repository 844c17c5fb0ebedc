"""The fault suite: network faults and HTTP errors, through the real CLI, end in named errors.

Each fault is scripted in `ScriptedMessagesAPI` (`fault(...)`, `http_error(...)`) and run through
`ClaudeAgentProvider(api.settings(...)).stream` or `generate` with the bundled CLI, with
`max_retries=0` unless said otherwise. A failing case runs the CLI once; one test per behaviour
reads that run. The fault, and the outcome it proves:

Failures (each: the exact error type and status, a message that names what happened, an
`ErrorPart` streamed before the error is raised, the end well within the limits, the requests the
CLI made, no CLI process and no per-query temp dir left behind):

- `drop` (connection closed, no answer; every request): `APIConnectionError` (no status,
  retryable), "Connection dropped (ECONNRESET)"; one request.
- `drop_mid_stream` (SSE cut after 3 events; every request): `APIConnectionError`, "Connection
  to the API was lost"; two requests, the second the CLI's `stream: false` fallback.
- `malformed_sse` (`data:` lines that are not JSON; every request): `APIConnectionError`, "JSON
  Parse error"; two requests, the second the fallback.
- `hang` with `idle_timeout=3`: `QueryTimeoutError(kind="idle_timeout")` about 3 s after
  the CLI's last message; one request, never retried by the CLI; retryable. (The idle clock also
  covers CLI start-up, which on a loaded machine can take seconds: such a run never reached the
  fault and is made again with 10 s, then 20 s.)
- HTTP 401: `AuthenticationError(status=401)`, not retryable.
- HTTP 429 with `retry-after: 30`: `RateLimitError(status=429)` at once (with no retry left the
  retry-after is not waited out); retryable.
- HTTP 500: `APIError(status=500)`, retryable.
- HTTP 529: `OverloadedError(status=529)`, retryable.

Recoveries:

- `drop_mid_stream` or `malformed_sse`, then a good reply, `max_retries=0`: the CLI's
  non-streaming fallback (`stream: false`) gets the good reply and the query succeeds.
- `max_retries=1`: `drop`, HTTP 401 (yes, the CLI retries it), 429 with `retry-after: 1`, 500 or
  529, then a good reply: exactly one streamed retry (after a 429, not before its retry-after) and
  the query succeeds. `drop_mid_stream`, then a good reply: retried as a stream, no fallback.

- A fault without an HTTP status (`drop`, `drop_mid_stream`, `malformed_sse`) is an
  `APIConnectionError` (retryable) that does not claim a status.
- After a stream cut midway, a `discard` part takes back the partial text of the aborted attempt:
  `generate().text` is the good answer alone. When a block had ended before the cut, the CLI
  keeps it and has the model resume after it: only the cut block is taken back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from conftest import cli_processes, leftover_query_dirs

from sf_provider import (
    APIConnectionError,
    APIError,
    AuthenticationError,
    ClaudeAgentProvider,
    DiscardPart,
    ErrorPart,
    FinishPart,
    GenerateResult,
    OverloadedError,
    QueryTimeoutError,
    RateLimitError,
    StreamPart,
)
from sf_provider.testing import (
    FaultKind,
    RecordedRequest,
    ScriptedMessagesAPI,
    ScriptItem,
    fault,
    http_error,
    reply,
    text,
)

pytestmark = [pytest.mark.anyio, pytest.mark.cli, pytest.mark.faults]

#: A safety net only: every fault below must end the query long before these.
# Each fault on a fresh CLI of its own (failed queries on warm processes: test_warm.py).
LIMITS: dict[str, Any] = {"timeout": 30.0, "idle_timeout": 15.0, "warm_processes": 0}
#: A fault that hung instead of ending would end in QueryTimeoutError, failing its test.
GOOD_ANSWER = "The good answer."


@dataclass
class Run:
    """What one query through the CLI did."""

    api: ScriptedMessagesAPI
    parts: list[StreamPart] = field(default_factory=list)
    error: BaseException | None = None
    result: GenerateResult | None = None
    leaked_processes: list[str] = field(default_factory=list)
    leaked_dirs: list[str] = field(default_factory=list)
    #: The settings the run was made with, over LIMITS.
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def streamed(self) -> list[bool]:
        """The `stream` flag of each Messages API request, in order."""
        return [bool(r.body.get("stream")) for r in self.api.requests]


def always(item: ScriptItem) -> Callable[[RecordedRequest], ScriptItem]:
    """A function script answering every request (the CLI's fallback included) with `item`."""

    def answer(_request: RecordedRequest) -> ScriptItem:
        return item

    return answer


async def stream(script: Any, **settings: Any) -> Run:
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(**{**LIMITS, "max_retries": 0, **settings}))
        run = Run(api, settings=settings)
        try:
            async for part in provider.stream("What is 2+3?"):
                run.parts.append(part)
        except Exception as exc:  # anything, so a raw non-ProviderError is seen and reported
            run.error = exc
    run.leaked_processes, run.leaked_dirs = cli_processes(), leftover_query_dirs()
    return run


async def generate(script: Any, **settings: Any) -> Run:
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(**{**LIMITS, "max_retries": 0, **settings}))
        result = await provider.generate("What is 2+3?")
        run = Run(api, result=result)
    run.leaked_processes, run.leaked_dirs = cli_processes(), leftover_query_dirs()
    return run


def assert_no_leaks(run: Run) -> None:
    assert run.leaked_processes == [], "no CLI process may outlive its query"
    assert run.leaked_dirs == [], "the per-query temp dir must be removed"
    assert run.api.errors == []


# -- failures: each case runs the CLI once; the tests below read that run


@dataclass(frozen=True)
class Failure:
    script: Any
    error: type[Exception]
    status: int | None
    names: str  # what the message must name (case-insensitive), formatted with the run's settings
    streamed: list[bool]
    settings: dict[str, Any] = field(default_factory=dict)


FAILURES = {
    "drop": Failure(always(fault("drop")), APIConnectionError, None, "connection", [True]),
    "drop_mid_stream": Failure(
        always(fault("drop_mid_stream")), APIConnectionError, None, "connection", [True, False]
    ),
    "malformed_sse": Failure(
        always(fault("malformed_sse")),
        APIConnectionError,
        None,
        # The CLI's words: "JSON Parse error" (2.1.330), "body is not valid JSON" (2.1.332).
        "json",
        [True, False],
    ),
    "hang": Failure(
        always(fault("hang")),
        QueryTimeoutError,
        None,
        "idle_timeout={idle_timeout:g} s",
        [True],
        # 3 s, not 1: the CLI takes about a second to start; longer on a loaded machine
        # (`failing` makes the run again, given longer).
        {"idle_timeout": 3.0},
    ),
    "http-401": Failure([http_error(401)], AuthenticationError, 401, "HTTP 401", [True]),
    "http-429": Failure(
        [http_error(429, "slow down", retry_after=30)], RateLimitError, 429, "HTTP 429", [True]
    ),
    "http-500": Failure([http_error(500)], APIError, 500, "HTTP 500", [True]),
    "http-529": Failure([http_error(529)], OverloadedError, 529, "HTTP 529", [True]),
}
STATUSLESS = ["drop", "drop_mid_stream", "malformed_sse"]
_failed: dict[str, Run] = {}


async def failing(case: str) -> Run:
    """The run of `FAILURES[case]`, made once and read by several tests."""
    if case not in _failed:
        expected = FAILURES[case]
        for longer in (None, 10.0, 20.0):
            settings = dict(expected.settings)
            if longer is not None and "idle_timeout" in settings:
                # The whole-query limit (30 s) moved out of the way of the idle one.
                settings.update(idle_timeout=longer, timeout=60.0)
            run = await stream(expected.script, **settings)
            # A timeout before the CLI reached the API (its start-up passed idle_timeout on a
            # loaded machine) proves nothing about the fault: make the run again, given longer.
            if run.api.requests or not isinstance(run.error, QueryTimeoutError):
                break
        _failed[case] = run
    return _failed[case]


@pytest.mark.parametrize("case", list(FAILURES))
async def test_a_fault_ends_in_its_named_error(case: str) -> None:
    run = await failing(case)

    expected = FAILURES[case]
    assert type(run.error) is expected.error, f"{case}: {run.error!r}"
    if isinstance(run.error, APIError):
        assert run.error.status == expected.status
    if isinstance(run.error, QueryTimeoutError):
        assert (run.error.kind, run.error.seconds) == ("idle_timeout", run.settings["idle_timeout"])
        # The hung request stopped it, not a slow CLI start-up: the API was reached.
        assert run.api.requests, "the idle timeout fired before the CLI reached the API"


@pytest.mark.parametrize("case", list(FAILURES))
async def test_the_error_message_names_what_happened(case: str) -> None:
    run = await failing(case)

    assert FAILURES[case].names.format(**run.settings).lower() in str(run.error).lower()


@pytest.mark.parametrize("case", list(FAILURES))
async def test_the_error_is_streamed_as_a_part_before_it_is_raised(case: str) -> None:
    run = await failing(case)

    [error_part] = [p for p in run.parts if isinstance(p, ErrorPart)]
    assert (error_part.error_type, error_part.message) == (
        FAILURES[case].error.__name__,
        str(run.error),
    )
    after = run.parts[run.parts.index(error_part) + 1 :]
    assert all(isinstance(p, FinishPart) and p.finish_reason == "error" for p in after)


@pytest.mark.parametrize("case", list(FAILURES))
async def test_the_requests_show_the_cli_retry_and_fallback_policy(case: str) -> None:
    run = await failing(case)

    assert run.streamed == FAILURES[case].streamed, (
        "no request: the CLI never reached the API before the error" if not run.streamed else ""
    )


@pytest.mark.parametrize("case", list(FAILURES))
async def test_no_cli_process_or_temp_dir_is_left(case: str) -> None:
    run = await failing(case)

    assert_no_leaks(run)


@pytest.mark.parametrize(
    ("case", "retryable"),
    [
        ("hang", True),
        ("http-401", False),
        ("http-429", True),
        ("http-500", True),
        ("http-529", True),
    ],
)
async def test_the_error_says_whether_a_retry_can_help(case: str, retryable: bool) -> None:
    run = await failing(case)

    assert isinstance(run.error, APIError | QueryTimeoutError)
    assert run.error.retryable is retryable


@pytest.mark.parametrize("case", STATUSLESS)
async def test_a_fault_without_an_http_status_does_not_claim_one(case: str) -> None:
    run = await failing(case)

    assert isinstance(run.error, APIError)
    assert "HTTP None" not in str(run.error)


@pytest.mark.parametrize("case", ["drop", "drop_mid_stream"])
async def test_a_lost_connection_is_retryable(case: str) -> None:
    run = await failing(case)

    assert isinstance(run.error, APIError)
    assert run.error.retryable


# -- recoveries


_fell_back: dict[str, Run] = {}


async def fell_back(kind: FaultKind) -> Run:
    """`kind`, then a good reply, with no retry: made once and read by several tests."""
    if kind not in _fell_back:
        _fell_back[kind] = await generate([fault(kind), reply(text(GOOD_ANSWER))])
    return _fell_back[kind]


@pytest.mark.parametrize("kind", ["drop_mid_stream", "malformed_sse"])
async def test_a_broken_stream_is_answered_by_the_non_streaming_fallback(
    kind: FaultKind,
) -> None:
    run = await fell_back(kind)

    assert run.result is not None
    assert run.result.finish_reason == "stop"
    assert run.result.text.endswith(GOOD_ANSWER)
    assert run.streamed == [True, False], "the CLI repeats the request with stream: false"
    assert_no_leaks(run)


async def test_the_partial_text_of_a_cut_stream_is_not_in_the_result() -> None:
    run = await fell_back("drop_mid_stream")

    assert run.result is not None
    assert run.result.text == GOOD_ANSWER


async def test_a_stream_cut_after_a_whole_block_is_resumed_and_keeps_that_block() -> None:
    """When a block had ended before the cut, the CLI keeps it in the conversation and has the
    model resume after it (the next request carries it, then "Resume directly ..."). It was
    taken back with the cut block, so `generate().text` lost it while the model's context held
    it; only the cut block is taken back now, and the pieces are one answer."""
    cut = reply(text("First block complete."), text("Second block cut here and more"))

    def script() -> list[Any]:
        # 8 events: the first block whole (start, 3 deltas, stop), the second begun.
        return [fault("drop_mid_stream", reply=cut, events=8), reply(text(" And the rest."))]

    async with ScriptedMessagesAPI(script()) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        parts = [p async for p in provider.stream("go")]
    async with ScriptedMessagesAPI(script()) as api:
        result = await ClaudeAgentProvider(api.settings(warm_processes=0)).generate("go")
    resumed = api.requests[1]
    kept = [m for m in resumed.messages if m["role"] == "assistant"]
    assert [b.get("text") for b in kept[-1]["content"]] == ["First block complete."]
    assert "Resume directly" in str(resumed.messages), "the CLI's own resume request"
    assert result.text == "First block complete. And the rest."
    assert "Second block" not in result.text
    assert [len(m["content"]) for m in result.response_messages] == [2], "one answer"
    [discard] = [p for p in parts if isinstance(p, DiscardPart)]
    assert len(discard.ids) == 1, "only the cut block is taken back"


async def test_a_malformed_stream_leaves_nothing_in_the_result() -> None:
    run = await fell_back("malformed_sse")

    assert run.result is not None
    assert run.result.text == GOOD_ANSWER


@pytest.mark.parametrize(
    ("first", "min_gap"),
    [
        (fault("drop"), 0.0),
        (http_error(401), 0.0),
        (http_error(429, retry_after=1), 1.0),
        (http_error(500), 0.0),
        (http_error(529), 0.0),
    ],
    ids=["drop", "http-401", "http-429-retry-after", "http-500", "http-529"],
)
async def test_with_one_retry_the_cli_retries_once_and_succeeds(
    first: ScriptItem, min_gap: float
) -> None:
    run = await generate([first, reply(text(GOOD_ANSWER))], max_retries=1)

    assert run.result is not None
    assert (run.result.text, run.result.finish_reason) == (GOOD_ANSWER, "stop")
    assert run.streamed == [True, True], "one streamed retry, no fallback"
    first_request, retry = run.api.requests
    assert retry.received_at - first_request.received_at >= min_gap
    assert run.api.remaining == 0
    assert_no_leaks(run)


async def test_with_one_retry_a_stream_cut_midway_is_retried_as_a_stream() -> None:
    run = await generate([fault("drop_mid_stream"), reply(text(GOOD_ANSWER))], max_retries=1)

    assert run.result is not None
    assert run.result.finish_reason == "stop"
    assert run.result.text.endswith(GOOD_ANSWER)
    assert run.streamed == [True, True]
    assert_no_leaks(run)
