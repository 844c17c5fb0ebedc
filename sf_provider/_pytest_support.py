"""What the pytest plugin (`_sf_provider_pytest`, the `scripted_api` fixture) does for a test.

The plugin module itself lives outside this package so that pytest, which loads it in every
project where sf-provider is installed, imports nothing of the package until a test uses the
fixture. Everything it does for such a test is here:

- `OfflineTest`: the test's offline environment (a scripted API on a thread of its own; temp
  HOME, CLAUDE_CONFIG_DIR and TMPDIR; the scripted API as the default API; no credentials), and,
  once every fixture of the test is torn down, what the test left behind.
- `run_coroutine_test`: runs an `async def` test that no async plugin claimed, on asyncio.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import gc
import inspect
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

import anyio
import pytest

from ._text import clip
from .testing import ScriptedMessagesAPI, ScriptExhaustedError, offline_env

__all__ = ["OfflineTest", "cli_processes", "fail", "run_coroutine_test", "script_problems"]

#: How long a CLI process the test stopped may take to exit before it counts as left running:
#: a bound on waiting for an exit already under way, never a speed claim.
_EXIT_GRACE_SECONDS = 5.0

_ADVICE = (
    "close each provider when the test is done (`async with ClaudeAgentProvider(...) as "
    "provider:` or `await provider.aclose()`: a provider keeps a warm CLI process between "
    "queries), and leave streams through `async with provider.stream(...) as parts:`"
)


class OfflineTest:
    """One test's scripted API and offline environment, and the check of what it left behind.

    `start()` serves a `ScriptedMessagesAPI` (empty script) on a thread of its own, so it
    answers whatever event loop the test runs on, or none; and points the whole process at it
    for the test: `ANTHROPIC_BASE_URL` and a placeholder `ANTHROPIC_API_KEY` (so a provider the
    application builds itself, with its own settings, reaches the script too), no retries, no
    non-essential traffic, HOME, CLAUDE_CONFIG_DIR and TMPDIR in a temp dir of the test's own,
    and none of the variables that would route the CLI elsewhere or hand it real credentials.
    """

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="scripted-api-"))
        # Ctrl-C skips the test's teardown (`finish`): the dir goes when the process exits.
        atexit.register(self._remove_root)
        self.api = ScriptedMessagesAPI([])
        self._patch = pytest.MonkeyPatch()
        self._before = set(cli_processes())

    @classmethod
    def start(cls) -> OfflineTest:
        """Start the server and set the test's environment."""
        test = cls()
        try:
            test.api.__enter__()
            test._set_environment()
        except BaseException:
            test.stop_server()
            test._remove_root()
            atexit.unregister(test._remove_root)
            raise
        return test

    def _set_environment(self) -> None:
        patch = self._patch
        for name in ("home", "config", "tmp"):
            (self.root / name).mkdir()
        patch.setenv("HOME", str(self.root / "home"))
        patch.setenv("CLAUDE_CONFIG_DIR", str(self.root / "config"))
        patch.setenv("TMPDIR", str(self.root / "tmp"))
        patch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR: per-query dirs go there
        for name, value in offline_env(self.api.base_url).items():
            if value:
                patch.setenv(name, value)
            else:  # what routes away (`ROUTES_AWAY`): gone from the process, not just blank
                patch.delenv(name, raising=False)

    def stop_server(self) -> None:
        """Stop the server and restore the environment (the fixture's own teardown)."""
        try:
            self.api.__exit__(None, None, None)
        finally:
            self._patch.undo()

    def finish(self) -> list[str]:
        """After every fixture of the test is torn down: stop the CLI processes the test left
        running and remove the per-query temp dirs it left behind; return what there was, and
        the problems the scripted API met (`script_problems`).

        A process whose provider was dropped is being stopped already, on the event loop that
        ran the test; when that loop outlives the test (a module- or session-scoped loop) and
        is parked until the next test, the stop is left to it and is not the test's fault.
        """
        try:
            gc.collect()  # a provider the test dropped stops its warm processes when collected
            stopping, kept = _sessions()
            # Processes the package knows about are decided at once; only others (stopped
            # already, maybe not gone yet) get a grace period to exit.
            left = _wait_for_exit(self._before | set(stopping) | set(kept))
            left.update(
                {
                    pid: args
                    for pid, args in cli_processes().items()
                    if pid in kept.keys() - self._before
                }
            )
            # A process's own dir is said with the process (or spared with it).
            known = {*stopping.values(), *kept.values()}
            dirs = [
                path
                for path in sorted((self.root / "tmp").glob("sf-provider-*"))
                if path not in known
            ]
            _stop(left)
            problems = []
            if self.api.errors:
                problems.append(script_problems(self.api))
            if left:
                listed = "".join(f"\n  pid {pid}: {clip(args, 160)}" for pid, args in left.items())
                problems.append(
                    f"sf-provider: this test left {len(left)} Claude Code CLI process(es) "
                    f"running (now stopped):{listed}\nTo fix it, {_ADVICE}."
                )
            if dirs:
                listed = "".join(f"\n  {path}" for path in dirs)
                problems.append(
                    f"sf-provider: this test left {len(dirs)} per-query temp dir(s) behind "
                    f"(now removed; each belongs to a CLI process that was not stopped):{listed}"
                )
            return problems
        finally:
            self._remove_root()
            atexit.unregister(self._remove_root)

    def _remove_root(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def fail(api: ScriptedMessagesAPI, problems: list[str]) -> NoReturn:
    """Fail a test that passed for `problems` (`OfflineTest.finish`): with
    `ScriptExhaustedError` when its script ran out, else as a plain failure."""
    __tracebackhide__ = True  # the message says it all: no frame of the plugin's
    if api._state.ran_out:
        raise ScriptExhaustedError("\n".join(problems))
    pytest.fail("\n".join(problems), pytrace=False)


def script_problems(api: ScriptedMessagesAPI) -> str:
    """What the scripted API could not answer in a test (its `errors`), said as a failure: a
    test that caught the query's error, or whose framework swallowed it, fails for it too."""
    listed = "".join(f"\n  {problem}" for problem in api.errors)
    return f"sf-provider: the scripted API could not answer as scripted:{listed}"


def run_coroutine_test(
    function: Callable[..., Awaitable[Any]], funcargs: Mapping[str, Any]
) -> None:
    """Run an `async def` test function on asyncio with its fixture values, as pytest runs a
    plain one (arguments with defaults are not fixtures)."""
    parameters = inspect.signature(function).parameters.values()
    kwargs = {
        p.name: funcargs[p.name]
        for p in parameters
        if p.default is p.empty and p.kind is not p.VAR_POSITIONAL and p.kind is not p.VAR_KEYWORD
    }
    anyio.run(functools.partial(function, **kwargs), backend="asyncio")


def cli_processes() -> dict[int, str]:
    """Running (not zombie) child processes of this process that are a Claude Code CLI, with
    their command lines."""
    found = _children_from_proc() if Path("/proc/self/stat").exists() else _children_from_ps()
    return {pid: args for pid, args in found.items() if "claude" in args}


def _children_from_proc() -> dict[int, str]:
    me = os.getpid()
    children: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
            state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]
            if int(ppid) != me or state == "Z":
                continue
            args = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue  # gone meanwhile
        children[int(entry.name)] = args.strip()
    return children


