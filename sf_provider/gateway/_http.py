"""What both API styles of the gateway share: settings, the guard in front of the routes
(keys, concurrency, body size), errors in the route's style (`error_response`; off the model
routes, the client's), and `model_endpoint`, which makes a model route of a door's parse and
render functions (`ModelCall`) and runs its query as a `QueryResponse`.
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import itertools
import json
import logging
import math
import re
import uuid
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Mapping,
    Sequence,
)
from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field, model_validator
from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import _door as door
from .._door import ResultCollector, continue_trace
from ..errors import ProviderError
from ..settings import ProviderSettings
from ..types import CallWarning, ErrorPart, FinishPart, GenerateResult, StreamPart, StreamStartPart
from . import _browsers as browsers
from ._errors import ErrorInfo, GatewayError, error_info, invalid_request

if TYPE_CHECKING:
    from ..provider import ClaudeAgentProvider, QueryStream

__all__ = [
    "KEYS_ENV",
    "PROCESS_HEADER",
    "WARNINGS_HEADER",
    "GatewayGuard",
    "GatewaySettings",
    "ModelCall",
    "QueryResponse",
    "anthropic_client",
    "error_response",
    "keys_from",
    "model_endpoint",
    "presented_key",
    "sse",
    "tenant_of",
    "warnings_header",
]

logger = logging.getLogger("sf_provider.gateway")

#: The environment variable `sf-provider gateway` also reads API keys from (comma-separated).
KEYS_ENV = "SF_PROVIDER_GATEWAY_KEYS"

#: The routes that run a model query: guarded by the concurrency and body-size limits.
_MODEL_PATHS = frozenset({"/v1/chat/completions", "/v1/messages", "/v1/responses"})
#: The probes: answered without keys or any other check, for load balancers and orchestrators.
_PROBES = frozenset({"/healthz", "/readyz"})
#: Routes whose errors take Anthropic's shape, and OpenAI's; any other route answers in the
#: shape of its client (`anthropic_client`).
_ANTHROPIC_PATHS = frozenset({"/v1/messages", "/v1/messages/count_tokens"})
_OPENAI_PATHS = frozenset({"/v1/chat/completions", "/v1/responses"})

#: The response header with a query's warnings: a JSON array (ASCII) of `{"code", "message"}`.
WARNINGS_HEADER = "sf-provider-warnings"
#: The response header naming the process that served a model request: fresh, warm, continued.
PROCESS_HEADER = "sf-provider-process"
#: Its largest value in bytes: proxies refuse large response headers (nginx buffers 4-8 KiB for
#: all of them by default); warnings past it are counted in a last `warnings-truncated` entry.
_WARNINGS_LIMIT = 4096

Style = Literal["openai", "anthropic"]


class GatewaySettings(BaseModel):
    """How `sf-provider gateway` serves: where, for whom, how much, and the provider behind it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = Field(
        default="127.0.0.1", description="Interface to listen on (default: loopback only)."
    )
    port: int = Field(default=8080, ge=0, le=65535, description="TCP port (0: any free port).")
    api_keys: list[str] = Field(
        default_factory=list,
        repr=False,
        description="Keys a client must send (`Authorization: Bearer KEY` or `x-api-key: KEY`); "
        "empty = no authentication (keep the gateway on loopback then).",
    )
    max_body_bytes: int = Field(
        default=32 * 1024 * 1024, ge=1024, description="Largest request body accepted (413)."
    )
    max_concurrency: int = Field(
        default=8,
        ge=1,
        description="Model requests served at once; one more is answered 429 with Retry-After. "
        "Each runs a Claude Code CLI process (~180-240 MB).",
    )
    retry_after: int = Field(
        default=1, ge=0, description="Seconds the 429 of a full gateway tells a client to wait."
    )
    body_timeout: float = Field(
        default=30.0,
        gt=0,
        description="Seconds a client has to send a model request's whole body (408 after): "
        "a request takes a concurrency slot only once its body is read.",
    )
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="Web page origins (`https://app.example:8443`, exactly) whose browser "
        "requests are served, with CORS headers; a request with any other `Origin` is refused "
        "(403). `*`: every origin, only with api_keys (else any web page could use the "
        "gateway).",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host names served without api_keys besides the loopback ones (a proxy's "
        "name for the gateway; `*`: any). Without keys, a request naming another host is "
        "refused (403): that is how DNS rebinding lets a web page reach a loopback server.",
    )
    models: list[str] = Field(
        default_factory=lambda: ["sonnet", "opus", "haiku"],
        description="Names `GET /v1/models` lists (with the provider's model); a request may "
        "name any model the Claude Code CLI takes.",
    )
    shutdown_grace: float = Field(
        default=20.0, ge=0, description="Seconds running requests may finish at shutdown."
    )
    response_store: str | None = Field(
        default=None,
        pattern=r"^(redis|rediss|unix)://",
        repr=False,  # it may hold a password
        description="Where `/v1/responses` keeps responses: None, in this process's memory; "
        "`redis://host:port/db` (or `rediss://`, `unix://`), a Redis server the replicas share, "
        "so that any of them continues any conversation (the extra `sf-provider[redis]`).",
    )
    response_store_size: int = Field(
        default=1000,
        ge=0,
        description="Responses `/v1/responses` keeps for `previous_response_id` and `GET` (the "
        "oldest goes first; 0: none).",
    )
    response_store_ttl: float = Field(
        default=86400.0, gt=0, description="Seconds a stored response is kept."
    )
    drop_params: bool = Field(
        default=False,
        description="Leave out the sampling settings (temperature, top_p, top_k) and a value of "
        "a parameter that cannot be honoured instead of refusing it, as LiteLLM's drop_params "
        "does: for frameworks that always send a temperature. Each is a parameter-dropped "
        "warning in the sf-provider-warnings header.",
    )
    provider: ProviderSettings = Field(
        default_factory=ProviderSettings, description="The one provider every request runs on."
    )

    @model_validator(mode="after")
    def _no_open_origin_without_keys(self) -> GatewaySettings:
        if "*" in self.allowed_origins and not self.api_keys:
            raise ValueError(
                "allowed_origins ['*'] without api_keys would let every web page the user "
                "opens use the gateway: set api_keys, or list the origins"
            )
        return self


