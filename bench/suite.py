"""The benchmark suite: every figure of sf-provider's performance, measured in one run.

Runs offline: the real bundled Claude Code CLI against `sf_provider.testing.ScriptedMessagesAPI`.
Prints one table and writes bench/RESULTS.md. Contenders are alternated; each figure is a median
with min and max, or a ratio of figures taken in this same run.

    python bench/suite.py [--runs N] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import itertools
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict, deque
from collections.abc import Awaitable, Callable
from contextlib import aclosing, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import claude_agent_sdk as sdk
import mcp
from mcp.client.stdio import StdioServerParameters

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import bench_tools  # noqa: E402
import overhead  # noqa: E402

from sf_provider import CallOptions, ClaudeAgentProvider, FunctionTool  # noqa: E402
from sf_provider._bridge import build_mcp_server  # noqa: E402
from sf_provider._envelope import parse_envelope  # noqa: E402
from sf_provider._mapping import PartMapper, ResultCollector  # noqa: E402
from sf_provider._process import WARM_MAX_QUERIES  # noqa: E402
from sf_provider.settings import ProviderSettings  # noqa: E402
from sf_provider.testing import (  # noqa: E402
    Reply,
    ScriptedMessagesAPI,
    offline_env,
    reply,
    text,
    tool_use,
)
from sf_provider.types import TextDeltaPart  # noqa: E402

OVERHEAD_TARGET = 1.03
RESULTS = BENCH_DIR / "RESULTS.md"
MIB = 1024 * 1024

BenchError = overhead.BenchError


# --------------------------------------------------------------------------- figures


@dataclass
class Row:
    """One line of the table: a distribution (ms unless said) or a single computed figure."""

    section: str
    what: str
    median: float
    low: float | None = None
    high: float | None = None
    unit: str = "ms"
    note: str = ""


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    targets: list[tuple[str, bool, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def dist(self, section: str, what: str, samples: list[float], unit: str = "ms", note: str = ""):
        self.rows.append(
            Row(section, what, statistics.median(samples), min(samples), max(samples), unit, note)
        )

    def value(self, section: str, what: str, value: float, unit: str, note: str = "") -> None:
        self.rows.append(Row(section, what, value, unit=unit, note=note))


def ms(seconds: list[float]) -> list[float]:
    return [s * 1000 for s in seconds]


def percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(samples)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


# --------------------------------------------------------------------------- 1. adapter overhead


async def adapter_overhead(report: Report, runs: int) -> None:
    figures = await overhead.bench(runs)
    for label in ("provider", "bare"):
        s = figures["contenders"][label]
        report.dist("1 overhead", f"{label}: one tool call + answer", s["samples_ms"])
    ratio = figures["ratio_of_medians"]
    report.value("1 overhead", "ratio of medians provider/bare", ratio, "x")
    report.value("1 overhead", "median of paired ratios", figures["median_paired_ratio"], "x")
    report.targets.append(
        (
            f"adapter overhead: ratio of medians <= {OVERHEAD_TARGET}",
            ratio <= OVERHEAD_TARGET,
            f"{ratio:.3f}",
        )
    )


# --------------------------------------------------------------------------- 2. tool-call cost


async def tool_call_cost(report: Report, calls: int) -> None:
    direct_tool = bench_tools.make_tools()[0]
    server = build_mcp_server("bench", bench_tools.make_tools(), default_timeout=None)
    workdir = Path(tempfile.mkdtemp(prefix="sf-bench-serve-"))
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "sf_provider.cli", "serve", "--tools", "bench_tools:tools", "--name", "bench"],
        env={**os.environ, "PYTHONPATH": str(BENCH_DIR)},
        cwd=workdir,
    )

    def check(label: str, got: str, i: int) -> None:
        if got != str(i + 1):
            raise BenchError(f"tool call via {label}: add({i}, 1) returned {got!r}")

    samples: dict[str, list[float]] = {"direct": [], "in-memory": [], "stdio": []}
    try:
        async with mcp.Client(server, mode="legacy") as memory, mcp.Client(params) as stdio:

            async def via_direct(i: int) -> str:
                out = await direct_tool.call({"a": i, "b": 1})
                return out.text

            async def via_client(client: mcp.Client, i: int) -> str:
                result = await client.call_tool("add", {"a": i, "b": 1})
                if result.is_error:
                    raise BenchError(f"tool call failed: {result.content}")
                return "".join(getattr(b, "text", "") for b in result.content)

            contenders: dict[str, Callable[[int], Awaitable[str]]] = {
                "direct": via_direct,
                "in-memory": lambda i: via_client(memory, i),
                "stdio": lambda i: via_client(stdio, i),
            }
            for label, call in contenders.items():  # warm-up: imports, first validation, pipes
                for i in range(5):
                    check(label, await call(i), i)
            for i in range(calls):
                for label, call in contenders.items():
                    started = time.perf_counter()
                    got = await call(i)
                    samples[label].append(time.perf_counter() - started)
                    check(label, got, i)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)  # the serve process's working directory
    for label, what in (
        ("direct", "FunctionTool.call (direct)"),
        ("in-memory", "bridge, in-memory mcp.Client"),
        ("stdio", "sf-provider serve, stdio mcp.Client"),
    ):
        us = [s * 1e6 for s in samples[label]]
        report.rows.append(
            Row(
                "2 tool call",
                f"{what}: p50 / p99",
                statistics.median(us),
                percentile(us, 99),
                None,
                "us",
                f"{calls} calls; min {min(us):.0f}, max {max(us):.0f} us",
            )
        )
    direct = statistics.median(samples["direct"])
    report.value(
        "2 tool call",
        "p50 in-memory / direct",
        statistics.median(samples["in-memory"]) / direct,
        "x",
    )
    report.value(
        "2 tool call", "p50 stdio / direct", statistics.median(samples["stdio"]) / direct, "x"
    )


# --------------------------------------------------------------------------- 3 + 4. first delta

TTFT_TEXT = "The quick brown fox jumps over the lazy dog. " * 10  # 450 chars, 8-char deltas
CHUNKED_TEXT = "Streaming answers arrive piece by piece, never held back. " * 100
CHUNK_SIZE = 4


@dataclass
class Timing:
    first_delta: float
    total: float
    deltas: int
    first_chars: int


def bare_options(api: ScriptedMessagesAPI, workdir: Path, stderr: deque[str]) -> Any:
    """A bare SDK query with the provider's flags, env and per-run dirs (see overhead.run_bare)."""
    env = {**offline_env(api.base_url), **overhead.BARE_ENV}
    for var, name in {"HOME": "home", "CLAUDE_CONFIG_DIR": "config", "TMPDIR": "tmp"}.items():
        (workdir / name).mkdir()
        env[var] = str(workdir / name)
    defaults = ProviderSettings()
    return sdk.ClaudeAgentOptions(
        tools=[],
        allowed_tools=[],
        mcp_servers={},
        setting_sources=[],
        max_turns=defaults.max_turns,
        include_partial_messages=True,
        env=env,
        max_buffer_size=defaults.max_buffer_size,
        stderr=stderr.append,
        extra_args=overhead.BARE_FLAGS,
    )


async def bare_stream(api: ScriptedMessagesAPI, expected: str) -> Timing:
    workdir = Path(tempfile.mkdtemp(prefix="sf-bench-ttft-"))
    stderr: deque[str] = deque(maxlen=40)
    options = bare_options(api, workdir, stderr)
    started = time.perf_counter()
    first: float | None = None
    first_chars = deltas = 0
    got: list[str] = []
    result: sdk.ResultMessage | None = None
    try:
        async for message in sdk.query(prompt="Say something.", options=options):
            if isinstance(message, sdk.StreamEvent):
                delta = message.event.get("delta") or {}
                if delta.get("type") == "text_delta" and delta.get("text"):
                    if first is None:
                        first, first_chars = time.perf_counter() - started, len(delta["text"])
                    deltas += 1
                    got.append(delta["text"])
            elif isinstance(message, sdk.ResultMessage):
                result = message
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    total = time.perf_counter() - started
    if result is None or result.is_error or "".join(got) != expected or first is None:
        raise BenchError(f"bare stream: bad run ({result!r}); stderr {list(stderr)}")
    return Timing(first, total, deltas, first_chars)


