"""What a tool raises besides an `Exception`, through the real CLI: nothing escapes as a group,
nothing leaks.

- `SystemExit` (argparse and click tools exit on bad input) in an executor or a gate is the
  call's failure: an error result naming it and its exit code, and the query goes on.
- An exception whose message cannot be read (its `__str__` raises) is a failure like any
  other: an error result naming its type, and the query goes on.
- `KeyboardInterrupt` (or `GeneratorExit`, any `BaseException` that is not a cancellation)
  stops the query: the CLI is stopped and the query's dir removed, then the original exception
  is raised to the caller as itself.
- Sync executors run in daemon threads: a hung one times out with the named error result, sees
  `current_call().cancelled` set, and never keeps the interpreter from exiting; an interpreter
  that exits mid-query leaves no CLI and no dir behind.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import cli_processes, leftover_query_dirs, no_cli_left

from sf_provider import (
    ClaudeAgentProvider,
    FunctionTool,
    GateDecision,
    GateRequest,
    ToolRegistry,
    current_call,
)
from sf_provider.testing import RecordedRequest, ScriptedMessagesAPI, reply, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.cli]


def call_then_done(name: str = "tool") -> list[Any]:
    return [reply(tool_use(name, {})), reply(text("done"))]


def tool_result(request: RecordedRequest) -> tuple[str, bool]:
    """(text, is_error) of the one tool_result of `request`."""
    [block] = request.tool_results()
    [body] = request.tool_result_texts()
    return body, bool(block.get("is_error"))


def raiser(exc: BaseException, raised: list[BaseException]) -> Callable[[dict[str, Any]], Any]:
    def executor(arguments: dict[str, Any]) -> Any:
        raised.append(exc)
        raise exc

    return executor


def async_raiser(
    exc: BaseException, raised: list[BaseException]
) -> Callable[[dict[str, Any]], Any]:
    async def executor(arguments: dict[str, Any]) -> Any:
        raised.append(exc)
        raise exc

    return executor


def argparse_tool(arguments: dict[str, Any]) -> str:
    import argparse

    parser = argparse.ArgumentParser(prog="report")
    parser.add_argument("--year", type=int, required=True)
    parser.parse_args([])  # no --year: prints usage to stderr and calls sys.exit(2)
    return "unreachable"


# --------------------------------------------------------------------------- CancelledError


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_cancelled_error_no_one_asked_for_is_an_error_result_and_the_bridge_lives(
    kind: str,
) -> None:
    # Raised by the tool (leaked from a library), not a cancellation of the call: re-raised, it
    # ended the bridge's task, failed every later call and was kept warm for the next query.
    raised: list[BaseException] = []
    make = raiser if kind == "sync" else async_raiser
    failing = FunctionTool(name="tool", executor=make(asyncio.CancelledError(), raised))
    fine = FunctionTool(name="fine", executor=lambda arguments: "fine")
    script = [
        reply(tool_use("tool", {})),
        reply(tool_use("fine", {})),
        reply(text("done")),
        reply(tool_use("fine", {})),
        reply(text("done again")),
    ]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=1))
        first = await provider.generate("go", tools=[failing, fine])
        second = await provider.generate("again", tools=[failing, fine])
        await provider.aclose()
    assert (first.text, second.text) == ("done", "done again")
    assert second.provider_details["process"] == "warm"
    last = [(r.text, r.is_error) for r in (api.requests[i].results()[-1] for i in (1, 2, 4))]
    assert last == [("Tool 'tool' failed: CancelledError", True), ("fine", False), ("fine", False)]
    await no_cli_left()
    assert leftover_query_dirs() == []


# --------------------------------------------------------------------------- SystemExit


class AsyncCallable:
    """An executor object with an `async def __call__` (not a coroutine function itself)."""

    def __init__(self, exc: BaseException, raised: list[BaseException]) -> None:
        self.run = async_raiser(exc, raised)

    async def __call__(self, arguments: dict[str, Any]) -> Any:
        return await self.run(arguments)


@pytest.mark.parametrize("kind", ["sync", "async", "argparse", "async-callable", "coroutine"])
async def test_sys_exit_in_an_executor_is_an_error_result_and_the_query_goes_on(kind: str) -> None:
    # "async-callable" and "coroutine" (a lambda returning a coroutine): the coroutine is
    # awaited after the executor returned it, and its SystemExit stopped the query and was
    # raised from generate(), as an interrupt.
    raised: list[BaseException] = []
    coroutine_of = async_raiser(SystemExit(3), raised)
    executor = {
        "sync": raiser(SystemExit(3), raised),
        "async": async_raiser(SystemExit(3), raised),
        "argparse": argparse_tool,
        "async-callable": AsyncCallable(SystemExit(3), raised),
        "coroutine": lambda arguments: coroutine_of(arguments),
    }[kind]
    code = 2 if kind == "argparse" else 3
    async with ScriptedMessagesAPI(call_then_done()) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        result = await provider.generate("go", tools=[FunctionTool(name="tool", executor=executor)])
    assert result.text == "done"
    assert len(api.requests) == 2
    assert tool_result(api.requests[1]) == (
        f"Tool 'tool' failed: SystemExit: exit code {code}",
        True,
    )
    await no_cli_left()
    assert cli_processes() == []
    assert leftover_query_dirs() == []


async def test_sys_exit_in_a_gate_denies_the_call_and_the_query_goes_on() -> None:
    ran: list[dict[str, Any]] = []

    def gate(request: GateRequest) -> GateDecision:
        raise SystemExit(4)

    tool = FunctionTool(name="tool", executor=ran.append, mutating=True)
    async with ScriptedMessagesAPI(call_then_done()) as api:
        provider = ClaudeAgentProvider(
            api.settings(warm_processes=0), registry=ToolRegistry([tool], gate=gate)
        )
        result = await provider.generate("go")
    assert result.text == "done"
    assert tool_result(api.requests[1]) == (
        "Tool 'tool' was denied by the safety gate: the gate failed (SystemExit: exit code 4)",
        True,
    )
    assert ran == []


# --------------------------------------------------------------------------- unprintable exceptions


class Unprintable(Exception):
    """An exception whose `__str__` fails, as one whose `__init__` skipped `super().__init__`
    and whose message names an attribute it never set."""

    detail: str  # never set

    def __init__(self, code: int) -> None:
        self.code = code

    def __str__(self) -> str:
        return f"{self.code}: {self.detail}"


async def test_an_exception_whose_message_cannot_be_read_is_an_error_result() -> None:
    # Reading its message raised AttributeError inside the failure handling: that escaped the
    # invocation layer as an interrupt, stopped the query and was raised from generate().
    raised: list[BaseException] = []

    def gate(request: GateRequest) -> GateDecision:
        raise Unprintable(3)

    tools = [
        FunctionTool(name="sync", executor=raiser(Unprintable(1), raised)),
        FunctionTool(name="async", executor=async_raiser(Unprintable(2), raised)),
        FunctionTool(name="gated", executor=raiser(Unprintable(4), raised), mutating=True),
    ]
    script = [*(reply(tool_use(t.name, {})) for t in tools), reply(text("done"))]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(
            api.settings(warm_processes=0), registry=ToolRegistry(tools, gate=gate)
        )
        result = await provider.generate("go")
    assert result.text == "done"
    unreadable = "Unprintable (its message cannot be shown: str() raised AttributeError)"
    last = [api.requests[i].results()[-1] for i in (1, 2, 3)]
    assert [(r.text, r.is_error) for r in last] == [
        (f"Tool 'sync' failed: {unreadable}", True),
        (f"Tool 'async' failed: {unreadable}", True),
        (f"Tool 'gated' was denied by the safety gate: the gate failed ({unreadable})", True),
    ]
    assert len(raised) == 2, "the gated tool never ran"


# --------------------------------------------------------------------------- KeyboardInterrupt


def interrupting_executor(
    kind: str, exc: BaseException, raised: list[BaseException]
) -> Callable[[dict[str, Any]], Any]:
    return async_raiser(exc, raised) if kind == "async" else raiser(exc, raised)


@pytest.mark.parametrize("warm", [0, 1], ids=["fresh", "warm"])
@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, GeneratorExit])
async def test_an_interrupt_in_an_executor_stops_the_query_and_is_raised_as_itself(
    exc_type: type[BaseException], kind: str, warm: int
) -> None:
    raised: list[BaseException] = []
    tool = FunctionTool(name="tool", executor=interrupting_executor(kind, exc_type(), raised))
    async with ScriptedMessagesAPI(call_then_done()) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=warm))
        with pytest.raises(exc_type) as info:
            await provider.generate("go", tools=[tool])
        # Before control returned: the CLI was stopped and the query's dir removed.
        assert cli_processes() == []
        assert leftover_query_dirs() == []
        await provider.aclose()
    assert type(info.value) is exc_type  # not a BaseExceptionGroup
    assert raised == [info.value]  # the very exception the executor raised
    assert len(api.requests) == 1, "the query went on after the interrupt"


async def test_an_interrupt_in_a_gate_stops_the_query_and_is_raised_as_itself() -> None:
    ran: list[dict[str, Any]] = []
    interrupt = KeyboardInterrupt()

    def gate(request: GateRequest) -> GateDecision:
        raise interrupt

    tool = FunctionTool(name="tool", executor=ran.append, mutating=True)
    async with ScriptedMessagesAPI(call_then_done()) as api:
        provider = ClaudeAgentProvider(
            api.settings(warm_processes=0), registry=ToolRegistry([tool], gate=gate)
        )
        with pytest.raises(KeyboardInterrupt) as info:
            await provider.generate("go")
        assert cli_processes() == []
        assert leftover_query_dirs() == []
    assert info.value is interrupt
    assert ran == []
    assert len(api.requests) == 1


async def test_an_interrupted_stream_raises_the_interrupt_and_leaves_nothing() -> None:
    raised: list[BaseException] = []
    tool = FunctionTool(name="tool", executor=raiser(KeyboardInterrupt(), raised))
    async with ScriptedMessagesAPI(call_then_done()) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        with pytest.raises(KeyboardInterrupt) as info:
            async with provider.stream("go", tools=[tool]) as parts:
                async for _part in parts:
                    pass
        assert cli_processes() == []
        assert leftover_query_dirs() == []
    assert raised == [info.value]


async def test_the_provider_serves_the_next_query_after_an_interrupt() -> None:
    calls: list[str] = []

    def flaky(arguments: dict[str, Any]) -> str:
        calls.append("call")
        if len(calls) == 1:
            raise KeyboardInterrupt
        return "fine"

    tool = FunctionTool(name="tool", executor=flaky)
    # The first query stops at its tool call; the second is served from the next turns.
    script = [reply(tool_use("tool", {})), *call_then_done()]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings())  # warm processes, the default
        with pytest.raises(KeyboardInterrupt):
            await provider.generate("go", tools=[tool])
        result = await provider.generate("again", tools=[tool])
        await provider.aclose()
    assert result.text == "done"
    assert calls == ["call", "call"]
    assert tool_result(api.requests[2]) == ("fine", False)


# --------------------------------------------------------------------------- sync executors


async def test_a_hung_sync_executor_times_out_and_sees_the_cancellation_signal() -> None:
    observed = threading.Event()
    release = threading.Event()

    def hang(arguments: dict[str, Any]) -> str:
        call = current_call()
        assert call is not None and call.tool.name == "hang"
        if call.cancelled.wait(60):  # what a long-running executor checks between steps
            observed.set()
        release.wait(60)  # and one that does not stop still never blocks anything
        return "too late"

    tool = FunctionTool(name="hang", executor=hang, timeout=0.5)
    try:
        async with ScriptedMessagesAPI(call_then_done("hang")) as api:
            provider = ClaudeAgentProvider(api.settings(warm_processes=0))
            result = await provider.generate("go", tools=[tool])
    finally:
        release.set()
    assert result.text == "done"
    assert tool_result(api.requests[1]) == ("Tool 'hang' timed out after 0.5 s", True)
    assert observed.wait(10), "the executor never saw its call cancelled"


# --------------------------------------------------------------------------- the interpreter

SCRIPT = """
import asyncio, os, signal, sys, threading, _thread
from sf_provider import ClaudeAgentProvider, FunctionTool
from sf_provider._process import _LIVE
from sf_provider.testing import ScriptedMessagesAPI, reply, text, tool_use

