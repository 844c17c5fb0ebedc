"""Every model setting a framework passes takes effect in the API request, or fails loudly.

One test per row of the README's settings table, through the real CLI against the scripted
API; what took effect is read from the request the CLI sent.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import anyio
import pytest
from pydantic import ValidationError
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelTimeoutError, UnsupportedSettingWarning, UsageLimitExceeded
from pydantic_ai.usage import UsageLimits

from sf_provider import (
    APIError,
    ClaudeAgentProvider,
    FunctionTool,
    ProviderSettings,
    QueryTimeoutError,
    UnsupportedRequestError,
)
from sf_provider.adapters.langchain import ChatClaudeAgent
from sf_provider.adapters.pydantic_ai import ClaudeAgentModel
from sf_provider.testing import (
    RecordedRequest,
    Reply,
    ScriptedMessagesAPI,
    http_error,
    reply,
    text,
    tool_use,
)

pytestmark = [pytest.mark.anyio, pytest.mark.cli]


def sent(request: RecordedRequest) -> dict[str, Any]:
    """What the model settings became in the API request."""
    body = request.body
    return {
        "model": body.get("model"),
        "max_tokens": body.get("max_tokens"),
        "effort": (body.get("output_config") or {}).get("effort"),
        "thinking": (body.get("thinking") or {}).get("type"),
    }


async def answer_late(_request: RecordedRequest) -> Reply:
    # Far past the timeouts below (20 s: room for a loaded machine to start the CLI); the
    # timeout stops the CLI, which ends this wait.
    await anyio.sleep(120)
    return reply(text("too late"))


# -- the provider's own options


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"max_tokens": 50}, {"max_tokens": 50}),
        ({"effort": "low"}, {"effort": "low"}),
        ({"model": "haiku", "effort": "max"}, {"model": "claude-haiku-5-5", "effort": "max"}),
        ({"thinking": "adaptive"}, {"thinking": "adaptive"}),
    ],
    ids=["max_tokens", "effort", "model+effort", "thinking"],
)
async def test_provider_options_reach_the_api_request(
    options: dict[str, Any], expected: dict[str, Any]
) -> None:
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        assert (await provider.generate("hi", **options)).text == "ok"
    got = sent(api.requests[0])
    assert {key: got[key] for key in expected} == expected


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"thinking": "disabled"}, "thinking='disabled'"),
        ({"thinking": 4096}, "thinking=4096"),
        ({"model": "claude-sonnet-4-5", "thinking": "adaptive"}, "thinking='adaptive'"),
    ],
    ids=["thinking-off-on-an-always-thinking-model", "budget-on-adaptive", "adaptive-on-budget"],
)
async def test_a_thinking_setting_the_model_cannot_take_is_refused_before_any_request(
    options: dict[str, Any], problem: str
) -> None:
    """Measured: the CLI would send something else (thinking stays adaptive)."""
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        with pytest.raises(UnsupportedRequestError, match=problem):
            await provider.generate("hi", **options)
    assert api.requests == []


async def test_the_provider_settings_apply_to_every_query() -> None:
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        provider = ClaudeAgentProvider(api.settings(max_tokens=64, effort="high"))
        await provider.generate("hi")
        await provider.aclose()
    assert sent(api.requests[0])["max_tokens"] == 64
    assert sent(api.requests[0])["effort"] == "high"


async def test_a_calls_empty_system_prompt_replaces_the_settings_one() -> None:
    async with ScriptedMessagesAPI([reply(text("one")), reply(text("two"))]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0, system_prompt="PIRATE"))
        await provider.generate("hi")
        await provider.generate("hi", system_prompt="")
    with_settings, without = (json.dumps(r.body.get("system")) for r in api.requests)
    assert "PIRATE" in with_settings
    assert "PIRATE" not in without


async def test_max_retries_per_call_sets_the_clis_retries() -> None:
    script = [http_error(500), http_error(500), reply(text("third time"))]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))  # 0 retries by default
        result = await provider.generate("hi", max_retries=2)
    assert result.text == "third time"
    assert len(api.all_requests) == 3


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("ANTHROPIC_MODEL", "claude-haiku-5-5", {"model": "claude-haiku-5-5"}),
        ("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "77", {"max_tokens": 77}),
        ("CLAUDE_CODE_EFFORT_LEVEL", "low", {"effort": "low"}),
        ("CLAUDE_CODE_DISABLE_THINKING", "1", {"thinking": None}),  # no thinking parameter
    ],
    ids=["model", "max_tokens", "effort", "thinking-off"],
)
async def test_an_env_variable_a_setting_leaves_to_it_reaches_the_request_and_a_call_wins(
    variable: str, value: str, expected: dict[str, Any]
) -> None:
    """ProviderSettings.env may set what a typed setting left unset (both is refused: see
    tests/unit/test_options_coverage.py); a call's own option overrides it."""
    (field,) = expected
    override = {
        "model": "claude-sonnet-5-5",
        "max_tokens": 99,
        "effort": "high",
        "thinking": "adaptive",
    }[field]
    script = [reply(text("from env")), reply(text("from the call"))]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0, env={variable: value}))
        await provider.generate("hi")
        await provider.generate("hi", **{field: override})
    assert sent(api.requests[0])[field] == expected[field]
    assert sent(api.requests[1])[field] == override


