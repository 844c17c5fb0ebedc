"""Sync entry points of the adapters (LangChain's `invoke`/`stream`, LiteLLM's `completion`):
the async path on an event loop of its own, in a worker thread when the caller's thread already
runs one. A worker thread runs in a copy of the caller's context (contextvars), as the caller's
own thread would: the query's trace span nests under the application's current span."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Literal, TypeVar

__all__ = ["iterate_in_thread", "run_sync"]

_T = TypeVar("_T")


def run_sync(make: Callable[[], Awaitable[_T]]) -> _T:
    """Run a coroutine to the end from sync code, on a fresh loop (in a thread if one runs).

    In a thread, an exception that stops the caller's wait (Ctrl-C in a notebook, whose
    thread runs an event loop) cancels the coroutine, which stops the query's CLI, instead of
    leaving the caller waiting for the query's end."""

    async def main() -> _T:
        return await make()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())

    async def once() -> AsyncIterator[_T]:
        yield await make()

    returned = list(iterate_in_thread(once))  # to its end: the thread has ended too
    if not returned:  # cancelled in its thread before it returned
        raise asyncio.CancelledError
    return returned[0]


def iterate_in_thread(make: Callable[[], AsyncIterator[_T]]) -> Iterator[_T]:
    """Iterate an async iterator from sync code: one task on a fresh loop in a worker thread.

    One task consumes the whole iterator (the provider's cancel scopes must not change task);
    leaving the loop early cancels that task, which stops the query's CLI.
    """
    items: queue.Queue[tuple[Literal["item", "error", "done"], Any]] = queue.Queue()
    started = threading.Event()
    handle: dict[str, Any] = {}

    async def pump() -> None:
        handle["loop"] = asyncio.get_running_loop()
        handle["task"] = asyncio.current_task()
        started.set()
        try:
            iterator = make()
            async for item in iterator:
                items.put(("item", item))
        except asyncio.CancelledError:
            items.put(("done", None))
        except BaseException as exc:
            items.put(("error", exc))
        else:
            items.put(("done", None))

    context = contextvars.copy_context()
    thread = threading.Thread(
        target=context.run, args=(asyncio.run, pump()), name="sf-provider-sync"
    )
    thread.start()
    started.wait()
    try:
        while True:
            kind, value = items.get()
            if kind == "item":
                yield value
            elif kind == "error":
                raise value
            else:
                return
    finally:
        if thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop may have closed meanwhile
                handle["loop"].call_soon_threadsafe(handle["task"].cancel)
        thread.join()
