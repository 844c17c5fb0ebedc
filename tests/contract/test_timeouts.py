"""Whole-query and idle timeouts stop a query that would otherwise hang, and say which expired."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from conftest import cli_processes

from sf_provider import ClaudeAgentProvider, ErrorPart, QueryTimeoutError, StreamPart
from sf_provider.testing import RecordedRequest, Reply, ScriptedMessagesAPI, reply, text

pytestmark = [pytest.mark.anyio, pytest.mark.cli]


async def never_answers(_request: RecordedRequest) -> Reply:
    await asyncio.sleep(60)
    return reply(text("too late"))


@dataclass
class HungQuery:
    parts: list[StreamPart]
    error: QueryTimeoutError
    #: Requests the API had received when the error part came, i.e. when the timeout fired.
    reached: int


async def hung_query(**limits: float) -> HungQuery:
    async with ScriptedMessagesAPI(never_answers) as api:
        provider = ClaudeAgentProvider(api.settings(**limits))
        parts: list[StreamPart] = []
        reached = -1
        with pytest.raises(QueryTimeoutError) as info:
            async for part in provider.stream("hello"):
                parts.append(part)
                if isinstance(part, ErrorPart):
                    reached = len(api.requests)
    return HungQuery(parts, info.value, reached)


@pytest.mark.parametrize("kind", ["idle_timeout", "timeout"], ids=["idle", "whole-query"])
async def test_a_hung_api_ends_in_a_timeout_error_and_the_cli_is_stopped(kind: str) -> None:
    # Both clocks also run during CLI start-up, which on a loaded machine can outlast a short
    # limit: a run that never reached the API proves nothing, so it is made again, given longer.
    for seconds in (2.0, 5.0, 15.0):
        run = await hung_query(**{kind: seconds})
        if run.reached:
            break
    assert run.reached == 1, "the timeout fired before the CLI reached the API (during start-up)"
    assert (run.error.kind, run.error.seconds) == (kind, seconds)
    assert f"{kind}=" in str(run.error)
    assert isinstance(run.parts[-1], ErrorPart) and run.parts[-1].error_type == "QueryTimeoutError"
    assert cli_processes() == []
