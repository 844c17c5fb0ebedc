"""Nothing a request sends blocks the gateway's event loop (issue 31, item 1; ADR 0010).

Through the gateway, the real CLI behind it and the scripted Messages API behind that:

- a tool schema's `pattern` is matched in linear time: a model call that makes Python's `re`
  backtrack for days is answered at once (it would hang these tests until pytest's timeout);
- a tool schema is checked in a worker thread, so `/healthz` answers while one is being checked
  (proven with a check held open by an event, not by a clock);
- schemas past the size limits, patterns the linear engine cannot match, and bodies with too
  many JSON values or too deep are named errors, before anything is parsed or run.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from conftest import HeldCLI, serving

import sf_provider.tools as tools_module
from sf_provider import ClaudeAgentProvider
from sf_provider.errors import ProviderCompatibilityError
from sf_provider.gateway import GatewaySettings, create_app
from sf_provider.gateway._http import MAX_JSON_DEPTH, MAX_JSON_VALUES
from sf_provider.testing import ScriptedMessagesAPI, reply, text, tool_use
from sf_provider.tools import SCHEMA_PROPERTY_LIMIT
from sf_provider.types import TextDeltaPart

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

MODEL = "claude-haiku-4-5"
EVIL = "^(a+)+$"
#: Python's `re` takes ~37 s for 29 "a"s and doubles with each one more: 40 is days.
EVIL_TEXT = "a" * 40 + "!"


def tool(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "description": "A tool.", "input_schema": schema}


def messages_body(*tools: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 256,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": list(tools),
    }


@asynccontextmanager
async def gateway(api: ScriptedMessagesAPI) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(GatewaySettings(provider=api.settings(warm_processes=0)))
    async with serving(app) as url, httpx.AsyncClient(base_url=url, timeout=300) as client:
        yield client


async def test_a_backtracking_pattern_is_matched_in_linear_time_through_the_gateway() -> None:
    match = tool("match", {"type": "object", "properties": {"s": {"type": "string"}}})
    match["input_schema"]["properties"]["s"]["pattern"] = EVIL
    async with (
        ScriptedMessagesAPI([reply(tool_use("match", {"s": EVIL_TEXT}))]) as api,
        gateway(api) as client,
    ):
        answer = await client.post("/v1/messages", json=messages_body(match))
        health = await client.get("/healthz")
    assert health.status_code == 200
    # The call does not match the schema: handed back as the model made it (the client's
    # tools run on the client), the mismatch checked by RE2 rather than by `re`.
    assert answer.status_code == 200, answer.text
    calls = [b for b in answer.json()["content"] if b["type"] == "tool_use"]
    assert [c["input"] for c in calls] == [{"s": EVIL_TEXT}]


async def test_healthz_answers_while_a_tool_schema_is_being_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop_thread = threading.current_thread()  # `serving` runs the gateway in this event loop
    entered, release = threading.Event(), threading.Event()
    checked_in: list[threading.Thread] = []
    released: list[bool] = []
    check = tools_module.normalize_input_schema

    def held_check(schema: Any, *, tool_name: str = "?") -> dict[str, Any]:
        if tool_name == "held":
            checked_in.append(threading.current_thread())
            entered.set()
            # On the event loop (as before), /healthz could not answer and this would wait out
            # its bound: `released` says which happened.
            released.append(release.wait(120))
        return check(schema, tool_name=tool_name)

    monkeypatch.setattr(tools_module, "normalize_input_schema", held_check)
    held = tool("held", {"type": "object", "properties": {"q": {"type": "string"}}})
    async with ScriptedMessagesAPI([reply(text("done"))]) as api, gateway(api) as client:
        answers: dict[str, httpx.Response] = {}

        async def send_held() -> None:
            answers["held"] = await client.post("/v1/messages", json=messages_body(held))

        async with anyio.create_task_group() as group:
            group.start_soon(send_held)
            await anyio.to_thread.run_sync(entered.wait)
            answers["healthz"] = await client.get("/healthz")
            answered_while_held = not release.is_set() and "held" not in answers
            release.set()
    assert answers["healthz"].status_code == 200
    assert answered_while_held
    assert released == [True]
    assert checked_in and checked_in[0] is not loop_thread
    assert answers["held"].status_code == 200, answers["held"].text
    assert answers["held"].json()["content"] == [{"type": "text", "text": "done"}]


@pytest.mark.parametrize(
    ("schema", "named"),
    [
        (
            {
                "type": "object",
                "properties": {
                    f"p{i}": {"type": "string"} for i in range(SCHEMA_PROPERTY_LIMIT + 1)
                },
            },
            "more than the limit of 1,000",
        ),
        (
            {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(?=a)a$"}}},
            "linear-time engine (RE2) cannot match",
        ),
    ],
    ids=["too-many-properties", "lookahead-pattern"],
)
async def test_a_schema_the_gateway_will_not_check_is_a_named_400_and_starts_nothing(
    schema: dict[str, Any], named: str
) -> None:
    async with ScriptedMessagesAPI([reply(text("never"))]) as api, gateway(api) as client:
        answer = await client.post("/v1/messages", json=messages_body(tool("big", schema)))
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert "tools[0]" in error["message"] and named in error["message"]
    assert api.requests == []


async def test_a_body_of_too_many_json_values_is_a_413_before_it_is_parsed() -> None:
    # The 28.6 MiB of 10 M empty objects took the gateway from 79 to 802 MiB.
    body = b'{"model": "m", "messages": [' + b",".join([b"{}"] * 10_000_000) + b"]}"
    async with ScriptedMessagesAPI([]) as api, gateway(api) as client:
        answer = await client.post(
            "/v1/messages", content=body, headers={"content-type": "application/json"}
        )
    assert answer.status_code == 413, answer.text
    error = answer.json()["error"]
    assert error["type"] == "request_too_large"
    assert f"more than {MAX_JSON_VALUES:,} JSON values" in error["message"]


async def test_a_body_nested_past_the_limit_is_a_named_400_and_text_holding_brackets_is_not() -> (
    None
):
    deep = "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)
    body = '{"model": "m", "max_tokens": 9, "metadata": {"x": ' + deep + '}, "messages": []}'
    # Brackets and commas inside strings are text: far past both limits, and accepted.
    brackets = "[{," * (MAX_JSON_VALUES + MAX_JSON_DEPTH)
    async with ScriptedMessagesAPI([reply(text("read"))]) as api, gateway(api) as client:
        answer = await client.post(
            "/v1/messages", content=body, headers={"content-type": "application/json"}
        )
        fine = await client.post(
            "/v1/messages",
            json={
                "model": MODEL,
                "max_tokens": 64,
                "messages": [{"role": "user", "content": brackets}],
            },
        )
    assert answer.status_code == 400, answer.text
    assert f"nests deeper than {MAX_JSON_DEPTH} levels" in answer.json()["error"]["message"]
    assert fine.status_code == 200, fine.text
    assert any(brackets in b.get("text", "") for b in api.requests[0].blocks("text"))


async def test_healthz_answers_while_the_cli_answers_its_version_check(tmp_path: Path) -> None:
    cli = HeldCLI(tmp_path)
    async with ScriptedMessagesAPI([reply(text("versioned"))]) as api:
        app = create_app(
            GatewaySettings(provider=api.settings(warm_processes=0, cli_path=str(cli.path)))
        )
        async with serving(app) as url, httpx.AsyncClient(base_url=url, timeout=300) as client:
            answers: dict[str, httpx.Response] = {}

            async def send() -> None:
                answers["query"] = await client.post(
                    "/v1/messages",
                    json={
                        "model": MODEL,
                        "max_tokens": 64,
                        "messages": [{"role": "user", "content": "hi"}],
                    },
                )

            async with anyio.create_task_group() as group:
                group.start_soon(send)
                await cli.wait_until_asked()
                answers["healthz"] = await client.get("/healthz")
                answered_while_asking = "query" not in answers
                cli.let_it_answer()
    assert answers["healthz"].status_code == 200
    assert answered_while_asking
    assert answers["query"].status_code == 200, answers["query"].text
    assert answers["query"].json()["content"] == [{"type": "text", "text": "versioned"}]


async def test_provider_stream_asks_the_cli_version_off_the_event_loop(tmp_path: Path) -> None:
    # Called on an event loop, `stream` runs no process: the version of a CLI not known yet is
    # asked once the query runs, in a worker thread, while this loop goes on.
    cli = HeldCLI(tmp_path)
    async with ScriptedMessagesAPI([reply(text("versioned"))]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0, cli_path=str(cli.path)))
        try:
            parts = provider.stream("hi")
            assert not cli.asked.exists()  # nothing ran yet
            answered: list[str] = []

            async def run() -> None:
                async with parts:
                    async for part in parts:
                        if isinstance(part, TextDeltaPart):
                            answered.append(part.delta)

            async with anyio.create_task_group() as group:
                group.start_soon(run)
                await cli.wait_until_asked()  # this loop runs while the CLI is being asked
                assert answered == [] and api.all_requests == []
                cli.let_it_answer()
        finally:
            await provider.aclose()
    assert "".join(answered) == "versioned"


async def test_a_cli_path_that_is_not_the_cli_is_refused_before_any_request(
    tmp_path: Path,
) -> None:
    cli = HeldCLI(tmp_path, says="not a version")
    cli.let_it_answer()
    async with ScriptedMessagesAPI([reply(text("unreached"))]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0, cli_path=str(cli.path)))
        try:
            with pytest.raises(ProviderCompatibilityError, match="did not answer --version"):
                await provider.generate("hi")
        finally:
            await provider.aclose()
        assert api.all_requests == []
