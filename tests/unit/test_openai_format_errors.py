"""Errors in the OpenAI format: a prompt longer than the model's context window carries OpenAI's
`context_length_exceeded` code, which clients (LangChain, LiteLLM) read as context overflow."""

from __future__ import annotations

from sf_provider import APIError, ContextWindowExceededError
from sf_provider._error_status import error_info


def test_a_context_window_exceeded_error_is_context_length_exceeded() -> None:
    message = "the Messages API failed (HTTP 400): Prompt is too long"
    info = error_info(ContextWindowExceededError(message, status=400))
    assert (info.status, info.type) == (400, "invalid_request_error")
    assert (info.param, info.code) == ("messages", "context_length_exceeded")
    assert info.message == message


def test_another_bad_request_has_no_context_code() -> None:
    info = error_info(APIError("the Messages API failed (HTTP 400): bad", status=400))
    assert (info.status, info.code) == (400, None)
