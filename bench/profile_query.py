"""Where the Python side of one query spends its time.

Runs overhead.py's scenario (the model calls `add(a=2, b=3)` through the executor, then answers
with text) N times through `ClaudeAgentProvider.generate`, with the real bundled CLI against
`sf_provider.testing.ScriptedMessagesAPI`, and charges this thread's CPU time (`time.thread_time`)
to the phase whose code is running. A phase's own time excludes the phases it calls:

- options: `ClaudeAgentProvider._prepare` and `._sdk_options` (provider.py);
- bridge: `build_bridge_server` and the bridge's MCP `tools/list` / `tools/call` handlers
  (_bridge.py);
- mapping: `PartMapper` and `ResultCollector` (_mapping.py);
- invoke: `invoke_tool` (_invoke.py; the `add` executor itself is trivial);
- cleanup: `shutil.rmtree` of the per-query HOME / CLAUDE_CONFIG_DIR / TMPDIR (provider.py);
- scripted API: `ScriptedMessagesAPI` answering the CLI (same event loop; not in production);
- other Python: the rest of this process's CPU time (`time.process_time`) during the query: the
  Agent SDK (spawning the CLI, reading its messages, the control protocol, MCP JSON-RPC), the
  provider's query loop and asyncio;
- waiting: wall time with no CPU in this process, i.e. the CLI starting up and working.

Async code is timed step by step (only while it runs, not while it waits). The first query is
shown on its own: it pays one-time costs (first use of the pydantic models, imports on first
use). Every query is checked like overhead.py checks it.

    python bench/profile_query.py [--runs N] [--cprofile [TOP]]

`--cprofile` also runs the timed queries under cProfile and prints the TOP (default 25)
functions of sf_provider and claude_agent_sdk by their own time; the table then includes
cProfile's own overhead (about 2x), so take its figures from a run without it.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import pstats
import shutil
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Generator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from mcp.server import Server

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import overhead  # noqa: E402

import sf_provider  # noqa: E402
from sf_provider import _bridge, _invoke, _mapping, provider  # noqa: E402
from sf_provider.testing import ScriptedMessagesAPI  # noqa: E402

#: sf_provider's own phases, then the timed parts of the rest.
OWN = ("options", "bridge", "mapping", "invoke")
PHASES = (*OWN, "cleanup", "api")


class PhaseClock:
    """CPU time of this thread charged to the innermost running phase."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = defaultdict(float)
        self._stack: list[str] = []
        self._mark = time.thread_time()

    def _charge(self) -> None:
        now = time.thread_time()
        if self._stack:
            self.cpu[self._stack[-1]] += now - self._mark
        self._mark = now

    def enter(self, phase: str) -> None:
        self._charge()
        self._stack.append(phase)

    def leave(self) -> None:
        self._charge()
        self._stack.pop()

    def take(self) -> dict[str, float]:
        """The CPU seconds per phase since the last call, and start again."""
        taken = {phase: self.cpu.get(phase, 0.0) for phase in PHASES}
        self.cpu.clear()
        return taken


CLOCK = PhaseClock()