async def provider_stream(
    api: ScriptedMessagesAPI, expected: str, tools: list[FunctionTool] | None, mode: str
) -> Timing:
    provider = ClaudeAgentProvider(api.settings(warm_processes=0))  # a fresh CLI per query
    started = time.perf_counter()
    first: float | None = None
    first_chars = deltas = 0
    got: list[str] = []
    collector = ResultCollector()
    async with aclosing(provider.stream("Say something.", tools=tools)) as parts:
        async for part in parts:
            collector.add(part)
            if isinstance(part, TextDeltaPart):
                if first is None:
                    first, first_chars = time.perf_counter() - started, len(part.delta)
                deltas += 1
                got.append(part.delta)
    total = time.perf_counter() - started
    result = collector.result()
    if "".join(got) != expected or first is None or result.mode != mode:
        raise BenchError(f"provider stream ({mode}): text or mode differs: {result!r}")
    return Timing(first, total, deltas, first_chars)


async def first_delta(report: Report, runs: int) -> None:
    async with ScriptedMessagesAPI(lambda _r: reply(text(TTFT_TEXT))) as api:
        contenders = {
            "provider.stream": lambda: provider_stream(api, TTFT_TEXT, None, "executor"),
            "bare sdk.query": lambda: bare_stream(api, TTFT_TEXT),
        }
        samples: dict[str, list[Timing]] = {k: [] for k in contenders}
        for call in contenders.values():
            await call()  # warm-up
        for _ in range(runs):
            for label, call in contenders.items():
                samples[label].append(await call())
        if api.errors:
            raise BenchError(f"scripted API: {api.errors}")
    for label, timings in samples.items():
        report.dist(
            "3 first delta",
            f"{label}: time to first text delta",
            ms([t.first_delta for t in timings]),
        )
    for label, timings in samples.items():
        report.dist("3 first delta", f"{label}: total", ms([t.total for t in timings]))
    p = statistics.median(t.first_delta for t in samples["provider.stream"])
    b = statistics.median(t.first_delta for t in samples["bare sdk.query"])
    report.value("3 first delta", "ratio of medians provider/bare (first delta)", p / b, "x")


