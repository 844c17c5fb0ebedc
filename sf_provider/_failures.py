"""Error classification: what a finished query's result, or an SDK exception, stands for.

One place decides which `ProviderError` a query raises; the query loop only asks. Pure: no
process, unit-testable on plain SDK dataclasses.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

import claude_agent_sdk as sdk

from ._mapping import ResultCollector
from ._outcome import QueryOutcome, usage_from
from .errors import (
    APIConnectionError,
    APIError,
    AuthenticationError,
    BudgetExceededError,
    CLINotFoundError,
    CLIOutputError,
    ContextWindowExceededError,
    EmptyToolRoutingError,
    MaxTurnsError,
    OverloadedError,
    ProcessDiedError,
    ProviderError,
    RateLimitError,
    StrictToolCallError,
    StructuredOutputError,
    ToolChoiceViolationError,
    UnsupportedSettingError,
)
from .types import Mode

__all__ = ["ResultRules", "exception_failure", "process_died", "result_failure"]


@dataclass(frozen=True)
class ResultRules:
    """What a query's result is held to, resolved once from its request and settings."""

    mode: Mode
    #: "a tool" or a tool's name when tool_choice requires a call, else None.
    required_call: str | None
    wants_object: bool
    budget_usd: float | None
    max_turns: int
    #: tool_choice "none" with the tools still defined (the conversation holds tool calls).
    forbid_calls: bool = False
    #: Tools whose calls must match their schema (`FunctionTool.strict`).
    strict_tools: frozenset[str] = frozenset()
    #: The sampling settings sent as the caller wrote them (`temperature`, ...), and the model
    #: asked for: an API 400 naming one is `UnsupportedSettingError`.
    sampling: frozenset[str] = frozenset()
    model: str | None = None


def process_died(exit_code: int | None, stderr: Iterable[str]) -> ProcessDiedError:
    """The CLI ended before the query's result."""
    tail = "\n".join(stderr)
    return ProcessDiedError(
        f"the Claude Code CLI exited (exit code {exit_code}) before finishing the query"
        + (f"; its last output:\n{tail}" if tail else "; it printed nothing on stderr"),
        exit_code=exit_code,
        stderr=tail,
    )


def exception_failure(
    exc: sdk.ClaudeSDKError, stderr: Iterable[str], max_buffer_size: int
) -> ProviderError:
    """The error an exception of the SDK during a query stands for."""
    if isinstance(exc, sdk.CLINotFoundError):
        return CLINotFoundError(
            f"the Claude Code CLI was not found ({exc}); reinstall claude-agent-sdk, which "
            f"bundles it, or set ProviderSettings.cli_path"
        )
    if isinstance(exc, sdk.ProcessError):
        return process_died(exc.exit_code, stderr)
    if isinstance(exc, sdk.CLIJSONDecodeError) and isinstance(
        exc.original_error, json.JSONDecodeError
    ):
        return CLIOutputError(
            f"the CLI wrote a line that is not JSON ({exc}): ProviderSettings.cli_path may not "
            f"point at the Claude Code CLI, or a wrapper script writes to its stdout"
        )
    if isinstance(exc, sdk.CLIJSONDecodeError):
        return CLIOutputError(
            f"the CLI sent a message the SDK could not read ({exc}). A message larger than "
            f"max_buffer_size={max_buffer_size} bytes (a long answer or large tool arguments) "
            f"causes this: raise ProviderSettings.max_buffer_size"
        )
    if isinstance(exc, sdk.CLIConnectionError):
        tail = "\n".join(stderr)
        return ProcessDiedError(
            f"lost the connection to the Claude Code CLI: {exc}"
            + (f"; its last output:\n{tail}" if tail else "; it printed nothing on stderr"),
            stderr=tail,
        )
    return ProcessDiedError(f"the Claude Agent SDK failed: {exc}", stderr="\n".join(stderr))


