"""One outgoing error classification: every kind of error, through every front door.

`_error_kinds.classify` decides the kind once; each door (the gateway's HTTP status and type,
LiteLLM's exceptions, LangChain's standard model errors, pydantic-ai's categories) maps the kind
by its own table. These prove each door answers every kind, and answers it as its own library's
models do.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core import exceptions as langchain_errors
from litellm import exceptions as litellm_errors
from pydantic_ai import exceptions as pydantic_ai_errors

from sf_provider import (
    APIConnectionError,
    APIError,
    AuthenticationError,
    ContextWindowExceededError,
    DiscardPart,
    InvalidMessagesError,
    OverloadedError,
    ProcessDiedError,
    QueryTimeoutError,
    RateLimitError,
    StreamPart,
    StreamRetractionError,
    StructuredOutputError,
    TextDeltaPart,
    TextStartPart,
    ToolChoiceViolationError,
)
from sf_provider._anthropic_format import EventMapper
from sf_provider._error_kinds import ErrorKind, SentParts, classify
from sf_provider._openai_format import ChunkMapper, UnsupportedParameterError
from sf_provider.adapters import langchain as langchain_door
from sf_provider.adapters import litellm as litellm_door
from sf_provider.adapters import pydantic_ai as pydantic_ai_door
from sf_provider.gateway._errors import error_info
from sf_provider.types import GenerateResult

#: One error of each kind (a factory: the LangChain door changes the error's class).
SAMPLES: dict[ErrorKind, Callable[[], BaseException]] = {
    ErrorKind.INVALID_REQUEST: lambda: UnsupportedParameterError("top_k", "not supported"),
    ErrorKind.REQUEST_REJECTED: lambda: APIError("HTTP 422", status=422),
    ErrorKind.AUTHENTICATION: lambda: AuthenticationError("HTTP 401", status=401),
    ErrorKind.PERMISSION: lambda: AuthenticationError("HTTP 403", status=403),
    ErrorKind.RATE_LIMIT: lambda: RateLimitError("HTTP 429", status=429, retry_after=7.0),
    ErrorKind.OVERLOADED: lambda: OverloadedError("HTTP 529", status=529),
    ErrorKind.TIMEOUT: lambda: QueryTimeoutError("ran past", kind="timeout", seconds=1.0),
    ErrorKind.CONNECTION: lambda: APIConnectionError("the connection was lost"),
    # The CLI refused the prompt itself: no HTTP status.
    ErrorKind.CONTEXT_WINDOW: lambda: ContextWindowExceededError("Prompt is too long"),
    ErrorKind.NOT_FOUND: lambda: APIError("HTTP 404", status=404),
    ErrorKind.TOO_LARGE: lambda: APIError("HTTP 413", status=413),
    ErrorKind.UPSTREAM: lambda: APIError("HTTP 500", status=500),
    ErrorKind.BAD_OUTPUT: lambda: ToolChoiceViolationError("no call where one was required"),
    ErrorKind.STREAM_RETRACTED: lambda: StreamRetractionError("cannot be taken back"),
    ErrorKind.PROVIDER: lambda: ProcessDiedError("the CLI died", exit_code=1),
    ErrorKind.INTERNAL: lambda: RuntimeError("a bug"),
}

#: Per kind: what each door answers. The gateway: (status, Anthropic error type); LiteLLM: its
#: exception; LangChain: its standard error's name (None: the provider's error as it is);
#: pydantic-ai: its category (None: the provider's error) and whether it is a `ModelHTTPError`.
EXPECTED: dict[ErrorKind, dict[str, Any]] = {
    ErrorKind.INVALID_REQUEST: {
        "gateway": (400, "invalid_request_error"),
        "litellm": litellm_errors.BadRequestError,
        "langchain": "ModelInvalidRequestError",
        "pydantic_ai": None,
    },
    ErrorKind.REQUEST_REJECTED: {
        "gateway": (422, "invalid_request_error"),
        "litellm": litellm_errors.BadRequestError,
        "langchain": "ModelInvalidRequestError",
        "pydantic_ai": (pydantic_ai_errors.ModelRequestRejectedError, True),
    },
    ErrorKind.AUTHENTICATION: {
        "gateway": (401, "authentication_error"),
        "litellm": litellm_errors.AuthenticationError,
        "langchain": "ModelAuthenticationError",
        "pydantic_ai": (pydantic_ai_errors.ModelAuthenticationError, True),
    },
    ErrorKind.PERMISSION: {
        "gateway": (403, "permission_error"),
        "litellm": litellm_errors.PermissionDeniedError,
        "langchain": "ModelPermissionDeniedError",
        "pydantic_ai": (pydantic_ai_errors.ModelAuthenticationError, True),
    },
    ErrorKind.RATE_LIMIT: {
        "gateway": (429, "rate_limit_error"),
        "litellm": litellm_errors.RateLimitError,
        "langchain": "ModelRateLimitError",
        "pydantic_ai": (pydantic_ai_errors.ModelRateLimitError, True),
    },
    ErrorKind.OVERLOADED: {
        "gateway": (529, "overloaded_error"),
        "litellm": litellm_errors.ServiceUnavailableError,
        "langchain": "ModelAPIError",
        "pydantic_ai": (pydantic_ai_errors.ModelOverloadedError, True),
    },
    ErrorKind.TIMEOUT: {
        "gateway": (504, "timeout_error"),
        "litellm": litellm_errors.Timeout,
        "langchain": "ModelTimeoutError",
        "pydantic_ai": (pydantic_ai_errors.ModelTimeoutError, False),
    },
    ErrorKind.CONNECTION: {
        "gateway": (502, "api_error"),
        "litellm": litellm_errors.APIConnectionError,
        "langchain": "ModelConnectionError",
        "pydantic_ai": (pydantic_ai_errors.ModelConnectionError, False),
    },
    ErrorKind.CONTEXT_WINDOW: {
        "gateway": (400, "invalid_request_error"),
        "litellm": litellm_errors.ContextWindowExceededError,
        "langchain": "ContextOverflowError",
        "pydantic_ai": (pydantic_ai_errors.ModelContextWindowExceededError, False),
    },
    ErrorKind.NOT_FOUND: {
        "gateway": (404, "not_found_error"),
        "litellm": litellm_errors.NotFoundError,
        "langchain": "ModelNotFoundError",
        "pydantic_ai": (pydantic_ai_errors.ModelNotFoundError, True),
    },
    ErrorKind.TOO_LARGE: {
        "gateway": (413, "request_too_large"),
        "litellm": litellm_errors.BadRequestError,
        "langchain": "ModelInvalidRequestError",
        "pydantic_ai": (pydantic_ai_errors.ModelRequestRejectedError, True),
    },
    ErrorKind.UPSTREAM: {
        "gateway": (502, "api_error"),
        "litellm": litellm_errors.InternalServerError,  # the API's own 500, as LiteLLM keeps it
        "langchain": "ModelAPIError",
        "pydantic_ai": (pydantic_ai_errors.ModelServerError, True),
    },
    ErrorKind.BAD_OUTPUT: {
        "gateway": (502, "api_error"),
        "litellm": litellm_errors.BadGatewayError,
        "langchain": None,
        "pydantic_ai": None,
    },
    ErrorKind.STREAM_RETRACTED: {
        "gateway": (502, "api_error"),
        "litellm": litellm_errors.BadGatewayError,
        "langchain": "ModelConnectionError",
        "pydantic_ai": (pydantic_ai_errors.ModelConnectionError, False),
    },
    ErrorKind.PROVIDER: {
        "gateway": (500, "api_error"),
        "litellm": litellm_errors.InternalServerError,
        "langchain": None,
        "pydantic_ai": None,
    },
    ErrorKind.INTERNAL: {
        "gateway": (500, "api_error"),
        "litellm": litellm_errors.InternalServerError,
        "langchain": None,
        "pydantic_ai": None,
    },
}


def through_gateway(exc: Any, expected: Any) -> None:
    info = error_info(exc)
    assert (info.status, info.type) == expected
    # A client retries a 429 and a 5xx but a plain 500 (a failure the same request meets again).
    assert (info.status == 429 or info.status >= 502) is classify(exc).retryable


def through_litellm(exc: Any, expected: Any) -> None:
    with pytest.raises(Exception) as caught:
        litellm_door._raise(exc, "sonnet", "claude-agent")
    assert type(caught.value) is expected and caught.value.__cause__ is exc
    if expected is litellm_errors.InternalServerError:  # set on every LiteLLM the pins allow
        assert caught.value.provider_status_code == classify(exc).upstream_status


def through_langchain(exc: Any, expected: Any) -> None:
    retryable = classify(exc).retryable
    original = type(exc)
    langchain_door._as_langchain_error(exc)
    if expected is None:
        assert type(exc) is original
        return
    assert isinstance(exc, getattr(langchain_errors, expected))
    assert exc.is_retryable is retryable  # LangChain's retry middleware goes by it


def through_pydantic_ai(exc: Any, expected: Any) -> None:
    error = pydantic_ai_door._model_error(exc, "sonnet", in_stream=False)
    if expected is None:
        assert error is None
        return
    category, http = expected
    assert isinstance(error, category)
    assert isinstance(error, pydantic_ai_errors.ModelHTTPError) is http
    if isinstance(error, pydantic_ai_errors.ModelHTTPError):
        assert error.status_code == exc.status


DOORS: dict[str, Callable[[Any, Any], None]] = {
    "gateway": through_gateway,
    "litellm": through_litellm,
    "langchain": through_langchain,
    "pydantic_ai": through_pydantic_ai,
}


def test_every_kind_has_a_sample_and_is_what_it_is_classified_as() -> None:
    assert set(SAMPLES) == set(EXPECTED) == set(ErrorKind)
    for kind, sample in SAMPLES.items():
        assert classify(sample()).kind is kind


@pytest.mark.parametrize(
    ("kind", "door"),
    list(itertools.product(ErrorKind, DOORS)),
    ids=[f"{kind.value}-{door}" for kind, door in itertools.product(ErrorKind, DOORS)],
)
def test_every_door_answers_every_kind_as_its_library_does(kind: ErrorKind, door: str) -> None:
    DOORS[door](SAMPLES[kind](), EXPECTED[kind][door])


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        # The API's own refusal, with its status, is the same kind as the CLI's.
        (ContextWindowExceededError("Prompt is too long", status=400), ErrorKind.CONTEXT_WINDOW),
        (APIError("HTTP 400", status=400), ErrorKind.REQUEST_REJECTED),
        (APIError("HTTP 408", status=408), ErrorKind.UPSTREAM),
        (APIError("HTTP 409", status=409), ErrorKind.UPSTREAM),
        (APIError("HTTP 503", status=503), ErrorKind.UPSTREAM),
        (RateLimitError("rate limited"), ErrorKind.RATE_LIMIT),  # no status: still a rate limit
        (AuthenticationError("authentication_failed"), ErrorKind.AUTHENTICATION),
        (APIError("the query failed: result subtype 'error'"), ErrorKind.PROVIDER),
        (InvalidMessagesError("an unknown role"), ErrorKind.INVALID_REQUEST),
        (StructuredOutputError("no object", partial=GenerateResult(text="")), ErrorKind.BAD_OUTPUT),
    ],
)
def test_the_kind_of_other_errors(error: BaseException, kind: ErrorKind) -> None:
    assert classify(error).kind is kind


def test_the_facts_of_a_context_window_error_carry_openais_code() -> None:
    """`context_length_exceeded`, which clients (LangChain, LiteLLM) read as context overflow,
    and only for it."""
    message = "the Messages API failed (HTTP 400): Prompt is too long"
    facts = classify(ContextWindowExceededError(message, status=400))
    assert (facts.status, facts.upstream_status, facts.retryable) == (400, 400, False)
    assert (facts.param, facts.code, facts.message) == (
        "messages",
        "context_length_exceeded",
        message,
    )
    facts = classify(APIError("the Messages API failed (HTTP 400): bad", status=400))
    assert (facts.status, facts.code) == (400, None)


def test_the_facts_of_a_refused_parameter_and_a_rate_limit() -> None:
    facts = classify(UnsupportedParameterError("top_k", "not supported"))
    assert (facts.param, facts.code) == ("top_k", "unsupported_parameter")
    facts = classify(
        RateLimitError("HTTP 429", status=429, retry_after=7.0, error_kind="rate_limit")
    )
    assert (facts.retry_after, facts.error_type, facts.retryable) == (7.0, "rate_limit", True)


def test_the_gateway_tells_its_client_whose_credentials_were_rejected() -> None:
    info = error_info(AuthenticationError("HTTP 401", status=401))
    assert "not your key for this server" in info.message


# -- a stream taken back after it was sent: one error, from every streaming door

SENT: list[StreamPart] = [TextStartPart(id="t1"), TextDeltaPart(id="t1", delta="Half an ans")]


STREAMING_DOORS: dict[str, tuple[Callable[[], Any], Callable[[Any, StreamPart], Any]]] = {
    "chat-completions": (ChunkMapper, lambda mapper, part: mapper.choices(part)),
    "messages": (
        lambda: EventMapper("claude-haiku-4-5", message_id="msg_1"),
        lambda mapper, part: mapper.add(part),
    ),
    "langchain": (
        lambda: langchain_door._ChunkMapper(None),
        lambda mapper, part: mapper.chunks(part),
    ),
}


@pytest.mark.parametrize("door", list(STREAMING_DOORS))
def test_a_discard_of_what_was_sent_is_the_one_retraction_error(door: str) -> None:
    make, feed = STREAMING_DOORS[door]
    mapper = make()
    for part in SENT:
        feed(mapper, part)
    feed(mapper, DiscardPart(ids=["never-sent"], reason="the stream was cut"))  # nothing sent
    with pytest.raises(StreamRetractionError, match="cannot be taken back") as caught:
        feed(mapper, DiscardPart(ids=["t1"], reason="the stream was cut"))
    assert type(caught.value) is StreamRetractionError and caught.value.retryable


def test_sent_parts_names_the_remedy() -> None:
    sent = SentParts()
    sent.add("t1")
    assert "t1" in sent and "t2" not in sent
    with pytest.raises(StreamRetractionError, match=r"after 1 streamed .*: call again$"):
        sent.discard(DiscardPart(ids=["t1", "t2"], reason="cut"), "call again")