def _children_from_ps() -> dict[int, str]:
    try:
        out = subprocess.run(
            ["ps", "-A", "-o", "pid=,ppid=,stat=,command="],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
    except OSError:
        return {}  # no ps: nothing can be checked
    children: dict[int, str] = {}
    for line in out.splitlines():
        fields = line.split(None, 3)
        if len(fields) == 4 and fields[1] == str(os.getpid()) and not fields[2].startswith("Z"):
            children[int(fields[0])] = fields[3]
    return children


def _wait_for_exit(before: set[int]) -> dict[int, str]:
    """The CLI processes started since `before` that are still running, once those already
    stopping had `_EXIT_GRACE_SECONDS` to exit."""
    deadline = time.monotonic() + _EXIT_GRACE_SECONDS
    while True:
        left = {pid: args for pid, args in cli_processes().items() if pid not in before}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def _sessions() -> tuple[dict[int, Path], dict[int, Path]]:
    """The running CLI processes the package knows (pid -> temp dir): those whose session is
    closing but has not ended yet, and those still kept (a warm process of a live provider)."""
    from . import _process

    stopping: dict[int, Path] = {}
    kept: dict[int, Path] = {}
    for session in list(_process._LIVE):
        transport = getattr(session, "transport", None)
        pid = transport.pid if transport is not None else None
        if pid is not None:
            (stopping if session._closed else kept)[pid] = session.workdir
    return stopping, kept


def _stop(processes: Mapping[int, str]) -> None:
    """Stop processes the test left running: through their session when the package knows
    them (which also forgets them, so nothing signals the pid again later), else by pid."""
    from . import _process

    pids = set(processes)
    for session in list(_process._LIVE):
        transport = getattr(session, "transport", None)
        if transport is not None and transport.pid in pids:
            session.kill_now()
            pids.discard(transport.pid)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
