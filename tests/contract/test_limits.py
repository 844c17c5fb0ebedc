"""Limits and failures with a precise error: budget, rate-limit retry-after, a CLI that dies."""

from __future__ import annotations

import os
import signal

import pytest
from conftest import cli_processes, leftover_query_dirs

from sf_provider import (
    APIError,
    BudgetExceededError,
    ClaudeAgentProvider,
    ContextWindowExceededError,
    ErrorPart,
    FunctionTool,
    OverloadedError,
    ProcessDiedError,
    RateLimitError,
    StreamPart,
    TextDeltaPart,
)
from sf_provider.testing import Reply, ScriptedMessagesAPI, http_error, reply, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

BIG = {"input_tokens": 100_000, "output_tokens": 50_000}


async def test_reaching_the_budget_raises_budget_exceeded_with_the_partial_result() -> None:
    calls: list[dict[str, object]] = []
    tool = FunctionTool(name="step", executor=lambda arguments: calls.append(arguments) or "done")
    script = [reply(tool_use("step"), **BIG), reply(tool_use("step"), **BIG), reply(text("end"))]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(max_budget_usd=0.5))
        with pytest.raises(BudgetExceededError) as info:
            await provider.generate("work", tools=[tool])
    error = info.value
    assert error.budget_usd == 0.5
    assert error.cost_usd is not None and error.cost_usd > 0.5
    assert "$0.5" in str(error)
    assert [c.tool_name for c in error.partial.tool_calls] == ["step"]
    assert error.partial.cost_usd == error.cost_usd
    assert error.partial.finish_reason == "length"


@pytest.mark.parametrize(("status", "error"), [(429, RateLimitError), (529, OverloadedError)])
async def test_a_rate_limit_after_a_retry_reports_the_delay_the_api_asked_for(
    status: int, error: type[APIError]
) -> None:
    script = [http_error(status, "slow down", retry_after=1), http_error(status, "slow down")]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(max_retries=1))
        with pytest.raises(error) as info:
            await provider.generate("hi")
    assert len(api.requests) == 2, "the CLI retried once (max_retries=1)"
    assert info.value.status == status and info.value.retryable
    assert info.value.retry_after is not None and 1.0 <= info.value.retry_after < 2.0


HISTORY = [
    {"role": "user", "content": "q1"},
    {"role": "assistant", "content": "a1"},
    {"role": "user", "content": "q2"},
    {"role": "assistant", "content": "a2"},
    {"role": "user", "content": "q3"},
]
#: The API refuses the history as too long; the rest answers the CLI's summary calls, if made.
TOO_LONG = [
    http_error(400, "prompt is too long: 250000 tokens > 200000 maximum"),
    *[reply(text("a summary"))] * 3,
]


async def test_a_history_too_long_for_the_context_window_fails_instead_of_being_summarised() -> (
    None
):
    # Without DISABLE_COMPACT the CLI summarises the older turns with extra model calls and
    # answers from the summary, reporting success.
    async with ScriptedMessagesAPI(TOO_LONG) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        with pytest.raises(ContextWindowExceededError, match="Prompt is too long") as info:
            await provider.generate(HISTORY)
    assert len(api.requests) == 1 and not info.value.retryable
    assert "shorten the conversation" in str(info.value)


async def test_a_prompt_the_cli_itself_finds_too_long_is_a_context_window_error() -> None:
    """The CLI measures a huge prompt itself and never sends it: that was an
    `APIConnectionError` ("the connection was lost ... retrying may help")."""
    async with ScriptedMessagesAPI(lambda _request: reply(text("ok"))) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        with pytest.raises(ContextWindowExceededError, match="Prompt is too long") as info:
            await provider.generate("word " * 1_500_000)
    assert api.all_requests == [], "refused by the CLI, before the API"
    assert info.value.status is None and not info.value.retryable


async def test_an_app_can_turn_the_clis_compaction_back_on() -> None:
    async with ScriptedMessagesAPI(TOO_LONG) as api:
        settings = api.settings(warm_processes=0, env={"DISABLE_COMPACT": "0"})
        result = await ClaudeAgentProvider(settings).generate(HISTORY)
    assert len(api.requests) > 1, "the CLI summarised the history and asked again"
    assert result.finish_reason == "stop"


async def test_a_cli_killed_mid_stream_raises_process_died_promptly() -> None:
    """Promptly: from the process's end, not from the idle timeout that would otherwise stop
    the query (that would be a QueryTimeoutError)."""
    script = [Reply(content=[text("word " * 3000)], chunk_size=5)]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(idle_timeout=60))
        parts: list[StreamPart] = []
        with pytest.raises(ProcessDiedError) as info:
            async for part in provider.stream("talk"):
                parts.append(part)
                if isinstance(part, TextDeltaPart) and len(parts) == 3:
                    (pid,) = [int(line.split()[0]) for line in cli_processes()]
                    os.kill(pid, signal.SIGKILL)
    assert info.value.exit_code is not None and info.value.exit_code != 0
    assert "exit code" in str(info.value)
    assert isinstance(parts[-1], ErrorPart) and parts[-1].error_type == "ProcessDiedError"
    assert cli_processes() == [] and leftover_query_dirs() == []