async def test_env_max_retries_holds_when_the_setting_is_left_unset() -> None:
    script = [http_error(500), reply(text("second time"))]
    async with ScriptedMessagesAPI(script) as api:
        settings = api.settings(warm_processes=0, env={"CLAUDE_CODE_MAX_RETRIES": "1"})
        assert "max_retries" not in settings.model_fields_set
        result = await ClaudeAgentProvider(settings).generate("hi")
    assert result.text == "second time"
    assert len(api.all_requests) == 2


async def test_the_environments_max_retries_holds_when_the_setting_is_left_unset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CLAUDE_CODE_MAX_RETRIES is on the isolation allow-list, yet the setting's default (2)
    replaced it: the application's own variable was dropped without a word."""
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "0")
    script = [http_error(500), reply(text("second time"))]
    async with ScriptedMessagesAPI(script) as api:
        settings = ProviderSettings(env=api.settings().env, warm_processes=0)
        assert "CLAUDE_CODE_MAX_RETRIES" not in settings.env
        with pytest.raises(APIError) as info:
            await ClaudeAgentProvider(settings).generate("hi")
    assert info.value.status == 500
    assert len(api.all_requests) == 1, "no retry: the environment said 0"


async def test_env_tmpdir_is_where_the_query_keeps_its_temp_files(tmp_path: Any) -> None:
    """With isolate=True, the CLI's HOME, config and TMPDIR are made in env's TMPDIR (seen
    from a tool while the query runs), and removed afterwards."""
    seen: list[list[str]] = []

    def look() -> str:
        """List the temp directory."""
        seen.append(sorted(p.name for p in tmp_path.iterdir()))
        return "looked"

    tool = FunctionTool.from_function(look)
    script = [reply(tool_use("mcp__sf__look", {})), reply(text("done"))]
    async with ScriptedMessagesAPI(script) as api:
        settings = api.settings(warm_processes=0, env={"TMPDIR": str(tmp_path)})
        assert (await ClaudeAgentProvider(settings).generate("hi", tools=[tool])).text == "done"
    assert len(seen) == 1 and len(seen[0]) == 1, seen
    assert seen[0][0].startswith("sf-provider-")
    assert list(tmp_path.iterdir()) == []


# -- pydantic-ai model settings


async def test_pydantic_ai_max_tokens_and_thinking_level_reach_the_request() -> None:
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        agent = Agent(ClaudeAgentModel(api.settings(warm_processes=0)))
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            result = await agent.run("hi", model_settings={"max_tokens": 50, "thinking": "low"})
    # Honoured settings warn about nothing (other warnings, e.g. from garbage collected by the
    # way, are not this test's business).
    assert [w for w in seen if issubclass(w.category, UnsupportedSettingWarning)] == []
    assert result.output == "ok"
    assert sent(api.requests[0])["max_tokens"] == 50
    assert sent(api.requests[0])["effort"] == "low"


async def test_pydantic_ai_sampling_settings_reach_the_request_as_written() -> None:
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        agent = Agent(ClaudeAgentModel(api.settings(warm_processes=0)))
        with warnings.catch_warnings():
            warnings.simplefilter("error", UnsupportedSettingWarning)
            settings: Any = {"temperature": 0.1, "top_p": 0.5, "top_k": 3}
            await agent.run("hi", model_settings=settings)
    body = api.requests[0].body
    assert (body["temperature"], body["top_p"], body["top_k"]) == (0.1, 0.5, 3)


@pytest.mark.parametrize(
    "setting",
    [
        {"seed": 7},
        {"extra_body": {"x": 1}},
    ],
    ids=lambda s: next(iter(s)),
)
async def test_pydantic_ai_settings_the_cli_cannot_honour_warn_by_name(
    setting: dict[str, Any],
) -> None:
    (name,) = setting
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        agent = Agent(ClaudeAgentModel(api.settings(warm_processes=0)))
        with pytest.warns(UnsupportedSettingWarning, match=f"`{name}`"):
            result = await agent.run("hi", model_settings=setting)
    assert result.output == "ok"


