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
  holds it; `read_only` / `mutating` tools carry `readOnlyHint` / `destructiveHint`. Each tool
  asks a Claude Code client to pass results of up to 500,000 characters on whole
  (`_meta["anthropic/maxResultSizeChars"]`; without it the CLI gives the model a preview of
  anything over 50,000); results are never truncated here, other clients get them whole.
  A tool name longer than 56 characters is served, with a warning on stderr at start-up: a
  Claude Code client names it `mcp__<server>__<name>`, longer than the 64 characters the
  Messages API takes.
- `tools/call` goes through `invoke_tool`: arguments are checked against the schema, a
  `mutating` tool runs only if the registry's gate allows it (the gate sees
  `CallContext(transport="stdio")`), and the gate and the executor together run under the
  tool's own `timeout` or else `--timeout` seconds. Invalid arguments, a denial (`Tool 'x' was
  denied by the safety gate: <reason>`), an exception (`Tool 'x' failed: <Type>: <message>`)
  and a timeout (`Tool 'x' timed out after <n> s`, `... waiting for the safety gate to decide;
  it did not run`) are tool results with `isError: true`; the server keeps serving.
- A tool that calls `sys.exit()` (argparse and click do on bad input) gets the error result
  `Tool 'x' failed: SystemExit: exit code <code>`; one that raises `KeyboardInterrupt` (or
  another `BaseException` that is not a cancellation, such as `GeneratorExit`) gets `Tool 'x'
  failed: KeyboardInterrupt`, and a warning goes to stderr. Neither stops the server: a tool
  cannot stop it, only the end of stdin or a signal does (a real Ctrl-C is a SIGINT, below).
- An unknown tool is the tool result `Unknown tool 'x'; tools: a, b, c` with `isError: true`
  (not a JSON-RPC error), so a model can read it and pick another tool.
- A line on stdin that is not a JSON-RPC message is answered with the JSON-RPC error -32700
  "Parse error" (not JSON) or -32600 "Invalid Request" (JSON, but no request, notification or
  response; batches too), with the request's id when it has a usable one, else `null`, and a
  warning on stderr; the server keeps serving.
- stdout carries only newline-delimited JSON-RPC, of any size (10 MiB messages are tested; the
  stdio transport has no line limit). Logs go to stderr. While serving, fd 1 points at stderr
  (the `mcp` transport diverts it), so a stray `print` in a tool cannot corrupt the wire, and
  fd 0 points at `/dev/null`, so a tool or its child processes cannot eat protocol bytes.
- Exit status: 0 at the end of stdin, on SIGTERM or SIGINT (the Claude Code CLI stops its
  stdio servers with SIGINT), and when the client stops reading stdout (killed, say: the next
  answer meets a broken pipe; one line on stderr, no traceback). Calls still in flight then
  are cancelled; at the end of stdin the `mcp` server answers them with the JSON-RPC error
  -32000 "Connection closed", so a client reads its answers before closing stdin. Sync
  executors still running in their (daemon) threads, timed out or cancelled, are not waited
  for.
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
import contextvars
import fcntl
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any, Protocol, cast

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectSendStream
from mcp import types
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from ._bridge import build_mcp_server
from ._invoke import INTERRUPTS
from ._text import clip
from ._tracing import flush
from .cli import enabled_tools_or_none, load_tools_option
from .tools import API_NAME_LIMIT, FunctionTool

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
    # No result limit here: MCP clients other than the Claude Code CLI take any size. The
    # listing still asks a Claude Code client for its largest (`_bridge._wire_tool`).
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
    _warn_of_names_claude_code_cannot_call(tools)
    anyio.run(_serve, server)
    _leave_tool_threads_behind()
    return 0


def _warn_of_names_claude_code_cannot_call(tools: list[FunctionTool]) -> None:
    """A warning naming the tools whose names are too long for a Claude Code client, which
    calls them `mcp__<server>__<name>` (its key for this server, at least one character) and
    sends that name to the Messages API, which takes at most `API_NAME_LIMIT` characters: the
    API would refuse every request of that client, not only the calls of these tools."""
    longest = API_NAME_LIMIT - len("mcp__x__")
    too_long = [t.name for t in tools if len(t.name) > longest]
    if too_long:
        logger.warning(
            "%d tool name(s) longer than %d characters, which a Claude Code client cannot "
            "offer its model (it names a tool mcp__<server>__<name>, and the Messages API "
            "takes at most %d characters): %s. Shorten them.",
            len(too_long),
            longest,
            API_NAME_LIMIT,
            ", ".join(too_long),
        )


async def _serve(server: Server[Any]) -> None:
    INTERRUPTS.set(_answer_and_serve_on)  # inherited by the task of every call
    try:
        async with anyio.create_task_group() as serving:
            await serving.start(_cancel_on_signal, serving.cancel_scope)
            with _claimed_stdin() as fd:
                # The transport types `stdin` as an AsyncFile but only iterates it line by line.
                lines = cast("anyio.AsyncFile[str]", _StdinLines(fd))
                async with stdio_server(stdin=lines) as (read_stream, write_stream):
                    try:
                        await server.run(
                            _AnsweringUnreadable(read_stream, write_stream),
                            write_stream,
                            server.create_initialization_options(),
                        )
                    finally:
                        # Buffered stray prints land on stderr now, never on the wire after
                        # restore.
                        with contextlib.suppress(OSError, ValueError):
                            sys.stdout.flush()
            serving.cancel_scope.cancel()  # end of stdin: stop the signal watcher
    except* BrokenPipeError:
        # The client is gone (killed, say) while an answer was being written: the end of the
        # connection, as the end of stdin is. The calls still running were cancelled.
        logger.info("the client closed its end of stdout: shutting down")


class _Receiving(Protocol):
    async def receive(self) -> SessionMessage | Exception: ...
    def close(self) -> None: ...
    async def aclose(self) -> None: ...


class _Sending(Protocol):
    async def send(self, item: SessionMessage, /) -> None: ...


class _AnsweringUnreadable:
    """The transport's read stream, minus the lines it could not read, each answered.

    The `mcp` transport hands a line that is not a JSON-RPC message to the server as an
    exception, which the server drops without a word; a client would wait for ever for the
    answer to a request it garbled. Each such line gets the JSON-RPC answer instead (-32700
    "Parse error" for a line that is not JSON, -32600 "Invalid Request" otherwise, with the
    request's id when it has a usable one) and a warning on stderr.
    """

    def __init__(self, inner: _Receiving, answers: _Sending) -> None:
        self._inner = inner
        self._answers = answers

    @property
    def last_context(self) -> contextvars.Context | None:
        """The sender context of the last message (the `mcp` server runs handlers in it)."""
        context: contextvars.Context | None = getattr(self._inner, "last_context", None)
        return context

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            answer = SessionMessage(_unreadable_answer(item))
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await self._answers.send(answer)  # unless the connection is ending

    def __aiter__(self) -> _AnsweringUnreadable:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _AnsweringUnreadable:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _unreadable_answer(exc: Exception) -> types.JSONRPCError:
    """The JSON-RPC error answering a line the transport could not read (`exc`), logged."""
    errors = exc.errors() if isinstance(exc, ValidationError) else []
    if any(e["type"] == "json_invalid" for e in errors) or not errors:
        code, message = types.PARSE_ERROR, "Parse error"
        detail = f"the line is not JSON: {errors[0]['msg'] if errors else exc}"
        shown = errors[0]["input"] if errors else ""
        id_: str | int | None = None
    else:
        code, message = types.INVALID_REQUEST, "Invalid Request"
        detail = "the line is not a JSON-RPC 2.0 request, notification or response"
        shown = errors[0]["input"]
        # A field missing at the top carries the whole message object: the id of a request,
        # if usable (a broken response is never answered with its own id).
        whole = [
            e["input"]
            for e in errors
            if e["type"] == "missing" and len(e["loc"]) == 2 and isinstance(e["input"], dict)
        ]
        candidate = whole[0].get("id") if whole and "method" in whole[0] else None
        usable = isinstance(candidate, str | int) and not isinstance(candidate, bool)
        id_ = candidate if usable else None
    logger.warning(
        "unreadable message on stdin (%s): %s: %s", message, detail, clip(repr(shown), 200)
    )
    return types.JSONRPCError(
        jsonrpc="2.0", id=id_, error=types.ErrorData(code=code, message=message, data=detail)
    )


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
    limit. A last line without a newline is still delivered. Blank lines (a client's keep-alive,
    say, or a CRLF's `\r`) are no messages: skipped, never answered as unreadable.
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
                    line = pending[start:end]
                    if line.strip():
                        yield line.decode("utf-8", "replace")
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
