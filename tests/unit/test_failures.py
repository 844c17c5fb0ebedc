"""Error classification on plain SDK dataclasses: which `ProviderError` a result or an SDK
exception stands for (each is also met through the real CLI in tests/contract/)."""

from __future__ import annotations

from collections import deque
from typing import Any

import claude_agent_sdk as sdk
import pytest

from sf_provider import (
    APIConnectionError,
    APIError,
    AuthenticationError,
    BudgetExceededError,
    CLINotFoundError,
    CLIOutputError,
    EmptyToolRoutingError,
    MaxTurnsError,
    OverloadedError,
    ProcessDiedError,
    ProviderError,
    RateLimitError,
    StructuredOutputError,
    ToolChoiceViolationError,
)
from sf_provider._failures import ResultRules, exception_failure, result_failure
from sf_provider._mapping import ResultCollector
from sf_provider._outcome import APIFailure, QueryOutcome, finish_reason
from sf_provider.types import StreamPart, TextDeltaPart, TextStartPart, ToolCallPart

RULES = ResultRules(
    mode="executor", required_call=None, wants_object=False, budget_usd=None, max_turns=3
)


def result(subtype: str = "success", is_error: bool = False, **fields: Any) -> sdk.ResultMessage:
    return sdk.ResultMessage(
        subtype=subtype,
        duration_ms=1,
        duration_api_ms=1,
        is_error=is_error,
        num_turns=1,
        session_id="s",
        **fields,
    )


def collected(text: str = "", calls: int = 0) -> ResultCollector:
    """A collector that folded `text` and `calls` tool calls."""
    collector = ResultCollector()
    parts: list[StreamPart] = [TextStartPart(id="t"), TextDeltaPart(id="t", delta=text)]
    parts += [ToolCallPart(tool_call_id=f"c{i}", tool_name="t", input={}) for i in range(calls)]
    for part in parts if text else parts[2:]:
        collector.add(part)
    return collector


def classify(
    message: sdk.ResultMessage,
    rules: ResultRules = RULES,
    got: ResultCollector | None = None,
    failure: APIFailure | None = None,
) -> ProviderError | None:
    outcome = QueryOutcome(message, single_turn=rules.mode == "single-turn", api_failure=failure)
    return result_failure(outcome, rules, got or collected("fine"))


def test_a_good_result_is_no_failure() -> None:
    assert classify(result()) is None


def test_a_required_call_that_never_came_is_a_tool_choice_violation() -> None:
    rules = ResultRules(
        mode="single-turn", required_call="'lookup'", wants_object=False, budget_usd=None,
        max_turns=3,
    )  # fmt: skip
    failure = classify(result(), rules, collected("just text"))
    assert isinstance(failure, ToolChoiceViolationError)
    assert "'lookup'" in str(failure) and "9 characters" in str(failure)
    assert classify(result(), rules, collected(calls=1)) is None


def test_single_turn_with_neither_text_nor_call_cannot_be_routed() -> None:
    rules = ResultRules(
        mode="single-turn", required_call=None, wants_object=False, budget_usd=None, max_turns=1
    )
    assert isinstance(classify(result(), rules, collected()), EmptyToolRoutingError)
    # Running out of turns is how single-turn mode ends; it is not an error there.
    assert classify(result("error_max_turns", True), rules, collected(calls=1)) is None


def test_limits_keep_the_partial_result() -> None:
    turns = classify(result("error_max_turns", True), got=collected("half"))
    assert isinstance(turns, MaxTurnsError) and turns.max_turns == 3
    assert turns.partial is not None and turns.partial.text == "half"
    rules = ResultRules(
        mode="executor", required_call=None, wants_object=False, budget_usd=0.5, max_turns=3
    )
    budget = classify(result("error_max_budget_usd", True, total_cost_usd=0.7), rules)
    assert isinstance(budget, BudgetExceededError)
    assert (budget.budget_usd, budget.cost_usd) == (0.5, 0.7)


def test_a_missing_object_is_a_structured_output_error() -> None:
    rules = ResultRules(
        mode="executor", required_call=None, wants_object=True, budget_usd=None, max_turns=3
    )
    assert isinstance(classify(result(), rules), StructuredOutputError)
    assert classify(result(structured_output={"n": 1}), rules) is None


