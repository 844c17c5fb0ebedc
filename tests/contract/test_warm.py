"""Warm processes (`ProviderSettings.warm_processes`): reused, and never shared between queries.

Proven from the scripted API's request log, through the real CLI: a query served by a warm
process sends the Messages API exactly the request a fresh process sends (only the per-process
metadata differs), offers only its own tools, and carries nothing of any earlier query.
"""

from __future__ import annotations

import contextvars
import json
import os
import re
import signal
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from conftest import cli_processes, kill_idle_warm_process, leftover_query_dirs, no_cli_left

from sf_provider import (
    APIError,
    ClaudeAgentProvider,
    FunctionTool,
    GenerateResult,
    ProcessDiedError,
    ProviderCompatibilityError,
    ProviderError,
    ProviderSettings,
    QueryTimeoutError,
    TextDeltaPart,
    ToolRegistry,
    UnsupportedRequestError,
    _process,
)
from sf_provider._process import CLISession
from sf_provider.registry import GUIDANCE_TOOL_NAME
from sf_provider.testing import (
    HTTPErrorReply,
    RecordedRequest,
    Reply,
    ScriptedMessagesAPI,
    fault,
    http_error,
    reply,
    text,
    tool_use,
)

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

_MARKER = re.compile(r"SECRET-(\d+)")
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
}


def _secrets(request: RecordedRequest) -> set[int]:
    """Every query marker anywhere in the request: prompt, tools, results, system."""
    return {int(m) for m in _MARKER.findall(json.dumps(request.body, ensure_ascii=False))}


def _model(request: RecordedRequest) -> Reply:
    """Calls the first offered tool with the query's number, then answers with its result."""
    secrets = _secrets(request)
    if len(secrets) != 1:
        return reply(text(f"mixed queries: {sorted(secrets)}"))
    (n,) = secrets
    results = request.tool_results()
    if not request.tool_names:
        return reply(text(f"no tools for SECRET-{n}"), input_tokens=1000)
    if not results:
        return reply(tool_use(request.tool_names[0], {"n": n}), input_tokens=1000)
    content = results[0]["content"]
    said = content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
    return reply(text(f"result {said}"), input_tokens=1000)


def _tool(name: str, seen: list[tuple[str, int]]) -> FunctionTool:
    def run(arguments: dict[str, Any]) -> str:
        seen.append((name, int(arguments["n"])))
        return f"{name}:SECRET-{arguments['n']}"

    return FunctionTool(name=name, description=f"Tool {name}.", input_schema=SCHEMA, executor=run)


def _comparable(request: RecordedRequest) -> str:
    """The request body without `metadata` (it names the CLI process and its session) and with
    the scripted API's running tool-call ids blanked."""
    body = {k: v for k, v in request.body.items() if k != "metadata"}
    return re.sub(r"toolu_scripted_\d+", "toolu_ID", json.dumps(body, sort_keys=True))


def _turns(request: RecordedRequest) -> int:
    """User and assistant messages (the CLI also sends a `system` entry with output settings)."""
    return sum(m.get("role") in ("user", "assistant") for m in request.messages)


def _per_query(requests: list[RecordedRequest]) -> Iterator[list[RecordedRequest]]:
    """Requests grouped by query marker, in order (every request carries exactly one)."""
    groups: dict[int, list[RecordedRequest]] = {}
    for request in requests:
        (n,) = _secrets(request)
        groups.setdefault(n, []).append(request)
    yield from groups.values()


async def test_warm_queries_send_what_a_fresh_process_sends_and_nothing_else() -> None:
    seen: list[tuple[str, int]] = []
    tool = _tool("lookup", seen)
    async with ScriptedMessagesAPI(_model) as api:
        async with ClaudeAgentProvider(api.settings(warm_processes=1)) as provider:
            warm = [await provider.generate(f"Look up SECRET-{n}.", tools=[tool]) for n in range(4)]
        warm_requests = api.requests
        cold = [
            await ClaudeAgentProvider(api.settings(warm_processes=0)).generate(
                f"Look up SECRET-{n}.", tools=[tool]
            )
            for n in range(4)
        ]
        cold_requests = api.requests[len(warm_requests) :]
    assert not api.errors
    # One process served all four queries (the CLI session id is the process's) ...
    assert len({r.session_id for r in warm}) == 1
    assert len({r.session_id for r in cold}) == 4
    # ... and each query did its own work, with its own result and its own cost.
    assert seen == [("lookup", n) for n in range(4)] * 2
    for n, (w, c) in enumerate(zip(warm, cold, strict=True)):
        assert w.text == c.text == f"result lookup:SECRET-{n}"
        assert w.cost_usd == pytest.approx(c.cost_usd)  # its own, not the running total
        # The same for the per-model usage (it added up over the process's queries).
        assert w.provider_details["model_usage"] == c.provider_details["model_usage"]
    # Every request of a warm query is the request a fresh process sends for that query.
    warm_groups, cold_groups = list(_per_query(warm_requests)), list(_per_query(cold_requests))
    assert [len(g) for g in warm_groups] == [len(g) for g in cold_groups] == [2, 2, 2, 2]
    for warm_group, cold_group in zip(warm_groups, cold_groups, strict=True):
        for w_request, c_request in zip(warm_group, cold_group, strict=True):
            assert _comparable(w_request) == _comparable(c_request)
        assert _turns(warm_group[0]) == 1  # the prompt, and no earlier conversation


