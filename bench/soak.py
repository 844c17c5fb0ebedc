"""Soak: does a long-running gateway (and the provider behind it) leak over hundreds of requests?

One replica as production runs it: a worker process serves `create_app(GatewaySettings(...))` with
uvicorn (max_concurrency=2, warm_processes=2, an API key), its CLI pointed at this script's
`ScriptedMessagesAPI` through the environment; the worker also runs direct
`ClaudeAgentProvider` calls on the gateway's own provider (an app's own server). This script
sends the mix real traffic has, request by request, and samples every `--sample-every`:

- in the worker (`GET /_soak/stats`, after `gc.collect()`): RSS, open file descriptors (by
  kind), threads, asyncio tasks, objects by type (provider, session, transport, SDK client,
  MCP server, spans...), the provider's `WeakSet` of sessions and its pool, the module-level
  sets of `sf_provider._process`, `weakref.finalize` entries, logging handlers, warnings
  registries;
- outside it: the worker's CLI children and zombies, `sf-provider-*` dirs and every file
  under the worker's `HOME`, `CLAUDE_CONFIG_DIR` and `TMPDIR`, sockets in CLOSE_WAIT.

The mix (one "request" is one HTTP request to the gateway or one direct provider call):
OpenAI and Anthropic answers, streamed and not; tool calls and their continued next step; a
structured answer; API errors (529, 500, 429, 400, 401); a stream cut by the API (the CLI's
fallback answers); a client that leaves mid-stream and one that leaves before the answer; 400s
refused before any process; three requests at once against two slots (one 429); direct calls:
an executor tool loop, a timeout, a cancellation, a stream left early. Every
`--aclose-every` requests the provider is closed (`aclose()`) and goes on serving; every
`--restart-every` the app is shut down and started again in the same process (lifespan).

Each answer is checked; a wrong one is counted (and the first few printed), and the run fails
(exit code 1) on any, or when a CLI process or a per-query dir is left after the worker stopped.

    python bench/soak.py [--requests 600] [--sample-every 50] [--json PATH]

Prints one row per sample and, per measure, its growth per request: the least-squares slope
over the samples after the first (the first includes start-up), and last minus first sample.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import suppress
from pathlib import Path
from typing import Any

import httpx

from sf_provider.testing import (
    RecordedRequest,
    Reply,
    ScriptedMessagesAPI,
    ScriptItem,
    fault,
    http_error,
    offline_env,
    reply,
    text,
    tool_use,
)

KEY = "soak-key"
AUTH = {"authorization": f"Bearer {KEY}"}
MODEL = "claude-sonnet-5-5"
WEATHER_TOOL = {
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
ANTHROPIC_WEATHER = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "input_schema": WEATHER_TOOL["function"]["parameters"],  # type: ignore[index]
}
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "integer"}},
    "required": ["city", "celsius"],
    "additionalProperties": False,
}
ERROR_STATUSES = (529, 500, 429, 400, 401)
#: Characters of the reply a client leaves in the middle of (8 per delta).
LONG_REPLY = 60_000
#: Seconds a hung API call stays open (the CLI is stopped long before).
HANG_SECONDS = 6.0
#: The mix: kind -> weight (a two-step conversation counts as two requests).
MIX = {
    "openai_text": 3,
    "openai_stream": 3,
    "openai_tools": 3,
    "openai_structured": 1,
    "anthropic_text": 2,
    "anthropic_stream_tool": 2,
    "api_error": 2,
    "cut_stream": 1,
    "leave_mid_stream": 1,
    "leave_before_answer": 1,
    "bad_input": 1,
    "at_the_limit": 1,
    "direct_executor": 3,
    "direct_timeout": 1,
    "direct_cancel": 1,
    "direct_stream_left": 1,
}
#: Kinds whose API call hangs (the CLI is stopped long before it ends).
HANGING = frozenset(
    {"leave_before_answer", "direct_timeout", "direct_cancel", "direct_closed", "restart_in_flight"}
)
TAG = re.compile(r"\[soak:([a-z_]+):(\d+)\]")


class SoakError(RuntimeError):
    """The run could not go on (the worker died, never started)."""


# --------------------------------------------------------------------------- the scripted model


class Model:
    """The scripted model: each request's first user message carries `[soak:<kind>:<n>]`."""

    def __init__(self) -> None:
        self.gates: dict[int, asyncio.Event] = {}

    async def __call__(self, request: RecordedRequest) -> ScriptItem:
        found = TAG.search(json.dumps(request.messages))
        if found is None:
            return http_error(400, "soak: no tag in the request")
        kind, n = found.group(1), int(found.group(2))
        results = request.tool_result_texts()
        if kind in ("openai_tools", "anthropic_stream_tool"):
            if not results:
                return reply(tool_use("get_weather", {"city": f"City{n}"}))
            return reply(text(f"City{n}: {results[-1].splitlines()[0]}"))
        if kind == "openai_structured":
            if request.tool_results():
                return reply(text("done"))
            return reply(tool_use("StructuredOutput", {"city": f"City{n}", "celsius": n % 40}))
        if kind == "api_error":
            return http_error(ERROR_STATUSES[n % len(ERROR_STATUSES)])
        if kind == "cut_stream":
            if request.body.get("stream"):
                return fault("drop_mid_stream", events=3)
            return reply(text(f"answer {n}"))
        if kind == "leave_mid_stream":
            return Reply(content=[text("x" * LONG_REPLY)], chunk_size=8)
        if kind in HANGING:
            return fault("hang", seconds=HANG_SECONDS)
        if kind == "direct_executor":
            if not results:
                return reply(tool_use("add", {"a": n, "b": 1}))
            return reply(text(f"sum {results[-1].splitlines()[0]}"))
        if kind == "at_the_limit":
            gate = self.gates.setdefault(n, asyncio.Event())
            with suppress(TimeoutError):
                await asyncio.wait_for(gate.wait(), 20)
        return reply(text(f"answer {n}"))


