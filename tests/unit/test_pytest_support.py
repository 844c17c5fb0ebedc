"""What the pytest plugin does for a test that uses `scripted_api` (`_pytest_support`): the
offline environment it sets and restores, and the check of what the test left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sf_provider import _pytest_support
from sf_provider._pytest_support import OfflineTest, cli_processes, run_coroutine_test


@pytest.fixture
def offline() -> Iterator[OfflineTest]:
    test = OfflineTest.start()
    try:
        yield test
    finally:
        test.stop_server()
        test.finish()


@pytest.fixture(autouse=True)
def short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    # Lookalike processes below never exit by themselves: no need to wait for them.
    monkeypatch.setattr(_pytest_support, "_EXIT_GRACE_SECONDS", 0.2)


def lookalike_cli() -> subprocess.Popen[bytes]:
    """A child process whose command line names claude, running until killed (one process:
    killing it leaves nothing behind)."""
    return subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)", "claude-lookalike"]
    )


def test_the_environment_points_everything_at_the_scripted_api_for_the_test() -> None:
    before = dict(os.environ)
    os.environ["ANTHROPIC_AUTH_TOKEN"] = "real-token"
    test = OfflineTest.start()
    try:
        assert os.environ["ANTHROPIC_BASE_URL"] == test.api.base_url
        assert os.environ["CLAUDE_CODE_MAX_RETRIES"] == "0"
        assert os.environ["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
        assert "ANTHROPIC_AUTH_TOKEN" not in os.environ
        for name, sub in (("HOME", "home"), ("CLAUDE_CONFIG_DIR", "config"), ("TMPDIR", "tmp")):
            assert os.environ[name] == str(test.root / sub)
        assert tempfile.gettempdir() == str(test.root / "tmp")
    finally:
        test.stop_server()
        assert test.finish() == []
        del os.environ["ANTHROPIC_AUTH_TOKEN"]
    assert dict(os.environ) == before
    assert tempfile.gettempdir() == before["TMPDIR"]
    assert not test.root.exists()


def test_the_server_is_running_with_an_empty_script(offline: OfflineTest) -> None:
    assert offline.api.base_url.startswith("http://127.0.0.1:")
    assert offline.api.remaining == 0


def test_a_cli_process_started_during_the_test_is_named_and_stopped(offline: OfflineTest) -> None:
    process = lookalike_cli()
    offline.stop_server()

    problems = offline.finish()

    assert process.wait(timeout=30) == -9
    [message] = problems
    assert f"pid {process.pid}: {sys.executable} -c import time" in message
    assert "claude-lookalike" in message
    assert "left 1 Claude Code CLI process(es) running (now stopped)" in message
    assert "`await provider.aclose()`" in message


def test_a_process_running_before_the_test_is_left_alone() -> None:
    process = lookalike_cli()
    try:
        test = OfflineTest.start()
        test.stop_server()
        assert test.finish() == []
        assert process.poll() is None
    finally:
        process.kill()
        process.wait()


def test_a_query_dir_left_behind_is_named_and_removed(offline: OfflineTest) -> None:
    left = Path(tempfile.mkdtemp(prefix="sf-provider-"))
    offline.stop_server()

    [message] = offline.finish()

    assert str(left) in message
    assert "left 1 per-query temp dir(s) behind (now removed" in message
    assert not left.exists()


def test_cli_processes_lists_running_children_that_name_claude() -> None:
    process = lookalike_cli()
    try:
        assert "claude-lookalike" in cli_processes()[process.pid]
    finally:
        process.kill()
        process.wait()
    assert process.pid not in cli_processes()


def test_a_coroutine_test_gets_its_fixtures_and_not_its_defaults() -> None:
    seen: dict[str, Any] = {}

    async def test(scripted_api: object, other: int, keep: str = "default") -> None:
        seen.update(scripted_api=scripted_api, other=other, keep=keep)

    run_coroutine_test(test, {"scripted_api": "api", "other": 1, "keep": "fixture", "x": 2})

    assert seen == {"scripted_api": "api", "other": 1, "keep": "default"}


def test_the_plugin_module_imports_nothing_of_the_package() -> None:
    probe = (
        "import sys, _sf_provider_pytest\n"
        "print(sorted(m for m in sys.modules if 'sf_provider' in m))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    ).stdout

    assert out.strip() == "['_sf_provider_pytest']"
