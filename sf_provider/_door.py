"""The one internal interface of the front doors: what `adapters/` and `gateway/` may use of the
core besides its public modules and the wire formats (`_openai_format`, `_anthropic_format`).

A door parses its wire request into a `Request` (`request(...)`: typed messages, tools, checked
`CallOptions`), runs it (`stream(provider, request)`, the provider's own query) and renders the
parts and the result back into its wire shape with the helpers below:

- the request model (`_request`): typed messages and parts, `CallOptions`, `Request`;
- tool choice (`_tool_choice`): `ToolChoice`, `NamedToolChoice`, `offered_tools`;
- results: `ResultCollector` (parts -> `GenerateResult`), `response_model` (the model that
  answered), `STOP_SEQUENCE_DETAIL`, `STRUCTURED_OUTPUT_TOOL`;
- streaming: `Blocks`, a stream's parts as the content blocks a door writes (`Start`, `Delta`,
  `End` of a `Block`), with the one rule for a stream taken back;
- errors: `classify` (an exception's neutral `ErrorKind` and facts; each door maps kinds to its
  own error types in one table) and `SentParts` (raises `StreamRetractionError` when a stream
  taken back had already been sent);
- `SAMPLING` (the sampling settings, sent as written) and `dropped` (the `parameter-dropped`
  warning of `drop_params`);
- what the wire formats share: `arguments` (a call's JSON arguments), `reasoning` (a
  Messages API thinking block, read) and `thinking_block` (written);
- `thinking_option` (a door's thinking/effort fields -> `CallOptions`), `warn_user`, the sync
  bridges `run_sync` / `iterate_in_thread`, and the gateway's trace hooks.

`tests/unit/test_layers.py` holds the doors to this: they import no other private core module.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._blocks import Block, BlockEvent, Blocks, Delta, End, Start
from ._error_kinds import ErrorFacts, ErrorKind, SentParts, classify
from ._mapping import STRUCTURED_OUTPUT_TOOL, ResultCollector
from ._outcome import STOP_SEQUENCE_DETAIL, response_model
from ._request import (
    AssistantMessage,
    AssistantPart,
    CallOptions,
    Image,
    Message,
    Reasoning,
    Request,
    SystemMessage,
    Text,
    ToolCall,
    ToolMessage,
    ToolResult,
    UserMessage,
    UserPart,
    call_options,
    media_parts,
)
from ._sync import iterate_in_thread, run_sync
from ._thinking import thinking_option
from ._tool_choice import NamedToolChoice, ToolChoice, offered_tools
from ._tracing import continue_trace, flush, refused
from ._warnings import warn_user
from ._wire import SAMPLING, arguments, dropped, reasoning, thinking_block

if TYPE_CHECKING:
    from .provider import ClaudeAgentProvider, QueryStream
    from .tools import FunctionTool

__all__ = [
    "SAMPLING",
    "STOP_SEQUENCE_DETAIL",
    "STRUCTURED_OUTPUT_TOOL",
    "AssistantMessage",
    "AssistantPart",
    "Block",
    "BlockEvent",
    "Blocks",
    "CallOptions",
    "Delta",
    "End",
    "ErrorFacts",
    "ErrorKind",
    "Image",
    "Message",
    "NamedToolChoice",
    "Reasoning",
    "Request",
    "ResultCollector",
    "SentParts",
    "Start",
    "SystemMessage",
    "Text",
    "ToolCall",
    "ToolChoice",
    "ToolMessage",
    "ToolResult",
    "UserMessage",
    "UserPart",
    "arguments",
    "classify",
    "continue_trace",
    "dropped",
    "flush",
    "iterate_in_thread",
    "media_parts",
    "offered_tools",
    "reasoning",
    "request",
    "response_model",
    "run_sync",
    "stream",
    "thinking_block",
    "thinking_option",
    "warn_user",
]


def request(
    messages: Sequence[Message],
    tools: Sequence[FunctionTool] = (),
    *,
    provider: ClaudeAgentProvider,
    **options: Any,
) -> Request:
    """A door's parsed request for `provider`. Invalid options raise `UnsupportedRequestError`
    (as `generate` would), and the refusal is traced as one, with the model it asked for (the
    provider's, when the request names none)."""
    try:
        checked = call_options(options)
    except Exception as exc:
        refused(exc, options.get("model") or provider.settings.model)
        raise
    return Request(tuple(messages), tuple(tools), checked)


def stream(provider: ClaudeAgentProvider, parsed: Request) -> QueryStream:
    """Run `parsed` on `provider`: `provider.stream` without reading the options again."""
    return provider._stream(list(parsed.messages), list(parsed.tools), parsed.options)