how = sys.argv[1]
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
started = threading.Event()

def tool(arguments):
    for proc in _LIVE:
        print("CLI", proc.transport.pid, proc.workdir, flush=True)
    started.set()
    if how == "sigterm":
        os.kill(os.getpid(), signal.SIGTERM)  # the app's handler: sys.exit in the main thread
    elif how == "interrupt":
        _thread.interrupt_main()  # KeyboardInterrupt in the main thread (a Ctrl-C)
    threading.Event().wait()  # hangs for ever
    return "never"

async def query(api):
    provider = ClaudeAgentProvider(api.settings(warm_processes=0))
    hung = FunctionTool(name="tool", executor=tool, timeout=0.5)
    result = await provider.generate("go", tools=[hung])
    print("RESULT", result.text, flush=True)

async def main():
    async with ScriptedMessagesAPI([reply(tool_use("tool", {})), reply(text("done"))]) as api:
        await query(api)

async def abandon():
    api = ScriptedMessagesAPI([reply(tool_use("tool", {})), reply(text("done"))])
    await api.__aenter__()
    task = asyncio.ensure_future(query(api))
    while not started.is_set():
        await asyncio.sleep(0.05)
    return task

if how == "exit-mid-query":
    # The loop is left as it is, the query pending, its executor hung: sys.exit at top level.
    loop = asyncio.new_event_loop()
    pending = loop.run_until_complete(abandon())
    sys.exit(3)
