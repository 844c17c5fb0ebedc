"""`sf-provider serve` outlives its tools: `sys.exit()`, `KeyboardInterrupt`, `GeneratorExit` and a
`CancelledError` that nothing cancelled, raised by a tool (or `sys.exit()` by the gate), are
answered with an error result, and the server serves the next call. Only the end of stdin or a
signal stops it (tests/contract/test_serve.py).

The real `sf-provider serve` subprocess over stdio, driven by the official `mcp` client; the
tools are `tests/fixtures/unruly_tools.py`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import mcp
import pytest
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent

pytestmark = pytest.mark.anyio

TESTS_DIR = Path(__file__).resolve().parents[1]


def result_text(result: CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


async def call_then_echo(tmp_path: Path, name: str) -> tuple[tuple[str, bool], str, str]:
    """(text, is_error) of calling `name`, the text of an `echo` call after it, and stderr."""
    for sub in ("home", "config", "tmp"):
        (tmp_path / sub).mkdir()
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "sf_provider.cli", "serve", "--tools", "fixtures.unruly_tools:registry"],
        env={
            "PYTHONPATH": str(TESTS_DIR),
            "HOME": str(tmp_path / "home"),
            "CLAUDE_CONFIG_DIR": str(tmp_path / "config"),
            "TMPDIR": str(tmp_path / "tmp"),
        },
        cwd=tmp_path,
    )
    stderr = tmp_path / "serve-stderr.log"
    with stderr.open("w") as errlog:
        async with mcp.Client(stdio_client(params, errlog=errlog)) as client:
            result = await client.call_tool(name, {})
            echo = await client.call_tool("echo", {"text": "still serving"})
    assert not echo.is_error
    return (result_text(result), bool(result.is_error)), result_text(echo), stderr.read_text()


@pytest.mark.parametrize(
    ("tool", "answer"),
    [
        ("exits", "Tool 'exits' failed: SystemExit: exit code 2"),
        ("exits_async", "Tool 'exits_async' failed: SystemExit: exit code 2"),
        ("interrupts", "Tool 'interrupts' failed: KeyboardInterrupt"),
        ("generator_exit", "Tool 'generator_exit' failed: GeneratorExit"),
        ("cancelled", "Tool 'cancelled' failed: CancelledError"),
        ("cancelled_async", "Tool 'cancelled_async' failed: CancelledError"),
        (
            "guarded",  # its gate calls sys.exit(5)
            "Tool 'guarded' was denied by the safety gate: the gate failed "
            "(SystemExit: exit code 5)",
        ),
    ],
)
async def test_a_tool_that_exits_or_interrupts_gets_an_error_result_and_serving_goes_on(
    tmp_path: Path, tool: str, answer: str
) -> None:
    result, echo, stderr = await call_then_echo(tmp_path, tool)
    assert result == (answer, True)
    assert echo == "still serving"
    if tool in ("interrupts", "generator_exit"):
        raised = "KeyboardInterrupt" if tool == "interrupts" else "GeneratorExit"
        assert f"a tool raised {raised}; its call was answered with an error result" in stderr