async def test_pydantic_ai_timeout_bounds_the_query() -> None:
    async with ScriptedMessagesAPI(answer_late) as api:
        agent = Agent(ClaudeAgentModel(api.settings(warm_processes=0)))
        with pytest.raises(ModelTimeoutError) as caught:  # what pydantic-ai's `timeout` raises
            await agent.run("hi", model_settings={"timeout": 20})
    cause = caught.value.__cause__
    assert isinstance(cause, QueryTimeoutError)
    assert (cause.kind, cause.seconds) == ("timeout", 20.0)
    assert len(api.all_requests) == 1, "it expired while the model was answering"


async def test_pydantic_ai_cost_limit_holds_with_the_clis_cost() -> None:
    async with ScriptedMessagesAPI([reply(text("ok")), reply(text("again"))]) as api:
        agent = Agent(ClaudeAgentModel(api.settings(warm_processes=0)))
        result = await agent.run("hi")
        with pytest.raises(UsageLimitExceeded, match="cost_limit"):
            await agent.run("hi", usage_limits=UsageLimits(cost_limit=Decimal("0.0000001")))
    cost = result.response.provider_details["cost_usd"]
    assert cost > 0
    assert result.usage.cost == Decimal(str(cost))
    assert len(api.requests) == 2, "the limit was checked on the answer, not before the call"


def adding(calls: list[tuple[int, int]]) -> Callable[[int, int], int]:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        calls.append((a, b))
        return a + b

    return add


def adder(calls: list[tuple[int, int]]) -> FunctionTool:
    return FunctionTool.from_function(adding(calls))


@pytest.mark.parametrize("mode", ["single-turn", "executor"])
async def test_pydantic_ai_parallel_tool_calls_false_reaches_the_request(mode: str) -> None:
    """It warned (pydantic-ai's own warning, or the adapter's in mode='executor'), then was
    refused; now every model call of the run may make one tool call at most."""
    calls: list[tuple[int, int]] = []
    script = [reply(tool_use("add", {"a": 1, "b": 2})), reply(text("3"))]
    async with ScriptedMessagesAPI(script) as api:
        if mode == "executor":
            tools = [adder(calls)]
            agent = Agent(ClaudeAgentModel(api.settings(), mode="executor", tools=tools))
        else:  # the Agent runs the tool
            agent = Agent(ClaudeAgentModel(api.settings()), tools=[adding(calls)])
        with warnings.catch_warnings():
            warnings.simplefilter("error", UnsupportedSettingWarning)
            result = await agent.run("add", model_settings={"parallel_tool_calls": False})
    assert result.output == "3"
    assert calls == [(1, 2)]
    one_call = {"type": "auto", "disable_parallel_tool_use": True}
    assert [r.body["tool_choice"] for r in api.requests] == [one_call, one_call]


async def test_pydantic_ai_stop_sequences_end_the_answer_without_a_warning() -> None:
    """They drew pydantic-ai's own `UnsupportedSettingWarning` and the text came whole."""
    script = [reply(text("Thought: x\nSTOP and more"))]
    async with ScriptedMessagesAPI(script) as api:
        agent = Agent(ClaudeAgentModel(api.settings(warm_processes=0)))
        with warnings.catch_warnings():
            warnings.simplefilter("error", UnsupportedSettingWarning)
            result = await agent.run("hi", model_settings={"stop_sequences": ["STOP"]})
    assert result.output == "Thought: x\n"
    assert result.response.finish_reason == "stop"
    assert len(api.requests) == 1


async def test_pydantic_ai_executor_mode_warns_that_tool_calls_limit_does_not_count_its_tools() -> (
    None
):
    calls: list[tuple[int, int]] = []
    script = [reply(tool_use("add", {"a": 1, "b": 2})), reply(text("3"))]
    async with ScriptedMessagesAPI(script) as api:
        model = ClaudeAgentModel(
            api.settings(warm_processes=0), mode="executor", tools=[adder(calls)]
        )
        limits = UsageLimits(tool_calls_limit=1)
        with pytest.warns(UnsupportedSettingWarning, match=r"tool_calls_limit=1\)` does not count"):
            async with Agent(model).run_stream("add", usage_limits=limits) as run:
                assert await run.get_output() == "3"
    assert calls == [(1, 2)]


async def test_pydantic_ai_reads_the_last_calls_context_not_the_sum_of_the_querys_calls() -> None:
    # Executor mode: three model calls in one request. The usage is their sum; the context the
    # model was last given is one call's input.
    calls: list[tuple[int, int]] = []
    script = [
        reply(tool_use("add", {"a": 1, "b": 2})),
        reply(tool_use("add", {"a": 3, "b": 4})),
        reply(text("done")),
    ]
    async with ScriptedMessagesAPI(script * 2) as api:
        model = ClaudeAgentModel(
            api.settings(warm_processes=0), mode="executor", tools=[adder(calls)]
        )
        result = await Agent(model).run("add")
        per_call = result.response.usage.input_tokens // 3
        limits = UsageLimits(per_request_input_tokens_limit=per_call + 1)
        limited = await Agent(model).run("add", usage_limits=limits)
    assert result.response.provider_details["api_calls"] == 3
    assert result.response.provider_details["context_input_tokens"] == per_call
    assert (limited.output, len(api.requests)) == ("done", 6)


