"""Whole-query and idle timeouts stop a query that would otherwise hang, and say which expired."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from conftest import HeldCLI, cli_processes, leftover_query_dirs, no_cli_left

from sf_provider import ClaudeAgentProvider, ErrorPart, QueryTimeoutError, StreamPart, _process
from sf_provider.testing import RecordedRequest, Reply, ScriptedMessagesAPI, reply, text

pytestmark = [pytest.mark.anyio, pytest.mark.cli]


async def never_answers(_request: RecordedRequest) -> Reply:
    await asyncio.sleep(60)
    return reply(text("too late"))


@dataclass
class HungQuery:
    parts: list[StreamPart]
    error: QueryTimeoutError
    #: Requests the API had received when the error part came, i.e. when the timeout fired.
    reached: int


async def hung_query(**limits: float) -> HungQuery:
    async with ScriptedMessagesAPI(never_answers) as api:
        provider = ClaudeAgentProvider(api.settings(**limits))
        parts: list[StreamPart] = []
        reached = -1
        with pytest.raises(QueryTimeoutError) as info:
            async for part in provider.stream("hello"):
                parts.append(part)
                if isinstance(part, ErrorPart):
                    reached = len(api.requests)
    return HungQuery(parts, info.value, reached)


@pytest.mark.parametrize("kind", ["idle_timeout", "timeout"], ids=["idle", "whole-query"])
async def test_a_hung_api_ends_in_a_timeout_error_and_the_cli_is_stopped(kind: str) -> None:
    # Both clocks also run during CLI start-up, which on a loaded machine can outlast a short
    # limit: a run that never reached the API proves nothing, so it is made again, given longer.
    for seconds in (2.0, 5.0, 15.0):
        run = await hung_query(**{kind: seconds})
        if run.reached:
            break
    assert run.reached == 1, "the timeout fired before the CLI reached the API (during start-up)"
    assert (run.error.kind, run.error.seconds) == (kind, seconds)
    assert f"{kind}=" in str(run.error)
    assert isinstance(run.parts[-1], ErrorPart) and run.parts[-1].error_type == "QueryTimeoutError"
    assert cli_processes() == []


# The whole-query timeout counts from the query's start, the waits for a process to serve it
# included. Each case holds that wait (a `HeldCLI`, released only by the test) far past the
# timeout, so the outcome needs no clock: the query can only end by its timeout.
SHORT = 3.0


def assert_waited_out(error: QueryTimeoutError) -> None:
    assert (error.kind, error.seconds) == ("timeout", SHORT)
    assert "timeout=3 s" in str(error)
    assert "still waiting for a CLI process to serve it" in str(error)


async def test_the_timeout_counts_the_wait_for_the_cli_version_check(tmp_path: Path) -> None:
    cli = HeldCLI(tmp_path)  # `--version` answers only when the test lets it
    async with ScriptedMessagesAPI([reply(text("answered"))]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0, cli_path=str(cli.path)))
        try:
            with pytest.raises(QueryTimeoutError) as info:
                await provider.generate("hi", timeout=SHORT)
            assert cli.asked.exists() and cli.starts == 0 and api.all_requests == []
            assert_waited_out(info.value)
            cli.let_it_answer()
            after = await provider.generate("hi")
        finally:
            cli.let_it_answer()
            await provider.aclose()
    assert after.text == "answered"
    await no_cli_left()
    assert cli_processes() == [] and leftover_query_dirs() == []


async def test_the_timeout_counts_the_wait_for_the_model_list(tmp_path: Path) -> None:
    # thinking="least" is resolved by the CLI's model list, read from a process of its own
    # before the query's process starts.
    cli = HeldCLI(tmp_path)
    cli.let_it_answer()
    cli.hold_starts()
    async with ScriptedMessagesAPI([reply(text("answered"))]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0, cli_path=str(cli.path)))
        try:
            with pytest.raises(QueryTimeoutError) as info:
                await provider.generate("hi", timeout=SHORT, thinking="least")
            assert_waited_out(info.value)
            assert cli.starts <= 1  # only the process reading the model list, stopped
            await no_cli_left()
            assert cli_processes() == [] and leftover_query_dirs() == []
            cli.release_starts()
            after = await provider.generate("hi", thinking="least")
        finally:
            cli.release_starts()
            await provider.aclose()
    assert after.text == "answered" and len(api.requests) == 1
    await no_cli_left()
    assert cli_processes() == [] and leftover_query_dirs() == []


@pytest.mark.parametrize("then", ["released", "closed"])
async def test_the_timeout_counts_the_wait_for_a_starting_replacement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, then: str
) -> None:
    """The query waits for the replacement of a retired warm process, whose CLI takes long to
    start: its timeout ends the wait, and the replacement stays the pool's, usable once it has
    started (`released`), or stopped with the provider (`closed`)."""
    monkeypatch.setattr(_process, "WARM_MAX_QUERIES", 2)
    cli = HeldCLI(tmp_path)
    cli.let_it_answer()
    async with ScriptedMessagesAPI(lambda _request: reply(text("answered"))) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=1, cli_path=str(cli.path)))
        pool = provider._warm_pool()
        try:
            await provider.generate("first")
            cli.hold_starts()
            await provider.generate("second")  # its process's last query: the replacement starts
            await cli.wait_until_held()
            with pytest.raises(QueryTimeoutError) as info:
                await provider.generate("third", timeout=SHORT)
            assert_waited_out(info.value)
            assert cli.starts == 2  # the first process and its replacement: none of the query's
            assert len(cli_processes()) == 1  # the replacement, held
            # Still starting, busy meanwhile, and free for the next query to wait for.
            (replacement,) = pool._starting
            assert replacement.waiter is None and len(pool._busy) == 1 and pool.idle == 0
            if then == "released":
                cli.release_starts()
                for _ in range(1200):  # a "no hang" bound (120 s): the replacement starts
                    if pool.idle:
                        break
                    await anyio.sleep(0.1)
                fourth = await provider.generate("fourth")
                assert fourth.provider_details["process"] == "warm"
                assert fourth.text == "answered" and cli.starts == 2
        finally:
            await provider.aclose()  # "closed": while the replacement is still starting
            cli.release_starts()
        assert pool._busy == set() and pool._starting == [] and pool.idle == 0
    assert len(api.requests) == (3 if then == "released" else 2)
    await no_cli_left()
    assert cli_processes() == [] and leftover_query_dirs() == []
