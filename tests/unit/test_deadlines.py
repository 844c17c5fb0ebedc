"""A query's timeouts (`provider._Deadlines`): the whole-query timeout is one clock from the
query's start, shared by the wait for a process and the waits for the CLI's messages; the idle
timeout counts only the CLI's silence once it serves the query."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import anyio
import anyio.lowlevel
import pytest

from sf_provider.provider import _Deadlines

pytestmark = pytest.mark.anyio


async def one_message() -> AsyncGenerator[str, None]:
    """A CLI whose message is ready at once (after one trip through the event loop)."""
    await anyio.lowlevel.checkpoint()
    yield "message"


async def test_time_spent_getting_a_process_is_not_given_again_to_the_messages() -> None:
    clock = _Deadlines(timeout=0.5, idle_timeout=60.0)
    with clock.before_first_message() as waiting:
        await anyio.sleep_forever()  # a process that takes longer than the whole timeout
    assert waiting.cancelled_caught
    # Nothing left: a clock started afresh here would have given the message 0.5 s.
    assert await clock.next(one_message()) is None
    error = clock.expired()
    assert (error.kind, error.seconds) == ("timeout", 0.5)
    assert "the CLI was stopped" in str(error)


async def test_a_timeout_before_the_query_has_a_process_says_so() -> None:
    clock = _Deadlines(timeout=0.2, idle_timeout=None)
    with clock.before_first_message():
        await anyio.sleep_forever()
    error = clock.expired()
    assert (error.kind, error.seconds) == ("timeout", 0.2)
    assert "timeout=0.2 s; it was still waiting for a CLI process to serve it" in str(error)


async def test_the_idle_timeout_does_not_bound_the_wait_for_a_process() -> None:
    clock = _Deadlines(timeout=None, idle_timeout=0.01)
    with clock.before_first_message() as waiting:
        await anyio.sleep(0.1)  # ten idle timeouts
    assert not waiting.cancelled_caught