# --------------------------------------------------------------------------- the worker


def worker(port: int, tracing: bool) -> None:
    """The replica: the gateway app (restarted in place on `/_soak/restart`) plus the routes
    this script needs: stats, direct provider calls, `aclose`. With `tracing`, spans go through
    the OpenTelemetry SDK to an exporter that drops them, and metrics to an in-memory reader."""
    if tracing:
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter

        class Dropped(SpanExporter):
            def export(self, spans: Any) -> Any:
                from opentelemetry.sdk.trace.export import SpanExportResult

                return SpanExportResult.SUCCESS

        traced = TracerProvider()
        traced.add_span_processor(SimpleSpanProcessor(Dropped()))
        trace.set_tracer_provider(traced)
        metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    import uvicorn
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

    from sf_provider import ClaudeAgentProvider, FunctionTool
    from sf_provider.gateway import GatewaySettings, create_app
    from sf_provider.settings import ProviderSettings

    settings = GatewaySettings(
        host="127.0.0.1",
        port=port,
        api_keys=[KEY],
        max_concurrency=2,
        shutdown_grace=5,
        provider=ProviderSettings(warm_processes=2),
    )

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    add_tool = FunctionTool.from_function(add)
    state: dict[str, Any] = {"restart": False, "server": None, "restarts": 0}

    async def direct(request: Request) -> Response:
        provider: ClaudeAgentProvider = request.app.state.provider
        body = await request.json()
        kind, prompt = body["kind"], body["prompt"]
        outcome = "?"
        try:
            if kind == "direct_executor":
                result = await provider.generate(prompt, tools=[add_tool])
                outcome = result.text
            elif kind == "direct_timeout":
                await provider.generate(prompt, timeout=1.0)
            elif kind == "direct_closed":  # the provider is closed (aclose) while it runs
                await provider.generate(prompt, timeout=30)
            elif kind == "direct_cancel":
                import anyio

                with anyio.move_on_after(1.0):
                    await provider.generate(prompt)
                outcome = "cancelled"
            elif kind == "direct_stream_left":
                async with provider.stream(prompt) as parts:
                    async for _part in parts:
                        break
                outcome = "left"
        except Exception as exc:
            outcome = type(exc).__name__
        return JSONResponse({"outcome": outcome})

    async def aclose(request: Request) -> Response:
        await request.app.state.provider.aclose()
        return JSONResponse({"closed": True})

    async def restart(_request: Request) -> Response:
        state["restart"] = True
        state["server"].should_exit = True
        return JSONResponse({"restarting": True})

    async def stats(request: Request) -> Response:
        # A collected async generator is closed by a task the loop schedules (asyncio's
        # finalizer hook): let those run before counting what is still alive.
        for _ in range(3):
            gc.collect()
            for _ in range(5):
                await asyncio.sleep(0)
        return JSONResponse(inside(request.app.state.provider, state["restarts"]))

    async def serve() -> None:
        while True:
            app = create_app(settings)
            app.add_route("/_soak/stats", stats, methods=["GET"])
            app.add_route("/_soak/direct", direct, methods=["POST"])
            app.add_route("/_soak/aclose", aclose, methods=["POST"])
            app.add_route("/_soak/restart", restart, methods=["POST"])
            config = uvicorn.Config(
                app,
                host=settings.host,
                port=settings.port,
                lifespan="on",
                log_level="warning",
                access_log=False,
                timeout_graceful_shutdown=int(settings.shutdown_grace),
            )
            server = uvicorn.Server(config)
            state["server"], state["restart"] = server, False
            print("SOAK WORKER SERVING", flush=True)
            await server.serve()
            if not state["restart"]:
                return
            state["restarts"] += 1

    asyncio.run(serve())


