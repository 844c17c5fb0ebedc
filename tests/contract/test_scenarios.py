"""Every scenario file in contracts/scenarios runs through the real CLI and must hold; scenarios
run the application's own tools; sessions are recorded (offline: from a scripted API) and
replayed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sf_provider import FunctionTool, GateDecision, ProviderSettings, ToolRegistry
from sf_provider.scenarios import (
    Scenario,
    ScenarioFileError,
    ScenarioRecordingError,
    load_scenario,
    load_scenarios,
    record_scenario,
    run_scenario,
    save_scenario,
)
from sf_provider.testing import (
    Reply,
    ScriptedMessagesAPI,
    http_error,
    reply,
    text,
    thinking,
    tool_use,
)

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


# -- scenarios with the application's own tools


def get_weather(city: str) -> dict[str, object]:
    """Current weather for a city."""
    return {"city": city, "celsius": 21}


async def get_forecast(city: str, days: int = 1) -> str:
    """The forecast (an async tool)."""
    return f"{city}: sunny for {days} day(s)"


def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


WEATHER = FunctionTool.from_function(get_weather)
FORECAST = FunctionTool.from_function(get_forecast)
DELETE = FunctionTool.from_function(delete_file, mutating=True)


def app_scenario(**expect: Any) -> Scenario:
    """Two calls of the app's tools by name alone (one sync, one async), then an answer."""
    return Scenario.model_validate(
        {
            "name": "app tools",
            "prompt": "Weather and forecast for Paris?",
            "tools": [{"name": "get_weather"}, {"name": "get_forecast"}],
            "replies": [
                {
                    "content": [
                        {"type": "tool_use", "name": "get_weather", "input": {"city": "Paris"}},
                        {"type": "tool_use", "name": "get_forecast", "input": {"city": "Paris"}},
                    ]
                },
                {"content": [{"type": "text", "text": "Sunny, 21 °C."}]},
            ],
            "expect": expect,
        }
    )


async def test_a_scenario_runs_the_apps_own_tools_and_checks_their_real_results() -> None:
    scenario = app_scenario(
        text="Sunny, 21 °C.",
        mode="executor",
        executor_calls={"get_weather": [{"city": "Paris"}], "get_forecast": [{"city": "Paris"}]},
        tool_calls=[
            {"tool_name": "get_weather", "output": '{"city": "Paris", "celsius": 21}'},
            {"tool_name": "get_forecast", "output": "Paris: sunny for 1 day(s)"},
        ],
    )

    assert await run_scenario(scenario, tools=[WEATHER, FORECAST]) == []


async def test_a_wrong_expectation_about_a_real_tool_is_reported_with_what_it_did() -> None:
    scenario = app_scenario(
        tool_calls=[
            {"tool_name": "get_weather", "output": "rain"},
            {"tool_name": "get_forecast"},
        ]
    )

    problems = await run_scenario(scenario, tools=[WEATHER, FORECAST])

    assert 'call 0 output: expected \'rain\', got \'{"city": "Paris", "celsius": 21}\'' in (
        problems
    )


async def test_a_registry_binds_the_tools_and_its_gate_applies() -> None:
    registry = ToolRegistry([DELETE], gate=lambda request: GateDecision.deny("read-only day"))
    scenario = Scenario.model_validate(
        {
            "name": "gated",
            "prompt": "Delete /x.",
            "tools": [{"name": "delete_file"}],
            "replies": [
                {"content": [{"type": "tool_use", "name": "delete_file", "input": {"path": "/x"}}]},
                {"content": [{"type": "text", "text": "Not allowed."}]},
            ],
            "expect": {
                "executor_calls": {"delete_file": []},
                "tool_calls": [
                    {"tool_name": "delete_file", "is_error": True, "output_contains": ["read-only"]}
                ],
            },
        }
    )

    assert await run_scenario(scenario, registry=registry) == []


async def test_a_scenario_tool_the_app_lacks_is_a_finding_and_nothing_runs() -> None:
    problems = await run_scenario(app_scenario(), tools=[WEATHER])

    assert problems == [
        "scenario tool 'get_forecast' is not one of the application's tools (get_weather) and "
        "has no executor of its own"
    ]


async def test_a_tool_in_a_disabled_group_is_refused_as_at_dispatch() -> None:
    hidden = FunctionTool.from_function(get_forecast, group="beta")
    registry = ToolRegistry([WEATHER, hidden], groups={"beta": False})

    [problem] = await run_scenario(app_scenario(), registry=registry)

    assert "get_forecast" in problem and "disabled" in problem


async def test_an_executor_mode_scenario_without_the_apps_tools_says_how_to_run_it() -> None:
    [problem] = await run_scenario(app_scenario(mode="executor"))

    assert "have no executor: run it with the application's tools" in problem


async def test_tools_and_registry_together_are_refused() -> None:
    with pytest.raises(TypeError, match="not both"):
        await run_scenario(app_scenario(), tools=[WEATHER], registry=ToolRegistry([WEATHER]))


async def test_a_scenario_runs_on_the_scripted_api_fixture(
    scripted_api: ScriptedMessagesAPI,
) -> None:
    scenario = app_scenario(text="Sunny, 21 °C.")

    assert await run_scenario(scenario, tools=[WEATHER, FORECAST], api=scripted_api) == []
    assert len(scripted_api.requests) == 2


async def test_a_scripted_api_that_served_already_is_refused(
    scripted_api: ScriptedMessagesAPI,
) -> None:
    scripted_api.add(reply(text("left over")))

    with pytest.raises(ValueError, match="empty script"):
        await run_scenario(app_scenario(), tools=[WEATHER, FORECAST], api=scripted_api)


# -- scenario files


