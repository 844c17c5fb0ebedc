"""Safety gates: the application's say on every call of a mutating tool.

A gate is a sync or async callable taking a `GateRequest` and answering a `GateDecision` (or a
bool). It is enforced inside the one invocation layer, so a direct call, the per-query SDK bridge
and the stdio MCP server deny the same call with the same result: an error tool result the model
can read (`Tool 'x' was denied by the safety gate: <reason>`) and a record on the
`sf_provider.tools` logger. A gate that raises denies (fail closed). Tools not marked `mutating`
never reach the gate. Without a gate, mutating tools run.

A sync gate runs in a thread of its own, as a sync executor does (it blocks no other query;
`current_call().cancelled` is set when the call is given up); the call's timeout bounds the gate
and the executor together. `GateRequest.arguments` is a copy of the validated arguments: a gate
that changes it denies the call (the executor gets exactly what the schema accepted).

Example::

    def gate(request: GateRequest) -> GateDecision:
        if request.tool.name == "delete_file" and request.arguments["path"].startswith("/etc"):
            return GateDecision.deny("system files are off limits")
        return GateDecision.allow()

    registry = ToolRegistry([delete_file], gate=gate)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from .tools import FunctionTool

__all__ = ["CallContext", "Gate", "GateDecision", "GateRequest", "Transport"]

#: How a tool call arrived.
Transport = Literal["direct", "sdk-bridge", "stdio"]


@dataclass(frozen=True)
class CallContext:
    """Facts about one tool call besides its arguments, for gates and logs."""

    transport: Transport = "direct"
    tool_call_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class GateRequest:
    """What a gate decides on: the tool, the validated arguments and the call context.

    `arguments` is the gate's own copy: changing it denies the call, never rewrites it."""

    tool: FunctionTool
    arguments: dict[str, Any]
    context: CallContext


@dataclass(frozen=True)
class GateDecision:
    """A gate's answer; `reason` is shown to the model when the call is denied."""

    allowed: bool
    reason: str = ""

    @classmethod
    def allow(cls, reason: str = "") -> GateDecision:
        """Let the call run."""
        return cls(True, reason)

    @classmethod
    def deny(cls, reason: str) -> GateDecision:
        """Refuse the call, saying why."""
        return cls(False, reason)


#: A safety gate: sync or async, answering a `GateDecision` or a bool.
Gate = Callable[[GateRequest], GateDecision | bool | Awaitable[GateDecision | bool]]
