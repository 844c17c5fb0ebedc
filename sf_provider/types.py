"""Public data: stream parts, usage, warnings and the result of `generate`.

Stream parts follow the familiar provider vocabulary (`type` is the discriminator):
stream-start, text-start/-delta/-end, reasoning-start/-delta/-end,
tool-input-start/-delta/-end, tool-call, tool-result, discard (take back the parts of a cut API
stream), error, finish. `generate` folds the same parts into a `GenerateResult`.
"""

# No `from __future__ import annotations` here: pydantic would eval() the annotation strings of
# every model below at import. With that and `defer_build` (validators are built on first use),
# `import sf_provider` stays cheap; see tests/unit/test_import_cost.py.

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CallWarning",
    "DiscardPart",
    "ErrorPart",
    "FinishPart",
    "FinishReason",
    "GenerateResult",
    "Mode",
    "ReasoningDeltaPart",
    "ReasoningEndPart",
    "ReasoningRecord",
    "ReasoningStartPart",
    "StreamPart",
    "StreamStartPart",
    "TextDeltaPart",
    "TextEndPart",
    "TextStartPart",
    "ToolCallPart",
    "ToolCallRecord",
    "ToolInputDeltaPart",
    "ToolInputEndPart",
    "ToolInputStartPart",
    "ToolResultPart",
    "Usage",
]

