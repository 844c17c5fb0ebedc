"""Suite-wide isolation: the CLI never sees the real home, and nothing may leak."""

from __future__ import annotations

import atexit
import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
import pytest

_ISOLATED = Path(tempfile.mkdtemp(prefix="sf-provider-tests-"))
# Every process that imports this file (the xdist controller too, which runs no test) removes it.
atexit.register(shutil.rmtree, _ISOLATED, True)
for _name in ("home", "config", "tmp"):
    (_ISOLATED / _name).mkdir()
# Belt and braces: each query already gets its own dirs; these catch anything started outside.
os.environ["HOME"] = str(_ISOLATED / "home")
os.environ["CLAUDE_CONFIG_DIR"] = str(_ISOLATED / "config")
os.environ["TMPDIR"] = str(_ISOLATED / "tmp")
os.environ["CLAUDE_CODE_MAX_RETRIES"] = "0"
os.environ["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
# LiteLLM fetches its model cost map from GitHub when imported: no network in tests.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
for _key in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
    os.environ.pop(_key, None)
tempfile.tempdir = None  # re-read TMPDIR


def cli_processes(*, defunct: bool = False) -> list[str]:
    """Command lines of running bundled-CLI processes started by this test process; a
    `<defunct>` one (it has exited, and asyncio's child watcher is about to reap it) only with
    `defunct`. `-ww`: a command line of full width, which ps otherwise cuts to 80 columns where no
    terminal says how wide (a venv under a long path, as build/venv-lowest in a worktree, lost
    the "claude")."""
    out = subprocess.run(
        ["ps", "-ww", "-o", "pid=,ppid=,args=", "--ppid", str(os.getpid())],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    lines = [line for line in out.splitlines() if "claude" in line]
    return lines if defunct else [line for line in lines if "<defunct>" not in line]


async def no_cli_left(seconds: float = 30.0) -> None:
    """Wait until no bundled CLI started by this test process runs and no per-query dir is
    left, at most `seconds` (a "no hang" bound only, never a speed claim): a process is stopped
    first and its dir removed after it exited. Callers assert `not cli_processes()` (and
    `not leftover_query_dirs()`) after it."""
    for _ in range(int(seconds * 10)):
        if not cli_processes() and not leftover_query_dirs():
            return
        await anyio.sleep(0.1)


async def kill_idle_warm_process(provider: Any, *, unseen: bool = False) -> None:
    """SIGKILL the provider's one idle warm process from outside, and wait (at most 30 s, a
    "no hang" bound) until the provider has seen it exit (its child watcher reaped it); its dir
    stays until the pool next looks at it.

    `unseen`: wait only until the process has exited, blocking the event loop meanwhile, so
    that asyncio has not yet run what tells the provider (`returncode` is still None): the
    next query is then the first to look, as when a process dies just before a query comes."""
    (proc,) = provider._warm_pool()._idle
    pid = proc.transport.pid
    os.kill(pid, signal.SIGKILL)
    if unseen:
        _block_until_exited(pid)
        return
    for _ in range(300):
        if proc.transport.pid is None:
            return
        await anyio.sleep(0.1)


def _block_until_exited(pid: int) -> None:
    """Wait (at most 30 s) until the child `pid` has exited, blocking the calling thread, the
    event loop's, on purpose: asyncio cannot run what tells the provider meanwhile."""
    for _ in range(3000):
        try:  # asks without reaping (WNOWAIT); reaped already by a watcher thread: gone
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return
        except ChildProcessError:
            return
        time.sleep(0.01)


@asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """An ASGI app (the gateway) served by uvicorn on a free loopback port, in this event loop:
    yields its base URL; leaving runs the app's shutdown."""
    import uvicorn

    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve)
        while not server.started:  # noqa: ASYNC110 - uvicorn offers no event to wait on
            await anyio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True


async def gateway_url(gateway: anyio.abc.Process) -> tuple[str, str]:
    """The URL a gateway process (uvicorn) serves on, read from its stderr, and the log so far."""
    assert gateway.stderr is not None
    log = ""
    async for chunk in gateway.stderr:
        log += chunk.decode()
        if "Uvicorn running on" in log:
            break
    return log.split("Uvicorn running on ")[1].split()[0], log


def leftover_query_dirs() -> list[str]:
    """Per-query temp dirs not removed."""
    return sorted(p.name for p in (_ISOLATED / "tmp").glob("sf-provider-*"))


@pytest.fixture(autouse=True, scope="session")
def _no_leaks_after_suite() -> Iterator[None]:
    yield
    # A provider collected in the last test stops its idle CLI then (SIGKILL, reaped by
    # asyncio's child watcher thread): seen as `<defunct>` for a moment. The same bounded wait
    # as no_cli_left; a process that is never reaped still fails.
    for _ in range(100):
        if not cli_processes():
            break
        time.sleep(0.1)
    leaked_processes = cli_processes()
    leaked_dirs = leftover_query_dirs()
    shutil.rmtree(_ISOLATED, ignore_errors=True)
    assert not leaked_processes, f"CLI processes left running: {leaked_processes}"
    assert not leaked_dirs, f"per-query temp dirs left behind: {leaked_dirs}"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class RedisServer:
    """A real `redis-server` of one test's own: on a free loopback port, saving nothing, in the
    test's temp dir."""

    def __init__(self, binary: str, where: Path) -> None:
        for _ in range(5):  # a port taken between finding it free and binding it: another
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
            log = where / f"redis-{port}.log"
            options = {"bind": "127.0.0.1", "port": str(port), "save": "", "appendonly": "no"}
            command = [binary, "--dir", str(where)]
            command += [arg for name, value in options.items() for arg in (f"--{name}", value)]
            with log.open("w") as out:
                self.process = subprocess.Popen(
                    command,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            for _ in range(200):
                if "Ready to accept connections" in log.read_text():
                    self.url = f"redis://127.0.0.1:{port}/0"
                    return
                if self.process.poll() is not None:
                    break
                time.sleep(0.05)
            self.stop()
        raise RuntimeError(f"redis-server did not start: {log.read_text()}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A real `redis-server` for this test, stopped after it; skipped where none is installed."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip(
            "no redis-server on PATH (Debian: apt-get install redis-server): the Redis "
            "response store is tested against a real server only"
        )
    pytest.importorskip("redis", reason="the redis package (sf-provider[redis]) is not installed")
    server = RedisServer(binary, tmp_path)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def no_login(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No key, token, cloud switch or login anywhere in this process's environment: `HOME` and
    an empty `CLAUDE_CONFIG_DIR` (returned, to log in to) under the test's temp dir."""
    for var in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "CLAUDE_CODE_USE_BEDROCK",
        "CLAUDE_CODE_USE_VERTEX",
        "CLAUDE_CODE_USE_FOUNDRY",
    ):
        monkeypatch.delenv(var, raising=False)
    config = tmp_path / "config"
    config.mkdir(exist_ok=True)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return config


class HeldCLI:
    """The real bundled CLI behind a wrapper script (`path`, for `ProviderSettings.cli_path`)
    that the test holds, waiting on files, never on a clock:

    - its `--version` waits until `let_it_answer` (no version stamp lies beside the wrapper, so
      the provider asks it); every run waits, and all of them answer once `answer` is there (the
      gateway's start-up readiness check asks too);
    - between `hold_starts` and `release_starts`, every start of the CLI waits before running
      the real one (a CLI that takes long to start). `starts` counts the starts.
    """

    def __init__(self, where: Path, says: str | None = None) -> None:
        from sf_provider.capabilities import find_cli

        bundled = find_cli().path
        assert bundled is not None
        self.asked, self.answer = where / "asked", where / "answer"
        self.held, self._hold, self._starts = where / "held", where / "hold", where / "starts"
        self.path = where / "claude"
        q = shlex.quote
        self.path.write_text(
            "#!/bin/sh\n"
            'if [ "$1" = "--version" ]; then\n'
            f"  touch {q(str(self.asked))}\n"
            f"  while [ ! -e {q(str(self.answer))} ]; do sleep 0.05; done\n"
            f"  cat {q(str(self.answer))}\n"
            "  exit 0\n"
            "fi\n"
            f"echo started >> {q(str(self._starts))}\n"
            f"if [ -e {q(str(self._hold))} ]; then\n"
            f"  touch {q(str(self.held))}\n"
            f"  while [ -e {q(str(self._hold))} ]; do sleep 0.05; done\n"
            "fi\n"
            f'exec {q(bundled)} "$@"\n'
        )
        self.path.chmod(0o755)
        version = Path(bundled).with_name("claude.version").read_text().split()[0]
        self.says = says if says is not None else f"{version} (Claude Code)"

    async def wait_until_asked(self) -> None:
        await _appears(self.asked)

    def let_it_answer(self) -> None:
        written = self.answer.with_suffix(".part")
        written.write_text(f"{self.says}\n")
        written.rename(self.answer)  # whole, at once

    def hold_starts(self) -> None:
        self._hold.touch()

    async def wait_until_held(self) -> None:
        """Until a start waits (`hold_starts`)."""
        await _appears(self.held)

    def release_starts(self) -> None:
        self._hold.unlink(missing_ok=True)

    @property
    def starts(self) -> int:
        """How often the CLI was started (not counting `--version`)."""
        return len(self._starts.read_text().splitlines()) if self._starts.exists() else 0


async def _appears(path: Path) -> None:
    def wait() -> None:
        while not path.exists():
            time.sleep(0.05)

    await anyio.to_thread.run_sync(wait)
