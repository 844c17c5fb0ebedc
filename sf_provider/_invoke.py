"""The one invocation layer: every transport calls tools through `invoke_tool`.

Validation against the schema, the gate, the executor (sync or async) under a timeout, result
conversion and error isolation live here and only here, so the SDK bridge, direct calls and other
transports cannot drift apart.

What an executor or a gate raises, by kind:
- an `Exception` is the tool's failure: an error result the model reads;
- `SystemExit` (argparse and click tools exit on bad input) is one too: only the call ends. A
  sync executor's is told apart from the application's own (a signal handler's `sys.exit()`
  running in the event loop's thread while the call waits), which is treated as below;
- cancellation (anyio's) stays cancellation: the caller's cancel scope is honoured. A
  `CancelledError` the executor raises while nothing cancels the call (one leaked from a library,
  or raised by hand) is the tool's failure like an `Exception`: re-raised, it would end the
  transport's task (the query's bridge, `sf-provider serve`) for every later call;
- any other `BaseException` (`KeyboardInterrupt`, `GeneratorExit`, ...) is not the tool's
  business alone: it goes to the interrupt handler of the context the call runs in (a query
  stops and re-raises it to its caller; `sf-provider serve` answers with an error result and
  serves on), and without one it propagates to the direct caller as itself.

Sync executors and gates run in daemon threads of their own (`run_sync_in_daemon_thread`), so
one that blocks (a gate asking a policy service) stalls no other query: a thread cannot be
stopped from outside, so a timed-out or cancelled one goes on until it returns, but it never
keeps the interpreter from exiting, and its `current_call().cancelled` is set so it can stop
early. One deadline, the call's timeout, bounds the gate and the executor together.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import json
import logging
import sys
import threading
import traceback
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from ._text import clip
from ._tracing import ToolTrace, error_type, tool_span
from .gates import CallContext, Gate, GateDecision, GateRequest
from .tools import _CURRENT_CALL, FunctionTool, RunningCall, ToolOutput, _ArgumentsRejected

logger = logging.getLogger("sf_provider.tools")

__all__ = [
    "DEFAULT_MAX_RESULT_CHARS",
    "INTERRUPTS",
    "invoke_tool",
    "run_sync_in_daemon_thread",
    "to_tool_output",
    "truncate_output",
]

T = TypeVar("T")

#: Where a `KeyboardInterrupt` (or another `BaseException` that is neither an `Exception` nor a
#: cancellation) raised by a tool's executor or gate goes. Set in the context tool calls run in:
#: by a query (`CLISession`: the query stops and re-raises it) and by `sf-provider serve` (logged;
#: the call is answered with an error result). None: re-raised to the caller of `invoke_tool`.
INTERRUPTS: contextvars.ContextVar[Callable[[BaseException], None] | None] = contextvars.ContextVar(
    "sf_provider_interrupts", default=None
)

#: The largest tool result (in characters of text) the Claude Code CLI passes to the model when
#: the tool asks for it (`_meta["anthropic/maxResultSizeChars"]`, measured with CLI 2.1.330;
#: without it the CLI replaces anything over 50,000 characters by a preview the model cannot
#: open). Longer results are truncated here, with a marker both the model and the app see.
DEFAULT_MAX_RESULT_CHARS = 500_000


def truncate_output(output: ToolOutput, limit: int | None, tool_name: str) -> ToolOutput:
    """`output` cut to `limit` characters of text, ending with an explicit marker.

    Characters as the Claude Code CLI counts them: UTF-16 code units, so a character outside
    the Basic Multilingual Plane (an emoji) counts 2. Counted in code points, 300,000 emoji
    passed as within the limit, and the CLI replaced them by its preview (measured)."""
    total = sum(_units(str(b.get("text", ""))) for b in output.content if b.get("type") == "text")
    if limit is None or total <= limit:
        return output
    marker = (
        f"\n[truncated by sf-provider: the result of {tool_name!r} has {total} characters; only "
        f"the first {{kept}} are shown (limit {limit}, ProviderSettings.max_result_chars)]"
    )
    budget = max(limit - len(marker.format(kept=limit)), 0)
    content: list[dict[str, Any]] = []
    for block in output.content:
        if block.get("type") != "text":
            content.append(block)
            continue
        piece = _first_units(str(block.get("text", "")), budget)
        budget -= _units(piece)
        if piece:
            content.append({**block, "text": piece})
    kept = limit - len(marker.format(kept=limit))
    note = marker.format(kept=kept)
    last = content[-1] if content else None
    if last is not None and last.get("type") == "text":
        # In the last text block, so the app's joined text and the model's agree to the letter.
        content[-1] = {**last, "text": str(last["text"]) + note}
    else:
        content.append({"type": "text", "text": note})
    logger.warning("result of tool %r truncated from %d to %d characters", tool_name, total, kept)
    return ToolOutput(content=content, is_error=output.is_error)


def _units(text: str) -> int:
    """The length of `text` in UTF-16 code units (JavaScript's `length`, the CLI's measure)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _first_units(text: str, units: int) -> str:
    """The longest start of `text` at most `units` UTF-16 code units long, never half of a
    character outside the Basic Multilingual Plane."""
    if text.isascii():
        return text[:units]
    prefix = text.encode("utf-16-le", "surrogatepass")[: 2 * units].decode(
        "utf-16-le", "surrogatepass"
    )
    if prefix and prefix[-1] != text[len(prefix) - 1]:  # the first half of a surrogate pair
        prefix = prefix[:-1]
    return prefix