async def test_each_tool_set_has_its_own_processes_and_offers_only_its_tools() -> None:
    seen: list[tuple[str, int]] = []
    alpha, beta = _tool("alpha", seen), _tool("beta", seen)
    async with (
        ScriptedMessagesAPI(_model) as api,
        ClaudeAgentProvider(api.settings(warm_processes=2)) as provider,
    ):
        results = [
            await provider.generate(f"SECRET-{n}", tools=[alpha if n % 2 == 0 else beta])
            for n in range(4)
        ]
    assert not api.errors
    assert seen == [("alpha", 0), ("beta", 1), ("alpha", 2), ("beta", 3)]
    for n, group in enumerate(_per_query(api.requests)):
        wanted = "alpha" if n % 2 == 0 else "beta"
        assert {name for r in group for name in r.tool_names} == {f"mcp__sf__{wanted}"}
    sessions = [r.session_id for r in results]
    assert sessions[0] == sessions[2] != sessions[1] == sessions[3]


async def test_other_options_or_executors_get_another_process() -> None:
    seen: list[tuple[str, int]] = []
    first, same_name = _tool("lookup", seen), _tool("lookup", seen)  # other executor
    async with (
        ScriptedMessagesAPI(_model) as api,
        ClaudeAgentProvider(api.settings(warm_processes=4)) as provider,
    ):
        a = await provider.generate("SECRET-0", tools=[first])
        b = await provider.generate("SECRET-1", tools=[same_name])
        c = await provider.generate("SECRET-2", tools=[first], system_prompt="Be brief.")
        d = await provider.generate("SECRET-3", tools=[first])
    assert len({a.session_id, b.session_id, c.session_id}) == 3
    assert d.session_id == a.session_id
    assert "Be brief." in json.dumps(api.requests[4].body["system"])
    assert "Be brief." not in json.dumps(api.requests[6].body["system"])


async def test_a_rotated_api_key_in_the_environment_is_never_sent_by_an_old_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script = [reply(text("one")), reply(text("two")), reply(text("three"))]
    async with ScriptedMessagesAPI(script) as api:
        settings = api.settings(warm_processes=1)
        env = {k: v for k, v in settings.env.items() if k != "ANTHROPIC_API_KEY"}
        async with ClaudeAgentProvider(settings.model_copy(update={"env": env})) as provider:
            monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-key-one")
            first = await provider.generate("hi")
            monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-key-two")
            second = await provider.generate("hi")
            third = await provider.generate("hi")
    sent = [r.headers.get("x-api-key") for r in api.requests]
    assert sent == ["sk-ant-key-one", "sk-ant-key-two", "sk-ant-key-two"]
    processes = [r.provider_details["process"] for r in (first, second, third)]
    assert processes == ["fresh", "fresh", "warm"]


async def test_single_turn_queries_reuse_a_process_without_pending_calls() -> None:
    routed = FunctionTool(name="route", description="Route a request.", input_schema=SCHEMA)
    async with (
        ScriptedMessagesAPI(_model) as api,
        ClaudeAgentProvider(api.settings(warm_processes=1)) as provider,
    ):
        results = [await provider.generate(f"SECRET-{n}", tools=[routed]) for n in range(3)]
    assert not api.errors
    assert len({r.session_id for r in results}) == 1
    for n, result in enumerate(results):
        assert result.finish_reason == "tool-calls"
        assert [(c.tool_name, c.input) for c in result.tool_calls] == [("route", {"n": n})]
    assert [_turns(r) for r in api.requests] == [1, 1, 1]
    assert [_secrets(r) for r in api.requests] == [{0}, {1}, {2}]


