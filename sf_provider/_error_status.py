"""`ProviderError` -> HTTP status and error type: the one mapping behind the gateway's two API
styles and the LiteLLM provider's exceptions.

The error types are the Anthropic API's vocabulary (`invalid_request_error`,
`authentication_error`, `rate_limit_error`, `overloaded_error`, ...); the gateway also writes
them into OpenAI-shaped bodies, where clients go by the status and the `code`
(`context_length_exceeded` for a prompt longer than the model's context window).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .errors import (
    APIConnectionError,
    APIError,
    AuthenticationError,
    ContextWindowExceededError,
    InvalidMessagesError,
    OverloadedError,
    ProviderError,
    QueryTimeoutError,
    RateLimitError,
    StructuredOutputError,
    ToolDefinitionError,
    UnsupportedRequestError,
)

__all__ = ["ErrorInfo", "GatewayError", "error_info", "invalid_request"]


@dataclass(frozen=True)
class ErrorInfo:
    """An error as HTTP: status, error type (Anthropic's vocabulary, also used in OpenAI's
    bodies), message, for OpenAI's body the offending `param` and a `code`, and for Anthropic's
    the `details` object the official clients read `error_code` from."""

    status: int
    type: str
    message: str
    param: str | None = None
    code: str | None = None
    retry_after: float | None = None
    details: dict[str, Any] | None = None


class GatewayError(Exception):
    """An error of the gateway itself (a bad body, a missing key), answered as `info`."""

    def __init__(self, info: ErrorInfo) -> None:
        super().__init__(info.message)
        self.info = info


def invalid_request(message: str, param: str | None = None, code: str | None = None) -> ErrorInfo:
    """A 400 for bad input."""
    return ErrorInfo(400, "invalid_request_error", message, param=param, code=code)


def error_info(exc: BaseException) -> ErrorInfo:
    """The HTTP status and error type for an error of a request."""
    message = str(exc)
    match exc:
        case GatewayError():
            return exc.info
        case UnsupportedRequestError() | InvalidMessagesError() | ToolDefinitionError():
            param = getattr(exc, "param", None)
            code = "unsupported_parameter" if param else None
            info = invalid_request(message, param=param, code=code)
            details = getattr(exc, "details", None)  # `ThreadUnsupportedError`'s error_code
            return replace(info, details=dict(details)) if details else info
        case AuthenticationError():
            # The provider's own Claude credentials, not the client's key: the message says so.
            status = 403 if exc.status == 403 else 401
            kind = "permission_error" if status == 403 else "authentication_error"
            return ErrorInfo(status, kind, f"the Claude credentials of sf-provider's CLI were "
                             f"rejected (not your key for this server): {message}")  # fmt: skip
        case RateLimitError():
            return ErrorInfo(429, "rate_limit_error", message, retry_after=exc.retry_after)
        case OverloadedError():
            return ErrorInfo(529, "overloaded_error", message, retry_after=exc.retry_after)
        case QueryTimeoutError():
            return ErrorInfo(504, "timeout_error", message)
        case APIConnectionError():
            return ErrorInfo(502, "api_error", message)
        case ContextWindowExceededError():
            # OpenAI's code for it, which clients (LangChain, LiteLLM) read as context overflow.
            return invalid_request(message, param="messages", code="context_length_exceeded")
        case APIError() if exc.status in (400, 404, 413, 422):
            kinds = {404: "not_found_error", 413: "request_too_large"}
            status = exc.status or 400
            return ErrorInfo(status, kinds.get(status, "invalid_request_error"), message)
        case APIError():
            return ErrorInfo(502, "api_error", message, retry_after=exc.retry_after)
        case StructuredOutputError():
            # The model's reply was not the object asked for: worth another try.
            return ErrorInfo(502, "api_error", message)
        case ProviderError() if exc.retryable:
            # The reply could not be read as what was asked (no call where one was required,
            # nothing at all, a stream cut after it was sent): worth another try.
            return ErrorInfo(502, "api_error", message)
        case ProviderError():
            return ErrorInfo(500, "api_error", message)
        case _:
            return ErrorInfo(500, "api_error", f"internal error: {type(exc).__name__}: {exc}")
