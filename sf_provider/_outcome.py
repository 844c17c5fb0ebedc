"""A finished query's final facts (`QueryOutcome`), and what is decided from them once: the
finish reason, the finish part, the model that answered.

`PartMapper` gathers the facts while it maps; failure classification (`_failures`), the finish
part and tracing read them here, never the mapper. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .types import FinishPart, FinishReason, Usage

if TYPE_CHECKING:
    from claude_agent_sdk import ResultMessage

__all__ = [
    "STOP_SEQUENCE_DETAIL",
    "APIFailure",
    "QueryOutcome",
    "finish_part",
    "finish_reason",
    "response_model",
    "usage_from",
]

_STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool-calls",
    "tool_deferred": "tool-calls",
    "refusal": "content-filter",
}

#: Result subtypes of a query that ran out of turns or budget: cut short, not failed.
_CUT_SHORT = ("error_max_turns", "error_max_budget_usd")

#: The `FinishPart.provider_details` key naming the stop sequence the answer ended at (the
#: Anthropic API's `stop_sequence`).
STOP_SEQUENCE_DETAIL = "stop_sequence"


@dataclass(frozen=True)
class APIFailure:
    """An API failure the CLI reported as a synthetic assistant message (it makes no parts)."""

    #: The SDK's `AssistantMessage.error` ("rate_limit", "max_output_tokens", ...; "unknown").
    kind: str
    #: The message's text ("API Error: ...").
    text: str


@dataclass(frozen=True)
class QueryOutcome:
    """The final facts of a query: its result message and what the mapper saw on the way."""

    result: ResultMessage
    #: Single-turn mode: the model's calls go back to the application (no executor runs them).
    single_turn: bool = False
    #: The answer holds calls the application must answer (single-turn calls not taken back).
    handed_back: bool = False
    api_failure: APIFailure | None = None
    #: The delay the CLI waited before its last retry (the API's retry-after, when it sent one).
    retry_delay: float | None = None
    #: API messages of the query that stopped at the output limit (`max_tokens`).
    output_limit_hits: int = 0
    #: API messages received: every model call the CLI made (resumed pieces, retries too).
    api_calls: int = 0
    #: The last model call's input tokens, cache reads and writes included.
    context_input_tokens: int = 0
    #: The id the API gave its last message (`msg_...`).
    response_id: str | None = None
    #: The stop sequence the last model call ended at.
    stop_sequence: str | None = None

    @property
    def output_limit_reached(self) -> bool:
        """Whether the query ended because the answer hit the output limit (`max_tokens`) and
        the CLI stopped resuming it: a result cut short, not a failure."""
        return self.api_failure is not None and self.api_failure.kind == "max_output_tokens"

    @property
    def refused(self) -> bool:
        """Whether the model declined to answer (the API's stop reason `refusal`): an answer
        with finish reason `content-filter`, not a failure, though the CLI reports it as an
        error ("API Error: ... safeguards flagged this message") after asking once more."""
        return self.result.stop_reason == "refusal"


def finish_reason(outcome: QueryOutcome, *, failed: bool = False) -> FinishReason:
    """The finish reason of a finished query: the one place it is decided.

    `failed`: the query raises an error without a partial result. `tool-calls` only when the
    answer holds calls the application must answer, so no front door corrects it.
    """
    result = outcome.result
    if failed:
        return "error"
    if outcome.refused:
        return "content-filter"
    if result.is_error and result.subtype not in _CUT_SHORT:
        reason: FinishReason = "error"
    elif result.subtype in _CUT_SHORT and not (
        # Single-turn: the one turn ended as its reply did; the CLI wanted another turn (it
        # asks again for a missing output_schema object), not more output.
        outcome.single_turn and result.subtype == "error_max_turns"
    ):
        reason = "length"
    else:
        reason = _STOP_REASONS.get(result.stop_reason or "", "other")
    if outcome.output_limit_reached:
        # The CLI resumed the cut answer as often as it does, then gave up with an error
        # message: the answer so far is the result, cut at the output limit.
        reason = "length"
    if outcome.handed_back and reason != "error" and result.subtype != "error_max_budget_usd":
        return "tool-calls"  # single-turn: the calls handed back are why the query stopped
    if reason == "tool-calls" and not outcome.handed_back:
        # The last turn called only the CLI's hidden StructuredOutput tool (the answer is the
        # object), or tools the provider ran: no call is left for the application to answer.
        return "stop"
    return reason


def finish_part(
    outcome: QueryOutcome, *, failed: bool = False, notes: Mapping[str, Any] | None = None
) -> FinishPart:
    """The finish part of a finished query; `failed` as in `finish_reason`; `notes`: the
    provider's own details (which process served it: fresh, warm or continued; ...)."""
    result = outcome.result
    details: dict[str, Any] = {"subtype": result.subtype, "is_error": result.is_error}
    if result.model_usage:
        details["model_usage"] = result.model_usage
    if result.terminal_reason:
        details["terminal_reason"] = result.terminal_reason
    if result.duration_api_ms is not None:
        details["duration_api_ms"] = result.duration_api_ms
    if outcome.output_limit_hits:
        details["output_limit_hits"] = outcome.output_limit_hits
    if outcome.response_id:
        details["response_id"] = outcome.response_id
    if outcome.api_calls > 1 and outcome.context_input_tokens:
        # The usage sums several model calls, which overstates the context size.
        details["context_input_tokens"] = outcome.context_input_tokens
    if outcome.stop_sequence is not None:
        details[STOP_SEQUENCE_DETAIL] = outcome.stop_sequence
    details.update(notes or {})
    return FinishPart(
        structured_output=result.structured_output,
        finish_reason=finish_reason(outcome, failed=failed),
        usage=usage_from(result.usage),
        cost_usd=result.total_cost_usd,
        session_id=result.session_id,
        num_turns=result.num_turns,
        api_calls=outcome.api_calls,
        raw_stop_reason="max_tokens" if outcome.output_limit_reached else result.stop_reason,
        duration_ms=result.duration_ms,
        provider_details=details,
    )


def usage_from(raw: dict[str, Any] | None) -> Usage:
    """`Usage` from the SDK's usage dict (missing counts are 0)."""
    raw = raw or {}

    def count(key: str) -> int:
        value = raw.get(key)
        return value if isinstance(value, int) else 0

    return Usage(
        input_tokens=count("input_tokens"),
        output_tokens=count("output_tokens"),
        cache_creation_input_tokens=count("cache_creation_input_tokens"),
        cache_read_input_tokens=count("cache_read_input_tokens"),
    )


def response_model(details: Mapping[str, Any]) -> str | None:
    """The model that answered, from a finish part's `provider_details` (the CLI's per-model
    usage): the one that wrote most. None when the CLI did not say."""
    model_usage = details.get("model_usage")
    if not isinstance(model_usage, Mapping) or not model_usage:
        return None

    def written(name: str) -> int:
        entry = model_usage[name]
        value = entry.get("outputTokens") if isinstance(entry, Mapping) else None
        return value if isinstance(value, int) else 0

    return str(max(model_usage, key=written))
