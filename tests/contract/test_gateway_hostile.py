"""The gateway under hostile traffic (issue 31): web pages cannot drive it, a slow body holds no
slot, tenants stay apart, and readiness tells the truth. Served by uvicorn on a loopback port,
the real CLI behind it."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
import httpx
import pytest
from conftest import serving

from sf_provider.gateway import GatewaySettings, create_app
from sf_provider.gateway._http import KEYS_ENV
from sf_provider.settings import ProviderSettings
from sf_provider.testing import (
    RecordedRequest,
    Reply,
    ScriptedMessagesAPI,
    reply,
    result_text,
    text,
    tool_use,
)

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

MODEL = "claude-sonnet-5-5"
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "Weather in Paris?"}]}
MESSAGE = {**CHAT, "max_tokens": 100}
JSON = {"content-type": "application/json"}


@asynccontextmanager
async def gateway(provider: ProviderSettings, **settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    """The gateway on a free loopback port, and a plain HTTP client for it."""
    async with (
        serving(create_app(GatewaySettings(provider=provider, **settings))) as base_url,
        httpx.AsyncClient(base_url=base_url, timeout=120) as http,
    ):
        yield http


def openai_error(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == code
    message: str = error["message"]
    return message


def anthropic_error(response: httpx.Response, status: int, error_type: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == error_type
    message: str = body["error"]["message"]
    return message


# -- browsers


async def test_without_keys_a_request_naming_another_host_is_refused_in_each_apis_shape() -> None:
    """DNS rebinding: a page on evil.example re-points its name at 127.0.0.1, so its requests
    are same-origin and name its own host. Served (200) before."""
    rebound = {"host": "evil.example:8080", **JSON}
    async with ScriptedMessagesAPI([reply(text("Sunny."))]) as api, gateway(api.settings()) as http:
        chat = await http.post("/v1/chat/completions", json=CHAT, headers=rebound)
        messages = await http.post("/v1/messages", json=MESSAGE, headers=rebound)
        models = await http.get("/v1/models", headers={"host": "evil.example"})
        local = await http.post("/v1/chat/completions", json=CHAT, headers={"host": "localhost:1"})
    assert "DNS rebinding" in openai_error(chat, 403, "host_not_allowed")
    assert "'evil.example:8080'" in anthropic_error(messages, 403, "permission_error")
    assert openai_error(models, 403, "host_not_allowed")
    assert local.status_code == 200  # localhost, any port
    assert len(api.requests) == 1


async def test_with_keys_the_host_is_not_checked_and_allow_host_names_a_proxys_host() -> None:
    script = [reply(text("One.")), reply(text("Two."))]
    proxied = {"host": "gateway.internal", **JSON}
    async with ScriptedMessagesAPI(script) as api:
        async with gateway(api.settings(), api_keys=["k"]) as http:
            keyed = await http.post(
                "/v1/chat/completions", json=CHAT, headers={**proxied, "x-api-key": "k"}
            )
        async with gateway(api.settings(), allowed_hosts=["Gateway.Internal"]) as http:
            named = await http.post("/v1/chat/completions", json=CHAT, headers=proxied)
    assert keyed.status_code == 200
    assert named.status_code == 200
    assert len(api.requests) == 2


async def test_a_page_from_another_origin_is_refused_with_a_key_or_without() -> None:
    """A simple cross-origin POST (no preflight) from a page ran a query (200) before."""
    page = {"origin": "https://evil.example", **JSON}
    async with ScriptedMessagesAPI([]) as api:
        async with gateway(api.settings()) as http:
            chat = await http.post("/v1/chat/completions", json=CHAT, headers=page)
            messages = await http.post("/v1/messages", json=MESSAGE, headers=page)
        async with gateway(api.settings(), api_keys=["k"]) as http:
            keyed = await http.post(
                "/v1/chat/completions", json=CHAT, headers={**page, "authorization": "Bearer k"}
            )
    message = openai_error(chat, 403, "origin_not_allowed")
    assert "--allow-origin https://evil.example" in message
    assert "'https://evil.example'" in anthropic_error(messages, 403, "permission_error")
    assert openai_error(keyed, 403, "origin_not_allowed")
    assert api.all_requests == []


async def test_an_allowed_origins_preflight_is_answered_and_its_requests_carry_cors() -> None:
    app = "http://localhost:3000"
    ask = {
        "origin": app,
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type, x-stainless-lang",
    }
    async with (
        ScriptedMessagesAPI([reply(text("Sunny."))]) as api,
        gateway(api.settings(), allowed_origins=[app]) as http,
    ):
        preflight = await http.options("/v1/chat/completions", headers=ask)
        other = await http.options(
            "/v1/chat/completions", headers={**ask, "origin": "http://localhost:3001"}
        )
        answer = await http.post("/v1/chat/completions", json=CHAT, headers={"origin": app})
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == app
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert preflight.headers["access-control-allow-headers"] == "content-type, x-stainless-lang"
    openai_error(other, 403, "origin_not_allowed")
    assert "access-control-allow-origin" not in other.headers
    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == app
    assert "sf-provider-process" in answer.headers["access-control-expose-headers"]
    assert len(api.requests) == 1


def test_every_origin_without_keys_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="every web page"):
        GatewaySettings(allowed_origins=["*"])
    assert GatewaySettings(allowed_origins=["*"], api_keys=["k"]).allowed_origins == ["*"]


def test_the_command_refuses_every_origin_without_a_key(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from sf_provider.cli import main

    monkeypatch.delenv(KEYS_ENV, raising=False)
    assert main(["gateway", "--allow-origin", "*"]) == 2
    err = capsys.readouterr().err
    assert "every web page" in err and "--api-key" in err


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("text/plain", json.dumps(CHAT)),
        ("application/x-www-form-urlencoded", json.dumps(CHAT)),
        (None, json.dumps(CHAT)),
    ],
)
async def test_a_model_request_whose_body_is_not_declared_json_is_a_415(
    content_type: str | None, body: str
) -> None:
    """A form or text/plain POST needs no preflight: a page could send it (a 200 before)."""
    headers = {} if content_type is None else {"content-type": content_type}
    async with ScriptedMessagesAPI([]) as api, gateway(api.settings()) as http:
        chat = await http.post("/v1/chat/completions", content=body, headers=headers)
        messages = await http.post("/v1/messages", content=json.dumps(MESSAGE), headers=headers)
        charset = await http.post(
            "/v1/chat/completions",
            content=b"[]",
            headers={"content-type": "application/json; charset=utf-8"},
        )
    assert "Content-Type: application/json" in openai_error(chat, 415, "unsupported_media_type")
    anthropic_error(messages, 415, "invalid_request_error")
    assert charset.status_code == 400  # read as JSON: not an object
    assert api.all_requests == []


# -- slow clients


async def trickle(port: int, done: anyio.Event) -> bytes:
    """A client that sends a request head and then its body a byte at a time, until the server
    answers (its first bytes are returned) or `done` is set."""
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
        f"content-type: application/json\r\ncontent-length: 100000\r\n\r\n"
    ).encode()
    answer = b""
    async with await anyio.connect_tcp("127.0.0.1", port) as sock:
        await sock.send(head + b'{"model": ')

        async def feed() -> None:
            try:
                while not done.is_set():
                    await sock.send(b" ")
                    await anyio.sleep(0.1)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                pass  # the server closed the connection after its answer

        async with anyio.create_task_group() as group:
            group.start_soon(feed)
            with anyio.move_on_after(300):  # a bound for a server that never answers
                with suppress(anyio.EndOfStream, anyio.BrokenResourceError):
                    answer = await sock.receive()
            group.cancel_scope.cancel()
    return answer


async def test_a_trickled_body_holds_no_slot_and_is_a_408_after_the_body_timeout() -> None:
    """With one slot, a client trickling its body held it (every other request got 429 for as
    long as it kept sending). Now a slot is taken once the body is read; the trickler gets 408."""
    async with (
        ScriptedMessagesAPI([reply(text("Sunny."))]) as api,
        gateway(api.settings(), max_concurrency=1, body_timeout=2) as http,
    ):
        port = http.base_url.port
        assert port is not None
        done = anyio.Event()
        answers: list[bytes] = []

        async def trickler() -> None:
            answers.append(await trickle(port, done))

        async with anyio.create_task_group() as group:
            group.start_soon(trickler)
            await anyio.sleep(0.5)  # its head reaches the gateway first (main took a slot here)
            normal = await http.post("/v1/chat/completions", json=CHAT)
            done.set()
        health = (await http.get("/healthz")).json()
    assert normal.status_code == 200, normal.text
    assert normal.json()["choices"][0]["message"]["content"] == "Sunny."
    status_line, _, rest = answers[0].partition(b"\r\n")
    assert status_line == b"HTTP/1.1 408 Request Timeout"
    assert b"body_timeout" in rest
    assert health["in_flight"] == 0
    assert len(api.requests) == 1


# -- tenants


def weather(request: RecordedRequest) -> Reply:
    """Calls get_weather, then answers from its result."""
    results = [result_text(b) for b in request.tool_results()]
    if not results:
        return reply(tool_use("get_weather", {"city": "Paris"}, id="toolu_1"))
    return reply(text(f"Paris: {results[0]}."))


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


async def test_one_keys_conversation_is_never_continued_for_another_key() -> None:
    """Key B replaying key A's exact exchange continued A's warm process: its speed told B what
    A had asked and been told. Processes are kept per key now."""
    ask = {**CHAT, "tools": [WEATHER_TOOL]}
    async with (
        ScriptedMessagesAPI(weather) as api,
        gateway(api.settings(warm_processes=2), api_keys=["key-a", "key-b"]) as http,
    ):
        first = await http.post("/v1/chat/completions", json=ask, headers={"x-api-key": "key-a"})
        call = first.json()["choices"][0]["message"]
        result = {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"], "content": "Sunny"}
        step = {**ask, "messages": [*CHAT["messages"], call, result]}
        replayed = await http.post(
            "/v1/chat/completions", json=step, headers={"authorization": "Bearer key-b"}
        )
        own = await http.post("/v1/chat/completions", json=step, headers={"x-api-key": "key-a"})
    assert first.headers["sf-provider-process"] == "fresh"
    assert replayed.status_code == 200
    assert replayed.headers["sf-provider-process"] == "fresh"
    assert own.headers["sf-provider-process"] == "continued"
    answers = [r.json()["choices"][0]["message"]["content"] for r in (replayed, own)]
    assert answers == ["Paris: Sunny.", "Paris: Sunny."]


# -- readiness


async def test_without_credentials_readyz_is_503_naming_them_and_start_up_warns(
    no_login: object, caplog: pytest.LogCaptureFixture
) -> None:
    """`/healthz` answered ok while every request failed with a 500; nothing was logged."""
    caplog.set_level(logging.WARNING, logger="sf_provider.gateway")
    async with (
        ScriptedMessagesAPI([]) as api,
        gateway(api.settings(env={"ANTHROPIC_API_KEY": ""})) as http,
    ):
        ready = await http.get("/readyz")
        live = await http.get("/healthz")
        chat = await http.post("/v1/chat/completions", json=CHAT)
        messages = await http.post("/v1/messages", json=MESSAGE)
    assert live.status_code == 200
    assert ready.status_code == 503
    problems = ready.json()["problems"]
    assert any("ANTHROPIC_API_KEY" in p and "log in" in p for p in problems)
    warned = [r.getMessage() for r in caplog.records if r.name == "sf_provider.gateway"]
    assert any("/readyz" in w and "ANTHROPIC_API_KEY" in w for w in warned)
    # An authentication error (not a retryable 500), saying whose credentials are missing.
    assert chat.status_code == 401
    assert chat.json()["error"]["type"] == "authentication_error"
    assert "credentials of sf-provider's CLI are missing" in chat.json()["error"]["message"]
    assert "not your key" in anthropic_error(messages, 401, "authentication_error")
    assert api.all_requests == []


async def test_with_credentials_readyz_is_ready_and_needs_no_key() -> None:
    async with ScriptedMessagesAPI([]) as api, gateway(api.settings(), api_keys=["k"]) as http:
        ready = await http.get("/readyz", headers={"host": "10.0.0.7:8080"})  # a kubelet probe
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready"}


# -- the server's environment


async def test_the_warnings_header_names_no_server_variable_and_the_log_does(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The `environment-ignored` warning told every client the server's variable names."""
    monkeypatch.setenv("ANTHROPIC_CUSTOM_HEADERS", "x-team: secret-team-name")
    caplog.set_level(logging.WARNING, logger="sf_provider.gateway")
    async with ScriptedMessagesAPI([reply(text("Sunny."))]) as api, gateway(api.settings()) as http:
        answer = await http.post("/v1/chat/completions", json=CHAT)
    assert answer.status_code == 200
    assert "ANTHROPIC_CUSTOM_HEADERS" not in json.dumps(dict(answer.headers))
    logged = [r.getMessage() for r in caplog.records if r.name == "sf_provider.gateway"]
    assert any("environment-ignored" in m and "ANTHROPIC_CUSTOM_HEADERS" in m for m in logged)
