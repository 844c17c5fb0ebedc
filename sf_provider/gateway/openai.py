"""`POST /v1/chat/completions`: the OpenAI Chat Completions API over the provider.

`sf_provider._openai_format` reads the request and writes the answer (what each parameter does:
docs/gateway.md); streamed, the chunks end with a usage chunk when
`stream_options.include_usage` is set, and `data: [DONE]`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from starlette.requests import Request

from .. import _door as door
from .._openai_format import ChunkMapper, chat_request, completion, completion_id
from .._openai_format import usage as openai_usage
from ..provider import ClaudeAgentProvider
from ..types import GenerateResult, StreamPart
from ._http import ModelCall, model_endpoint, sse

__all__ = ["chat_completions"]


def _read(
    _request: Request, body: dict[str, Any], provider: ClaudeAgentProvider, drop: bool
) -> ModelCall:
    chat = chat_request(body, drop=body if drop else ())
    model = chat.model or provider.settings.model or "default"
    answer_id, created = completion_id(), int(time.time())

    def complete(result: GenerateResult) -> dict[str, Any]:
        return completion(
            result, model=model, structured=chat.structured, id=answer_id, created=created
        )

    def chunk(choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> bytes:
        data: dict[str, Any] = {
            "id": answer_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "logprobs": None, **c} for c in choices],
        }
        if chat.include_usage:
            data["usage"] = usage  # null but in the last chunk
        return sse(data)

    async def events(parts: AsyncIterator[StreamPart]) -> AsyncGenerator[bytes, None]:
        mapper = ChunkMapper(structured=chat.structured)
        yield chunk([mapper.start()])
        async for part in parts:
            for choice in mapper.choices(part):
                yield chunk([choice])
        if chat.include_usage and mapper.usage is not None:
            yield chunk([], openai_usage(mapper.usage))
        yield b"data: [DONE]\n\n"

    parsed = door.request(chat.messages, chat.tools, provider=provider, **chat.options)
    return ModelCall(parsed, complete, events if chat.stream else None, chat.dropped)


#: `POST /v1/chat/completions`.
chat_completions = model_endpoint("openai", _read)