# -- LangChain constructor arguments


async def test_langchain_model_max_tokens_and_effort_reach_the_request() -> None:
    async with ScriptedMessagesAPI([reply(text("ok")), reply(text("ok"))]) as api:
        chat = ChatClaudeAgent(
            settings=api.settings(warm_processes=0),
            model="claude-haiku-4-5",
            max_tokens=5,
        )
        assert (await chat.ainvoke("hi")).content == "ok"
        chat = ChatClaudeAgent(settings=api.settings(warm_processes=0), effort="low")
        await chat.ainvoke("hi")
    assert sent(api.requests[0])["model"] == "claude-haiku-4-5"
    assert sent(api.requests[0])["max_tokens"] == 5
    assert sent(api.requests[1])["effort"] == "low"


async def test_langchain_timeout_bounds_the_call() -> None:
    async with ScriptedMessagesAPI(answer_late) as api:
        chat = ChatClaudeAgent(settings=api.settings(warm_processes=0), timeout=20)
        with pytest.raises(QueryTimeoutError) as caught:
            await chat.ainvoke("hi")
    assert (caught.value.kind, caught.value.seconds) == ("timeout", 20.0)
    assert len(api.all_requests) == 1, "it expired while the model was answering"


# (temperature, top_p, top_k, stop and api_key reach the request: test_langchain_fidelity.py.)
@pytest.mark.parametrize("argument", ["extra_headers", "seed"])
def test_langchain_refuses_constructor_arguments_the_cli_cannot_honour(argument: str) -> None:
    with pytest.raises(ValidationError, match=argument):
        ChatClaudeAgent(**{argument: 0.1})


async def test_pydantic_ai_thinking_off_is_the_lowest_effort_on_a_model_that_always_thinks() -> (
    None
):
    # pydantic-ai's contract for thinking=False: "on a model that can't turn thinking off, use
    # the lowest effort it accepts". The CLI's default model always thinks.
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        agent = Agent(ClaudeAgentModel(api.settings(warm_processes=0)))
        assert (await agent.run("hi", model_settings={"thinking": False})).output == "ok"
    assert len(api.requests) == 1
    assert sent(api.requests[0])["effort"] == "low"


@pytest.mark.parametrize("warm", [0, 1], ids=["fresh", "warm"])
@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (None, {"effort": "low", "thinking": "adaptive"}),
        ("claude-sonnet-4-5", {"effort": None, "thinking": "disabled"}),
    ],
    ids=["always-thinks", "can-turn-off"],
)
async def test_least_thinking_is_off_where_the_model_allows_else_its_lowest_effort(
    model: str | None, expected: dict[str, Any], warm: int
) -> None:
    async with ScriptedMessagesAPI([reply(text("ok")), reply(text("again"))]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=warm, model=model))
        assert (await provider.generate("hi", thinking="least")).text == "ok"
        assert (await provider.generate("hi", thinking="least")).text == "again"
        await provider.aclose()
    for request in api.requests:  # the model list is read without an API call
        assert {key: sent(request)[key] for key in expected} == expected


@pytest.mark.parametrize(
    ("budget", "max_tokens", "refused"),
    [(4096, 5000, False), (1024, 500, False), (4096, 100, True), (2048, 1500, True)],
)
async def test_a_thinking_budget_reaches_the_request_or_is_refused(
    budget: int, max_tokens: int, refused: bool
) -> None:
    # The CLI sends max(min(budget, max_tokens - 1), 1024): a budget it would lower is refused.
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        settings = api.settings(warm_processes=0, model="claude-sonnet-4-5")
        provider = ClaudeAgentProvider(settings)
        if refused:
            with pytest.raises(UnsupportedRequestError, match=f"thinking={budget} needs max_t"):
                provider.stream("hi", thinking=budget, max_tokens=max_tokens)
            return
        await provider.generate("hi", thinking=budget, max_tokens=max_tokens)
    assert api.requests[0].body["thinking"]["budget_tokens"] == budget


async def test_least_thinking_with_an_effort_is_refused() -> None:
    provider = ClaudeAgentProvider()
    with pytest.raises(UnsupportedRequestError, match="thinking='least' chooses the effort"):
        provider.stream("hi", thinking="least", effort="high")


def test_the_provider_refuses_a_temperature_that_is_no_number() -> None:
    provider = ClaudeAgentProvider()
    with pytest.raises(UnsupportedRequestError, match="temperature"):
        provider.stream("hi", temperature="warm")
