"""The gateway's errors: an error's kind (`_error_kinds.classify`) -> HTTP status and error type
(the Anthropic API's vocabulary, also written into OpenAI-shaped bodies, where clients go by the
status and the `code`), for both API styles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._door import ErrorKind, classify

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


#: The Anthropic error type of each kind (the status is the kind's, from `classify`).
_TYPES: dict[ErrorKind, str] = {
    ErrorKind.INVALID_REQUEST: "invalid_request_error",
    ErrorKind.REQUEST_REJECTED: "invalid_request_error",
    ErrorKind.AUTHENTICATION: "authentication_error",
    ErrorKind.PERMISSION: "permission_error",
    ErrorKind.RATE_LIMIT: "rate_limit_error",
    ErrorKind.OVERLOADED: "overloaded_error",
    ErrorKind.TIMEOUT: "timeout_error",
    ErrorKind.CONNECTION: "api_error",
    ErrorKind.CONTEXT_WINDOW: "invalid_request_error",
    ErrorKind.NOT_FOUND: "not_found_error",
    ErrorKind.TOO_LARGE: "request_too_large",
    ErrorKind.UPSTREAM: "api_error",
    # The reply could not be read as what was asked (no call where one was required, no
    # object, a stream taken back after it was sent): a 502, worth another try.
    ErrorKind.BAD_OUTPUT: "api_error",
    ErrorKind.STREAM_RETRACTED: "api_error",
    ErrorKind.PROVIDER: "api_error",
    ErrorKind.INTERNAL: "api_error",
}


def error_info(exc: BaseException) -> ErrorInfo:
    """The HTTP status and error type for an error of a request."""
    if isinstance(exc, GatewayError):  # the gateway's own, already answered
        return exc.info
    facts = classify(exc)
    message = facts.message
    if facts.kind in (ErrorKind.AUTHENTICATION, ErrorKind.PERMISSION):
        # The provider's own Claude credentials, not the client's key: the message says so.
        # No status from the API: there were none to send (`CredentialsMissingError`).
        what = "were rejected" if facts.upstream_status else "are missing"
        message = (f"the Claude credentials of sf-provider's CLI {what} (not your key for "
                   f"this server): {message}")  # fmt: skip
    return ErrorInfo(
        facts.status,
        _TYPES[facts.kind],
        message,
        param=facts.param,
        code=facts.code,
        retry_after=facts.retry_after,
        details=dict(facts.details) if facts.details else None,
    )
