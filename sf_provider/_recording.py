"""Recording a real session as script items: the `ScriptedMessagesAPI` function script that
forwards every model turn to an upstream Messages API and answers with what came back.

The CLI talks to a local `ScriptedMessagesAPI` whose script is an `UpstreamRecorder`: each
`POST /v1/messages` is sent on, with the CLI's own headers (so its credentials, an API key or a
login), to the upstream; the answer, streamed or not, is turned into a `Reply` (or an
`HTTPErrorReply`), kept in `items`, and served to the CLI by the scripted API. So the CLI sees
during recording exactly what a replay of `items` serves it later. Nothing of the headers is
kept, and a credential the upstream echoes back is replaced (`scrub`). Plain `urllib` in a
worker thread: no HTTP client dependency for a tool used this rarely.

An upstream other than the Anthropic API (a gateway, a proxy, a local scripted API) may need no
credential. Without one configured, the CLI (which will not start a query without one) is given
`PLACEHOLDER_KEY`, and the recorder never forwards a header carrying it: the upstream then gets
no credential at all.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import anyio.to_thread

from .testing import (
    HTTPErrorReply,
    RecordedRequest,
    Reply,
    ScriptItem,
    fault,
    http_error,
    thinking,
    tool_use,
)

__all__ = [
    "DEFAULT_UPSTREAM",
    "PLACEHOLDER_KEY",
    "REDACTED",
    "UpstreamRecorder",
    "assemble_stream",
    "reply_from_message",
    "scrub",
]

#: Where a live recording sends the model turns when nothing else is configured.
DEFAULT_UPSTREAM = "https://api.anthropic.com"

#: The CLI's API key when recording from an upstream without a credential configured; a
#: header carrying it is never forwarded.
PLACEHOLDER_KEY = "sf-provider-recording-no-credential"

#: Headers that describe one hop, not the request: never forwarded. `accept-encoding` too, so
#: the upstream answers uncompressed (urllib does not decompress).
_HOP_BY_HOP = frozenset(
    {
        "host",
        "content-length",
        "connection",
        "keep-alive",
        "transfer-encoding",
        "accept-encoding",
        "proxy-authorization",
        "upgrade",
    }
)

#: The HTTP status of each Messages API error type (an error met inside a stream has none).
_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


class UpstreamError(Exception):
    """The upstream could not be reached, or its answer could not be read."""


class UpstreamRecorder:
    """A `ScriptedMessagesAPI` function script that answers each model turn with the upstream's
    answer and records it (`items`). `failures` lists the turns the upstream never answered
    (the CLI was then sent a dropped connection)."""

    def __init__(
        self,
        upstream: str,
        *,
        bridge: str = "sf",
        timeout: float = 600.0,
        withhold: str | None = None,
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.bridge = bridge
        self.timeout = timeout
        #: A value (the placeholder key) whose headers are never forwarded.
        self.withhold = withhold
        self.items: list[ScriptItem] = []
        self.failures: list[str] = []
        host = urllib.parse.urlsplit(self.upstream).hostname or ""
        # A proxy from the environment is for the outside world, not for this machine.
        handlers = [urllib.request.ProxyHandler({})] if _is_loopback(host) else []
        self._opener = urllib.request.build_opener(*handlers)

    async def __call__(self, request: RecordedRequest) -> ScriptItem:
        try:
            item = await anyio.to_thread.run_sync(self._forward, request, abandon_on_cancel=True)
        except UpstreamError as exc:
            self.failures.append(str(exc))
            return fault("drop")
        # An upstream may echo the credential (in an error message, say): never kept. The CLI
        # is served the scrubbed item too, so a replay serves it what it saw.
        item = scrub(item, _credentials(request.headers))
        self.items.append(item)
        return item

    def _forward(self, request: RecordedRequest) -> ScriptItem:
        headers = {
            k: v
            for k, v in request.headers.items()
            if k.lower() not in _HOP_BY_HOP and not (self.withhold and self.withhold in v)
        }
        outgoing = urllib.request.Request(
            self.upstream + request.path,
            data=json.dumps(request.body).encode(),
            headers=headers,
            method="POST",
        )
        try:
            with self._opener.open(outgoing, timeout=self.timeout) as response:
                if "text/event-stream" in response.headers.get("content-type", ""):
                    lines = (raw.decode("utf-8") for raw in response)
                    return reply_from_message(assemble_stream(lines), self.bridge)
                return reply_from_message(json.loads(response.read()), self.bridge)
        except urllib.error.HTTPError as exc:
            return _error_item(exc.code, exc.read(), exc.headers.get("retry-after"))
        except _StreamError as exc:
            return _error_item(_ERROR_STATUS.get(exc.error_type, 500), exc.body, None)
        except (
            OSError,
            ValueError,
            http.client.HTTPException,
        ) as exc:  # unreachable, cut, not JSON
            raise UpstreamError(f"{self.upstream}{request.path}: {exc}") from exc


#: What stands in a recording for a credential the upstream echoed.
REDACTED = "[redacted credential]"


def _credentials(headers: Mapping[str, str]) -> list[str]:
    """The secrets a request carries: its `x-api-key` and its `Authorization` token."""
    found: list[str] = []
    for name, value in headers.items():
        if name.lower() == "x-api-key":
            found.append(value.strip())
        elif name.lower() == "authorization":
            found.append(value.partition(" ")[2].strip() or value.strip())
    return [secret for secret in found if len(secret) >= 8]  # not a word of the text


def scrub(item: ScriptItem, secrets: Sequence[str]) -> ScriptItem:
    """`item` with every secret in `secrets` replaced by `REDACTED`, wherever it is."""

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            for secret in secrets:
                value = value.replace(secret, REDACTED)
            return value
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    fields = item.model_dump(exclude_unset=True)
    cleaned = clean(fields)
    return item if cleaned == fields else type(item).model_validate(cleaned)


class _StreamError(Exception):
    """An `error` event inside an SSE answer."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(str(error.get("message", "")))
        self.error_type = str(error.get("type", "api_error"))
        self.body = json.dumps({"type": "error", "error": error}).encode()