#: Objects counted by type name in the worker (gc.get_objects()).
WATCHED_TYPES = (
    "ClaudeAgentProvider",
    "WarmPool",
    "CLISession",
    "QueryTransport",
    "ClaudeSDKClient",
    "Query",
    "Server",
    "McpSdkServerConfig",
    "QueryStream",
    "QueryTrace",
    "ToolTrace",
    "_QuerySpan",
    "_ToolSpan",
    "_Span",
    "QueryResponse",
    "Starlette",
    "Process",
    "_UnixSubprocessTransport",
    "_UnixReadPipeTransport",
    "_UnixWritePipeTransport",
    "_SelectorSocketTransport",
    "Task",
    "TimerHandle",
    "async_generator",
    "coroutine",
    "finalize",
    "MemoryObjectSendStream",
    "CancelScope",
    "TaskGroup",
    "deque",
)


def inside(provider: Any, restarts: int) -> dict[str, Any]:
    """The worker's own measures, after a full collection."""
    import logging
    import threading
    import warnings
    import weakref

    from sf_provider import _process
    from sf_provider import provider as provider_module

    gc.collect()
    gc.collect()
    fds: Counter[str] = Counter()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        fds[target.split(":")[0] if ":" in target else "file"] += 1
    by_type: Counter[str] = Counter(type(o).__name__ for o in gc.get_objects())
    loggers = [logging.getLogger()] + [
        lg for lg in logging.Logger.manager.loggerDict.values() if isinstance(lg, logging.Logger)
    ]
    pool = provider._pool
    registry = weakref.finalize._registry  # type: ignore[attr-defined]
    stale = [
        o for o in gc.get_objects() if type(o) is _process.CLISession and o not in _process._LIVE
    ]
    if stale and os.environ.get("SOAK_REFERRERS"):
        for session in stale[:2]:
            print("stale session held by:", referrer_chain(session, [stale]), flush=True)
    return {
        "rss_kb": _status_kb(os.getpid(), "VmRSS") or 0,
        "fds": sum(fds.values()),
        "fds_by_kind": dict(fds),
        "threads": threading.active_count(),
        "os_threads": len(os.listdir("/proc/self/task")),
        "tasks": len(asyncio.all_tasks()),
        "objects": {name: by_type.get(name, 0) for name in WATCHED_TYPES},
        "all_objects": dict(by_type),
        "gc_objects": sum(by_type.values()),
        "sessions_weakset": len(provider._sessions),
        "pool_idle": len(pool._idle) if pool else 0,
        "pool_busy": len(pool._busy) if pool else 0,
        "pool_closing": len(pool._closing) if pool else 0,
        "live_sessions": len(_process._LIVE),
        "stale_sessions": len(stale),
        "stopping": len(_process._STOPPING),
        "model_names": len(provider_module._MODEL_NAMES),
        "finalizers": len(registry),
        "log_handlers": sum(len(lg.handlers) for lg in loggers),
        "warning_registry": sum(
            len(getattr(m, "__warningregistry__", None) or {}) for m in list(sys.modules.values())
        ),
        "warning_filters": len(warnings.filters),
        "gc_garbage": len(gc.garbage),
        "modules": len(sys.modules),
        "restarts": restarts,
    }