async def single_turn(report: Report, runs: int) -> None:
    lookup = FunctionTool(
        name="lookup",
        description="Look a word up (no executor: the app runs it).",
        input_schema={
            "type": "object",
            "properties": {"word": {"type": "string"}},
            "required": ["word"],
        },
    )
    chunked = Reply(content=[text(CHUNKED_TEXT)], chunk_size=CHUNK_SIZE)
    async with ScriptedMessagesAPI(lambda _r: chunked) as api:
        await provider_stream(api, CHUNKED_TEXT, [lookup], "single-turn")  # warm-up
        timings = [
            await provider_stream(api, CHUNKED_TEXT, [lookup], "single-turn") for _ in range(runs)
        ]
        if api.errors:
            raise BenchError(f"scripted API: {api.errors}")
    sent = -(-len(CHUNKED_TEXT) // CHUNK_SIZE)
    section = "4 single-turn"
    report.dist(section, "time to first text delta", ms([t.first_delta for t in timings]))
    report.dist(section, "total (stream end)", ms([t.total for t in timings]))
    report.dist(
        section, "time from first delta to end", ms([t.total - t.first_delta for t in timings])
    )
    first = statistics.median(t.first_delta for t in timings)
    total = statistics.median(t.total for t in timings)
    report.value(section, "ratio of medians first delta / total", first / total, "x")
    report.dist(
        section,
        "text deltas received",
        [float(t.deltas) for t in timings],
        unit="parts",
        note=f"{len(CHUNKED_TEXT)} chars sent as {sent} deltas of {CHUNK_SIZE}",
    )
    report.dist(
        section, "chars in the first delta", [float(t.first_chars) for t in timings], "chars"
    )
    held = max(t.first_chars for t in timings)
    report.targets.append(
        (
            "single-turn: nothing held back (first delta = one chunk, before the end)",
            held <= CHUNK_SIZE and all(t.first_delta < t.total for t in timings),
            f"first delta at {first * 1000:.0f} ms of {total * 1000:.0f} ms, at most {held} chars",
        )
    )


# --------------------------------------------------------------------------- 5. throughput


def child_clis() -> list[int]:
    """Pids of this process's children running the Claude Code CLI (`ps --ppid`)."""
    import subprocess

    out = subprocess.run(
        ["ps", "-ww", "--ppid", str(os.getpid()), "-o", "pid=,args="],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    pids = []
    for line in out.splitlines():
        pid, _, args = line.strip().partition(" ")
        if "claude" in args and "ps --ppid" not in args:
            pids.append(int(pid))
    return pids


def status_kb(pid: int, key: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


async def sample_memory(peaks: dict[int, int], totals: list[int], stop: asyncio.Event) -> None:
    """Keep each CLI's VmHWM (peak RSS) and the largest sum of live CLIs' VmRSS."""
    while not stop.is_set():
        pids = await asyncio.to_thread(child_clis)
        total = 0
        for pid in pids:
            hwm = status_kb(pid, "VmHWM")
            if hwm is not None:
                peaks[pid] = max(peaks.get(pid, 0), hwm)
            total += status_kb(pid, "VmRSS") or 0
        totals.append(total)
        with suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.05)


async def throughput(report: Report, rounds: int) -> None:
    counter = overhead.Counter()
    tool = overhead.make_function_tool(counter)
    sizes = (1, 4, 8)
    walls: dict[int, list[float]] = {n: [] for n in sizes}
    cli_peaks: dict[int, list[int]] = {n: [] for n in sizes}
    cli_totals: dict[int, list[int]] = {n: [] for n in sizes}
    py_maxrss: dict[int, int] = {}
    async with ScriptedMessagesAPI(overhead.responder) as api:
        await overhead.run_provider(api, tool)  # warm-up
        for _ in range(rounds):
            for n in sizes:
                peaks: dict[int, int] = {}
                totals: list[int] = []
                stop = asyncio.Event()
                sampler = asyncio.create_task(sample_memory(peaks, totals, stop))
                before = len(counter.calls)
                started = time.perf_counter()
                answers = await asyncio.gather(
                    *(overhead.run_provider(api, tool) for _ in range(n))
                )
                walls[n].append(time.perf_counter() - started)
                stop.set()
                await sampler
                if answers != [overhead.ANSWER] * n or len(counter.calls) - before != n:
                    raise BenchError(f"batch of {n}: answers {answers}, tool calls off")
                cli_peaks[n].extend(peaks.values())
                cli_totals[n].append(max(totals, default=0))
                py_maxrss[n] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        if api.errors:
            raise BenchError(f"scripted API: {api.errors}")
    section = "5 parallel"
    for n in sizes:
        report.dist(section, f"{n} parallel: wall per batch", ms(walls[n]))
        qps = [n / w for w in walls[n]]
        report.dist(section, f"{n} parallel: queries/s", qps, "q/s")
        if cli_peaks[n]:
            report.dist(
                section,
                f"{n} parallel: peak RSS per CLI (VmHWM)",
                [kb / 1024 for kb in cli_peaks[n]],
                "MiB",
                f"{len(cli_peaks[n])} CLI processes sampled",
            )
        else:
            report.notes.append(f"{n} parallel: no CLI process was caught by the sampler")
        report.dist(
            section,
            f"{n} parallel: largest sum of live CLIs' RSS",
            [kb / 1024 for kb in cli_totals[n]],
            "MiB",
        )
        report.value(
            section,
            f"Python maxrss after the {n}-parallel batches",
            py_maxrss[n] / 1024,
            "MiB",
            "getrusage; a lifetime peak, so it only grows",
        )
    one = statistics.median(walls[1])
    for n in sizes[1:]:
        report.value(
            section,
            f"speed-up of {n} parallel over 1 (q/s)",
            n * one / statistics.median(walls[n]),
            "x",
            f"{os.cpu_count()} CPUs",
        )


# --------------------------------------------------------------------------- 7. warm processes


async def warm_processes(report: Report, runs: int) -> None:
    """The same one-tool query on a fresh CLI process vs on a warm one (warm_processes=1)."""
    counter = overhead.Counter()
    tool = overhead.make_function_tool(counter)
    cold_s: list[float] = []
    warm_s: list[float] = []
    # Back-to-back queries after the timed ones, all on the one process (retired at the limit).
    long_run = max(WARM_MAX_QUERIES - runs - 2, 1)
    async with ScriptedMessagesAPI(overhead.responder) as api:
        cold = ClaudeAgentProvider(api.settings(warm_processes=0))
        async with ClaudeAgentProvider(api.settings(warm_processes=1)) as warm:

            async def timed(provider: ClaudeAgentProvider, into: list[float] | None) -> str:
                before = len(counter.calls)
                started = time.perf_counter()
                result = await provider.generate(overhead.PROMPT, tools=[tool])
                if into is not None:
                    into.append(time.perf_counter() - started)
                if result.text != overhead.ANSWER or len(counter.calls) - before != 1:
                    raise BenchError(f"warm bench: answer {result.text!r}, tool calls off")
                return result.session_id or ""

            await timed(cold, None)
            first_session = await timed(warm, None)  # starts the warm process: not timed
            pool = warm._pool
            pid = pool._idle[0].transport.pid if pool and pool._idle else None
            rss_start = status_kb(pid, "VmRSS") if pid else None
            for _ in range(runs):
                await timed(cold, cold_s)
                if await timed(warm, warm_s) != first_session:
                    raise BenchError("warm bench: the warm process was not reused")
            batch_started = time.perf_counter()
            for _ in range(long_run):
                if await timed(warm, None) != first_session:
                    raise BenchError("warm bench: the warm process was replaced")
            batch = time.perf_counter() - batch_started
            rss_end = status_kb(pid, "VmRSS") if pid else None
        if api.errors:
            raise BenchError(f"scripted API: {api.errors}")
    section = "7 warm"
    report.dist(section, "fresh process: one tool call + answer", ms(cold_s))
    report.dist(section, "warm process: one tool call + answer", ms(warm_s))
    speedup = statistics.median(cold_s) / statistics.median(warm_s)
    report.value(section, "speed-up per query (ratio of medians fresh/warm)", speedup, "x")
    report.value(
        section,
        f"warm: {long_run} queries back to back",
        long_run / batch,
        "q/s",
        f"one process; {batch / long_run * 1000:.0f} ms per query",
    )
    if rss_start and rss_end:
        report.value(
            section,
            f"warm CLI RSS after {runs + 1} / {runs + 1 + long_run} queries",
            rss_end / 1024,
            "MiB",
            f"{rss_start / 1024:.0f} MiB after the first query",
        )


# --------------------------------------------------------------------------- 9. agent loop

AGENT_LOOP_TARGET = 5.0
LOOP_STEPS = 4


def loop_model(request: Any) -> Reply:
    """Three sequential tool rounds, then the answer: a 4-step agent run."""
    done = len(request.tool_results())
    if done < LOOP_STEPS - 1:
        return reply(tool_use("step", {"n": done + 1}))
    return reply(text(f"done after {done} steps"))


def loop_agent(provider: ClaudeAgentProvider) -> Any:
    from pydantic_ai import Agent

    from sf_provider.adapters.pydantic_ai import ClaudeAgentModel

    agent = Agent(ClaudeAgentModel(provider))

    @agent.tool_plain
    def step(n: int) -> str:
        """One step of the task."""
        return f"step {n} done"

    return agent


LOOP_TOOL = FunctionTool(
    name="step",
    description="One step of the task.",
    input_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
)


async def plain_loop(provider: ClaudeAgentProvider) -> list[str]:
    """The README's single-turn loop: the app runs the tool; one `generate` per step."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Do the task."}]
    processes = []
    while True:
        result = await provider.generate(messages, tools=[LOOP_TOOL])
        processes.append(str(result.provider_details.get("process")))
        if result.finish_reason != "tool-calls":
            break
        results = [
            {"type": "tool-result", "tool_call_id": c.tool_call_id, "output": f"{c.input} done"}
            for c in result.tool_calls
        ]
        messages += [result.assistant_message(), {"role": "tool", "content": results}]
    if result.text != f"done after {LOOP_STEPS - 1} steps":
        raise BenchError(f"agent loop: answer {result.text!r}")
    return processes


async def agent_loop(report: Report, runs: int) -> None:
    """A 4-step agent run, fresh processes vs warm ones that continue the conversation."""
    section = "9 agent loop"
    async with ScriptedMessagesAPI(loop_model) as api:
        fresh = ClaudeAgentProvider(api.settings(warm_processes=0))
        # Two setups (the Agent's tool and the plain loop's) alternate: one process each.
        async with ClaudeAgentProvider(api.settings(warm_processes=2)) as warm:

            async def pydantic_ai_run(provider: ClaudeAgentProvider) -> float:
                started = time.perf_counter()
                result = await loop_agent(provider).run("Do the task.")
                elapsed = time.perf_counter() - started
                if result.output != f"done after {LOOP_STEPS - 1} steps":
                    raise BenchError(f"agent loop: answer {result.output!r}")
                return elapsed

            async def plain_run(provider: ClaudeAgentProvider, expect: str) -> float:
                started = time.perf_counter()
                processes = await plain_loop(provider)
                elapsed = time.perf_counter() - started
                if processes[1:] != [expect] * (LOOP_STEPS - 1):
                    raise BenchError(f"agent loop: steps ran on {processes}, not {expect}")
                return elapsed

            await pydantic_ai_run(warm)  # start the warm processes: not timed
            await plain_run(warm, "continued")
            samples: dict[str, list[float]] = {k: [] for k in ("pf", "pw", "lf", "lw")}
            for _ in range(runs):
                samples["pf"].append(await pydantic_ai_run(fresh))
                samples["pw"].append(await pydantic_ai_run(warm))
                samples["lf"].append(await plain_run(fresh, "fresh"))
                samples["lw"].append(await plain_run(warm, "continued"))

        if api.errors:
            raise BenchError(f"scripted API: {api.errors}")
    # One process over a 30-step conversation: its RSS after the first step and the last.
    rss: list[int] = []
    async with (
        ScriptedMessagesAPI(lambda r: reply(text(f"answer {len(r.messages)}"))) as api,
        ClaudeAgentProvider(api.settings(warm_processes=1)) as warm,
    ):
        messages: list[dict[str, Any]] = []
        for n in range(30):
            messages.append({"role": "user", "content": f"Step {n}: say something."})
            result = await warm.generate(messages)
            if n and result.provider_details.get("process") != "continued":
                raise BenchError("agent loop: the 30-step conversation was not continued")
            pool = warm._pool
            pid = pool._idle[0].transport.pid if pool and pool._idle else None
            kb = status_kb(pid, "VmRSS") if pid else None
            if kb:
                rss.append(kb)
            messages.append(result.assistant_message())
        if api.errors:
            raise BenchError(f"scripted API: {api.errors}")
    for key, what in (
        ("pf", "pydantic-ai, 4 steps, fresh processes"),
        ("pw", "pydantic-ai, 4 steps, warm (steps 2-4 continued)"),
        ("lf", "plain loop, 4 steps, fresh processes"),
        ("lw", "plain loop, 4 steps, warm (steps 2-4 continued)"),
    ):
        report.dist(section, what, ms(samples[key]))
    pydantic_speedup = statistics.median(samples["pf"]) / statistics.median(samples["pw"])
    plain_speedup = statistics.median(samples["lf"]) / statistics.median(samples["lw"])
    report.value(
        section, "pydantic-ai speed-up (ratio of medians fresh/warm)", pydantic_speedup, "x"
    )
    report.value(section, "plain loop speed-up (ratio of medians fresh/warm)", plain_speedup, "x")
    per_step = statistics.median(samples["pw"]) / LOOP_STEPS * 1000
    report.value(
        section,
        "pydantic-ai warm: per step (the scripted model answers at once)",
        per_step,
        "ms",
        "all of it is overhead: CLI, SDK, adapter",
    )
    if len(rss) >= 2:
        report.value(
            section,
            "one process over a 30-step conversation: RSS after step 30",
            rss[-1] / 1024,
            "MiB",
            f"{rss[0] / 1024:.0f} MiB after step 1",
        )
    report.targets.append(
        (
            f"agent loop: 4-step pydantic-ai run warm >= {AGENT_LOOP_TARGET:g}x faster than fresh",
            pydantic_speedup >= AGENT_LOOP_TARGET,
            f"{pydantic_speedup:.1f}x",
        )
    )


# --------------------------------------------------------------------------- 6. parsing, mapping


def envelope_text(target_bytes: int) -> str:
    calls = []
    size = 0
    i = 0
    while size < target_bytes:
        call = {"toolName": f"tool_{i % 7}", "input": {"id": i, "note": "x" * 200, "ok": True}}
        calls.append(call)
        size += len(json.dumps(call)) + 2
        i += 1
    return json.dumps({"type": "tool-calls", "calls": calls})


def prose_text(target_bytes: int) -> str:
    sentence = 'The report said {"a": 1} in passing, then went on for a while. '
    return sentence * (target_bytes // len(sentence) + 1)


def stream_events(deltas: int, chunk: str) -> list[sdk.StreamEvent]:
    def ev(event: dict[str, Any]) -> sdk.StreamEvent:
        return sdk.StreamEvent(uuid="u", session_id="s", event=event)

    events = [
        ev({"type": "message_start", "message": {"id": "msg_bench"}}),
        ev({"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}),
    ]
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta"}}
    for _ in range(deltas):
        events.append(ev({**delta, "delta": {"type": "text_delta", "text": chunk}}))
    events.append(ev({"type": "content_block_stop", "index": 0}))
    events.append(ev({"type": "message_delta", "delta": {"stop_reason": "end_turn"}}))
    return events


def map_events(events: list[sdk.StreamEvent], single_turn: bool) -> str:
    mapper = PartMapper("sf", provider_executed=not single_turn, hold_envelopes=single_turn)
    collector = ResultCollector()
    for event in events:
        for part in mapper.map(event):
            collector.add(part)
    for part in mapper.flush():
        collector.add(part)
    return collector.result().text


def parsing(report: Report, runs: int) -> None:
    envelope = envelope_text(4 * MIB)
    prose = prose_text(4 * MIB)
    chunk = "Streaming text, one delta at a time. "  # 37 chars
    n_deltas = 100_000
    events = stream_events(n_deltas, chunk)
    expected = chunk * n_deltas

    def check_envelope() -> None:
        parsed = parse_envelope(envelope)
        if parsed is None or len(parsed.calls) < 1000:
            raise BenchError("the large envelope did not parse")

    def check_prose() -> None:
        if parse_envelope(prose) is not None:
            raise BenchError("prose parsed as an envelope")

    def check_map(single: bool) -> Callable[[], None]:
        def run() -> None:
            if map_events(events, single) != expected:
                raise BenchError("the mapped text differs from the deltas")

        return run

    work: dict[str, tuple[Callable[[], None], int]] = {
        "parse_envelope, JSON envelope": (check_envelope, len(envelope.encode())),
        "parse_envelope, prose (rejected)": (check_prose, len(prose.encode())),
        "PartMapper+ResultCollector, executor mode": (check_map(False), len(expected.encode())),
        "PartMapper+ResultCollector, single-turn": (check_map(True), len(expected.encode())),
    }
    times: dict[str, list[float]] = {k: [] for k in work}
    for fn, _ in work.values():
        fn()  # warm-up
    for _ in range(runs):
        for label, (fn, _) in work.items():
            started = time.perf_counter()
            fn()
            times[label].append(time.perf_counter() - started)
    for label, (_, size) in work.items():
        rates = [size / MIB / t for t in times[label]]
        note = f"{size / MIB:.1f} MiB"
        if label.startswith("PartMapper"):
            note += f", {n_deltas} StreamEvent deltas"
            per = [t / n_deltas * 1e6 for t in times[label]]
            note += f", {statistics.median(per):.1f} us per delta"
        report.dist("6 parsing", label, rates, "MiB/s", note)


# --------------------------------------------------------------------------- 10. long replies

LONG_REPLY_TARGET = 2.0  # a reply held as a possible envelope vs the same length of plain text
LONG_REPLY_CHARS = 400_000


def long_json_reply(chars: int) -> str:
    """A JSON answer (not an envelope) of about `chars` characters: held to the end."""
    row = {"id": 0, "name": "Widget", "note": "y" * 60}
    rows = [dict(row, id=i) for i in range(chars // (len(json.dumps(row)) + 2) + 1)]
    return json.dumps({"rows": rows})


async def long_replies(report: Report, runs: int) -> None:
    """A ~400 K-char single-turn reply starting with `{` (held while it may be an envelope)
    next to plain text of the same length, through the real CLI, alternated. Each query takes
    seconds (~50,000 deltas through the CLI), so the suite runs a third of `runs` here."""
    held = long_json_reply(LONG_REPLY_CHARS)
    plain = prose_text(len(held))[: len(held)]
    lookup = FunctionTool(name="lookup", description="Look a word up (the app runs it).")
    # 8-character deltas, as the scripted API's default: ~50,000 deltas per reply.
    async with (
        ScriptedMessagesAPI(lambda _r: Reply(content=[text(held)])) as held_api,
        ScriptedMessagesAPI(lambda _r: Reply(content=[text(plain)])) as plain_api,
    ):
        contenders = {
            "starts with {": (held_api, held),
            "plain text": (plain_api, plain),
        }
        wall: dict[str, list[float]] = {k: [] for k in contenders}
        cpu: dict[str, list[float]] = {k: [] for k in contenders}
        for api, expected in contenders.values():  # warm-up
            await provider_stream(api, expected, [lookup], "single-turn")
        for _ in range(runs):
            for label, (api, expected) in contenders.items():
                cpu_started = time.process_time()
                timing = await provider_stream(api, expected, [lookup], "single-turn")
                cpu[label].append(time.process_time() - cpu_started)
                wall[label].append(timing.total)
        if held_api.errors or plain_api.errors:
            raise BenchError(f"scripted API: {held_api.errors + plain_api.errors}")
    section = "10 long reply"
    note = f"{len(held):,} chars, single-turn, fresh CLI"
    for label in contenders:
        report.dist(section, f"{label}: total", ms(wall[label]), note=note)
        report.dist(
            section,
            f"{label}: Python CPU (this process)",
            ms(cpu[label]),
            note="time.process_time; the CLI's CPU is not in it",
        )
    ratio = statistics.median(wall["starts with {"]) / statistics.median(wall["plain text"])
    cpu_ratio = statistics.median(cpu["starts with {"]) / statistics.median(cpu["plain text"])
    report.value(section, "ratio of medians {/plain (total)", ratio, "x")
    report.value(section, "ratio of medians {/plain (Python CPU)", cpu_ratio, "x")
    for what, value in (("total", ratio), ("Python CPU", cpu_ratio)):
        report.targets.append(
            (
                f"a {len(held) // 1000} K-char reply starting with {{ within "
                f"{LONG_REPLY_TARGET:g}x of plain text ({what})",
                value <= LONG_REPLY_TARGET,
                f"{value:.2f}x",
            )
        )


# --------------------------------------------------------------------------- 8. import time

IMPORT_TARGET = 0.05  # what `import sf_provider` may add, as a share of the SDK's own import
_IMPORT_PROBE = """
import time
t0 = time.perf_counter()
import claude_agent_sdk
t1 = time.perf_counter()
from sf_provider import ClaudeAgentProvider, FunctionTool
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


def import_time(report: Report, runs: int) -> None:
    """`import claude_agent_sdk`, then what an application imports from sf_provider (the package
    loads its modules on first use, so a bare `import sf_provider` would measure nothing), timed
    in fresh interpreters. Like an installed package, with its bytecode compiled: the first run
    writes it (even under PYTHONDONTWRITEBYTECODE) and is not counted."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    sdk_s: list[float] = []
    ours_s: list[float] = []
    for run in range(runs + 1):
        out = subprocess.run(
            [sys.executable, "-c", _IMPORT_PROBE],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        ).stdout.split()
        if run == 0:
            continue
        sdk_s.append(float(out[0]))
        ours_s.append(float(out[1]))
    section = "8 import"
    report.dist(section, "import claude_agent_sdk (fresh interpreter)", ms(sdk_s))
    report.dist(
        section, "then from sf_provider import ClaudeAgentProvider, FunctionTool", ms(ours_s)
    )
    share = statistics.median(ours_s) / statistics.median(sdk_s)
    report.value(section, "sf_provider's share over the SDK's import", share, "x")
    report.targets.append(
        (
            f"importing ClaudeAgentProvider and FunctionTool adds <= {IMPORT_TARGET:.0%} to "
            "import claude_agent_sdk",
            share <= IMPORT_TARGET,
            f"{share:.1%}",
        )
    )


# --------------------------------------------------------------------------- 11. gateway

GATEWAY_LEVELS = (1, 4, 8)  # concurrent clients
#: The doors driven at each level: Chat Completions; the Responses API sending the whole input
#: each step (stateless), and continuing with `previous_response_id` (chained).
GATEWAY_DOORS = ("chat completions", "responses, stateless", "responses, chained")
GATEWAY_SLOTS = 8  # --max-concurrency and --warm-processes of the replica: docs/deploy.md's command
GATEWAY_PER_ROUND = 24  # conversations per level per round (2 HTTP requests each)
GATEWAY_KEY = "sk-bench-gateway"
GATEWAY_MODEL = "claude-sonnet-5-5"
RESPONSES_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
GATEWAY_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


#: The hostile neighbour (issue 31): a tool whose pattern makes a backtracking engine take
#: ~37 s on the call the scripted model makes (29 "a"s and a "!"), a schema at the size limits
#: (checked in ~0.5 s), and one past them (refused).
HOSTILE_PATTERN_TOOL = {
    "type": "function",
    "function": {
        "name": "match",
        "description": "Match a text.",
        "parameters": {
            "type": "object",
            "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}},
        },
    },
}


def hostile_schema_tool(properties: int) -> dict[str, Any]:
    """A function tool whose schema lists `properties` patterned string properties."""
    schema = {"type": "object", "properties": {
        f"p{i}": {"type": "string", "pattern": "^[a-z]+$"} for i in range(properties)
    }}  # fmt: skip
    return {"type": "function", "function": {"name": "big", "parameters": schema}}


def gateway_model(request: Any) -> Reply:
    """The scripted model behind the gateway: calls get_weather for the conversation's city,
    then answers from the result, so every answer names its own conversation. The hostile
    neighbour's `match` tool gets the call that backtracks; its big schema, a text."""
    import re

    names = request.tool_names
    if any(name.endswith("__match") for name in names):
        return reply(tool_use("match", {"s": "a" * 29 + "!"}))
    if any(name.endswith("__big") for name in names):
        return reply(text("checked"))
    found = re.search(r"Weather in (City\d+)\?", json.dumps(request.messages))
    city = found.group(1) if found else "nowhere"
    results = request.tool_result_texts()
    if not results:
        return reply(tool_use("get_weather", {"city": city}))
    return reply(text(f"{city}: {results[-1].splitlines()[0]}"))  # the CLI appends a reminder


def process_tree(root: int) -> list[int]:
    """`root` and its live descendants, from the parent pids in /proc/*/stat."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


@dataclass
class ReplicaMemory:
    """VmRSS of a replica: the gateway process and its descendants (the CLI processes)."""

    gateway_kb: int = 0
    children_kb: int = 0
    children: int = 0
    pss_kb: int = 0  # the whole tree's proportional set size; read only when asked

    @property
    def total_mib(self) -> float:
        return (self.gateway_kb + self.children_kb) / 1024

    def describe(self) -> str:
        return (
            f"gateway {self.gateway_kb / 1024:.0f} MiB + {self.children} CLI processes "
            f"{self.children_kb / 1024:.0f} MiB"
        )


def pss_kb(pid: int) -> int:
    """A process's proportional set size (/proc/<pid>/smaps_rollup): each shared page split
    between the processes that map it, so PSS adds up across a process tree and RSS does not."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return 0
    return 0


def replica_memory(root: int, seen: set[int] | None = None, pss: bool = False) -> ReplicaMemory:
    tree = process_tree(root)
    if seen is not None:
        seen.update(tree[1:])
    kids = [status_kb(pid, "VmRSS") for pid in tree[1:]]
    return ReplicaMemory(
        gateway_kb=status_kb(root, "VmRSS") or 0,
        children_kb=sum(kb or 0 for kb in kids),
        children=sum(kb is not None for kb in kids),
        pss_kb=sum(pss_kb(pid) for pid in tree) if pss else 0,
    )


async def sample_replica(root: int, peak: list[ReplicaMemory], seen: set[int], stop: asyncio.Event):
    """Keep the largest replica RSS (gateway + CLIs) seen every ~100 ms until `stop`."""
    while not stop.is_set():
        now = await asyncio.to_thread(replica_memory, root, seen)
        if now.total_mib > peak[0].total_mib:
            peak[0] = now
        with suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.1)


async def gateway_bench(report: Report, rounds: int) -> None:
    """`sf-provider gateway` as a subprocess (one replica, as docs/deploy.md runs it), driven by
    the official `openai` client: each conversation is one tool-call step and one answer."""
    import signal
    import socket
    import subprocess

    import httpx
    import openai

    workdir = Path(tempfile.mkdtemp(prefix="sf-bench-gateway-"))
    log_path = workdir / "gateway.log"
    with socket.socket() as probe:  # a free loopback port for the replica
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}"
    conversations = iter(range(1_000_000))
    runs = [(door, n) for door in GATEWAY_DOORS for n in GATEWAY_LEVELS]
    latencies: dict[tuple[str, int], list[float]] = {r: [] for r in runs}
    steps: dict[tuple[str, int], tuple[list[float], list[float]]] = {r: ([], []) for r in runs}
    walls: dict[tuple[str, int], list[float]] = {r: [] for r in runs}
    peaks: dict[int, list[ReplicaMemory]] = {n: [ReplicaMemory()] for n in GATEWAY_LEVELS}
    # 429s per run (a retry follows at once; the latency counts from the first attempt)
    refused: dict[tuple[str, int], int] = dict.fromkeys(runs, 0)
    # How the warm pool served each step (the `sf-provider-process` header: fresh, warm or
    # continued), per run: step 1's and step 2's. Counted from the first timed round.
    served: dict[tuple[str, int], tuple[Counter[str], Counter[str]]] = defaultdict(
        lambda: (Counter(), Counter())
    )
    current = [runs[-1]]  # the door and level running
    seen: set[int] = set()
    # The hostile neighbour's requests by kind and status, and the normal latencies without it
    # (False) and beside it (True).
    hostile: dict[str, Counter[int]] = {kind: Counter() for kind in HOSTILE_KINDS}
    quiet_or_hostile: dict[bool, list[float]] = {False: [], True: []}

    def log_tail() -> str:
        with suppress(OSError):
            return log_path.read_text()[-2000:]
        return ""

    def parsed(raw: Any, step: int) -> Any:
        # How the replica's warm pool served the request (fresh, warm or continued).
        served[current[0]][step][raw.headers.get("sf-provider-process", "?")] += 1
        return raw.parse()

    async def create(client: openai.AsyncOpenAI, messages: list[Any], step: int) -> Any:
        while True:
            try:
                return parsed(
                    await client.chat.completions.with_raw_response.create(
                        model=GATEWAY_MODEL, messages=messages, tools=[GATEWAY_TOOL]
                    ),
                    step,
                )
            except openai.RateLimitError:
                refused[current[0]] += 1
                await asyncio.sleep(0.01)

    async def respond(client: openai.AsyncOpenAI, step: int, **request: Any) -> Any:
        while True:
            try:
                return parsed(
                    await client.responses.with_raw_response.create(
                        model=GATEWAY_MODEL, tools=[RESPONSES_TOOL], **request
                    ),
                    step,
                )
            except openai.RateLimitError:
                refused[current[0]] += 1
                await asyncio.sleep(0.01)

    async def responses_conversation(
        client: openai.AsyncOpenAI, i: int, chained: bool
    ) -> tuple[float, float]:
        city, weather = f"City{i}", f"{i % 30} C, sunny"
        items: list[Any] = [{"role": "user", "content": f"Weather in {city}?"}]
        started = time.perf_counter()
        first = await respond(client, 0, instructions="Be brief.", input=items)
        first_s = time.perf_counter() - started
        calls = [item for item in first.output if item.type == "function_call"]
        if len(calls) != 1 or json.loads(calls[0].arguments) != {"city": city}:
            raise BenchError(f"gateway responses, {city} step 1: not the one call: {first!r}")
        result = {"type": "function_call_output", "call_id": calls[0].call_id, "output": weather}
        started = time.perf_counter()
        if chained:  # instructions again: the Responses API does not carry them over
            second = await respond(
                client, 1, instructions="Be brief.", previous_response_id=first.id, input=[result]
            )
        else:
            items += [item.model_dump(exclude_none=True) for item in first.output]
            second = await respond(client, 1, instructions="Be brief.", input=[*items, result])
        second_s = time.perf_counter() - started
        if second.status != "completed" or second.output_text != f"{city}: {weather}":
            raise BenchError(f"gateway responses, {city} step 2: {second.output_text!r}")
        return first_s, second_s

    async def conversation(client: openai.AsyncOpenAI, i: int) -> tuple[float, float]:
        door = current[0][0]
        if door != "chat completions":
            return await responses_conversation(client, i, chained=door.endswith("chained"))
        city, weather = f"City{i}", f"{i % 30} C, sunny"
        messages: list[Any] = [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": f"Weather in {city}?"},
        ]
        started = time.perf_counter()
        first = await create(client, messages, 0)
        first_s = time.perf_counter() - started
        calls = first.choices[0].message.tool_calls or []
        if (
            first.choices[0].finish_reason != "tool_calls"
            or len(calls) != 1
            or calls[0].function.name != "get_weather"
            or json.loads(calls[0].function.arguments) != {"city": city}
        ):
            raise BenchError(f"gateway, {city} step 1: not the one tool call: {first!r}")
        messages.append(first.choices[0].message.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": calls[0].id, "content": weather})
        started = time.perf_counter()
        second = await create(client, messages, 1)
        second_s = time.perf_counter() - started
        answer = second.choices[0].message.content
        if second.choices[0].finish_reason != "stop" or answer != f"{city}: {weather}":
            raise BenchError(f"gateway, {city} step 2: answer {answer!r}")
        return first_s, second_s

    async def level(
        clients: list[openai.AsyncOpenAI], count: int
    ) -> tuple[float, list[tuple[float, float]]]:
        todo = iter([next(conversations) for _ in range(count)])
        done: list[tuple[float, float]] = []

        async def worker(client: openai.AsyncOpenAI) -> None:
            for i in todo:  # shared: each client takes the next conversation when free
                done.append(await conversation(client, i))

        started = time.perf_counter()
        await asyncio.gather(*(worker(c) for c in clients))
        return time.perf_counter() - started, done

    async with ScriptedMessagesAPI(gateway_model) as api:
        with log_path.open("wb") as log:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "sf_provider.cli", "gateway", "--port", str(port),
                "--api-key", GATEWAY_KEY, "--max-concurrency", str(GATEWAY_SLOTS),
                "--warm-processes", str(GATEWAY_SLOTS),
                env={**os.environ, **offline_env(api.base_url)},
                cwd=workdir, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        clients = [
            openai.AsyncOpenAI(
                base_url=f"{base_url}/v1", api_key=GATEWAY_KEY, max_retries=0, timeout=120
            )
            for _ in range(max(GATEWAY_LEVELS))
        ]
        try:
            started = time.perf_counter()
            async with httpx.AsyncClient() as http:
                while True:
                    if proc.returncode is not None:
                        raise BenchError(f"the gateway exited ({proc.returncode}): {log_tail()}")
                    with suppress(httpx.HTTPError):
                        if (await http.get(f"{base_url}/healthz")).status_code == 200:
                            break
                    if time.perf_counter() - started > 60:
                        raise BenchError(f"the gateway did not start in 60 s: {log_tail()}")
                    await asyncio.sleep(0.1)
            startup = time.perf_counter() - started
            await asyncio.sleep(0.5)
            alone = replica_memory(proc.pid, seen)
            # Warm-up, untimed: two conversations per client at the top level, which starts the
            # replica's warm processes; then the replica at rest.
            await level(clients, 2 * max(GATEWAY_LEVELS))
            await asyncio.sleep(1.0)
            idle = replica_memory(proc.pid, seen, pss=True)
            served.clear()
            for _ in range(rounds):
                for door, n in runs:
                    current[0] = (door, n)
                    stop = asyncio.Event()
                    sampler = asyncio.create_task(sample_replica(proc.pid, peaks[n], seen, stop))
                    try:
                        wall, done = await level(clients[:n], GATEWAY_PER_ROUND)
                    finally:
                        stop.set()
                        await sampler
                    walls[door, n].append(wall)
                    for first_s, second_s in done:
                        latencies[door, n].extend((first_s, second_s))
                        steps[door, n][0].append(first_s)
                        steps[door, n][1].append(second_s)
            timed_served = {r: (Counter(served[r][0]), Counter(served[r][1])) for r in runs}
            # The hostile neighbour: 4 clients' conversations alone, then beside one client
            # sending the backtracking-pattern and big-schema requests in a loop, alternated.
            current[0] = ("chat completions", HOSTILE_LEVEL)
            for _ in range(rounds):
                for beside in (False, True):
                    stop = asyncio.Event()
                    neighbour = asyncio.create_task(
                        hostile_client(base_url, stop, hostile) if beside else stop.wait()
                    )
                    try:
                        _, done = await level(clients[:HOSTILE_LEVEL], GATEWAY_PER_ROUND)
                    finally:
                        stop.set()
                        await neighbour
                    quiet_or_hostile[beside].extend(s for pair in done for s in pair)
            await asyncio.sleep(0.3)
            after = replica_memory(proc.pid, seen, pss=True)
        finally:
            for client in clients:
                await client.close()
            if proc.returncode is None:  # SIGTERM: the replica's own shutdown stops every CLI
                proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 40)
            except TimeoutError:
                proc.kill()
                await proc.wait()
                raise BenchError(f"the gateway did not stop on SIGTERM: {log_tail()}") from None
            left = [pid for pid in seen if "claude" in _cmdline(pid)]
            for pid in left:
                with suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            shutil.rmtree(workdir, ignore_errors=True)
        if left:
            raise BenchError(f"the gateway left CLI processes running: {left}")
        served = len(api.requests)
        if api.errors:
            raise BenchError(f"scripted API: {api.errors}")
    total_conversations = next(conversations)
    # Each hostile request the gateway accepted ran one query (single-turn: one API request).
    served -= sum(hostile[kind][200] for kind in HOSTILE_KINDS)
    if served != 2 * total_conversations:
        raise BenchError(
            f"gateway: {served} model requests for {total_conversations} two-step conversations"
        )
    section = "11 gateway"
    report.value(section, "replica start: `sf-provider gateway` to /healthz 200", startup * 1000,
                 "ms", f"gateway process alone: {alone.gateway_kb / 1024:.0f} MiB RSS")  # fmt: skip
    for door, n in runs:
        count = len(latencies[door, n])
        rate = count / sum(walls[door, n])
        who = f"{door}, {n} client{'s' if n > 1 else ''}"
        report.value(
            section,
            f"{who}: requests/s",
            rate,
            "req/s",
            f"{count} requests over {rounds} rounds; "
            f"{min(GATEWAY_PER_ROUND * 2 / w for w in walls[door, n]):.1f}-"
            f"{max(GATEWAY_PER_ROUND * 2 / w for w in walls[door, n]):.1f} per round; "
            f"{refused[door, n]} answered 429",
        )
        lat = ms(latencies[door, n])
        report.rows.append(
            Row(
                section,
                f"{who}: latency p50 / p99",
                statistics.median(lat),
                percentile(lat, 99),
                None,
                "ms",
                f"step 1 (tool call) p50 {statistics.median(ms(steps[door, n][0])):.0f}, "
                f"step 2 (answer) p50 {statistics.median(ms(steps[door, n][1])):.0f} ms; "
                f"max {max(lat):.0f}; processes: "
                + "; ".join(
                    f"step {i + 1} "
                    + ", ".join(f"{k} {v}" for k, v in sorted(timed_served[door, n][i].items()))
                    for i in (0, 1)
                ),
            )
        )
    report.value(section, "replica RSS at idle after warm-up", idle.total_mib, "MiB",
                 idle.describe())  # fmt: skip
    for n in GATEWAY_LEVELS:
        peak = peaks[n][0]
        report.value(section, f"replica RSS, peak under {n} client{'s' if n > 1 else ''}",
                     peak.total_mib, "MiB", peak.describe())  # fmt: skip
    report.value(section, "replica RSS at the end (idle)", after.total_mib, "MiB",
                 f"{after.describe()}; {len(seen)} CLI processes seen in the run")  # fmt: skip
    for what, figures in (("at idle after warm-up", idle), ("at the end (idle)", after)):
        report.value(
            section,
            f"replica PSS {what}",
            figures.pss_kb / 1024,
            "MiB",
            "shared pages split between the processes sharing them: what the replica adds",
        )
    quiet, beside = ms(quiet_or_hostile[False]), ms(quiet_or_hostile[True])
    ratio = percentile(beside, 99) / percentile(quiet, 99)
    answered = "; ".join(
        f"{kind}: " + ", ".join(f"{n} x {status}" for status, n in sorted(hostile[kind].items()))
        for kind in HOSTILE_KINDS
    )
    for label, lat in (("alone", quiet), ("beside a hostile neighbour", beside)):
        report.rows.append(
            Row(
                section,
                f"hostile neighbour: {HOSTILE_LEVEL} clients {label}: latency p50 / p99",
                statistics.median(lat),
                percentile(lat, 99),
                None,
                "ms",
                f"{len(lat)} requests; max {max(lat):.0f}"
                + (f"; the neighbour's requests: {answered}" if label != "alone" else ""),
            )
        )
    report.targets.append(
        ("hostile neighbour: p99 within 1.5x of p99 alone", ratio <= 1.5, f"{ratio:.2f}x")
    )
    if any(refused.values()):
        report.notes.append(
            f"gateway: {sum(refused.values())} requests were answered 429 (all {GATEWAY_SLOTS} "
            f"slots busy) and retried at once; their latency counts from the first attempt"
        )