def timed(phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` (sync) with its running time charged to `phase`."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        CLOCK.enter(phase)
        try:
            return fn(*args, **kwargs)
        finally:
            CLOCK.leave()

    return wrapper


class _Steps:
    """Awaits a coroutine, charging each of its steps (send/throw) to `phase`."""

    def __init__(self, phase: str, coro: Any) -> None:
        self._phase = phase
        self._coro = coro

    def __await__(self) -> Generator[Any, Any, Any]:
        value: Any = None
        error: BaseException | None = None
        while True:
            CLOCK.enter(self._phase)
            try:
                yielded = self._coro.send(value) if error is None else self._coro.throw(error)
            except StopIteration as stop:
                return stop.value
            finally:
                CLOCK.leave()
            try:
                value, error = (yield yielded), None
            except BaseException as exc:  # cancellation and the like go to the coroutine
                value, error = None, exc


def timed_async(phase: str, fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """`fn` (async) with its running steps charged to `phase`."""

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        return await _Steps(phase, fn(*args, **kwargs))

    return wrapper


def _patch(owner: Any, phase: str, *names: str, wrap: Callable[..., Any] = timed) -> None:
    """Replace `owner.<name>` by its timed version, for each name."""
    for name in names:
        setattr(owner, name, wrap(phase, getattr(owner, name)))


def instrument() -> None:
    """Wrap the functions of each phase where the package looks them up."""
    _patch(provider.ClaudeAgentProvider, "options", "_prepare", "_sdk_options")
    _patch(_mapping.PartMapper, "mapping", "__init__", "map", "flush", "outcome")
    _patch(_mapping.ResultCollector, "mapping", "__init__", "add", "result")
    _patch(ScriptedMessagesAPI, "api", "_handle", wrap=timed_async)
    # Module-level functions: replace them in every sf_provider module that imported them.
    replacements = [
        (_bridge.build_bridge_server, timed("bridge", _bridge.build_bridge_server)),
        (_invoke.invoke_tool, timed_async("invoke", _invoke.invoke_tool)),
    ]
    for module in [m for n, m in sys.modules.items() if n.startswith("sf_provider")]:
        for attr, value in list(vars(module).items()):
            for original, wrapped in replacements:
                if value is original:
                    setattr(module, attr, wrapped)

    # The bridge's MCP handlers are closures: wrap them where the MCP server receives them.
    def server(*args: Any, **kwargs: Any) -> Any:
        for key in ("on_list_tools", "on_call_tool"):
            if kwargs.get(key) is not None:
                kwargs[key] = timed_async("bridge", kwargs[key])
        return Server(*args, **kwargs)

    # provider.py calls shutil.rmtree through the module: give it a shutil whose rmtree is timed.
    timed_shutil = SimpleNamespace(**{**vars(shutil), "rmtree": timed("cleanup", shutil.rmtree)})
    for owner, name, value in ((_bridge, "Server", server), (provider, "shutil", timed_shutil)):
        setattr(owner, name, value)


async def profile(runs: int, profiler: cProfile.Profile | None) -> list[dict[str, float]]:
    """Per query: CPU seconds per phase, process CPU and wall time. The first is the cold one."""
    counter = overhead.Counter()
    tool = overhead.make_function_tool(counter)
    rows: list[dict[str, float]] = []
    async with ScriptedMessagesAPI(overhead.responder) as api:
        for i in range(runs + 1):
            first_request, calls_before = len(api.requests), len(counter.calls)
            CLOCK.take()
            if profiler is not None and i > 0:
                profiler.enable()
            cpu0, wall0 = time.process_time(), time.perf_counter()
            answer = await overhead.run_provider(api, tool)
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            if profiler is not None:
                profiler.disable()
            row = CLOCK.take()
            row["other"] = cpu - sum(row.values())
            row["waiting"] = wall - cpu
            row["cpu"], row["wall"] = cpu, wall
            rows.append(row)
            label = "first query" if i == 0 else f"query {i}"
            if counter.calls[calls_before:] != [(overhead.ARGS["a"], overhead.ARGS["b"])]:
                raise overhead.BenchError(f"{label}: the tool ran {counter.calls[calls_before:]}")
            if answer != overhead.ANSWER:
                raise overhead.BenchError(f"{label}: the answer was {answer!r}")
            overhead.check_requests(api.requests[first_request:], label)
            if api.errors:
                raise overhead.BenchError(f"{label}: the scripted API reported {api.errors}")
    await asyncio.sleep(0.2)  # let the SDK's transports finish reaping
    if sys.platform.startswith("linux") and (left := overhead.leftover_children()):
        raise overhead.BenchError("CLI processes left running:\n" + "\n".join(left))
    return rows


LABELS = {
    "options": "options (_prepare, _sdk_options)",
    "bridge": "bridge (build, MCP handlers)",
    "mapping": "mapping (PartMapper, ResultCollector)",
    "invoke": "invoke (invoke_tool)",
    "cleanup": "cleanup (rmtree of the query's dirs)",
    "api": "scripted API (test server)",
    "other": "other Python (SDK, query loop)",
    "cpu": "= Python CPU in this process",
    "waiting": "waiting (the CLI; no CPU here)",
    "wall": "= wall time",
}


def render(rows: list[dict[str, float]]) -> str:
    first, timed_rows = rows[0], rows[1:]
    wall = statistics.median(r["wall"] for r in timed_rows)
    lines = [
        f"sf-provider {sf_provider.__version__}, Python {sys.version.split()[0]}; "
        f"scenario: one add() tool call + text answer (overhead.py); {len(timed_rows)} queries "
        f"after the first",
        "",
        f"{'ms per query':<38} {'first':>8} {'median':>8} {'min':>8} {'max':>8} {'% wall':>7}",
    ]
    for key, label in LABELS.items():
        ms = [r[key] * 1000 for r in timed_rows]
        median = statistics.median(ms)
        lines.append(
            f"{label:<38} {first[key] * 1000:>8.2f} {median:>8.2f} {min(ms):>8.2f} "
            f"{max(ms):>8.2f} {median / (wall * 1000) * 100:>6.1f}%"
        )
    ours = statistics.median(sum(r[p] for p in OWN) for r in timed_rows) * 1000
    lines += ["", f"sf_provider's own phases: {ours:.2f} ms per query (median of the sums)"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=10, help="queries after the first (10)")
    parser.add_argument(
        "--cprofile",
        type=int,
        nargs="?",
        const=25,
        metavar="TOP",
        help="also print the TOP (25) functions by own time under cProfile",
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    instrument()
    profiler = cProfile.Profile() if args.cprofile else None
    try:
        rows = asyncio.run(profile(args.runs, profiler))
    except overhead.BenchError as exc:
        print(f"bench/profile_query.py: FAILED: {exc}", file=sys.stderr)
        return 1
    print(render(rows))
    if profiler is not None:
        print(f"\ncProfile over the {args.runs} queries after the first (own time):")
        stats = pstats.Stats(profiler)
        stats.sort_stats("tottime").print_stats(r"sf_provider|claude_agent_sdk", args.cprofile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