async def test_a_failed_query_never_returns_its_process() -> None:
    def model(request: RecordedRequest) -> Reply | HTTPErrorReply:
        if _secrets(request) == {1}:
            return http_error(500, "scripted failure")
        return _model(request)

    seen: list[tuple[str, int]] = []
    tool = _tool("lookup", seen)
    async with (
        ScriptedMessagesAPI(model) as api,
        ClaudeAgentProvider(api.settings(warm_processes=1)) as provider,
    ):
        first = await provider.generate("SECRET-0", tools=[tool])
        with pytest.raises(APIError, match="HTTP 500"):
            await provider.generate("SECRET-1", tools=[tool])
        third = await provider.generate("SECRET-2", tools=[tool])
        fourth = await provider.generate("SECRET-3", tools=[tool])
    # The failed query ran on the warm process, which was then stopped: the next one is fresh.
    assert third.session_id != first.session_id
    assert fourth.session_id == third.session_id
    assert [_turns(g[0]) for g in _per_query(api.requests)] == [1, 1, 1, 1]


async def test_an_abandoned_stream_stops_its_process() -> None:
    def model(request: RecordedRequest) -> Reply:
        return reply(text(f"answer to {sorted(_secrets(request))} " * 20))

    async with (
        ScriptedMessagesAPI(model) as api,
        ClaudeAgentProvider(api.settings(warm_processes=1)) as provider,
    ):
        first = await provider.generate("SECRET-0")
        async for part in provider.stream("SECRET-1"):
            if isinstance(part, TextDeltaPart):
                break  # leave the query half-read
        await anyio.lowlevel.checkpoint()
        third = await provider.generate("SECRET-2")
        assert len(cli_processes()) == 1  # the abandoned query's process is gone
    assert third.session_id != first.session_id
    assert [_secrets(r) for r in api.requests] == [{0}, {1}, {2}]
    assert [_turns(r) for r in api.requests] == [1, 1, 1]


async def test_budgets_and_unknown_histories_get_a_fresh_process() -> None:
    async with (
        ScriptedMessagesAPI(_model) as api,
        ClaudeAgentProvider(api.settings(warm_processes=2)) as provider,
    ):
        first = await provider.generate("SECRET-0")
        history = [
            {"role": "user", "content": "SECRET-1"},
            {"role": "assistant", "content": "noted"},
            {"role": "user", "content": "again SECRET-1"},
        ]
        with_history = await provider.generate(history)  # no live process holds it
        with_budget = await provider.generate("SECRET-2", max_budget_usd=5.0)
        last = await provider.generate("SECRET-3")
    assert with_history.provider_details["process"] == "fresh"
    assert with_budget.provider_details["process"] == "fresh"
    assert last.provider_details["process"] == "warm"
    assert with_history.session_id != first.session_id
    assert with_budget.session_id not in (first.session_id, with_history.session_id)
    # The process that replayed a history holds it for good: never emptied for another query.
    assert last.session_id == first.session_id


async def test_concurrent_queries_never_share_a_process() -> None:
    seen: list[tuple[str, int]] = []
    tool = _tool("lookup", seen)
    async with (
        ScriptedMessagesAPI(_model) as api,
        ClaudeAgentProvider(api.settings(warm_processes=1)) as provider,
    ):
        results: dict[int, GenerateResult] = {}

        async def one(n: int) -> None:
            results[n] = await provider.generate(f"SECRET-{n}", tools=[tool])

        async with anyio.create_task_group() as group:
            for n in range(3):
                group.start_soon(one, n)
        assert len({r.session_id for r in results.values()}) == 3
        assert len(cli_processes()) == 1  # one kept warm, the others stopped
        again = await provider.generate("SECRET-9", tools=[tool])
    assert again.session_id in {r.session_id for r in results.values()}
    assert sorted(seen) == [("lookup", n) for n in (0, 1, 2, 9)]
    for n, result in results.items():
        assert result.text == f"result lookup:SECRET-{n}"
    assert not api.errors


async def test_close_and_idle_timeout_stop_every_process() -> None:
    async with ScriptedMessagesAPI(_model) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=2, warm_idle_timeout=3))
        await provider.generate("SECRET-0")
        assert len(cli_processes()) == 1
        await no_cli_left()
        assert not cli_processes(), "the idle process outlived warm_idle_timeout"
        await provider.generate("SECRET-1")
        await provider.aclose()
        assert not cli_processes()
        assert not leftover_query_dirs()
        # A closed provider still works, and warms again.
        after = await provider.generate("SECRET-2")
        await provider.aclose()
    assert after.text == "no tools for SECRET-2"
    assert not cli_processes()
    assert not leftover_query_dirs()


