"""`sf-provider check`: the capability report as a table or JSON, exit codes, and the probe.

The registry under test is `fixtures.check_tools:registry` (`tests/` is on `sys.path` here and
on `PYTHONPATH` for subprocesses): `search` and `count_words` in group `read`, and the mutating,
gated `delete_note` in group `admin`, which the registry's settings disable.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest

from sf_provider import FunctionTool
from sf_provider._check_cli import sample_arguments
from sf_provider.cli import main
from sf_provider.testing import ScriptedMessagesAPI, http_error, reply, text

TESTS_DIR = Path(__file__).resolve().parents[1]
TOOLS = "fixtures.check_tools:registry"
SECRET = "sk-ant-check-cli-secret-0123456789"


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch, no_login: Path) -> Iterator[None]:
    """No credentials or group switches from outside; sys.path and the fixture calls restored."""
    monkeypatch.delenv("SF_PROVIDER_GROUP_ADMIN", raising=False)
    monkeypatch.delenv("SF_PROVIDER_GROUP_READ", raising=False)
    monkeypatch.setattr(sys, "path", [*sys.path])
    from fixtures import check_tools

    check_tools.CALLS.clear()
    yield
    check_tools.CALLS.clear()


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """An API key in the environment, as a user who has one would have it."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    return SECRET