#: The hostile neighbour's requests, sent in turn; the normal clients beside it.
HOSTILE_KINDS = ("backtracking pattern", "schema at the limits", "schema past the limits")
HOSTILE_LEVEL = 4


async def hostile_client(base_url: str, stop: asyncio.Event, answers: dict[str, Any]) -> None:
    """One client sending `HOSTILE_KINDS` in turn until `stop`, counting the answers."""
    import httpx

    def body(tool: dict[str, Any]) -> bytes:
        messages = [{"role": "user", "content": "Use the tool."}]
        return json.dumps({"model": GATEWAY_MODEL, "messages": messages, "tools": [tool]}).encode()

    bodies = dict(zip(HOSTILE_KINDS, (
        body(HOSTILE_PATTERN_TOOL), body(hostile_schema_tool(1000)), body(hostile_schema_tool(5000))
    ), strict=True))  # fmt: skip
    headers = {"authorization": f"Bearer {GATEWAY_KEY}", "content-type": "application/json"}
    async with httpx.AsyncClient(base_url=base_url, timeout=300) as http:
        for kind in itertools.cycle(HOSTILE_KINDS):
            if stop.is_set():
                return
            answer = await http.post("/v1/chat/completions", content=bodies[kind], headers=headers)
            answers[kind][answer.status_code] += 1
            if answer.status_code == 429:
                await asyncio.sleep(0.01)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


