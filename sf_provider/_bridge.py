"""The per-query bridge: one in-process MCP server holding exactly one request's tools."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from claude_agent_sdk.types import McpSdkServerConfig
from mcp import types
from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from ._invoke import DEFAULT_MAX_RESULT_CHARS, invoke_tool
from .errors import ToolsUnavailableError
from .gates import CallContext, Gate, Transport
from .tools import FunctionTool

__all__ = [
    "app_tool_name",
    "bridge_tool_name",
    "build_bridge_server",
    "build_mcp_server",
    "unavailable_tools",
]


def bridge_tool_name(bridge: str, name: str) -> str:
    """The name the CLI and the model use for an app tool: `mcp__<bridge>__<name>`."""
    return f"mcp__{bridge}__{name}"


def app_tool_name(bridge: str, name: str) -> str:
    """The app's name for a bridge tool name; other names are returned unchanged."""
    prefix = f"mcp__{bridge}__"
    return name[len(prefix) :] if name.startswith(prefix) else name


def unavailable_tools(
    init: Mapping[str, Any], bridge: str, names: Sequence[str]
) -> ToolsUnavailableError | None:
    """The error for the CLI's `system/init` data when it does not list every request tool.

    The CLI lists the tools it offers the model and each MCP server's status in `init`, before
    its first model call: a bridge that failed to connect or to list a tool shows here.
    """
    offered = set(init.get("tools") or ())
    missing = [n for n in names if bridge_tool_name(bridge, n) not in offered]
    if not missing:
        return None
    servers = init.get("mcp_servers") or []
    status = next(
        (
            str(s.get("status"))
            for s in servers
            if isinstance(s, Mapping) and s.get("name") == bridge
        ),
        None,
    )
    return ToolsUnavailableError(
        f"the Claude Code CLI does not offer the model {len(missing)} of this request's tools "
        f"({', '.join(missing)}); the tool bridge's status is {status or 'unknown'}. The query "
        f"was stopped rather than run without them. Please report this with the CLI's stderr.",
        missing=missing,
        status=status,
    )


def _wire_tool(tool: FunctionTool, max_result_chars: int | None) -> types.Tool:
    annotations = None
    if tool.read_only or tool.mutating:
        # readOnlyHint lets the CLI overlap parallel calls of side-effect-free tools.
        annotations = types.ToolAnnotations(
            read_only_hint=tool.read_only or None, destructive_hint=tool.mutating or None
        )
    # Without this the Claude Code CLI replaces any result over 50,000 characters by a preview
    # the model cannot open. With no limit of ours (`sf-provider serve`), ask for its largest:
    # other clients ignore the key and get every result whole.
    size = DEFAULT_MAX_RESULT_CHARS if max_result_chars is None else max_result_chars
    meta = {"anthropic/maxResultSizeChars": size}
    return types.Tool.model_validate(
        {
            "name": tool.name,
            "description": tool.description,
            "inputSchema": tool.input_schema,
            "annotations": annotations,
            "_meta": meta,
        }
    )


def build_mcp_server(
    name: str,
    tools: Sequence[FunctionTool],
    *,
    default_timeout: float | None,
    gate: Gate | None = None,
    transport: Transport = "sdk-bridge",
    max_result_chars: int | None = DEFAULT_MAX_RESULT_CHARS,
    run_in: Callable[[], contextvars.Context | None] | None = None,
) -> Server[Any]:
    """An official low-level MCP server serving `tools` through the one invocation layer.

    Used for the per-query SDK bridge and for `sf-provider serve` (stdio) alike. Results longer
    than `max_result_chars` are truncated, and each listed tool asks a Claude Code client for
    that size; None truncates nothing and asks for the CLI's largest. `run_in` gives the
    context (contextvars) each message is handled in (`_RunIn`); None = the server's own.
    """
    by_name = {tool.name: tool for tool in tools}
    listing = types.ListToolsResult(tools=[_wire_tool(t, max_result_chars) for t in tools])

    async def on_list_tools(
        _ctx: Any, _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return listing

    async def on_call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = by_name.get(params.name)
        if tool is None:
            known = ", ".join(sorted(by_name)) or "none"
            return types.CallToolResult(
                content=[types.TextContent(text=f"Unknown tool {params.name!r}; tools: {known}")],
                is_error=True,
            )
        meta: dict[str, Any] = dict(params.meta or {})
        call_id = meta.get("claudecode/toolUseId")
        context = CallContext(
            transport=transport,
            tool_call_id=call_id if isinstance(call_id, str) else None,
            metadata=meta,
        )
        output = await invoke_tool(
            tool,
            params.arguments,
            default_timeout=default_timeout,
            gate=gate,
            context=context,
            max_result_chars=max_result_chars,
        )
        return types.CallToolResult.model_validate(
            {"content": output.content, "isError": output.is_error}
        )

    server = Server(
        name, version=_package_version(), on_list_tools=on_list_tools, on_call_tool=on_call_tool
    )
    if run_in is not None:
        # Outermost, so that the mcp SDK's own OpenTelemetry span runs in that context too.
        server.middleware.insert(0, _RunIn(run_in))
    return server


class _RunIn:
    """Server middleware: each message is handled (the mcp SDK's span, the tool call) in the
    context `run_in` gives, when it gives one: the query's, for the per-query bridge, so the
    query's tools run as they would in a fresh process started by that query, and their spans
    nest under its span. Messages arrive in the context of the task that started the CLI, which
    a warm process keeps from an earlier query."""

    def __init__(self, run_in: Callable[[], contextvars.Context | None]) -> None:
        self._run_in = run_in

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        scope = self._run_in()
        if scope is None:
            return await call_next(ctx)

        async def handle() -> HandlerResult:
            return await call_next(ctx)

        # A task in the query's own context (asyncio only, like warm processes); cancelling
        # this wait cancels it.
        return await asyncio.get_running_loop().create_task(handle(), context=scope.copy())


def _package_version() -> str:
    from ._version import __version__

    return __version__


def build_bridge_server(
    bridge: str,
    tools: Sequence[FunctionTool],
    *,
    default_timeout: float | None,
    gate: Gate | None = None,
    max_result_chars: int | None = DEFAULT_MAX_RESULT_CHARS,
    run_in: Callable[[], contextvars.Context | None] | None = None,
) -> McpSdkServerConfig:
    """The SDK server config for one query (or one warm process): exactly these tools."""
    server = build_mcp_server(
        bridge,
        tools,
        default_timeout=default_timeout,
        gate=gate,
        max_result_chars=max_result_chars,
        run_in=run_in,
    )
    return McpSdkServerConfig(type="sdk", name=bridge, instance=server)
