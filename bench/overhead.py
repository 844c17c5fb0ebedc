"""Overhead of `ClaudeAgentProvider` over a bare `claude_agent_sdk.query()` doing the same work.

One scenario, two contenders, one scripted Messages API on 127.0.0.1, the same bundled CLI:

- **provider**: `ClaudeAgentProvider(api.settings()).generate(...)` with a `FunctionTool` executor;
- **bare**: `claude_agent_sdk.query()` with an equivalent in-process MCP server
  (`create_sdk_mcp_server` + `tool`) and the options the provider passes (see `_sdk_options` in
  sf_provider/provider.py): no built-in tools, the tool auto-approved, no setting sources, partial
  messages, `--no-session-persistence` (not `--bare`: the provider never runs the CLI bare, and
  a bare CLI starts about 10 % faster), `ENABLE_TOOL_SEARCH=false` (so the model is offered just
  the tool, as by the provider), the same buffer size, env, max turns and a stderr callback, and
  a per-run temp HOME / CLAUDE_CONFIG_DIR / TMPDIR removed afterwards.

The model calls `add(a=2, b=3)` once, then answers with text. Runs alternate A, B, A, B, ... after
one untimed warm-up of each; every run is checked (the tool ran, its result reached the model, the
answer arrived). Prints median / min / max per contender and the ratio of medians provider/bare.

    python bench/overhead.py [--runs N] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import claude_agent_sdk as sdk

from sf_provider import ClaudeAgentProvider, FunctionTool
from sf_provider.settings import ProviderSettings
from sf_provider.testing import (
    RecordedRequest,
    Reply,
    ScriptedMessagesAPI,
    offline_env,
    reply,
    text,
    tool_use,
)

TARGET_RATIO = 1.05
BRIDGE = "sf"
TOOL_NAME = "add"
WIRE_TOOL_NAME = f"mcp__{BRIDGE}__{TOOL_NAME}"
ARGS = {"a": 2, "b": 3}
TOOL_RESULT = "5"
ANSWER = "2 + 3 = 5."
PROMPT = "What is 2 + 3? Use the add tool."
ADD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}


#: The CLI flags and variables the provider passes that change the work the CLI does (see
#: `_sdk_options` in sf_provider/provider.py): never `--bare`, and no deferred-tool placeholder.
BARE_FLAGS: dict[str, str | None] = {"no-session-persistence": None}
BARE_ENV = {"ENABLE_TOOL_SEARCH": "false"}


class BenchError(RuntimeError):
    """A run did not do what the scenario says: the figures would be meaningless."""


@dataclass
class Counter:
    """Tool executions, as seen by the tool itself."""

    calls: list[tuple[int, int]] = field(default_factory=list)


# --------------------------------------------------------------------------- the scripted model


def responder(request: RecordedRequest) -> Reply:
    """Call `add` when the last message carries no tool_result, else answer with text."""
    messages = request.messages
    last = messages[-1] if messages else {}
    content = last.get("content")
    has_result = isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )
    return reply(text(ANSWER)) if has_result else reply(tool_use(TOOL_NAME, ARGS))


def check_requests(requests: list[RecordedRequest], label: str) -> None:
    """Exactly two model calls: one offering only the add tool, one carrying its result."""
    if len(requests) != 2:
        raise BenchError(f"{label}: expected 2 Messages API calls, got {len(requests)}")
    for request in requests:
        if request.tool_names != [WIRE_TOOL_NAME]:
            raise BenchError(f"{label}: the model was offered {request.tool_names}")
    results = requests[1].tool_results()
    if len(results) != 1:
        raise BenchError(f"{label}: expected one tool_result in the 2nd call, got {results}")
    content = results[0].get("content")
    texts = (
        [b.get("text") for b in content if isinstance(b, dict)]
        if isinstance(content, list)
        else [content]
    )
    if results[0].get("is_error") or texts != [TOOL_RESULT]:
        raise BenchError(f"{label}: the tool result the model got is {results[0]!r}")


# --------------------------------------------------------------------------- contender A


def make_function_tool(counter: Counter) -> FunctionTool:
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        counter.calls.append((a, b))
        return a + b

    return FunctionTool.from_function(add)


async def run_provider(api: ScriptedMessagesAPI, tool: FunctionTool) -> str:
    provider = ClaudeAgentProvider(api.settings(warm_processes=0))  # a fresh CLI per query
    result = await provider.generate(PROMPT, tools=[tool])
    calls = result.tool_calls
    if len(calls) != 1 or calls[0].result is None or calls[0].result.output != TOOL_RESULT:
        raise BenchError(f"provider: unexpected tool calls {calls!r}")
    return result.text


# --------------------------------------------------------------------------- contender B


def make_bare_server(counter: Counter) -> sdk.McpSdkServerConfig:
    @sdk.tool(TOOL_NAME, "Add two integers.", ADD_SCHEMA)
    async def add(args: dict[str, Any]) -> dict[str, Any]:
        a, b = int(args["a"]), int(args["b"])
        counter.calls.append((a, b))
        return {"content": [{"type": "text", "text": str(a + b)}]}

    return sdk.create_sdk_mcp_server(BRIDGE, "1", [add])


async def run_bare(api: ScriptedMessagesAPI, counter: Counter) -> str:
    workdir = Path(tempfile.mkdtemp(prefix="sf-bench-bare-"))
    try:
        dirs = {"HOME": "home", "CLAUDE_CONFIG_DIR": "config", "TMPDIR": "tmp"}
        env = {**offline_env(api.base_url), **BARE_ENV}
        for var, name in dirs.items():
            (workdir / name).mkdir()
            env[var] = str(workdir / name)
        stderr: deque[str] = deque(maxlen=40)
        defaults = ProviderSettings()
        options = sdk.ClaudeAgentOptions(
            tools=[],
            allowed_tools=[WIRE_TOOL_NAME],
            mcp_servers={BRIDGE: make_bare_server(counter)},
            setting_sources=[],
            max_turns=defaults.max_turns,
            include_partial_messages=True,
            env=env,
            max_buffer_size=defaults.max_buffer_size,
            stderr=stderr.append,
            extra_args=BARE_FLAGS,
        )
        texts: list[str] = []
        result: sdk.ResultMessage | None = None
        async for message in sdk.query(prompt=PROMPT, options=options):
            if isinstance(message, sdk.AssistantMessage):
                texts.extend(b.text for b in message.content if isinstance(b, sdk.TextBlock))
            elif isinstance(message, sdk.ResultMessage):
                result = message
        if result is None or result.is_error:
            raise BenchError(f"bare: bad result {result!r}; stderr: {list(stderr)}")
        return texts[-1] if texts else ""
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# --------------------------------------------------------------------------- the harness


async def one_run(
    label: str,
    api: ScriptedMessagesAPI,
    counter: Counter,
    call: Callable[[], Awaitable[str]],
) -> float:
    """Run one query, time it, check it did the whole scenario; seconds of wall time."""
    first_request = len(api.requests)
    calls_before = len(counter.calls)
    started = time.perf_counter()
    answer = await call()
    elapsed = time.perf_counter() - started
    if counter.calls[calls_before:] != [(ARGS["a"], ARGS["b"])]:
        raise BenchError(f"{label}: the tool ran {counter.calls[calls_before:]!r}, not once")
    if answer != ANSWER:
        raise BenchError(f"{label}: the answer was {answer!r}, not {ANSWER!r}")
    check_requests(api.requests[first_request:], label)
    if api.errors:
        raise BenchError(f"{label}: the scripted API reported {api.errors}")
    return elapsed


def summary(samples: list[float]) -> dict[str, Any]:
    ms = [s * 1000 for s in samples]
    return {
        "median_ms": statistics.median(ms),
        "min_ms": min(ms),
        "max_ms": max(ms),
        "samples_ms": [round(v, 2) for v in ms],
    }


def cli_version() -> str:
    bundled = Path(sdk.__file__).parent / "_bundled" / "claude.version"
    if bundled.is_file():
        return bundled.read_text().strip()
    try:
        from claude_agent_sdk._cli_version import __cli_version__
    except ImportError:
        return "unknown"
    return str(__cli_version__)


def machine_facts() -> dict[str, Any]:
    return {
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "claude_agent_sdk": importlib.metadata.version("claude-agent-sdk"),
        "cli": cli_version(),
        "loadavg_1m_at_start": round(os.getloadavg()[0], 2),
    }


def leftover_children() -> list[str]:
    """Live (non-zombie) processes whose parent is this one: a CLI left running."""
    me = str(os.getpid())
    found: list[str] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[1] == me and fields[0] != "Z":
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append(f"{entry.name}: {cmd[:120]}")
        except (OSError, ValueError, IndexError):
            continue
    return found


async def bench(runs: int) -> dict[str, Any]:
    facts = machine_facts()
    counter = Counter()
    tool = make_function_tool(counter)
    samples: dict[str, list[float]] = {"provider": [], "bare": []}
    async with ScriptedMessagesAPI(responder) as api:
        contenders: dict[str, Callable[[], Awaitable[str]]] = {
            "provider": lambda: run_provider(api, tool),
            "bare": lambda: run_bare(api, counter),
        }
        for label, call in contenders.items():  # untimed warm-up of each
            await one_run(f"{label} (warm-up)", api, counter, call)
        for i in range(runs):
            for label, call in contenders.items():
                samples[label].append(await one_run(f"{label} run {i + 1}", api, counter, call))
    await asyncio.sleep(0.2)  # let the SDK's transports finish reaping
    if sys.platform.startswith("linux"):
        left = leftover_children()
        if left:
            raise BenchError("CLI processes left running:\n" + "\n".join(left))
    facts["loadavg_1m_at_end"] = round(os.getloadavg()[0], 2)
    provider, bare = summary(samples["provider"]), summary(samples["bare"])
    ratio = provider["median_ms"] / bare["median_ms"]
    paired = statistics.median(
        a / b for a, b in zip(samples["provider"], samples["bare"], strict=True)
    )
    return {
        "machine": facts,
        "runs": runs,
        "contenders": {"provider": provider, "bare": bare},
        "ratio_of_medians": ratio,
        "median_paired_ratio": paired,
        "target": TARGET_RATIO,
        "target_met": ratio <= TARGET_RATIO,
    }


def render(figures: dict[str, Any]) -> str:
    m = figures["machine"]
    lines = [
        f"machine: {m['cpu_count']} CPUs, Python {m['python']}, claude-agent-sdk "
        f"{m['claude_agent_sdk']}, CLI {m['cli']}, load {m['loadavg_1m_at_start']} -> "
        f"{m['loadavg_1m_at_end']} ({m['platform']})",
        f"scenario: one add() tool call + text answer; {figures['runs']} runs each, alternating, "
        f"after one warm-up each",
        "",
        f"{'contender':<10} {'median ms':>10} {'min ms':>10} {'max ms':>10}",
    ]
    for label, s in figures["contenders"].items():
        lines.append(
            f"{label:<10} {s['median_ms']:>10.1f} {s['min_ms']:>10.1f} {s['max_ms']:>10.1f}"
        )
    verdict = "met" if figures["target_met"] else "NOT met"
    lines += [
        "",
        f"ratio of medians provider/bare: {figures['ratio_of_medians']:.3f} "
        f"(target <= {figures['target']:.2f}: {verdict})",
        f"median of paired ratios (run i of A / run i of B, less sensitive to drift): "
        f"{figures['median_paired_ratio']:.3f}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=12, help="timed runs per contender (12)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures here")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    try:
        figures = asyncio.run(bench(args.runs))
    except BenchError as exc:
        print(f"bench/overhead.py: FAILED: {exc}", file=sys.stderr)
        return 1
    print(render(figures))
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
