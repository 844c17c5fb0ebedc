"""`sf-provider serve`: a tool registry as an MCP server over stdio (POSIX).

The same tools, the same invocation layer and the same safety gate as the per-query SDK bridge,
for any MCP client: the official low-level `mcp` server (`build_mcp_server(...,
transport="stdio")`) over the official `mcp.server.stdio` transport.

Usage::

    sf-provider serve --tools my_app.tools:registry [--name my-app] [--timeout 60]

`--tools` names a `ToolRegistry`, a list of `FunctionTool`, or a callable returning either (see
`ToolRegistry.load`); its enabled tools are served. For the Claude Code CLI (or
`ClaudeAgentOptions.mcp_servers`) it is an external stdio server::

    {"type": "stdio", "command": "sf-provider", "args": ["serve", "--tools", "pkg.mod:tools"]}

Behaviour:
- `tools/list` gives every enabled tool with its `input_schema` exactly as the `FunctionTool`
  holds it; `read_only` / `mutating` tools carry `readOnlyHint` / `destructiveHint`.
- `tools/call` goes through `invoke_tool`: arguments are checked against the schema, a
  `mutating` tool runs only if the registry's gate allows it (the gate sees
  `CallContext(transport="stdio")`), and the executor runs under its own `timeout` or else
  `--timeout` seconds. Invalid arguments, a denial (`Tool 'x' was denied by the safety gate:
  <reason>`), an exception (`Tool 'x' failed: <Type>: <message>`) and a timeout (`Tool 'x' timed
  out after <n> s`) are tool results with `isError: true`; the server keeps serving.
- A tool that calls `sys.exit()` (argparse and click do on bad input) gets the error result
  `Tool 'x' failed: SystemExit: exit code <code>`; one that raises `KeyboardInterrupt` (or
  another `BaseException` that is not a cancellation, such as `GeneratorExit`) gets `Tool 'x'
  failed: KeyboardInterrupt`, and a warning goes to stderr. Neither stops the server: a tool
  cannot stop it, only the end of stdin or a signal does (a real Ctrl-C is a SIGINT, below).
- An unknown tool is the tool result `Unknown tool 'x'; tools: a, b, c` with `isError: true`
  (not a JSON-RPC error), so a model can read it and pick another tool.
- stdout carries only newline-delimited JSON-RPC, of any size (10 MiB messages are tested; the
  stdio transport has no line limit). Logs go to stderr. While serving, fd 1 points at stderr
  (the `mcp` transport diverts it), so a stray `print` in a tool cannot corrupt the wire, and
  fd 0 points at `/dev/null`, so a tool or its child processes cannot eat protocol bytes.
- Exit status: 0 at the end of stdin and on SIGTERM or SIGINT (the Claude Code CLI stops its
  stdio servers with SIGINT). Calls still in flight then are cancelled; at the end of stdin
  the `mcp` server answers them with the JSON-RPC error -32000 "Connection closed", so a
  client reads its answers before closing stdin. Sync executors still running in their
  (daemon) threads, timed out or cancelled, are not waited for.
- Exit status 2, before anything is served and with the reason on stderr (one line, no
  traceback): `--tools` cannot be loaded (a module that fails on import adds its traceback), an
  `SF_PROVIDER_GROUP_<NAME>` switch cannot be read (groups are read once, at start-up), or an
  option's value is unusable: `--timeout` must be a number of seconds above 0 (`inf`: no limit),
  `--name` must not be empty.

Why stdin is read here and not by `mcp.server.stdio`: its reader blocks in `readline()` in a
worker thread that cannot be cancelled, so after a SIGTERM the server would only exit at the next
line or end of input. This module reads fd 0 in a daemon thread instead and hands the lines to
the official transport, which still writes stdout and diverts the standard descriptors.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server import Server
from mcp.server.stdio import stdio_server

from ._bridge import build_mcp_server
from ._invoke import INTERRUPTS
from ._tracing import flush
from .cli import enabled_tools_or_none, load_tools_option

__all__ = ["run_serve"]

logger = logging.getLogger("sf_provider.serve")

#: Exit status when `--tools` cannot be loaded, or its tools cannot be listed (an unreadable
#: `SF_PROVIDER_GROUP_<NAME>` switch): a usage error, as argparse uses.
EXIT_BAD_TOOLS = 2

_READ_SIZE = 1 << 16
# How long shutdown waits for tool threads to wind down before leaving them behind.
_THREAD_GRACE = 0.25


def run_serve(args: argparse.Namespace) -> int:
    """Serve `args.tools` over stdio until the end of stdin or SIGTERM; the exit status."""
    registry = load_tools_option("serve", args.tools)
    if registry is None:
        return EXIT_BAD_TOOLS
    tools = enabled_tools_or_none("serve", registry)  # groups are read once, here
    if tools is None:
        return EXIT_BAD_TOOLS
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logger.setLevel(logging.INFO)
    # No result limit here: MCP clients other than the Claude Code CLI take any size (a Claude
    # Code client applies its own, unless the tool asks otherwise).
    server = build_mcp_server(
        args.name,
        tools,
        default_timeout=args.timeout,
        gate=registry.gate,
        transport="stdio",
        max_result_chars=None,
    )
    logger.info(
        "serving %d tool(s) as %r over stdio: %s",
        len(tools),
        args.name,
        ", ".join(t.name for t in tools) or "none",
    )
    anyio.run(_serve, server)
    _leave_tool_threads_behind()
    return 0


async def _serve(server: Server[Any]) -> None:
    INTERRUPTS.set(_answer_and_serve_on)  # inherited by the task of every call
    async with anyio.create_task_group() as serving:
        await serving.start(_cancel_on_signal, serving.cancel_scope)
        with _claimed_stdin() as fd:
            # The transport types `stdin` as an AsyncFile but only iterates it line by line.
            lines = cast("anyio.AsyncFile[str]", _StdinLines(fd))
            async with stdio_server(stdin=lines) as (read_stream, write_stream):
                try:
                    await server.run(
                        read_stream, write_stream, server.create_initialization_options()
                    )
                finally:
                    # Buffered stray prints land on stderr now, never on the wire after restore.
                    with contextlib.suppress(OSError, ValueError):
                        sys.stdout.flush()
        serving.cancel_scope.cancel()  # end of stdin: stop the signal watcher


def _answer_and_serve_on(exc: BaseException) -> None:
    """A tool raised `exc` (a `KeyboardInterrupt`, say): its call is answered with an error
    result and the server goes on; a tool's exception is never the end of the server."""
    logger.warning(
        "a tool raised %s; its call was answered with an error result, still serving",
        type(exc).__name__,
    )


