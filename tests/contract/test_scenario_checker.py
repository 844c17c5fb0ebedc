"""The scenario runner reports what does not hold (so a passing scenario means something)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sf_provider.scenarios import Scenario, run_scenario

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

SCENARIOS = Path(__file__).parents[2] / "contracts" / "scenarios"


async def test_wrong_expectations_and_a_failing_executor_are_all_reported() -> None:
    data = json.loads((SCENARIOS / "02_parallel_calls.json").read_text("utf-8"))
    data["expect"]["text"] = "wrong"
    data["expect"]["tool_calls"][1]["input"] = {"city": "Rome"}
    data["tools"][0]["executor"] = {"raises": "station offline"}
    problems = await run_scenario(Scenario.model_validate(data))
    assert "text: expected 'wrong', got 'Both sunny.'" in problems
    assert "call 1 input: expected {'city': 'Rome'}, got {'city': 'Tokyo'}" in problems
    assert "call 0 is_error: expected False, got True" in problems


async def test_an_unused_reply_and_an_unexpected_success_are_reported() -> None:
    data = json.loads((SCENARIOS / "09_text_only.json").read_text("utf-8"))
    data["replies"].append({"content": [{"type": "text", "text": "never asked for"}]})
    data["expect"]["error"] = {"type": "APIError"}
    problems = await run_scenario(Scenario.model_validate(data))
    assert "1 scripted reply(ies) were never requested" in problems
    assert "expected APIError, but the query succeeded" in problems
