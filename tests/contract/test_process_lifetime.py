"""No CLI outlives the Python process that started it, and none is stopped by anyone else.

Warm processes are kept between queries; an app that never closes its provider must still leave
nothing behind: the provider garbage collected, the interpreter exiting normally or killed, a
forked child exiting (which must not stop its parent's processes either).
"""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
import textwrap
import time

import anyio
import pytest
from conftest import cli_processes, leftover_query_dirs, no_cli_left

from sf_provider import ClaudeAgentProvider, FunctionTool, ProcessDiedError
from sf_provider.testing import ScriptedMessagesAPI, reply, text, tool_use

pytestmark = [pytest.mark.cli]

SCRIPT = """
import asyncio, os, sys
from sf_provider import ClaudeAgentProvider
from sf_provider.testing import ScriptedMessagesAPI, reply, text

async def main(how):
    async with ScriptedMessagesAPI(lambda r: reply(text("hi"))) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=1))
        first = await provider.generate("hello")
        proc = provider._pool._idle[0]
        print("CLI", proc.transport.pid, proc.workdir, flush=True)
        if how == "fork":
            child = os.fork()
            if child == 0:
                # The child leaves as a normal exit does (the private stdlib call runs the atexit
                # handlers, as sys.exit would outside an event loop), without the parent's loop.
                import atexit
                atexit._run_exitfuncs()
                os._exit(0)
            os.waitpid(child, 0)
            os.kill(proc.transport.pid, 0)  # raises if the child stopped it
            assert proc.workdir.is_dir(), "the child removed the parent's dir"
            again = await provider.generate("hello again")
            assert again.provider_details["process"] == "warm", again.provider_details
            assert again.session_id == first.session_id
            print("PARENT OK", flush=True)
        if how == "kill":
            os.kill(os.getpid(), 9)
        # "exit": return without closing the provider

asyncio.run(main(sys.argv[1]))
"""


def run_script(how: str) -> tuple[subprocess.CompletedProcess[str], int, str]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT), how],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("CLI ")), None)
    assert line, done.stdout + done.stderr
    _, pid, workdir = line.split(maxsplit=2)
    return done, int(pid), workdir


def gone(pid: int) -> bool:
    for _ in range(100):  # "no hang" bound only: 10 s
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("how", ["exit", "kill"])
def test_no_cli_outlives_its_python_process(how: str) -> None:
    done, pid, workdir = run_script(how)
    assert done.returncode == (0 if how == "exit" else -9), done.stderr
    assert gone(pid), f"the CLI {pid} outlived the interpreter ({how})"
    if how == "exit":
        assert not os.path.exists(workdir)
    else:  # a killed interpreter cannot remove its temp dir; the system's tmp cleaning does
        shutil.rmtree(workdir)


def test_a_forked_child_never_stops_its_parents_processes() -> None:
    done, pid, workdir = run_script("fork")
    assert "PARENT OK" in done.stdout, done.stdout + done.stderr
    assert done.returncode == 0, done.stderr
    assert gone(pid)
    assert not os.path.exists(workdir)


@pytest.mark.anyio
async def test_a_provider_dropped_without_aclose_stops_its_idle_processes() -> None:
    async with ScriptedMessagesAPI(lambda r: reply(text("hi"))) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=2))
        await provider.generate("hello")
        assert len(cli_processes()) == 1
        del provider
        gc.collect()
        await no_cli_left(10)
        assert not cli_processes()
        assert not leftover_query_dirs()


@pytest.mark.anyio
async def test_a_query_running_when_the_provider_is_closed_fails_saying_so() -> None:
    """It used to blame the CLI ("exited (exit code None) ... printed nothing on stderr")."""
    started = anyio.Event()

    async def wait(seconds: float) -> str:
        """Wait."""
        started.set()
        await anyio.sleep(seconds)
        return "waited"

    tool = FunctionTool.from_function(wait)
    script = [reply(tool_use("mcp__sf__wait", {"seconds": 30})), reply(text("done"))]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings())
        failures: list[BaseException] = []

        async def query() -> None:
            try:
                await provider.generate("go", tools=[tool])
            except ProcessDiedError as exc:
                failures.append(exc)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(query)
            await started.wait()
            await provider.aclose()
    [failure] = failures
    assert "the provider was closed (aclose) while this query ran" in str(failure)
    await no_cli_left()
    assert not cli_processes() and not leftover_query_dirs()