async def _cancel_on_signal(
    scope: anyio.CancelScope,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        task_status.started()
        async for signum in signals:
            logger.info("%s received: shutting down", signal.Signals(signum).name)
            scope.cancel()
            return


@contextlib.contextmanager
def _claimed_stdin() -> Iterator[int]:
    """A private descriptor for the wire; fd 0 reads `/dev/null` meanwhile.

    The private descriptor is never closed: the reader thread may still block on it after
    shutdown, and a recycled descriptor number could feed it someone else's data.
    """
    private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    try:
        yield private
    finally:
        os.dup2(private, 0)


class _StdinLines:
    """The lines of a descriptor as text, read by a daemon thread so a wait is cancellable.

    Lines are split on bytes (a UTF-8 sequence never holds a newline byte) and have no size
    limit. A last line without a newline is still delivered.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def __aiter__(self) -> AsyncIterator[str]:
        send, receive = anyio.create_memory_object_stream[bytes](1)
        threading.Thread(
            target=_pump,
            args=(self._fd, send, anyio.lowlevel.current_token()),
            name="sf-provider-serve-stdin",
            daemon=True,
        ).start()
        pending = bytearray()
        with receive:
            async for chunk in receive:
                if not chunk:
                    break
                scan_from = len(pending)
                pending += chunk
                start = 0
                while (end := pending.find(b"\n", scan_from)) >= 0:
                    yield pending[start:end].decode("utf-8", "replace")
                    start = scan_from = end + 1
                del pending[:start]
        if pending.strip():
            yield pending.decode("utf-8", "replace")


def _pump(
    fd: int, send: MemoryObjectSendStream[bytes], token: anyio.lowlevel.EventLoopToken
) -> None:
    """Reader thread: forward chunks of `fd` to the event loop; an empty chunk means EOF."""
    with contextlib.suppress(Exception):  # the loop or the stream is gone: nobody is listening
        while True:
            try:
                chunk = os.read(fd, _READ_SIZE)
            except OSError as exc:
                logger.warning("reading stdin failed: %s", exc)
                chunk = b""
            anyio.from_thread.run(send.send, chunk, token=token)
            if not chunk:
                return


def _leave_tool_threads_behind() -> None:
    """Exit now if tool threads still run, instead of waiting for them at exit.

    Sync executors run in daemon threads, which Python does not wait for; threads a tool started
    itself (`anyio.to_thread` in an async executor, say) may not be, and a hung one would keep
    the server alive forever. Leaving ends the process with `os._exit`, so `atexit` handlers do
    not run then.
    """
    until = time.monotonic() + _THREAD_GRACE
    for thread in threading.enumerate():
        if thread is threading.main_thread() or thread.daemon:
            continue
        thread.join(max(0.0, until - time.monotonic()))
    running = [
        t
        for t in threading.enumerate()
        if t is not threading.main_thread() and not t.daemon and t.is_alive()
    ]
    if running:
        logger.warning(
            "%d tool thread(s) still running at shutdown (started by timed-out or "
            "cancelled tools); exiting without waiting for them",
            len(running),
        )
        flush()  # no atexit after os._exit: the spans still buffered go now
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