asyncio.run(main())
"""


def run_script(how: str) -> tuple[subprocess.CompletedProcess[str], int, Path]:
    """Run SCRIPT; its exit status and output, and the CLI pid and dir of its query."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT), how],
        capture_output=True,
        text=True,
        timeout=60,  # a "no hang" bound only: a hung interpreter fails here
        check=False,
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("CLI ")), None)
    assert line, done.stdout + done.stderr
    _, pid, workdir = line.split(maxsplit=2)
    return done, int(pid), Path(workdir)


def gone(pid: int) -> bool:
    for _ in range(300):  # "no hang" bound only: 30 s
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize(
    ("how", "status"),
    [
        ("timeout", 0),  # the query ends normally, its executor still hung
        ("exit-mid-query", 3),  # sys.exit at top level while the query runs
        ("sigterm", 143),  # the app's SIGTERM handler exits during the tool call
        ("interrupt", -2),  # KeyboardInterrupt in the main thread (exits by SIGINT)
    ],
)
def test_the_interpreter_exits_and_leaves_no_cli_and_no_dir_with_a_hung_executor(
    how: str, status: int
) -> None:
    done, pid, workdir = run_script(how)
    assert done.returncode == status, done.stderr
    if how == "timeout":
        assert "RESULT done" in done.stdout, done.stdout + done.stderr
    assert gone(pid), f"the CLI {pid} outlived the interpreter"
    assert not workdir.exists(), f"{workdir} was left behind"
