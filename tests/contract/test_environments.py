"""Unusual hosts (containers running as an arbitrary uid, CI runners, locked-down machines): a
query either runs or is refused before anything starts, by a `ProviderCompatibilityError` that
names the setting or the directory and says what to do; nothing is left behind either way.

The capability check resolves paths the way the CLI's process is started: in the working
directory the provider gives it (`ProviderSettings.cwd`, else the current one), a bare
`cli_path` name on the PATH the CLI gets.
"""

from __future__ import annotations

import json
import os
import pwd
import resource
import shutil
import time
from pathlib import Path

import pytest
from conftest import cli_processes, leftover_query_dirs, no_cli_left

from sf_provider import (
    ClaudeAgentProvider,
    CLIOutputError,
    ProcessDiedError,
    ProviderCompatibilityError,
    find_cli,
)
from sf_provider.testing import ScriptedMessagesAPI, reply, text

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

TOKEN = "sk-ant-oat01-scripted-offline"
#: Permission bits do not stop root: those cases need an ordinary user.
not_as_root = pytest.mark.skipif(os.geteuid() == 0, reason="root ignores permission bits")


def _bundled_cli() -> str:
    path = find_cli().path
    assert path is not None
    return path


@pytest.mark.parametrize("cwd", [None, "work"], ids=["cwd-unset", "relative-cwd"])
async def test_a_removed_current_directory_is_refused_before_anything_starts(
    cwd: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A CI step that deletes its checkout, a worker whose release directory was swapped.
    gone = tmp_path / "gone"
    (gone / "work").mkdir(parents=True)
    monkeypatch.chdir(gone)
    shutil.rmtree(gone)
    async with ScriptedMessagesAPI([reply(text("never"))]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0, cwd=cwd))
        with pytest.raises(ProviderCompatibilityError) as caught:
            await provider.generate("hi")
    [problem] = caught.value.problems
    assert "current directory" in problem and "was removed" in problem
    assert "os.chdir()" in problem
    assert api.requests == []
    await no_cli_left()  # a CLI an earlier test stopped may not be reaped yet
    assert cli_processes() == [] and leftover_query_dirs() == []


async def test_a_relative_cli_path_is_found_from_the_clis_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The SDK starts `cli_path` inside the CLI's working directory: a relative path is found
    # there, not in the directory the application runs in.
    project = tmp_path / "project"
    (project / "bin").mkdir(parents=True)
    (project / "bin" / "claude").symlink_to(_bundled_cli())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        settings = api.settings(warm_processes=0, cwd=str(project), cli_path="bin/claude")
        result = await ClaudeAgentProvider(settings).generate("hi")
    assert result.text == "ok"


async def test_a_relative_cli_path_missing_from_the_clis_working_directory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # There was a bin/claude under the application's directory, so the check passed, and
    # the query then failed with "the CLI was not found: reinstall claude-agent-sdk".
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "claude").symlink_to(_bundled_cli())
    (tmp_path / "project").mkdir()
    monkeypatch.chdir(tmp_path)
    async with ScriptedMessagesAPI([reply(text("never"))]) as api:
        settings = api.settings(warm_processes=0, cwd="project", cli_path="bin/claude")
        with pytest.raises(ProviderCompatibilityError) as caught:
            await ClaudeAgentProvider(settings).generate("hi")
    [problem] = caught.value.problems
    assert repr(str(tmp_path / "project" / "bin" / "claude")) in problem
    assert "give an absolute path" in problem
    assert api.requests == []


async def test_a_bare_cli_name_is_looked_up_on_the_path_the_cli_gets(tmp_path: Path) -> None:
    # `cli_path="claude"` runs `claude` from PATH, as a shell would; it was refused as "not
    # an executable file" unless the current directory held a file of that name.
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "claude").symlink_to(_bundled_cli())
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        settings = api.settings(warm_processes=0, cli_path="claude")
        settings = settings.model_copy(
            update={"env": {**settings.env, "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"}}
        )
        result = await ClaudeAgentProvider(settings).generate("hi")
    assert result.text == "ok"


