"""What keeps web pages from driving the gateway: the `Host` a request names, the `Origin` a
browser sends, CORS preflights, and the `Content-Type` of a model request.

A page on another site can send a "simple" cross-origin POST (`text/plain`, a form) without
asking first, and DNS rebinding points a name the page controls at 127.0.0.1, so that its
requests are same-origin to it and name its own host. So, in `GatewayGuard`:

- without API keys, a request must name a loopback host (`localhost`, 127.0.0.0/8, `::1`, with
  any port) or one of `allowed_hosts` (a key stands in for that check: a page has none);
- a request with an `Origin` must come from one of `allowed_origins`, keys or not;
- a preflight (`OPTIONS` with `Access-Control-Request-Method`) from an allowed origin is
  answered here, and responses to allowed origins carry the CORS headers;
- a model request must say its body is JSON (`Content-Type: application/json`).
"""

from __future__ import annotations

import ipaddress

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import Message, Send

from ._errors import ErrorInfo

__all__ = ["allowed_host", "cors_headers", "normalize_origins", "not_json", "refusal", "with_cors"]

#: The methods the gateway's routes take, named in a preflight's answer.
_METHODS = "GET, POST, DELETE, OPTIONS"
#: The response headers a page may read: the ids, warnings, process and retry delay.
_EXPOSED = "request-id, x-request-id, sf-provider-warnings, sf-provider-process, retry-after"


def _host_name(host: str) -> str:
    """The name in a `Host` header, without its port (an IPv6 address keeps no brackets)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    if host.count(":") == 1:
        return host.partition(":")[0]
    return host


def allowed_host(host: str | None, allowed: frozenset[str]) -> bool:
    """Whether a request naming `host` (its `Host` header) may be served without a key: a
    loopback name or address, or a name in `allowed` (`*`: any)."""
    if "*" in allowed:
        return True
    name = _host_name(host or "")
    if name == "localhost" or name in allowed:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def normalize_origins(origins: list[str]) -> frozenset[str]:
    """`--allow-origin` values as `refusal` compares them."""
    return frozenset(o.strip().lower().rstrip("/") for o in origins if o.strip())


def refusal(
    headers: Headers, hosts: frozenset[str], origins: frozenset[str], *, keyed: bool
) -> ErrorInfo | None:
    """Why a request that may come from a web page is refused (403), if it is: without keys
    (`keyed`), a `Host` that is not `allowed_host` with `hosts`; an `Origin` not in `origins`
    (normalized; listed exactly: scheme, host and port, letter case aside), unless `*` is."""
    host = headers.get("host")
    if not keyed and not allowed_host(host, hosts):
        return ErrorInfo(
            403,
            "permission_error",
            f"this gateway has no API keys, so it answers only requests addressed to a loopback "
            f"host (localhost, 127.0.0.1, ::1), not {host or 'no Host header'!r}: a web page can "
            f"reach a loopback server through a name it controls (DNS rebinding). Connect to "
            f"127.0.0.1, or start the gateway with --api-key (or --allow-host NAME behind a "
            f"proxy)",
            code="host_not_allowed",
        )
    origin = headers.get("origin")
    if origin is None or "*" in origins or origin.strip().lower().rstrip("/") in origins:
        return None
    return ErrorInfo(
        403,
        "permission_error",
        f"requests from web pages are refused unless their origin is allowed, and {origin!r} "
        f"is not: start the gateway with --allow-origin {origin} to let that page use it",
        code="origin_not_allowed",
    )


def not_json(content_type: str | None) -> ErrorInfo | None:
    """The 415 of a model request whose body is not declared JSON: `application/json` or
    `application/*+json`, with any parameters (`; charset=utf-8`); None when it is."""
    media = (content_type or "").partition(";")[0].strip().lower()
    kind, _, sub = media.partition("/")
    if kind == "application" and (sub == "json" or sub.endswith("+json")):
        return None
    return ErrorInfo(
        415,
        "invalid_request_error",
        f"a model request's body must be JSON, sent with `Content-Type: application/json`, "
        f"not {content_type or 'no Content-Type'!r} (curl: -H 'content-type: application/json')",
        code="unsupported_media_type",
    )


def cors_headers(origin: str, headers: Headers) -> dict[str, str]:
    """The answer to a preflight from the allowed `origin`: the methods and the headers it asks
    for (the official clients send their own `x-stainless-*` ones)."""
    return {
        "access-control-allow-origin": origin,
        "access-control-allow-methods": _METHODS,
        "access-control-allow-headers": headers.get("access-control-request-headers", ""),
        "access-control-max-age": "600",
        "vary": "Origin",
    }


def with_cors(origin: str, send: Send) -> Send:
    """`send` with the CORS headers of a response to a page from the allowed `origin`."""

    async def send_with_cors(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            headers["access-control-allow-origin"] = origin
            headers["access-control-expose-headers"] = _EXPOSED
            headers.add_vary_header("Origin")
        await send(message)

    return send_with_cors
