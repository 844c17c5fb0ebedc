"""`tool_choice`: the provider's type and what it means, once for every front door.

Each door maps its own wire shape to a `ToolChoice` (and OpenAI's `allowed_tools` to a subset of
the request's tools); what a choice means for the request's tools is decided here only, so the
same mistake gets the same words on every door:

- a named tool must be among the request's tools, and only it is exposed;
- `required` needs at least one tool;
- an allowed subset names only tools of the request, at least one, and narrows the tools to it;
- `none` exposes no tool, unless the conversation holds tool calls or results: the Messages
  API refuses those without tool definitions, so then the tools stay defined and calls are
  forbidden (an instruction, and a check of the reply).

Imports neither `provider` nor a wire-format module: they import it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from .errors import UnsupportedRequestError
from .tools import FunctionTool

__all__ = ["NamedToolChoice", "ToolChoice", "exposed_tools", "offered_tools"]


class NamedToolChoice(BaseModel):
    """`tool_choice` naming the one tool the model must call."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    type: Literal["tool"] = "tool"
    name: str


#: How the model may use the tools: `auto` (its choice), `none` (no tool is exposed),
#: `required` (at least one call), or one named tool (only that tool is exposed, and called).
ToolChoice = Literal["auto", "none", "required"] | NamedToolChoice


def _not_offered(name: str, names: Sequence[str]) -> str:
    return (
        f"tool_choice names {name!r}, which is not among the request's tools "
        f"({', '.join(names) or 'none'}); name one of them or offer the tool"
    )


#: The error for `required` without tools (also what an allowed subset without tools says).
REQUIRED_WITHOUT_TOOLS = (
    "tool_choice 'required' needs at least one tool; offer tools or use tool_choice 'auto' or "
    "'none'"
)


def offered_tools(
    tools: Sequence[FunctionTool],
    choice: ToolChoice = "auto",
    *,
    allowed: Collection[str] | None = None,
) -> list[FunctionTool]:
    """The request's tools as `choice` leaves them to offer, checked against it.

    With `allowed` (the names of an allowed subset, such as OpenAI's `allowed_tools`) only those
    tools are offered; every name must be among `tools`, and at least one given. A named
    choice must be among the tools offered, and `required` needs one. `UnsupportedRequestError`
    otherwise, naming the tool and the request's tools. `none` is left to `exposed_tools`,
    which knows the conversation.
    """
    names = [t.name for t in tools]
    if allowed is not None:
        if not allowed:
            raise UnsupportedRequestError(
                "tool_choice allows no tool: name at least one of the request's tools "
                f"({', '.join(names) or 'none'}), or use tool_choice 'none'"
            )
        for name in allowed:
            if name not in names:
                raise UnsupportedRequestError(_not_offered(name, names))
        tools = [t for t in tools if t.name in allowed]
    if isinstance(choice, NamedToolChoice) and choice.name not in [t.name for t in tools]:
        raise UnsupportedRequestError(_not_offered(choice.name, [t.name for t in tools]))
    if choice == "required" and not tools:
        raise UnsupportedRequestError(REQUIRED_WITHOUT_TOOLS)
    return list(tools)


def exposed_tools(
    tools: Sequence[FunctionTool], choice: ToolChoice, *, history_holds_calls: bool
) -> tuple[list[FunctionTool], bool]:
    """The tools the model is shown for `choice`, and whether calls are forbidden.

    `none` exposes no tool, unless the conversation holds tool calls or results
    (`history_holds_calls`): then the tools stay defined (the Messages API refuses those blocks
    without tool definitions) and calls are forbidden. A named choice exposes that tool only.
    Checked as `offered_tools` checks.
    """
    tools = offered_tools(tools, choice)
    if choice == "none":
        if tools and history_holds_calls:
            return tools, True
        return [], False
    if isinstance(choice, NamedToolChoice):
        return [t for t in tools if t.name == choice.name], False
    return tools, False
