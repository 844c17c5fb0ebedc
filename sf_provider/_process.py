"""CLI processes: one session type for every query, the transport that stops a process at once,
and the opt-in pool of warm ones.

A warm process serves many queries with the same setup (tools, options, settings), one at a
time. A query whose history is exactly the conversation a process holds continues it: only the
new user turn is sent (ADR 0004). A query without history gets a process rewound to before its
first user message, so it starts from an empty conversation, exactly like a fresh process (ADR
0003). Both are proven from the scripted API's request log (tests/contract/test_warm.py,
tests/contract/test_continuation.py). A process is reused only after a clean result; anything
else (an error, a cancelled or abandoned query, a failed rewind) stops it.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import logging
import os
import shutil
import signal
import uuid
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Hashable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import anyio
import claude_agent_sdk as sdk
from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport

from ._history import TurnRecorder, held_prompt, same_turns
from ._invoke import INTERRUPTS
from .errors import ProcessDiedError

__all__ = ["CLISession", "QueryTransport", "Served", "WarmPool", "stopped", "user_message"]

_logger = logging.getLogger("sf_provider")
_KILL_GRACE_SECONDS = 0.3
#: A warm process is retired after at most this many queries (and `_RUN_LEEWAY`), so nothing
#: can grow without bound (`WarmPool` retires some earlier: its processes never all go at once).
WARM_MAX_QUERIES = 100
#: Queries a process past its limit may still serve to finish an agent run in progress (its
#: conversation waits for tool results): retired then, the run's next step would start afresh.
_RUN_LEEWAY = 10
#: Longest wait for the CLI to rewind a conversation before the process is given up.
_REWIND_TIMEOUT_SECONDS = 5.0


class QueryTransport(SubprocessCLITransport):
    """The SDK's subprocess transport, stopping the CLI at once when its session closes.

    The SDK closes a process gently (end of input, then up to 5 s for the CLI to save its
    session before SIGTERM, which the CLI takes seconds more to honour). A session closes when
    its query is over (answered, failed, cancelled, left early, timed out) or its process is
    retired: nothing is worth saving (sessions are not persisted), so the CLI is stopped right
    away. When everything the CLI writes is in the session's own temp dir (`disposable`, the
    default `isolate=True`), SIGKILL: what the CLI does on SIGTERM (about 0.1 s: it updates its
    config file, removes its session registration and socket) lands in a dir removed next.
    Otherwise SIGTERM, so it tidies the user's dirs, and SIGKILL after a short grace (then its
    session registration and socket there are removed for it: `_remove_registration`).
    """

    #: Whether the CLI's HOME, config dir and TMPDIR are all inside the session's temp dir
    #: (`CLISession.start` sets it): then it is killed without a grace.
    disposable = False
    #: The environment the session gives the CLI over the application's (`CLISession.start`).
    env: Mapping[str, str] = {}
    #: Set when a tool interrupted the query (`CLISession.interrupt`): the CLI was killed on
    #: purpose, so its end is no error and nothing more is written to it.
    interrupted = False
    #: How the CLI ended, once closed: its exit status, negative for the signal that ended it
    #: (-9: SIGKILL); None while it runs or when it never started.
    exit_status: int | None = None

    @property
    def pid(self) -> int | None:
        """The CLI's process id while it runs."""
        process = getattr(self, "_process", None)
        return None if process is None or process.returncode is not None else int(process.pid)

    def exited(self) -> bool:
        """Whether the CLI has exited (or never started), as the system knows it now: asyncio
        sets `returncode` only when its child watcher has run, a loop iteration or more after
        the exit, and a process that died while idle was handed to a query meanwhile (which
        then failed with nothing sent)."""
        pid = self.pid
        if pid is None or not hasattr(os, "waitid"):  # no waitid (macOS): asyncio's word
            return pid is None
        try:  # WNOWAIT: asks without reaping; asyncio's child watcher reaps it
            return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:  # reaped by asyncio's watcher thread, not yet reported
            return True

    async def close(self) -> None:
        process = getattr(self, "_process", None)
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                if self.disposable:
                    process.kill()
                else:
                    # The CLI takes seconds to shut down gracefully: SIGKILL after a grace.
                    process.terminate()
            with anyio.CancelScope(shield=True), anyio.move_on_after(_KILL_GRACE_SECONDS):
                await process.wait()
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                if not self.disposable:  # what it would have removed on exit
                    _remove_registration(int(process.pid), {**os.environ, **self.env})
        await super().close()
        if process is not None:
            self.exit_status = process.returncode
        _close_pipes(process)

    def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        return self._read_unless_interrupted()

    async def _read_unless_interrupted(self) -> AsyncIterator[dict[str, Any]]:
        try:
            async for message in super().read_messages():
                yield message
        except Exception:
            if not self.interrupted:  # else: the kill's exit status, not worth a word
                raise

    async def write(self, data: str) -> None:
        if not self.interrupted:
            await super().write(data)