def _check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["check", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _row(out: str, tool: str) -> list[str]:
    line = next(line for line in out.splitlines() if line.split()[:1] == [tool])
    return line.split()


def _calls() -> list[tuple[str, dict[str, Any]]]:
    from fixtures import check_tools

    return list(check_tools.CALLS)


# -- the table


@pytest.mark.usefixtures("api_key")
def test_the_table_has_a_row_per_tool_with_its_facts(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _check(capsys, "--tools", TOOLS)

    assert code == 0
    assert _row(out, "name") == [
        "name", "group", "registered", "exposed", "executor", "schema", "gated",
    ]  # fmt: skip
    assert _row(out, "search") == ["search", "read", "yes", "yes", "yes", "valid", "-"]
    assert _row(out, "count_words") == ["count_words", "read", "yes", "yes", "yes", "valid", "-"]
    assert _row(out, "delete_note") == [
        "delete_note", "admin", "(disabled)", "yes", "no", "yes", "valid", "yes",
    ]  # fmt: skip


@pytest.mark.usefixtures("api_key")
def test_the_table_shows_the_cli_the_auth_method_and_the_mode(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, out, _ = _check(capsys, "--tools", TOOLS)

    lines = out.splitlines()
    assert lines[0].startswith("CLI   found  ") and "claude" in lines[0] and "version " in lines[0]
    assert lines[1] == "auth  api-key  (ANTHROPIC_API_KEY is set)"
    assert lines[2] == "mode  executor"
    assert lines[-1] == "compatible: yes"


def test_the_table_never_shows_the_secret(capsys: pytest.CaptureFixture[str], api_key: str) -> None:
    _, out, err = _check(capsys, "--tools", TOOLS)

    assert api_key not in out + err


@pytest.mark.usefixtures("api_key")
def test_a_missing_required_tool_is_a_problem_with_its_fix_and_exits_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _check(capsys, "--tools", TOOLS, "--require", "search, translate")

    assert code == 1
    assert "required: search, translate" in out
    assert "problems (1):\n- required tool 'translate' is not registered\n  fix: register a " in out
    assert out.rstrip().endswith("compatible: no")


@pytest.mark.usefixtures("api_key")
def test_a_required_tool_of_a_disabled_group_says_which_switch_enables_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _check(capsys, "--tools", TOOLS, "--require", "delete_note")

    assert code == 1
    assert "- required tool 'delete_note' is registered but not exposed in this scope" in out
    assert "fix: its group 'admin' is disabled: set SF_PROVIDER_GROUP_ADMIN=1" in out


@pytest.mark.usefixtures("api_key")
def test_the_group_switch_in_the_environment_makes_the_requirement_met(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SF_PROVIDER_GROUP_ADMIN", "1")

    code, out, _ = _check(capsys, "--tools", TOOLS, "--require", "delete_note")

    assert code == 0
    assert _row(out, "delete_note")[1:3] == ["admin", "yes"]


def test_missing_authentication_is_a_problem_and_exits_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _check(capsys, "--tools", TOOLS)

    assert code == 1
    assert "auth  NOT CONFIGURED" in out
    assert "- authentication: no ANTHROPIC_API_KEY" in out


@pytest.mark.usefixtures("api_key")
def test_without_tools_the_table_says_how_to_name_them(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _check(capsys)

    assert code == 0
    assert "tools: none (pass --tools MODULE:ATTR" in out


# -- JSON


@pytest.mark.usefixtures("api_key")
def test_json_is_the_report_plus_compatible(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _check(capsys, "--tools", TOOLS, "--require", "search", "--json")

    data = json.loads(out)
    assert code == 0
    assert data["compatible"] is True
    assert data["problems"] == [] and data["required"] == ["search"]
    assert [t["name"] for t in data["tools"]] == ["search", "count_words", "delete_note"]
    assert data["auth"]["method"] == "api-key" and data["cli"]["found"] is True
    assert "probe" not in data


@pytest.mark.usefixtures("api_key")
def test_json_of_an_incompatible_request_lists_the_problems_and_exits_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _check(capsys, "--tools", TOOLS, "--require", "translate", "--json")

    data = json.loads(out)
    assert code == 1
    assert data["compatible"] is False
    assert data["problems"] == ["required tool 'translate' is not registered"]


def test_json_never_contains_the_secret(capsys: pytest.CaptureFixture[str], api_key: str) -> None:
    _, out, _ = _check(capsys, "--tools", TOOLS, "--json")

    assert api_key not in out


# -- usage errors


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("no-colon", "takes 'module:attr'"),
        ("fixtures.check_tools:nope", "has no attribute 'nope'"),
        ("fixtures.check_tools:__name__", "must be a ToolRegistry"),
        ("no_such_module_for_check:registry", "No module named 'no_such_module_for_check'"),
    ],
    ids=["no-colon", "missing-attribute", "wrong-type", "missing-module"],
)
def test_an_unloadable_tools_spec_exits_2_saying_why(
    capsys: pytest.CaptureFixture[str], spec: str, said: str
) -> None:
    code, out, err = _check(capsys, "--tools", spec)

    assert code == 2
    assert out == ""
    assert err.startswith(f"sf-provider check: cannot load --tools {spec!r}: ")
    assert said in err


def test_live_without_probe_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _check(capsys, "--live")

    assert code == 2 and out == ""
    assert "--live only applies together with --probe" in err


# -- the probe's made-up arguments


def test_probe_arguments_fill_required_properties_from_the_schema() -> None:
    tool = FunctionTool(
        name="book",
        input_schema={
            "type": "object",
            "properties": {
                "city": {"type": "string", "enum": ["Paris", "Tokyo"]},
                "nights": {"type": "integer", "minimum": 2},
                "when": {"$ref": "#/$defs/When"},
                "note": {"type": "string"},
            },
            "required": ["city", "nights", "when"],
            "$defs": {
                "When": {
                    "type": "object",
                    "properties": {"day": {"type": "string", "format": "date"}},
                    "required": ["day"],
                }
            },
        },
    )

    arguments = sample_arguments(tool)

    assert arguments == {"city": "Paris", "nights": 2, "when": {"day": "2024-01-01"}}
    assert tool.args_validator.is_valid(arguments)


def test_probe_arguments_fall_back_to_an_empty_object_when_only_that_validates() -> None:
    digits = {"type": "string", "pattern": "^[0-9]+$"}
    tool = FunctionTool(
        name="odd",
        input_schema={
            "anyOf": [
                {"properties": {"code": digits}, "required": ["code"]},
                {"maxProperties": 0},
            ]
        },
    )
    assert not tool.args_validator.is_valid({"code": "example"})

    assert sample_arguments(tool) == {}


def test_probe_arguments_are_kept_when_nothing_validates() -> None:
    digits = {"type": "string", "pattern": "^[0-9]+$"}
    tool = FunctionTool(
        name="odd", input_schema={"properties": {"code": digits}, "required": ["code"]}
    )

    assert sample_arguments(tool) == {"code": "example"}, "the tool's validation will say why"


# -- the probe (the real bundled CLI)


@pytest.mark.cli
@pytest.mark.usefixtures("api_key")
def test_the_offline_probe_calls_a_read_only_tool_through_the_cli(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _check(capsys, "--tools", TOOLS, "--probe")

    assert code == 0, out
    assert "probe (offline: the real CLI against a scripted Messages API on 127.0.0.1)" in out
    assert '  tool call    search({"query": "example"})' in out
    assert '  tool result  [ok] ["note about example"]' in out
    assert "  ok in " in out and out.rstrip().endswith("ms: 'ok'")
    assert _calls() == [("search", {"query": "example", "limit": 3})]


@pytest.mark.cli
def test_the_offline_probe_needs_no_credentials_of_the_user(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _check(capsys, "--tools", TOOLS, "--probe", "--json")

    data = json.loads(out)
    assert data["probe"]["ok"] is True and data["probe"]["tool"] == "search"
    assert data["compatible"] is False, "the report still says the user cannot authenticate"
    assert code == 1


@pytest.mark.cli
def test_offline_leaves_credentials_out_of_the_verdict_so_ci_can_pass(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _check(capsys, "--tools", TOOLS, "--probe", "--offline")

    assert code == 0
    assert "auth  not configured (not part of the verdict: --offline)" in out
    assert "compatible: yes" in out and "ok in" in out
    # Anything else missing still fails it.
    code, out, _ = _check(capsys, "--tools", TOOLS, "--offline", "--require", "nope")
    assert code == 1 and "required tool 'nope' is not registered" in out


def test_live_and_offline_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _check(capsys, "--probe", "--live", "--offline")

    assert code == 2 and "exclude each other" in err


@pytest.mark.cli
@pytest.mark.usefixtures("api_key")
def test_the_offline_probe_never_calls_a_mutating_tool(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _check(
        capsys, "--tools", "fixtures.check_tools:mutating_only", "--probe", "--json"
    )

    probe = json.loads(out)["probe"]
    assert code == 0
    assert probe["ok"] is True and probe["tool"] is None and probe["text"] == "ok"
    assert _calls() == []
    # Said, not only implied: no tool went through the bridge.
    code, out, _ = _check(capsys, "--tools", "fixtures.check_tools:mutating_only", "--probe")
    assert code == 0
    assert "tool call    none: no tool the probe may call" in out


@pytest.mark.cli
@pytest.mark.anyio
@pytest.mark.usefixtures("api_key")
async def test_the_live_probe_uses_the_users_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        code = await anyio.to_thread.run_sync(main, ["check", "--probe", "--live"])
    out = capsys.readouterr().out

    assert code == 0, out
    assert "probe (live: the real Messages API with your credentials)" in out
    assert out.rstrip().endswith("ms: 'ok'")
    assert "Reply with the word ok." in str(api.requests[0].messages)
    assert api.requests[0].headers.get("x-api-key") == SECRET


@pytest.mark.cli
@pytest.mark.anyio
@pytest.mark.usefixtures("api_key")
async def test_a_failed_probe_prints_the_error_and_exits_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A function script: the CLI asks again after a 401, and every answer must be the same.
    async with ScriptedMessagesAPI(lambda _request: http_error(401, "invalid x-api-key")) as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        code = await anyio.to_thread.run_sync(main, ["check", "--probe", "--live"])
    out = capsys.readouterr().out

    assert code == 1
    assert "compatible: yes" in out, "the report was fine; only the probe failed"
    assert "  FAILED after " in out and "ms: AuthenticationError: " in out
    assert api.requests, "the probe reached the API"


# -- as a command


def test_the_command_runs_as_a_subprocess_with_the_tools_on_pythonpath() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SF_PROVIDER_GROUP_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS_DIR), env.get("PYTHONPATH")]))
    env["ANTHROPIC_API_KEY"] = SECRET
    done = subprocess.run(
        [sys.executable, "-m", "sf_provider.cli", "check", "--tools", TOOLS, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )

    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["compatible"] is True
    assert [t["name"] for t in data["tools"]] == ["search", "count_words", "delete_note"]
    assert SECRET not in done.stdout


SUNNY_TOOLS = """
from sf_provider import FunctionTool, ToolRegistry

weather = FunctionTool(
    name="weather", description="d", read_only=True, executor=lambda a: "\\u2600 sunny"
)
registry = ToolRegistry([weather])
"""


@pytest.mark.cli
@pytest.mark.parametrize("output", ["table", "json"])
def test_the_command_reports_to_a_terminal_that_cannot_show_every_character(
    output: str, tmp_path: Path
) -> None:
    # An ASCII or latin-1 locale (or a Windows console): a tool result holding "☀" ended the
    # command in a UnicodeEncodeError traceback after the probe had passed.
    (tmp_path / "sunny_tools.py").write_text(SUNNY_TOOLS, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SF_PROVIDER_GROUP_")}
    env.update(PYTHONPATH=str(tmp_path), PYTHONIOENCODING="ascii")
    command = [sys.executable, "-m", "sf_provider.cli", "check", "--tools", "sunny_tools:registry"]
    command += ["--probe", "--offline", *(["--json"] if output == "json" else [])]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False, env=env)

    assert done.returncode == 0, done.stderr
    if output == "json":
        assert json.loads(done.stdout)["probe"]["tool_output"] == "\u2600 sunny"
    else:
        assert "  tool result  [ok] \\u2600 sunny" in done.stdout