def test_load_scenario_names_the_file_and_what_is_wrong(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json", "utf-8")
    invalid = tmp_path / "invalid.json"
    invalid.write_text('{"name": "x"}', "utf-8")

    with pytest.raises(ScenarioFileError, match=r"broken\.json: not JSON"):
        load_scenario(broken)
    with pytest.raises(ScenarioFileError, match=r"(?s)invalid\.json: not a valid scenario.*prompt"):
        load_scenario(invalid)
    with pytest.raises(ScenarioFileError, match="cannot be read"):
        load_scenario(tmp_path / "missing.json")


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_save_scenario_writes_what_load_scenario_reads(scenario: Scenario, tmp_path: Path) -> None:
    path = save_scenario(scenario, tmp_path / "copy.json")

    assert load_scenario(path) == scenario


# -- record and replay (recorded offline: the "live" API is a scripted one)


async def record_from(script: list[Any], **options: Any) -> tuple[Scenario, ScriptedMessagesAPI]:
    async with ScriptedMessagesAPI(script) as upstream:
        scenario = await record_scenario(
            "Weather in Paris?",
            name="paris",
            tools=[WEATHER],
            upstream=upstream.base_url,
            settings=ProviderSettings(env={"ANTHROPIC_API_KEY": "sk-ant-recording"}, **options),
        )
    return scenario, upstream


async def test_a_recorded_session_replays_offline_through_the_apps_tools(tmp_path: Path) -> None:
    scenario, upstream = await record_from(
        [
            reply(thinking("The tool knows."), tool_use("get_weather", {"city": "Paris"})),
            reply(text("21 °C in Paris.")),
        ]
    )
    path = save_scenario(scenario, tmp_path / "paris.json")

    assert await run_scenario(load_scenario(path), tools=[WEATHER]) == []
    # What was recorded: the app's names, the model's turns, the outcome.
    assert [t.name for t in scenario.tools] == ["get_weather"]
    first = scenario.replies[0]
    assert isinstance(first, Reply)
    assert [b["type"] for b in first.content] == ["thinking", "tool_use"]
    assert first.content[1] == {
        "type": "tool_use",
        "name": "get_weather",
        "input": {"city": "Paris"},
    }
    assert scenario.expect.text == "21 °C in Paris."
    assert scenario.expect.api_requests == 2
    assert scenario.expect.tool_calls is not None
    assert scenario.expect.tool_calls[0].input == {"city": "Paris"}
    # The upstream got the CLI's own credentials; the file keeps none.
    assert {r.headers.get("x-api-key") for r in upstream.requests} == {"sk-ant-recording"}
    assert "sk-ant-recording" not in path.read_text("utf-8")


async def test_an_error_retried_past_is_recorded_and_the_replay_retries_too() -> None:
    scenario, _ = await record_from([http_error(529), reply(text("Sunny."))], max_retries=1)

    assert [item.kind for item in scenario.replies] == ["http_error", "reply"]
    assert scenario.options["max_retries"] == 1
    assert await run_scenario(scenario, tools=[WEATHER]) == []


async def test_a_session_that_fails_is_recorded_with_its_error() -> None:
    scenario, _ = await record_from([http_error(401)], max_retries=0)

    assert scenario.expect.error is not None
    assert scenario.expect.error.type == "AuthenticationError"
    assert await run_scenario(scenario, tools=[WEATHER]) == []


async def test_an_upstream_that_never_answers_is_a_recording_error() -> None:
    async with ScriptedMessagesAPI([]) as closed:
        gone = closed.base_url  # nothing listens there once left

    with pytest.raises(ScenarioRecordingError, match="did not answer"):
        await record_scenario(
            "Hi?",
            name="x",
            upstream=gone,
            settings=ProviderSettings(env={"ANTHROPIC_API_KEY": "sk-x"}, max_retries=0),
        )


async def test_an_upstream_needs_no_credential_and_gets_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gateway, a proxy or a local scripted API as the upstream: no Anthropic credential
    configured (it was refused: "no ANTHROPIC_API_KEY ..."). The CLI runs on a placeholder key
    that is never forwarded, and nothing of it lands in the file."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    script = [reply(tool_use("get_weather", {"city": "Paris"})), reply(text("21 °C in Paris."))]
    async with ScriptedMessagesAPI(script) as upstream:
        scenario = await record_scenario(
            "Weather in Paris?", name="paris", tools=[WEATHER], upstream=upstream.base_url
        )
    path = save_scenario(scenario, tmp_path / "paris.json")

    assert scenario.expect.text == "21 °C in Paris."
    assert await run_scenario(load_scenario(path), tools=[WEATHER]) == []
    headers = [{k.lower(): v for k, v in r.headers.items()} for r in upstream.requests]
    assert len(headers) == 2
    assert all("x-api-key" not in h and "authorization" not in h for h in headers), headers
    assert "sf-provider-recording" not in path.read_text("utf-8")


async def test_an_upstream_that_wants_a_credential_none_was_set_for_says_which_to_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    async with ScriptedMessagesAPI([http_error(401, "invalid x-api-key")]) as upstream:
        with pytest.raises(ScenarioRecordingError) as raised:
            await record_scenario(
                "Hi?",
                name="x",
                upstream=upstream.base_url,
                settings=ProviderSettings(max_retries=0),
            )

    message = str(raised.value)
    assert f"{upstream.base_url} answered HTTP 401 (invalid x-api-key)" in message
    assert "no credential is configured" in message
    assert "set ANTHROPIC_API_KEY (sent as x-api-key) or ANTHROPIC_AUTH_TOKEN" in message


async def test_the_real_api_still_needs_a_credential(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)

    with pytest.raises(ScenarioRecordingError, match="authentication: no ANTHROPIC_API_KEY"):
        await record_scenario("Hi?", name="x", upstream="https://api.anthropic.com/")