def test_warm_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="warm_processes"):
        ProviderSettings(warm_processes=-1)
    with pytest.raises(ValueError, match="warm_idle_timeout"):
        ProviderSettings(warm_idle_timeout=0)


def test_a_warm_process_ends_with_its_event_loop() -> None:
    """Sync callers run a new event loop per call (asyncio.run): the process warmed in one is
    stopped when that loop ends, never reused from another loop, and nothing is left behind."""
    import asyncio

    async def query(provider: ClaudeAgentProvider, n: int) -> str:
        result = await provider.generate(f"SECRET-{n}")
        return result.session_id or ""

    async def main() -> None:
        async with ScriptedMessagesAPI(_model) as api:
            provider = ClaudeAgentProvider(api.settings(warm_processes=1))
            # Each query in its own thread-run event loop, like a sync adapter method.
            first = await asyncio.to_thread(asyncio.run, query(provider, 0))
            assert not cli_processes()  # stopped as its loop ended, without aclose()
            second = await asyncio.to_thread(asyncio.run, query(provider, 1))
            third = await query(provider, 2)
            assert len({first, second, third}) == 3
            assert len(cli_processes()) == 1  # warm on this loop
            fourth = await query(provider, 3)
            assert fourth == third
            await provider.aclose()
            assert [_turns(r) for r in api.requests] == [1, 1, 1, 1]

    asyncio.run(main())
    assert not cli_processes()
    assert not leftover_query_dirs()


REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("REQUEST_ID", default="none")


async def test_tools_run_in_the_context_of_the_query_that_called_them() -> None:
    """Request-scoped context variables (a request id, a tracing span) reach each query's tools
    exactly as with a fresh process, never those of the query that started the process."""
    seen: list[str] = []

    def whoami(arguments: dict[str, Any]) -> str:
        seen.append(REQUEST_ID.get())
        return f"ran for SECRET-{arguments['n']}"

    tool = FunctionTool(name="whoami", input_schema=SCHEMA, executor=whoami)
    async with (
        ScriptedMessagesAPI(_model) as api,
        ClaudeAgentProvider(api.settings(warm_processes=1)) as provider,
    ):
        results = []
        for n in range(3):
            REQUEST_ID.set(f"request-{n}")
            results.append(await provider.generate(f"SECRET-{n}", tools=[tool]))
    assert len({r.session_id for r in results}) == 1
    assert seen == ["request-0", "request-1", "request-2"]


async def test_a_warm_process_that_died_while_idle_is_replaced() -> None:
    async with (
        ScriptedMessagesAPI(_model) as api,
        ClaudeAgentProvider(api.settings(warm_processes=1)) as provider,
    ):
        first = await provider.generate("SECRET-0")
        await kill_idle_warm_process(provider)
        second = await provider.generate("SECRET-1")
    assert second.session_id != first.session_id
    assert second.text == "no tools for SECRET-1"


@pytest.mark.parametrize("held", ["nothing", "a conversation"])
async def test_a_process_that_died_just_before_a_query_is_not_handed_to_it(held: str) -> None:
    """The idle process exited, but asyncio has not yet told the provider (the event loop had
    not run since): the query must not be given the dead process (it failed with
    ProcessDiedError though nothing had been sent), but start one, as the fresh path does."""
    async with (
        ScriptedMessagesAPI(_model) as api,
        ClaudeAgentProvider(api.settings(warm_processes=1)) as provider,
    ):
        messages: list[dict[str, Any]] = [{"role": "user", "content": "SECRET-1"}]
        if held == "nothing":
            await provider.warm_up()  # an emptied process: served without a rewind
        else:
            first = await provider.generate(messages)
            messages += [first.assistant_message(), {"role": "user", "content": "And SECRET-1?"}]
        await kill_idle_warm_process(provider, unseen=True)
        second = await provider.generate(messages)
    assert second.provider_details["process"] == "fresh"
    assert second.text == "no tools for SECRET-1"
    assert not api.errors


