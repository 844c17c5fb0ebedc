"""The errors sf-provider raises: one hierarchy under `ProviderError`.

Every error carries the facts a caller needs as attributes (not only in its message) and says
whether retrying the same request can help (`retryable`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .types import GenerateResult

__all__ = [
    "APIConnectionError",
    "APIError",
    "AuthenticationError",
    "BudgetExceededError",
    "CLINotFoundError",
    "CLIOutputError",
    "ContextWindowExceededError",
    "DuplicateToolNameError",
    "EmptyToolRoutingError",
    "InvalidMessagesError",
    "InvalidToolNameError",
    "InvalidToolSchemaError",
    "MaxTurnsError",
    "MissingExecutorError",
    "OverloadedError",
    "PartialResultError",
    "ProcessDiedError",
    "ProviderCompatibilityError",
    "ProviderError",
    "QueryTimeoutError",
    "RateLimitError",
    "StreamRetractionError",
    "StrictToolCallError",
    "StructuredOutputError",
    "ToolChoiceViolationError",
    "ToolDefinitionError",
    "ToolRoutingError",
    "ToolsUnavailableError",
    "UnsupportedRequestError",
    "UnsupportedSettingError",
]


class ProviderError(Exception):
    """Base class of every error sf-provider raises on purpose."""

    retryable: bool = False


# -- bad input, raised before any process starts


class ToolDefinitionError(ProviderError, ValueError):
    """A tool definition cannot be offered to the model."""


class InvalidToolSchemaError(ToolDefinitionError):
    """A tool's input schema is not a valid JSON Schema for an object."""


class InvalidToolNameError(ToolDefinitionError):
    """A tool name the CLI or the Messages API would reject."""


class DuplicateToolNameError(ToolDefinitionError):
    """Two tools of one request share a name."""


class InvalidMessagesError(ProviderError, ValueError):
    """The messages of a request cannot be turned into a conversation."""


class UnsupportedRequestError(ProviderError, ValueError):
    """The request asks for something this version cannot do; the message says what instead."""


class ProviderCompatibilityError(ProviderError):
    """The provider cannot reach what the request needs; `problems` lists every missing piece.

    Raised before the CLI starts (by `generate`/`stream` and `ensure_capabilities`), so a
    workflow fails at dispatch, never mid-run. `report` holds the full `CapabilityReport` when
    one was made.
    """

    def __init__(self, problems: list[str], *, report: Any = None) -> None:
        self.problems = list(problems)
        self.report = report
        listed = "\n".join(f"- {p}" for p in self.problems)
        super().__init__(f"the provider cannot serve this request:\n{listed}")


class CredentialsMissingError(ProviderCompatibilityError):
    """No Claude credentials are configured for the CLI (no API key, token, cloud switch or
    readable login): no request can succeed until one is. Every door names it as an
    authentication error (HTTP 401, not retryable), as it does credentials the API rejected."""


class MissingExecutorError(ProviderCompatibilityError):
    """Executor mode was forced but a tool has no executor."""


# -- single-turn tool routing


class ToolRoutingError(ProviderError):
    """A single-turn reply could not be turned into what the request asked for."""

    retryable = True


class EmptyToolRoutingError(ToolRoutingError):
    """The model returned neither a tool call nor text."""


class ToolChoiceViolationError(ToolRoutingError):
    """`tool_choice` required a tool call and the reply had none."""


class StrictToolCallError(ToolRoutingError):
    """A call of a `strict` tool did not match its schema (the CLI cannot constrain the model's
    arguments, so `strict` is held by this check); the message names the tool and what did not
    match. Retryable: the model may well answer right the next time."""


# -- the CLI and the API


class CLINotFoundError(ProviderError):
    """The Claude Code CLI could not be found or started."""


class CLIOutputError(ProviderError):
    """The CLI's output could not be read (too large for `max_buffer_size`, or malformed)."""


class ProcessDiedError(ProviderError):
    """The CLI process ended without finishing the query."""

    def __init__(self, message: str, *, exit_code: int | None = None, stderr: str = "") -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.stderr = stderr


