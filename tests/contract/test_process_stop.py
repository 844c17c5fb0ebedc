"""How a query's CLI is stopped: by SIGKILL at once when everything it writes is in the query's
own temp dir (the default `isolate=True`), so a finished query waits for no shutdown of the CLI;
by SIGTERM first when it writes to the user's dirs, so it tidies them. Either way the process has
exited and been reaped, and the temp dir removed, when `generate` returns, the stream ends or the
cancel returns.
"""

from __future__ import annotations

import shutil
import signal
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import HeldCLI, cli_processes, leftover_query_dirs, no_cli_left

from sf_provider import ClaudeAgentProvider, ProcessDiedError, TextDeltaPart, _process
from sf_provider._process import CLISession
from sf_provider.testing import RecordedRequest, Reply, ScriptedMessagesAPI, reply, text

pytestmark = [pytest.mark.anyio, pytest.mark.cli]


class Served:
    """A scripted model that notes the session serving each request (the one running CLI)."""

    def __init__(self) -> None:
        self.sessions: list[CLISession] = []

    def __call__(self, _request: RecordedRequest) -> Reply:
        [session] = [s for s in _process._LIVE if s.transport.pid is not None]
        self.sessions.append(session)
        return reply(text("hi"))


@pytest.mark.parametrize("call", ["generate", "stream"])
async def test_a_finished_query_s_cli_is_killed_and_reaped_before_the_call_returns(
    call: str,
) -> None:
    model = Served()
    async with ScriptedMessagesAPI(model) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        if call == "generate":
            assert (await provider.generate("hello")).text == "hi"
        else:
            async with provider.stream("hello") as parts:
                assert "".join([p.delta async for p in parts if isinstance(p, TextDeltaPart)])
        [session] = model.sessions
        assert session.transport.disposable
        # Nothing of the CLI was worth a graceful shutdown: killed, not asked to exit.
        assert session.transport.exit_status == -signal.SIGKILL
        assert cli_processes(defunct=True) == [], "the CLI had exited and been reaped"
        assert not session.workdir.exists() and leftover_query_dirs() == []


async def test_the_temp_dir_is_removed_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Removing a query's temp dir takes milliseconds to tens on a loaded disk: done in a worker
    thread, the event loop serves other queries' streams meanwhile; still gone when the call
    returns."""
    removed: list[tuple[Path, bool]] = []  # (path, removed on the event loop's thread)
    loop_thread = threading.current_thread()
    rmtree = shutil.rmtree

    def recording_rmtree(path: Path, ignore_errors: bool = False, **kwargs: Any) -> None:
        if path.exists():
            removed.append((path, threading.current_thread() is loop_thread))
        rmtree(path, ignore_errors, **kwargs)

    model = Served()
    async with ScriptedMessagesAPI(model) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        monkeypatch.setattr(shutil, "rmtree", recording_rmtree)
        assert (await provider.generate("hello")).text == "hi"
        monkeypatch.undo()
        [session] = model.sessions
        assert not session.workdir.exists()
        assert removed == [(session.workdir, False)]


async def test_a_cancelled_query_s_cli_is_killed_and_reaped_before_the_cancel_returns() -> None:
    asked = anyio.Event()
    sessions: list[CLISession] = []

    async def answer_never(_request: RecordedRequest) -> Reply:
        sessions.extend(s for s in _process._LIVE if s.transport.pid is not None)
        asked.set()
        await anyio.sleep(60)
        return reply(text("too late"))

    async with ScriptedMessagesAPI(answer_never) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        async with anyio.create_task_group() as group:
            group.start_soon(provider.generate, "hello")
            with anyio.fail_after(60):
                await asked.wait()  # the query is now waiting on the API
            group.cancel_scope.cancel()
        [session] = sessions
        assert session.transport.exit_status == -signal.SIGKILL
        assert cli_processes(defunct=True) == []
        assert leftover_query_dirs() == []


@pytest.mark.parametrize("grace", [_process._KILL_GRACE_SECONDS, 0.0], ids=["grace", "no-grace"])
async def test_a_cli_writing_to_the_user_s_dirs_is_asked_to_exit_first(
    tmp_path: Path, grace: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With `isolate=False` the CLI's HOME, config dir and TMPDIR are the user's: on SIGTERM it
    removes its session registration and socket there, so it gets SIGTERM first (SIGKILL only
    when it has not exited after the grace: a loaded machine, or no grace at all here). Killed,
    its registration and socket are removed for it: nothing of it is left in the user's dirs."""
    monkeypatch.setattr(_process, "_KILL_GRACE_SECONDS", grace)
    dirs = {name: tmp_path / name for name in ("home", "config", "tmp")}
    for path in dirs.values():
        path.mkdir()
    model = Served()
    async with ScriptedMessagesAPI(model) as api:
        settings = api.settings(warm_processes=0)
        env = {
            **settings.env,
            "HOME": str(dirs["home"]),
            "CLAUDE_CONFIG_DIR": str(dirs["config"]),
            "TMPDIR": str(dirs["tmp"]),
        }
        settings = settings.model_copy(update={"isolate": False, "env": env})
        assert (await ClaudeAgentProvider(settings).generate("hello")).text == "hi"
    [session] = model.sessions
    assert not session.transport.disposable
    # 143: the CLI's own exit on SIGTERM; -9 only if it took longer than the grace (load).
    assert session.transport.exit_status in (128 + signal.SIGTERM, -signal.SIGKILL)
    assert cli_processes(defunct=True) == []
    assert list(dirs["tmp"].glob("sf-provider-*")) == []
    # Its session registration, key and socket (`sessions/<pid>.*`, `cc-socks/<pid>.sock`).
    assert [*dirs["config"].glob("sessions/*"), *dirs["tmp"].glob("cc-socks/*")] == []


@pytest.mark.parametrize("warm", [0, 1], ids=["fresh", "warm-pool"])
async def test_aclose_while_the_cli_starts_ends_the_query_at_once(
    tmp_path: Path, warm: int
) -> None:
    """A provider closed while a query's CLI is still starting: the query fails with the reason
    by the time `aclose` returns. (The SDK does not fail the start-up handshake of a process it
    stopped: the query waited out its 60 s limit.)"""
    cli = HeldCLI(tmp_path)
    cli.let_it_answer()
    errors: list[Exception] = []

    async def query(provider: ClaudeAgentProvider) -> None:
        try:
            await provider.generate("hello")
        except ProcessDiedError as exc:
            errors.append(exc)

    async with ScriptedMessagesAPI(lambda _request: reply(text("hi"))) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=warm, cli_path=str(cli.path)))
        cli.hold_starts()
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(query, provider)
                await cli.wait_until_held()  # the CLI is starting, the query waits for it
                await provider.aclose()
                await anyio.wait_all_tasks_blocked()
                assert [str(e) for e in errors] == [
                    f"{_process.PROVIDER_CLOSED}: its CLI was stopped before the query finished"
                ]
        finally:
            cli.release_starts()
    assert api.requests == []
    await no_cli_left()
    assert leftover_query_dirs() == []
