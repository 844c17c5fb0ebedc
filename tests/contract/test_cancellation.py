"""Leaving a query early stops its CLI within 2 s and leaves no process and no temp dir behind."""

from __future__ import annotations

import asyncio
import time

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


async def wait_until_clean(limit: float = 2.0) -> float:
    """Seconds until no CLI child and no query dir is left; fails after `limit`."""
    started = time.perf_counter()
    while cli_processes() or leftover_query_dirs():
        elapsed = time.perf_counter() - started
        assert elapsed < limit, f"still there after {elapsed:.1f} s: {cli_processes()}"
        await anyio.sleep(0.05)
    return time.perf_counter() - started


async def test_breaking_out_of_the_stream_stops_the_cli() -> None:
    async with ScriptedMessagesAPI([LONG]) as api:
        provider = ClaudeAgentProvider(api.settings())
        async for part in provider.stream("talk"):
            if isinstance(part, TextDeltaPart):
                break
        assert cli_processes(), "the CLI was still running when the loop was left"
        await wait_until_clean()


async def test_aclose_of_the_stream_stops_the_cli() -> None:
    async with ScriptedMessagesAPI([LONG]) as api:
        provider = ClaudeAgentProvider(api.settings())
        stream = provider.stream("talk")
        async for part in stream:
            if isinstance(part, TextDeltaPart):
                break
        started = time.perf_counter()
        await stream.aclose()
        assert time.perf_counter() - started < 2.0
        await wait_until_clean()


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
            group.cancel_scope.cancel()
        assert len(api.requests) == 1
        await wait_until_clean()