async def test_a_retired_process_is_replaced_before_the_next_query_needs_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A process retired by its query limit is replaced in the background: the next query
    gets a started process, emptied (warm), not one that starts as it waits (fresh)."""
    monkeypatch.setattr(_process, "WARM_MAX_QUERIES", 2)
    seen: list[tuple[str, int]] = []
    tool = _tool("lookup", seen)
    async with (
        ScriptedMessagesAPI(_model) as api,
        ClaudeAgentProvider(api.settings(warm_processes=1)) as provider,
    ):
        first = await provider.generate("Look up SECRET-0.", tools=[tool])
        second = await provider.generate("Look up SECRET-1.", tools=[tool])  # its last query
        for _ in range(1200):  # a "no hang" bound (120 s): the replacement starts meanwhile
            if provider._warm_pool().idle:
                break
            await anyio.sleep(0.1)
        assert provider._warm_pool().idle == 1
        assert len(cli_processes()) == 1  # the retired one was stopped
        third = await provider.generate("Look up SECRET-2.", tools=[tool])
    assert not api.errors
    served = [r.provider_details["process"] for r in (first, second, third)]
    assert served == ["fresh", "warm", "warm"]
    assert first.session_id == second.session_id != third.session_id
    assert third.text == "result lookup:SECRET-2"
    assert seen == [("lookup", 0), ("lookup", 1), ("lookup", 2)]


def _hold_start(monkeypatch: pytest.MonkeyPatch, which: int, go: anyio.Event) -> list[CLISession]:
    """The CLI processes started (connected), in order; the start of the `which`-th (from 1)
    waits for `go`."""
    started: list[CLISession] = []
    connect = CLISession.connect

    async def held(self: CLISession) -> None:
        if not self.started and self not in started:
            started.append(self)
            if len(started) == which:
                await go.wait()
        await connect(self)

    monkeypatch.setattr(CLISession, "connect", held)
    return started


async def test_a_query_waits_for_a_starting_replacement_instead_of_starting_a_cli(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every process busy (here the pool's only one was just retired) while a replacement
    starts: the next query takes the replacement when it is ready. It started a CLI of its own
    before, one process more than the pool holds, and later than the replacement."""
    monkeypatch.setattr(_process, "WARM_MAX_QUERIES", 2)
    go = anyio.Event()
    started = _hold_start(monkeypatch, 2, go)  # the replacement's start waits for the query
    seen: list[tuple[str, int]] = []
    tool = _tool("lookup", seen)
    results: list[GenerateResult] = []

    async with (
        ScriptedMessagesAPI(_model) as api,
        ClaudeAgentProvider(api.settings(warm_processes=1)) as provider,
    ):

        async def ask(n: int) -> None:
            results.append(await provider.generate(f"Look up SECRET-{n}.", tools=[tool]))

        await ask(0)
        await ask(1)  # its process's last query: retired, its replacement starts
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(ask, 2)
            await anyio.wait_all_tasks_blocked()  # the query started a CLI, or waits
            go.set()
        assert len(cli_processes()) == 1
    assert not api.errors
    assert [r.provider_details["process"] for r in results] == ["fresh", "warm", "warm"]
    assert len(started) == 2  # the first process and its replacement, nothing else
    assert results[2].session_id != results[0].session_id
    assert results[2].text == "result lookup:SECRET-2"
    assert seen == [("lookup", 0), ("lookup", 1), ("lookup", 2)]


async def test_a_query_cancelled_while_it_waits_for_a_replacement_leaves_it_to_the_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_process, "WARM_MAX_QUERIES", 2)
    go = anyio.Event()
    started = _hold_start(monkeypatch, 2, go)
    async with (
        ScriptedMessagesAPI(_model) as api,
        ClaudeAgentProvider(api.settings(warm_processes=1)) as provider,
    ):
        await provider.generate("SECRET-0")
        await provider.generate("SECRET-1")  # retired: its replacement starts
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(provider.generate, "SECRET-2")
            await anyio.wait_all_tasks_blocked()  # waiting for the replacement
            tasks.cancel_scope.cancel()
        go.set()
        pool = provider._warm_pool()
        for _ in range(1200):  # a "no hang" bound (120 s): the replacement starts meanwhile
            if pool.idle:
                break
            await anyio.sleep(0.1)
        assert pool._idle == started[1:]  # in the pool, not lost with the query
        fourth = await provider.generate("SECRET-3")
        assert len(cli_processes()) == 1
    await no_cli_left()
    assert cli_processes() == [] and leftover_query_dirs() == []
    assert fourth.provider_details["process"] == "warm"
    assert fourth.text == "no tools for SECRET-3"
    assert len(started) == 2
    assert [_secrets(r) for r in api.requests] == [{0}, {1}, {3}]


