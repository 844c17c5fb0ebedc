"""Where `/v1/responses` keeps responses across replicas: two gateways (`create_app`, each with
its own provider and warm processes) served side by side, sharing a real `redis-server` that the
test starts, or each keeping its own in memory. Real CLI, scripted Messages API."""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import httpx
import openai
import pytest
from conftest import RedisServer, serving
from openai import AsyncOpenAI
from test_gateway_responses import MODEL, WEATHER_TOOL, output, three_calls

from sf_provider.gateway import GatewaySettings, create_app
from sf_provider.settings import ProviderSettings
from sf_provider.testing import (
    ScriptedMessagesAPI,
    offline_env,
    reply,
    text,
)

pytestmark = [pytest.mark.anyio, pytest.mark.cli]


@asynccontextmanager
async def replicas(
    provider: ProviderSettings, count: int, *, key: str = "sk-test", **settings: Any
) -> AsyncIterator[list[AsyncOpenAI]]:
    """`count` gateways with the same settings on their own loopback ports: a client of each."""
    async with AsyncExitStack() as stack:
        clients = []
        for _ in range(count):
            base_url = await stack.enter_async_context(
                serving(create_app(GatewaySettings(provider=provider, **settings)))
            )
            client = AsyncOpenAI(base_url=f"{base_url}/v1", api_key=key, max_retries=0)
            clients.append(await stack.enter_async_context(client))
        yield clients


async def stored_keys(server: RedisServer) -> list[bytes]:
    from redis.asyncio import Redis

    async with Redis.from_url(server.url) as client:
        return sorted(await client.keys("sf-provider:response:*"))


# --------------------------------------------------------------------------- replicas


async def test_replicas_sharing_redis_serve_a_chain_whose_steps_alternate_between_them(
    redis_server: RedisServer,
) -> None:
    """Each step names the last response; the replica that did not answer it reads it from
    Redis and replays the conversation on a fresh process: the model gets the whole
    conversation every time, and the chain ends as on one replica."""
    async with (
        ScriptedMessagesAPI(three_calls) as api,
        replicas(api.settings(), 2, response_store=redis_server.url) as (first, second),
    ):
        raw = await first.responses.with_raw_response.create(
            model=MODEL, input="Weather?", tools=[WEATHER_TOOL]
        )
        steps, served = [raw.parse()], [raw.headers["sf-provider-process"]]
        while steps[-1].output[-1].type == "function_call":
            raw = await (second if len(steps) % 2 else first).responses.with_raw_response.create(
                model=MODEL,
                input=[output(steps[-1].output[-1])],
                previous_response_id=steps[-1].id,
                tools=[WEATHER_TOOL],
            )
            steps.append(raw.parse())
            served.append(raw.headers["sf-provider-process"])
        read_back = await first.responses.retrieve(steps[-1].id)
    # first, second, first, second: neither replica holds the conversation it is asked to go on
    assert served == ["fresh", "fresh", "fresh", "fresh"]
    assert [s.output[-1].type for s in steps] == ["function_call"] * 3 + ["message"]
    assert [json.loads(s.output[-1].arguments)["city"] for s in steps[:3]] == ["C0", "C1", "C2"]
    assert steps[-1].output_text == "Three cities: toolu_0, toolu_1, toolu_2."
    assert read_back.output_text == steps[-1].output_text, "the other replica reads it too"
    # Every step sent the model the whole conversation so far, signed thinking included.
    for index, request in enumerate(api.requests):
        assert [b["id"] for b in request.tool_uses()] == [f"toolu_{n}" for n in range(index)]
        assert request.tool_result_texts() == [f"toolu_{n}" for n in range(index)]
        assert [b["signature"] for b in request.blocks("thinking")] == [
            f"sig-{n}" for n in range(index)
        ]


async def test_replicas_with_memory_stores_answer_the_other_replicas_id_as_unknown() -> None:
    """Without a shared store a response lives on the replica that answered it: the same
    alternation is the named 400 on create, and a 404 on GET, on the other replica."""
    async with (
        ScriptedMessagesAPI(three_calls) as api,
        replicas(api.settings(), 2) as (first, second),
    ):
        step = await first.responses.create(model=MODEL, input="Weather?", tools=[WEATHER_TOOL])
        with pytest.raises(openai.BadRequestError) as continued:
            await second.responses.create(
                model=MODEL,
                input=[output(step.output[-1])],
                previous_response_id=step.id,
                tools=[WEATHER_TOOL],
            )
        with pytest.raises(openai.NotFoundError) as read:
            await second.responses.retrieve(step.id)
        assert (await first.responses.retrieve(step.id)).id == step.id
    assert continued.value.status_code == 400
    assert continued.value.code == "previous_response_not_found"
    assert continued.value.param == "previous_response_id"
    assert read.value.status_code == 404
    assert step.id in read.value.message
    assert len(api.requests) == 1, "nothing ran for the unknown id"


