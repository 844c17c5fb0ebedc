"""Leaving a query early stops its CLI and leaves no process and no temp dir behind."""

from __future__ import annotations

import asyncio

import anyio
import pytest
from conftest import cli_processes, leftover_query_dirs

from sf_provider import ClaudeAgentProvider, TextDeltaPart
from sf_provider.testing import RecordedRequest, Reply, ScriptedMessagesAPI, reply, text

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

LONG = Reply(content=[text("word " * 2000)], chunk_size=5)


async def never_answers(_request: RecordedRequest) -> Reply:
    await asyncio.sleep(60)
    return reply(text("too late"))


async def assert_clean() -> None:
    """No CLI child and no query dir is left, once a stop under way has ended (waited for at
    most 30 s: a "no hang" bound, never a speed claim)."""
    for _ in range(300):
        if not (cli_processes() or leftover_query_dirs()):
            break
        await anyio.sleep(0.1)
    assert cli_processes() == []
    assert leftover_query_dirs() == []


async def test_breaking_out_of_the_stream_stops_the_cli() -> None:
    async with ScriptedMessagesAPI([LONG]) as api:
        provider = ClaudeAgentProvider(api.settings())
        async for part in provider.stream("talk"):
            if isinstance(part, TextDeltaPart):
                break
        assert cli_processes(), "the CLI was still running when the loop was left"
        await assert_clean()


async def test_aclose_of_the_stream_stops_the_cli() -> None:
    async with ScriptedMessagesAPI([LONG]) as api:
        provider = ClaudeAgentProvider(api.settings())
        stream = provider.stream("talk")
        async for part in stream:
            if isinstance(part, TextDeltaPart):
                break
        assert leftover_query_dirs(), "the query's dir was there before aclose"
        await stream.aclose()
        # aclose itself stopped the query: its dir is removed once the CLI was killed.
        assert leftover_query_dirs() == []
        await assert_clean()


async def test_cancelling_the_awaiting_task_stops_the_cli() -> None:
    asked = anyio.Event()

    async def answer_never(_request: RecordedRequest) -> Reply:
        asked.set()
        return await never_answers(_request)

    async with ScriptedMessagesAPI(answer_never) as api:
        provider = ClaudeAgentProvider(api.settings())
        async with anyio.create_task_group() as group:
            group.start_soon(provider.generate, "hello")
            with anyio.fail_after(60):
                await asked.wait()  # the query is now waiting on the API
            assert leftover_query_dirs(), "the query's dir was there before the cancel"
            group.cancel_scope.cancel()
        # The cancelled task ended only after stopping its CLI and removing its dir.
        assert leftover_query_dirs() == []
        assert len(api.requests) == 1
        await assert_clean()
