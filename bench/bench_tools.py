"""The tools `bench/suite.py` serves with `sf-provider serve --tools bench_tools:tools`.

Kept tiny on purpose: the tool-call benchmark measures the transport, not the work of the tool.
"""

from __future__ import annotations

from sf_provider import FunctionTool


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def make_tools() -> list[FunctionTool]:
    """A fresh `add` tool (each transport gets its own instance)."""
    return [FunctionTool.from_function(add)]


#: What `sf-provider serve --tools bench_tools:tools` loads.
tools = make_tools()
