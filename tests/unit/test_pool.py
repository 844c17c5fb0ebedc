"""`WarmPool` on its own: which process a query gets, and that a closed pool keeps nothing.

The processes here are stand-ins with the attributes the pool reads; everything about real CLI
processes is proven through the real CLI in tests/contract/test_warm.py and test_continuation.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, cast

import anyio
import pytest

from sf_provider._process import WARM_MAX_QUERIES, CLISession, WarmPool

pytestmark = pytest.mark.anyio


class StandIn:
    """What the pool reads of a `CLISession`."""

    def __init__(self, key: str, conversation: list[dict[str, Any]], rewindable: bool = True):
        self.key = key
        self.conversation: list[dict[str, Any]] | None = conversation
        self.rewindable = rewindable
        self.loop = asyncio.get_running_loop()
        self.queries = 1
        self.max_queries = WARM_MAX_QUERIES
        self.renew = None
        self.expiry = None
        self.closed = False
        self.rewinds = 0
        self.stopped_by: str | None = None
        self.transport = type("T", (), {"pid": 1, "exited": lambda _self: False})()

    async def rewind(self) -> bool:
        await anyio.sleep(0.01)  # the CLI answers a control request
        self.rewinds += 1
        self.conversation = []
        return True

    async def connect(self) -> None:
        await anyio.sleep(0.01)  # the CLI starts

    async def close(self) -> None:
        await anyio.sleep(0.01)
        self.closed = True

    def kill_now(self) -> None:
        self.closed = True

    def cancel_expiry(self) -> None:
        pass


def session(proc: StandIn) -> CLISession:
    return cast(CLISession, proc)


def turns(*texts: str, pending: bool = False) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for t in texts:
        out += [
            {"role": "user", "content": [{"type": "text", "text": t}]},
            {"role": "assistant", "content": [{"type": "text", "text": f"re: {t}"}]},
        ]
    if pending:
        out[-1]["content"].append({"type": "tool_use", "id": "c1", "name": "x", "input": {}})
    return out


def never() -> CLISession:
    raise AssertionError("no new process expected")


async def test_a_process_handed_back_while_the_pool_closes_is_stopped_not_parked() -> None:
    pool = WarmPool(2, None)
    proc = StandIn("k", turns("a"))
    taken, served = await pool.take("k", turns("a"), lambda: session(proc))
    assert served == "fresh"
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: pool.give_back(taken, reusable=True))
        group.start_soon(pool.aclose)
    assert pool.idle == 0
    assert proc.closed


async def test_the_process_holding_the_history_continues_it() -> None:
    pool = WarmPool(2, None)
    a, b = StandIn("k", turns("a")), StandIn("k", turns("b"))
    for proc in (a, b):
        await pool.give_back(session(proc), reusable=True)
    assert await pool.take("k", turns("b"), never) == (session(b), "continued")
    assert await pool.take("k", turns("a"), never) == (session(a), "continued")
    assert a.rewinds == b.rewinds == 0


async def test_a_new_conversation_empties_a_finished_one_before_one_awaiting_results() -> None:
    pool = WarmPool(2, None)
    waiting, finished = StandIn("k", turns("a", pending=True)), StandIn("k", turns("b"))
    for proc in (waiting, finished):
        await pool.give_back(session(proc), reusable=True)
    assert await pool.take("k", [], never) == (session(finished), "warm")
    assert finished.rewinds == 1 and waiting.rewinds == 0


async def test_a_run_awaiting_results_keeps_its_process_until_the_pool_is_full() -> None:
    pool = WarmPool(2, None)
    waiting = StandIn("k", turns("a", pending=True))
    await pool.give_back(session(waiting), reusable=True)
    spawned = StandIn("k", [])
    assert await pool.take("k", [], lambda: session(spawned)) == (session(spawned), "fresh")
    # Now full (one idle, one busy): the waiting run's process is emptied rather than a third.
    assert await pool.take("k", [], never) == (session(waiting), "warm")
    assert waiting.rewinds == 1


async def test_a_process_started_from_a_history_is_never_emptied() -> None:
    pool = WarmPool(1, None)
    replayed = StandIn("k", turns("a"), rewindable=False)
    await pool.give_back(session(replayed), reusable=True)
    spawned = StandIn("k", [])
    assert await pool.take("k", [], lambda: session(spawned)) == (session(spawned), "fresh")
    await pool.give_back(session(spawned), reusable=True)
    assert replayed.closed  # least recently used first out: the pool holds one
    assert pool.idle == 1


async def test_retired_processes_go_one_at_a_time_and_are_replaced_off_the_query_path() -> None:
    """Eight clients, each starting a new conversation on the pool's least recently used
    process: the eight processes age alike. With one query limit for all they were retired in
    the same round, and the next queries waited for new processes all starting at once (the
    gateway bench's chained Responses p99 of seconds). Now they go one at a time, and each is
    replaced in the background: no query after the first round starts a process."""
    size, rounds = 8, 2 * WARM_MAX_QUERIES + 10  # two generations of processes
    pool = WarmPool(size, None)
    started: list[StandIn] = []

    def spawn() -> CLISession:
        started.append(StandIn("k", []))
        started[-1].queries = 0
        return session(started[-1])

    fresh_per_round, retired_per_round = [], []
    for _ in range(rounds):
        served: list[str] = []
        retired_before, all_busy = sum(p.closed for p in started), Barrier(size)
        async with anyio.create_task_group() as group:
            for _ in range(size):
                group.start_soon(one_query, pool, spawn, all_busy, served)
        fresh_per_round.append(served.count("fresh"))
        retired_per_round.append(sum(p.closed for p in started) - retired_before)
        for _ in range(1000):  # a retired process's replacement starts in the background
            if pool.idle == size:
                break
            await anyio.sleep(0.001)
        assert pool.idle == size
    assert fresh_per_round[0] == size  # the first burst starts them all
    assert all(p.closed for p in started[:size])  # every first process was retired...
    assert any(p.closed for p in started[size:])  # ...and a replacement too
    assert all(p.queries <= WARM_MAX_QUERIES for p in started)
    assert max(retired_per_round) == 1  # one at a time
    assert sum(fresh_per_round[1:]) == 0  # no query waited for a process to start
    await pool.aclose()


async def test_an_agent_run_in_progress_finishes_on_its_process_past_the_query_limit() -> None:
    """A process that reached its limit with a conversation waiting for tool results is kept
    (the run's next step continues on it), and retired after that step; a run that goes on
    past the leeway loses it (nothing grows without bound)."""
    pool = WarmPool(2, None)
    running = StandIn("k", turns("a", pending=True))
    running.queries = running.max_queries
    await pool.give_back(session(running), reusable=True)
    assert not running.closed and pool.idle == 1
    proc, served = await pool.take("k", turns("a", pending=True), never)
    assert (proc, served) == (session(running), "continued")
    running.queries += 1
    running.conversation = turns("a", "b")  # the run's answer
    await pool.give_back(proc, reusable=True)
    assert running.closed and pool.idle == 0
    endless = StandIn("k", turns("c", pending=True))
    endless.queries = endless.max_queries + 10
    await pool.give_back(session(endless), reusable=True)
    assert endless.closed and pool.idle == 0


async def test_a_replacement_that_fails_to_start_is_stopped_and_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken(StandIn):
        stderr = ("Error: no API key",)

        async def connect(self) -> None:
            raise RuntimeError("the CLI exited at once")

    pool = WarmPool(1, None)
    retired, broken = StandIn("k", turns("a")), Broken("k", [])
    retired.queries = retired.max_queries
    retired.renew = lambda: session(broken)
    await pool.give_back(session(retired), reusable=True)
    for _ in range(1000):  # the replacement starts in the background
        if broken.closed:
            break
        await anyio.sleep(0.001)
    assert retired.closed and broken.closed and pool.idle == 0
    assert "replacement failed to start: the CLI exited at once\nError: no API key" in caplog.text


class Barrier:
    """Released when `count` tasks wait on it."""

    def __init__(self, count: int) -> None:
        self.count, self.released = count, anyio.Event()

    async def wait(self) -> None:
        self.count -= 1
        if not self.count:
            self.released.set()
        await self.released.wait()


async def one_query(
    pool: WarmPool, spawn: Callable[[], CLISession], all_busy: Barrier, served: list[str]
) -> None:
    """A query without history: take a process, serve it while the other clients take theirs,
    give it back."""
    proc, how = await pool.take("k", [], spawn, renew=spawn)
    served.append(how)
    await all_busy.wait()
    cast(StandIn, proc).queries += 1
    cast(StandIn, proc).conversation = turns("q")
    await pool.give_back(proc, reusable=True)


async def test_other_setups_never_share_a_process() -> None:
    pool = WarmPool(2, None)
    await pool.give_back(session(StandIn("k", [])), reusable=True)
    other = StandIn("other", [])
    assert await pool.take("other", [], lambda: session(other)) == (session(other), "fresh")


def test_a_result_without_model_usage_keeps_the_baseline_of_the_running_totals() -> None:
    """Each result's per-model usage is the query's own (the CLI reports the process's running
    totals); a result without any left the baseline empty, so the next query on that process
    reported the running totals as its own."""
    import dataclasses
    from types import SimpleNamespace

    import claude_agent_sdk as sdk

    def result(usage: dict[str, Any] | None, cost: float) -> sdk.ResultMessage:
        fields: dict[str, Any] = {f.name: None for f in dataclasses.fields(sdk.ResultMessage)}
        fields.update(
            subtype="success", duration_ms=1, duration_api_ms=1, is_error=False, num_turns=1
        )
        fields.update(session_id="s", total_cost_usd=cost, model_usage=usage)
        return sdk.ResultMessage(**fields)

    session = SimpleNamespace(_model_usage={}, _cost_usd=0.0)  # what own_result reads

    def own(message: sdk.ResultMessage) -> sdk.ResultMessage:
        return CLISession.own_result(cast(CLISession, session), message)

    first = own(result({"m": {"inputTokens": 100, "costUSD": 0.1, "contextWindow": 9}}, 0.1))
    assert first.model_usage == {"m": {"inputTokens": 100, "costUSD": 0.1, "contextWindow": 9}}
    assert own(result(None, 0.1)).model_usage is None
    third = own(result({"m": {"inputTokens": 300, "costUSD": 0.3, "contextWindow": 9}}, 0.3))
    assert third.model_usage == {"m": {"inputTokens": 200, "costUSD": 0.2, "contextWindow": 9}}
    assert third.total_cost_usd == pytest.approx(0.2)


class HeldStart(StandIn):
    """A replacement whose start waits for `go`, then fails when `fails`."""

    def __init__(self, key: str, *, fails: bool = False) -> None:
        super().__init__(key, [])
        self.queries = 0
        self.go = anyio.Event()
        self.connecting = anyio.Event()
        self.fails = fails
        self.stderr = ("Error: simulated",)

    async def connect(self) -> None:
        self.connecting.set()
        await self.go.wait()
        if self.fails:
            raise RuntimeError("the CLI exited at once")


async def retire_into(pool: WarmPool, replacement: HeldStart, key: str = "k") -> None:
    """Hand back a process at its query limit, so `replacement` starts in its place."""
    retired = StandIn(key, turns("a"))
    retired.queries = retired.max_queries
    retired.renew = lambda: session(replacement)
    await pool.give_back(session(retired), reusable=True)
    assert retired.closed
    await replacement.connecting.wait()


async def test_a_query_waits_for_the_starting_replacement_instead_of_starting_a_process() -> None:
    pool = WarmPool(1, None)
    replacement = HeldStart("k")
    await retire_into(pool, replacement)
    got: list[tuple[CLISession, str]] = []
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: take_into(pool, "k", got))
        await anyio.wait_all_tasks_blocked()
        assert got == []  # waiting, no process of its own
        replacement.go.set()
    assert got == [(session(replacement), "warm")]
    assert pool.idle == 0
    await pool.give_back(got[0][0], reusable=True)
    assert pool.idle == 1


async def take_into(pool: WarmPool, key: str, got: list[tuple[CLISession, str]]) -> None:
    got.append(await pool.take(key, [], never))


async def test_one_query_waits_per_replacement_and_other_setups_never_wait() -> None:
    """A second query, or a query of another setup (another partition: another key), would
    wait longer than the replacement takes for one: it starts its own."""
    pool = WarmPool(2, None)
    replacement = HeldStart("k")
    await retire_into(pool, replacement)
    got: list[tuple[CLISession, str]] = []
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: take_into(pool, "k", got))
        await anyio.wait_all_tasks_blocked()
        second, other = StandIn("k", []), StandIn("other", [])
        assert await pool.take("k", [], lambda: session(second)) == (session(second), "fresh")
        assert await pool.take("other", [], lambda: session(other)) == (session(other), "fresh")
        replacement.go.set()
    assert got == [(session(replacement), "warm")]
    await pool.aclose()


async def test_a_cancelled_wait_leaves_the_replacement_to_the_pool() -> None:
    pool = WarmPool(1, None)
    replacement = HeldStart("k")
    await retire_into(pool, replacement)
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: take_into(pool, "k", []))
        await anyio.wait_all_tasks_blocked()
        group.cancel_scope.cancel()
    replacement.go.set()
    for _ in range(1000):  # it starts in the background
        if pool.idle:
            break
        await anyio.sleep(0.001)
    assert pool.idle == 1 and not replacement.closed
    assert await pool.take("k", [], never) == (session(replacement), "warm")


async def test_a_replacement_handed_over_as_its_query_is_cancelled_returns_to_the_pool() -> None:
    pool = WarmPool(1, None)
    replacement = HeldStart("k")
    await retire_into(pool, replacement)
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: take_into(pool, "k", []))
        await anyio.wait_all_tasks_blocked()
        replacement.go.set()  # handed over when its start ends, before the query runs again
        group.cancel_scope.cancel()
    for _ in range(1000):
        if pool.idle:
            break
        await anyio.sleep(0.001)
    assert pool.idle == 1 and not replacement.closed


async def test_a_replacement_that_fails_to_start_sends_its_waiter_to_a_process_of_its_own(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pool = WarmPool(1, None)
    replacement = HeldStart("k", fails=True)
    await retire_into(pool, replacement)
    own = StandIn("k", [])
    got: list[tuple[CLISession, str]] = []

    async def take() -> None:
        got.append(await pool.take("k", [], lambda: session(own)))

    async with anyio.create_task_group() as group:
        group.start_soon(take)
        await anyio.wait_all_tasks_blocked()
        replacement.go.set()
    assert got == [(session(own), "fresh")]
    for _ in range(1000):  # stopped in the background
        if replacement.closed:
            break
        await anyio.sleep(0.001)
    assert replacement.closed and pool.idle == 0
    assert "replacement failed to start: the CLI exited at once" in caplog.text


async def test_a_waiting_query_takes_a_process_parked_first_but_not_a_run_in_progress() -> None:
    pool = WarmPool(3, None)
    replacement = HeldStart("k")
    await retire_into(pool, replacement)
    running, finished = StandIn("k", turns("a", pending=True)), StandIn("k", turns("b"))
    for proc in (running, finished):
        await pool.give_back(session(proc), reusable=True)
        pool._idle.remove(session(proc))  # busy with queries, as far as the pool knows
        pool._busy.add(session(proc))
    got: list[tuple[CLISession, str]] = []
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: take_into(pool, "k", got))
        await anyio.wait_all_tasks_blocked()
        await pool.give_back(session(running), reusable=True)  # its run's next step comes
        await anyio.wait_all_tasks_blocked()
        assert got == [] and running.rewinds == 0
        await pool.give_back(session(finished), reusable=True)  # this conversation is over
    assert got == [(session(finished), "warm")] and finished.rewinds == 1
    replacement.go.set()
    for _ in range(1000):  # the replacement, no longer waited for, is parked
        if pool.idle == 2:
            break
        await anyio.sleep(0.001)
    assert pool.idle == 2
    await pool.aclose()


async def test_with_a_replacement_coming_a_run_in_progress_keeps_its_process() -> None:
    """The pool counts a starting replacement as busy, so it looked full, and a new
    conversation emptied the process of an agent run waiting for its tool results: that run's
    next step then started a process of its own (bench section 11: a fresh step 2)."""
    pool = WarmPool(2, None)
    replacement = HeldStart("k")
    await retire_into(pool, replacement)
    running = StandIn("k", turns("a", pending=True))
    await pool.give_back(session(running), reusable=True)  # idle 1 + starting 1: full
    got: list[tuple[CLISession, str]] = []
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: take_into(pool, "k", got))
        await anyio.wait_all_tasks_blocked()
        replacement.go.set()
    assert got == [(session(replacement), "warm")]
    assert running.rewinds == 0
    assert await pool.take("k", turns("a", pending=True), never) == (session(running), "continued")


async def test_a_query_never_waits_for_a_replacement_starting_on_another_event_loop() -> None:
    """A provider used from two threads' event loops: a process of one loop is unusable on the
    other, and its start could never wake a query there."""
    import threading

    pool = WarmPool(1, None)
    retired, release = threading.Event(), threading.Event()

    async def other_loop() -> None:
        replacement = HeldStart("k")
        await retire_into(pool, replacement)
        retired.set()
        await anyio.to_thread.run_sync(release.wait)
        replacement.go.set()
        for _ in range(1000):  # parked once started
            if pool.idle:
                break
            await anyio.sleep(0.001)

    thread = threading.Thread(target=asyncio.run, args=(other_loop(),))
    thread.start()
    try:
        assert await anyio.to_thread.run_sync(retired.wait, 30)
        own = StandIn("k", [])
        with anyio.fail_after(60):  # a "no hang" bound: it waited there before
            assert await pool.take("k", [], lambda: session(own)) == (session(own), "fresh")
    finally:
        release.set()
        await anyio.to_thread.run_sync(thread.join, 30)
    assert not thread.is_alive()
    assert pool.idle == 1  # the replacement, for queries of its own loop
    await pool.give_back(session(own), reusable=False)
    await pool.aclose()
    assert own.closed and pool.idle == 0
