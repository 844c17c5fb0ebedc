"""`POST /v1/messages`: the Anthropic Messages API over the provider.

The request is read by `sf_provider._anthropic_format.parse_request` (what is honoured, what is
refused with a 400 naming the parameter: that module's docstring) and run as one single-turn
provider call: the client's tools have no executor here, so their calls come back as `tool_use`
blocks for the client to run. With `stream: true` the answer is the API's SSE events
(`message_start`, `ping`, content blocks with `text_delta` / `thinking_delta` /
`signature_delta` / `input_json_delta`, `message_delta` with the stop reason and usage,
`message_stop`); otherwise one `message`. Errors take the API's shape, `{"type": "error",
"error": {"type", "message"}}`: as a response with the matching status before the answer
begins, as an `error` event after. The betas of the `anthropic-beta` header reach the API
request (`header_betas`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .._anthropic_format import (
    EventMapper,
    error_body,
    header_betas,
    message,
    message_id,
    parse_request,
)
from ..provider import ClaudeAgentProvider
from ..types import GenerateResult, StreamPart
from ._http import ErrorInfo, QueryResponse, anthropic_error, json_body

__all__ = ["messages_endpoint"]


async def messages_endpoint(request: Request) -> Response:
    """`POST /v1/messages`. Bad input raises here (answered 400 by the app's handlers), before
    any process starts."""
    provider: ClaudeAgentProvider = request.app.state.provider
    call = parse_request(await json_body(request))
    betas = header_betas(request.headers.getlist("anthropic-beta"))
    options = call.options | ({"betas": betas} if betas else {})
    parts = provider.stream(call.messages, tools=call.tools, **options)
    answer_id = message_id()

    def complete(result: GenerateResult) -> dict[str, Any]:
        return message(result, message_id=answer_id, model=call.model, structured=call.structured)

    def sse(parts: AsyncIterator[StreamPart]) -> AsyncGenerator[bytes, None]:
        mapper = EventMapper(call.model, message_id=answer_id, structured=call.structured)
        return _events(mapper, parts)

    return QueryResponse(
        parts,
        complete=complete,
        error=anthropic_error,
        sse=sse if call.stream else None,
        stream_error=_error_event,
    )


def _event(data: dict[str, Any]) -> bytes:
    return f"event: {data['type']}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _error_event(info: ErrorInfo) -> bytes:
    """An error after the answer began, as the API sends one (the official clients raise it)."""
    return _event(error_body(info.type, info.message))


async def _events(
    mapper: EventMapper, parts: AsyncIterator[StreamPart]
) -> AsyncGenerator[bytes, None]:
    yield _event(mapper.start())
    yield _event({"type": "ping"})
    async for part in parts:
        for event in mapper.add(part):
            yield _event(event)