@pytest.mark.parametrize("shared", [True, False], ids=["redis", "memory"])
async def test_an_item_reference_resolves_on_the_other_replica_only_through_redis(
    shared: bool, request: pytest.FixtureRequest
) -> None:
    """The Vercel AI SDK's `openai(model)` sends earlier answers by `item_reference`: a replica
    finds an item the other stored in the shared Redis; with memory stores it is the 404
    `item_not_found` that docs/deploy.md names."""
    store = {"response_store": request.getfixturevalue("redis_server").url} if shared else {}
    script = [reply(text("Sunny.")), reply(text("Tomorrow too."))]
    async with (
        ScriptedMessagesAPI(script) as api,
        replicas(api.settings(), 2, **store) as (first, second),
    ):
        answered = await first.responses.create(model=MODEL, input="Weather?")
        follow_up: Any = [
            {"role": "user", "content": "Weather?"},
            {"type": "item_reference", "id": answered.output[0].id},
            {"role": "user", "content": "And tomorrow?"},
        ]
        if shared:
            went_on = await second.responses.create(model=MODEL, input=follow_up)
        else:
            with pytest.raises(openai.NotFoundError) as missing:
                await second.responses.create(model=MODEL, input=follow_up)
    if shared:
        assert went_on.output_text == "Tomorrow too."
        assert "Sunny." in json.dumps(api.requests[1].messages)
    else:
        assert missing.value.code == "item_not_found"
        assert missing.value.param == "input[1]"
        assert len(api.requests) == 1


# --------------------------------------------------------------------------- what Redis keeps


async def test_another_key_cannot_read_continue_or_delete_a_response_in_redis(
    redis_server: RedisServer,
) -> None:
    async with (
        ScriptedMessagesAPI([reply(text("Sunny."))]) as api,
        replicas(
            api.settings(),
            2,
            key="key-a",
            api_keys=["key-a", "key-b"],
            response_store=redis_server.url,
        ) as (first, other_replica),
    ):
        created = await first.responses.create(model=MODEL, input="Weather?")
        second = other_replica.with_options(api_key="key-b")
        with pytest.raises(openai.NotFoundError) as read:
            await second.responses.retrieve(created.id)
        with pytest.raises(openai.BadRequestError) as continued:
            await second.responses.create(
                model=MODEL, input="And?", previous_response_id=created.id
            )
        with pytest.raises(openai.NotFoundError):
            await second.responses.delete(created.id)
        with pytest.raises(openai.NotFoundError) as unknown:
            await second.responses.retrieve("resp_unknown")
        kept = await other_replica.responses.retrieve(created.id)
    assert continued.value.code == "previous_response_not_found"
    assert kept.id == created.id, "the owner's response survived the other key's delete"
    assert read.value.message.replace(created.id, "ID") == unknown.value.message.replace(
        "resp_unknown", "ID"
    )
    [key] = await stored_keys(redis_server)
    assert key.endswith(created.id.encode())
    assert b"key-a" not in key, "Redis holds a hash of the key, never the key"
    assert len(api.requests) == 1


async def test_store_false_keeps_nothing_in_redis(redis_server: RedisServer) -> None:
    async with (
        ScriptedMessagesAPI([reply(text("Sunny."))]) as api,
        replicas(api.settings(), 1, response_store=redis_server.url) as [client],
    ):
        created = await client.responses.create(model=MODEL, input="Weather?", store=False)
        with pytest.raises(openai.BadRequestError) as continued:
            await client.responses.create(
                model=MODEL, input="And?", previous_response_id=created.id
            )
    assert continued.value.code == "previous_response_not_found"
    assert await stored_keys(redis_server) == []
    assert len(api.requests) == 1