# --------------------------------------------------------------------------- 12. tracing

#: The contenders: tracing absent (as without opentelemetry-api), the API with no tracer
#: provider configured (the default), and the SDK recording into memory.
TRACING_MODES = ("off", "not configured", "enabled")
#: The spans one query of overhead.py's scenario must make when tracing is enabled.
TRACING_SPANS = {"chat", "execute_tool add", "tools/call add"}
#: The not-configured path's share of a warm query's Python CPU must stay under this.
TRACING_IDLE_TARGET = 0.005
TRACING_WORKER = """
import asyncio, sys
sys.path.insert(0, {bench!r})
import suite
asyncio.run(suite.tracing_worker({mode!r}))
"""


async def tracing_worker(mode: str) -> None:
    """One contender of section 12, in a process of its own (a tracer provider is global and set
    once per process): after an untimed query that starts the warm process, each `run` line on
    stdin is answered with one warm query's figures as a JSON line; any other line ends it."""
    from sf_provider import _tracing

    exporter = None
    if mode == "off":  # as if opentelemetry-api were not installed
        _tracing._looked, _tracing._api = True, None
    elif mode == "enabled":
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        configured = TracerProvider()
        configured.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(configured)
    counter = overhead.Counter()
    tool = overhead.make_function_tool(counter)
    async with (
        ScriptedMessagesAPI(overhead.responder) as api,
        ClaudeAgentProvider(api.settings(warm_processes=1)) as provider,
    ):

        async def one() -> dict[str, Any]:
            before = len(counter.calls)
            wall, cpu = time.perf_counter(), time.process_time()
            result = await provider.generate(overhead.PROMPT, tools=[tool])
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            spans = sorted(s.name for s in exporter.get_finished_spans()) if exporter else []
            if exporter is not None:
                exporter.clear()
            ok = result.text == overhead.ANSWER and len(counter.calls) - before == 1
            return {"wall": wall, "cpu": cpu, "ok": ok, "session": result.session_id,
                    "spans": spans}  # fmt: skip

        print(json.dumps(await one()), flush=True)
        loop = asyncio.get_running_loop()
        while (await loop.run_in_executor(None, sys.stdin.readline)).strip() == "run":
            print(json.dumps(await one()), flush=True)
        if api.errors:
            raise BenchError(f"tracing worker {mode}: scripted API: {api.errors}")