@pytest.mark.parametrize("own_start", ["works", "fails"])
async def test_a_query_whose_replacement_fails_to_start_starts_its_own_or_fails_as_fresh_does(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Any,
    own_start: str,
) -> None:
    """The replacement the query waits for cannot start (its CLI is missing): the query starts
    its own process, and fails, when that cannot start either, with a fresh start's error."""
    import dataclasses

    monkeypatch.setattr(_process, "WARM_MAX_QUERIES", 2)
    go = anyio.Event()
    started = _hold_start(monkeypatch, 2, go)
    missing = str(tmp_path / "no-such-claude")
    made: list[int] = []

    def options_of(provider: ClaudeAgentProvider, broken: set[int]) -> None:
        real = provider._sdk_options

        def options(*args: Any, **kwargs: Any) -> Any:
            made.append(1)
            opts = real(*args, **kwargs)
            return dataclasses.replace(opts, cli_path=missing) if len(made) in broken else opts

        monkeypatch.setattr(provider, "_sdk_options", options)

    async with (
        ScriptedMessagesAPI(_model) as api,
        ClaudeAgentProvider(api.settings(warm_processes=1)) as provider,
    ):
        options_of(provider, {2} if own_start == "works" else {2, 3})
        await provider.generate("SECRET-0")
        await provider.generate("SECRET-1")  # retired: its replacement starts, and fails
        outcome: list[GenerateResult | ProviderError] = []

        async def third() -> None:
            try:
                outcome.append(await provider.generate("SECRET-2"))
            except ProviderError as exc:
                outcome.append(exc)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(third)
            await anyio.wait_all_tasks_blocked()  # waiting for the replacement
            starts_meanwhile = len(started)
            go.set()
    await no_cli_left()
    assert cli_processes() == [] and leftover_query_dirs() == []
    assert "replacement failed to start" in caplog.text
    assert starts_meanwhile == 2  # none of its own while it waited
    assert len(started) == 3  # the query's own start after the replacement's
    (got,) = outcome
    if own_start == "works":
        assert isinstance(got, GenerateResult), got
        assert got.provider_details["process"] == "fresh"
        assert got.text == "no tools for SECRET-2"
        return
    async with ScriptedMessagesAPI(_model) as api:
        made.clear()
        fresh = ClaudeAgentProvider(api.settings(warm_processes=0))
        options_of(fresh, {1})
        with pytest.raises(ProviderError) as info:
            await fresh.generate("SECRET-2")
    assert type(got) is type(info.value) and str(got) == str(info.value)


async def test_a_timed_out_query_stops_its_warm_process() -> None:
    script = [reply(text("first")), fault("hang"), reply(text("third"))]
    async with (
        ScriptedMessagesAPI(script) as api,
        ClaudeAgentProvider(api.settings(warm_processes=1)) as provider,
    ):
        first = await provider.generate("SECRET-0")
        # On the started process: 8 s is room for its rewind and turn on a loaded machine; the
        # hung request holds the wait.
        with pytest.raises(QueryTimeoutError):
            await provider.generate("SECRET-1", timeout=8.0)
        third = await provider.generate("SECRET-2")
    assert third.text == "third"
    assert third.session_id != first.session_id
    assert [_secrets(r) for r in api.requests] == [{0}, {1}, {2}]


async def test_structured_output_on_a_warm_process() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

    def model(request: RecordedRequest) -> Reply:
        (n,) = _secrets(request)
        if request.tool_results():
            return reply(text("done"))
        return reply(tool_use("StructuredOutput", {"n": n}))

    async with (
        ScriptedMessagesAPI(model) as api,
        ClaudeAgentProvider(api.settings(warm_processes=1)) as provider,
    ):
        results = [await provider.generate(f"SECRET-{n}", output_schema=schema) for n in range(3)]
    assert [r.structured_output for r in results] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert len({r.session_id for r in results}) == 1
    assert [_turns(r) for r in api.requests if not r.tool_results()] == [1, 1, 1]


async def test_warm_up_starts_processes_without_an_api_call() -> None:
    seen: list[tuple[str, int]] = []
    tool = _tool("lookup", seen)
    async with (
        ScriptedMessagesAPI(_model) as api,
        ClaudeAgentProvider(api.settings(warm_processes=2)) as provider,
    ):
        assert await provider.warm_up([tool], processes=3) == 2  # never above warm_processes
        assert len(cli_processes()) == 2
        assert api.requests == []  # starting a process costs no tokens
        results: dict[int, GenerateResult] = {}

        async def one(n: int) -> None:
            results[n] = await provider.generate(f"SECRET-{n}", tools=[tool])

        async with anyio.create_task_group() as group:
            for n in range(2):
                group.start_soon(one, n)
        assert len(cli_processes()) == 2  # both queries ran on the warmed processes
        assert len({r.session_id for r in results.values()}) == 2
        # Another setup is warmed separately; the least recently used process makes room.
        assert await provider.warm_up([tool], system_prompt="Be brief.") == 1
        assert len(cli_processes()) == 2
    assert [_turns(r) for r in api.requests if not r.tool_results()] == [1, 1]
    assert sorted(seen) == [("lookup", 0), ("lookup", 1)]