def _well_formed(output: ToolOutput) -> ToolOutput:
    """`output` with its text as the model gets it: a lone surrogate (from bytes decoded with
    `surrogateescape`, say) reaches the API as U+FFFD, and a surrogate pair as the character it
    encodes (measured through the CLI), so the app's copy of the result says the same."""
    content = [_well_formed_text(block) for block in output.content]
    if all(new is old for new, old in zip(content, output.content, strict=True)):
        return output
    return ToolOutput(content=content, is_error=output.is_error)


def _well_formed_text(block: dict[str, Any]) -> dict[str, Any]:
    text = block.get("text")
    if not isinstance(text, str):
        return block
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return {**block, "text": text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")}
    return block


def to_tool_output(value: Any) -> ToolOutput:
    """Turn an executor's return value into tool-result content: text as is, an `mcp`
    `CallToolResult` or content block(s) as the result they are, the rest as JSON."""
    if isinstance(value, ToolOutput):
        return value
    if isinstance(value, str):
        return ToolOutput.from_text(value)
    from_mcp = _mcp_output(value)
    if from_mcp is not None:
        return from_mcp
    if isinstance(value, BaseModel):
        return ToolOutput.from_text(value.model_dump_json())
    if inspect.isasyncgen(value):  # its repr would go to the model as the result
        raise TypeError(
            "it is an async generator; a tool returns one result: collect the items and return "
            "them (e.g. a list)"
        )
    encoded = json.dumps(to_jsonable_python(value, fallback=repr), ensure_ascii=False)
    return ToolOutput.from_text(encoded)


def _mcp_output(value: Any) -> ToolOutput | None:
    """`value` as a result when it is an `mcp` `CallToolResult`, a content block or a list of
    them (a tool written for an MCP server returns these): its `is_error` and its blocks kept,
    not its JSON as the text of a success. `structuredContent` with no text block becomes one
    (the model reads text). A block the model cannot receive (audio, resources) fails loudly
    in `ToolOutput`. None for anything else; `mcp` is never imported here."""
    mcp_types = sys.modules.get("mcp_types")
    if mcp_types is None:  # nothing of `mcp` was built in this process
        return None
    blocks_types = (mcp_types.TextContent, mcp_types.ImageContent, mcp_types.AudioContent,
                    mcp_types.ResourceLink, mcp_types.EmbeddedResource)  # fmt: skip
    if isinstance(value, mcp_types.CallToolResult):
        blocks = [b.model_dump(by_alias=True, exclude_none=True) for b in value.content]
        if value.structured_content is not None and not any(b["type"] == "text" for b in blocks):
            blocks.append({"type": "text", "text": json.dumps(value.structured_content)})
        return ToolOutput(content=blocks, is_error=bool(value.is_error))
    items = value if isinstance(value, list) and value else [value]
    if not all(isinstance(item, blocks_types) for item in items):
        return None
    return ToolOutput(content=[b.model_dump(by_alias=True, exclude_none=True) for b in items])


class _ToolExit(Exception):
    """An executor called `sys.exit()`: a failure of the call, raised in place of its
    `SystemExit` so that it is never mistaken for the application's own."""

    def __init__(self, exit: SystemExit) -> None:
        super().__init__(exit.code)
        self.exit = exit


class _ToolCancelled(Exception):
    """An executor raised a `CancelledError` while nothing cancelled its call: a failure of the
    call, raised in place of it so that the transport's task is not taken for cancelled."""

    def __init__(self, exit: BaseException) -> None:
        super().__init__(str(exit))
        self.exit = exit


def _cancelling() -> bool:
    """Whether this task is being cancelled (a cancel scope, a timeout, the caller): only then
    is a `CancelledError` cancellation. anyio cancels asyncio tasks with `Task.cancel()`."""
    import asyncio

    try:
        task = asyncio.current_task()
    except RuntimeError:  # not asyncio (trio's Cancelled cannot be raised by user code)
        return True
    return task is None or task.cancelling() > 0


def _log_failure(message: str, exc: BaseException) -> None:
    """`message` and the traceback, on the `sf_provider.tools` logger; for an exception whose
    own message is long (a 10 MB one was logged whole), the frames only, after `message`,
    which holds it clipped (`_describe`)."""
    try:
        short = len(str(exc)) <= _SHOWN_MESSAGE
    except Exception:  # unreadable (`_describe`): the traceback says "<exception str() failed>"
        short = True
    if short:
        logger.warning(message, exc_info=exc)
        return
    frames = "".join(traceback.format_tb(exc.__traceback__)).rstrip()
    logger.warning("%s\nTraceback (most recent call last):\n%s", message, frames)


#: The longest exception message a failure's text and log record repeat.
_SHOWN_MESSAGE = 2000


def _describe(exc: BaseException) -> str:
    """`Type: message`, with the exit code for `SystemExit`."""
    if isinstance(exc, _ToolExit | _ToolCancelled):
        exc = exc.exit
    try:
        if isinstance(exc, SystemExit):  # `sys.exit(message)` takes a message too
            return f"SystemExit: exit code {clip(repr(exc.code), _SHOWN_MESSAGE)}"
        text = clip(str(exc), _SHOWN_MESSAGE)
    except Exception as failure:  # a `__str__` naming an attribute `__init__` never set, say
        read = "repr() of its code" if isinstance(exc, SystemExit) else "str()"
        why = f"{read} raised {type(failure).__name__}"
        return f"{type(exc).__name__} (its message cannot be shown: {why})"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def _gate_denial(gate: Gate, call: RunningCall, args: dict[str, Any]) -> str | None:
    """None when the gate allows the call, else the reason it was denied.

    The gate runs as an executor does (`_run`: a sync one in a thread of its own, so a gate
    waiting on a policy service stalls no other query). It is asked about a copy of the
    arguments: the executor gets exactly the ones validated, and a gate that changes its copy
    denies the call, loudly, rather than having its rewrite dropped without a word."""
    tool = call.tool
    asked = _containers_copied(args)
    try:
        request = GateRequest(tool=tool, arguments=asked, context=call.context)
        decision = await _run(call, gate, request)
    except Exception as exc:  # a broken gate must not open the door
        logger.warning("safety gate raised for tool %r", tool.name, exc_info=True)
        return f"the gate failed ({_describe(exc)})"
    if isinstance(decision, GateDecision):
        denial = None if decision.allowed else (decision.reason or "no reason given")
    elif isinstance(decision, bool):
        denial = None if decision else "no reason given"
    else:
        denial = f"the gate answered {type(decision).__name__}, not a GateDecision or bool"
    if denial is None and asked != args:
        return (
            "the gate changed the arguments it was asked about; a gate decides on the validated "
            "arguments and cannot rewrite them"
        )
    return denial


def _containers_copied(value: Any) -> Any:
    """`value` with each dict and list in it copied (a call's arguments nest at most
    `ARGUMENT_DEPTH_LIMIT` levels, checked before); anything else is shared, as JSON's other
    values are immutable."""
    if isinstance(value, dict):
        return {key: _containers_copied(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_containers_copied(item) for item in value]
    return value


async def invoke_tool(
    tool: FunctionTool,
    arguments: Mapping[str, Any] | None,
    *,
    default_timeout: float | None,
    gate: Gate | None = None,
    context: CallContext | None = None,
    max_result_chars: int | None = None,
) -> ToolOutput:
    """Run `tool` with `arguments`; never raises for a tool failure, returns an error result.

    - arguments that violate the schema never reach the executor;
    - a `mutating` tool runs only if `gate` (when there is one) allows it; the gate is asked
      about a copy of the validated arguments, and one that changes them denies the call;
    - the gate and the executor run under one deadline, `tool.timeout` or else
      `default_timeout` seconds; when the call is given up (timeout, cancellation, interrupt)
      `current_call().cancelled` is set;
    - an exception, `SystemExit` or a timeout becomes an error result naming the tool and the
      cause, logged on the `sf_provider.tools` logger;
    - another `BaseException` that is not a cancellation goes to `INTERRUPTS` (see the module);
    - a result longer than `max_result_chars` is truncated with an explicit marker;
    - text that is not well-formed Unicode becomes what the model gets (`_well_formed`);
    - each call is one `execute_tool` span when tracing is configured (`_tracing`), failed with
      the reason's `error.type` (`gate_denied`, `timeout`, ...) when the call failed.
    """
    context = context or CallContext()
    with tool_span(tool, context, arguments) as span:
        output = await _invoke(
            tool, dict(arguments or {}), span, default_timeout, gate, context, max_result_chars
        )
        output = _well_formed(output)
        span.done(output)
        return output


async def _invoke(
    tool: FunctionTool,
    args: dict[str, Any],
    span: ToolTrace,
    default_timeout: float | None,
    gate: Gate | None,
    context: CallContext,
    max_result_chars: int | None,
) -> ToolOutput:
    if tool.executor is None:
        message = f"tool {tool.name!r} has no executor in this process; the application runs it"
        logger.warning(message)
        span.failed("no_executor", message)
        return ToolOutput.from_text(message, is_error=True)
    problems = tool.argument_errors(args)
    if problems:
        return _invalid_arguments(tool, args, problems, span)
    call = RunningCall(tool, context)
    try:
        return await _gated_call(call, args, gate, default_timeout, max_result_chars, span)
    except anyio.get_cancelled_exc_class():
        call.cancelled.set()
        raise
    except BaseException as exc:  # not an Exception (those are results already): see the module
        call.cancelled.set()
        handler = INTERRUPTS.get()
        if handler is None:
            raise
        message = f"Tool {tool.name!r} failed: {_describe(exc)}"
        _log_failure(message, exc)
        handler(exc)
        span.failed(error_type(exc), message)
        return ToolOutput.from_text(message, is_error=True)


def _invalid_arguments(
    tool: FunctionTool, args: dict[str, Any], problems: list[str], span: ToolTrace
) -> ToolOutput:
    """The error result of a call whose arguments the schema (or the function's types) reject."""
    message = f"Invalid arguments for tool {tool.name!r}: " + "; ".join(problems)
    logger.warning("%s (arguments: %.500s)", message, json.dumps(args, default=repr))
    span.failed("invalid_arguments", message)
    return ToolOutput.from_text(message, is_error=True)


async def _gated_call(
    call: RunningCall,
    args: dict[str, Any],
    gate: Gate | None,
    default_timeout: float | None,
    max_result_chars: int | None,
    span: ToolTrace,
) -> ToolOutput:
    tool = call.tool
    timeout = tool.timeout if tool.timeout is not None else default_timeout
    asking = gate if tool.mutating else None  # None once the gate has decided
    try:
        # One deadline for the gate and the executor: the call's timeout bounds the whole call.
        # move_on_after, not fail_after: an executor's own TimeoutError is its failure, not ours.
        with anyio.move_on_after(timeout) as deadline:
            if asking is not None:
                denial = await _gate_denial(asking, call, args)
                if denial is not None:
                    message = f"Tool {tool.name!r} was denied by the safety gate: {denial}"
                    logger.warning("%s (transport: %s)", message, call.context.transport)
                    span.failed("gate_denied", message)
                    return ToolOutput.from_text(message, is_error=True)
                asking = None
            value = await _run(call, tool.executor, args)
        if deadline.cancelled_caught:
            call.cancelled.set()
            message = f"Tool {tool.name!r} timed out after {timeout:g} s"
            if asking is not None:
                message += " waiting for the safety gate to decide; it did not run"
            logger.warning(message)
            span.failed("timeout", message)
            return ToolOutput.from_text(message, is_error=True)
    except _ArgumentsRejected as exc:  # `from_function`: the function's types refused them
        return _invalid_arguments(tool, args, exc.problems, span)
    except Exception as exc:
        message = f"Tool {tool.name!r} failed: {_describe(exc)}"
        _log_failure(message, exc)
        raised = exc.exit if isinstance(exc, _ToolExit | _ToolCancelled) else exc
        span.failed(error_type(raised), message)
        return ToolOutput.from_text(message, is_error=True)
    try:
        return truncate_output(to_tool_output(value), max_result_chars, tool.name)
    except Exception as exc:  # a value that cannot be encoded is the executor's failure too
        message = f"Tool {tool.name!r} returned a value that cannot be sent: {exc}"
        logger.warning(message)
        span.failed("invalid_result", message)
        return ToolOutput.from_text(message, is_error=True)


async def _run(call: RunningCall, fn: Callable[[Any], Any] | None, argument: Any) -> Any:
    """What `fn(argument)` gives, the executor's or the gate's: a coroutine function awaited
    in this task, anything else in a daemon thread of its own (so it blocks no other task),
    its awaitable awaited. `current_call()` gives it `call` (in its thread or task)."""
    assert fn is not None
    token = _CURRENT_CALL.set(call)
    try:
        if inspect.iscoroutinefunction(fn):
            return await _awaited(fn(argument))
        # A thread's SystemExit comes back as `_ToolExit`; one raised here while it runs is
        # the application's (a signal handler's), not the tool's.
        value = await run_sync_in_daemon_thread(fn, argument)
        if inspect.isawaitable(value):  # an async `__call__`, a lambda returning a coroutine
            value = await _awaited(value)
        return value
    except anyio.get_cancelled_exc_class() as exc:
        if _cancelling():
            raise
        raise _ToolCancelled(exc) from exc
    finally:
        _CURRENT_CALL.reset(token)


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    """What an async executor's awaitable gives; its `SystemExit` is the call's failure."""
    try:
        return await awaitable
    except SystemExit as exc:
        raise _ToolExit(exc) from exc


async def run_sync_in_daemon_thread(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` in a new daemon thread, in a copy of this task's context (contextvars).

    Unlike anyio's worker threads (which Python waits for at exit), a daemon thread never keeps
    the interpreter alive: a sync executor that hangs is left behind when the process ends.
    Cancelling this wait abandons the thread; it runs on until `fn` returns, and its outcome is
    dropped. What `fn` raises is raised here, `BaseException`s included, except that a
    `SystemExit` (which in a thread ends only the thread) is raised as a failure, `_ToolExit`.
    """
    import anyio.from_thread  # here: `import sf_provider` does not load it

    token = anyio.lowlevel.current_token()
    done = anyio.Event()
    outcome: list[tuple[bool, Any]] = []
    context = contextvars.copy_context()
    with contextlib.suppress(ImportError):  # as anyio's workers: no async library in the thread
        import sniffio

        context.run(sniffio.current_async_library_cvar.set, None)

    def work() -> None:
        try:
            outcome.append((True, context.run(fn, *args)))
        except BaseException as exc:  # carried to the awaiting task, raised there
            outcome.append((False, exc))
        with contextlib.suppress(Exception):  # the event loop is gone: nobody is waiting
            anyio.from_thread.run_sync(done.set, token=token)

    threading.Thread(target=work, name=f"sf-provider-tool-{_name(fn)}", daemon=True).start()
    await done.wait()
    ok, value = outcome[0]
    if ok:
        result: T = value
        return result
    if isinstance(value, SystemExit):
        raise _ToolExit(value) from value
    raise value


def _name(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__name__", type(fn).__name__))
