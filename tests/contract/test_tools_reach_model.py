"""A request's tools reach the model, or the query fails loudly: never success without them."""

from __future__ import annotations

import re
from typing import Any

import pytest
from conftest import cli_processes, leftover_query_dirs, no_cli_left
from mcp import types

import sf_provider._bridge as bridge_module
from sf_provider import (
    ClaudeAgentProvider,
    FunctionTool,
    InvalidToolSchemaError,
    ProviderCompatibilityError,
    ProviderSettings,
    QueryStream,
    TextDeltaPart,
    ToolRegistry,
    ToolsUnavailableError,
)
from sf_provider.testing import Reply, ScriptedMessagesAPI, reply, text

pytestmark = [pytest.mark.anyio]


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        ({"x": str}, "$.x"),
        ({"type": "object", "default": object()}, "$.default"),
        (
            {"type": "object", "properties": {"n": {"type": "number", "maximum": float("inf")}}},
            "$.properties.n.maximum",
        ),
        ({"type": "object", "properties": {"n": {"enum": [1, {2}]}}}, "$.properties.n.enum[1]"),
    ],
    ids=["python-type", "python-object", "infinity", "set-in-list"],
)
def test_a_schema_that_is_not_plain_json_is_refused_naming_where(
    schema: dict[str, Any], where: str
) -> None:
    with pytest.raises(InvalidToolSchemaError, match=rf"not plain JSON at {re.escape(where)}"):
        FunctionTool(name="t", description="d", input_schema=schema, executor=lambda a: "ok")


def test_function_tool_takes_name_description_schema_and_executor_by_position() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    tool = FunctionTool("weather", "Weather in a city.", schema, lambda a: "sunny")
    assert (tool.name, tool.description, tool.input_schema["properties"]) == (
        "weather",
        "Weather in a city.",
        schema["properties"],
    )
    assert tool.executor is not None
    with pytest.raises(TypeError, match="both by position and by keyword"):
        FunctionTool("weather", name="other")
    with pytest.raises(TypeError, match="at most 4 positional"):
        FunctionTool("a", "b", {}, None, 5)


@pytest.mark.cli
@pytest.mark.parametrize("mode", ["single-turn", "executor"])
async def test_a_tool_the_cli_does_not_list_fails_the_query_by_name(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bridge whose tool listing breaks (a schema value the MCP server cannot serialise, as a
    Python type in a schema once did) leaves the CLI without every tool: the query must fail,
    naming them, instead of answering without them."""
    wire = bridge_module._wire_tool

    def broken_listing(tool: FunctionTool, max_result_chars: int | None) -> types.Tool:
        wired = wire(tool, max_result_chars)
        if tool.name == "broken":
            wired.input_schema["default"] = object()  # tools/list cannot serialise this
        return wired

    monkeypatch.setattr(bridge_module, "_wire_tool", broken_listing)
    tools = [
        FunctionTool(name="fine", description="d", executor=lambda a: "ok"),
        FunctionTool(name="broken", description="d", executor=lambda a: "ok"),
    ]
    async with ScriptedMessagesAPI([reply(text("answered without tools"))]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        with pytest.raises(ToolsUnavailableError) as caught:
            await provider.generate("go", tools=tools, mode=mode)
    assert "broken" in caught.value.missing
    assert "broken" in str(caught.value)
    # The CLI lists its tools in `system/init` and sends its first model call right after,
    # without waiting (in executor mode no hook holds it): the query stops at init, its answer
    # is never used, and the CLI is stopped.
    assert len(api.requests) <= 1
    await no_cli_left()
    assert not cli_processes()


# -- operator switches hold for tools passed directly


@pytest.mark.cli
async def test_a_direct_tool_of_a_group_switched_off_by_the_environment_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SF_PROVIDER_GROUP_ADMIN", "0")
    ran: list[dict[str, Any]] = []
    admin = FunctionTool(
        name="drop_table", description="d", executor=ran.append, group="admin", mutating=True
    )
    reader = FunctionTool(name="read", description="d", executor=lambda a: "rows", group="read")
    async with ScriptedMessagesAPI([reply(text("fine"))]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        with pytest.raises(ProviderCompatibilityError, match="disabled group 'admin'") as caught:
            await provider.generate("go", tools=[reader, admin])
        assert "SF_PROVIDER_GROUP_ADMIN=1" in str(caught.value)
        assert api.requests == [], "refused before any process started"
        # The same tool once the operator switches the group back on.
        monkeypatch.setenv("SF_PROVIDER_GROUP_ADMIN", "1")
        result = await provider.generate("go", tools=[reader, admin])
    assert result.text == "fine"
    assert sorted(api.requests[0].tool_names) == ["mcp__sf__drop_table", "mcp__sf__read"]
    assert ran == []


def test_a_direct_tool_follows_the_providers_registry_group_settings() -> None:
    admin = FunctionTool(name="drop_table", description="d", executor=print, group="admin")
    provider = ClaudeAgentProvider(
        ProviderSettings(env={"ANTHROPIC_API_KEY": "unused"}),
        registry=ToolRegistry(groups={"admin": False}),
    )
    with pytest.raises(ProviderCompatibilityError, match="disabled group 'admin'"):
        provider.stream("go", tools=[admin])
    report = provider.check_capabilities(tools=[admin])
    assert [t.group_enabled for t in report.tools] == [False]


# -- leaving a stream early


@pytest.mark.cli
async def test_leaving_an_async_with_stream_stops_the_cli_while_the_stream_is_still_held() -> None:
    long_reply = Reply(content=[text("word " * 2000)], chunk_size=5)
    async with ScriptedMessagesAPI([long_reply]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        async with provider.stream("talk") as parts:
            async for part in parts:
                if isinstance(part, TextDeltaPart):
                    break  # the model is still answering
            assert cli_processes()
        # `parts` is still referenced here: only the block's exit can have stopped the CLI.
        await no_cli_left()
        assert not cli_processes()
        assert not leftover_query_dirs()
        assert isinstance(parts, QueryStream)
        assert [p async for p in parts] == [], "a stopped stream yields nothing more"
