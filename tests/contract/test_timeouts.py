"""Whole-query and idle timeouts stop a query that would otherwise hang, and say which expired."""

from __future__ import annotations

import asyncio
import time

import pytest
from conftest import cli_processes

from sf_provider import ClaudeAgentProvider, ErrorPart, QueryTimeoutError, StreamPart
from sf_provider.testing import RecordedRequest, Reply, ScriptedMessagesAPI, reply, text

pytestmark = [pytest.mark.anyio, pytest.mark.cli]


async def never_answers(_request: RecordedRequest) -> Reply:
    await asyncio.sleep(60)
    return reply(text("too late"))


@pytest.mark.parametrize(
    ("limits", "kind"),
    [({"idle_timeout": 1.0}, "idle_timeout"), ({"timeout": 1.5}, "timeout")],
    ids=["idle", "whole-query"],
)
async def test_a_hung_api_ends_in_a_timeout_error_and_the_cli_is_stopped(
    limits: dict[str, float], kind: str
) -> None:
    async with ScriptedMessagesAPI(never_answers) as api:
        provider = ClaudeAgentProvider(api.settings(**limits))
        parts: list[StreamPart] = []
        started = time.perf_counter()
        with pytest.raises(QueryTimeoutError) as info:
            async for part in provider.stream("hello"):
                parts.append(part)
        elapsed = time.perf_counter() - started
    assert info.value.kind == kind
    assert info.value.seconds == next(iter(limits.values()))
    assert f"{kind}=" in str(info.value)
    assert isinstance(parts[-1], ErrorPart) and parts[-1].error_type == "QueryTimeoutError"
    assert elapsed < 20, "the CLI was stopped (within the SDK's shutdown grace)"
    assert cli_processes() == []
