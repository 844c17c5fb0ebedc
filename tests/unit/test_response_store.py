"""The gateway's response stores, in memory and in a real Redis server: bounded by count and age,
and a response visible only to the owner (API key) that stored it."""

from __future__ import annotations

import dataclasses
import json
import socket
import sys
from collections.abc import AsyncIterator, Callable

import anyio
import pytest
from conftest import RedisServer

from sf_provider.gateway import GatewaySettings
from sf_provider.gateway.responses import (
    MemoryResponseStore,
    ResponseStore,
    StoredResponse,
    response_store,
)

pytestmark = pytest.mark.anyio

MakeStore = Callable[[int, float], ResponseStore]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def record(response_id: str, owner: str = "a") -> StoredResponse:
    conversation = ({"role": "user", "content": [{"type": "input_text", "text": "Hi?"}]},)
    return StoredResponse(response_id, owner, {"id": response_id, "usage": None}, conversation)


@pytest.fixture(params=["memory", "redis"])
async def make_store(request: pytest.FixtureRequest) -> AsyncIterator[MakeStore]:
    """Makes a store of a size and time to live: in memory, or in a Redis server of the test's
    own (skipped where there is none)."""
    made: list[ResponseStore] = []
    url = request.getfixturevalue("redis_server").url if request.param == "redis" else None

    def make(size: int, ttl: float) -> ResponseStore:
        settings = GatewaySettings(
            response_store=url, response_store_size=size, response_store_ttl=ttl
        )
        made.append(response_store(settings))
        return made[-1]

    yield make
    for store in made:
        await store.aclose()


async def test_a_response_is_found_by_its_owner_only(make_store: MakeStore) -> None:
    store = make_store(10, 60)
    await store.start()
    await store.put(record("resp_1"))
    assert await store.get("a", "resp_1") == record("resp_1")
    assert await store.get("b", "resp_1") is None
    assert not await store.delete("b", "resp_1"), "another owner cannot delete it"
    assert await store.get("a", "resp_1") == record("resp_1")
    assert await store.delete("a", "resp_1")
    assert await store.get("a", "resp_1") is None
    assert not await store.delete("a", "resp_1")


async def test_the_oldest_goes_first_when_the_store_is_full(make_store: MakeStore) -> None:
    store = make_store(2, 60)
    for n in range(3):
        await store.put(record(f"resp_{n}", owner=f"owner-{n}"))
    assert [await store.get(f"owner-{n}", f"resp_{n}") is not None for n in range(3)] == [
        False,
        True,
        True,
    ]


async def test_a_store_of_size_zero_keeps_nothing(make_store: MakeStore) -> None:
    store = make_store(0, 60)
    await store.put(record("resp_1"))
    assert await store.get("a", "resp_1") is None


async def test_a_response_expires_after_its_time_to_live() -> None:
    clock = Clock()
    store = MemoryResponseStore(10, 60, clock=clock)
    await store.put(record("resp_old"))
    clock.now = 30
    await store.put(record("resp_new"))
    clock.now = 61
    assert await store.get("a", "resp_old") is None
    assert await store.get("a", "resp_new") is not None
    clock.now = 91
    assert await store.get("a", "resp_new") is None


# --------------------------------------------------------------------------- Redis


async def test_a_redis_response_expires_by_its_redis_ttl(redis_server: RedisServer) -> None:
    from redis.asyncio import Redis

    store = response_store(GatewaySettings(response_store=redis_server.url, response_store_ttl=0.3))
    async with Redis.from_url(redis_server.url) as server:
        await store.put(record("resp_1"))
        assert await store.get("a", "resp_1") == record("resp_1")
        [key] = [k for k in await server.keys() if k.startswith(b"sf-provider:response:")]
        assert 0 < await server.pttl(key) <= 300, "Redis expires it, not the gateway"
        await anyio.sleep(0.4)
        assert await store.get("a", "resp_1") is None
        assert await server.exists(key) == 0
    await store.aclose()


async def test_an_unreachable_redis_stops_the_start_naming_it_without_its_password() -> None:
    pytest.importorskip("redis", reason="the redis package (sf-provider[redis]) is not installed")
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = response_store(GatewaySettings(response_store=f"redis://:hunter2@127.0.0.1:{port}/3"))
    with pytest.raises(RuntimeError) as start:
        await store.start()
    await store.aclose()
    assert f"the response store redis://127.0.0.1:{port}/3 (--response-store) cannot be " in str(
        start.value
    )
    assert "hunter2" not in str(start.value)


def test_a_redis_url_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("redis", "redis.asyncio", "redis.exceptions"):  # as if not installed
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "sf_provider.gateway._redis_store", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'sf-provider\[redis\]'"):
        response_store(GatewaySettings(response_store="redis://127.0.0.1:6379/0"))


def test_a_response_store_is_a_redis_url() -> None:
    with pytest.raises(ValueError, match="response_store"):
        GatewaySettings(response_store="http://127.0.0.1:6379")


async def test_a_redis_store_smaller_than_what_redis_holds_keeps_storing(
    redis_server: RedisServer,
) -> None:
    """A replica (or a restart) with a smaller `--response-store-size` than the responses Redis
    holds removes the oldest beyond its size, however many: the next response is stored, not
    a 503 for every one."""
    from redis.asyncio import Redis

    from sf_provider.gateway._redis_store import _INDEX

    many = 9000  # more than one Lua call takes as arguments (8000)
    async with Redis.from_url(redis_server.url) as server:
        # As a replica of a larger size stored them, oldest first (in one round trip).
        async with server.pipeline(transaction=False) as pipe:
            for n in range(many):
                key = f"sf-provider:response:a:resp_{n}"
                pipe.set(key, json.dumps(dataclasses.asdict(record(f"resp_{n}"))))
                pipe.zadd(_INDEX, {key: n})
            await pipe.execute()
        small = response_store(
            GatewaySettings(response_store=redis_server.url, response_store_size=2)
        )
        await small.put(record("resp_new"))
        assert await small.get("a", "resp_new") == record("resp_new")
        assert await small.get("a", f"resp_{many - 1}") == record(f"resp_{many - 1}")
        assert await small.get("a", f"resp_{many - 2}") is None, "the oldest beyond it went"
        assert await server.zcard(_INDEX) == 2
        assert len(await server.keys("sf-provider:response:*")) == 2
        await small.aclose()
