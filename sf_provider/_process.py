"""CLI processes: the transport that stops them at once, and the opt-in pool of warm ones.

A warm process serves many queries with the same setup (tools, options, settings), one at a
time. Between two queries its conversation is rewound to before the first user message, so the
next query starts from an empty conversation, exactly like a fresh process (proven from the
scripted API's request log in tests/contract/test_warm.py). A process is reused only after a
clean result; anything else (an error, a cancelled or abandoned query, a failed rewind) stops it.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import os
import shutil
import signal
import uuid
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Hashable
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import claude_agent_sdk as sdk
from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport

__all__ = ["QueryTransport", "WarmPool", "WarmProcess", "user_message"]

_KILL_GRACE_SECONDS = 0.3
#: A warm process is retired after this many queries, so nothing can grow without bound.
WARM_MAX_QUERIES = 100
#: Longest wait for the CLI to rewind a conversation before the process is given up.
_REWIND_TIMEOUT_SECONDS = 5.0


class QueryTransport(SubprocessCLITransport):
    """The SDK's subprocess transport, stopping the CLI at once when a query is abandoned.

    The SDK closes a query gently (end of input, then up to 5 s for the CLI to save its session
    before SIGTERM, which the CLI takes seconds more to honour). Until the result message arrived,
    closing means the query was cancelled, left early, timed out or failed: nothing is worth
    saving (sessions are not persisted), so the CLI is stopped right away. The close may run
    inside a cancelled wait of the SDK's own generator, hence a flag set on the result rather
    than on the way out.
    """

    finished = False

    @property
    def pid(self) -> int | None:
        """The CLI's process id while it runs."""
        process = getattr(self, "_process", None)
        return None if process is None or process.returncode is not None else int(process.pid)

    async def close(self) -> None:
        process = getattr(self, "_process", None)
        if not self.finished and process is not None and process.returncode is None:
            # SIGTERM first; the CLI takes seconds to shut down gracefully, so SIGKILL after a
            # short grace: nothing of an abandoned query is worth waiting for.
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            with anyio.CancelScope(shield=True), anyio.move_on_after(_KILL_GRACE_SECONDS):
                await process.wait()
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
        await super().close()
        # The SDK drops its process without closing the asyncio pipe transport; one left to the
        # garbage collector after the loop closed complains ("Event loop is closed").
        pipes = getattr(getattr(process, "_process", None), "_transport", None)
        if pipes is not None:
            pipes.close()


