"""The pytest plugin, seen from an application: plain `pytest` in a fresh project (a
subprocess, no conftest, no marker, an isolated home) with sf-provider installed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fresh_project import isolated_env, run_pytest, write_project

pytestmark = pytest.mark.cli

WEATHER_TOOLS = '''
from sf_provider import FunctionTool


def get_weather(city: str) -> dict[str, object]:
    """Current weather for a city."""
    return {"city": city, "celsius": 21}


tools = [FunctionTool.from_function(get_weather)]
'''

APP_TEST = """
from sf_provider import ClaudeAgentProvider
from sf_provider.testing import ScriptedMessagesAPI, reply, text, tool_use
from weather_tools import tools


async def test_agent_reports_the_weather{suffix}(scripted_api: ScriptedMessagesAPI) -> None:
    scripted_api.add(
        reply(tool_use("get_weather", {{"city": "Paris"}})),
        reply(text("21 °C in Paris.")),
    )
    provider = ClaudeAgentProvider(scripted_api.settings())

    result = await provider.generate("Weather in Paris?", tools=tools)

    assert result.text == {expected!r}
    assert result.tool_calls[0].input == {{"city": "Paris"}}
    assert scripted_api.requests[1].results()[0].text == '{{"city": "Paris", "celsius": 21}}'
"""


def test_an_app_test_passes_under_plain_pytest_and_a_wrong_assertion_fails(
    tmp_path: Path,
) -> None:
    project = write_project(
        tmp_path / "app",
        {
            "weather_tools.py": WEATHER_TOOLS,
            "test_agent.py": APP_TEST.format(suffix="", expected="21 °C in Paris."),
            "test_agent_wrong.py": APP_TEST.format(suffix="_wrongly", expected="22 °C in Paris."),
        },
    )

    run = run_pytest(project)

    assert run.outcomes == {
        "test_agent_reports_the_weather": "passed",
        "test_agent_reports_the_weather_wrongly": "failed",
    }, run.output
    assert run.returncode == 1
    assert "AssertionError: assert '21 °C in Paris.' == '22 °C in Paris.'" in run.output


PLAIN_TESTS = """
import sys

import pytest


@pytest.fixture
def number() -> int:
    return 3


def test_sync_passes(number: int) -> None:
    assert number == 3


def test_sync_fails() -> None:
    assert 1 == 2


async def test_async_without_a_plugin() -> None:
    pass


def test_the_plugin_imported_nothing_of_sf_provider() -> None:
    assert not [m for m in sys.modules if m.startswith("sf_provider")]
"""


def _summary(output: str) -> str:
    """The last line, without its timing."""
    return output.strip().splitlines()[-1].split(" in ")[0]


def test_a_project_that_does_not_use_the_fixture_is_left_as_it_was(tmp_path: Path) -> None:
    project = write_project(tmp_path / "plain", {"test_plain.py": PLAIN_TESTS})

    with_plugin = run_pytest(project)
    without = run_pytest(project, "-p", "no:sf_provider")

    assert (
        with_plugin.outcomes
        == without.outcomes
        == {
            "test_sync_passes": "passed",
            "test_sync_fails": "failed",
            "test_async_without_a_plugin": "failed",
            "test_the_plugin_imported_nothing_of_sf_provider": "passed",
        }
    ), with_plugin.output
    assert "async def functions are not natively supported" in with_plugin.output
    assert _summary(with_plugin.output) == _summary(without.output)
    assert with_plugin.returncode == without.returncode == 1


LEAKS = """
import tempfile

import pytest
from sf_provider import ClaudeAgentProvider
from sf_provider.testing import reply, text

pytestmark = pytest.mark.anyio


# An event loop that outlives each test: anyio keeps its runner for the module while a
# module-scoped async fixture lives.
@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def shared() -> object:
    yield object()


KEPT = []


async def test_keeps_a_provider_open(scripted_api, shared) -> None:
    scripted_api.add(reply(text("hi")))
    KEPT.append(ClaudeAgentProvider(scripted_api.settings()))
    assert (await KEPT[-1].generate("hi")).text == "hi"


async def test_drops_its_provider(scripted_api, shared) -> None:
    scripted_api.add(reply(text("hi")))
    provider = ClaudeAgentProvider(scripted_api.settings())
    assert (await provider.generate("hi")).text == "hi"


