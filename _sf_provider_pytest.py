"""sf-provider's pytest plugin (entry point `sf_provider`): the `scripted_api` fixture.

Installing sf-provider is enough. A test that asks for `scripted_api` gets a started
`sf_provider.testing.ScriptedMessagesAPI` with an empty script and an offline environment; an
`async def` test that uses it runs on asyncio without any marker, unless an async plugin of the
project (anyio, pytest-asyncio, ...) runs it; and a Claude Code CLI process or per-query temp dir
it leaves behind fails it. See docs/testing.md.

A module of its own outside the `sf_provider` package, the way Hypothesis ships its plugin:
pytest loads it in every project where sf-provider is installed, and importing the package costs
about a second. So nothing here imports it until a test uses the fixture, and a test that does
not is left exactly as it was (`-p no:sf_provider` turns the plugin off).
"""

from __future__ import annotations

import inspect
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from sf_provider._pytest_support import OfflineTest
    from sf_provider.testing import ScriptedMessagesAPI

_FIXTURE = "scripted_api"
_TEST: pytest.StashKey[OfflineTest] = pytest.StashKey()
_PASSED: pytest.StashKey[bool] = pytest.StashKey()


@pytest.fixture
def scripted_api(request: pytest.FixtureRequest) -> Iterator[ScriptedMessagesAPI]:
    """A started scripted Messages API with an empty script (`sf_provider.testing`).

    Script it with `scripted_api.add(reply(tool_use(...)), reply(text(...)))`, point a provider
    at it with `ClaudeAgentProvider(scripted_api.settings())`, read what the model was sent in
    `scripted_api.requests`. For the test, the process's environment points the CLI at it too
    (`ANTHROPIC_BASE_URL`, a placeholder key, no retries, no non-essential traffic, HOME,
    CLAUDE_CONFIG_DIR and TMPDIR in a temp dir of the test's own, real credentials removed).
    A CLI process or per-query temp dir the test leaves behind fails it, and so does a request
    the script could not answer (`scripted_api.errors`; a script that ran out fails it with
    `ScriptExhaustedError`).
    """
    from sf_provider._pytest_support import OfflineTest

    test = OfflineTest.start()
    request.node.stash[_TEST] = test
    try:
        yield test.api
    finally:
        test.stop_server()


def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run an `async def` test that uses `scripted_api` and that no async plugin took.

    anyio's plugin (a test marked `anyio`) runs first (tryfirst), and pytest-asyncio,
    pytest-trio and the like hand pytest a plain function in place of the coroutine, so only a
    coroutine nobody claimed gets here, before pytest's own hook (trylast) refuses it.
    """
    function = pyfuncitem.obj
    if _FIXTURE not in pyfuncitem.fixturenames or not inspect.iscoroutinefunction(function):
        return None
    if hasattr(function, "hypothesis"):
        return None  # Hypothesis wraps it; left to pytest (and its message)
    from sf_provider._pytest_support import run_coroutine_test

    run_coroutine_test(function, pyfuncitem.funcargs)
    return True


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call" and _TEST in item.stash:
        item.stash[_PASSED] = report.passed
        errors = item.stash[_TEST].api.errors
        # What the script could not answer, beside the failure, unless that says it already
        # (a framework may have wrapped the query's error into one of its own).
        if report.failed and any(e not in report.longreprtext for e in errors):
            from sf_provider._pytest_support import script_problems

            report.sections.append(("scripted API", script_problems(item.stash[_TEST].api)))
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
    """Once every fixture of the test is torn down (its event loop closed too), stop what it
    left running and fail it for that, or for what its script could not answer (a script that
    ran out: `ScriptExhaustedError`): only when it passed, a failure says enough already."""
    try:
        yield
    finally:
        test = item.stash.get(_TEST, None)
        if test is not None:
            del item.stash[_TEST]
            problems = test.finish()
            passed: bool = item.stash.get(_PASSED, False)
            if problems and passed:
                __tracebackhide__ = True
                from sf_provider._pytest_support import fail

                fail(test.api, problems)