class WarmProcess:
    """One CLI process kept connected between queries with the same setup (`key`)."""

    transport: QueryTransport
    _client: sdk.ClaudeSDKClient

    def __init__(self, key: Hashable, workdir: Path, stderr: deque[str]) -> None:
        self.key = key
        self.workdir = workdir
        self.stderr = stderr
        self.loop = asyncio.get_running_loop()
        self._context: contextvars.Context | None = None
        self._connected = False
        self._closed = False
        self._first_message: str | None = None
        self._cost_usd = 0.0
        self.queries = 0
        self.expiry: asyncio.TimerHandle | None = None
        self._keeper: AsyncGenerator[None, None] | None = None
        _LIVE.add(self)

    def start(self, options: sdk.ClaudeAgentOptions) -> None:
        """Set the CLI options; the process starts with the first query."""
        self.transport = QueryTransport(prompt=_no_messages(), options=options)
        self._client = sdk.ClaudeSDKClient(options, transport=self.transport)

    def query_context(self) -> contextvars.Context | None:
        """The context (contextvars) of the query being served: its tools run in it, as they
        would in a fresh process started by that query."""
        return self._context

    async def connect(self) -> None:
        """Start the CLI and do the SDK's handshake (no API call); once."""
        if not self._connected:
            self._connected = True
            self._keeper = self._stop_with_loop()
            await anext(self._keeper)
            await self._client.connect()

    async def messages(self, content: str | list[dict[str, Any]]) -> AsyncGenerator[Any, None]:
        """Send one user message and yield the SDK messages up to and including the result."""
        await self.connect()
        self.queries += 1
        self._context = contextvars.copy_context()
        self._first_message = str(uuid.uuid4())
        # The uuid marks the point the conversation is rewound to afterwards.
        await self._client.query(user_message(content, uuid=self._first_message))
        async for item in self._client.receive_response():
            yield item

    async def _stop_with_loop(self) -> AsyncGenerator[None, None]:
        """Suspended for the process's life: `asyncio.run` closes unfinished async generators
        before it closes its loop, so a process nobody closed is stopped by its own loop."""
        try:
            yield
        finally:
            await self.close()

    def own_result(self, result: sdk.ResultMessage) -> sdk.ResultMessage:
        """The result with this query's cost: the CLI reports the process's running total."""
        total = result.total_cost_usd
        if total is None:
            return result
        own = round(max(total - self._cost_usd, 0.0), 12)  # no float noise from the subtraction
        self._cost_usd = total
        return replace(result, total_cost_usd=own)

    async def rewind(self) -> bool:
        """Empty the conversation, ready for the next query; False when the CLI did not."""
        query = getattr(self._client, "_query", None)
        if query is None or self._first_message is None or self.transport.pid is None:
            return False
        try:
            response = await query._send_control_request(
                {"subtype": "rewind_conversation", "target_message_uuid": self._first_message},
                timeout=_REWIND_TIMEOUT_SECONDS,
            )
        except Exception:
            return False
        return isinstance(response, dict) and response.get("rewound") is True

    async def close(self) -> None:
        """Stop the CLI at once and remove the process's temp dirs. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self.cancel_expiry()
        if not hasattr(self, "_client"):
            self.kill_now()
            return
        self.transport.finished = False  # nothing to save: stop it now
        try:
            with anyio.CancelScope(shield=True), anyio.move_on_after(10):
                await self._client.disconnect()
        finally:
            self.kill_now()

    def kill_now(self) -> None:
        """Synchronous last resort (another event loop, interpreter exit): SIGKILL, remove dirs."""
        self._closed = True
        self.cancel_expiry()
        transport = getattr(self, "transport", None)  # None when start() never ran
        pid = transport.pid if transport is not None else None
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.workdir, ignore_errors=True)
        _LIVE.discard(self)

    def cancel_expiry(self) -> None:
        """Forget the idle timer (the process is in use or closing)."""
        if self.expiry is not None:
            self.expiry.cancel()
            self.expiry = None


class WarmPool:
    """Idle warm processes of one provider: at most `size`, each stopped after `idle_timeout` s."""

    def __init__(self, size: int, idle_timeout: float | None) -> None:
        self.size = size
        self.idle_timeout = idle_timeout
        self._idle: list[WarmProcess] = []  # least recently used first
        self._busy: set[WarmProcess] = set()
        self._closing: set[asyncio.Task[None]] = set()
        self._closed = False

    @property
    def idle(self) -> int:
        """Processes waiting for a query."""
        return len(self._idle)

    def take(self, key: Hashable, spawn: Callable[[], WarmProcess]) -> WarmProcess:
        """An idle process for `key` (the most recently used), else a new one from `spawn`."""
        loop = asyncio.get_running_loop()
        # Made under another event loop (unusable here), or exited while idle (killed from
        # outside): stopped, never handed to a query.
        for proc in [p for p in self._idle if p.loop is not loop or p.transport.pid is None]:
            self._idle.remove(proc)
            proc.kill_now()
        for proc in reversed(self._idle):
            if proc.key == key:
                self._idle.remove(proc)
                proc.cancel_expiry()
                break
        else:
            proc = spawn()
        self._busy.add(proc)
        return proc

    async def give_back(self, proc: WarmProcess, *, reusable: bool) -> None:
        """Return a process after its query: kept warm when `reusable` and rewound, else stopped."""
        self._busy.discard(proc)
        keep = reusable and not self._closed and proc.queries < WARM_MAX_QUERIES
        with anyio.CancelScope(shield=True):
            if keep and (proc.queries == 0 or await proc.rewind()):
                self._idle.append(proc)
                if self.idle_timeout is not None:
                    proc.expiry = proc.loop.call_later(self.idle_timeout, self._expire, proc)
                while len(self._idle) > self.size:
                    await self._idle.pop(0).close()
            else:
                await proc.close()

    def idle_for(self, key: Hashable) -> int:
        """Idle processes ready for queries with this setup."""
        return sum(p.key == key for p in self._idle)

    async def aclose(self) -> None:
        """Stop every process of this pool, idle or serving a query, and wait for them."""
        self._closed = True
        procs = [*self._idle, *self._busy]
        self._idle.clear()
        self._busy.clear()
        with anyio.CancelScope(shield=True):
            for proc in procs:
                await proc.close()
            if self._closing:
                await asyncio.gather(*self._closing, return_exceptions=True)

    def _expire(self, proc: WarmProcess) -> None:
        proc.expiry = None
        if proc in self._idle:
            self._idle.remove(proc)
            task = proc.loop.create_task(proc.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)


async def _no_messages() -> AsyncIterator[dict[str, Any]]:
    return
    yield {}  # pragma: no cover - makes this an (empty) async generator


async def user_message(
    content: str | list[dict[str, Any]], **fields: str
) -> AsyncIterator[dict[str, Any]]:
    """One user message in the CLI's stream-json input, as the SDK's prompt stream."""
    yield {
        "type": "user",
        "message": {"role": "user", "content": content},
        "parent_tool_use_id": None,
        "session_id": "",
        **fields,
    }


#: Every warm process not yet closed, stopped at interpreter exit if nobody closed it.
_LIVE: set[WarmProcess] = set()


@atexit.register
def _kill_leftovers() -> None:
    for proc in list(_LIVE):
        proc.kill_now()