async def test_closes_its_provider(scripted_api, shared) -> None:
    scripted_api.add(reply(text("hi")))
    async with ClaudeAgentProvider(scripted_api.settings()) as provider:
        assert (await provider.generate("hi")).text == "hi"


async def test_fails_and_keeps_a_provider_open(scripted_api, shared) -> None:
    scripted_api.add(reply(text("hi")))
    KEPT.append(ClaudeAgentProvider(scripted_api.settings()))
    assert (await KEPT[-1].generate("hi")).text == "bye"


def test_leaves_a_query_dir_behind(scripted_api) -> None:
    tempfile.mkdtemp(prefix="sf-provider-")
"""


def test_what_a_test_leaves_running_fails_it_with_a_message_naming_it(tmp_path: Path) -> None:
    project = write_project(tmp_path / "leaky", {"test_leaks.py": LEAKS})

    run = run_pytest(project)

    assert run.outcomes == {
        "test_keeps_a_provider_open": "error",
        "test_drops_its_provider": "passed",
        "test_closes_its_provider": "passed",
        "test_fails_and_keeps_a_provider_open": "failed",
        "test_leaves_a_query_dir_behind": "error",
    }, run.output
    assert "ERROR at teardown of test_keeps_a_provider_open" in run.output
    assert "this test left 1 Claude Code CLI process(es) running (now stopped)" in run.output
    assert "_bundled/claude" in run.output  # the process, named by pid and command line
    assert "`async with ClaudeAgentProvider(...) as provider:`" in run.output
    assert "ERROR at teardown of test_leaves_a_query_dir_behind" in run.output
    assert "this test left 1 per-query temp dir(s) behind" in run.output
    # A failed test is not failed again for what it left: it is only cleaned up.
    assert "ERROR at teardown of test_fails_and_keeps_a_provider_open" not in run.output


MODULE_LEVEL = """
from sf_provider import ClaudeAgentProvider
from sf_provider._pytest_support import cli_processes
from sf_provider.testing import reply, text

CACHE = {}


def cached_provider():
    # An application's module-level provider, never closed; its own (default) settings.
    return CACHE.setdefault("provider", ClaudeAgentProvider())


async def test_a_kept_provider_answers(scripted_api) -> None:
    scripted_api.add(reply(text("first")))
    assert (await cached_provider().generate("hi")).text == "first"
    assert len(cli_processes()) == 1  # its warm process, kept while the test's loop runs


def test_its_process_stopped_with_that_tests_event_loop() -> None:
    assert cli_processes() == {}


async def test_it_answers_the_next_test_on_a_new_process(scripted_api) -> None:
    scripted_api.add(reply(text("second")))
    assert (await cached_provider().generate("hi")).text == "second"
"""


def test_a_provider_kept_across_tests_leaves_nothing_when_each_test_has_its_own_loop(
    tmp_path: Path,
) -> None:
    """What docs/testing.md says: the end of the test's event loop stops the warm process of
    a provider kept alive (a module-level cache), so there is nothing to catch or fail; only a
    loop that outlives the test keeps it (test_what_a_test_leaves_running_fails_it...)."""
    project = write_project(tmp_path / "kept", {"test_kept.py": MODULE_LEVEL})

    run = run_pytest(project)

    assert run.outcomes == {
        "test_a_kept_provider_answers": "passed",
        "test_its_process_stopped_with_that_tests_event_loop": "passed",
        "test_it_answers_the_next_test_on_a_new_process": "passed",
    }, run.output


ANY_RUNNER = """
import asyncio
import os

import pytest
from sf_provider import ClaudeAgentProvider, ProviderSettings
from sf_provider.testing import reply, text


async def ask(settings: ProviderSettings) -> str:
    async with ClaudeAgentProvider(settings) as provider:
        return (await provider.generate("hi")).text


def test_a_sync_test_can_use_it(scripted_api) -> None:
    scripted_api.add(reply(text("from a sync test")))
    assert asyncio.run(ask(scripted_api.settings())) == "from a sync test"


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_anyio_test_can_use_it(scripted_api, anyio_backend) -> None:
    scripted_api.add(reply(text("from anyio")))
    assert await ask(scripted_api.settings()) == "from anyio"


async def ask_through_a_fixture(provider):
    return (await provider.generate("hi")).text


@pytest.fixture
def provider(scripted_api):
    return ClaudeAgentProvider(scripted_api.settings(warm_processes=0))


