"""`sf-provider scenarios run` (a report for CI, exit status, JUnit XML) and `scenarios record`
(recorded offline here: the upstream is a scripted API)."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from sf_provider.cli import main
from sf_provider.scenarios import load_scenario
from sf_provider.testing import RecordedRequest, Reply, ScriptedMessagesAPI, reply, text, tool_use

pytestmark = pytest.mark.cli

CONTRACTS = Path(__file__).parents[2] / "contracts" / "scenarios"

APP_TOOLS = '''
from sf_provider import FunctionTool


def get_weather(city: str) -> dict[str, object]:
    """Current weather for a city."""
    return {"city": city, "celsius": 21}


tools = [FunctionTool.from_function(get_weather)]
'''

APP_SCENARIO = {
    "name": "weather in Paris",
    "prompt": "Weather in Paris?",
    "tools": [{"name": "get_weather"}],
    "replies": [
        {"content": [{"type": "tool_use", "name": "get_weather", "input": {"city": "Paris"}}]},
        {"content": [{"type": "text", "text": "21 °C in Paris."}]},
    ],
    "expect": {
        "text": "21 °C in Paris.",
        "executor_calls": {"get_weather": [{"city": "Paris"}]},
    },
}


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project directory (the working directory) with its tools in `app_tools.py`."""
    (tmp_path / "app_tools.py").write_text(APP_TOOLS, "utf-8")
    (tmp_path / "scenarios").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def write(path: Path, scenario: dict[str, object]) -> Path:
    path.write_text(json.dumps(scenario), "utf-8")
    return path


def test_run_reports_each_scenario_and_exits_1_when_one_does_not_hold(
    app: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(CONTRACTS / "01_one_tool_round_trip.json", app / "scenarios")
    wrong = json.loads((CONTRACTS / "09_text_only.json").read_text("utf-8"))
    wrong["expect"]["text"] = "something else"
    write(app / "scenarios" / "09_wrong.json", wrong)

    code = main(["scenarios", "run", "scenarios", "--junit-xml", "reports/ci/report.xml"])

    out = capsys.readouterr().out
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith("PASS  one tool round trip  (scenarios/01_one_tool_round_trip.json")
    assert lines[1].startswith(f"FAIL  {wrong['name']}  (scenarios/09_wrong.json")
    assert lines[2].startswith("      - text: expected 'something else', got ")
    assert lines[-1] == "2 scenario(s): 1 passed, 1 failed"
    suite = ET.parse(app / "reports" / "ci" / "report.xml").getroot()  # its dir was created
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "1", "0")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert cases["one tool round trip"].find("failure") is None
    failure = cases[str(wrong["name"])].find("failure")
    assert failure is not None
    assert failure.get("message", "").startswith("text: expected 'something else'")


