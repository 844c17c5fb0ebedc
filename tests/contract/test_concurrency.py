"""Concurrent queries stay apart: each sees only its own tools, executors and results.

Through the real CLI (16 queries at once against one scripted API) and at the bridge level (100
per-query MCP servers driven at once by the official in-memory MCP client).
"""

from __future__ import annotations

import fcntl
import json
import pickle
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import mcp
import pytest
from mcp import types

from sf_provider import ClaudeAgentProvider, FunctionTool, GenerateResult
from sf_provider._bridge import build_mcp_server
from sf_provider.testing import RecordedRequest, Reply, ScriptedMessagesAPI, reply, text, tool_use

ARGS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "integer"}, "n": {"type": "integer"}},
    "required": ["query", "n"],
}

# (query index, tool letter, arguments) as each executor saw them.
Seen = list[tuple[int, str, dict[str, Any]]]


def _expected(query: int, letter: str, n: int) -> str:
    """What query `query`'s executor of tool `letter` returns for argument `n`."""
    return f"{letter}{query}:{n * (query + 1)}"


def _query_tools(
    query: int, seen: Seen, *, asynchronous: bool = True, own_names: bool = False
) -> list[FunctionTool]:
    """Tools `tool_a` / `tool_b`, named alike in every query so that only each query's own
    routing keeps them apart (`tool_q<query>_a` / `_b` with `own_names`); executors record the
    call and answer from their own index."""

    def make(letter: str) -> FunctionTool:
        # The result is computed from the executor's own query index, not from the arguments, so
        # a call routed to another query's executor produces a visibly wrong result.
        def record(arguments: dict[str, Any]) -> str:
            seen.append((query, letter, dict(arguments)))
            return _expected(query, letter, int(arguments["n"]))

        async def async_executor(arguments: dict[str, Any]) -> str:
            await anyio.lowlevel.checkpoint()  # let the other queries' calls interleave
            return record(arguments)

        return FunctionTool(
            name=f"tool_q{query}_{letter}" if own_names else f"tool_{letter}",
            description=f"Tool {letter} of query {query}.",
            input_schema=ARGS_SCHEMA,
            executor=async_executor if asynchronous or letter == "a" else record,
        )

    return [make("a"), make("b")]


# --------------------------------------------------------------------------- through the CLI

CLI_QUERIES = 16
_MARKER = re.compile(r"QUERY-INDEX=(\d+);")


def _prompt(query: int) -> str:
    return f"QUERY-INDEX={query}; call both of your tools, then report their results."


def _query_of(request: RecordedRequest) -> int | None:
    """The query a request belongs to, read from the prompt (never from its tools); None unless
    the request is that one conversation: each tool call in it carries the query's arguments and
    each tool result answers a call in it."""
    found = {int(m) for m in _MARKER.findall(json.dumps(request.messages, ensure_ascii=False))}
    if len(found) != 1:
        return None
    query = found.pop()
    calls = request.tool_uses()
    answered = {block.get("tool_use_id") for block in request.tool_results()}
    if any(call["input"].get("query") != query for call in calls):
        return None
    return query if answered <= {call["id"] for call in calls} else None


def _result_texts(request: RecordedRequest) -> list[str]:
    texts = []
    for block in request.tool_results():
        content = block.get("content")
        if isinstance(content, str):
            texts.append(content)
        else:
            texts.append("".join(str(b.get("text", "")) for b in content or []))
    return texts


def _scripted_model(request: RecordedRequest) -> Reply:
    """Calls every offered tool with arguments that encode the query, then reports the results."""
    query = _query_of(request)
    if query is None:
        return reply(text("unattributable request"))
    if not request.tool_results():
        return reply(
            *(
                tool_use(name, {"query": query, "n": 100 * k + query})
                for k, name in enumerate(request.tool_names, start=1)
            )
        )
    return reply(text(f"q{query}: " + " ".join(_result_texts(request))))


@dataclass
class _CLIRun:
    results: dict[int, GenerateResult] = field(default_factory=dict)
    seen: Seen = field(default_factory=list)
    requests: list[RecordedRequest] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


async def _run_cli_queries() -> _CLIRun:
    run = _CLIRun()
    async with ScriptedMessagesAPI(_scripted_model) as api:
        provider = ClaudeAgentProvider(api.settings(timeout=90))

        async def one(query: int) -> None:
            tools = _query_tools(query, run.seen)
            run.results[query] = await provider.generate(_prompt(query), tools=tools)

        # All 16 at once: 18-30 s on 2 cores under a load average of 15-25 (a CapacityLimiter
        # of 8 was no faster, 33 s); each CLI peaks at ~235 MB RSS.
        async with anyio.create_task_group() as group:
            for query in range(CLI_QUERIES):
                group.start_soon(one, query)
        run.requests = api.requests
        run.errors = api.errors
    return run


