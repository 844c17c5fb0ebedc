"""Outgoing errors: what kind of failure an exception is, decided once for every front door.

`classify` reads an exception, in one ordered table (`_RULES`), as an `ErrorFacts`: a neutral
`ErrorKind` plus the facts a door needs (the HTTP status it stands for, the Messages API's own
status, whether retrying can help, `retry_after`, the offending `param`, a machine `code`).
Each front door then picks its own error type from a table keyed by the kind: the gateway
(`gateway._errors.error_info`: status and Anthropic/OpenAI error type), LiteLLM (`_raise`),
LangChain (`_langchain_error`) and pydantic-ai (`_model_error`). No door looks at the exception's
class itself, so the doors cannot disagree about what a failure is.

`SentParts` is the one rule for a stream taken back after its content was sent: it records the
part ids a door has handed to its client and raises `StreamRetractionError` for a `discard` part
that would take any of them back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from .errors import (
    APIConnectionError,
    APIError,
    AuthenticationError,
    ContextWindowExceededError,
    CredentialsMissingError,
    InvalidMessagesError,
    OverloadedError,
    ProviderError,
    QueryTimeoutError,
    RateLimitError,
    StreamRetractionError,
    StructuredOutputError,
    ToolDefinitionError,
    ToolRoutingError,
    UnsupportedRequestError,
)
from .types import DiscardPart

__all__ = ["ErrorFacts", "ErrorKind", "SentParts", "classify"]


class ErrorKind(StrEnum):
    """What went wrong, in no door's vocabulary."""

    #: The provider refused the request before running it (a bad message, tool or parameter).
    INVALID_REQUEST = "invalid_request"
    #: The Messages API refused the request (a 4xx not named otherwise, not 408 or 409).
    REQUEST_REJECTED = "request_rejected"
    #: The API rejected the provider's Claude credentials, or there are none (401).
    AUTHENTICATION = "authentication"
    #: The credentials may not do this (403).
    PERMISSION = "permission"
    #: The account is rate limited (429).
    RATE_LIMIT = "rate_limit"
    #: The API is overloaded (529).
    OVERLOADED = "overloaded"
    #: The query ran past its `timeout` or `idle_timeout`.
    TIMEOUT = "timeout"
    #: The connection to the API was lost, or its answer could not be read.
    CONNECTION = "connection"
    #: The conversation is longer than the model's context window (told by the API or the CLI).
    CONTEXT_WINDOW = "context_window"
    #: The API does not know the model or resource (404).
    NOT_FOUND = "not_found"
    #: The request is too large for the API (413).
    TOO_LARGE = "too_large"
    #: The API failed in a way retrying may get past (5xx, 408, 409).
    UPSTREAM = "upstream"
    #: The model's reply was not what was asked (no required call, no structured object).
    BAD_OUTPUT = "bad_output"
    #: A streamed answer was taken back after part of it was sent.
    STREAM_RETRACTED = "stream_retracted"
    #: The provider itself could not finish (a dead or missing CLI, a limit reached, ...).
    PROVIDER = "provider"
    #: Not a `ProviderError`: a bug.
    INTERNAL = "internal"


@dataclass(frozen=True)
class ErrorFacts:
    """An error as every door needs it.

    `status` is the HTTP status a server in front of the provider answers it with (the Messages
    API's own for what the client can fix, 502/504 for a failure upstream); `upstream_status`
    the status the Messages API itself answered with, if it did; `error_type` the SDK's name for
    the API's error (`rate_limit`, `authentication_failed`, ...). `param` names the offending
    request field and `code` is a machine code (`unsupported_parameter`,
    `context_length_exceeded`); `details` are extra facts for the body (`error_code`).
    """

    kind: ErrorKind
    message: str
    status: int
    retryable: bool
    upstream_status: int | None = None
    retry_after: float | None = None
    error_type: str | None = None
    param: str | None = None
    code: str | None = None
    details: Mapping[str, Any] | None = None