async def test_a_relative_temp_dir_with_another_working_directory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The CLI resolved its per-query HOME, config and temp dirs under its own working
    # directory: a copy of them stayed there after every query (and a replayed history was
    # "No conversation found").
    (tmp_path / "tmp").mkdir()
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(tmp_path)
    async with ScriptedMessagesAPI([reply(text("never"))]) as api:
        settings = api.settings(warm_processes=0, cwd=str(project))
        settings = settings.model_copy(update={"env": {**settings.env, "TMPDIR": "tmp"}})
        with pytest.raises(ProviderCompatibilityError) as caught:
            await ClaudeAgentProvider(settings).generate("hi")
    [problem] = caught.value.problems
    assert "TMPDIR" in problem and "absolute" in problem
    assert api.requests == []
    assert list(project.iterdir()) == [] and list((tmp_path / "tmp").iterdir()) == []


async def test_a_login_in_claude_config_dir_runs_without_any_home_directory(
    no_login: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A container running as an arbitrary uid: no HOME, no passwd entry. The login in
    # CLAUDE_CONFIG_DIR was never read: "RuntimeError: Could not determine home directory".
    login = {"accessToken": TOKEN, "expiresAt": int(time.time() * 1000) + 3_600_000,
             "scopes": ["user:inference"]}  # fmt: skip
    (no_login / ".credentials.json").write_text(json.dumps({"claudeAiOauth": login}))
    monkeypatch.delenv("HOME")

    def no_entry(uid: int) -> pwd.struct_passwd:
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        env = {k: v for k, v in api.settings().env.items() if k != "ANTHROPIC_API_KEY"}
        settings = api.settings(warm_processes=0).model_copy(update={"env": env})
        result = await ClaudeAgentProvider(settings).generate("hi")
    assert result.text == "ok"
    assert api.requests[0].headers.get("authorization") == f"Bearer {TOKEN}"


@not_as_root
async def test_a_temp_dir_this_user_cannot_write_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    # It was a bare PermissionError from inside the provider.
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    async with ScriptedMessagesAPI([reply(text("never"))]) as api:
        settings = api.settings(warm_processes=0)
        settings = settings.model_copy(update={"env": {**settings.env, "TMPDIR": str(locked)}})
        with pytest.raises(ProviderCompatibilityError) as caught:
            await ClaudeAgentProvider(settings).generate("hi")
    [problem] = caught.value.problems
    assert f"ProviderSettings.env['TMPDIR'] {str(locked)!r} is not writable" in problem
    assert api.requests == []


@not_as_root
async def test_a_working_directory_this_user_cannot_enter_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    # It was "ProcessDiedError: lost the connection to the Claude Code CLI".
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o600)
    async with ScriptedMessagesAPI([reply(text("never"))]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0, cwd=str(closed)))
        with pytest.raises(ProviderCompatibilityError) as caught:
            await provider.generate("hi")
    [problem] = caught.value.problems
    assert f"ProviderSettings.cwd {str(closed)!r} cannot be entered" in problem
    assert api.requests == []


