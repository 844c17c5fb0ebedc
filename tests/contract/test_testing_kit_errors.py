"""The test kit says what went wrong with a script, through the real CLI: a scripted call of a tool
the request does not offer, and a script that runs out, reach the test author in the kit's own
words (the provider's error, `errors`, the `scripted_api` fixture's failure), not as the CLI's
"No such tool available" sent to the model or its "server-side issue, try again" text."""

from __future__ import annotations

from pathlib import Path

import pytest
from fresh_project import run_pytest, write_project

from sf_provider import APIError, ClaudeAgentProvider, FunctionTool
from sf_provider.testing import ScriptedMessagesAPI, reply, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

runs: list[str] = []


def add_todo(title: str) -> str:
    """Add a to-do item."""
    runs.append(title)
    return f"added {title}"


def remove_todo(title: str) -> str:
    """Remove a to-do item."""
    runs.append(title)
    return f"removed {title}"


TOOLS = [FunctionTool.from_function(add_todo), FunctionTool.from_function(remove_todo)]


async def test_a_scripted_call_of_a_tool_not_offered_fails_the_query_naming_both() -> None:
    runs.clear()
    script = [reply(tool_use("delete_todo", {"title": "milk"})), reply(text("Done."))]
    async with (
        ScriptedMessagesAPI(script) as api,
        ClaudeAgentProvider(api.settings(warm_processes=0)) as provider,
    ):
        with pytest.raises(APIError) as info:
            await provider.generate("Remove milk.", tools=TOOLS)

    problem = (
        "ScriptedMessagesAPI: the scripted reply to request #0 calls 'delete_todo', a tool the "
        "request does not offer (offered: add_todo, remove_todo)"
    )
    assert problem in str(info.value)
    assert "server-side issue" not in str(info.value)
    assert [e.split(";")[0] for e in api.errors] == [problem]
    assert len(api.requests) == 1, "the query ends there: no tool ran, no retry"
    assert runs == []


async def test_a_call_of_an_unknown_tool_on_purpose_reaches_the_model_as_the_clis_error() -> None:
    script = [reply(tool_use("delete_todo", {"title": "milk"}, offered=False)), reply(text("Ok"))]
    async with (
        ScriptedMessagesAPI(script) as api,
        ClaudeAgentProvider(api.settings(warm_processes=0)) as provider,
    ):
        result = await provider.generate("Remove milk.", tools=TOOLS)

    assert result.text == "Ok"
    [sent] = api.requests[1].results()
    assert sent.is_error and "No such tool available" in sent.text
    assert api.errors == []


async def test_a_script_that_runs_out_fails_in_the_kits_words_without_a_retry() -> None:
    async with (
        ScriptedMessagesAPI([reply(tool_use("add_todo", {"title": "milk"}))]) as api,
        # Retries allowed: the kit's answer is one the CLI never retries.
        ClaudeAgentProvider(api.settings(warm_processes=0, max_retries=2)) as provider,
    ):
        with pytest.raises(APIError) as info:
            await provider.generate("Add milk.", tools=TOOLS)

    assert "ScriptedMessagesAPI: no scripted reply left for request #1" in str(info.value)
    assert "server-side issue" not in str(info.value) and "try again" not in str(info.value)
    assert info.value.status == 410 and not info.value.retryable
    assert len(api.requests) == 2
    assert api.errors[0].startswith("ScriptedMessagesAPI: no scripted reply left for request #1")


TYPO = """
import pytest
from sf_provider import APIError, ClaudeAgentProvider, FunctionTool
from sf_provider.testing import ScriptedMessagesAPI, reply, text, tool_use


def add_todo(title: str) -> str:
    "Add a to-do item."
    return "added"


async def test_removes_milk(scripted_api: ScriptedMessagesAPI) -> None:
    scripted_api.add(reply(tool_use("delete_todo", {"title": "milk"})), reply(text("Done.")))
    provider = ClaudeAgentProvider(scripted_api.settings())
    await provider.generate("Remove milk.", tools=[FunctionTool.from_function(add_todo)])


async def test_catches_every_error(scripted_api: ScriptedMessagesAPI) -> None:
    provider = ClaudeAgentProvider(scripted_api.settings())
    with pytest.raises(APIError):  # the app's own error handling, say
        await provider.generate("Hello?")


async def test_catches_a_typo(scripted_api: ScriptedMessagesAPI) -> None:
    scripted_api.add(reply(tool_use("delete_todo", {"title": "milk"})))
    provider = ClaudeAgentProvider(scripted_api.settings())
    with pytest.raises(APIError):
        await provider.generate("Remove milk.", tools=[FunctionTool.from_function(add_todo)])
"""


def test_the_fixture_fails_a_test_in_the_kits_words_even_when_the_test_caught_the_error(
    tmp_path: Path,
) -> None:
    project = write_project(tmp_path / "app", {"test_todo.py": TYPO})

    run = run_pytest(project)

    assert run.outcomes == {
        "test_removes_milk": "failed",
        "test_catches_every_error": "error",
        "test_catches_a_typo": "error",
    }
    # The failed test: the provider's error says it.
    assert "calls 'delete_todo', a tool the request does not offer (offered: add_todo)" in (
        run.output
    )
    # The test that caught the error fails at its teardown, naming the request.
    assert "the scripted API could not answer as scripted" in run.output
    assert "no scripted reply left for request #0 (the script held 0 item(s))" in run.output
    # A script that ran out fails it as one (`ScriptExhaustedError`); another mistake plainly.
    details = run.output.split("short test summary info")[0].split(" ERROR at teardown of ")
    teardown = {section.split(" ", 1)[0]: section for section in details[1:]}
    exhausted = "E   sf_provider.testing.ScriptExhaustedError: sf-provider: the scripted API"
    assert exhausted in teardown["test_catches_every_error"]
    assert "ScriptExhaustedError" not in teardown["test_catches_a_typo"]
    assert "server-side issue" not in run.output