# --------------------------------------------------------------------------- errors


def _error_body(style: Style, info: ErrorInfo) -> dict[str, Any]:
    """An error in the style's own shape (the body of an error response or SSE event)."""
    if style == "openai":
        fields = {"message": info.message, "type": info.type, "param": info.param}
        return {"error": {**fields, "code": info.code}}
    error: dict[str, Any] = {"type": info.type, "message": info.message}
    if info.details:
        error["details"] = info.details  # the clients read `error_code` there
    return {"type": "error", "error": error}


def _error_json(style: Style, info: ErrorInfo) -> JSONResponse:
    """An error response in the style's shape. 529 (Anthropic's "overloaded") is 503 in OpenAI's."""
    status = 503 if style == "openai" and info.status == 529 else info.status
    wait = info.retry_after
    headers = {} if wait is None else {"Retry-After": str(max(math.ceil(wait), 0))}  # seconds
    return JSONResponse(_error_body(style, info), status_code=status, headers=headers)


def sse(data: Mapping[str, Any], event: str | None = None) -> bytes:
    """One server-sent event (`event:` named, as Anthropic's, or data only, as OpenAI's)."""
    named = f"event: {event}\n" if event else ""
    return f"{named}data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def anthropic_client(headers: Headers) -> bool:
    """Whether a request comes from an Anthropic client: it sends `anthropic-version` (the
    official SDKs always do), or its key as `x-api-key` without an `Authorization` header."""
    return "anthropic-version" in headers or (
        "x-api-key" in headers and "authorization" not in headers
    )


def _style(path: str, headers: Headers) -> Style:
    if path in _ANTHROPIC_PATHS:
        return "anthropic"
    if path in _OPENAI_PATHS or path.startswith("/v1/responses/"):
        return "openai"
    return "anthropic" if anthropic_client(headers) else "openai"


def error_response(request: Request, exc: BaseException) -> JSONResponse:
    """`exc` as an error response in the style of the route `request` came in on (or, off the
    model routes, of its client)."""
    info = error_info(exc)
    if info.status >= 500 and not isinstance(exc, ProviderError | GatewayError):
        request_id = getattr(request.state, "request_id", None)
        logger.error("request %s to %s failed", request_id, request.url.path, exc_info=exc)
    return _error_json(_style(request.url.path, request.headers), info)


