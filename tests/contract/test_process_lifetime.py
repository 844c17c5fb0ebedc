"""No CLI outlives the Python process that started it, and none is stopped by anyone else.

Warm processes are kept between queries; an app that never closes its provider must still leave
nothing behind: the provider garbage collected, the interpreter exiting normally or killed, a
forked child exiting (which must not stop its parent's processes either).
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import anyio
import httpx
import pytest
from conftest import cli_processes, gateway_url, leftover_query_dirs, no_cli_left

from sf_provider import ClaudeAgentProvider, FunctionTool, ProcessDiedError
from sf_provider.testing import (
    RecordedRequest,
    ScriptedMessagesAPI,
    ScriptItem,
    fault,
    offline_env,
    reply,
    text,
    tool_use,
)

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


def children(pid: int) -> list[str]:
    """The bundled-CLI processes `pid` started."""
    out = subprocess.run(
        ["ps", "-ww", "-o", "pid=,args=", "--ppid", str(pid)],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return [line for line in out.splitlines() if "claude" in line]


def gone(pid: int) -> bool:
    for _ in range(300):  # "no hang" bound only: 30 s
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
        await no_cli_left()
        assert not cli_processes()
        assert not leftover_query_dirs()


@pytest.mark.anyio
@pytest.mark.parametrize("warm", [1, 0], ids=["warm", "no-warm-processes"])
async def test_a_query_running_when_the_provider_is_closed_fails_saying_so(warm: int) -> None:
    """It used to blame the CLI ("exited (exit code None) ... printed nothing on stderr"); and
    without warm processes `aclose()` did not stop it at all."""
    started = anyio.Event()

    async def wait(seconds: float) -> str:
        """Wait."""
        started.set()
        await anyio.sleep(seconds)
        return "waited"

    tool = FunctionTool.from_function(wait)
    script = [reply(tool_use("mcp__sf__wait", {"seconds": 30})), reply(text("done"))]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=warm))
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


#: A gateway as `sf-provider gateway` runs it, with a 1 s graceful shutdown.
_GATEWAY = """
import sys, uvicorn
from sf_provider.gateway import GatewaySettings, create_app
uvicorn.run(create_app(GatewaySettings(api_keys=["key"])), host="127.0.0.1", port=0,
            timeout_graceful_shutdown=1, log_level="info")
"""


@pytest.mark.anyio
async def test_a_gateway_stopped_with_a_request_running_leaves_no_cli(tmp_path: Path) -> None:
    """uvicorn cancels a request still running after its graceful shutdown and ends the process
    by SIGTERM right after the app's shutdown: the query's CLI, still being stopped by the
    cancelled request, outlived the gateway (reparented to init) with its temp dir."""
    queries = tmp_path / "tmp"
    queries.mkdir()
    reached = anyio.Event()

    def hang(_request: RecordedRequest) -> ScriptItem:
        reached.set()  # the query's CLI now waits on the hung API request
        return fault("hang")

    async with ScriptedMessagesAPI(hang) as api:
        env = {**os.environ, **offline_env(api.base_url), "TMPDIR": str(queries)}
        command = [sys.executable, "-c", _GATEWAY]
        async with await anyio.open_process(command, env=env) as gateway:
            url, _ = await gateway_url(gateway)
            body = {"model": "claude-sonnet-5-5", "messages": [{"role": "user", "content": "hi"}]}

            async def ask() -> None:
                async with httpx.AsyncClient(base_url=url, timeout=60) as client:
                    with contextlib.suppress(httpx.HTTPError):
                        await client.post(
                            "/v1/chat/completions",
                            headers={"authorization": "Bearer key"},
                            json=body,
                        )

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(ask)
                await reached.wait()
                clis = [int(line.split()[0]) for line in children(gateway.pid)]
                gateway.send_signal(signal.SIGTERM)
                await gateway.wait()
        try:
            assert clis and all(gone(pid) for pid in clis)
            assert list(queries.glob("sf-provider-*")) == []
        finally:
            for pid in clis:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
