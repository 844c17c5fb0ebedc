"""Every scenario file in contracts/scenarios runs through the real CLI and must hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from sf_provider.scenarios import Scenario, load_scenarios, run_scenario

SCENARIOS = load_scenarios(Path(__file__).parents[2] / "contracts" / "scenarios")

pytestmark = [pytest.mark.anyio, pytest.mark.cli]


def test_the_required_scenarios_exist() -> None:
    names = {s.name for s in SCENARIOS}
    assert len(SCENARIOS) >= 10
    assert len(names) == len(SCENARIOS), "scenario names must be unique"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
async def test_scenario_holds(scenario: Scenario) -> None:
    problems = await run_scenario(scenario)
    assert not problems, "\n".join(problems)
