"""Plain `pytest` on a fresh project, in a subprocess: how an application's suite runs with
sf-provider installed (no conftest, no marker, no async plugin of its own, an isolated home)."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import sf_provider


@dataclass
class PytestRun:
    """What one pytest run of a fresh project gave."""

    returncode: int
    output: str
    #: Test name -> "passed", "failed", "error" or "skipped" (from its JUnit report).
    outcomes: dict[str, str]


def write_project(root: Path, files: Mapping[str, str]) -> Path:
    """Write `files` (relative path -> text) under `root`; returns `root`."""
    for name, body in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
    return root


#: The checkout whose `sf_provider` this suite imports: a fresh project imports the same one
#: (from a git worktree, the venv's editable install points at another checkout).
SOURCE = str(Path(sf_provider.__file__).resolve().parents[1])


def isolated_env(root: Path, **extra: str) -> dict[str, str]:
    """A minimal environment: PATH, a home and temp dir of its own, no credentials, and the
    `sf_provider` under test first on the path."""
    for name in ("home", "tmp"):
        (root / name).mkdir(parents=True, exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": SOURCE,
        "HOME": str(root / "home"),
        "TMPDIR": str(root / "tmp"),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        **extra,
    }


def run_pytest(project: Path, *args: str, env: Mapping[str, str] | None = None) -> PytestRun:
    """`python -m pytest` in `project` with the venv's interpreter (sf-provider installed)."""
    report = project.parent / f"{project.name}-junit.xml"
    outside = project.parent / f"{project.name}-env"
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        "--rootdir",
        str(project),
        f"--junit-xml={report}",
        *args,
    ]
    done = subprocess.run(
        command,
        cwd=project,
        env=dict(env) if env is not None else isolated_env(outside),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    outcomes: dict[str, str] = {}
    if report.is_file():
        for case in ET.parse(report).getroot().iter("testcase"):
            kinds = {child.tag for child in case}
            outcome = next(
                (k for k, tag in (("error", "error"), ("failed", "failure")) if tag in kinds),
                "skipped" if "skipped" in kinds else "passed",
            )
            outcomes[case.attrib["name"]] = outcome
    return PytestRun(done.returncode, done.stdout + done.stderr, outcomes)