async def _worker_answer(proc: asyncio.subprocess.Process, mode: str) -> dict[str, Any]:
    assert proc.stdout is not None
    while line := await proc.stdout.readline():
        if line.startswith(b"{"):
            answer: dict[str, Any] = json.loads(line)
            return answer
    raise BenchError(f"tracing bench: the {mode!r} worker ended (exit code {await proc.wait()})")


def tracing_idle_cost(rounds: int) -> dict[str, float]:
    """Microseconds the tracing calls of one query take with no tracer provider configured
    (this process configures none): start, finish and end; per CLI message; per tool call."""
    from sf_provider._tracing import NO_QUERY, start_query, tool_span
    from sf_provider.gates import CallContext
    from sf_provider.provider import _traced
    from sf_provider.types import FinishPart

    tool = overhead.make_function_tool(overhead.Counter())
    settings = ProviderSettings(env=offline_env("http://127.0.0.1:9"))  # never started
    plan = ClaudeAgentProvider(settings)._prepare("x", [tool], CallOptions())
    finish, collector, context = FinishPart(finish_reason="stop"), ResultCollector(), CallContext()
    query = start_query(_traced(plan))
    if query is not NO_QUERY:
        raise BenchError("tracing bench: this process has a tracer provider configured")
    figures: dict[str, float] = {}
    started = time.perf_counter()
    for _ in range(rounds):
        query = start_query(_traced(plan))
        query.served_by("warm")
        query.finish(finish, collector)
        query.end()
    figures["query"] = (time.perf_counter() - started) / rounds * 1e6
    started = time.perf_counter()
    for _ in range(rounds):
        with query.current():
            pass
    figures["message"] = (time.perf_counter() - started) / rounds * 1e6
    started = time.perf_counter()
    for _ in range(rounds):
        with tool_span(tool, context, overhead.ARGS) as span:
            span.failed("timeout", "")
    figures["tool"] = (time.perf_counter() - started) / rounds * 1e6
    return figures


