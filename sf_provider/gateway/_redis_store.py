"""The Redis-backed `ResponseStore` (`GatewaySettings.response_store`, the extra
`sf-provider[redis]`): every replica that names the same Redis continues any conversation.

A record is JSON under `sf-provider:response:<owner>:<id>`, so another API key's lookup finds
nothing, and expires by Redis TTL. A sorted set of the keys, by the time they were stored, keeps
the count bounded: the oldest go first, as in `MemoryResponseStore`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any
from urllib.parse import urlsplit

try:
    from redis.asyncio import Redis
    from redis.exceptions import RedisError
except ImportError as exc:
    raise ImportError(
        "a redis:// response store needs the extra: pip install 'sf-provider[redis]'"
    ) from exc

from ._errors import ErrorInfo, GatewayError
from .responses import StoredResponse

__all__ = ["RedisResponseStore"]

_PREFIX = "sf-provider:response:"
_INDEX = "sf-provider:responses"
# KEYS: the record's key, the index. ARGV: the record, its TTL in ms (0: none), the count kept.
# One script, so replicas storing at once keep the bound; the server's clock (microseconds) orders
# the index. The oldest go a thousand at a time: Lua's `unpack` takes at most 8000 (a replica of
# a smaller size than what Redis holds removes them all).
_PUT = """
local now = redis.call('TIME')
if tonumber(ARGV[2]) > 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
else
  redis.call('SET', KEYS[1], ARGV[1])
end
redis.call('ZADD', KEYS[2], now[1] .. string.format('%06d', now[2]), KEYS[1])
local extra = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[3])
while extra > 0 do
  local oldest = redis.call('ZRANGE', KEYS[2], 0, math.min(extra, 1000) - 1)
  redis.call('DEL', unpack(oldest))
  redis.call('ZREM', KEYS[2], unpack(oldest))
  extra = extra - #oldest
end
"""


def _where(url: str) -> str:
    """`url` without its password (or any query option): for messages."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"


class RedisResponseStore:
    """Responses in the Redis server at `url` (`redis://host:port/db`, `rediss://`,
    `unix://path`): at most `size`, each for `ttl` seconds. An unreachable server is a 503
    naming it, never an unknown id."""

    def __init__(self, url: str, size: int, ttl: float) -> None:
        self.where = _where(url)
        self.size, self.ttl = size, ttl
        # Timeouts unless the URL sets its own: a server gone away is an answer, not a hang.
        self._client = Redis.from_url(url, socket_connect_timeout=5, socket_timeout=5)
        self._put = self._client.register_script(_PUT)

    @staticmethod
    def _key(owner: str, response_id: str) -> str:
        return f"{_PREFIX}{owner}:{response_id}"

    def _unavailable(self, exc: RedisError) -> GatewayError:
        return GatewayError(
            ErrorInfo(503, "api_error", f"the response store {self.where} failed: {exc}")
        )

    async def start(self) -> None:
        try:
            await self._client.ping()
        except RedisError as exc:
            # Its cause is in the message: one short traceback in the server's log.
            raise RuntimeError(
                f"the response store {self.where} (--response-store) cannot be reached: {exc}"
            ) from None

    async def aclose(self) -> None:
        await self._client.aclose()

    async def put(self, record: StoredResponse) -> None:
        ttl = 0 if math.isinf(self.ttl) else max(1, math.ceil(self.ttl * 1000))
        data = json.dumps(dataclasses.asdict(record))
        try:
            await self._put(
                keys=[self._key(record.owner, record.id), _INDEX], args=[data, ttl, self.size]
            )
        except RedisError as exc:
            raise self._unavailable(exc) from exc

    async def get(self, owner: str, response_id: str) -> StoredResponse | None:
        try:
            data = await self._client.get(self._key(owner, response_id))
        except RedisError as exc:
            raise self._unavailable(exc) from exc
        if data is None:
            return None
        fields: dict[str, Any] = json.loads(data)
        return StoredResponse(**{**fields, "conversation": tuple(fields["conversation"])})

    async def delete(self, owner: str, response_id: str) -> bool:
        key = self._key(owner, response_id)
        try:
            async with self._client.pipeline() as pipe:
                deleted, _ = await pipe.delete(key).zrem(_INDEX, key).execute()
        except RedisError as exc:
            raise self._unavailable(exc) from exc
        return bool(deleted)