@not_as_root
async def test_a_umask_that_takes_the_owners_permissions_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    # It was a bare PermissionError on the query's temp HOME (mkdir in a dir made r-x).
    async with ScriptedMessagesAPI([reply(text("never"))]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        before = os.umask(0o277)
        try:
            with pytest.raises(ProviderCompatibilityError) as caught:
                await provider.generate("hi")
        finally:
            os.umask(before)
    [problem] = caught.value.problems
    assert "umask 0277" in problem and "0077" in problem
    assert api.requests == []
    assert leftover_query_dirs() == []


@not_as_root
async def test_a_login_this_user_cannot_read_is_refused_before_anything_starts(
    no_login: Path,
) -> None:
    # A credentials file mounted for another uid: the check said "logged in", and the query
    # raised a bare PermissionError while copying it.
    login = {"accessToken": TOKEN, "expiresAt": int(time.time() * 1000) + 3_600_000}
    credentials = no_login / ".credentials.json"
    credentials.write_text(json.dumps({"claudeAiOauth": login}))
    credentials.chmod(0)
    async with ScriptedMessagesAPI([reply(text("never"))]) as api:
        env = {k: v for k, v in api.settings().env.items() if k != "ANTHROPIC_API_KEY"}
        settings = api.settings(warm_processes=0).model_copy(update={"env": env})
        with pytest.raises(ProviderCompatibilityError) as caught:
            await ClaudeAgentProvider(settings).generate("hi")
    [problem] = caught.value.problems
    assert f"the Claude login {credentials} cannot be read by this user" in problem
    assert api.requests == [] and leftover_query_dirs() == []


# -- a CLI that misbehaves, and temp files that cannot be written

_VERSION = 'if [ "$1" = "--version" ]; then echo "2.1.330 (Claude Code)"; exit 0; fi\n'


def _fake_cli(tmp_path: Path, body: str) -> str:
    cli = tmp_path / "claude"
    cli.write_text(f"#!/bin/sh\n{_VERSION}{body}", encoding="utf-8")
    cli.chmod(0o755)
    return str(cli)


async def test_a_cli_that_exits_at_start_says_what_it_printed(tmp_path: Path) -> None:
    # The error usually read "lost the connection to the Claude Code CLI: Failed to write to
    # process stdin:" and dropped the CLI's own words (kept only in .stderr).
    cli = _fake_cli(tmp_path, 'echo "license server unreachable" >&2\nexit 3\n')
    async with ScriptedMessagesAPI([reply(text("never"))]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0, cli_path=cli))
        with pytest.raises(ProcessDiedError, match="license server unreachable"):
            await provider.generate("hi")
    assert api.requests == []


async def test_a_cli_whose_output_is_not_json_is_not_blamed_on_the_buffer_size(
    tmp_path: Path,
) -> None:
    cli = _fake_cli(tmp_path, "echo '{\"half\": '\nsleep 1\n")
    async with ScriptedMessagesAPI([reply(text("never"))]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0, cli_path=cli))
        with pytest.raises(CLIOutputError) as caught:
            await provider.generate("hi")
    assert "max_buffer_size" not in str(caught.value)
    assert "cli_path" in str(caught.value)


async def test_temp_files_that_cannot_be_written_are_a_named_error_and_leave_nothing() -> None:
    # A full disk or a file size limit: it was a bare "OSError: [Errno 27] File too large".
    prompt = "Rule: be brief. " * 2_000  # 32,000 characters: written to a file for the CLI
    async with ScriptedMessagesAPI([reply(text("never"))]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))
        try:
            with pytest.raises(ProviderCompatibilityError) as caught:
                await provider.generate(
                    [{"role": "system", "content": prompt}, {"role": "user", "content": "hi"}]
                )
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert "File too large" in str(caught.value) and "TMPDIR" in str(caught.value)
    assert api.requests == []
    await no_cli_left()  # a CLI an earlier test stopped may not be reaped yet
    assert cli_processes() == [] and leftover_query_dirs() == []


async def test_a_cli_that_never_answers_its_initialize_request_is_a_named_error(
    tmp_path: Path,
) -> None:
    # Seen: a bare "Exception: Control request timeout: initialize" after 60 s (the SDK's
    # shortest initialize timeout), not a ProviderError.
    cli = _fake_cli(tmp_path, "exec sleep 1000\n")
    async with ScriptedMessagesAPI([reply(text("never"))]) as api:
        provider = ClaudeAgentProvider(
            api.settings(warm_processes=0, cli_path=cli, idle_timeout=None)
        )
        with pytest.raises(ProcessDiedError, match="never answered the SDK's initialize"):
            await provider.generate("hi")
    await no_cli_left()
    assert cli_processes() == []