async def cli_messages_per_query() -> int:
    """How many CLI messages one query of the scenario reads (the query loop takes the span as
    the current one around each)."""
    from sf_provider import provider as provider_module

    counter = overhead.Counter()
    tool = overhead.make_function_tool(counter)
    deadlines = provider_module._Deadlines
    original = deadlines.next
    seen = 0

    async def counting(self: Any, messages: Any) -> Any:
        nonlocal seen
        seen += 1
        return await original(self, messages)

    deadlines.next = counting  # type: ignore[method-assign]
    try:
        async with ScriptedMessagesAPI(overhead.responder) as api:
            provider = ClaudeAgentProvider(api.settings(warm_processes=0))
            await provider.generate(overhead.PROMPT, tools=[tool])
    finally:
        deadlines.next = original  # type: ignore[method-assign]
    return seen


async def tracing_cost(report: Report, queries: int) -> None:
    """overhead.py's one-tool query on a warm process, with tracing off, not configured and
    enabled: one worker process each, alternated query by query."""
    workers: dict[str, asyncio.subprocess.Process] = {}
    samples: dict[str, dict[str, list[float]]] = {m: {"wall": [], "cpu": []} for m in TRACING_MODES}
    spans: list[list[str]] = []
    try:
        for mode in TRACING_MODES:
            workers[mode] = await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                TRACING_WORKER.format(bench=str(BENCH_DIR), mode=mode),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
        sessions = {m: (await _worker_answer(w, m))["session"] for m, w in workers.items()}
        for i in range(queries):
            shift = i % len(TRACING_MODES)  # each contender goes first in turn
            for mode in TRACING_MODES[shift:] + TRACING_MODES[:shift]:
                proc = workers[mode]
                assert proc.stdin is not None
                proc.stdin.write(b"run\n")
                await proc.stdin.drain()
                answer = await _worker_answer(proc, mode)
                if not answer["ok"] or answer["session"] != sessions[mode]:
                    raise BenchError(f"tracing bench ({mode}): wrong answer, or not warm")
                if mode == "enabled":
                    if not set(answer["spans"]) >= TRACING_SPANS:
                        raise BenchError(f"tracing bench: spans of one query {answer['spans']}")
                    spans.append(answer["spans"])
                elif answer["spans"]:
                    raise BenchError(f"tracing bench ({mode}): spans recorded {answer['spans']}")
                samples[mode]["wall"].append(answer["wall"])
                samples[mode]["cpu"].append(answer["cpu"])
    finally:
        for proc in workers.values():
            if proc.stdin is not None and proc.returncode is None:
                proc.stdin.write(b"quit\n")
                with suppress(ConnectionError):
                    await proc.stdin.drain()
        for mode, proc in workers.items():
            try:
                code = await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
                code = await proc.wait()
            if code != 0:
                raise BenchError(f"tracing bench: the {mode!r} worker exited with {code}")
    idle = await asyncio.to_thread(tracing_idle_cost, 100_000)
    messages = await cli_messages_per_query()
    section = "12 tracing"
    for mode in TRACING_MODES:
        report.dist(section, f"{mode}: warm query, one tool call", ms(samples[mode]["wall"]))
        report.dist(section, f"{mode}: Python CPU per query", ms(samples[mode]["cpu"]),
                    note="the worker process: query loop, SDK, bridge, scripted API")  # fmt: skip
    base = {k: statistics.median(v) for k, v in samples["off"].items()}
    for mode in TRACING_MODES[1:]:
        for kind, what in (("wall", "wall"), ("cpu", "Python CPU")):
            ratio = statistics.median(samples[mode][kind]) / base[kind]
            report.value(section, f"ratio of medians {mode}/off ({what})", ratio, "x")
    report.value(section, "spans per query when enabled", statistics.median(map(len, spans)),
                 "spans", ", ".join(sorted(set(spans[0]))))  # fmt: skip
    per_query = idle["query"] + messages * idle["message"] + idle["tool"]
    report.value(
        section,
        "not configured: tracing calls per query",
        per_query,
        "us",
        f"start/finish/end {idle['query']:.2f} us + {messages} CLI messages x "
        f"{idle['message']:.3f} us + one tool call {idle['tool']:.2f} us (100,000 rounds each)",
    )
    share = per_query / 1e6 / base["cpu"]
    report.targets.append(
        (
            f"tracing not configured: under {TRACING_IDLE_TARGET:.1%} of a warm query's CPU",
            share < TRACING_IDLE_TARGET,
            f"{share:.4%}",
        )
    )


