"""docs/testing.md works as written: its files (the code blocks after `<!-- file: NAME -->`)
make a fresh project on which plain `pytest` passes, and its command (after `<!-- command -->`)
runs the project's scenarios."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from fresh_project import isolated_env, run_pytest, write_project

pytestmark = pytest.mark.cli

DOC = Path(__file__).parents[2] / "docs" / "testing.md"
_BLOCK = r"```[a-z]*\n(.*?)```"


def doc_files() -> dict[str, str]:
    text = DOC.read_text("utf-8")
    return dict(re.findall(r"<!-- file: (\S+) -->\n" + _BLOCK, text, flags=re.DOTALL))


def doc_command() -> list[str]:
    text = DOC.read_text("utf-8")
    [command] = re.findall(r"<!-- command -->\n" + _BLOCK, text, flags=re.DOTALL)
    return shlex.split(command)


def test_the_doc_holds_the_examples_this_test_runs() -> None:
    files = doc_files()
    assert {"weather_tools.py", "test_weather.py", "scenarios/paris.json"} <= set(files)
    assert doc_command()[:3] == ["sf-provider", "scenarios", "run"]


def test_the_docs_examples_pass_under_plain_pytest(tmp_path: Path) -> None:
    files = doc_files()
    project = write_project(tmp_path / "docs-project", files)

    run = run_pytest(project)

    tests = {n for name, body in files.items() if name.startswith("test_") for n in _tests(body)}
    assert run.outcomes == dict.fromkeys(tests, "passed"), run.output
    assert run.returncode == 0


def test_the_docs_scenario_command_passes_with_a_junit_report(tmp_path: Path) -> None:
    project = write_project(tmp_path / "docs-project", doc_files())
    [program, *args] = doc_command()
    executable = Path(sys.executable).with_name(program)

    done = subprocess.run(
        [str(executable), *args],
        cwd=project,
        env=isolated_env(tmp_path / "outside"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS  weather in Paris  (scenarios/paris.json" in done.stdout
    assert done.stdout.rstrip().endswith("1 scenario(s): 1 passed, 0 failed")
    suite = ET.parse(project / "scenarios.xml").getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("1", "0", "0")


def _tests(source: str) -> list[str]:
    return re.findall(r"^(?:async )?def (test_\w+)", source, flags=re.MULTILINE)
