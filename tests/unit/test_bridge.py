"""The per-query bridge: tool-name mapping and the MCP server, driven by the official MCP client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import mcp
import pytest
from mcp import types

from sf_provider._bridge import app_tool_name, bridge_tool_name, build_mcp_server
from sf_provider._invoke import DEFAULT_MAX_RESULT_CHARS
from sf_provider.tools import FunctionTool

ADD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}
FORECAST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "where": {
            "type": "object",
            "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
            "required": ["lat", "lon"],
        },
    },
    "required": ["where"],
}


def _fail(args: dict[str, Any]) -> Any:
    raise RuntimeError("backend down")


TOOLS = [
    FunctionTool(
        name="add",
        description="Add two integers.",
        input_schema=ADD_SCHEMA,
        read_only=True,
        executor=lambda args: args["a"] + args["b"],
    ),
    FunctionTool(name="forecast", input_schema=FORECAST_SCHEMA, executor=lambda args: "sunny"),
    FunctionTool(name="delete_all", mutating=True, executor=_fail),
]


@pytest.fixture(params=["auto", "legacy"])
def connect(request: pytest.FixtureRequest) -> Any:
    """Connect the official MCP client in-process, in both the modern and the handshake mode."""

    @asynccontextmanager
    async def connect(tools: Sequence[FunctionTool] = TOOLS) -> AsyncIterator[mcp.Client]:
        server = build_mcp_server("sf", tools, default_timeout=5)
        async with mcp.Client(server, mode=request.param) as client:
            yield client

    return connect


async def _listed(connect: Any) -> dict[str, types.Tool]:
    async with connect() as client:
        listing = await client.list_tools()
    return {tool.name: tool for tool in listing.tools}


# -- names


def test_bridge_tool_name_prefixes_the_app_name() -> None:
    assert bridge_tool_name("sf", "add") == "mcp__sf__add"


def test_app_tool_name_strips_the_bridge_prefix() -> None:
    assert app_tool_name("sf", bridge_tool_name("sf", "get_weather")) == "get_weather"


@pytest.mark.parametrize("name", ["Read", "mcp__other__add", "mcp__sf_add", "sf__add"])
def test_app_tool_name_leaves_foreign_names_alone(name: str) -> None:
    assert app_tool_name("sf", name) == name


# -- the MCP server


@pytest.mark.anyio
async def test_lists_every_tool_in_order(connect: Any) -> None:
    assert list(await _listed(connect)) == ["add", "forecast", "delete_all"]


@pytest.mark.anyio
async def test_listed_schemas_equal_the_declared_ones(connect: Any) -> None:
    listed = await _listed(connect)

    assert listed["add"].input_schema == ADD_SCHEMA
    assert listed["forecast"].input_schema == FORECAST_SCHEMA
    assert listed["delete_all"].input_schema == {"type": "object"}


@pytest.mark.anyio
async def test_listed_description_is_the_declared_one(connect: Any) -> None:
    assert (await _listed(connect))["add"].description == "Add two integers."


@pytest.mark.anyio
async def test_read_only_hint_only_on_read_only_tools(connect: Any) -> None:
    listed = await _listed(connect)

    assert listed["add"].annotations is not None
    assert listed["add"].annotations.read_only_hint is True
    assert listed["forecast"].annotations is None
    assert listed["delete_all"].annotations is not None
    assert listed["delete_all"].annotations.read_only_hint is None


@pytest.mark.anyio
async def test_destructive_hint_on_mutating_tools(connect: Any) -> None:
    listed = await _listed(connect)

    assert listed["delete_all"].annotations is not None
    assert listed["delete_all"].annotations.destructive_hint is True


@pytest.mark.anyio
async def test_call_tool_returns_the_executors_result(connect: Any) -> None:
    async with connect() as client:
        result = await client.call_tool("add", {"a": 2, "b": 3})

    assert result.is_error is False
    assert [(c.type, c.text) for c in result.content] == [("text", "5")]


@pytest.mark.anyio
async def test_call_with_invalid_arguments_is_an_error(connect: Any) -> None:
    async with connect() as client:
        result = await client.call_tool("add", {"a": 2})

    assert result.is_error is True
    assert "'b' is a required property" in result.content[0].text


@pytest.mark.anyio
async def test_unknown_tool_is_an_error_listing_known_tools(connect: Any) -> None:
    async with connect() as client:
        result = await client.call_tool("multiply", {})

    assert result.is_error is True
    assert result.content[0].text == "Unknown tool 'multiply'; tools: add, delete_all, forecast"


@pytest.mark.anyio
async def test_unknown_tool_on_an_empty_bridge_says_none(connect: Any) -> None:
    async with connect(tools=[]) as client:
        result = await client.call_tool("add", {})

    assert result.is_error is True
    assert result.content[0].text == "Unknown tool 'add'; tools: none"


@pytest.mark.anyio
async def test_raising_executor_is_an_error_result(connect: Any) -> None:
    async with connect() as client:
        result = await client.call_tool("delete_all", {})

    assert result.is_error is True
    assert result.content[0].text == "Tool 'delete_all' failed: RuntimeError: backend down"


@pytest.mark.anyio
@pytest.mark.parametrize(("limit", "asked"), [(1000, 1000), (None, DEFAULT_MAX_RESULT_CHARS)])
async def test_each_tool_asks_claude_code_for_the_result_size_it_is_given(
    limit: int | None, asked: int
) -> None:
    """Without a limit (`sf-provider serve`) the listing asked for nothing, and the Claude Code
    CLI replaced every result over 50,000 characters by a preview."""
    server = build_mcp_server("sf", TOOLS, default_timeout=5, max_result_chars=limit)
    async with mcp.Client(server) as client:
        listing = await client.list_tools()
    assert [t.meta for t in listing.tools] == [{"anthropic/maxResultSizeChars": asked}] * 3
