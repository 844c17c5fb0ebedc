"""`POST /v1/chat/completions`: the OpenAI Chat Completions API over the provider.

The request is read by `sf_provider._openai_format.chat_request` (what is honoured, what is
refused with a 400 naming the parameter); tools come back as `tool_calls` for the client to run.
`stop` is the provider's `stop_sequences` (the answer ends before the first); a history with
tool calls in a request without `tools` (OpenAI's API takes it) has the called tools defined
again, with tool_choice "none".
With `stream: true` the answer is `chat.completion.chunk` events: the role, content deltas,
tool-call deltas (index, id and name, then argument fragments), the finish reason, a usage
chunk when `stream_options.include_usage` is set, and `data: [DONE]`.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .._openai_format import (
    ChatRequest,
    ChunkMapper,
    chat_request,
    completion,
    completion_id,
)
from .._openai_format import usage as openai_usage
from ..provider import ClaudeAgentProvider
from ..types import GenerateResult, StreamPart
from ._http import ErrorInfo, QueryResponse, json_body, openai_error

__all__ = ["chat_completions"]


async def chat_completions(request: Request) -> Response:
    """`POST /v1/chat/completions`. Bad input raises here (answered 400 by the app's handlers),
    before any process starts."""
    body = await json_body(request)
    chat = chat_request(body)
    provider: ClaudeAgentProvider = request.app.state.provider
    parts = provider.stream(chat.messages, tools=chat.tools, **chat.options)
    model = chat.model or provider.settings.model or "default"
    answer_id, created = completion_id(), int(time.time())

    def complete(result: GenerateResult) -> dict[str, Any]:
        return completion(
            result, model=model, structured=chat.structured, id=answer_id, created=created
        )

    def sse(parts: AsyncIterator[StreamPart]) -> AsyncGenerator[bytes, None]:
        return _events(chat, parts, model=model, answer_id=answer_id, created=created)

    return QueryResponse(
        parts,
        complete=complete,
        error=openai_error,
        sse=sse if chat.stream else None,
        stream_error=_error_event,
    )


def _event(data: Any) -> bytes:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _error_event(info: ErrorInfo) -> bytes:
    """An error after the stream began, as OpenAI sends one (the official clients raise it)."""
    return _event(
        {"error": {"message": info.message, "type": info.type, "param": info.param,
                   "code": info.code}}
    )  # fmt: skip


async def _events(
    chat: ChatRequest,
    parts: AsyncIterator[StreamPart],
    *,
    model: str,
    answer_id: str,
    created: int,
) -> AsyncGenerator[bytes, None]:
    mapper = ChunkMapper(structured=chat.structured)

    def chunk(choices: list[dict[str, Any]]) -> bytes:
        data: dict[str, Any] = {
            "id": answer_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "logprobs": None, **c} for c in choices],
        }
        if chat.include_usage:
            data["usage"] = None
        return _event(data)

    yield chunk([mapper.start()])
    async for part in parts:
        for choice in mapper.choices(part):
            yield chunk([choice])
    if chat.include_usage and mapper.usage is not None:
        final = {
            "id": answer_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "system_fingerprint": None,
            "choices": [],
            "usage": openai_usage(mapper.usage),
        }
        yield _event(final)
    yield b"data: [DONE]\n\n"