#: Why a generation ended.
FinishReason = Literal["stop", "length", "tool-calls", "content-filter", "error", "other"]
#: How a query runs its tools: inside the SDK loop (executor) or returned to the app (single-turn).
Mode = Literal["executor", "single-turn"]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class Usage(_Model):
    """Token counts of a query, summed over its model turns."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    @property
    def input_total(self) -> int:
        """All input tokens: uncached input plus cache reads and cache writes.

        `input_tokens` is the Messages API's count, without the cached input. The other
        conventions (OpenAI's `prompt_tokens`, LangChain's and pydantic-ai's input tokens,
        OpenTelemetry's `gen_ai.usage.input_tokens`) count it: this is the one place the sum
        is made, and each door only renames it.
        """
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    @property
    def total_tokens(self) -> int:
        """Input (including cache reads and writes) plus output tokens."""
        return self.input_total + self.output_tokens


class CallWarning(_Model):
    """Something about the request that was not honoured exactly as asked."""

    code: str
    message: str


class StreamStartPart(_Model):
    """First part of every stream."""

    type: Literal["stream-start"] = "stream-start"
    warnings: list[CallWarning] = Field(default_factory=list)
    mode: Mode = "executor"
    process: Literal["fresh", "warm", "continued"] | None = Field(
        default=None,
        description="The CLI process that serves the query: a fresh one, a warm one, or the "
        "live one that already holds this conversation (continued); the finish part's "
        "provider_details['process'] says the same.",
    )


class TextStartPart(_Model):
    """A text block begins."""

    type: Literal["text-start"] = "text-start"
    id: str
    message_index: int = Field(
        default=0, description="Which model turn (API message) of the query the text belongs to."
    )


class TextDeltaPart(_Model):
    """More text of the block `id`."""

    type: Literal["text-delta"] = "text-delta"
    id: str
    delta: str


class TextEndPart(_Model):
    """The text block `id` is complete."""

    type: Literal["text-end"] = "text-end"
    id: str


class ReasoningStartPart(_Model):
    """A reasoning (thinking) block begins."""

    type: Literal["reasoning-start"] = "reasoning-start"
    id: str


class ReasoningDeltaPart(_Model):
    """More reasoning text of the block `id`."""

    type: Literal["reasoning-delta"] = "reasoning-delta"
    id: str
    delta: str


class ReasoningEndPart(_Model):
    """The reasoning block `id` is complete; `signature` is the API's opaque signature.

    `redacted` is set for a redacted thinking block (the API's `redacted_thinking`: the
    reasoning was encrypted, the block has no text): its opaque data, to be sent back as it is
    (a history's `{"type": "reasoning", "text": "", "redacted": data}`).
    """

    type: Literal["reasoning-end"] = "reasoning-end"
    id: str
    signature: str | None = None
    redacted: str | None = None


class ToolInputStartPart(_Model):
    """The model began writing the arguments of a call to `tool_name`; `id` is the call id."""

    type: Literal["tool-input-start"] = "tool-input-start"
    id: str
    tool_name: str


class ToolInputDeltaPart(_Model):
    """More of the arguments JSON of call `id`, as the model writes it."""

    type: Literal["tool-input-delta"] = "tool-input-delta"
    id: str
    delta: str


class ToolInputEndPart(_Model):
    """The arguments of call `id` are complete."""

    type: Literal["tool-input-end"] = "tool-input-end"
    id: str


class ToolCallPart(_Model):
    """A complete tool call; `provider_executed` is true when the provider ran it."""

    type: Literal["tool-call"] = "tool-call"
    tool_call_id: str
    tool_name: str
    input: dict[str, Any]
    provider_executed: bool = False
    invalid: bool = Field(
        default=False, description="Not a callable tool call: unknown tool or arguments off-schema."
    )
    invalid_reason: str | None = None


class ToolResultPart(_Model):
    """The result of a provider-executed call, as the model received it."""

    type: Literal["tool-result"] = "tool-result"
    tool_call_id: str
    tool_name: str
    output: str = Field(description="The text of the result.")
    content: list[dict[str, Any]] = Field(default_factory=list, description="MCP content blocks.")
    is_error: bool = False
    provider_executed: bool = True

    def message_block(self) -> dict[str, Any]:
        """This result as a `tool` message's block of the request format: its text as
        `output`, or, when it holds more than text (an image), its content blocks, so a replay
        sends the model what it saw."""
        block: dict[str, Any] = {"type": "tool-result", "tool_call_id": self.tool_call_id}
        if all(b.get("type") == "text" for b in self.content):
            block["output"] = self.output
        else:
            block["content"] = [_request_block(b) for b in self.content]
        return block | {"is_error": self.is_error}


def _request_block(block: dict[str, Any]) -> dict[str, Any]:
    """A tool result's content block (the API's or MCP's shape) in the request format."""
    source = block.get("source")
    if block.get("type") != "image":
        return block
    if isinstance(source, dict):
        return {"type": "image", "data": source.get("data"), "media_type": source.get("media_type")}
    return {"type": "image", "data": block.get("data"), "media_type": block.get("mimeType")}


class DiscardPart(_Model):
    """Earlier parts to take back: the API stream they came from was cut and the turn redone.

    `ids` are text, reasoning and tool-input part ids (and tool call ids) of the cut attempt.
    """

    type: Literal["discard"] = "discard"
    ids: list[str]
    reason: str


class ErrorPart(_Model):
    """An error; in `stream` it comes right before the error is raised."""

    type: Literal["error"] = "error"
    error_type: str
    message: str


_NUM_TURNS = (
    "The CLI's own count of conversation turns (its user and assistant messages, tool results "
    "included): not the number of model calls, see api_calls."
)
_API_CALLS = (
    "Model calls the query made: API messages received (a reply the CLI had the model resume "
    "at the output limit, or asked again after a cut stream, counts each time)."
)


class FinishPart(_Model):
    """Last part of a stream: why it ended, what it cost."""

    type: Literal["finish"] = "finish"
    finish_reason: FinishReason
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float | None = None
    session_id: str | None = None
    num_turns: int = Field(default=0, description=_NUM_TURNS)
    api_calls: int = Field(default=0, description=_API_CALLS)
    raw_stop_reason: str | None = None
    duration_ms: int | None = None
    structured_output: Any = Field(
        default=None, description="The object matching `output_schema`, when one was asked for."
    )
    provider_details: dict[str, Any] = Field(
        default_factory=dict, description="Extra facts from the SDK (model usage, result subtype)."
    )


StreamPart = Annotated[
    StreamStartPart
    | TextStartPart
    | TextDeltaPart
    | TextEndPart
    | ReasoningStartPart
    | ReasoningDeltaPart
    | ReasoningEndPart
    | ToolInputStartPart
    | ToolInputDeltaPart
    | ToolInputEndPart
    | ToolCallPart
    | ToolResultPart
    | DiscardPart
    | ErrorPart
    | FinishPart,
    Field(discriminator="type"),
]


class ReasoningRecord(_Model):
    """One reasoning (thinking) block of a model turn, with the API's signature when it has one;
    `redacted` holds the opaque data of a redacted block (its `text` is empty)."""

    text: str
    signature: str | None = None
    redacted: str | None = None


class ToolCallRecord(_Model):
    """One tool call of a generation and, when the provider ran it, its result."""

    tool_call_id: str
    tool_name: str
    input: dict[str, Any]
    provider_executed: bool = False
    invalid: bool = False
    invalid_reason: str | None = None
    result: ToolResultPart | None = None


class GenerateResult(_Model):
    """Everything one `generate` call produced."""

    text: str = Field(
        description="The text of the last model turn (after the last provider-executed results)."
    )
    all_text: str = Field(
        default="",
        description="Every text block of every turn, joined as streamed (nothing is put between "
        "turns); `text` is the last turn's.",
    )
    reasoning: str = ""
    final_reasoning: list[ReasoningRecord] = Field(
        default_factory=list,
        description="The reasoning blocks of the last model turn, with their signatures.",
    )
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    finish_reason: FinishReason = "other"
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float | None = None
    session_id: str | None = None
    num_turns: int = Field(default=0, description=_NUM_TURNS)
    api_calls: int = Field(default=0, description=_API_CALLS)
    raw_stop_reason: str | None = None
    structured_output: Any = Field(
        default=None, description="The object matching `output_schema`, when one was asked for."
    )
    warnings: list[CallWarning] = Field(default_factory=list)
    mode: Mode = "executor"
    response_messages: list[dict[str, Any]] = Field(
        default_factory=list,
        description="This reply in the request format: every model turn (signed reasoning, text, "
        "calls) and a `tool` message with the results of the calls the provider ran. Append "
        "them to the history to continue the conversation, in either mode.",
    )
    provider_details: dict[str, Any] = Field(default_factory=dict)

    def assistant_message(self) -> dict[str, Any]:
        """This reply as an assistant message for the next request's history.

        Holds the last turn's signed and redacted reasoning, its text and the calls the
        application must answer (those the provider did not execute), in the request format:
        append it, then a `tool` message with one `tool-result` per call, and call `generate`
        again.
        """
        # Reasoning first, as the model wrote it: the API wants it back with the calls.
        content: list[dict[str, Any]] = [
            {"type": "reasoning", "text": "", "redacted": r.redacted}
            if r.redacted
            else {"type": "reasoning", "text": r.text, "signature": r.signature}
            for r in self.final_reasoning
            if r.redacted or r.signature
        ]
        if self.text:
            content.append({"type": "text", "text": self.text})
        content += [
            {
                "type": "tool-call",
                "tool_call_id": call.tool_call_id,
                "tool_name": call.tool_name,
                "input": call.input,
            }
            for call in self.tool_calls
            if not call.provider_executed
        ]
        return {"role": "assistant", "content": content}