def referrer_chain(obj: Any, ignore: list[Any], depth: int = 15) -> str:
    """What keeps `obj` alive: the shortest chain of referrers up to a module, a task, a
    thread or the event loop (breadth first; frames skipped)."""
    import types
    from collections import deque

    seen = {id(obj), *(id(x) for x in ignore)}
    todo: deque[tuple[Any, list[str]]] = deque([(obj, [])])
    while todo:
        current, path = todo.popleft()
        if len(path) >= depth:
            continue
        for holder in gc.get_referrers(current):
            if id(holder) in seen or isinstance(holder, types.FrameType):
                continue
            seen.add(id(holder))
            what = type(holder).__name__
            if isinstance(holder, dict):
                what += str([k for k, v in holder.items() if v is current][:2])
                if "__builtins__" in holder and "__name__" in holder:
                    return " <- ".join([*path, f"{what} (module {holder['__name__']})"])
            if what in ("Task", "Handle", "TimerHandle", "Thread", "_UnixSelectorEventLoop"):
                return " <- ".join([*path, f"{what} {repr(holder)[:200]}"])
            todo.append((holder, [*path, what]))
    return "no root found within the depth"


# --------------------------------------------------------------------------- outside the worker


def _status_kb(pid: int, key: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{key}:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def descendants(root: int) -> list[tuple[int, str]]:
    """`root`'s descendants as (pid, state), zombies included."""
    children: dict[int, list[tuple[int, str]]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append((int(entry.name), fields[0]))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child[0])
    return found


def tree_files(root: Path) -> tuple[int, int]:
    """Files (and their bytes) under `root`."""
    count = size = 0
    for path, _dirs, files in os.walk(root):
        for name in files:
            count += 1
            with suppress(OSError):
                size += os.lstat(os.path.join(path, name)).st_size
    return count, size


def close_wait(pids: set[int]) -> int:
    """TCP sockets of these processes in CLOSE_WAIT (the peer closed, this side never did)."""
    out = subprocess.run(
        ["ss", "-tanpH", "state", "close-wait"], capture_output=True, text=True, check=False
    )
    return sum(any(f"pid={pid}," in line for pid in pids) for line in out.stdout.splitlines())


def outside(root: int, scratch: Path, seen: set[int]) -> dict[str, Any]:
    kids = descendants(root)
    clis = [pid for pid, st in kids if st != "Z" and "claude" in _cmdline(pid)]
    seen.update(clis)
    files, size = tree_files(scratch)
    config_json = scratch / "home" / ".claude.json"
    return {
        "clis": len(clis),
        "zombies": sum(st == "Z" for _pid, st in kids),
        "cli_rss_kb": sum(_status_kb(pid, "VmRSS") or 0 for pid in clis),
        "query_dirs": len(list((scratch / "tmp").glob("sf-provider-*"))),
        "scratch_files": files,
        "scratch_bytes": size,
        "claude_json_bytes": config_json.stat().st_size if config_json.exists() else 0,
        "close_wait": close_wait({root, *(pid for pid, _state in kids)}),
    }


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


# --------------------------------------------------------------------------- the traffic


class Traffic:
    """Sends the mix to the worker and checks each answer."""

    def __init__(self, base_url: str, model: Model) -> None:
        self.base_url = base_url
        self.model = model
        self.http = httpx.AsyncClient(base_url=base_url, headers=AUTH, timeout=60)
        self.n = 0
        self.wrong: list[str] = []
        self.outcomes: Counter[str] = Counter()

    def tag(self, kind: str) -> str:
        self.n += 1
        return f"[soak:{kind}:{self.n}]"

    def check(self, kind: str, ok: bool, what: Any) -> None:
        self.outcomes[f"{kind}:{'ok' if ok else 'WRONG'}"] += 1
        if not ok:
            self.wrong.append(f"{kind}: {what!r}"[:400])

    async def chat(self, body: dict[str, Any]) -> httpx.Response:
        return await self.http.post("/v1/chat/completions", json={"model": MODEL, **body})

    async def idle(self) -> None:
        """Until no request is in flight (a bound of 10 s): a client that left frees its slot
        once its query is stopped, and a sequential client would meet a 429 meanwhile."""
        for _ in range(200):
            if (await self.http.get("/healthz")).json()["in_flight"] == 0:
                return
            await asyncio.sleep(0.05)

    async def run(self, kind: str) -> int:
        """One unit of traffic of `kind`; returns how many requests it made."""
        await self.idle()
        tag = self.tag(kind)
        n = self.n
        question = [{"role": "user", "content": f"{tag} Weather in City{n}?"}]
        if kind == "openai_text":
            r = await self.chat({"messages": question})
            self.check(
                kind,
                r.status_code == 200
                and r.json()["choices"][0]["message"]["content"] == f"answer {n}",
                r.text,
            )
            return 1
        if kind == "openai_stream":
            r = await self.chat(
                {"messages": question, "stream": True, "stream_options": {"include_usage": True}}
            )
            ok = r.status_code == 200 and f"answer {n}"[:6] in r.text and "[DONE]" in r.text
            self.check(kind, ok, r.text[-300:])
            return 1
        if kind == "openai_tools":
            r = await self.chat({"messages": question, "tools": [WEATHER_TOOL]})
            message = r.json()["choices"][0]["message"] if r.status_code == 200 else {}
            calls = message.get("tool_calls") or []
            if len(calls) != 1:
                self.check(kind, False, r.text)
                return 1
            follow = [
                *question,
                message,
                {"role": "tool", "tool_call_id": calls[0]["id"], "content": f"{n % 30} C"},
            ]
            r2 = await self.chat({"messages": follow, "tools": [WEATHER_TOOL]})
            answer = r2.json()["choices"][0]["message"]["content"] if r2.status_code == 200 else ""
            self.check(kind, answer == f"City{n}: {n % 30} C", r2.text)
            return 2
        if kind == "openai_structured":
            fmt = {"type": "json_schema", "json_schema": {"name": "w", "schema": SCHEMA}}
            r = await self.chat({"messages": question, "response_format": fmt})
            ok = r.status_code == 200 and json.loads(
                r.json()["choices"][0]["message"]["content"]
            ) == {"city": f"City{n}", "celsius": n % 40}
            self.check(kind, ok, r.text)
            return 1
        if kind in ("anthropic_text", "anthropic_stream_tool"):
            stream = kind == "anthropic_stream_tool"
            body: dict[str, Any] = {
                "model": MODEL,
                "max_tokens": 1024,
                "messages": question,
                "stream": stream,
            }
            if stream:
                body["tools"] = [ANTHROPIC_WEATHER]
            r = await self.http.post(
                "/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"}
            )
            if stream:
                ok = (
                    r.status_code == 200
                    and '"stop_reason": "tool_use"' in r.text
                    and ("message_stop" in r.text)
                )
            else:
                ok = r.status_code == 200 and r.json()["content"][0]["text"] == f"answer {n}"
            self.check(kind, ok, r.text[-300:])
            return 1
        if kind == "api_error":
            status = ERROR_STATUSES[n % len(ERROR_STATUSES)]
            expected = 502 if status == 500 else status  # an upstream 500 is a bad gateway
            if n % 2:
                r = await self.chat({"messages": question, "stream": bool(n % 4 == 1)})
                expected = 503 if status == 529 else expected
            else:
                r = await self.http.post(
                    "/v1/messages",
                    json={"model": MODEL, "max_tokens": 64, "messages": question},
                    headers={"anthropic-version": "2023-06-01"},
                )
            self.check(kind, r.status_code == expected, (status, r.status_code, r.text[:200]))
            return 1
        if kind == "cut_stream":
            # The CLI asks again without streaming: a whole answer folds the redo in; a stream
            # that already sent a part ends with an error event (chunks cannot be taken back).
            r = await self.chat({"messages": question, "stream": bool(n % 2)})
            if n % 2:
                ok = r.status_code == 200 and "stream was cut" in r.text
            else:
                ok = r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == (
                    f"answer {n}"
                )
            self.check(kind, ok, r.text[-300:])
            return 1
        if kind == "leave_mid_stream":
            body = {"model": MODEL, "messages": question, "stream": True}
            async with self.http.stream("POST", "/v1/chat/completions", json=body) as r:
                got = b""
                async for chunk in r.aiter_bytes():
                    got += chunk
                    if got.count(b"data:") >= 3:
                        break  # leaving the block closes the connection
            self.check(kind, r.status_code == 200 and b"xxxx" in got, got[:200])
            return 1
        if kind == "leave_before_answer":
            seen = len(self.model_requests())
            body = {"model": MODEL, "messages": question, "stream": bool(n % 2)}
            task = asyncio.create_task(self.http.post("/v1/chat/completions", json=body))
            for _ in range(400):  # until the API call arrived (a bound)
                if len(self.model_requests()) > seen:
                    break
                await asyncio.sleep(0.025)
            task.cancel()  # the client hangs up
            with suppress(asyncio.CancelledError):
                await task
            self.check(kind, len(self.model_requests()) > seen, "no API call seen")
            return 1
        if kind == "bad_input":
            r = await self.chat({"messages": question, "n": 2})
            self.check(kind, r.status_code == 400, r.text)
            return 1
        if kind == "at_the_limit":
            gate = self.model.gates.setdefault(n, asyncio.Event())
            first = [
                asyncio.create_task(self.chat({"messages": question})),
                asyncio.create_task(self.chat({"messages": question, "stream": True})),
            ]
            for _ in range(400):  # until both slots are taken (their API calls arrived)
                if (
                    sum(
                        f"[soak:at_the_limit:{n}]" in json.dumps(r.messages)
                        for r in self.model_requests()[-4:]
                    )
                    >= 2
                ):
                    break
                await asyncio.sleep(0.025)
            third = await self.chat({"messages": question})
            gate.set()
            answers = await asyncio.gather(*first)
            self.model.gates.pop(n, None)
            ok = third.status_code == 429 and all(a.status_code == 200 for a in answers)
            self.check(kind, ok, (third.status_code, [a.status_code for a in answers]))
            return 3
        if kind.startswith("direct_"):
            r = await self.http.post("/_soak/direct", json={"kind": kind, "prompt": question})
            outcome = r.json().get("outcome") if r.status_code == 200 else r.text
            expected = {
                "direct_executor": f"sum {n + 1}",
                "direct_timeout": "QueryTimeoutError",
                "direct_cancel": "cancelled",
                "direct_stream_left": "left",
            }[kind]
            self.check(kind, outcome == expected, outcome)
            return 1
        raise AssertionError(kind)

    async def until_called(self, tag: str) -> bool:
        """Until the scripted API got the call tagged `tag` (a bound of 20 s)."""
        for _ in range(800):
            if any(tag in json.dumps(r.messages) for r in self.model_requests()[-3:]):
                return True
            await asyncio.sleep(0.025)
        return False

    async def aclose_in_flight(self) -> int:
        """`provider.aclose()` while a direct query runs: the query fails saying so, and the
        provider goes on serving."""
        await self.idle()
        tag = self.tag("direct_closed")
        body = {"kind": "direct_closed", "prompt": f"{tag} Weather?"}
        running = asyncio.create_task(self.http.post("/_soak/direct", json=body))
        called = await self.until_called(tag)
        await self.http.post("/_soak/aclose")
        r = await running
        outcome = r.json().get("outcome") if r.status_code == 200 else r.text
        self.check("aclose_in_flight", called and outcome == "ProcessDiedError", outcome)
        return 1

    async def restart_in_flight(self, proc: subprocess.Popen[bytes]) -> int:
        """The app shut down (lifespan) and started again in the same process while a request
        runs: that request ends (an error or a closed connection), whatever it was."""
        await self.idle()
        tag = self.tag("restart_in_flight")
        body = {"model": MODEL, "messages": [{"role": "user", "content": f"{tag} Weather?"}]}
        running = asyncio.create_task(self.http.post("/v1/chat/completions", json=body))
        called = await self.until_called(tag)
        restarts = (await self.http.get("/_soak/stats")).json()["restarts"]
        await self.http.post("/_soak/restart")
        try:
            status: Any = (await running).status_code
        except httpx.HTTPError as exc:
            status = type(exc).__name__
        await wait_up(self.http, proc, restarts=restarts + 1)
        self.check("restart_in_flight", called and status != 200, status)
        return 1

    def model_requests(self) -> list[RecordedRequest]:
        return self.api.requests

    api: ScriptedMessagesAPI


