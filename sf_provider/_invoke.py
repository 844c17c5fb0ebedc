"""The one invocation layer: every transport calls tools through `invoke_tool`.

Validation against the schema, the executor (sync or async) under a timeout, result conversion
and error isolation live here and only here, so the SDK bridge, direct calls and other transports
cannot drift apart.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Mapping
from typing import Any

import anyio
import anyio.to_thread
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from .gates import CallContext, Gate, GateDecision, GateRequest
from .tools import FunctionTool, ToolOutput

logger = logging.getLogger("sf_provider.tools")

__all__ = ["DEFAULT_MAX_RESULT_CHARS", "invoke_tool", "to_tool_output", "truncate_output"]

#: The largest tool result (in characters of text) the Claude Code CLI passes to the model when
#: the tool asks for it (`_meta["anthropic/maxResultSizeChars"]`, measured with CLI 2.1.330;
#: without it the CLI replaces anything over 50,000 characters by a preview the model cannot
#: open). Longer results are truncated here, with a marker both the model and the app see.
DEFAULT_MAX_RESULT_CHARS = 500_000


def truncate_output(output: ToolOutput, limit: int | None, tool_name: str) -> ToolOutput:
    """`output` cut to `limit` characters of text, ending with an explicit marker."""
    total = sum(len(str(b.get("text", ""))) for b in output.content if b.get("type") == "text")
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
        piece = str(block.get("text", ""))[:budget]
        budget -= len(piece)
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


def to_tool_output(value: Any) -> ToolOutput:
    """Turn an executor's return value into tool-result content: text as is, the rest as JSON."""
    if isinstance(value, ToolOutput):
        return value
    if isinstance(value, str):
        return ToolOutput.from_text(value)
    if isinstance(value, BaseModel):
        return ToolOutput.from_text(value.model_dump_json())
    encoded = json.dumps(to_jsonable_python(value, fallback=repr), ensure_ascii=False)
    return ToolOutput.from_text(encoded)


async def _gate_denial(
    gate: Gate, tool: FunctionTool, args: dict[str, Any], context: CallContext
) -> str | None:
    """None when the gate allows the call, else the reason it was denied."""
    try:
        decision = gate(GateRequest(tool=tool, arguments=args, context=context))
        if inspect.isawaitable(decision):
            decision = await decision
    except Exception as exc:  # a broken gate must not open the door
        logger.warning("safety gate raised for tool %r", tool.name, exc_info=True)
        return f"the gate failed ({type(exc).__name__}: {exc})"
    if isinstance(decision, GateDecision):
        return None if decision.allowed else (decision.reason or "no reason given")
    if isinstance(decision, bool):
        return None if decision else "no reason given"
    return f"the gate answered {type(decision).__name__}, not a GateDecision or bool"


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
    - a `mutating` tool runs only if `gate` (when there is one) allows it;
    - the executor runs under `tool.timeout` or else `default_timeout` seconds;
    - an exception or a timeout becomes an error result naming the tool and the cause, logged on
      the `sf_provider.tools` logger;
    - a result longer than `max_result_chars` is truncated with an explicit marker.
    """
    args = dict(arguments or {})
    if tool.executor is None:
        message = f"tool {tool.name!r} has no executor in this process; the application runs it"
        logger.warning(message)
        return ToolOutput.from_text(message, is_error=True)
    problems = tool.argument_errors(args)
    if problems:
        message = f"Invalid arguments for tool {tool.name!r}: " + "; ".join(problems)
        logger.warning("%s (arguments: %.500s)", message, json.dumps(args, default=repr))
        return ToolOutput.from_text(message, is_error=True)
    if gate is not None and tool.mutating:
        context = context or CallContext()
        denial = await _gate_denial(gate, tool, args, context)
        if denial is not None:
            message = f"Tool {tool.name!r} was denied by the safety gate: {denial}"
            logger.warning("%s (transport: %s)", message, context.transport)
            return ToolOutput.from_text(message, is_error=True)
    timeout = tool.timeout if tool.timeout is not None else default_timeout
    executor = tool.executor
    try:
        # move_on_after, not fail_after: an executor's own TimeoutError is its failure, not ours.
        with anyio.move_on_after(timeout) as deadline:
            if inspect.iscoroutinefunction(executor):
                value = await executor(args)
            else:
                value = await anyio.to_thread.run_sync(executor, args, abandon_on_cancel=True)
                if inspect.isawaitable(value):
                    value = await value
        if deadline.cancelled_caught:
            message = f"Tool {tool.name!r} timed out after {timeout:g} s"
            logger.warning(message)
            return ToolOutput.from_text(message, is_error=True)
    except Exception as exc:
        message = f"Tool {tool.name!r} failed: {type(exc).__name__}: {exc}"
        logger.warning(message, exc_info=True)
        return ToolOutput.from_text(message, is_error=True)
    try:
        return truncate_output(to_tool_output(value), max_result_chars, tool.name)
    except Exception as exc:  # a value that cannot be encoded is the executor's failure too
        message = f"Tool {tool.name!r} returned a value that cannot be sent: {exc}"
        logger.warning(message)
        return ToolOutput.from_text(message, is_error=True)
