"""`sf-provider serve` as real MCP clients use it: the Claude Code CLI (an external stdio server in
its MCP config) and the official `mcp` client, each against a real `sf-provider serve`
subprocess. The tools are `tests/fixtures/serve_tools.py`, found through `PYTHONPATH`.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

import anyio
import claude_agent_sdk as sdk
import mcp
import pytest
from mcp.client.stdio import StdioServerParameters, stdio_client

from sf_provider._invoke import DEFAULT_MAX_RESULT_CHARS
from sf_provider.testing import ScriptedMessagesAPI, offline_env, reply, text, tool_use

pytestmark = pytest.mark.anyio

TESTS_DIR = Path(__file__).resolve().parents[1]
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))
serve_tools: Any = importlib.import_module("fixtures.serve_tools")

SPEC = "fixtures.serve_tools:registry"
#: The Claude Code CLI's own limit for an MCP tool result that does not ask for more (measured,
#: CLI 2.1.330): above it the model gets a preview pointing at a file it cannot open.
CLI_DEFAULT_RESULT_LIMIT = 50_000


def isolated_env(path: Path) -> dict[str, str]:
    """HOME / CLAUDE_CONFIG_DIR / TMPDIR under `path`."""
    dirs = {"HOME": "home", "CLAUDE_CONFIG_DIR": "config", "TMPDIR": "tmp"}
    for name in dirs.values():
        (path / name).mkdir(parents=True, exist_ok=True)
    return {key: str(path / name) for key, name in dirs.items()}


def serve_command(path: Path) -> tuple[str, list[str], dict[str, str]]:
    """(command, args, env) of a `sf-provider serve` subprocess serving the fixture tools."""
    env = isolated_env(path) | {"PYTHONPATH": str(TESTS_DIR)}
    return sys.executable, ["-m", "sf_provider.cli", "serve", "--tools", SPEC], env


def result_text(block: dict[str, Any]) -> str:
    """The text of a Messages API tool_result block, whatever shape its content has."""
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "".join(str(b.get("text", "")) for b in content or [] if b.get("type") == "text")


# --------------------------------------------------------------------------- the Claude Code CLI


@pytest.mark.cli
async def test_the_claude_cli_passes_a_result_longer_than_its_default_limit_whole(
    tmp_path: Path,
) -> None:
    """Above 50,000 characters the model got the CLI's preview ("Error: result (120,000
    characters ...) exceeds maximum allowed tokens. Output has been saved to <file>"), where the
    per-query bridge passes the same result whole: serve did not ask the CLI for more."""
    size = 120_000
    assert CLI_DEFAULT_RESULT_LIMIT < size < DEFAULT_MAX_RESULT_CHARS
    command, args, env = serve_command(tmp_path / "server")
    script = [reply(tool_use("big", {"size": size})), reply(text("got it"))]
    async with ScriptedMessagesAPI(script) as api:
        options = sdk.ClaudeAgentOptions(
            tools=[],
            allowed_tools=["mcp__ext__big"],
            mcp_servers={"ext": {"type": "stdio", "command": command, "args": args, "env": env}},
            setting_sources=[],
            env=offline_env(api.base_url) | isolated_env(tmp_path),
            cwd=str(tmp_path),
            extra_args={"no-session-persistence": None, "bare": None},
        )
        messages = [m async for m in sdk.query(prompt="fetch it", options=options)]
    result = messages[-1]
    assert isinstance(result, sdk.ResultMessage) and not result.is_error, result
    assert api.errors == []
    [sent] = api.requests[1].tool_results()
    got = result_text(sent)
    assert got == serve_tools.big_text(size), f"the model got {len(got)} chars: {got[:120]!r}"


# --------------------------------------------------------------------------- the mcp client


async def test_the_listing_asks_claude_code_for_its_largest_result_and_others_get_it_whole(
    tmp_path: Path,
) -> None:
    """A client other than Claude Code ignores the size hint: serve truncates nothing."""
    command, args, env = serve_command(tmp_path)
    params = StdioServerParameters(command=command, args=args, env=env, cwd=tmp_path)
    size = DEFAULT_MAX_RESULT_CHARS + 1000
    with (tmp_path / "serve-stderr.log").open("w") as errlog:
        async with mcp.Client(stdio_client(params, errlog=errlog)) as client:
            listed = await client.list_tools()
            big = await client.call_tool("big", {"size": size})
    for tool in listed.tools:
        assert tool.meta == {"anthropic/maxResultSizeChars": DEFAULT_MAX_RESULT_CHARS}, tool.name
    assert not big.is_error
    assert "".join(getattr(b, "text", "") for b in big.content) == serve_tools.big_text(size)


def logged_calls(call_log: Path) -> list[str]:
    """The tool names the server's executors recorded, in order."""
    if not call_log.exists():
        return []
    return [json.loads(line)["tool"] for line in call_log.read_text().splitlines()]


async def until_logged(call_log: Path, entry: str) -> list[str]:
    """The recorded calls once `entry` is among them (at most 30 s: a "no hang" bound)."""
    for _ in range(1500):
        if entry in logged_calls(call_log):
            break
        await anyio.sleep(0.02)
    return logged_calls(call_log)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_call_the_mcp_client_gives_up_stops_its_tool_and_serving_goes_on(
    tmp_path: Path, mode: str
) -> None:
    call_log = tmp_path / "calls.jsonl"
    command, args, env = serve_command(tmp_path)
    env[serve_tools.CALL_LOG_ENV] = str(call_log)
    params = StdioServerParameters(command=command, args=args, env=env, cwd=tmp_path)
    with (tmp_path / "serve-stderr.log").open("w") as errlog:
        async with mcp.Client(stdio_client(params, errlog=errlog), mode=mode) as client:
            async with anyio.create_task_group() as calls:
                calls.start_soon(client.call_tool, "wait", {})
                assert "wait" in await until_logged(call_log, "wait"), "the call did not start"
                calls.cancel_scope.cancel()  # the client sends notifications/cancelled
            recorded = await until_logged(call_log, "wait-cancelled")
            echo = await client.call_tool("echo", {"text": "still serving"})
    assert recorded == ["wait", "wait-cancelled"]
    assert not echo.is_error