# --------------------------------------------------------------------------- the run

#: The measures of the table, in order: (name, where, unit).
COLUMNS = [
    ("rss_kb", "in", "KiB"),
    ("fds", "in", ""),
    ("threads", "in", ""),
    ("tasks", "in", ""),
    ("gc_objects", "in", ""),
    ("sessions_weakset", "in", ""),
    ("live_sessions", "in", ""),
    ("stale_sessions", "in", ""),
    ("finalizers", "in", ""),
    ("log_handlers", "in", ""),
    ("warning_registry", "in", ""),
    ("clis", "out", ""),
    ("zombies", "out", ""),
    ("query_dirs", "out", ""),
    ("scratch_files", "out", ""),
    ("scratch_bytes", "out", "B"),
    ("claude_json_bytes", "out", "B"),
    ("close_wait", "out", ""),
]


def slope(xs: list[float], ys: list[float]) -> float:
    if len(xs) < 2:
        return 0.0
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


def render(samples: list[dict[str, Any]]) -> str:
    names = ["requests"] + [name for name, _where, _unit in COLUMNS]
    rows = [[str(s["requests"])] + [str(s[name]) for name, *_ in COLUMNS] for s in samples]
    later = samples[1:] if len(samples) > 2 else samples
    xs = [float(s["requests"]) for s in later]
    per_request = ["slope/req"] + [
        f"{slope(xs, [float(s[n]) for s in later]):+.3g}" for n, *_ in COLUMNS
    ]
    span = samples[-1]["requests"] - samples[0]["requests"] or 1
    delta = ["(last-first)/req"] + [
        f"{(samples[-1][n] - samples[0][n]) / span:+.3g}" for n, *_ in COLUMNS
    ]
    table = [names, *rows, per_request, delta]
    widths = [max(len(row[i]) for row in table) for i in range(len(names))]
    lines = [" ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in table]
    lines.insert(1, " ".join("-" * w for w in widths))
    lines.insert(len(lines) - 2, " ".join("-" * w for w in widths))
    return "\n".join(lines)


def object_growth(first: dict[str, int], last: dict[str, int], top: int = 15) -> list[str]:
    grown = sorted(
        ((last.get(k, 0) - first.get(k, 0), k) for k in set(first) | set(last)), reverse=True
    )
    return [
        f"{name} {d:+d} ({first.get(name, 0)} -> {last.get(name, 0)})"
        for d, name in grown[:top]
        if d > 0
    ]


async def soak(args: argparse.Namespace) -> int:
    scratch = Path(tempfile.mkdtemp(prefix="sf-soak-"))
    for name in ("home", "config", "tmp"):
        (scratch / name).mkdir()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = Model()
    seen_clis: set[int] = set()
    samples: list[dict[str, Any]] = []
    first_objects: dict[str, int] = {}
    last_objects: dict[str, int] = {}
    failed = False
    async with ScriptedMessagesAPI(model) as api:
        env = {
            **os.environ,
            **offline_env(api.base_url),
            "HOME": str(scratch / "home"),
            "CLAUDE_CONFIG_DIR": str(scratch / "config"),
            "TMPDIR": str(scratch / "tmp"),
            "PYTHONUNBUFFERED": "1",
        }
        command = [sys.executable, __file__, "--worker", "--port", str(port)]
        command += ["--tracing"] if args.tracing else []
        proc, log = start_worker(command, env, scratch / "worker.log")
        base_url = f"http://127.0.0.1:{port}"
        traffic = Traffic(base_url, model)
        traffic.api = api
        rng = random.Random(args.seed)
        kinds = [k for k, w in MIX.items() for _ in range(w)]
        started = time.perf_counter()
        try:
            await wait_up(traffic.http, proc)

            async def sample(done: int) -> None:
                nonlocal first_objects, last_objects
                stats = (await traffic.http.get("/_soak/stats")).json()
                objects = stats.pop("all_objects")
                if not first_objects:
                    first_objects = objects
                last_objects = objects
                out = outside(proc.pid, scratch, seen_clis)
                samples.append(
                    {
                        "requests": done,
                        **stats,
                        **out,
                        "elapsed_s": round(time.perf_counter() - started, 1),
                    }
                )
                row = samples[-1]
                print(
                    f"[{row['elapsed_s']:7.1f}s] {done:5d} requests: rss {row['rss_kb']} KiB, "
                    f"fds {row['fds']}, threads {row['threads']}, tasks {row['tasks']}, "
                    f"clis {row['clis']}, zombies {row['zombies']}, dirs {row['query_dirs']}, "
                    f"files {row['scratch_files']}, wrong {len(traffic.wrong)}",
                    flush=True,
                )

            done = 0
            await sample(0)
            next_sample, next_aclose, next_restart = (
                args.sample_every,
                args.aclose_every,
                args.restart_every,
            )
            while done < args.requests:
                done += await traffic.run(rng.choice(kinds))
                if args.aclose_every and done >= next_aclose:
                    next_aclose += args.aclose_every
                    done += await traffic.aclose_in_flight()
                if args.restart_every and done >= next_restart:
                    next_restart += args.restart_every
                    done += await traffic.restart_in_flight(proc)
                if done >= next_sample:
                    next_sample += args.sample_every
                    await sample(done)
            if samples[-1]["requests"] != done:
                await sample(done)
        finally:
            await traffic.http.aclose()
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    await asyncio.to_thread(proc.wait, 30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    failed = True
                    print("soak: the worker did not stop within 30 s of SIGTERM")
            log.close()
    await asyncio.sleep(0.5)  # SIGKILLed CLIs are reaped by init now
    return judge(
        args,
        scratch,
        samples,
        traffic,
        api.errors,
        seen_clis,
        (first_objects, last_objects),
        failed,
    )


def start_worker(
    command: list[str], env: dict[str, str], log_path: Path
) -> tuple[subprocess.Popen[bytes], Any]:
    log = log_path.open("wb")
    return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT), log


def judge(
    args: argparse.Namespace,
    scratch: Path,
    samples: list[dict[str, Any]],
    traffic: Traffic,
    api_errors: list[str],
    seen_clis: set[int],
    objects: tuple[dict[str, int], dict[str, int]],
    failed: bool,
) -> int:
    """Print the table and what was left behind; 1 when anything was wrong or left."""
    first_objects, last_objects = objects
    alive = [
        pid for pid in seen_clis if Path(f"/proc/{pid}").exists() and "claude" in _cmdline(pid)
    ]
    left_dirs = sorted(p.name for p in (scratch / "tmp").glob("sf-provider-*"))
    left_files = [
        str(Path(path, name).relative_to(scratch))
        for path, _d, files in os.walk(scratch)
        for name in files
        if name != "worker.log"
    ]
    print()
    print(render(samples))
    print()
    print("objects grown most, first sample -> last (gc.get_objects() by type name):")
    for line in object_growth(first_objects, last_objects):
        print("  " + line)
    print()
    print(f"fds by kind at the end: {samples[-1]['fds_by_kind']}")
    print(f"watched objects at the end: {samples[-1]['objects']}")
    print(f"outcomes: {dict(sorted(traffic.outcomes.items()))}")
    print(f"CLI processes started: {len(seen_clis)} (seen in samples); still running: {alive}")
    print(f"per-query dirs left: {left_dirs}")
    held = [
        line
        for line in (scratch / "worker.log").read_text(errors="replace").splitlines()
        if line.startswith("stale session held by")
    ]
    for line in dict.fromkeys(held):
        print(line)
    print(f"files left under HOME/CLAUDE_CONFIG_DIR/TMPDIR: {len(left_files)} {left_files[:10]}")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"samples": samples, "outcomes": traffic.outcomes}, indent=1)
        )
    if traffic.wrong:
        failed = True
        print(f"soak: {len(traffic.wrong)} wrong answers, the first ones:")
        for line in traffic.wrong[:10]:
            print("  " + line)
    if api_errors:
        failed = True
        print(f"soak: scripted API errors: {api_errors[:5]}")
    if alive or left_dirs:
        failed = True
        print("soak: FAILED: CLI processes or per-query dirs left after the worker stopped")
    if failed:
        print(f"worker log: {scratch / 'worker.log'}")
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    return 1 if failed else 0