def warnings_header(warnings: Sequence[CallWarning]) -> dict[str, str]:
    """The `sf-provider-warnings` header for a query's warnings (none: no header)."""
    if not warnings:
        return {}
    listed = [json.dumps({"code": w.code, "message": w.message}) for w in warnings]
    size = 2  # the brackets
    for i, entry in enumerate(listed):
        size += len(entry) + 1
        if size > _WARNINGS_LIMIT - 100:  # room for the truncation entry
            more = f"{len(listed) - i} more warning(s) left out of this header"
            listed[i:] = [json.dumps({"code": "warnings-truncated", "message": more})]
            break
    return {WARNINGS_HEADER: "[" + ",".join(listed) + "]"}


#: Warnings about the server's own environment: they name its variables, which are no
#: client's business and nothing a client can change. Logged once each for the operator.
_SERVER_WARNINGS = frozenset({"environment-ignored", "cloud-credentials"})
_logged: set[str] = set()


def _for_clients(warnings: Sequence[CallWarning]) -> list[CallWarning]:
    """`warnings` without the server's own (`_SERVER_WARNINGS`), which are logged instead."""
    for warning in warnings:
        if warning.code in _SERVER_WARNINGS and warning.message not in _logged:
            _logged.add(warning.message)
            logger.warning("%s: %s", warning.code, warning.message)
    return [w for w in warnings if w.code not in _SERVER_WARNINGS]


#: The most JSON values (counted as objects, arrays and the commas between items) and the
#: deepest nesting a model request's body may have. Checked on the raw bytes before the body is
#: parsed: 28.6 MiB of 10 M empty objects took 700 MiB as Python objects, and parsing holds
#: the GIL, so a parse this size is about as long as the event loop may wait for it.
MAX_JSON_VALUES = 200_000
MAX_JSON_DEPTH = 256