#: The figures of the CLI's per-model usage that add up over a process's queries (the others,
#: such as `contextWindow` and `maxOutputTokens`, are the model's own).
_RUNNING_FIGURES = frozenset(
    {"inputTokens", "outputTokens", "cacheReadInputTokens", "cacheCreationInputTokens",
     "cacheCreationEphemeral5mInputTokens", "cacheCreationEphemeral1hInputTokens",
     "webSearchRequests", "costUSD", "thinkingTokens"}
)  # fmt: skip


def _own_usage(total: Any, before: Any) -> Any:
    """One model's usage in this query: its running figures less what they were before."""
    if not isinstance(total, dict) or not isinstance(before, dict):
        return total
    own = dict(total)
    for key in _RUNNING_FIGURES & total.keys():
        now, then = total[key], before.get(key, 0)
        if isinstance(now, int | float) and isinstance(then, int | float):
            own[key] = round(max(now - then, 0), 12) if isinstance(now, float) else now - then
    return own


class CLISession:
    """One Claude Code CLI process, serving queries one at a time.

    Every query runs on one: a fresh query on a new session closed afterwards; with
    `warm_processes`, a session is kept after a clean result and serves the next query with the
    same setup (`key`), either by continuing its conversation (the next request's history is
    exactly what the process holds) or, for a query without history, after rewinding it to empty.

    `conversation` is what the model has seen on this process, as Messages API turns with the
    app's tool names (the form `convert_messages` gives a request's history); None when unknown
    (a query is running, or the CLI did something that was not recorded).
    """

    transport: QueryTransport
    _client: sdk.ClaudeSDKClient

    def __init__(
        self,
        key: Hashable,
        workdir: Path,
        stderr: deque[str],
        *,
        bridge: str,
        history: list[dict[str, Any]] | None = None,
    ) -> None:
        self.key = key
        self.workdir = workdir
        self.stderr = stderr
        self.bridge = bridge
        self.loop = asyncio.get_running_loop()
        self.conversation: list[dict[str, Any]] | None = list(history or [])
        # A process started from a transcript holds that history for good; one started empty
        # can be rewound to empty (to the first message sent since it was last empty).
        self.rewindable = not history
        self._rewind_to: str | None = None
        #: The uuid of the newest user message sent, for the rewind (see `rewind`).
        self._last_sent: str | None = None
        #: The CLI's model names (`default` and aliases) -> the model they run, once connected.
        self.models: dict[str, str] = {}
        #: The CLI's model list (its `initialize` answer): names, aliases and what each takes.
        self.model_list: list[dict[str, Any]] = []
        self._context: contextvars.Context | None = None
        self._connected = False
        #: The SDK's connect while the CLI starts (`connect`), cancelled by `close`.
        self._starting: anyio.CancelScope | None = None
        self._start_ended = anyio.Event()
        #: The rewind's control request while it waits for the CLI (`rewind`), cancelled by
        #: `close`: the SDK does not fail the request of a process it stopped.
        self._rewinding: anyio.CancelScope | None = None
        self._closed = False
        self._foreign = False  # in a forked child: the parent's process, never stopped here
        self._cost_usd = 0.0
        #: The CLI's running per-model usage as of the last result (see `own_result`).
        self._model_usage: dict[str, Any] = {}
        self.queries = 0
        #: Queries after which a warm pool retires this process (`WarmPool` sets it).
        self.max_queries = WARM_MAX_QUERIES
        #: A new process for this setup without history, started when the pool retires this
        #: one (`WarmPool.take` sets it); None when nothing can start one.
        self.renew: Callable[[], CLISession | None] | None = None
        #: Why the application stopped this process while it served a query (the provider
        #: was closed), for that query's error; None otherwise.
        self.stopped_by: str | None = None
        self.expiry: asyncio.TimerHandle | None = None
        self._keeper: AsyncGenerator[None, None] | None = None
        #: What a tool raised to stop the query (`interrupt`), raised again by `messages`.
        self._interrupted: BaseException | None = None
        _LIVE.add(self)

    def start(self, options: sdk.ClaudeAgentOptions) -> None:
        """Set the CLI options; the process starts with the first query."""
        self.transport = QueryTransport(prompt=_no_messages(), options=options)
        self.transport.disposable = _inside(self.workdir, options.env)
        self.transport.env = options.env
        self._client = sdk.ClaudeSDKClient(options, transport=self.transport)

    @property
    def started(self) -> bool:
        """Whether the CLI was started (by an earlier query or `connect`)."""
        return self._connected

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
            # `close` cancels it: the SDK does not fail an `initialize` whose process it
            # stopped, and would wait out its 60 s start-up limit.
            starting = self._starting = anyio.CancelScope()
            try:
                with starting:
                    await self._client.connect()
            except Exception as exc:
                # The SDK's initialize timeout (60 s) is a bare Exception; anything else is
                # raised as it is.
                if type(exc) is not Exception or "initialize" not in str(exc):
                    raise
                raise sdk.CLIConnectionError(
                    f"the CLI started but never answered the SDK's initialize request ({exc}): "
                    f"it hung before its first message"
                ) from exc
            finally:
                self._starting = None
                self._start_ended.set()
            if starting.cancelled_caught:
                raise sdk.CLIConnectionError("the CLI was stopped while it started")
            info = await self._client.get_server_info() or {}
            self.model_list = [m for m in info.get("models") or [] if isinstance(m, dict)]
            for model in self.model_list:
                if isinstance(model, dict) and model.get("value") and model.get("resolvedModel"):
                    self.models[str(model["value"])] = str(model["resolvedModel"])

    async def messages(
        self,
        prompt: list[dict[str, Any]],
        check: Callable[[list[dict[str, Any]]], None] | None = None,
    ) -> AsyncGenerator[Any, None]:
        """Send one user turn and yield the SDK messages up to and including the result.

        `check` sees the CLI's model list once the process is connected, before the turn is
        sent, and may raise to refuse it.

        The conversation becomes known again only when the result arrived and everything the
        CLI added to it was recorded.
        """
        await self.connect()
        if check is not None:
            check(self.model_list)  # may refuse the query: nothing was sent yet
        self.queries += 1
        self._context = contextvars.copy_context()
        self._context.run(INTERRUPTS.set, self.interrupt)
        before, self.conversation = self.conversation, None
        message_uuid = str(uuid.uuid4())
        if not before:
            self._rewind_to = message_uuid  # where a rewind empties the conversation again
        self._last_sent = message_uuid
        recorder = TurnRecorder(self.bridge)
        await self._client.query(user_message(prompt, uuid=message_uuid))
        try:
            async for item in self._client.receive_response():
                if self._interrupted is not None:
                    break
                if isinstance(item, sdk.ConversationResetMessage):
                    self._cost_usd, self._model_usage = 0.0, {}  # the CLI's totals start again
                if isinstance(item, sdk.ResultMessage):
                    if before is not None and recorder.complete:
                        turn = {"role": "user", "content": held_prompt(prompt)}
                        self.conversation = [*before, turn]
                        self.conversation += recorder.turns
                else:
                    recorder.add(item)
                yield item
        except Exception:
            if self._interrupted is None:
                raise
        if self._interrupted is not None:
            raise self._interrupted

    def interrupt(self, exc: BaseException) -> None:
        """A tool of the running query raised `exc` (a `KeyboardInterrupt`, say): stop the CLI
        now; `messages` raises `exc` in the query's own task, which then closes this session.

        Called in the tool's task (see `INTERRUPTS`), never raising: the exception must not
        escape that task, or asyncio would re-raise it out of the event loop.
        """
        if self._interrupted is None:
            self._interrupted = exc
        self.conversation = None
        transport = getattr(self, "transport", None)
        if transport is None:
            return
        transport.interrupted = True
        pid = transport.pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # its end of output wakes the query

    async def _stop_with_loop(self) -> AsyncGenerator[None, None]:
        """Suspended for the process's life: `asyncio.run` closes unfinished async generators
        before it closes its loop, so a process nobody closed is stopped by its own loop."""
        try:
            yield
        finally:
            await self.close()

    def own_result(self, result: sdk.ResultMessage) -> sdk.ResultMessage:
        """The result with this query's cost and per-model usage: the CLI reports the process's
        running totals."""
        if result.model_usage is not None:  # else the baseline stays for the next result
            before, self._model_usage = self._model_usage, result.model_usage
            usage = {model: _own_usage(figures, before.get(model, {}))
                     for model, figures in result.model_usage.items()}  # fmt: skip
            result = replace(result, model_usage=usage)
        total = result.total_cost_usd
        if total is None:
            return result
        own = round(max(total - self._cost_usd, 0.0), 12)  # no float noise from the subtraction
        self._cost_usd = total
        return replace(result, total_cost_usd=own)

    async def rewind(self) -> bool:
        """Empty the conversation, ready for a query without history; False when it cannot be.

        Uses the CLI's `rewind_conversation` control request (ADR 0003) through the SDK's
        private `Query._send_control_request`; listed in tests/unit/test_private_apis.py.
        `last_seen_user_message_uuid` names the newest user message we sent: without it the CLI
        refuses ("stale_target") to rewind past a later user text turn, so a process that had
        served a chat with follow-up questions was stopped instead of reused.
        """
        if self.conversation == [] and self.rewindable:
            return True
        query = getattr(self._client, "_query", None)
        target = self._rewind_to
        if not self.rewindable or target is None or query is None or not self.transport.pid:
            return False
        response = None
        try:
            with anyio.CancelScope() as self._rewinding:
                response = await query._send_control_request(
                    {
                        "subtype": "rewind_conversation",
                        "target_message_uuid": target,
                        "last_seen_user_message_uuid": self._last_sent or target,
                    },
                    timeout=_REWIND_TIMEOUT_SECONDS,
                )
        except Exception:
            return False
        finally:
            self._rewinding = None
        if not (isinstance(response, dict) and response.get("rewound") is True):
            return False
        self.conversation, self._rewind_to, self._last_sent = [], None, None
        return True

    async def close(self) -> None:
        """Stop the CLI at once and remove the process's temp dirs. Safe to call twice.

        The dirs are removed in a worker thread (a few to tens of milliseconds on a loaded
        disk): meanwhile the event loop serves other queries' streams (a gateway's clients)."""
        if self._closed:
            return
        self._closed = True
        self.cancel_expiry()
        try:
            with anyio.CancelScope(shield=True):
                if self._starting is not None:  # a query (or the pool) waits for the start
                    self._starting.cancel()
                    await self._start_ended.wait()  # the SDK disconnects it then
                if self._rewinding is not None:  # a query waits for the rewind: no answer now
                    self._rewinding.cancel()
                if hasattr(self, "_client"):
                    with anyio.move_on_after(10):
                        await self._client.disconnect()
                self._kill()  # nothing writes to the dir while it is removed
                await anyio.to_thread.run_sync(shutil.rmtree, self.workdir, True)
        finally:
            self.kill_now()  # what is left: all of it when the thread could not run

    def stop_soon(self) -> None:
        """Stop from synchronous code (a finalizer): closed on its own event loop when that
        loop runs this thread, so the SDK's tasks end too; else at once (`kill_now`)."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop and not self._closed:
            task = self.loop.create_task(self.close())
            _STOPPING.add(task)
            task.add_done_callback(_STOPPING.discard)
        else:
            self.kill_now()

    def disown(self) -> None:
        """Never stop this process or remove its dir from here (it belongs to another process,
        the parent of a fork)."""
        self._closed = self._foreign = True
        self.expiry = None  # the timer belongs to the parent's loop

    def kill_now(self) -> None:
        """Synchronous last resort (another event loop, interpreter exit): SIGKILL, remove dirs."""
        if self._foreign:
            return
        self._closed = True
        self.cancel_expiry()
        self._kill()
        shutil.rmtree(self.workdir, ignore_errors=True)
        _LIVE.discard(self)

    def _kill(self) -> None:
        """SIGKILL the CLI if it still runs, and close its pipes."""
        transport = getattr(self, "transport", None)  # None when start() never ran
        pid = transport.pid if transport is not None else None
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if transport is not None:
            _close_pipes(getattr(transport, "_process", None))

    def cancel_expiry(self) -> None:
        """Forget the idle timer (the process is in use or closing)."""
        if self.expiry is not None:
            self.expiry.cancel()
            self.expiry = None


#: How a process serves a query: `fresh`, a new one; `warm`, a started one without history
#: (emptied); `continued`, one that holds the request's history and gets only its new turn.
Served = Literal["fresh", "warm", "continued"]


class _Replacement:
    """A retired process's replacement while it starts, and the query waiting for it, if any."""

    def __init__(self, key: Hashable) -> None:
        self.key = key
        #: Where it starts: only a query of this event loop can use it (or be woken from it).
        self.loop = asyncio.get_running_loop()
        self.waiter: _Waiter | None = None