def test_run_binds_the_apps_tools_named_by_tools(
    app: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(app / "scenarios" / "paris.json", APP_SCENARIO)

    code = main(["scenarios", "run", str(path), "--tools", "app_tools:tools"])

    out = capsys.readouterr().out
    assert code == 0, out
    assert out.splitlines()[-1] == "1 scenario(s): 1 passed, 0 failed"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing"], "missing: no such file or directory"),
        (["scenarios"], "no scenario file (*.json) in this directory"),
        (["scenarios/broken.json"], "broken.json: not JSON"),
        (["scenarios/broken.json", "--tools", "nowhere:tools"], "cannot load --tools"),
    ],
)
def test_run_misused_exits_2_and_says_why(
    app: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    if "broken.json" in args[0]:
        (app / "scenarios" / "broken.json").write_text("{", "utf-8")

    assert main(["scenarios", "run", *args]) == 2
    assert message in capsys.readouterr().err


def test_record_writes_a_scenario_that_run_replays(
    app: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-recording")
    script = [reply(tool_use("get_weather", {"city": "Paris"})), reply(text("21 °C in Paris."))]
    # A sync test: the command runs its own event loop; the "live" API serves from a thread.
    with ScriptedMessagesAPI(script) as upstream:
        code = main(
            [
                "scenarios",
                "record",
                "--upstream",
                upstream.base_url,
                "--tools",
                "app_tools:tools",
                "--prompt",
                "Weather in Paris?",
                "--out",
                "scenarios/paris.json",
            ]
        )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "recorded 2 model turn(s) (2 replies, 0 errors; 1 tool call(s))" in out
    assert "sf-provider scenarios run scenarios/paris.json --tools app_tools:tools" in out
    scenario = load_scenario(app / "scenarios" / "paris.json")
    assert scenario.name == "paris"
    assert [t.name for t in scenario.tools] == ["get_weather"]
    assert [r.headers["x-api-key"] for r in upstream.requests] == ["sk-ant-recording"] * 2

    assert main(["scenarios", "run", "scenarios/paris.json", "--tools", "app_tools:tools"]) == 0


def test_record_keeps_an_existing_file_unless_forced(
    app: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    existing = write(app / "scenarios" / "paris.json", APP_SCENARIO)
    args = ["scenarios", "record", "--upstream", "http://127.0.0.1:9", "--prompt", "Hi?"]

    assert main([*args, "--out", str(existing)]) == 2
    assert "exists; pass --force to replace it" in capsys.readouterr().err
    assert json.loads(existing.read_text("utf-8")) == APP_SCENARIO


def test_record_needs_live_or_an_upstream(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["scenarios", "record", "--prompt", "Hi?", "--out", "x.json"])

    assert exit_.value.code == 2
    assert "one of the arguments --live --upstream is required" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "value", "problem"),
    [
        ("--max-turns", "0", "must be 1 or more, got '0'"),
        ("--max-turns", "-3", "must be 1 or more, got '-3'"),
        ("--max-turns", "two", "must be 1 or more, got 'two'"),
        ("--model", "", "must not be empty"),
        ("--name", "", "must not be empty"),
    ],
)
def test_record_refuses_an_option_value_it_cannot_use(
    app: Path, capsys: pytest.CaptureFixture[str], option: str, value: str, problem: str
) -> None:
    # `--max-turns 0` and `--model ""` were dropped, then refused after start-up with a
    # multi-line pydantic message (exit status 1); `--name ""` was dropped (the file name).
    args = ["--upstream", "http://127.0.0.1:9", "--prompt", "Hi?", "--out", "scenarios/hi.json"]
    with pytest.raises(SystemExit) as exit_:
        main(["scenarios", "record", *args, option, value])

    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"sf-provider scenarios record: error: argument {option}: {problem}" in err
    assert not (app / "scenarios" / "hi.json").exists()


GROUPED_TOOLS = """
from sf_provider import FunctionTool, ToolRegistry


def purge() -> str:
    \"\"\"Delete everything.\"\"\"
    return "gone"


registry = ToolRegistry([FunctionTool.from_function(purge, group="admin")])
"""


@pytest.mark.parametrize("command", ["run", "record"])
def test_an_unreadable_group_switch_exits_2_with_one_line(
    app: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: str,
) -> None:
    """`run` reported a traceback for every scenario (and exited 1), `record` crashed with one."""
    (app / "grouped_tools.py").write_text(GROUPED_TOOLS, "utf-8")
    path = write(app / "scenarios" / "paris.json", APP_SCENARIO)
    monkeypatch.setenv("SF_PROVIDER_GROUP_ADMIN", "maybe")
    args = (
        [str(path)]
        if command == "run"
        else ["--upstream", "http://127.0.0.1:9", "--prompt", "Hi?", "--out", "x.json"]
    )

    assert main(["scenarios", command, *args, "--tools", "grouped_tools:registry"]) == 2

    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(
        f"sf-provider scenarios {command}: SF_PROVIDER_GROUP_ADMIN='maybe' is not a switch"
    )
    assert len(captured.err.splitlines()) == 1, captured.err


def test_run_with_one_broken_file_runs_none_and_exits_2(
    app: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A broken file is a setup error: nothing runs, no JUnit file, exit status 2."""
    write(app / "scenarios" / "a_good.json", APP_SCENARIO)
    (app / "scenarios" / "b_broken.json").write_text('{"name": "broken", "prompt": ', "utf-8")

    code = main(
        ["scenarios", "run", "scenarios", "--tools", "app_tools:tools", "--junit-xml", "r.xml"]
    )

    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert captured.err.startswith("sf-provider scenarios run: scenarios/b_broken.json: not JSON")
    assert captured.err.rstrip().endswith("(no scenario was run)")
    assert not (app / "r.xml").exists()


@pytest.mark.parametrize("command", ["run", "record"])
def test_the_help_states_every_exit_status(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["scenarios", command, "--help"])

    assert exit_.value.code == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "Exit status: 0 when" in help_text
    assert ", 1 when" in help_text
    assert ", 2 when the command cannot run" in help_text


def test_record_from_an_upstream_needs_no_credential(
    app: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """It was refused without ANTHROPIC_API_KEY even though the upstream needs none."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    script = [reply(tool_use("get_weather", {"city": "Paris"})), reply(text("21 °C in Paris."))]
    with ScriptedMessagesAPI(script) as upstream:
        args = ["--upstream", upstream.base_url, "--tools", "app_tools:tools"]
        code = main(["scenarios", "record", *args, "--prompt", "Weather?", "--out", "s/p.json"])

    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "recorded 2 model turn(s) (2 replies, 0 errors; 1 tool call(s))" in captured.out
    assert [
        {k.lower() for k in r.headers} & {"x-api-key", "authorization"} for r in upstream.requests
    ] == [set(), set()]
    assert "sf-provider-recording" not in (app / "s" / "p.json").read_text("utf-8")
    assert main(["scenarios", "run", "s/p.json", "--tools", "app_tools:tools"]) == 0


def test_a_credential_the_upstream_echoes_is_not_written_into_the_recording(
    app: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An upstream that quoted the API key back (in an answer or an error) had it written into
    the scenario file."""
    secret = "sk-ant-recorded-secret-0123456789"
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)

    def echo(request: RecordedRequest) -> Reply:
        return reply(text(f"You sent {request.headers.get('x-api-key')}."))

    with ScriptedMessagesAPI(echo) as upstream:
        args = ["--upstream", upstream.base_url, "--tools", "app_tools:tools"]
        code = main(["scenarios", "record", *args, "--prompt", "Key?", "--out", "s/k.json"])

    assert code == 0, capsys.readouterr().err
    assert upstream.requests[0].headers.get("x-api-key") == secret  # it was sent, and echoed
    recorded = (app / "s" / "k.json").read_text("utf-8")
    assert secret not in recorded
    assert "You sent [redacted credential]." in recorded
