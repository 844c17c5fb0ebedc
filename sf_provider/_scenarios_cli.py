"""`sf-provider scenarios`: run scenario files in CI, and record new ones from a live session.

`run` runs every scenario file it is given (files, or directories of `*.json`) through the real
CLI against the scripted Messages API, with the application's tools when `--tools` names them,
and prints one line per scenario (PASS or FAIL, then what did not hold) and a summary;
`--junit-xml FILE` also writes a JUnit report for CI. Exit status: 0 when every scenario holds,
1 when one does not, 2 when the command cannot run (a path that is no scenario file or holds
none, a scenario file that cannot be read, a `--tools` that cannot be loaded, an unreadable
`SF_PROVIDER_GROUP_<NAME>` switch). Every file is read before the first scenario runs, so with
exit status 2 no scenario ran and no JUnit file was written: a broken file is a setup error to
fix, not a failing scenario.

`record` runs one real query (`--live`: your own credentials, the real model; or `--upstream
URL`: any Messages API) with your tools and writes it as a scenario that `run` replays offline.
With `--upstream` and no credential configured, the CLI gets a placeholder key that is never
forwarded: the upstream gets no credential (set `ANTHROPIC_API_KEY` or `ANTHROPIC_AUTH_TOKEN`
to the one it expects, and it is forwarded). Exit status: 0 when the file is written (a
session that ends with an error is recorded too, that error as its expectation), 1 when the
session could not be recorded (the message says why; nothing is written), 2 when the command
cannot run (FILE exists without `--force`, a `--tools` that cannot be loaded, an unreadable
group switch, an option value it cannot use).

Example::

    sf-provider scenarios record --live --tools myapp.tools:registry \\
        --prompt "Weather in Paris?" --out scenarios/paris.json
    sf-provider scenarios run scenarios --tools myapp.tools:registry --junit-xml scenarios.xml
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import anyio

from .cli import enabled_tools_or_none, load_tools_option
from .errors import ProviderError
from .registry import ToolRegistry
from .scenarios import (
    Scenario,
    ScenarioFileError,
    load_scenario,
    record_scenario,
    run_scenario,
    save_scenario,
)
from .testing import Reply

__all__ = ["ScenarioOutcome", "junit_xml", "run_record", "run_scenarios"]


@dataclass
class ScenarioOutcome:
    """What running one scenario file gave."""

    path: Path
    name: str
    problems: list[str] = field(default_factory=list)
    #: An exception the run itself raised (not a finding): its traceback.
    error: str | None = None
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.problems and self.error is None


def run_scenarios(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """`sf-provider scenarios run PATH... [--tools MODULE:ATTR] [--junit-xml FILE]`; the report
    goes to `out` (standard output by default)."""
    out = out or sys.stdout
    registry: ToolRegistry | None = None
    if args.tools:
        registry = load_tools_option("scenarios run", args.tools)
        if registry is None or enabled_tools_or_none("scenarios run", registry) is None:
            return 2
    try:
        files = _scenario_files(args.paths)
        scenarios = [(path, load_scenario(path)) for path in files]
    except ScenarioFileError as exc:
        print(f"sf-provider scenarios run: {exc} (no scenario was run)", file=sys.stderr)
        return 2
    outcomes = anyio.run(_run_all, scenarios, registry, out)
    failed = sum(not o.passed for o in outcomes)
    print(
        f"{len(outcomes)} scenario(s): {len(outcomes) - failed} passed, {failed} failed",
        file=out,
    )
    if args.junit_xml:
        report = Path(args.junit_xml)
        report.parent.mkdir(parents=True, exist_ok=True)  # as `record` does for its FILE
        report.write_text(junit_xml(outcomes), encoding="utf-8")
    return 1 if failed else 0


def _scenario_files(paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(path.glob("*.json"))
            if not found:
                raise ScenarioFileError(f"{path}: no scenario file (*.json) in this directory")
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise ScenarioFileError(f"{path}: no such file or directory")
    return files


async def _run_all(
    scenarios: list[tuple[Path, Scenario]], registry: ToolRegistry | None, out: TextIO
) -> list[ScenarioOutcome]:
    outcomes = []
    for path, scenario in scenarios:
        outcome = ScenarioOutcome(path, scenario.name)
        started = time.monotonic()
        try:
            outcome.problems = await run_scenario(scenario, registry=registry)
        except Exception:  # a bug or a broken tool set: reported with the others, not fatal
            outcome.error = traceback.format_exc()
        outcome.seconds = time.monotonic() - started
        _report(outcome, out)
        outcomes.append(outcome)
    return outcomes


def _report(outcome: ScenarioOutcome, out: TextIO) -> None:
    status = "PASS" if outcome.passed else "FAIL"
    print(f"{status}  {outcome.name}  ({outcome.path}, {outcome.seconds:.1f} s)", file=out)
    for problem in outcome.problems:
        print(f"      - {problem}", file=out)
    if outcome.error is not None:
        for line in outcome.error.rstrip().splitlines():
            print(f"      {line}", file=out)
    out.flush()


def junit_xml(outcomes: list[ScenarioOutcome]) -> str:
    """A JUnit XML report of the outcomes: one test case per scenario, its findings as the
    failure text (an exception the run raised is an error)."""
    failures = sum(bool(o.problems) and o.error is None for o in outcomes)
    errors = sum(o.error is not None for o in outcomes)
    total = f"{sum(o.seconds for o in outcomes):.3f}"
    counts = {"tests": str(len(outcomes)), "failures": str(failures), "errors": str(errors)}
    suites = ET.Element("testsuites", {"name": "sf-provider scenarios", "time": total, **counts})
    suite = ET.SubElement(
        suites,
        "testsuite",
        {"name": "sf-provider scenarios", "skipped": "0", "time": total, **counts},
    )
    for outcome in outcomes:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"scenarios.{outcome.path.parent.name or 'scenarios'}",
            name=outcome.name,
            file=str(outcome.path),
            time=f"{outcome.seconds:.3f}",
        )
        if outcome.error is not None:
            last = outcome.error.strip().splitlines()[-1]
            ET.SubElement(case, "error", message=last).text = outcome.error
        elif outcome.problems:
            failure = ET.SubElement(case, "failure", message=outcome.problems[0])
            failure.text = "\n".join(outcome.problems)
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def run_record(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """`sf-provider scenarios record (--live | --upstream URL) --prompt TEXT --out FILE ...`."""
    out = out or sys.stdout
    destination = Path(args.out)
    if destination.exists() and not args.force:
        print(
            f"sf-provider scenarios record: {destination} exists; pass --force to replace it",
            file=sys.stderr,
        )
        return 2
    registry: ToolRegistry | None = None
    if args.tools:
        registry = load_tools_option("scenarios record", args.tools)
        if registry is None or enabled_tools_or_none("scenarios record", registry) is None:
            return 2
    pairs = (("model", args.model), ("max_turns", args.max_turns))
    options = {k: v for k, v in pairs if v is not None}  # 0 or "" is refused, not dropped

    async def record() -> Scenario:
        return await record_scenario(
            args.prompt,
            name=args.name or destination.stem,
            registry=registry,
            upstream=args.upstream,
            **options,
        )

    try:
        scenario = anyio.run(record)
    except ProviderError as exc:
        print(f"sf-provider scenarios record: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    destination.parent.mkdir(parents=True, exist_ok=True)
    save_scenario(scenario, destination)
    replies = sum(isinstance(item, Reply) for item in scenario.replies)
    errors = len(scenario.replies) - replies
    outcome = (
        f"ended with {scenario.expect.error.type}"
        if scenario.expect.error is not None
        else f"{len(scenario.expect.tool_calls or [])} tool call(s)"
    )
    tools = f" --tools {args.tools}" if args.tools else ""
    print(
        f"recorded {len(scenario.replies)} model turn(s) ({replies} replies, {errors} errors; "
        f"{outcome}) into {destination}\n"
        f"replay it offline: sf-provider scenarios run {destination}{tools}",
        file=out,
    )
    return 0