@pytest.mark.parametrize(
    ("status", "kind", "error"),
    [
        (401, None, AuthenticationError),
        (None, "authentication_failed", AuthenticationError),
        (429, None, RateLimitError),
        (529, None, OverloadedError),
        (500, None, APIError),
    ],
)
def test_api_failures_by_status(status: int | None, kind: str | None, error: type) -> None:
    failure = APIFailure(kind=kind, text="") if kind else None
    message = result(is_error=True, api_error_status=status, errors=["boom"])
    assert type(classify(message, failure=failure)) is error


def test_an_api_failure_without_a_status_is_a_lost_connection_or_says_its_subtype() -> None:
    lost = classify(result(is_error=True, errors=["socket hang up"]))
    assert isinstance(lost, APIConnectionError) and "socket hang up" in str(lost)
    bare = classify(result("error_during_execution", True))
    assert type(bare) is APIError and "error_during_execution" in str(bare)


def test_sdk_exceptions() -> None:
    stderr = deque(["last words"])
    assert isinstance(
        exception_failure(sdk.CLINotFoundError("gone"), stderr, 1024), CLINotFoundError
    )
    died = exception_failure(sdk.ProcessError("x", exit_code=137), stderr, 1024)
    assert isinstance(died, ProcessDiedError) and died.exit_code == 137
    assert "last words" in str(died)
    too_big = exception_failure(sdk.CLIJSONDecodeError("{", ValueError("x")), stderr, 1024)
    assert isinstance(too_big, CLIOutputError) and "max_buffer_size=1024" in str(too_big)
    lost = exception_failure(sdk.CLIConnectionError("closed"), stderr, 1024)
    assert isinstance(lost, ProcessDiedError) and lost.stderr == "last words"


#: The CLI gave up resuming an answer cut at the output limit.
OUTPUT_LIMIT = APIFailure(
    kind="max_output_tokens",
    text="API Error: Claude's response exceeded the 50 output token maximum.",
)


def test_an_answer_cut_at_the_output_limit_is_a_result_not_a_lost_connection() -> None:
    cut = result(is_error=True, stop_reason="stop_sequence", terminal_reason="api_error")
    assert classify(cut, failure=OUTPUT_LIMIT) is None
    single = ResultRules(
        mode="single-turn", required_call=None, wants_object=False, budget_usd=None, max_turns=1
    )
    assert classify(cut, single, failure=OUTPUT_LIMIT) is None


def test_an_answer_cut_at_the_output_limit_is_held_to_the_same_rules() -> None:
    cut = result(is_error=True, stop_reason="stop_sequence")
    single = ResultRules(
        mode="single-turn", required_call=None, wants_object=False, budget_usd=None, max_turns=1
    )
    nothing = classify(cut, single, got=collected(), failure=OUTPUT_LIMIT)
    assert isinstance(nothing, EmptyToolRoutingError)
    required = ResultRules(
        mode="single-turn", required_call="a tool", wants_object=False, budget_usd=None,
        max_turns=1,
    )  # fmt: skip
    assert isinstance(classify(cut, required, failure=OUTPUT_LIMIT),
                      ToolChoiceViolationError)  # fmt: skip
    wants_object = ResultRules(
        mode="executor", required_call=None, wants_object=True, budget_usd=None, max_turns=3
    )
    assert isinstance(classify(cut, wants_object, failure=OUTPUT_LIMIT),
                      StructuredOutputError)  # fmt: skip


#: What the CLI reports when the model declined (stop reason `refusal`, asked twice): an error.
REFUSAL = APIFailure(
    kind="invalid_request",
    text="API Error: Opus 5.5's safeguards flagged this message (https://www.anthropic.com/legal/"
    "aup). ... Try rephrasing the request in a new session or change your model.",
)


def test_a_refusal_is_an_answer_with_finish_reason_content_filter_not_a_lost_connection() -> None:
    declined = result(is_error=True, stop_reason="refusal", terminal_reason="api_error")
    outcome = QueryOutcome(declined, api_failure=REFUSAL)
    assert finish_reason(outcome) == "content-filter"
    assert finish_reason(outcome, failed=True) == "error"
    # No rule of the request turns it into an error to retry: it would be declined again.
    strict = ResultRules(
        mode="single-turn", required_call="a tool", wants_object=True, budget_usd=None,
        max_turns=1,
    )  # fmt: skip
    for rules in (RULES, strict):
        assert classify(declined, rules, got=collected(), failure=REFUSAL) is None
