"""Every code block of README.md and docs/ runs as written, offline (tests/docs_blocks.py says
which blocks run and how the others are marked).

Each page is one test: its Python blocks run in order in one namespace, as a reader pastes them
into one session (top-level `await` on one event loop); its shell blocks run their `sf-provider`
commands. The model is the scripted Messages API, answering like a model that uses its tools:
it calls each offered tool once, then answers. The process's environment points every provider
at it (as the `scripted_api` fixture does), so the blocks' own `ProviderSettings` reach it.

Two rewrites, both of addresses: `sf-provider gateway` gets `--port=0` (a free port, not 8080),
and `http://127.0.0.1:8080` in a Python block becomes the address of the gateway the page's
shell block started, or else of one served for the page (over the same scripted model).
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import gc
import inspect
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from docs_blocks import ROOT, SHELL, Block, blocks, doc_files, problem, runs_here, shell_commands

from sf_provider.gateway import GatewaySettings, create_app
from sf_provider.testing import (
    RecordedRequest,
    Reply,
    ScriptedMessagesAPI,
    offline_env,
    reply,
    text,
    tool_use,
)

pytestmark = pytest.mark.cli

DOCS_GATEWAY = "http://127.0.0.1:8080"
ANSWER = "It is sunny, 21 °C in Paris."


def tool_using_model(request: RecordedRequest) -> Reply:
    """Call the first offered tool not called yet in this conversation, with arguments its
    schema takes; once every tool was called (or with `tool_choice: none`), answer."""
    called = {block["name"] for block in request.tool_uses()}
    choice = request.body.get("tool_choice") or {}
    if choice.get("type") != "none":
        for spec in request.tools:
            if spec["name"] not in called:
                return reply(tool_use(spec["name"], arguments(spec.get("input_schema", {}))))
    return reply(text(ANSWER))


def arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """A value for each property of an object schema (the required ones at least)."""
    properties = schema.get("properties", {})
    return {name: _value(spec) for name, spec in properties.items()}


def _value(spec: dict[str, Any]) -> Any:
    if "enum" in spec:
        return spec["enum"][0]
    kind = spec.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object":
        return arguments(spec)
    return {"integer": 2, "number": 21.0, "boolean": True, "array": []}.get(str(kind), "Paris")


@pytest.mark.parametrize("path", doc_files())
def test_every_block_of_the_page_runs_or_says_why_not(
    path: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    page = blocks(path)
    problems = [p for p in map(problem, page) if p]
    assert not problems, "\n".join(problems)
    runnable = [b for b in page if runs_here(b)]
    if not runnable:
        return
    with ScriptedMessagesAPI(tool_using_model) as api:
        for name, value in offline_env(api.base_url).items():
            monkeypatch.setenv(name, value)
        monkeypatch.chdir(tmp_path)
        _run_page(runnable, api)
        assert api.errors == []


def _run_page(page: list[Block], api: ScriptedMessagesAPI) -> None:
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    with contextlib.ExitStack() as stack:
        gateway = ""
        runner = stack.enter_context(asyncio.Runner())
        for block in page:
            if block.lang in SHELL:
                for command in shell_commands(block):
                    url = _run_command(block, command, stack)
                    gateway = url or gateway
                continue
            code = block.code
            if DOCS_GATEWAY in code:
                if not gateway:
                    gateway = stack.enter_context(_gateway_in_thread(api))
                code = code.replace(DOCS_GATEWAY, gateway)
            _run_python(block, code, namespace, runner)
        runner.run(_collect(namespace))


async def _collect(namespace: dict[str, Any]) -> None:
    """Drop the page's objects on its own event loop: an async client the page left open (the
    openai and anthropic ones close themselves when collected, by a task on the running loop)
    would otherwise close itself later on another test's loop, where its transport fails."""
    namespace.clear()
    gc.collect()
    closing = asyncio.all_tasks() - {asyncio.current_task()}
    if closing:
        await asyncio.wait(closing, timeout=30)


def _run_python(block: Block, code: str, namespace: dict[str, Any], runner: asyncio.Runner) -> None:
    # Blank lines up to the block's first line, compiled as the page itself: tracebacks name its
    # lines, and `inspect.getsource` (smolagents' @tool reads it) finds the code there.
    source = "\n" * block.line + code
    page = str(ROOT / block.path)
    compiled = compile(source, page, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if compiled.co_flags & inspect.CO_COROUTINE:
        runner.run(eval(compiled, namespace))
    else:
        exec(compiled, namespace)


def _run_command(block: Block, command: list[str], stack: contextlib.ExitStack) -> str:
    """Run one `sf-provider` command; a gateway is started and kept for the page (its URL)."""
    executable = str(Path(sys.executable).with_name("sf-provider"))
    if command[1:2] == ["gateway"]:
        return stack.enter_context(_gateway_process([executable, *command[1:], "--port=0"]))
    done = subprocess.run(
        [executable, *command[1:]], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, f"{block.where}: {command}\n{done.stdout}{done.stderr}"
    return ""


@contextlib.contextmanager
def _gateway_process(command: list[str]) -> Iterator[str]:
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    assert process.stderr is not None
    log = ""
    try:
        for line in process.stderr:
            log += line
            if "Uvicorn running on " in line:
                break
        assert "Uvicorn running on " in log, log
        url = log.split("Uvicorn running on ")[1].split()[0]
        assert httpx.get(f"{url}/healthz", timeout=30).status_code == 200
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        # uvicorn shuts down, then ends by the signal it caught (as `kill` would have); with
        # --offline, by exit status 128 + SIGTERM once the scripted model and its dirs are gone.
        assert process.wait(timeout=60) in (0, -signal.SIGTERM, 128 + signal.SIGTERM), log


@contextlib.contextmanager
def _gateway_in_thread(api: ScriptedMessagesAPI) -> Iterator[str]:
    """The gateway over the scripted model, on its own event loop in a thread: a page's sync
    clients block only their own thread."""
    import uvicorn

    app = create_app(GatewaySettings(provider=api.settings()))
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="docs-gateway", daemon=True)
    thread.start()
    try:
        while not server.started:  # uvicorn offers no event to wait on
            assert thread.is_alive(), "the gateway did not start"
            time.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join()