def result_failure(
    outcome: QueryOutcome, rules: ResultRules, collected: ResultCollector
) -> ProviderError | None:
    """The error a finished query stands for, or None for a good result.

    `outcome`: its result message and the facts of API failures, which produce no parts;
    `collected` folded the query's parts (its calls and text; the partial result of an error).
    """
    result = outcome.result
    if outcome.refused:
        # The model declined (finish reason `content-filter`): its words are the answer, and
        # the same request would be declined again, so no rule of the request applies.
        return None
    calls = collected.tool_call_count
    text_chars = collected.text_chars
    # An answer cut at the output limit is a result (finish reason "length"), held to the same
    # rules as a complete one.
    answered = not result.is_error or outcome.output_limit_reached
    if answered or result.subtype == "error_max_turns":
        if rules.forbid_calls and calls:
            return ToolChoiceViolationError(
                f"tool_choice='none' forbade tool calls, but the model made {calls} (the tools "
                f"stay defined because the conversation holds tool calls, which the Messages API "
                f"refuses without them); retry, or leave tool_choice at 'auto'"
            )
        off_schema = [c for c in collected.invalid_calls if c.tool_name in rules.strict_tools]
        if off_schema:
            call = off_schema[0]
            return StrictToolCallError(
                f"the model's call of the strict tool {call.tool_name!r} does not match its "
                f"schema ({call.invalid_reason}); the Claude Code CLI cannot constrain the "
                f"model's arguments, so strict is held by this check: retry, or make the tool "
                f"non-strict to receive such calls marked invalid"
            )
        if rules.required_call is not None and not calls:
            return ToolChoiceViolationError(
                f"tool_choice required a call of {rules.required_call}, but the model answered "
                f"without one ({text_chars} characters of text); retry, or relax tool_choice"
            )
        if (
            rules.mode == "single-turn"
            and not calls
            and not text_chars
            and result.structured_output is None
        ):
            return EmptyToolRoutingError(
                f"the model returned neither a tool call nor text (stop reason "
                f"{result.stop_reason!r}, {usage_from(result.usage).output_tokens} output "
                f"tokens); nothing can be routed. Retry, or check the prompt and tools"
            )
    retried = result.subtype == "error_max_structured_output_retries"
    # Calls handed back to the application (single-turn) come first: the object is the answer
    # of a later turn, once their results are in.
    handed_back = rules.mode == "single-turn" and calls
    # Single-turn: the CLI's request for the object would be a second model turn, which the
    # one turn allowed ends before it is sent (`error_max_turns`).
    ended = answered or (rules.mode == "single-turn" and result.subtype == "error_max_turns")
    if (
        rules.wants_object
        and not handed_back
        and (retried or (ended and result.structured_output is None))
    ):
        return StructuredOutputError(
            "output_schema was asked for, but the model answered without a matching object"
            + (" (the CLI asked it again before giving up)" if retried else "")
            + "; read .partial for what it said, or simplify the schema",
            partial=collected.result(),
        )
    if result.subtype == "error_max_budget_usd":
        budget = rules.budget_usd or 0.0
        return BudgetExceededError(
            f"the query reached its budget of ${budget:g} (it cost "
            f"${result.total_cost_usd or 0:g}); raise max_budget_usd or read the partial "
            f"result on this error (.partial)",
            partial=collected.result(),
            budget_usd=budget,
            cost_usd=result.total_cost_usd,
        )
    if result.subtype == "error_max_turns":
        if rules.mode == "single-turn":
            return None
        return MaxTurnsError(
            f"the query used its {rules.max_turns} model turn(s) without finishing; raise "
            f"max_turns or read the partial result on this error (.partial)",
            partial=collected.result(),
            max_turns=rules.max_turns,
        )
    if answered:
        return None
    return _api_failure(outcome, rules)


def _api_failure(outcome: QueryOutcome, rules: ResultRules) -> ProviderError:
    result, failure = outcome.result, outcome.api_failure
    status = result.api_error_status
    errors = "; ".join(result.errors or [])
    detail = (failure.text if failure else "") or errors or result.result or ""
    message = f"the Messages API failed (HTTP {status}): {detail}".strip()
    kind = failure.kind if failure else None
    if status in (401, 403) or kind == "authentication_failed":
        return AuthenticationError(
            message + "; check ANTHROPIC_API_KEY / your Claude login",
            status=status,
            error_kind=kind,
            session_id=result.session_id,
        )
    if status == 429 or kind == "rate_limit":
        return RateLimitError(
            message,
            status=status,
            error_kind=kind,
            session_id=result.session_id,
            retry_after=outcome.retry_delay,
        )
    if status == 529:
        return OverloadedError(
            message,
            status=status,
            error_kind=kind,
            session_id=result.session_id,
            retry_after=outcome.retry_delay,
        )
    if status in (400, None) and "prompt is too long" in detail.lower():
        # No status: the CLI measured the request itself and never sent it.
        if status is None:
            message = f"the conversation is too long for the model's context window: {detail}"
        return ContextWindowExceededError(
            message + "; shorten the conversation, or use a model with a larger context window",
            status=status,
            error_kind=kind,
            session_id=result.session_id,
        )
    refused = [k for k in sorted(rules.sampling) if status == 400 and k in detail]
    if refused:
        model = rules.model or "the CLI's default model"
        return UnsupportedSettingError(
            f"the Messages API refused {refused[0]} for {model} (HTTP 400): {detail}; leave "
            f"{refused[0]} out (newer models and API versions take no sampling settings)",
            setting=refused[0],
            model=rules.model,
            status=status,
            error_kind=kind,
            session_id=result.session_id,
        )
    if status is None:
        if not detail:
            return APIError(
                f"the query failed: result subtype {result.subtype!r}",
                error_kind=kind,
                session_id=result.session_id,
            )
        return APIConnectionError(
            f"the connection to the Messages API was lost or its answer was unreadable: "
            f"{detail}; retrying may help (ProviderSettings.max_retries)",
            error_kind=kind,
            session_id=result.session_id,
        )
    return APIError(message, status=status, error_kind=kind, session_id=result.session_id)
