"""The gateway's ASGI app: one shared provider behind the OpenAI and Anthropic API styles.

Routes: `POST /v1/chat/completions` and `/v1/responses` (with `GET`/`DELETE /v1/responses/{id}`;
OpenAI), `POST /v1/messages` (Anthropic), `GET /v1/models` and `GET /v1/models/{id}` (in the
client's shape), `GET /healthz` (liveness) and `GET /readyz` (readiness: 503 naming what is
missing when no model request could succeed). `GatewayGuard` checks the request's origin, keys,
concurrency and body in front of them; errors come in the style of the route they answer (off
the model routes, of the client: `anthropic_client`).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.datastructures import QueryParams
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .._door import flush
from ..capabilities import check_capabilities
from ..errors import ProviderError
from ..provider import ClaudeAgentProvider
from ..settings import ProviderSettings
from ..testing import ScriptedMessagesAPI, call_each_tool
from ._browsers import allowed_host
from ._errors import ErrorInfo, GatewayError, invalid_request
from ._http import (
    KEYS_ENV,
    GatewayGuard,
    GatewaySettings,
    anthropic_client,
    error_response,
    keys_from,
)
from .anthropic import messages_endpoint
from .openai import chat_completions
from .responses import response_routes, response_store

__all__ = ["READY_CACHE_SECONDS", "create_app", "readiness_problems", "run_gateway"]

logger = logging.getLogger("sf_provider.gateway")


def create_app(
    settings: GatewaySettings | None = None, *, provider: ClaudeAgentProvider | None = None
) -> Starlette:
    """The gateway app. Its provider (`app.state.provider`) is made from `settings.provider`
    when the app starts and closed when it stops, which stops every warm CLI process; a
    `provider` given here is used instead, and left to its owner to close. A Redis response
    store (`settings.response_store`) is reached as the app starts: if it cannot be, the app
    does not start, and says why.

    Serve it with any ASGI server (`sf-provider gateway` runs uvicorn)::

        uvicorn.run(create_app(GatewaySettings(api_keys=["..."])), host="127.0.0.1", port=8080)
    """
    settings = settings or GatewaySettings()
    slots = anyio.CapacityLimiter(settings.max_concurrency)  # model requests in flight
    store = response_store(settings)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await store.start()  # a store it cannot reach: the gateway does not start
        own = ClaudeAgentProvider(settings.provider) if provider is None else None
        app.state.provider = provider or own
        app.state.drop_params = settings.drop_params
        try:
            async with anyio.create_task_group() as group:
                # In the background: a CLI that hangs on --version must not hold up start-up.
                group.start_soon(warn_if_not_ready)
                yield
                group.cancel_scope.cancel()
        finally:
            if own is not None:
                await own.aclose()
            await store.aclose()
            # uvicorn ends the process by SIGTERM itself after a graceful shutdown: no atexit.
            flush()

    async def warn_if_not_ready() -> None:
        missing = await problems()
        if missing:
            logger.warning(
                "sf-provider gateway: no model request can succeed until this is fixed "
                "(GET /readyz answers 503 meanwhile): %s",
                "; ".join(missing),
            )

    async def healthz(_request: Request) -> Response:
        in_flight, size = slots.borrowed_tokens, settings.max_concurrency
        return JSONResponse({"status": "ok", "in_flight": in_flight, "max_concurrency": size})

    checked: list[tuple[float, list[str]]] = []  # the last readiness check: when, what

    checking = anyio.Lock()  # one check at a time: probes that come together share it

    async def problems() -> list[str]:
        async with checking:
            if not checked or time.monotonic() - checked[-1][0] > READY_CACHE_SECONDS:
                own = provider.settings if provider is not None else settings.provider
                found = await anyio.to_thread.run_sync(
                    readiness_problems, own, abandon_on_cancel=True
                )
                checked[:] = [(time.monotonic(), found)]
            return checked[-1][1]

    async def readyz(_request: Request) -> Response:
        missing = await problems()
        if missing:
            return JSONResponse({"status": "unavailable", "problems": missing}, status_code=503)
        return JSONResponse({"status": "ready"})

    names = list(dict.fromkeys([settings.provider.model, *settings.models]))
    listed = [name for name in names if name]

    def model_object(name: str, anthropic: bool) -> dict[str, Any]:
        if anthropic:
            return {"type": "model", "id": name, "display_name": name,
                    "created_at": "1970-01-01T00:00:00Z"}  # fmt: skip
        return {"id": name, "object": "model", "created": 0, "owned_by": "anthropic"}

    async def models(request: Request) -> Response:
        anthropic = anthropic_client(request.headers)  # an Anthropic client: its shape
        if not anthropic:
            data = [model_object(name, False) for name in listed]
            return JSONResponse({"object": "list", "data": data})
        page, more = _model_page(listed, request.query_params)
        return JSONResponse(
            {"data": [model_object(name, True) for name in page], "has_more": more,
             "first_id": page[0] if page else None, "last_id": page[-1] if page else None}
        )  # fmt: skip

    async def count_tokens(_request: Request) -> Response:
        raise GatewayError(
            ErrorInfo(
                404,
                "not_found_error",
                "this gateway cannot count tokens: the Claude Code CLI it runs has no token "
                "counting. Read the input tokens from a reply's usage, estimate them locally, "
                "or count with Anthropic's own API",
                code="count_tokens_unsupported",
            )
        )

    async def model(request: Request) -> Response:
        name = request.path_params["model_id"]
        if name not in listed:
            raise GatewayError(
                ErrorInfo(
                    404,
                    "not_found_error",
                    f"model {name!r} is not listed by this gateway (GET /v1/models lists "
                    f"{', '.join(listed)}); a request may still name any model the Claude Code "
                    f"CLI takes",
                    param="model",
                    code="model_not_found",
                )
            )
        return JSONResponse(model_object(name, anthropic_client(request.headers)))

    routes = [
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/messages", messages_endpoint, methods=["POST"]),
        Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
        *response_routes(store),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/models/{model_id:path}", model, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
    ]

    async def handle(request: Request, exc: Exception) -> Response:
        if isinstance(exc, HTTPException):  # no such route, or method: in the route's style
            kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
            exc = GatewayError(ErrorInfo(exc.status_code, kind, f"{exc.detail}: "
                                         f"{request.method} {request.url.path}"))  # fmt: skip
        return error_response(request, exc)

    return Starlette(
        routes=routes,
        middleware=[Middleware(GatewayGuard, settings=settings, slots=slots)],
        exception_handlers={
            HTTPException: handle,
            GatewayError: handle,
            ProviderError: handle,
            Exception: handle,
        },
        lifespan=lifespan,
    )


def _model_page(names: list[str], query: QueryParams) -> tuple[list[str], bool]:
    """The page of `names` the Anthropic Models API's `limit`, `after_id` or `before_id` and
    `lifecycle` ask for (every model listed here is active), and whether more lie beyond it in
    that direction; a value it cannot read is a 400 naming it."""

    def refuse(param: str, problem: str) -> GatewayError:
        return GatewayError(invalid_request(f"{param}: {problem}", param=param))

    limit = query.get("limit", "20")
    if not limit.isdigit() or not 1 <= int(limit) <= 1000:
        raise refuse("limit", f"{limit!r} is not a number of models from 1 to 1000")
    stages = query.getlist("lifecycle[]") + query.getlist("lifecycle")
    for stage in stages:
        if stage not in ("active", "deprecated", "retired"):
            raise refuse("lifecycle", f"{stage!r} is not one of active, deprecated, retired")
    if stages and "active" not in stages:
        names = []
    after, before = query.get("after_id"), query.get("before_id")
    if after is not None and before is not None:
        raise refuse("before_id", "send after_id or before_id, not both")
    for param, cursor in (("after_id", after), ("before_id", before)):
        if cursor is not None and cursor not in names:
            raise refuse(param, f"{cursor!r} is not a model of this list ({', '.join(names)})")
    if before is not None:
        earlier = names[: names.index(before)]
        return earlier[-int(limit) :], len(earlier) > int(limit)
    later = names[names.index(after) + 1 :] if after is not None else names
    return later[: int(limit)], len(later) > int(limit)


#: Seconds a readiness answer is reused: probes come every few seconds, and the check reads
#: files and the CLI's version.
READY_CACHE_SECONDS = 5.0


def readiness_problems(settings: ProviderSettings) -> list[str]:
    """Why no model request could succeed on a provider with `settings` (empty: ready): the
    CLI, the Claude credentials and the host (`check_capabilities` without tools). The
    credential test is `capabilities.check_auth`, in this one call."""
    return check_capabilities(settings).problems


def run_gateway(args: argparse.Namespace) -> int:
    """`sf-provider gateway`: serve `create_app` with uvicorn until interrupted; with
    `--offline`, against the built-in scripted model (`sf_provider.testing.call_each_tool`)."""
    keys = keys_from(args.api_keys, os.environ)
    offline = bool(getattr(args, "offline", False))
    if not keys and not allowed_host(args.host, frozenset()) and not args.allow_no_auth:
        print(_open_port_refusal(args.host, offline), file=sys.stderr)
        return 2
    overrides: dict[str, object] = {}
    if args.model:
        overrides["model"] = args.model
    if args.warm_processes is not None:
        overrides["warm_processes"] = args.warm_processes
    if "*" in (args.allow_origins or []) and not keys:
        print(
            "sf-provider gateway: --allow-origin '*' without an API key would let every web "
            f"page you open use the gateway: pass --api-key KEY (or set {KEYS_ENV}), or list "
            "the origins",
            file=sys.stderr,
        )
        return 2
    if not offline:
        return _serve(args, keys, ProviderSettings.model_validate(overrides))
    # uvicorn ends its process by the signal that stopped it, once shut down: as an exception
    # here, so that the scripted model stops too.
    signal.signal(signal.SIGTERM, _exit_on_signal)
    with ScriptedMessagesAPI(call_each_tool) as api:
        print(
            f"sf-provider gateway: offline: no credential, no network. The model that answers "
            f"is sf-provider's built-in scripted model (sf_provider.testing.call_each_tool, "
            f"served on {api.base_url}): it calls each offered tool once with arguments made "
            f"from its schema, then answers in text quoting the results",
            file=sys.stderr,
            flush=True,
        )
        # Offline as `demo` and `check --probe` are: `api.settings()` keeps the CLI on the
        # scripted API, and each query runs in a home, config and temp dir of its own.
        return _serve(args, keys, api.settings(**overrides))


def _open_port_refusal(host: str, offline: bool) -> str:
    """Why a non-loopback `--host` without API keys is refused, and what to do instead."""
    refused = f"sf-provider gateway: --host {host} is reachable from other machines, and no API key"
    keys = f"--api-key KEY (or set {KEYS_ENV})"
    if offline:  # the scripted model costs nothing, but each request still starts a CLI
        return (
            f"{refused} is set: offline, no Claude account is spent, but anyone there could "
            f"start Claude Code processes on this machine. Pass {keys}, leave --host at "
            f"127.0.0.1 to try a client on this machine, or pass --allow-no-auth to serve it "
            f"open (a throwaway container, or something in front checks callers)"
        )
    return (
        f"{refused} is set: anyone there could spend your Claude account. Pass {keys}, or "
        f"--allow-no-auth if something in front checks callers"
    )


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def _serve(args: argparse.Namespace, keys: list[str], provider: ProviderSettings) -> int:
    """Serve the gateway with uvicorn until interrupted."""
    import uvicorn

    settings = GatewaySettings(
        host=args.host,
        port=args.port,
        api_keys=keys,
        max_concurrency=args.max_concurrency,
        body_timeout=args.body_timeout,
        allowed_origins=args.allow_origins or [],
        allowed_hosts=args.allow_hosts or [],
        drop_params=args.drop_params,
        response_store=args.response_store,
        response_store_size=args.response_store_size,
        response_store_ttl=args.response_store_ttl,
        provider=provider,
    )
    try:
        app = create_app(settings)
    except ImportError as exc:  # --response-store redis://... without the extra: say which
        print(f"sf-provider gateway: {exc}", file=sys.stderr)
        return 2
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        timeout_graceful_shutdown=int(settings.shutdown_grace),
        log_level="info",
    )
    return 0