#: A JSON string, or a run of bytes outside strings (in pieces, so the scan yields the GIL).
_JSON_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[^"]{1,65536}')
_STEPS = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_NOT_BRACKETS = bytes(b for b in range(256) if b not in _STEPS)


def _json_shape_error(raw: bytes) -> GatewayError | None:
    """A body with more than `MAX_JSON_VALUES` values (413) or nesting deeper than
    `MAX_JSON_DEPTH` (400), found without parsing it; None when it is within both. Runs in a
    worker thread: it is a Python loop over the body's strings, so the event loop gets the GIL
    between them."""
    openers = raw.count(b"{") + raw.count(b"[")
    if openers <= MAX_JSON_DEPTH and openers + raw.count(b",") <= MAX_JSON_VALUES:
        return None  # counted with the brackets and commas inside strings: an upper bound
    values = depth = deepest = 0
    for token in _JSON_TOKEN.finditer(raw):
        if raw[token.start()] == ord('"'):
            continue
        part = token[0]
        values += part.count(b"{") + part.count(b"[") + part.count(b",")
        if values > MAX_JSON_VALUES:
            return GatewayError(
                ErrorInfo(
                    413,
                    "request_too_large",
                    f"the request body holds more than {MAX_JSON_VALUES:,} JSON values, the "
                    f"gateway's limit; send fewer messages or tools, or smaller ones",
                    code="too_many_json_values",
                )
            )
        steps = [_STEPS[b] for b in part.translate(None, _NOT_BRACKETS)]
        if steps:
            deepest = max(deepest, *itertools.accumulate(steps, initial=depth))
            depth += sum(steps)
        if deepest > MAX_JSON_DEPTH:
            return GatewayError(
                invalid_request(
                    f"the request body nests deeper than {MAX_JSON_DEPTH} levels, the gateway's "
                    f"limit; flatten it",
                    code="json_too_deep",
                )
            )
    return None


def _json_body(raw: bytes) -> dict[str, Any]:
    """The request's JSON object, its shape checked before it is parsed (`_json_shape_error`;
    the guard has already bounded its size). CPU work: call it off the event loop."""
    # UTF-8 only (RFC 8259): the shape check reads the bytes as UTF-8, so a body in UTF-16 or
    # UTF-32, which json.loads reads too, would slip past it. UTF-8 JSON holds no NUL byte.
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = "\0"
    if "\0" in text:
        raise GatewayError(
            invalid_request("the request body is not UTF-8, as JSON must be (RFC 8259); send UTF-8")
        )
    error = _json_shape_error(raw)
    if error is not None:
        raise error
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise GatewayError(invalid_request(f"the request body is not valid JSON: {exc}")) from None
    except RecursionError:
        raise GatewayError(
            invalid_request("the request body is JSON nested too deeply to read; flatten it")
        ) from None
    if not isinstance(body, dict):
        raise GatewayError(
            invalid_request(f"the request body must be a JSON object, not {type(body).__name__}")
        )
    return body


# --------------------------------------------------------------------------- the guard


class _BodyTooLarge(Exception):
    pass


class GatewayGuard:
    """ASGI middleware in front of every route but the probes (`/healthz`, `/readyz`): first
    what keeps web pages out (`_browsers`: without keys a loopback `Host`; an allowed `Origin`,
    whose preflights are answered here), then the API key (when keys are set, compared in
    constant time; a request's tenant is a hash of it), and for the model routes a JSON
    `Content-Type` (415), the body read in full within `body_timeout` (408) and the body-size
    limit (413), and only then a concurrency slot (429 with `Retry-After` when none is free):
    a slow client holds no slot. The body is handed on to the route."""

    def __init__(
        self, app: ASGIApp, settings: GatewaySettings, slots: anyio.CapacityLimiter
    ) -> None:
        self.app = app
        self.settings = settings
        self.slots = slots
        self._keys = [key.encode() for key in settings.api_keys]
        self._origins = browsers.normalize_origins(settings.allowed_origins)
        self._hosts = frozenset(h.strip().lower() for h in settings.allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in _PROBES:
            await self.app(scope, receive, send)
            return
        send = _with_request_id(scope, send)
        path: str = scope["path"]
        headers = Headers(scope=scope)
        style = _style(path, headers)
        refusal = browsers.refusal(headers, self._hosts, self._origins, keyed=bool(self._keys))
        if refusal is not None:
            await _error_json(style, refusal)(scope, receive, send)
            return
        origin = headers.get("origin")
        if origin is not None:
            # A CORS preflight (it carries no key): answered here, from an allowed origin.
            if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
                response = Response(status_code=204, headers=browsers.cors_headers(origin, headers))
                await response(scope, receive, send)
                return
            send = browsers.with_cors(origin, send)
        if self._keys and not self._authorized(headers):
            info = ErrorInfo(
                401,
                "authentication_error",
                "missing or wrong API key: send `Authorization: Bearer <key>` or "
                "`x-api-key: <key>` with a key the gateway was started with",
                code="invalid_api_key",
            )
            await _error_json(style, info)(scope, receive, send)
            return
        if self._keys:  # the guard checked it: whose conversations these are
            scope.setdefault("state", {})["tenant"] = tenant_of(headers)
        if path not in _MODEL_PATHS or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        refusal = browsers.not_json(headers.get("content-type"))
        if refusal is not None:
            await _error_json(style, refusal)(scope, receive, send)
            return
        try:
            with anyio.fail_after(self.settings.body_timeout):
                body = await self._read_body(headers, receive)
        except _BodyTooLarge:
            info = ErrorInfo(
                413,
                "request_too_large",
                f"the request body is larger than the gateway's limit of "
                f"{self.settings.max_body_bytes:,} bytes (max_body_bytes)",
            )
            await _error_json(style, info)(scope, receive, send)
            return
        except TimeoutError:
            info = ErrorInfo(
                408,
                "timeout_error",
                f"the request body did not arrive within the gateway's "
                f"{self.settings.body_timeout:g} s (body_timeout); send it at once",
                code="body_timeout",
            )
            response = _error_json(style, info)
            response.headers["connection"] = "close"  # the rest of the body is not read
            await response(scope, receive, send)
            return
        if body is None:
            return  # the client left before sending its body
        slot = object()
        try:  # refused, not queued, when full: a queue would only hide the overload
            self.slots.acquire_on_behalf_of_nowait(slot)
        except anyio.WouldBlock:
            info = ErrorInfo(
                429,
                "rate_limit_error",
                f"the gateway is serving its limit of {self.settings.max_concurrency} requests at "
                f"once; retry after the Retry-After delay",
                code="concurrency_limit",
                retry_after=self.settings.retry_after,
            )
            await _error_json(style, info)(scope, receive, send)
            return
        try:
            await self.app(scope, _replay(body, receive), send)
        finally:
            self.slots.release_on_behalf_of(slot)

    def _authorized(self, headers: Headers) -> bool:
        candidate = presented_key(headers).encode()
        # Every key is compared, so the time taken does not say which one nearly matched.
        matched = [hmac.compare_digest(candidate, key) for key in self._keys]
        return any(matched) and bool(candidate)

    async def _read_body(self, headers: Headers, receive: Receive) -> bytes | None:
        limit = self.settings.max_body_bytes
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise _BodyTooLarge
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            body += message.get("body", b"")
            if len(body) > limit:
                raise _BodyTooLarge
            if not message.get("more_body", False):
                return bytes(body)


def presented_key(headers: Headers) -> str:
    """The API key a request sends: `Authorization: Bearer KEY`, else `x-api-key: KEY`."""
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return headers.get("x-api-key", "")


def tenant_of(headers: Headers) -> str:
    """Whose a request is: a hash of its API key (never the key itself), the same for every
    request with that key."""
    return hashlib.sha256(presented_key(headers).encode()).hexdigest()


def _with_request_id(scope: Scope, send: Send) -> Send:
    """A new id for the request, in the `request-id` (Anthropic's clients) and `x-request-id`
    (OpenAI's) response headers, and in `request.state.request_id` for the gateway's log: the
    id a client reports (`response._request_id`) is the one the gateway logged."""
    request_id = f"req_{uuid.uuid4().hex}"
    scope.setdefault("state", {})["request_id"] = request_id

    async def send_with_id(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            headers["request-id"] = headers["x-request-id"] = request_id
        await send(message)

    return send_with_id


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands out the body read already, then the client's later messages
    (a disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def keys_from(values: Sequence[str] | None, environ: Mapping[str, str]) -> list[str]:
    """API keys from `--api-key` values and the `SF_PROVIDER_GATEWAY_KEYS` variable."""
    keys = [v.strip() for v in values or [] if v.strip()]
    keys += [k.strip() for k in environ.get(KEYS_ENV, "").split(",") if k.strip()]
    return keys


# --------------------------------------------------------------------------- the query


Events = Callable[[AsyncIterator[StreamPart]], AsyncGenerator[bytes, None]]


@dataclass(frozen=True)
class ModelCall:
    """A model request as its door read it: the provider call, how the answer is written
    (`complete`: the JSON body of the result; `events`: the SSE bytes of the stream parts, None
    when the request does not stream), and the warnings of the parameters it dropped."""

    request: door.Request
    complete: Callable[[GenerateResult], Any]
    events: Events | None
    dropped: Sequence[CallWarning] = ()


#: A door's parse function: the request, its JSON body, the provider, and `drop_params` (a
#: coroutine for a door that looks up what it stored: /v1/responses).
Read = Callable[
    [Request, dict[str, Any], "ClaudeAgentProvider", bool], ModelCall | Awaitable[ModelCall]
]


def model_endpoint(style: Style, read: Read) -> Callable[[Request], Awaitable[Response]]:
    """A model route: `read` parses the JSON body (bad input raises, answered 400 by the app's
    handlers, before any process starts; a coroutine when it looks something up, as a stored
    conversation), the query runs as a `QueryResponse` in `style`."""

    async def endpoint(request: Request) -> Response:
        state = request.app.state
        raw = await request.body()

        def parse() -> ModelCall | Awaitable[ModelCall]:
            return read(request, _json_body(raw), state.provider, state.drop_params)

        # Off the event loop (docs/adr/0010): reading the body, checking the tools' schemas and
        # the messages is CPU work that grows with the request, and would hold up every other
        # request and /healthz meanwhile.
        call = await anyio.to_thread.run_sync(parse)
        if not isinstance(call, ModelCall):
            call = await call
        tenant: str | None = getattr(request.state, "tenant", None)
        if tenant is not None:  # set by the guard when keys are: processes kept per key
            options = call.request.options.model_copy(update={"partition": tenant})
            call = replace(call, request=replace(call.request, options=options))
        parts = await anyio.to_thread.run_sync(door.stream, state.provider, call.request)
        return QueryResponse(parts, style, call)

    return endpoint


class QueryResponse(Response):
    """The response to a model request (`call`): runs its query (`parts`, from
    `provider.stream`, so bad input has already raised) in the request's own task, in the
    caller's trace (`traceparent`), and answers in one API style; a client that disconnects
    stops it.

    An error before any content is an ordinary error response with its status (most failures
    are). Streaming (`call.events` given), the parts up to the first content are read first,
    then `200 text/event-stream` with what `events` makes of all the parts; an error after that
    is the style's error event. Otherwise `call.complete` gives the JSON body of the folded
    result. The door's warnings (`call.dropped`), then the query's, are the
    `sf-provider-warnings` header of whichever response it gets.
    """

    def __init__(self, parts: QueryStream, style: Style, call: ModelCall) -> None:
        super().__init__(status_code=200)
        self.parts = parts
        self.style: Style = style
        self.call = call

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        with continue_trace(Headers(scope=scope)):
            async with self.parts, anyio.create_task_group() as group:

                async def watch() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    group.cancel_scope.cancel()  # the client left: stop the query

                group.start_soon(watch)
                try:
                    await self._respond(scope, receive, send)
                finally:
                    group.cancel_scope.cancel()

    async def _respond(self, scope: Scope, receive: Receive, send: Send) -> None:
        head: list[StreamPart] = []  # up to the first content: what the headers are made of
        try:
            async for part in self.parts:
                head.append(part)
                # An error part (and the finish after it) comes right before the error.
                if not isinstance(part, StreamStartPart | ErrorPart | FinishPart):
                    break
            answer = None if self.call.events else await self._complete(head)
        except (ProviderError, GatewayError) as exc:  # GatewayError: the answer was not kept
            response = _error_json(self.style, error_info(exc))
            response.headers.update(self._query_headers(head))
            await response(scope, receive, send)
            return
        headers = self._query_headers(head)
        if self.call.events is None:
            await JSONResponse(answer, headers=headers)(scope, receive, send)
            return
        headers |= {
            "content-type": "text/event-stream; charset=utf-8",
            "cache-control": "no-cache",
            "x-accel-buffering": "no",  # proxies: pass each event on as it comes
        }
        raw = [(name.encode(), value.encode()) for name, value in headers.items()]
        await send({"type": "http.response.start", "status": 200, "headers": raw})
        try:
            async with aclosing(self.call.events(self._all(head))) as stream:
                async for event in stream:
                    await send({"type": "http.response.body", "body": event, "more_body": True})
        except ProviderError as exc:
            body = _error_body(self.style, error_info(exc))
            event = sse(body, "error" if self.style == "anthropic" else None)
            await send({"type": "http.response.body", "body": event, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _all(self, head: list[StreamPart]) -> AsyncIterator[StreamPart]:
        """The query's parts: those read already (`head`), then the rest."""
        for part in head:
            yield part
        async for part in self.parts:
            yield part

    async def _complete(self, head: list[StreamPart]) -> Any:
        """The JSON body of the folded result; a door that keeps it (/v1/responses) first
        stores it, and raises a `GatewayError` when it cannot (a response store gone away)."""
        collector = ResultCollector()
        async for part in self._all(head):
            collector.add(part)
        answer = self.call.complete(collector.result())
        return await answer if inspect.isawaitable(answer) else answer

    def _query_headers(self, head: Sequence[StreamPart]) -> dict[str, str]:
        """From the query's start part: the door's warnings, then the query's
        (`sf-provider-warnings`), and the process that served it (`sf-provider-process`:
        fresh, warm or continued)."""
        start = next((p for p in head if isinstance(p, StreamStartPart)), StreamStartPart())
        headers = warnings_header([*self.call.dropped, *_for_clients(start.warnings)])
        if start.process:
            headers[PROCESS_HEADER] = start.process
        return headers
