"""A long-running server leaves nothing behind: processes, per-query dirs, pipes, tasks and
objects stay bounded however its requests end (bench/soak.py measures it over hundreds)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
from conftest import cli_processes, leftover_query_dirs, no_cli_left, serving

from sf_provider import ClaudeAgentProvider
from sf_provider._process import WarmPool
from sf_provider.gateway import GatewaySettings, create_app
from sf_provider.settings import ProviderSettings
from sf_provider.testing import (
    RecordedRequest,
    Reply,
    ScriptedMessagesAPI,
    ScriptItem,
    fault,
    http_error,
    reply,
    text,
)

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

MODEL = "claude-sonnet-5-5"


@asynccontextmanager
async def served(provider: ProviderSettings) -> AsyncIterator[httpx.AsyncClient]:
    """The gateway on a free loopback port, and a client for it."""
    async with (
        serving(create_app(GatewaySettings(provider=provider))) as url,
        httpx.AsyncClient(base_url=url, timeout=60) as http,
    ):
        yield http


def pipes() -> int:
    """This process's open pipes (a CLI process holds three: stdin, stdout, stderr)."""
    kinds = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor is gone
            kinds.append(os.readlink(f"/proc/self/fd/{fd}").split(":")[0])
    return kinds.count("pipe")


def by_kind(request: RecordedRequest) -> ScriptItem:
    said = str(request.messages[0]["content"])
    if "overloaded" in said:
        return http_error(529)
    if "hang" in said:
        return fault("hang")  # until the API stops: only the client's leaving ends the query
    if "long" in said:
        return Reply(content=[text("x" * 40_000)], chunk_size=8)
    return reply(text("Sunny."))


async def test_requests_that_fail_or_are_abandoned_leave_no_process_pipe_task_or_dir() -> None:
    """An API error, a client leaving mid-stream, one leaving before the answer, a 400: after
    each round the gateway holds what one clean request leaves (its warm process)."""

    def ask(what: str, **body: Any) -> dict[str, Any]:
        return {"model": MODEL, "messages": [{"role": "user", "content": what}], **body}

    # The scripted API on a thread of its own: its connections are not this loop's tasks.
    with ScriptedMessagesAPI(by_kind) as api:
        async with served(api.settings(warm_processes=1)) as http:
            clean = await http.post("/v1/chat/completions", json=ask("weather?"))
            assert clean.status_code == 200
            baseline = pipes(), len(asyncio.all_tasks())
            for _ in range(3):
                failed = await http.post("/v1/chat/completions", json=ask("overloaded?"))
                assert failed.status_code == 503
                body = ask("long answer", stream=True)
                async with http.stream("POST", "/v1/chat/completions", json=body) as streamed:
                    async for _chunk in streamed.aiter_bytes():
                        break  # the client leaves mid-stream
                seen = len(api.requests)
                leaving = asyncio.create_task(
                    http.post("/v1/chat/completions", json=ask("hang", stream=True))
                )
                while len(api.requests) == seen:  # noqa: ASYNC110 - until its API call arrived
                    await anyio.sleep(0.02)
                leaving.cancel()  # the client leaves before any answer
                with pytest.raises(asyncio.CancelledError):
                    await leaving
                bad = await http.post("/v1/chat/completions", json=ask("weather?", n=3))
                assert bad.status_code == 400
                for _ in range(600):  # until the abandoned queries are stopped (a 30 s bound)
                    if (await http.get("/healthz")).json()["in_flight"] == 0:
                        break
                    await anyio.sleep(0.05)
                again = await http.post("/v1/chat/completions", json=ask("weather?"))
                assert again.status_code == 200
                assert len(cli_processes()) <= 1, "one warm process at most"
                assert len(leftover_query_dirs()) == len(cli_processes())
                assert (pipes(), len(asyncio.all_tasks())) == baseline
        await no_cli_left()
    assert cli_processes() == []
    assert leftover_query_dirs() == []


async def test_a_provider_closed_and_used_again_keeps_no_closed_pool() -> None:
    """A server that closes its provider between jobs and goes on using it: each closed pool
    (and its finalizer) is collected, not kept for the provider's life."""
    pools: list[weakref.ref[WarmPool]] = []
    async with ScriptedMessagesAPI(lambda _request: reply(text("hi"))) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=1))
        for _ in range(4):
            assert (await provider.generate("hello")).text == "hi"
            assert provider._pool is not None
            pools.append(weakref.ref(provider._pool))
            await provider.aclose()
        gc.collect()
        kept = [ref for ref in pools if ref() is not None]
        await no_cli_left()
    assert kept == []