@pytest.fixture(scope="module")
def cli_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> _CLIRun:
    """The 16 concurrent CLI queries, run once for the module's assertions.

    Under pytest-xdist the tests below may land on several workers: the first runs the queries
    and the others read its recorded run, so the suite never starts 32 CLIs at once.
    """
    if not hasattr(request.config, "workerinput"):
        return anyio.run(_run_cli_queries, backend="asyncio")
    shared = tmp_path_factory.getbasetemp().parent
    with (shared / "cli16.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        recorded = shared / "cli16.pickle"
        if recorded.exists():
            run: _CLIRun = pickle.loads(recorded.read_bytes())
            return run
        run = anyio.run(_run_cli_queries, backend="asyncio")
        recorded.write_bytes(pickle.dumps(run))
        return run


@pytest.mark.cli
def test_16_concurrent_queries_all_finish(cli_run: _CLIRun) -> None:
    assert sorted(cli_run.results) == list(range(CLI_QUERIES))
    assert {r.finish_reason for r in cli_run.results.values()} == {"stop"}
    assert cli_run.errors == []
    assert len(cli_run.requests) == 2 * CLI_QUERIES  # the calls, then the answer: no retries


@pytest.mark.cli
def test_16_concurrent_queries_each_call_reaches_only_its_own_executor(cli_run: _CLIRun) -> None:
    foreign = [(q, letter, args) for q, letter, args in cli_run.seen if args["query"] != q]
    assert foreign == [], "an executor saw another query's arguments"
    calls = sorted((q, letter) for q, letter, _ in cli_run.seen)
    assert calls == [(q, letter) for q in range(CLI_QUERIES) for letter in "ab"]


@pytest.mark.cli
def test_16_concurrent_queries_each_get_their_own_tool_results(cli_run: _CLIRun) -> None:
    for query, result in cli_run.results.items():
        got = {c.tool_name: (c.input, c.result and c.result.output) for c in result.tool_calls}
        assert got == {
            f"tool_{letter}": (
                {"query": query, "n": 100 * k + query},
                _expected(query, letter, 100 * k + query),
            )
            for k, letter in enumerate("ab", start=1)
        }


@pytest.mark.cli
def test_16_concurrent_queries_each_see_only_their_own_conversation_and_tools(
    cli_run: _CLIRun,
) -> None:
    by_query: dict[int | None, list[set[str]]] = {}
    for request in cli_run.requests:
        offered = {f"{t['name']}: {t.get('description')}" for t in request.tools}
        by_query.setdefault(_query_of(request), []).append(offered)
    assert None not in by_query, "a request mixing queries, or without its query's prompt"
    assert sorted(q for q in by_query if q is not None) == list(range(CLI_QUERIES))
    for query, offered in by_query.items():
        own = {f"mcp__sf__tool_{x}: Tool {x} of query {query}." for x in "ab"}
        assert offered == [own, own], f"query {query} was offered {offered}"


@pytest.mark.cli
def test_16_concurrent_queries_each_answer_from_their_own_results(cli_run: _CLIRun) -> None:
    for query, result in cli_run.results.items():
        a = _expected(query, "a", 100 + query)
        b = _expected(query, "b", 200 + query)
        assert result.text == f"q{query}: {a} {b}"


# --------------------------------------------------------------------------- the bridge alone

BRIDGES = 100
CALLS_PER_TOOL = 3


async def _for_each_bridge(
    body: Callable[[int, mcp.Client], Awaitable[None]], *, tools_of: Callable[[int], Any]
) -> None:
    """Run `body(query, client)` for 100 per-query bridges at once, each with its own client."""

    async def one(query: int) -> None:
        server = build_mcp_server(f"q{query}", tools_of(query), default_timeout=5)
        async with mcp.Client(server, mode="legacy") as client:
            await body(query, client)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            for query in range(BRIDGES):
                group.start_soon(one, query)


@pytest.mark.anyio
async def test_100_concurrent_bridges_route_every_call_to_their_own_executor() -> None:
    seen: Seen = []
    outputs: dict[tuple[int, str, int], tuple[bool, str]] = {}

    async def call_all(query: int, client: mcp.Client) -> None:
        async def call(letter: str, n: int) -> None:
            result = await client.call_tool(f"tool_{letter}", {"query": query, "n": n})
            assert isinstance(result.content[0], types.TextContent)
            outputs[(query, letter, n)] = (bool(result.is_error), result.content[0].text)

        async with anyio.create_task_group() as calls:
            for k in range(CALLS_PER_TOOL):
                for letter in "ab":
                    calls.start_soon(call, letter, 1000 * k + query)

    # Tool b is synchronous, so half the calls also go through worker threads.
    await _for_each_bridge(
        call_all, tools_of=lambda query: _query_tools(query, seen, asynchronous=False)
    )

    assert [(q, args) for q, _, args in seen if args["query"] != q] == []
    assert len(seen) == BRIDGES * 2 * CALLS_PER_TOOL
    wrong = {
        key: got
        for key, got in outputs.items()
        if got != (False, _expected(key[0], key[1], key[2]))
    }
    assert wrong == {}
    assert len(outputs) == BRIDGES * 2 * CALLS_PER_TOOL


@pytest.mark.anyio
async def test_100_concurrent_bridges_each_list_only_their_own_tools() -> None:
    listed: dict[int, list[str]] = {}

    async def list_tools(query: int, client: mcp.Client) -> None:
        listed[query] = [tool.name for tool in (await client.list_tools()).tools]

    await _for_each_bridge(
        list_tools, tools_of=lambda query: _query_tools(query, [], own_names=True)
    )

    assert listed == {q: [f"tool_q{q}_a", f"tool_q{q}_b"] for q in range(BRIDGES)}


@pytest.mark.anyio
async def test_100_concurrent_bridges_refuse_each_others_tools() -> None:
    seen: Seen = []
    refused: dict[int, tuple[bool, str]] = {}

    async def call_neighbour(query: int, client: mcp.Client) -> None:
        neighbour = (query + 1) % BRIDGES
        result = await client.call_tool(f"tool_q{neighbour}_a", {"query": query, "n": 1})
        assert isinstance(result.content[0], types.TextContent)
        refused[query] = (bool(result.is_error), result.content[0].text)

    await _for_each_bridge(
        call_neighbour, tools_of=lambda query: _query_tools(query, seen, own_names=True)
    )

    assert seen == [], "no executor ran for a tool of another query"
    assert all(is_error for is_error, _ in refused.values())
    assert refused[0][1] == "Unknown tool 'tool_q1_a'; tools: tool_q0_a, tool_q0_b"
    assert len(refused) == BRIDGES


def _shared_tool() -> FunctionTool:
    """One tool object meant to be shared: its result depends only on the call's arguments."""

    async def echo(arguments: dict[str, Any]) -> str:
        await anyio.sleep(float(arguments["delay"]))
        return f"bridge {arguments['bridge']} call {arguments['n']}"

    return FunctionTool(
        name="echo",
        input_schema={
            "type": "object",
            "properties": {
                "bridge": {"type": "string"},
                "n": {"type": "integer"},
                "delay": {"type": "number"},
            },
            "required": ["bridge", "n", "delay"],
        },
        executor=echo,
    )


@pytest.mark.anyio
async def test_one_tool_shared_by_two_concurrent_bridges_keeps_their_results_separate() -> None:
    tool = _shared_tool()
    results: dict[str, list[str]] = {"left": [], "right": []}

    async def drive(bridge: str) -> None:
        server = build_mcp_server(bridge, [tool], default_timeout=5)
        async with mcp.Client(server, mode="legacy") as client:

            async def call(n: int) -> None:
                # Varied delays so the two bridges' calls finish interleaved, out of order.
                delay = ((n * 7) % 5) / 1000
                result = await client.call_tool("echo", {"bridge": bridge, "n": n, "delay": delay})
                assert isinstance(result.content[0], types.TextContent)
                results[bridge].append(result.content[0].text)

            async with anyio.create_task_group() as calls:
                for n in range(20):
                    calls.start_soon(call, n)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(drive, "left")
            group.start_soon(drive, "right")

    for bridge, texts in results.items():
        assert sorted(texts) == sorted(f"bridge {bridge} call {n}" for n in range(20))


@pytest.mark.anyio
async def test_one_tool_shared_by_two_concurrent_bridges_keeps_their_timeouts_separate() -> None:
    tool = _shared_tool()
    outcomes: dict[str, tuple[bool, str]] = {}

    async def drive(bridge: str, default_timeout: float) -> None:
        server = build_mcp_server(bridge, [tool], default_timeout=default_timeout)
        async with mcp.Client(server, mode="legacy") as client:
            result = await client.call_tool("echo", {"bridge": bridge, "n": 0, "delay": 0.3})
        assert isinstance(result.content[0], types.TextContent)
        outcomes[bridge] = (bool(result.is_error), result.content[0].text)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(drive, "fast", 0.05)
            group.start_soon(drive, "patient", 5.0)

    assert outcomes == {
        "fast": (True, "Tool 'echo' timed out after 0.05 s"),
        "patient": (False, "bridge patient call 0"),
    }