class ToolsUnavailableError(ProviderError):
    """The started CLI does not offer the model every tool of the request (the bridge failed to
    connect or to list a tool); the query was stopped before its answer was used.

    `missing` names the tools the CLI did not list; `status` is the bridge server's status as
    the CLI reported it. A bug, not bad luck: the message asks for a report.
    """

    def __init__(self, message: str, *, missing: list[str], status: str | None) -> None:
        super().__init__(message)
        self.missing = list(missing)
        self.status = status


class QueryTimeoutError(ProviderError, TimeoutError):
    """The query ran past `timeout` (whole query) or `idle_timeout` (no message from the CLI).

    The CLI was stopped; `kind` says which limit expired and `seconds` its value.
    """

    retryable = True

    def __init__(self, message: str, *, kind: str, seconds: float) -> None:
        super().__init__(message)
        self.kind = kind
        self.seconds = seconds


class APIError(ProviderError):
    """The Messages API answered with an error the CLI could not get past."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        error_kind: str | None = None,
        session_id: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error_kind = error_kind
        self.session_id = session_id
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:  # type: ignore[override]
        return self.status is not None and (self.status >= 500 or self.status in (408, 409))


class APIConnectionError(APIError):
    """The connection to the Messages API was lost, or its answer could not be read (no status)."""

    @property
    def retryable(self) -> bool:  # type: ignore[override]
        return True


class AuthenticationError(APIError):
    """The API rejected the credentials (HTTP 401/403)."""

    @property
    def retryable(self) -> bool:  # type: ignore[override]
        return False


class RateLimitError(APIError):
    """The API is rate limiting this account (HTTP 429)."""

    @property
    def retryable(self) -> bool:  # type: ignore[override]
        return True


class OverloadedError(APIError):
    """The API is overloaded (HTTP 529)."""

    @property
    def retryable(self) -> bool:  # type: ignore[override]
        return True


class ContextWindowExceededError(APIError):
    """The request is longer than the model's context window ("Prompt is too long", HTTP 400).

    The CLI would summarise the older turns and send a shortened conversation instead (its
    compaction, which the provider turns off): shorten the history, or use a model with a
    larger context window.
    """

    @property
    def retryable(self) -> bool:  # type: ignore[override]
        return False


class UnsupportedSettingError(APIError, UnsupportedRequestError):
    """The Messages API refused a setting sent as the caller wrote it (HTTP 400), such as
    `temperature` on a model or API version that takes none: `setting` names it, `model` the
    model asked for (None: the CLI's default). Leave the setting out."""

    def __init__(self, message: str, *, setting: str, model: str | None, **facts: Any) -> None:
        super().__init__(message, **facts)
        self.setting = setting
        self.model = model

    @property
    def param(self) -> str:
        """The request field refused (OpenAI-shaped errors name it as `param`)."""
        return self.setting


class StreamRetractionError(ProviderError):
    """A streamed answer was taken back after part of it had been sent to the client.

    The CLI's API stream was cut and the model asked again (a `discard` part takes back the cut
    attempt), but what a stream already handed out (chunks, SSE events) cannot be taken back, so
    the stream ends with this error rather than send the answer twice. Retryable: send the request
    again; the non-streaming call (`generate`, `invoke`, `stream=false`) folds the redo in
    correctly.
    """

    retryable = True


class PartialResultError(ProviderError):
    """A query stopped at a limit; `partial` holds what was done: text, tool calls and results."""

    def __init__(self, message: str, *, partial: GenerateResult) -> None:
        super().__init__(message)
        self.partial = partial


class MaxTurnsError(PartialResultError):
    """Executor mode used up `max_turns` without finishing."""

    def __init__(self, message: str, *, partial: GenerateResult, max_turns: int) -> None:
        super().__init__(message, partial=partial)
        self.max_turns = max_turns


class StructuredOutputError(PartialResultError):
    """`output_schema` was asked for, but the model gave no matching object, even after retries.

    The CLI asks the model again a few times (`MAX_STRUCTURED_OUTPUT_RETRIES` in the CLI's
    environment); `partial` holds the text it answered instead.
    """


class BudgetExceededError(PartialResultError):
    """The query reached `max_budget_usd`; `cost_usd` is what it had cost when it stopped."""

    def __init__(
        self, message: str, *, partial: GenerateResult, budget_usd: float, cost_usd: float | None
    ) -> None:
        super().__init__(message, partial=partial)
        self.budget_usd = budget_usd
        self.cost_usd = cost_usd