async def test_a_response_in_redis_expires_after_the_store_ttl(redis_server: RedisServer) -> None:
    async with (
        ScriptedMessagesAPI([reply(text("Sunny."))]) as api,
        replicas(api.settings(), 1, response_store=redis_server.url, response_store_ttl=1) as [
            client
        ],
    ):
        created = await client.responses.create(model=MODEL, input="Weather?")
        assert (await client.responses.retrieve(created.id)).id == created.id
        await anyio.sleep(1.2)
        with pytest.raises(openai.NotFoundError):
            await client.responses.retrieve(created.id)
        with pytest.raises(openai.BadRequestError) as continued:
            await client.responses.create(
                model=MODEL, input="And?", previous_response_id=created.id
            )
    assert continued.value.code == "previous_response_not_found"
    assert await stored_keys(redis_server) == []
    assert len(api.requests) == 1


async def test_a_redis_that_goes_away_is_a_named_503_never_an_unknown_id(
    redis_server: RedisServer,
) -> None:
    async with (
        ScriptedMessagesAPI([reply(text("Sunny."))] * 3) as api,
        replicas(api.settings(), 1, response_store=redis_server.url) as [client],
    ):
        created = await client.responses.create(model=MODEL, input="Weather?")
        redis_server.stop()
        with pytest.raises(openai.InternalServerError) as read:
            await client.responses.retrieve(created.id)
        with pytest.raises(openai.InternalServerError) as continued:
            await client.responses.create(
                model=MODEL, input="And?", previous_response_id=created.id
            )
        with pytest.raises(openai.InternalServerError) as kept:  # answered, but not storable
            await client.responses.create(model=MODEL, input="Weather?")
        events = [
            e
            async for e in await client.responses.create(model=MODEL, input="Weather?", stream=True)
        ]
    where = redis_server.url.removesuffix("/0")
    for error in (read.value, continued.value, kept.value):
        assert error.status_code == 503
        assert f"the response store {where}" in error.message
    assert [e.type for e in events][-2:] == ["error", "response.failed"]
    assert events[-1].response.error.code == "response_store_unavailable"
    assert len(api.requests) == 3


# --------------------------------------------------------------------------- the command


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_the_gateway_command_does_not_start_without_its_redis() -> None:
    """Never a silent fallback to memory: the replicas would not share their responses."""
    pytest.importorskip("redis", reason="the redis package (sf-provider[redis]) is not installed")
    port = closed_port()
    command = [sys.executable, "-m", "sf_provider.cli", "gateway", "--port=0"]
    command += ["--response-store", f"redis://:hunter2@127.0.0.1:{port}/0"]
    with anyio.fail_after(60):
        done = await anyio.run_process(command, check=False)
    err = done.stderr.decode()
    assert done.returncode == 3, err  # uvicorn's start-up failure
    assert (
        f"the response store redis://127.0.0.1:{port}/0 (--response-store) cannot be reached" in err
    )
    assert "hunter2" not in err
    assert "Application startup failed" in err


def test_the_gateway_command_names_the_extra_a_redis_store_needs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from sf_provider.cli import main

    for name in ("redis", "redis.asyncio", "redis.exceptions"):  # as if not installed
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "sf_provider.gateway._redis_store", raising=False)
    assert main(["gateway", "--response-store", "redis://127.0.0.1:6379/0"]) == 2
    assert "pip install 'sf-provider[redis]'" in capsys.readouterr().err


async def test_the_gateway_command_keeps_responses_in_redis_as_its_flags_say(
    redis_server: RedisServer,
) -> None:
    from redis.asyncio import Redis

    script = [reply(text("One.")), reply(text("Two."))]
    async with ScriptedMessagesAPI(script) as api:
        env = {**os.environ, **offline_env(api.base_url)}
        command = [sys.executable, "-m", "sf_provider.cli", "gateway", "--port=0"]
        command += ["--response-store", redis_server.url]
        command += ["--response-store-size", "1", "--response-store-ttl", "30"]
        async with await anyio.open_process(command, env=env) as gateway_process:
            assert gateway_process.stderr is not None
            log = ""
            async for chunk in gateway_process.stderr:
                log += chunk.decode()
                if "Uvicorn running on" in log:
                    break
            url = log.split("Uvicorn running on ")[1].split()[0]
            async with httpx.AsyncClient(base_url=url, timeout=60) as http:
                answers = [
                    (await http.post("/v1/responses", json={"model": MODEL, "input": q})).json()
                    for q in ("One?", "Two?")
                ]
            gateway_process.terminate()
            await gateway_process.wait()
    [key] = await stored_keys(redis_server)  # --response-store-size 1: the older went
    assert key.endswith(answers[1]["id"].encode())
    async with Redis.from_url(redis_server.url) as client:
        assert 0 < await client.ttl(key) <= 30