class _Waiter:
    """A query waiting for a replacement (`WarmPool.take`): woken when the replacement is
    handed to it (`handed`), failed, or when a process of its setup was parked meanwhile."""

    def __init__(self) -> None:
        self.woken = asyncio.Event()
        self.handed: CLISession | None = None


class WarmPool:
    """The warm processes of one provider: at most `size` (idle and busy together are only
    exceeded by concurrent queries), least recently used first out, each stopped after
    `idle_timeout` s unused, and retired after its `max_queries`, when a replacement starts
    at once, in the background.

    Queries without history take the least recently used process, so the processes of a busy
    pool age alike: with one limit for all, processes started together (the first burst of
    queries) were all retired within a few queries of each other, and the next queries all
    waited for new processes starting at once. A process started beside n others is retired
    after `WARM_MAX_QUERIES` less (size - 1 - n) steps of WARM_MAX_QUERIES / (2 size) queries:
    those started together go one at a time, and each replacement, started into a pool at full
    strength, gets the whole limit, so the retirements stay spread out. Without the replacement,
    a pool that retired processes under light load had shrunk when the load rose, and the
    next burst of queries waited for several processes starting at once. A process whose
    conversation waits for tool results (an agent run in progress) is kept past its limit, by
    at most `_RUN_LEEWAY` queries, so that the run's next step continues on it.

    A query without history that finds no process while a replacement for its setup starts
    waits for that replacement (one query per replacement) instead of starting its own: the
    replacement started earlier, so it is ready sooner, and the pool keeps its size (with every
    process busy, the query's own start was one process too many). A process of its setup
    parked meanwhile serves it instead, unless its conversation waits for tool results (that
    run's next step is on its way: with a replacement coming, the pool is not full for the
    query). A replacement that fails to start sends its waiter back to the pool, and then to a
    process of its own, which fails as any fresh start does. The wait has no clock of its own:
    the query's `timeout` bounds it, as it bounds the whole query (a cancelled wait leaves the
    replacement to the pool); without one, a start is bounded as every start is (the SDK's
    initialize timeout).
    """

    def __init__(self, size: int, idle_timeout: float | None) -> None:
        self.size = size
        self.idle_timeout = idle_timeout
        self._idle: list[CLISession] = []  # least recently used first
        self._busy: set[CLISession] = set()
        #: Replacements starting (their processes are busy meanwhile), oldest first.
        self._starting: list[_Replacement] = []
        #: Closes and replacements running in the background, waited for by `aclose`.
        self._closing: set[asyncio.Task[None]] = set()
        self._closed = False

    @property
    def idle(self) -> int:
        """Processes waiting for a query."""
        return len(self._idle)

    async def take(
        self,
        key: Hashable,
        history: list[dict[str, Any]],
        spawn: Callable[[], CLISession],
        renew: Callable[[], CLISession | None] | None = None,
    ) -> tuple[CLISession, Served]:
        """A process for a query with this setup and history, busy until `give_back`, and how
        it serves the query (`Served`). `renew` starts a process for this setup without history
        (its replacement when it is retired).

        In order: the process whose conversation is exactly `history`, as JSON (`same_turns`),
        continued; for a query without history, an empty process, else the least recently used
        one rewound to empty (one waiting for tool results only when the pool is full and no
        replacement is coming), else a replacement of a retired process that is starting,
        waited for (see the class): warm; else a new one from `spawn`: fresh.
        """
        # With a replacement on its way, the pool is not full for this query.
        coming = not history and self._unclaimed(key) is not None
        found = await self._choose(key, history, patient=coming)
        if found is None and not history:
            found = await self._await_replacement(key)
        served: Served = "continued" if history else "warm"
        if found is None:
            found, served = spawn(), "fresh"
            found.max_queries = self._query_limit()
            self._busy.add(found)
        found.renew = renew
        return found, served

    async def _choose(
        self, key: Hashable, history: list[dict[str, Any]], *, patient: bool
    ) -> CLISession | None:
        """An idle process for the query (see `take`), made busy; None when there is none.

        `patient`: a replacement is on its way to this query, so the pool is never full for
        it, and a conversation waiting for tool results is left to the run it belongs to.
        """
        loop = asyncio.get_running_loop()
        # Made under another event loop (unusable here), or exited while idle (killed from
        # outside): stopped, never handed to a query.
        for proc in [p for p in self._idle if p.loop is not loop or p.transport.exited()]:
            self._idle.remove(proc)
            proc.kill_now()
        mine = [p for p in self._idle if p.key == key]
        found = next((p for p in reversed(mine) if same_turns(p.conversation, history)), None)
        if found is not None:
            self._idle.remove(found)
            found.cancel_expiry()
            self._busy.add(found)
            return found
        if history:
            return None
        # A conversation waiting for tool results is an agent run in progress: taken only
        # when the pool is full. One that ended with an answer is most likely over.
        full = not patient and len(self._idle) + len(self._busy) >= self.size
        spare = [p for p in mine if p.rewindable and (full or not _awaits_results(p))]
        for proc in sorted(spare, key=_awaits_results):
            if proc not in self._idle:
                continue  # taken by another query while an earlier one rewound
            self._idle.remove(proc)
            proc.cancel_expiry()
            # Busy while it rewinds, so aclose() sees it; a cancel meanwhile leaves it in
            # an unknown state: stopped, never lost between the two lists.
            self._busy.add(proc)
            try:
                rewound = await proc.rewind()
            except BaseException:
                self._busy.discard(proc)
                with anyio.CancelScope(shield=True):
                    await proc.close()
                raise
            if rewound:
                return proc
            self._busy.discard(proc)
            await proc.close()
            if proc.stopped_by:  # by the application (aclose) meanwhile: the query ends too
                raise stopped(proc.stopped_by, proc.stderr)
        return None

    async def _await_replacement(self, key: Hashable) -> CLISession | None:
        """Wait for a starting replacement of this setup that no other query waits for (see
        the class), or for a process of this setup parked first; None when there is no such
        replacement, or it failed to start and no process is idle for the query. A cancel
        leaves the replacement to the pool.
        """
        replacement = self._unclaimed(key)
        if replacement is None:
            return None
        waiter = replacement.waiter = _Waiter()
        try:
            while replacement in self._starting:
                await waiter.woken.wait()
                waiter.woken.clear()
                handed, waiter.handed = waiter.handed, None
                if handed is not None:
                    return handed
                if replacement in self._starting:  # a process was parked: taken if it fits
                    found = await self._choose(key, [], patient=True)
                    if found is not None:
                        return found
            # It failed to start: what the pool holds now, else the query starts its own.
            return await self._choose(key, [], patient=False)
        finally:
            if replacement.waiter is waiter:
                replacement.waiter = None
            if waiter.handed is not None:  # handed over while this query took another, or left
                spare, waiter.handed = waiter.handed, None
                with anyio.CancelScope(shield=True):
                    await self.give_back(spare, reusable=True)

    def _unclaimed(self, key: Hashable) -> _Replacement | None:
        """The oldest starting replacement of this setup and event loop that no query waits
        for."""
        loop = asyncio.get_running_loop()
        mine = (r for r in self._starting if r.key == key and r.loop is loop)
        return next((r for r in mine if r.waiter is None), None)

    async def give_back(self, proc: CLISession, *, reusable: bool) -> None:
        """Return a process after its query: kept when `reusable` (a clean result), else stopped.

        Decided without waiting, so a pool closing meanwhile never parks a process.
        """
        self._busy.discard(proc)
        due = proc.queries >= proc.max_queries and not (
            _awaits_results(proc) and proc.queries < proc.max_queries + _RUN_LEEWAY
        )
        keep = reusable and not self._closed and not due and proc.conversation is not None
        evicted: list[CLISession] = []
        if reusable and not self._closed and due:
            self._replace(proc)
        if keep:
            self._idle.append(proc)
            if self.idle_timeout is not None:
                proc.expiry = proc.loop.call_later(self.idle_timeout, self._expire, proc)
            while len(self._idle) > self.size:
                evicted.append(self._idle.pop(0))
            for replacement in self._starting:  # a query waiting there may take this one
                waiter, loop = replacement.waiter, replacement.loop
                if waiter is not None and replacement.key == proc.key and loop is proc.loop:
                    waiter.woken.set()
        else:
            evicted.append(proc)
        with anyio.CancelScope(shield=True):
            for old in evicted:
                await _stop(old)

    def _replace(self, retired: CLISession) -> None:
        """Start the replacement of a process retired by its query limit, in the background.
        Known to `take` from now on (`_starting`), so a query can wait for it at once."""
        if retired.renew is None:
            return
        replacement = _Replacement(retired.key)
        self._starting.append(replacement)
        task = asyncio.get_running_loop().create_task(self._start(replacement, retired.renew))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)
        # A task cancelled before it ran (its loop ended) never reached its `finally`.
        task.add_done_callback(lambda _task: self._settle(replacement))

    async def _start(
        self, replacement: _Replacement, renew: Callable[[], CLISession | None]
    ) -> None:
        """Start a new process and hand it to the query waiting for it, else keep it idle. A
        process that fails to start is stopped, with a warning on the `sf_provider` logger;
        its waiter, and the next query that needs one, start their own (and fail with the
        error, if it is not passing)."""
        proc: CLISession | None = None
        ready = False
        try:
            try:
                proc = renew()
            except Exception as exc:
                _logger.warning("a retired warm process was not replaced: %s", exc)
                return
            if proc is None:
                return  # its provider is gone
            proc.max_queries = self._query_limit()
            self._busy.add(proc)  # aclose() stops it while it starts
            try:
                await proc.connect()
                ready = True
            except Exception as exc:
                if not self._closed:  # else: stopped by aclose() while it started
                    tail = "".join(f"\n{line}" for line in proc.stderr)
                    _logger.warning(
                        "a retired warm process's replacement failed to start: %s%s", exc, tail
                    )
        finally:
            waiter = replacement.waiter
            if proc is not None and ready and waiter is not None and not self._closed:
                waiter.handed, proc = proc, None  # stays busy: the waiting query's now
            self._settle(replacement)
            if proc is not None:
                await self.give_back(proc, reusable=ready)

    def _settle(self, replacement: _Replacement) -> None:
        """The replacement is ready or failed: no longer waited for; its waiter is woken."""
        if replacement in self._starting:
            self._starting.remove(replacement)
        if replacement.waiter is not None:
            replacement.waiter.woken.set()

    def _query_limit(self) -> int:
        """The query limit of a process starting now, beside the pool's others (see the class)."""
        size = max(self.size, 1)
        others = min(len(self._idle) + len(self._busy), size - 1)
        return WARM_MAX_QUERIES - (size - 1 - others) * (WARM_MAX_QUERIES // (2 * size))

    def idle_for(self, key: Hashable) -> int:
        """Idle processes ready for queries with this setup and no history."""
        return sum(p.key == key and p.conversation == [] for p in self._idle)

    def kill_idle(self) -> None:
        """Stop the idle processes from synchronous code (the provider was garbage collected:
        nothing can use them any more). Queries still running hold the provider alive."""
        self._closed = True
        idle, self._idle = self._idle, []
        for proc in idle:
            proc.stop_soon()

    async def aclose(self) -> None:
        """Stop every process of this pool, idle or serving a query, and wait for them."""
        self._closed = True
        procs = [*self._idle, *self._busy]
        self._idle.clear()
        self._busy.clear()
        await stop_all(procs, PROVIDER_CLOSED)
        if self._closing:
            with anyio.CancelScope(shield=True):
                await asyncio.gather(*self._closing, return_exceptions=True)

    def _expire(self, proc: CLISession) -> None:
        proc.expiry = None
        if proc in self._idle:
            self._idle.remove(proc)
            task = proc.loop.create_task(proc.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)


#: Why a query fails when its provider is closed while it runs (`CLISession.stopped_by`).
PROVIDER_CLOSED = "the provider was closed (aclose) while this query ran"


def stopped(reason: str, stderr: Iterable[str]) -> ProcessDiedError:
    """The error of a query whose process the application stopped (`CLISession.stopped_by`)
    before the query finished."""
    return ProcessDiedError(
        f"{reason}: its CLI was stopped before the query finished", stderr="\n".join(stderr)
    )


async def stop_all(procs: Iterable[CLISession], reason: str) -> None:
    """Stop `procs` now; a query one of them serves fails with `reason`. One another task is
    already stopping is killed, not waited for: that task may never run again (a server's
    event loop ends right after its shutdown, and the process with it)."""
    procs = list(procs)
    for proc in procs:
        proc.stopped_by = proc.stopped_by or reason
    with anyio.CancelScope(shield=True):
        for proc in procs:
            await _stop(proc)
    loop = asyncio.get_running_loop()
    for proc in procs:
        if proc in _LIVE and proc.loop is loop:
            proc.kill_now()


async def _stop(proc: CLISession) -> None:
    """Stop `proc` from the running event loop. A process of another loop (one provider used
    from two threads' loops) is never awaited from here: its SDK objects belong to that loop,
    and waiting on them hung until it ended. It is closed on its own loop while that runs, else
    killed at once."""
    if proc.loop is asyncio.get_running_loop():
        await proc.close()
    elif proc.loop.is_running() and not proc.loop.is_closed():
        try:
            proc.loop.call_soon_threadsafe(proc.stop_soon)
        except RuntimeError:  # closed meanwhile
            proc.kill_now()
    else:
        proc.kill_now()


def _close_pipes(process: Any) -> None:
    """Close the asyncio transport of a CLI process (anyio's `Process._process._transport`,
    listed in tests/unit/test_private_apis.py). The SDK drops its process without closing it;
    one left to the garbage collector after its loop closed complains ("Event loop is
    closed"). Closing it with the loop already closed is harmless and ends that."""
    pipes = getattr(getattr(process, "_process", None), "_transport", None)
    if pipes is not None:
        with contextlib.suppress(RuntimeError):
            pipes.close()


def _remove_registration(pid: int, env: Mapping[str, str]) -> None:
    """Remove what a CLI killed before it could exit registers in the user's dirs: its session
    registration (`<config dir>/sessions/<pid>.json` and `<pid>.<hash>.key`) and its socket
    (`$TMPDIR/cc-socks/<pid>.sock`). It removes them itself on SIGTERM, given the time."""
    config = env.get("CLAUDE_CONFIG_DIR") or os.path.join(env.get("HOME") or "~", ".claude")
    tmp = env.get("TMPDIR") or env.get("TMP") or env.get("TEMP") or "/tmp"
    sessions = Path(config).expanduser() / "sessions"
    for path in [*sessions.glob(f"{pid}.*"), Path(tmp) / "cc-socks" / f"{pid}.sock"]:
        with contextlib.suppress(OSError):
            path.unlink()


def _inside(workdir: Path, env: dict[str, str]) -> bool:
    """Whether the CLI's HOME, config dir and TMPDIR (from its environment) are all inside
    `workdir`: then every file it writes is removed with that dir."""
    names = ("HOME", "CLAUDE_CONFIG_DIR", "TMPDIR")
    return all(name in env and Path(env[name]).is_relative_to(workdir) for name in names)


def _awaits_results(proc: CLISession) -> bool:
    """Whether the process's conversation ends with tool calls waiting for their results."""
    turns = proc.conversation or []
    last = turns[-1] if turns else {}
    return last.get("role") == "assistant" and any(
        block.get("type") == "tool_use" for block in last.get("content", [])
    )


async def _no_messages() -> AsyncIterator[dict[str, Any]]:
    return
    yield {}  # pragma: no cover - makes this an (empty) async generator


async def user_message(
    content: str | list[dict[str, Any]], **fields: str
) -> AsyncIterator[dict[str, Any]]:
    """One user message in the CLI's stream-json input, as the SDK's prompt stream.

    `text_not_typed` (the CLI's mark for text an app composed, not a person at its prompt)
    delivers the text as written: without it a message starting with `/` ran as a Claude Code
    command (`/init`, `/model`, `/clear`, ...) instead of reaching the model
    (docs/adr/0007, tests/contract/test_hostile_input.py)."""
    yield {
        "type": "user",
        "message": {"role": "user", "content": content},
        "parent_tool_use_id": None,
        "session_id": "",
        "text_not_typed": True,
        **fields,
    }


#: Every warm process not yet closed, stopped at interpreter exit if nobody closed it.
_LIVE: set[CLISession] = set()
#: Closes started by `CLISession.stop_soon`, kept until done.
_STOPPING: set[asyncio.Task[None]] = set()


@atexit.register
def _kill_leftovers() -> None:
    for proc in list(_LIVE):
        proc.kill_now()


def _forget_in_child() -> None:
    """A forked child shares nothing it may stop: the processes and their dirs are the
    parent's, so the child's exit (atexit, its event loop's end) must leave them alone."""
    for proc in list(_LIVE):
        proc.disown()
    _LIVE.clear()


os.register_at_fork(after_in_child=_forget_in_child)
