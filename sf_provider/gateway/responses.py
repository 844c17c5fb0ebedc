"""`/v1/responses`: the OpenAI Responses API over the provider, with stored responses.

`POST /v1/responses` runs one model call (`sf_provider._responses_format` reads the request and
writes the `response` object, or its SSE events). A response is stored (unless `store: false`)
with its conversation: the input items up to it and its output, each item with an id that names
the response it belongs to (`item_id`). `previous_response_id` continues that conversation
(`_conversation`) and an `item_reference` input item stands for the stored item it names
(`_resolved`). `GET` and `DELETE /v1/responses/{id}` read and remove a response, `GET
/v1/responses/{id}/input_items` lists its input. A response that failed once its stream began is
kept too (GET reads its error) but cannot be continued. A stored response belongs to the API key
that created it: to any other it, and every item of it, is an unknown id.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .. import _door as door
from .._responses_format import (
    DROPPABLE,
    EventMapper,
    ResponsesRequest,
    input_item_list,
    item_response,
    numbered_input,
    output_items,
    parse_request,
    provider_call,
    reference,
    response_id,
    response_object,
    stored_response_query,
)
from ..errors import ProviderError
from ..provider import ClaudeAgentProvider as Provider
from ..types import GenerateResult, StreamPart
from ._errors import ErrorInfo, GatewayError, error_info, invalid_request
from ._http import GatewaySettings, ModelCall, model_endpoint, sse, tenant_of

__all__ = [
    "MemoryResponseStore",
    "ResponseStore",
    "StoredResponse",
    "response_routes",
    "response_store",
]


@dataclass(frozen=True)
class StoredResponse:
    """A response kept for `previous_response_id` and `GET /v1/responses/{id}`."""

    id: str
    #: Whose it is: a hash of the API key that created it.
    owner: str
    #: The response object as it was answered.
    response: dict[str, Any]
    #: The conversation up to it, as input items: every earlier input and output, then its own.
    conversation: tuple[Mapping[str, Any], ...]


class ResponseStore(Protocol):
    """Where responses are kept. A lookup by another owner finds nothing, as for an unknown id."""

    async def put(self, record: StoredResponse) -> None:
        """Keep `record` (under its id and owner)."""

    async def get(self, owner: str, response_id: str) -> StoredResponse | None:
        """The record `owner` kept as `response_id`, or None (unknown, expired or another's)."""

    async def delete(self, owner: str, response_id: str) -> bool:
        """Remove it; whether there was one to remove."""

    async def start(self) -> None:
        """As the gateway starts: raise, saying why, if the store cannot be used."""

    async def aclose(self) -> None:
        """As the gateway stops: release what it holds."""


class MemoryResponseStore:
    """The responses of one gateway process, in memory: at most `size` (the oldest goes first),
    each for `ttl` seconds. A replica cannot see another's."""

    def __init__(
        self, size: int, ttl: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.size, self.ttl, self._clock = size, ttl, clock
        self._records: OrderedDict[str, tuple[float, StoredResponse]] = OrderedDict()

    def _expire(self) -> None:
        now = self._clock()
        while self._records:
            stored_at, _ = next(iter(self._records.values()))
            if now - stored_at < self.ttl and len(self._records) <= self.size:
                return
            self._records.popitem(last=False)

    async def put(self, record: StoredResponse) -> None:
        self._records[record.id] = (self._clock(), record)
        self._records.move_to_end(record.id)
        self._expire()

    async def get(self, owner: str, response_id: str) -> StoredResponse | None:
        self._expire()
        found = self._records.get(response_id)
        return found[1] if found is not None and found[1].owner == owner else None

    async def delete(self, owner: str, response_id: str) -> bool:
        if await self.get(owner, response_id) is None:
            return False
        del self._records[response_id]
        return True

    async def start(self) -> None:
        """Nothing to reach."""

    async def aclose(self) -> None:
        """Nothing to release."""


def response_store(settings: GatewaySettings) -> ResponseStore:
    """The store `settings` name: in memory (`response_store` None), or the Redis server at
    that URL (the extra `sf-provider[redis]`)."""
    size, ttl = settings.response_store_size, settings.response_store_ttl
    if settings.response_store is None:
        return MemoryResponseStore(size, ttl)
    from ._redis_store import RedisResponseStore

    return RedisResponseStore(settings.response_store, size, ttl)


def _owner(request: Request) -> str:
    """Whose a request is: a hash of its API key (the guard has checked the key, if keys are
    set), so a store never holds a key."""
    return tenant_of(request.headers)


def _not_found(response_id: str, status: int, param: str | None = None) -> GatewayError:
    # The same words whatever the reason: another key's response is an unknown id to this one.
    message = (
        f"Response with id {response_id!r} not found: it was never stored (store: false), has "
        f"expired or was deleted, or belongs to another API key"
    )
    if status == 404:
        return GatewayError(ErrorInfo(404, "invalid_request_error", message))
    return GatewayError(invalid_request(message, param, "previous_response_not_found"))


async def _conversation(
    store: ResponseStore, owner: str, call: ResponsesRequest
) -> tuple[Mapping[str, Any], ...]:
    """The conversation `call` continues: none, or the stored one its `previous_response_id`
    names. It is replayed whole: the warm pool continues the process that holds exactly this
    conversation when one does (ADR 0004), else a fresh process replays it. A failed response
    is no answer to go on from: it is refused, naming the one to continue instead."""
    if call.previous_response_id is None:
        return ()
    record = await store.get(owner, call.previous_response_id)
    if record is None:
        raise _not_found(call.previous_response_id, 400, "previous_response_id")
    if record.response["status"] == "failed":
        before = record.response.get("previous_response_id")
        instead = f"previous_response_id {before!r}" if before else "no previous_response_id"
        raise GatewayError(
            invalid_request(
                f"Response {call.previous_response_id!r} failed "
                f"({record.response['error']['code']}) and cannot be continued: send its input "
                f"again with {instead}",
                "previous_response_id",
                "previous_response_failed",
            )
        )
    return record.conversation


async def _resolved(
    store: ResponseStore, owner: str, items: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """`items` with each `item_reference` replaced by the stored item it names (a 404 naming it
    when there is none, as OpenAI answers): an item id names its response (`item_response`),
    whose record holds the item."""
    records: dict[str, StoredResponse | None] = {}
    resolved = []
    for i, item in enumerate(items):
        named = reference(item, f"input[{i}]")
        if named is None:
            resolved.append(item)
            continue
        found = None
        holder = item_response(named)
        if holder is not None:
            if holder not in records:
                records[holder] = await store.get(owner, holder)
            record = records[holder]
            stored = record.conversation if record is not None else ()
            found = next((dict(c) for c in stored if c.get("id") == named), None)
        if found is None:
            raise GatewayError(
                ErrorInfo(
                    404,
                    "invalid_request_error",
                    f"Item with id {named!r} not found: items are kept with their response, "
                    f"and its response was never stored (store: false), has expired or was "
                    f"deleted, or belongs to another API key; send the item itself instead",
                    f"input[{i}]",
                    "item_not_found",
                )
            )
        resolved.append(found)
    return resolved


def _refuse_repeats(
    previous: Sequence[Mapping[str, Any]], items: Sequence[Mapping[str, Any]]
) -> None:
    """An item given twice (by reference or whole, once more after the conversation
    `previous_response_id` continues) would reach the model twice: a 400 naming it, as OpenAI
    answers."""
    seen = {item["id"] for item in previous if item.get("id")}
    for i, item in enumerate(items):
        if item["id"] in seen:
            raise GatewayError(
                invalid_request(
                    f"Duplicate item found with id {item['id']!r}: it is already in the "
                    f"conversation (the one previous_response_id continues, or earlier in "
                    f"input); remove it from input",
                    f"input[{i}]",
                    "duplicate_item",
                )
            )
        seen.add(item["id"])


def response_routes(kept: ResponseStore) -> list[Route]:
    """The routes of `/v1/responses`, keeping responses in `kept` (`response_store`)."""

    async def read(
        request: Request, body: dict[str, Any], provider: Provider, drop_params: bool
    ) -> ModelCall:
        # Off the event loop, as `model_endpoint` parses the others: the tools' schema checks.
        drop = DROPPABLE if drop_params else ()
        call = await anyio.to_thread.run_sync(parse_request, body, drop)
        owner = _owner(request)
        previous = await _conversation(kept, owner, call)
        new_id = response_id()
        items = numbered_input(new_id, await _resolved(kept, owner, call.items))
        _refuse_repeats(previous, items)
        call = dataclasses.replace(call, items=items)
        messages, tools, options = provider_call(call, previous)
        frame: dict[str, Any] = {
            "id": new_id,
            "model": call.model or provider.settings.model or "default",
            "created_at": int(time.time()),
        }

        async def keep(response: dict[str, Any]) -> None:
            if call.store:
                conversation = (*previous, *items, *response["output"])
                await kept.put(StoredResponse(response["id"], owner, response, conversation))

        async def complete(result: GenerateResult) -> dict[str, Any]:
            output = output_items(result, response=new_id, structured=call.structured)
            response = response_object(
                call, output=output, finish=result.finish_reason, usage=result.usage, **frame
            )
            await keep(response)
            return response

        async def events(parts: AsyncIterator[StreamPart]) -> AsyncGenerator[bytes, None]:
            mapper = EventMapper(call, **frame)
            for event in mapper.start():
                yield sse(event, event["type"])
            try:
                async for part in parts:
                    for event in mapper.add(part):
                        yield sse(event, event["type"])
            except ProviderError as exc:
                info = error_info(exc)
                code = info.code or ("rate_limit_exceeded" if info.status == 429 else info.type)
                failed = mapper.failed(code, info.message, info.param)
                # Kept as OpenAI keeps a failed response: GET reads it, its error included.
                # A store that fails now too leaves the client told of the first failure.
                with contextlib.suppress(GatewayError):
                    await keep(mapper.response)
                for event in failed:
                    yield sse(event, event["type"])
                return
            last = mapper.finish()
            try:
                await keep(mapper.response)  # before the client can name it in its next request
            except GatewayError as exc:  # the store failed (Redis gone): it cannot be continued
                for event in mapper.failed("response_store_unavailable", exc.info.message):
                    yield sse(event, event["type"])
                return
            yield sse(last, last["type"])

        parsed = door.request(messages, tools, provider=provider, **options)
        return ModelCall(parsed, complete, events if call.stream else None, call.dropped)

    async def stored(request: Request) -> Response:
        response_id = request.path_params["response_id"]
        owner = _owner(request)
        if request.method == "DELETE":
            if not await kept.delete(owner, response_id):
                raise _not_found(response_id, 404)
            return JSONResponse({"id": response_id, "object": "response", "deleted": True})
        stored_response_query(request.query_params.multi_items())
        record = await kept.get(owner, response_id)
        if record is None:
            raise _not_found(response_id, 404)
        return JSONResponse(record.response)

    async def input_items(request: Request) -> Response:
        response_id = request.path_params["response_id"]
        record = await kept.get(_owner(request), response_id)
        if record is None:
            raise _not_found(response_id, 404)
        # The conversation up to the response's own output: the whole input it was given.
        given = record.conversation[: len(record.conversation) - len(record.response["output"])]
        return JSONResponse(input_item_list(given, request.query_params.multi_items()))

    return [
        Route("/v1/responses", model_endpoint("openai", read), methods=["POST"]),
        Route("/v1/responses/{response_id}", stored, methods=["GET", "DELETE"]),
        Route("/v1/responses/{response_id}/input_items", input_items, methods=["GET"]),
    ]
