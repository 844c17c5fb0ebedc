"""The safety gate as a part of the tool call, on every transport (a direct `registry.call`, the
per-query SDK bridge under the real CLI, a real `sf-provider serve` subprocess):

- a sync gate runs in a thread of its own, as a sync executor does: a gate blocked on a slow
  policy service leaves every other query of the process running;
- the call's timeout (the tool's own, else `tool_timeout` / `--timeout` / `default_timeout`)
  bounds the gate and the executor together: a gate that never answers ends the call with an
  error result naming the gate and the limit, and the query goes on;
- the executor gets exactly the validated arguments: a gate that changes the arguments it was
  asked about denies the call, by name.

The registry is `tests/fixtures/gate_tools.py`.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import mcp
import pytest
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import TextContent

from sf_provider import ClaudeAgentProvider, FunctionTool, GateDecision, GateRequest, ToolRegistry
from sf_provider.testing import ScriptedMessagesAPI, reply, text, tool_use
from sf_provider.types import TextDeltaPart

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

TESTS_DIR = Path(__file__).resolve().parents[1]
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))
gate_tools: Any = importlib.import_module("fixtures.gate_tools")

#: The server imports `fixtures` and this checkout's `sf_provider` (not an installed one).
SERVER_PATH = f"{TESTS_DIR}{os.pathsep}{TESTS_DIR.parent}"

TRANSPORTS = pytest.mark.parametrize("transport", ["direct", "sdk-bridge", "stdio"])

#: A "no hang" bound only, never a speed claim: how long the blocked gate below waits for
#: another query to finish (which starts a CLI of its own) before it gives up.
NO_HANG = 90.0


async def call_through(
    transport: str, tmp_path: Path, name: str, arguments: dict[str, Any], limit: float = 60
) -> tuple[str, bool]:
    """(text, is_error) of one call of `gate_tools.registry`'s `name` over `transport`, whose
    calls run under `limit` seconds (`default_timeout`, `tool_timeout`, `--timeout`)."""
    registry = gate_tools.registry
    if transport == "direct":
        output = await registry.call(name, arguments, default_timeout=limit)
        return output.text, output.is_error
    if transport == "sdk-bridge":
        script = [reply(tool_use(name, arguments)), reply(text("done"))]
        async with ScriptedMessagesAPI(script) as api:
            settings = api.settings(warm_processes=0, tool_timeout=limit)
            result = await ClaudeAgentProvider(settings, registry=registry).generate("go")
        assert result.text == "done"  # the query went on after the call
        [block] = api.requests[1].results()
        return block.text, block.is_error
    dirs = {name: tmp_path / name for name in ("HOME", "CLAUDE_CONFIG_DIR", "TMPDIR")}
    for path in dirs.values():
        path.mkdir(exist_ok=True)
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "sf_provider.cli",
            "serve",
            "--tools",
            "fixtures.gate_tools:registry",
            "--timeout",
            str(limit),
        ],
        env={
            **{k: str(v) for k, v in dirs.items()},
            "PYTHONPATH": SERVER_PATH,
            gate_tools.CALL_LOG_ENV: str(tmp_path / "calls.jsonl"),
        },
        cwd=tmp_path,
    )
    with (tmp_path / "serve-stderr.log").open("w") as errlog:
        async with mcp.Client(stdio_client(params, errlog=errlog)) as client:
            result = await client.call_tool(name, arguments)
            listed = await client.list_tools()  # and the server serves on
            assert [t.name for t in listed.tools] == ["approve", "rename"]
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    return "".join(texts), bool(result.is_error)


def executor_calls(tmp_path: Path) -> list[tuple[str, dict[str, Any]]]:
    """Every executor call of this process and of a serve subprocess."""
    log = tmp_path / "calls.jsonl"
    lines = log.read_text().splitlines() if log.exists() else []
    served = [(entry["tool"], entry["arguments"]) for entry in map(json.loads, lines)]
    return [*gate_tools.CALLS, *served]


@pytest.fixture(autouse=True)
def _no_calls_yet() -> None:
    gate_tools.CALLS.clear()


# --------------------------------------------------------------------------- a gate's timeout


@TRANSPORTS
async def test_a_gate_that_never_answers_times_out_with_the_calls_timeout(
    transport: str, tmp_path: Path
) -> None:
    # It hung the call until the query's timeout, and under `sf-provider serve` for ever.
    output = await call_through(transport, tmp_path, "approve", {"path": "/srv/a"}, limit=0.5)

    assert output == (
        "Tool 'approve' timed out after 0.5 s waiting for the safety gate to decide; it did not "
        "run",
        True,
    )
    assert executor_calls(tmp_path) == []


# --------------------------------------------------------------------------- the arguments


@TRANSPORTS
async def test_a_gate_changing_the_arguments_denies_the_call_and_the_executor_never_runs(
    transport: str, tmp_path: Path
) -> None:
    # The gate's request held the very dict the executor got: it ran with a tag the schema
    # refuses, never validated.
    output = await call_through(transport, tmp_path, "rename", {"path": "/srv/a", "tags": ["x"]})

    assert output == (
        "Tool 'rename' was denied by the safety gate: the gate changed the arguments it was "
        "asked about; a gate decides on the validated arguments and cannot rewrite them",
        True,
    )
    assert executor_calls(tmp_path) == []


# --------------------------------------------------------------------------- off the loop


async def test_another_query_streams_while_a_sync_gate_blocks() -> None:
    # The sync gate ran on the event loop's thread: a gate waiting on a policy service stalled
    # every query and stream of the process until it answered.
    entered = threading.Event()
    release = threading.Event()
    released: list[bool] = []

    def gate(request: GateRequest) -> GateDecision:
        entered.set()
        released.append(release.wait(NO_HANG))  # True only if the other query finished
        return GateDecision.allow()

    ran: list[dict[str, Any]] = []
    tool = FunctionTool("delete_file", "Deletes a file.", executor=ran.append, mutating=True)
    gated = [reply(tool_use("delete_file", {})), reply(text("done"))]
    async with ScriptedMessagesAPI(gated) as api, ScriptedMessagesAPI([reply(text("hi"))]) as other:
        gated_provider = ClaudeAgentProvider(
            api.settings(warm_processes=0, tool_timeout=None),
            registry=ToolRegistry([tool], gate=gate),
        )
        other_provider = ClaudeAgentProvider(other.settings(warm_processes=0))
        streamed: list[str] = []

        async def stream_another_query() -> None:
            await anyio.to_thread.run_sync(entered.wait, NO_HANG)
            async for part in other_provider.stream("hello"):
                if isinstance(part, TextDeltaPart):
                    streamed.append(part.delta)
            release.set()

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(stream_another_query)
            result = await gated_provider.generate("delete it")
    assert released == [True], "the other query could not run while the gate blocked"
    assert "".join(streamed) == "hi"
    assert result.text == "done"
    assert ran == [{}]