#: (exception class, condition or None, kind), first match wins: the order is the decision
#: (a context-window error is an `APIError` with status 400, or none when the CLI refused it).
_RULES: tuple[
    tuple[type[BaseException] | tuple[type[BaseException], ...],
          Callable[[Any], bool] | None, ErrorKind], ...
] = (
    (StreamRetractionError, None, ErrorKind.STREAM_RETRACTED),
    ((InvalidMessagesError, UnsupportedRequestError, ToolDefinitionError), None,
     ErrorKind.INVALID_REQUEST),
    (AuthenticationError, lambda e: e.status == 403, ErrorKind.PERMISSION),
    ((AuthenticationError, CredentialsMissingError), None, ErrorKind.AUTHENTICATION),
    (RateLimitError, None, ErrorKind.RATE_LIMIT),
    (OverloadedError, None, ErrorKind.OVERLOADED),
    (ContextWindowExceededError, None, ErrorKind.CONTEXT_WINDOW),
    (APIConnectionError, None, ErrorKind.CONNECTION),
    (QueryTimeoutError, None, ErrorKind.TIMEOUT),
    (APIError, lambda e: e.status == 404, ErrorKind.NOT_FOUND),
    (APIError, lambda e: e.status == 413, ErrorKind.TOO_LARGE),
    (APIError, lambda e: not e.retryable and 400 <= (e.status or 0) < 500,
     ErrorKind.REQUEST_REJECTED),
    (APIError, lambda e: e.status is not None, ErrorKind.UPSTREAM),  # 5xx, 408, 409
    # (An `APIError` without a status left, the query failed unexplained: `PROVIDER`.)
    ((ToolRoutingError, StructuredOutputError), None, ErrorKind.BAD_OUTPUT),
    (ProviderError, None, ErrorKind.PROVIDER),
)  # fmt: skip

#: Per kind: the HTTP status a server answers with (None: the API's own) and whether retrying
#: the same request can help. A reply that was not what was asked is worth another try (the
#: model answers differently), even where the CLI already asked again itself.
_KINDS: dict[ErrorKind, tuple[int | None, bool]] = {
    ErrorKind.INVALID_REQUEST: (400, False),
    ErrorKind.REQUEST_REJECTED: (None, False),
    ErrorKind.AUTHENTICATION: (401, False),
    ErrorKind.PERMISSION: (403, False),
    ErrorKind.RATE_LIMIT: (429, True),
    ErrorKind.OVERLOADED: (529, True),
    ErrorKind.TIMEOUT: (504, True),
    ErrorKind.CONNECTION: (502, True),
    ErrorKind.CONTEXT_WINDOW: (400, False),
    ErrorKind.NOT_FOUND: (404, False),
    ErrorKind.TOO_LARGE: (413, False),
    ErrorKind.UPSTREAM: (502, True),
    ErrorKind.BAD_OUTPUT: (502, True),
    ErrorKind.STREAM_RETRACTED: (502, True),
    ErrorKind.PROVIDER: (500, False),
    ErrorKind.INTERNAL: (500, False),
}


def _kind(exc: BaseException) -> ErrorKind:
    for classes, condition, kind in _RULES:
        if isinstance(exc, classes) and (condition is None or condition(exc)):
            return kind
    return ErrorKind.INTERNAL


def classify(exc: BaseException) -> ErrorFacts:
    """The kind of `exc` and the facts of it every front door answers with."""
    kind = _kind(exc)
    status, retryable = _KINDS[kind]
    upstream: int | None = getattr(exc, "status", None) if isinstance(exc, APIError) else None
    message = str(exc)
    if kind is ErrorKind.INTERNAL:
        message = f"internal error: {type(exc).__name__}: {exc}"
    param: str | None = getattr(exc, "param", None)
    code: str | None = None
    if kind is ErrorKind.INVALID_REQUEST and param:
        code = "unsupported_parameter"
    elif kind is ErrorKind.CONTEXT_WINDOW:
        # OpenAI's code for it, which clients (LangChain, LiteLLM) read as context overflow.
        param, code = "messages", "context_length_exceeded"
    details = getattr(exc, "details", None)  # `ThreadUnsupportedError`'s error_code
    return ErrorFacts(
        kind=kind,
        message=message,
        status=status if status is not None else upstream or 400,
        retryable=retryable,
        upstream_status=upstream,
        retry_after=getattr(exc, "retry_after", None),
        error_type=getattr(exc, "error_kind", None),
        param=param,
        code=code,
        details=details or None,
    )


class SentParts:
    """The part ids (text, reasoning, tool call) a streaming door has handed to its client.

    A `discard` part takes back the parts of an attempt the CLI redid; what a stream already
    handed out cannot be taken back, so `discard` raises `StreamRetractionError` when any of its
    parts was sent, and is a no-op otherwise (nothing of the attempt reached the client).
    """

    def __init__(self) -> None:
        self._sent: set[str] = set()

    def add(self, part_id: str) -> None:
        """Record that something of `part_id` was sent."""
        self._sent.add(part_id)

    def __contains__(self, part_id: object) -> bool:
        return part_id in self._sent

    def discard(self, part: DiscardPart, remedy: str) -> None:
        """Raise `StreamRetractionError` if `part` takes back anything sent; `remedy` is what
        the door's user can do instead (the message says it)."""
        taken_back = self._sent.intersection(part.ids)
        if taken_back:
            raise StreamRetractionError(
                f"{part.reason}, after {len(taken_back)} streamed part(s) of the cut attempt "
                f"were sent; what was sent cannot be taken back: {remedy}"
            )