async def test_warm_up_explains_what_it_cannot_do() -> None:
    async with ScriptedMessagesAPI(_model) as api:
        with pytest.raises(UnsupportedRequestError, match="warm_processes"):
            await ClaudeAgentProvider(api.settings(warm_processes=0)).warm_up()
        provider = ClaudeAgentProvider(api.settings(warm_processes=1))
        with pytest.raises(UnsupportedRequestError, match="fresh process"):
            await provider.warm_up(max_budget_usd=1.0)
        for processes in (0, 2.5, True, "2"):  # 2.5 and True were taken, "2" a TypeError
            with pytest.raises(UnsupportedRequestError, match="whole number of at least 1"):
                await provider.warm_up(processes=processes)  # type: ignore[arg-type]
        with pytest.raises(UnsupportedRequestError, match="invalid call options"):
            await provider.warm_up(seed=7)
        missing = ClaudeAgentProvider(api.settings(warm_processes=1, cli_path="/nonexistent/cli"))
        with pytest.raises(ProviderError):
            await missing.warm_up()
    assert not cli_processes()
    assert not leftover_query_dirs()


async def test_registry_queries_reuse_a_process_guidance_included() -> None:
    seen: list[tuple[str, int]] = []
    registry = ToolRegistry([_tool("lookup", seen)], guidance=True)
    async with (
        ScriptedMessagesAPI(_model) as api,
        ClaudeAgentProvider(api.settings(warm_processes=1), registry=registry) as provider,
    ):
        results = [await provider.generate(f"SECRET-{n}") for n in range(2)]
    assert len({r.session_id for r in results}) == 1
    assert [len(r.tool_calls) for r in results] == [1, 1]
    offered = {name for request in api.requests for name in request.tool_names}
    assert offered == {"mcp__sf__lookup", f"mcp__sf__{GUIDANCE_TOOL_NAME}"}


async def test_a_pydantic_ai_agent_runs_every_step_of_every_run_on_one_warm_process() -> None:
    """Through the adapter: each run's first step gets the warm process, emptied; its later steps
    continue the conversation on it; every answer is right (tests/contract/test_continuation.py
    proves the requests equal the fresh path's)."""
    from pydantic_ai import Agent

    from sf_provider.adapters.pydantic_ai import ClaudeAgentModel

    def model(request: RecordedRequest) -> Reply:
        (n,) = _secrets(request)
        if not request.tool_results():
            return reply(tool_use("double", {"n": n}))
        return reply(text(f"doubled: {request.tool_result_texts()[0]}"))

    def process_of(request: RecordedRequest) -> str:
        return str(json.loads(request.body["metadata"]["user_id"])["session_id"])

    async with (
        ScriptedMessagesAPI(model) as api,
        ClaudeAgentProvider(api.settings(warm_processes=1)) as provider,
    ):
        agent = Agent(ClaudeAgentModel(provider))

        @agent.tool_plain
        def double(n: int) -> int:
            """Double a number."""
            return 2 * n

        outputs = [(await agent.run(f"Double SECRET-{n}.")).output for n in (3, 4)]
    assert outputs == ["doubled: 6", "doubled: 8"]
    assert len({process_of(r) for r in api.requests}) == 1
    first_steps = [r for r in api.requests if not r.tool_results()]
    assert [_turns(r) for r in first_steps] == [1, 1]  # the second run saw nothing of the first


async def test_a_warm_process_that_cannot_be_set_up_leaves_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sf_provider import _process

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise OSError("disk full (simulated)")

    live_before = set(_process._LIVE)
    async with ScriptedMessagesAPI(_model) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=1))
        monkeypatch.setattr(provider, "_sdk_options", broken)
        with pytest.raises(ProviderCompatibilityError, match="disk full") as info:
            await provider.generate("SECRET-0")
        assert isinstance(info.value.__cause__, OSError)
        await provider.aclose()
    assert set(_process._LIVE) <= live_before
    assert not leftover_query_dirs()
    assert api.requests == []