# --------------------------------------------------------------------------- the run


def leftover_processes() -> list[str]:
    """Any CLI or serve process still running, ours or not (the brief's `ps aux` check)."""
    import subprocess

    out = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    return [
        line.strip()
        for line in out.splitlines()
        if ("_bundled/claude" in line or "sf_provider.cli serve" in line) and "ps -eo" not in line
    ]


def render(report: Report, facts: dict[str, Any], runs: int, elapsed: float) -> str:
    lines = [
        "| section | measure | median | min / p99 | max | unit | note |",
        "|---|---|---:|---:|---:|---|---|",
    ]

    def fmt(v: float | None, unit: str) -> str:
        if v is None:
            return ""
        return f"{v:.3f}" if unit == "x" else f"{v:.1f}" if abs(v) < 1000 else f"{v:.0f}"

    for r in report.rows:
        figures = " | ".join(fmt(v, r.unit) for v in (r.median, r.low, r.high))
        lines.append(f"| {r.section} | {r.what} | {figures} | {r.unit} | {r.note} |")
    return "\n".join(lines)


def markdown(report: Report, facts: dict[str, Any], runs: int, elapsed: float, table: str) -> str:
    targets = "\n".join(
        f"- {'MET' if ok else 'MISSED'}: {what} (measured {value})"
        for what, ok, value in report.targets
    )
    notes = "\n".join(f"- {n}" for n in report.notes) or "- none"
    return f"""# Benchmark results

Generated by `python bench/suite.py --runs {runs}` on {facts["date"]} in {elapsed:.0f} s.
Every figure below was measured in that run; see bench/README.md for what each section does.

## Machine

- {facts["cpu_count"]} CPUs, Python {facts["python"]}, {facts["platform"]}
- claude-agent-sdk {facts["claude_agent_sdk"]}, bundled CLI {facts["cli"]}, mcp {facts["mcp"]}
- load average (1 min): {facts["load_start"]} at start, {facts["load_end"]} at end

## Targets

{targets}

## Figures

"min / p99" is the minimum, except for the tool-call rows (section 2) and the gateway's latency
rows (section 11) where it is the 99th percentile. Ratios (unit x) are computed from medians of
this run.

{table}

## Notes

{notes}
"""


async def run_all(
    runs: int, quick: bool, only: set[str] | None = None
) -> tuple[Report, dict[str, Any]]:
    import importlib.metadata

    facts = overhead.machine_facts()
    facts["mcp"] = importlib.metadata.version("mcp")
    facts["date"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    facts["load_start"] = f"{os.getloadavg()[0]:.2f}"
    report = Report()
    steps: list[tuple[str, Callable[[], Awaitable[None]]]] = [
        ("1 adapter overhead", lambda: adapter_overhead(report, runs)),
        ("2 tool-call cost", lambda: tool_call_cost(report, 50 * runs)),
        ("3 time to first delta", lambda: first_delta(report, runs)),
        ("4 single-turn streaming", lambda: single_turn(report, runs)),
        ("5 parallel queries", lambda: throughput(report, max(2, runs // 2))),
        ("6 parsing and mapping", lambda: asyncio.to_thread(parsing, report, runs)),
        ("7 warm processes", lambda: warm_processes(report, runs)),
        ("8 import time", lambda: asyncio.to_thread(import_time, report, runs)),
        ("9 agent loop", lambda: agent_loop(report, runs)),
        ("10 long replies", lambda: long_replies(report, max(2, runs // 3))),
        ("11 gateway", lambda: gateway_bench(report, max(2, runs // 3))),
        ("12 tracing", lambda: tracing_cost(report, 3 * runs)),
    ]
    for name, step in steps:
        if only and name.split()[0] not in only:
            continue
        started = time.perf_counter()
        await step()
        print(f"  {name}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    await asyncio.sleep(0.3)  # let transports finish reaping
    facts["load_end"] = f"{os.getloadavg()[0]:.2f}"
    cpus = os.cpu_count() or 1
    if max(float(facts["load_start"]), float(facts["load_end"])) > cpus:
        report.notes.append(
            f"the load average was above the CPU count ({cpus}): other work shared the machine, "
            f"so absolute times are inflated and noisy; ratios of alternated runs hold up better"
        )
    if quick:
        report.notes.append("--quick: a smoke test, too few runs for conclusions")
    return report, facts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=None, help="runs per contender (10)")
    parser.add_argument("--quick", action="store_true", help="3 runs: a smoke test")
    parser.add_argument(
        "--only", default="", help="comma-separated section numbers; prints, writes no RESULTS.md"
    )
    args = parser.parse_args(argv)
    runs = args.runs if args.runs is not None else (3 if args.quick else 10)
    if runs < 1:
        parser.error("--runs must be at least 1")
    started = time.perf_counter()
    try:
        only = {n.strip() for n in args.only.split(",") if n.strip()} or None
        report, facts = asyncio.run(run_all(runs, args.quick, only))
    except BenchError as exc:
        print(f"bench/suite.py: FAILED: {exc}", file=sys.stderr)
        return 1
    elapsed = time.perf_counter() - started
    left = overhead.leftover_children()
    if left:
        print("bench/suite.py: FAILED: child processes left running:\n" + "\n".join(left))
        return 1
    others = leftover_processes()
    if others:  # not ours (another session may be running tests), but worth a look
        print("bench/suite.py: note: CLI or serve processes running:\n" + "\n".join(others))
    table = render(report, facts, runs, elapsed)
    print(table)
    for what, ok, value in report.targets:
        print(f"{'MET' if ok else 'MISSED'}: {what} ({value})")
    if only:
        return 0
    RESULTS.write_text(markdown(report, facts, runs, elapsed, table))
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
