"""The gateway's in-memory response store: bounded by count and age, and a response visible only
to the owner (API key) that stored it."""

from __future__ import annotations

import pytest

from sf_provider.gateway.responses import MemoryResponseStore, StoredResponse

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def record(response_id: str, owner: str = "a") -> StoredResponse:
    return StoredResponse(response_id, owner, {"id": response_id}, ({"role": "user"},))


async def test_a_response_is_found_by_its_owner_only() -> None:
    store = MemoryResponseStore(10, 60)
    await store.put(record("resp_1"))
    assert await store.get("a", "resp_1") == record("resp_1")
    assert await store.get("b", "resp_1") is None
    assert not await store.delete("b", "resp_1"), "another owner cannot delete it"
    assert await store.delete("a", "resp_1")
    assert await store.get("a", "resp_1") is None
    assert not await store.delete("a", "resp_1")


async def test_the_oldest_goes_first_when_the_store_is_full() -> None:
    store = MemoryResponseStore(2, 60)
    for n in range(3):
        await store.put(record(f"resp_{n}"))
    assert [await store.get("a", f"resp_{n}") is not None for n in range(3)] == [
        False,
        True,
        True,
    ]


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


async def test_a_store_of_size_zero_keeps_nothing() -> None:
    store = MemoryResponseStore(0, 60)
    await store.put(record("resp_1"))
    assert await store.get("a", "resp_1") is None