async def test_a_new_gate_never_runs_on_a_process_of_the_old_one() -> None:
    seen: list[tuple[str, int]] = []
    tool = _tool("lookup", seen).model_copy(update={"mutating": True})
    registry = ToolRegistry([tool], gate=lambda request: True)
    async with (
        ScriptedMessagesAPI(_model) as api,
        ClaudeAgentProvider(api.settings(warm_processes=2), registry=registry) as provider,
    ):
        allowed = await provider.generate("SECRET-0")
        registry.gate = lambda request: False
        denied = await provider.generate("SECRET-1")
    assert seen == [("lookup", 0)]  # the second call never ran
    assert allowed.tool_calls[0].result is not None and not allowed.tool_calls[0].result.is_error
    result = denied.tool_calls[0].result
    assert result is not None and result.is_error and "denied by the safety gate" in result.output
    assert denied.provider_details["process"] == "fresh"


def test_two_threads_event_loops_sharing_a_provider_never_wait_for_each_other() -> None:
    # Two loops answer at once; the second to finish evicts the other's idle process, whose loop
    # still runs (a server's never ends). Awaiting that process from the wrong loop hung there
    # until the other loop ended, and left both CLIs behind.
    import asyncio
    import threading

    answers: dict[str, str] = {}
    together = threading.Barrier(2, timeout=30)
    lock, all_answered = threading.Lock(), threading.Event()
    waited: dict[str, bool] = {}

    def echo(request: RecordedRequest) -> Reply:
        asked = json.dumps(request.messages)
        return reply(text("echo:" + ("b" if "QUERY-B" in asked else "a")))

    with ScriptedMessagesAPI(echo) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=1))

        async def ask(name: str) -> None:
            await asyncio.to_thread(together.wait)
            answer = (await provider.generate(f"QUERY-{name.upper()}")).text
            with lock:
                answers[name] = answer
                if len(answers) == 2:
                    all_answered.set()
            # This loop stays alive, like a server's, until both have their answers.
            waited[name] = await asyncio.to_thread(all_answered.wait, 30)

        threads = [threading.Thread(target=asyncio.run, args=(ask(n),)) for n in ("a", "b")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(90)
    assert answers == {"a": "echo:a", "b": "echo:b"}
    assert waited == {"a": True, "b": True}, "one query waited for the other's loop to end"
    assert cli_processes() == []
    assert leftover_query_dirs() == []


async def test_a_query_cancelled_while_its_warm_process_rewinds_leaves_no_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The process being emptied for the query was in neither of the pool's lists: a cancel
    then left it running past `aclose()`, its idle timeout and the provider's collection (only
    the event loop's end stopped it)."""
    rewinding = anyio.Event()
    rewind = CLISession.rewind

    async def held_rewind(self: CLISession) -> bool:
        rewinding.set()
        await anyio.sleep_forever()  # cancelled here
        return await rewind(self)  # pragma: no cover

    async with ScriptedMessagesAPI(lambda _request: reply(text("hi"))) as api:
        provider = ClaudeAgentProvider(api.settings())
        await provider.generate("first")
        monkeypatch.setattr(CLISession, "rewind", held_rewind)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(provider.generate, "second")
            await rewinding.wait()
            tasks.cancel_scope.cancel()
        await no_cli_left()
        assert cli_processes() == [] and leftover_query_dirs() == []
        await provider.aclose()
    assert len(api.requests) == 1


async def test_aclose_while_a_warm_process_rewinds_ends_the_query_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A provider closed while a query's warm process is being emptied for it: the query fails
    with the reason by the time `aclose` returns, as when its CLI is still starting. (The SDK
    does not fail a control request of a process it stopped: the query waited out the rewind's
    5 s limit, then started a CLI of its own for a provider already closed.)"""
    rewinding = anyio.Event()
    rewind = CLISession.rewind

    async def unanswered_rewind(self: CLISession) -> bool:
        assert self.transport.pid is not None
        os.kill(self.transport.pid, signal.SIGSTOP)  # it reads the request, never answers
        rewinding.set()
        return await rewind(self)

    errors: list[Exception] = []

    async def query(provider: ClaudeAgentProvider) -> None:
        try:
            await provider.generate("second")
        except ProcessDiedError as exc:
            errors.append(exc)

    async with ScriptedMessagesAPI(lambda _request: reply(text("hi"))) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=1))
        await provider.generate("first")
        monkeypatch.setattr(CLISession, "rewind", unanswered_rewind)
        async with anyio.create_task_group() as group:
            group.start_soon(query, provider)
            await rewinding.wait()
            await provider.aclose()
            await anyio.wait_all_tasks_blocked()
            assert [str(e) for e in errors] == [
                f"{_process.PROVIDER_CLOSED}: its CLI was stopped before the query finished"
            ]
    assert len(api.requests) == 1
    await no_cli_left()
    assert cli_processes() == [] and leftover_query_dirs() == []