async def test_a_fixture_of_the_app_can_use_it(scripted_api, provider) -> None:
    scripted_api.add(reply(text("through a fixture")))
    assert await ask_through_a_fixture(provider) == "through a fixture"


async def test_a_provider_with_its_own_settings_reaches_the_script(scripted_api) -> None:
    scripted_api.add(reply(text("scripted")))
    # The application's own settings: nothing points them at the scripted API.
    assert await ask(ProviderSettings(model="claude-x")) == "scripted"
    [request] = scripted_api.requests
    assert "real-token" not in str(request.headers)
    assert os.environ["HOME"] != os.environ["OUTER_HOME"]
    assert "ANTHROPIC_AUTH_TOKEN" not in os.environ


def test_the_environment_is_restored_after_the_test() -> None:
    assert os.environ["HOME"] == os.environ["OUTER_HOME"]
    assert os.environ["ANTHROPIC_AUTH_TOKEN"] == "real-token"
    assert "ANTHROPIC_BASE_URL" not in os.environ
"""


def test_the_fixture_serves_sync_anyio_and_fixture_tests_and_the_apps_own_settings(
    tmp_path: Path,
) -> None:
    project = write_project(tmp_path / "runners", {"test_runners.py": ANY_RUNNER})
    env = isolated_env(tmp_path / "outside", ANTHROPIC_AUTH_TOKEN="real-token")
    env["OUTER_HOME"] = env["HOME"]

    run = run_pytest(project, env=env)

    assert run.outcomes == {
        "test_a_sync_test_can_use_it": "passed",
        "test_an_anyio_test_can_use_it[asyncio]": "passed",
        "test_a_fixture_of_the_app_can_use_it": "passed",
        "test_a_provider_with_its_own_settings_reaches_the_script": "passed",
        "test_the_environment_is_restored_after_the_test": "passed",
    }, run.output


def test_the_plugin_is_documented_in_the_fixture_list(tmp_path: Path) -> None:
    project = write_project(tmp_path / "listing", {"test_nothing.py": "def test_x(): pass\n"})

    run = run_pytest(project, "--fixtures")

    assert "scripted_api" in run.output
    assert "A started scripted Messages API with an empty script" in run.output


FAILING_QUERY = """
import pytest
from sf_provider import ClaudeAgentProvider
from sf_provider.testing import http_error


async def test_the_api_is_busy(scripted_api) -> None:
    scripted_api.add(http_error(429, "slow down"))
    await ClaudeAgentProvider(scripted_api.settings()).generate("hi")
"""


def test_a_provider_error_in_an_app_test_shows_the_apps_line_not_the_providers_source(
    tmp_path: Path,
) -> None:
    """pytest printed ~250 lines, most of them `ClaudeAgentProvider._run`'s source; the
    provider's frames are hidden for its own documented errors (`--fulltrace` shows them)."""
    project = write_project(tmp_path / "app", {"test_busy.py": FAILING_QUERY})

    short = run_pytest(project)
    full = run_pytest(project, "--fulltrace")

    assert short.outcomes == full.outcomes == {"test_the_api_is_busy": "failed"}
    assert "RateLimitError" in short.output and 'generate("hi")' in short.output
    assert "collector = ResultCollector()" not in short.output
    assert "collector = ResultCollector()" in full.output
    assert len(short.output.splitlines()) < len(full.output.splitlines()) / 3


INTERRUPTED = """
import os
import signal


def test_interrupted(scripted_api) -> None:
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C
"""


def test_an_interrupted_run_leaves_no_dir_behind(tmp_path: Path) -> None:
    """Ctrl-C skips the test's teardown: it left an empty `scripted-api-*` dir in TMPDIR."""
    import sf_provider

    project = write_project(tmp_path / "app", {"test_interrupted.py": INTERRUPTED})
    under_test = str(Path(sf_provider.__file__).parents[1])  # this checkout's sf_provider
    env = isolated_env(tmp_path / "outside", PYTHONPATH=under_test)

    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"]
    run = subprocess.run(
        command, cwd=project, env=env, capture_output=True, text=True, timeout=600, check=False
    )

    assert "KeyboardInterrupt" in run.stdout, run.stdout + run.stderr
    assert run.returncode == 2, run.stdout + run.stderr
    assert list((tmp_path / "outside" / "tmp").glob("scripted-api-*")) == []