async def wait_up(
    http: httpx.AsyncClient, proc: subprocess.Popen[bytes], restarts: int = 0
) -> None:
    """Until the worker answers, after `restarts` restarts (a bound of 60 s)."""
    for _ in range(600):
        if proc.poll() is not None:
            raise SoakError(f"the worker exited with {proc.returncode}")
        with suppress(httpx.HTTPError):
            r = await http.get("/_soak/stats")
            if r.status_code == 200 and r.json()["restarts"] >= restarts:
                return
        await asyncio.sleep(0.1)
    raise SoakError("the worker did not answer within 60 s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=600, help="requests in all (600)")
    parser.add_argument("--sample-every", type=int, default=50, help="requests per sample (50)")
    parser.add_argument("--aclose-every", type=int, default=100, help="provider.aclose() (100)")
    parser.add_argument("--restart-every", type=int, default=250, help="app restart (250)")
    parser.add_argument("--seed", type=int, default=1, help="the mix's random seed (1)")
    parser.add_argument("--json", default="", help="write the samples here")
    parser.add_argument(
        "--tracing", action="store_true", help="the worker traces (OpenTelemetry SDK)"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.port, args.tracing)
        return 0
    try:
        return asyncio.run(soak(args))
    except SoakError as exc:
        print(f"bench/soak.py: FAILED: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
