"""`POST /v1/messages`: the Anthropic Messages API over the provider.

`sf_provider._anthropic_format` reads the request and writes the answer, streamed as the API's
SSE events (what each parameter does: docs/gateway.md); the betas of the `anthropic-beta`
header reach the API request (`header_betas`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from starlette.requests import Request

from .. import _door as door
from .._anthropic_format import EventMapper, header_betas, message, message_id, parse_request
from ..provider import ClaudeAgentProvider
from ..types import GenerateResult, StreamPart
from ._http import ModelCall, model_endpoint, sse

__all__ = ["messages_endpoint"]


def _read(
    request: Request, body: dict[str, Any], provider: ClaudeAgentProvider, drop: bool
) -> ModelCall:
    call = parse_request(body, drop=drop)
    betas = header_betas(request.headers.getlist("anthropic-beta"))
    answer_id = message_id()

    def complete(result: GenerateResult) -> dict[str, Any]:
        return message(result, message_id=answer_id, model=call.model, structured=call.structured)

    async def events(parts: AsyncIterator[StreamPart]) -> AsyncGenerator[bytes, None]:
        mapper = EventMapper(call.model, message_id=answer_id, structured=call.structured)
        yield sse(mapper.start(), "message_start")
        yield sse({"type": "ping"}, "ping")
        async for part in parts:
            for event in mapper.add(part):
                yield sse(event, event["type"])

    options = call.options | ({"betas": betas} if betas else {})
    parsed = door.request(call.messages, call.tools, provider=provider, **options)
    return ModelCall(parsed, complete, events if call.stream else None, call.dropped)


#: `POST /v1/messages`.
messages_endpoint = model_endpoint("anthropic", _read)