def assemble_stream(lines: Iterable[str]) -> dict[str, Any]:
    """The Messages API message an SSE answer streams (its `data:` lines, in order).

    Raises `_StreamError` for an `error` event and `ValueError` for a stream that ends before
    `message_stop`."""
    message: dict[str, Any] = {}
    blocks: dict[int, dict[str, Any]] = {}
    partial_json: dict[int, str] = {}
    stopped = False
    for line in lines:
        if not line.startswith("data:"):
            continue
        data = json.loads(line[5:].strip())
        kind = data.get("type")
        if kind == "message_start":
            message = dict(data["message"])
            message["usage"] = dict(message.get("usage") or {})
        elif kind == "content_block_start":
            blocks[data["index"]] = dict(data["content_block"])
        elif kind == "content_block_delta":
            _apply_delta(blocks[data["index"]], data["delta"], partial_json, data["index"])
        elif kind == "content_block_stop":
            index = data["index"]
            if index in partial_json:
                blocks[index]["input"] = json.loads(partial_json.pop(index) or "{}")
        elif kind == "message_delta":
            message.update({k: v for k, v in data.get("delta", {}).items() if v is not None})
            message.setdefault("usage", {}).update(data.get("usage") or {})
        elif kind == "message_stop":
            stopped = True
        elif kind == "error":
            raise _StreamError(dict(data.get("error") or {}))
    if not stopped:
        raise ValueError("the answer stream ended before message_stop")
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message


def _apply_delta(
    block: dict[str, Any], delta: dict[str, Any], partial_json: dict[int, str], index: int
) -> None:
    kind = delta.get("type")
    if kind == "text_delta":
        block["text"] = block.get("text", "") + delta.get("text", "")
    elif kind == "input_json_delta":
        partial_json[index] = partial_json.get(index, "") + delta.get("partial_json", "")
    elif kind == "thinking_delta":
        block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
    elif kind == "signature_delta":
        block["signature"] = delta.get("signature", "")
    elif kind == "citations_delta":
        block.setdefault("citations", []).append(delta.get("citation"))


def reply_from_message(message: dict[str, Any], bridge: str) -> Reply:
    """A script `Reply` that serves `message` again: bridge tool names back to the
    application's names, no ids (the scripted API makes its own), integer usage only."""
    prefix = f"mcp__{bridge}__"
    content: list[dict[str, Any]] = []
    for block in message.get("content") or []:
        kind = block.get("type")
        if kind == "text":
            content.append({"type": "text", "text": block.get("text", "")})
        elif kind == "tool_use":
            name = str(block.get("name", ""))
            content.append(tool_use(name.removeprefix(prefix), block.get("input") or {}))
        elif kind == "thinking":
            content.append(thinking(block.get("thinking", ""), block.get("signature", "")))
        else:  # redacted thinking and other blocks: served as they came
            content.append(dict(block))
    has_call = any(b.get("type") == "tool_use" for b in content)
    stop = message.get("stop_reason")
    usage = {
        k: v
        for k, v in (message.get("usage") or {}).items()
        if isinstance(v, int) and not isinstance(v, bool)
    }
    return Reply(
        content=content,
        # Only when it is not what the scripted API would say anyway.
        stop_reason=stop if stop != ("tool_use" if has_call else "end_turn") else None,
        usage=usage,
        model=message.get("model"),
    )


def _error_item(status: int, body: bytes, retry_after: str | None) -> HTTPErrorReply:
    try:
        error = json.loads(body).get("error") or {}
    except (ValueError, AttributeError):
        error = {}
    try:
        seconds = float(retry_after) if retry_after is not None else None
    except ValueError:
        seconds = None
    return http_error(
        status if 400 <= status <= 599 else 500,
        str(error.get("message") or f"HTTP {status}"),
        error_type=error.get("type"),
        retry_after=seconds,
    )


def _is_loopback(host: str) -> bool:
    return host in {"localhost", "127.0.0.1", "::1"} or host.startswith("127.")
