"""How long a fresh query's caller waits, after its answer is complete, for the CLI to stop.

Runs overhead.py's scenario (the model calls `add(a=2, b=3)` through the executor, then answers
with text) through `ClaudeAgentProvider.stream` on a fresh CLI each (`warm_processes=0`), with
the real bundled CLI against `sf_provider.testing.ScriptedMessagesAPI`, and times from the
`FinishPart` (the answer is complete) to the end of the stream (the CLI stopped and reaped, its
temp dir removed: the same close `generate` waits for). Two contenders, alternated run by run
after an untimed warm-up of each:

- **isolated** (the default `isolate=True`): every file the CLI writes is in the query's temp
  dir, so it is stopped with SIGKILL;
- **own dirs** (`isolate=False`, with HOME, CLAUDE_CONFIG_DIR and TMPDIR in a temp dir of this
  run): SIGTERM first, so the CLI tidies those dirs (about 0.1 s), SIGKILL after 0.3 s.

Every run is checked (the tool ran, the answer arrived); a CLI still running at the end fails.

    python bench/stop_after_result.py [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import overhead  # noqa: E402

from sf_provider import ClaudeAgentProvider, FinishPart, FunctionTool, TextDeltaPart  # noqa: E402
from sf_provider.settings import ProviderSettings  # noqa: E402
from sf_provider.testing import ScriptedMessagesAPI  # noqa: E402


async def one_query(settings: ProviderSettings, tool: FunctionTool) -> tuple[float, float]:
    """(whole query, finish part -> end of the stream), in seconds."""
    provider = ClaudeAgentProvider(settings)
    text, finished = "", None
    started = time.perf_counter()
    async with provider.stream(overhead.PROMPT, tools=[tool]) as parts:
        async for part in parts:
            if isinstance(part, TextDeltaPart):
                text += part.delta
            elif isinstance(part, FinishPart):
                finished = time.perf_counter()
    ended = time.perf_counter()
    if text != overhead.ANSWER or finished is None:
        raise overhead.BenchError(f"unexpected answer {text!r} (finish part: {finished})")
    return ended - started, ended - finished


def line(label: str, samples: list[float]) -> str:
    ms = [s * 1000 for s in samples]
    return (
        f"  {label:34s} median {statistics.median(ms):7.1f} ms"
        f"  min {min(ms):7.1f}  max {max(ms):7.1f}"
    )


async def bench(runs: int) -> None:
    counter = overhead.Counter()
    tool = overhead.make_function_tool(counter)
    with tempfile.TemporaryDirectory(prefix="sf-bench-own-dirs-") as own:
        dirs = {name: Path(own, name.lower()) for name in ("HOME", "CLAUDE_CONFIG_DIR", "TMPDIR")}
        for path in dirs.values():
            path.mkdir()
        async with ScriptedMessagesAPI(overhead.responder) as api:
            isolated = api.settings(warm_processes=0)
            env = {**isolated.env, **{name: str(path) for name, path in dirs.items()}}
            own_dirs = isolated.model_copy(update={"isolate": False, "env": env})
            contenders = {"isolated (SIGKILL)": isolated, "own dirs (SIGTERM first)": own_dirs}
            figures: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
            for settings in contenders.values():
                await one_query(settings, tool)  # untimed warm-up
            for _ in range(runs):
                for name, settings in contenders.items():
                    figures[name].append(await one_query(settings, tool))
    if len(counter.calls) != 2 * (runs + 1):
        raise overhead.BenchError(f"the tool ran {len(counter.calls)} times")
    load = os.getloadavg()[0]
    print(f"{runs} runs each, fresh CLI per query; 1-minute load {load:.2f} at the end")
    for name, samples in figures.items():
        print(name)
        print(line("whole query", [s[0] for s in samples]))
        print(line("finish part -> end of stream", [s[1] for s in samples]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=10, help="runs per contender (10)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    try:
        asyncio.run(bench(args.runs))
    except overhead.BenchError as exc:
        print(f"bench/stop_after_result.py: FAILED: {exc}", file=sys.stderr)
        return 1
    left = overhead.leftover_children()
    if left:
        print("bench/stop_after_result.py: FAILED: CLI processes left running:\n" + "\n".join(left))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
