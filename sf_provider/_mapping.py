"""Pure mappers: SDK messages -> stream parts, and stream parts -> `GenerateResult`.

Nothing here starts a process; both `stream` and `generate` go through `PartMapper`, and
`generate` is `ResultCollector` over the very same parts. What the mapper saw besides parts
comes out as a `QueryOutcome` (`_outcome`), which the finish part and failures are decided from.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from claude_agent_sdk import (
    AssistantMessage,
    ResultMessage,
    StreamEvent,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)

from ._bridge import app_tool_name
from ._outcome import APIFailure, QueryOutcome, finish_part
from .tools import FunctionTool, arguments_too_deep
from .types import (
    CallWarning,
    DiscardPart,
    ErrorPart,
    FinishPart,
    GenerateResult,
    Mode,
    ReasoningDeltaPart,
    ReasoningEndPart,
    ReasoningRecord,
    ReasoningStartPart,
    StreamPart,
    StreamStartPart,
    TextDeltaPart,
    TextEndPart,
    TextStartPart,
    ToolCallPart,
    ToolCallRecord,
    ToolInputDeltaPart,
    ToolInputEndPart,
    ToolInputStartPart,
    ToolResultPart,
    Usage,
)

if TYPE_CHECKING:
    # Only single-turn mode holds text back as a possible envelope: `_EnvelopeHold` imports
    # the parser (its dataclasses and regexes) then, so an executor-mode query never loads it.
    from ._envelope import HeldText, ParsedEnvelope

__all__ = ["STRUCTURED_OUTPUT_TOOL", "PartMapper", "ResultCollector"]

#: The tool the CLI adds for `output_format`; its input is the structured result.
STRUCTURED_OUTPUT_TOOL = "StructuredOutput"

#: The input token counts of an API message's usage: together, the context the model was given.
_INPUT_KINDS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def _whole_text(part_id: str, text: str, message_index: int) -> list[StreamPart]:
    return [
        TextStartPart(id=part_id, message_index=message_index),
        TextDeltaPart(id=part_id, delta=text),
        TextEndPart(id=part_id),
    ]


def _content_text(content: Any) -> tuple[str, list[dict[str, Any]]]:
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, [{"type": "text", "text": content}]
    blocks = [b for b in content if isinstance(b, dict)]
    text = "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
    return text, blocks


class _Turns:
    """The API messages of a query, and which model turn the blocks being mapped are from.

    An API message that stopped at the output limit is resumed by the CLI ("Output token limit
    hit. Resume directly ...", up to 3 times, no switch to stop it): the next message continues
    the same answer, so the same turn.
    """

    def __init__(self) -> None:
        self.index = -1  # the model turn of the current blocks
        self.resumes = False  # the next API message continues the current answer
        #: API messages received: every model call the CLI made (resumed pieces, retries too).
        self.api_calls = 0
        #: API messages that stopped at the output limit (`max_tokens`).
        self.output_limit_hits = 0
        #: The last message's input tokens, cache reads and writes included: the size of the
        #: context the model was last given (the query's usage sums every call's).
        self.context_input_tokens = 0
        #: The id the API gave its last message (`msg_...`).
        self.response_id: str | None = None
        #: The stop sequence the last message ended at (the API's `stop_sequence`).
        self.stop_sequence: str | None = None
        self.streamed: set[str] = set()  # ids of the messages that came as stream events
        self._unstreamed: str | None = None  # the last message that came whole

    def started(self, message: dict[str, Any], next_id: str) -> None:
        """A streamed message starts (`message_start`; `next_id` when it has no id)."""
        usage = message.get("usage") or {}
        self.context_input_tokens = sum(int(usage.get(k) or 0) for k in _INPUT_KINDS)
        if message.get("id"):
            self.response_id = str(message["id"])
        self.streamed.add(str(message.get("id") or next_id))
        self._new_message()

    def unstreamed(self, message: AssistantMessage) -> None:
        """A message that came whole (the CLI's non-streaming fallback), once per message."""
        if message.message_id != self._unstreamed:
            self._unstreamed = message.message_id
            self._new_message()
            self.stopped(message.stop_reason)

    def _new_message(self) -> None:
        self.api_calls += 1
        if not self.resumes:
            self.index += 1
        self.resumes = False

    def stopped(self, stop_reason: str | None, stop_sequence: str | None = None) -> None:
        """A message ended with this stop reason (and stop sequence)."""
        self.stop_sequence = stop_sequence if stop_reason == "stop_sequence" else None
        if stop_reason == "max_tokens":
            self.output_limit_hits += 1
            self.resumes = True


class _Attempt:
    """The streamed API message in progress: its part ids, whether it ended properly, and the
    parts whose blocks the CLI delivered (an AssistantMessage each): the ones it keeps when a
    cut stream is resumed."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.done = True
        self.delivered: set[str] = set()
        self.last_closed = ""

    def start(self) -> None:
        """A streamed message starts."""
        self.done = False

    def cut(self, *, resumed: bool) -> tuple[list[str], bool]:
        """The ids to take back when the message was cut before it ended (none when it ended),
        and whether some were kept (`resumed`: the delivered ones are); the books start again."""
        delivered, self.delivered = self.delivered, set()
        if self.done or not self.parts:
            self.parts = []
            return [], False
        kept = [i for i in self.parts if i in delivered] if resumed else []
        ids = [i for i in self.parts if i not in kept]
        self.parts, self.done = [], True
        return ids, bool(kept)


class _EnvelopeHold:
    """Single-turn mode's text blocks, held back while they may be a legacy JSON envelope: a
    block that starts like one is held until it can be decided; every other text streams as
    it arrives. The first envelope found waits for the end of the reply (`take`)."""

    def __init__(self, active: bool) -> None:
        self._active = active
        self._held: dict[str, HeldText] = {}  # part id -> text held back so far
        self._envelope: tuple[str, ParsedEnvelope] | None = None

    def hold(self, part_id: str) -> bool:
        """Start holding a text block, in single-turn mode: whether it is held."""
        if self._active:
            from ._envelope import HeldText  # see TYPE_CHECKING above

            self._held[part_id] = HeldText()
        return self._active

    def holds(self, part_id: str) -> bool:
        """Whether this text block is held back."""
        return part_id in self._held

    def add(self, part_id: str, delta: str) -> str | None:
        """A held block's delta: None while it is still held, else its text so far, released."""
        held = self._held[part_id]
        if held.add(delta):  # O(len(delta)): the text held so far is not looked at again
            return None
        del self._held[part_id]  # decided: plain text
        return held.text()

    def end(self, part_id: str) -> str | None:
        """A held block ended: its whole text, or None when it is the envelope (kept)."""
        from ._envelope import parse_envelope  # see TYPE_CHECKING above

        text = self._held.pop(part_id).text()
        envelope = parse_envelope(text)  # once per text block, when it ends
        if envelope is not None and self._envelope is None:
            self._envelope = (text, envelope)  # decided at the end of the turn
            return None
        return text

    def drop(self, ids: list[str]) -> None:
        """Blocks taken back."""
        for part_id in ids:
            self._held.pop(part_id, None)

    def take(self) -> tuple[str, ParsedEnvelope] | None:
        """The envelope found (its text and what it says), once."""
        found, self._envelope = self._envelope, None
        return found


class _APIFacts:
    """What the CLI said of the API's failures, which produce no parts."""

    def __init__(self) -> None:
        self.failure: APIFailure | None = None
        #: The delay the CLI waited before its last retry.
        self.retry_delay: float | None = None

    def failed(self, message: AssistantMessage) -> None:
        """A synthetic message: an API failure (the result message raises it)."""
        text = " ".join(b.text for b in message.content if isinstance(b, TextBlock))
        self.failure = APIFailure(kind=message.error or "unknown", text=text)

    def retried(self, message: SystemMessage) -> None:
        """An `api_retry` message: the delay follows the API's retry-after, when it sent one."""
        delay = message.data.get("retry_delay_ms")
        if isinstance(delay, int | float):
            self.retry_delay = delay / 1000


class PartMapper:
    """Turns the SDK's messages of one query into stream parts.

    Text, reasoning and tool input come from the raw stream events as they arrive; a message whose
    events were not streamed (the CLI's non-streaming fallback) is mapped from its blocks instead,
    so nothing is lost and nothing is doubled. `outcome` gives the facts of the finished query.
    """

    def __init__(
        self,
        bridge: str,
        *,
        provider_executed: bool,
        tools: Mapping[str, FunctionTool] | None = None,
        hold_envelopes: bool = False,
    ) -> None:
        self._bridge = bridge
        self._provider_executed = provider_executed
        self._tools = tools or {}
        self._envelopes = _EnvelopeHold(hold_envelopes)
        self._turns = _Turns()
        self._attempt = _Attempt()
        self._api = _APIFacts()
        # Calls handed out and not taken back: in single-turn mode they are why the query
        # stopped, and a legacy envelope is only read when there are none.
        self._calls: set[str] = set()
        self._open: dict[int, tuple[str, str]] = {}  # block index -> (kind, part id)
        self._signatures: dict[str, str] = {}
        self._redacted: dict[str, str] = {}  # open redacted thinking blocks -> their data
        self._tool_names: dict[str, str] = {}
        self._hidden: set[str] = set()  # calls of the CLI's StructuredOutput tool
        self._counter = 0

    def _next_id(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}-{self._counter}"

    def outcome(self, result: ResultMessage) -> QueryOutcome:
        """The facts of the query that ended with `result` (after `flush`)."""
        turns = self._turns
        return QueryOutcome(
            result=result,
            single_turn=not self._provider_executed,
            handed_back=not self._provider_executed and bool(self._calls),
            api_failure=self._api.failure,
            retry_delay=self._api.retry_delay,
            output_limit_hits=turns.output_limit_hits,
            api_calls=turns.api_calls,
            context_input_tokens=turns.context_input_tokens,
            response_id=turns.response_id,
            stop_sequence=turns.stop_sequence,
        )

    def map(self, message: Any) -> list[StreamPart]:
        """The parts for one SDK message (often none)."""
        match message:
            case StreamEvent():
                if message.parent_tool_use_id is not None:
                    return []
                return self._event(message.event)
            case AssistantMessage():
                return self._assistant(message)
            case UserMessage():
                return self._user(message)
            case ResultMessage():
                return [finish_part(self.outcome(message))]
            case SystemMessage():
                if message.subtype == "api_retry":
                    parts = self._discard_cut_attempt()
                    self._api.retried(message)
                    return parts
                return []
            case _:
                # RateLimitEvent, ConversationResetMessage and future types carry nothing the
                # parts describe; they are deliberately not mapped.
                return []

    # -- raw stream events

    def _event(self, event: dict[str, Any]) -> list[StreamPart]:
        kind = event.get("type")
        if kind == "message_start":
            # A new streamed message after a cut one (no `api_retry` between): the CLI kept the
            # blocks that had ended and had the model resume after them (CLI 2.1.332).
            parts = self._discard_cut_attempt(resumed=True)
            message = event.get("message") or {}
            self._turns.started(message, "" if message.get("id") else self._next_id("msg"))
            self._open = {}
            self._attempt.start()
            return parts
        if kind == "message_delta" and (event.get("delta") or {}).get("stop_reason"):
            self._attempt.done = True
            delta = event["delta"]
            sequence = delta.get("stop_sequence")
            self._turns.stopped(
                delta["stop_reason"], sequence if isinstance(sequence, str) else None
            )
            return []
        index = event.get("index")
        if not isinstance(index, int):
            return []
        if kind == "content_block_start":
            return self._block_start(index, event.get("content_block") or {})
        if kind == "content_block_delta":
            return self._block_delta(index, event.get("delta") or {})
        if kind == "content_block_stop":
            return self._block_stop(index)
        return []

    def _block_start(self, index: int, block: dict[str, Any]) -> list[StreamPart]:
        block_type = block.get("type")
        if block_type == "text":
            part_id = self._next_id("text")
            self._open[index] = ("text", part_id)
            self._attempt.parts.append(part_id)
            if self._envelopes.hold(part_id):
                return []
            return [TextStartPart(id=part_id, message_index=self._turns.index)]
        if block_type in ("thinking", "redacted_thinking"):
            part_id = self._next_id("reasoning")
            self._open[index] = ("reasoning", part_id)
            self._attempt.parts.append(part_id)
            if block_type == "redacted_thinking":  # whole at its start, and never in the
                self._redacted[part_id] = str(block.get("data", ""))  # SDK's AssistantMessage
            return [ReasoningStartPart(id=part_id)]
        if block_type == "tool_use":
            call_id = str(block.get("id"))
            if block.get("name") == STRUCTURED_OUTPUT_TOOL:
                self._hidden.add(call_id)
                return []
            name = app_tool_name(self._bridge, str(block.get("name")))
            self._tool_names[call_id] = name
            self._open[index] = ("tool", call_id)
            self._attempt.parts.append(call_id)
            return [ToolInputStartPart(id=call_id, tool_name=name)]
        return []

    def _block_delta(self, index: int, delta: dict[str, Any]) -> list[StreamPart]:
        kind, part_id = self._open.get(index, ("", ""))
        delta_type = delta.get("type")
        if kind == "text" and delta_type == "text_delta" and delta.get("text"):
            return self._text_delta(part_id, str(delta["text"]))
        if kind == "reasoning" and delta_type == "thinking_delta" and delta.get("thinking"):
            return [ReasoningDeltaPart(id=part_id, delta=str(delta["thinking"]))]
        if kind == "reasoning" and delta_type == "signature_delta":
            self._signatures[part_id] = self._signatures.get(part_id, "") + str(
                delta.get("signature", "")
            )
            return []
        if kind == "tool" and delta_type == "input_json_delta" and delta.get("partial_json"):
            return [ToolInputDeltaPart(id=part_id, delta=str(delta["partial_json"]))]
        return []

    def _block_stop(self, index: int) -> list[StreamPart]:
        kind, part_id = self._open.pop(index, ("", ""))
        self._attempt.last_closed = part_id
        if kind == "text":
            return self._text_end(part_id)
        if kind == "reasoning":
            signature = self._signatures.pop(part_id, None)
            redacted = self._redacted.pop(part_id, None)
            return [ReasoningEndPart(id=part_id, signature=signature, redacted=redacted)]
        if kind == "tool":
            return [ToolInputEndPart(id=part_id)]
        return []

    # -- text, held back while it may be an envelope

    def _discard_cut_attempt(self, *, resumed: bool = False) -> list[StreamPart]:
        """Take back the parts of a streamed message that was cut before it ended.

        The CLI then asks again (a retry, or its non-streaming fallback), so the same turn is
        about to arrive a second time. `resumed`: it kept the blocks that had ended instead
        (they stay in the model's context) and had the model resume after them ("Your
        response above was cut off mid-stream. Resume directly ..."): only the block that was
        cut is taken back, and what follows continues the same answer.
        """
        ids, kept = self._attempt.cut(resumed=resumed)
        self._envelopes.drop(ids)
        self._calls.difference_update(ids)
        if kept:
            self._turns.resumes = True  # the pieces are one answer, as after an output-limit cut
        if not ids:
            return []
        reason = (
            "the API stream was cut; the model resumed after the blocks that had ended"
            if kept
            else "the API stream was cut; the CLI asked again"
        )
        return [DiscardPart(ids=ids, reason=reason)]

    def _text_delta(self, part_id: str, delta: str) -> list[StreamPart]:
        if not self._envelopes.holds(part_id):
            return [TextDeltaPart(id=part_id, delta=delta)]
        released = self._envelopes.add(part_id, delta)
        if released is None:
            return []
        return [
            TextStartPart(id=part_id, message_index=self._turns.index),
            TextDeltaPart(id=part_id, delta=released),
        ]

    def _text_end(self, part_id: str) -> list[StreamPart]:
        if not self._envelopes.holds(part_id):
            return [TextEndPart(id=part_id)]
        text = self._envelopes.end(part_id)
        return [] if text is None else _whole_text(part_id, text, self._turns.index)

    def flush(self) -> list[StreamPart]:
        """Parts held back until the reply ended: a legacy envelope's calls, or its text.

        The envelope is the last resort: when the reply had native tool calls, it is shown as
        the text it is.
        """
        found = self._envelopes.take()
        if found is None:
            return []
        text, envelope = found
        part_id = self._next_id("text")
        index = self._turns.index
        if self._calls:
            return _whole_text(part_id, text, index)
        if envelope.text is not None:
            return _whole_text(part_id, envelope.text, index) if envelope.text else []
        parts: list[StreamPart] = []
        for i, call in enumerate(envelope.calls):
            parts.append(
                self._call_part(f"envelope-call-{self._counter}-{i}", call.tool_name, call.input)
            )
        return parts

    def _call_part(self, call_id: str, name: str, arguments: dict[str, Any]) -> ToolCallPart:
        """A tool-call part; in single-turn mode it is checked against the exposed tools."""
        self._calls.add(call_id)
        problem = arguments_too_deep(arguments)
        if problem is not None:
            # Not kept: a part holding them could not be serialized. The bridge refuses them
            # too (the same check), so in executor mode the tool did not run either.
            arguments = {}
        elif not self._provider_executed:
            problem = self._invalid_reason(name, arguments)
        return ToolCallPart(
            tool_call_id=call_id,
            tool_name=name,
            input=arguments,
            provider_executed=self._provider_executed,
            invalid=problem is not None,
            invalid_reason=problem,
        )

    def _invalid_reason(self, name: str, arguments: dict[str, Any]) -> str | None:
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self._tools)) or "none"
            return f"tool {name!r} is not exposed in this request (tools: {known})"
        problems = tool.argument_errors(arguments)
        if problems:
            return f"arguments violate the schema of {name!r}: " + "; ".join(problems)
        return None

    # -- whole messages

    def _assistant(self, message: AssistantMessage) -> list[StreamPart]:
        if message.parent_tool_use_id is not None:
            return []
        if message.error is not None or message.model == "<synthetic>":
            # API failures arrive as a synthetic message; the result message raises them.
            self._api.failed(message)
            return []
        streamed = message.message_id is not None and message.message_id in self._turns.streamed
        if streamed:
            # The CLI delivers each block of a streamed message as it ends (before the block's
            # stop event reaches us); a block of a cut stream it never delivers.
            open_ids = [part_id for _, part_id in self._open.values()]
            self._attempt.delivered.update(open_ids or [self._attempt.last_closed])
        parts: list[StreamPart] = [] if streamed else self._discard_cut_attempt()
        if not streamed:
            self._turns.unstreamed(message)
        for block in message.content:
            match block:
                case TextBlock() if not streamed:
                    part_id = self._next_id("text")
                    if self._envelopes.hold(part_id):
                        parts += self._text_delta(part_id, block.text)
                        parts += self._text_end(part_id)
                    else:
                        parts += _whole_text(part_id, block.text, self._turns.index)
                case ThinkingBlock() if not streamed:
                    part_id = self._next_id("reasoning")
                    parts += [
                        ReasoningStartPart(id=part_id),
                        ReasoningDeltaPart(id=part_id, delta=block.thinking),
                        ReasoningEndPart(id=part_id, signature=block.signature or None),
                    ]
                case ToolUseBlock() if block.name == STRUCTURED_OUTPUT_TOOL:
                    self._hidden.add(block.id)  # the CLI's own tool: its input is the result
                case ToolUseBlock():
                    parts += self._tool_use(block, streamed)
                case _:
                    pass
        return parts

    def _tool_use(self, block: ToolUseBlock, streamed: bool) -> list[StreamPart]:
        name = app_tool_name(self._bridge, block.name)
        self._tool_names[block.id] = name
        parts: list[StreamPart] = []
        open_index = next((i for i, (_, pid) in self._open.items() if pid == block.id), None)
        if open_index is not None:
            # The SDK yields the block before the stream's content_block_stop: close the input
            # now so tool-input-end always precedes tool-call.
            parts += self._block_stop(open_index)
        elif not streamed:
            parts += [
                ToolInputStartPart(id=block.id, tool_name=name),
                ToolInputDeltaPart(id=block.id, delta=json.dumps(block.input, ensure_ascii=False)),
                ToolInputEndPart(id=block.id),
            ]
        parts.append(self._call_part(block.id, name, dict(block.input)))
        return parts

    def _user(self, message: UserMessage) -> list[StreamPart]:
        if message.parent_tool_use_id is not None or isinstance(message.content, str):
            return []
        if any(isinstance(block, ToolResultBlock) for block in message.content):
            self._turns.resumes = False  # a cut message with a whole call is answered, not resumed
        if not self._provider_executed:
            # Single-turn: every call goes back to the app, which answers it. A result the CLI
            # made itself ("No such tool available" for an unknown name, the bridge's error when
            # the defer hook did not run) is not the provider's: reported, it would be a second
            # answer to the same call in the app's next request.
            return []
        parts: list[StreamPart] = []
        for block in message.content:
            if isinstance(block, ToolResultBlock) and block.tool_use_id not in self._hidden:
                text, content = _content_text(block.content)
                parts.append(
                    ToolResultPart(
                        tool_call_id=block.tool_use_id,
                        tool_name=self._tool_names.get(block.tool_use_id, "unknown"),
                        output=text,
                        content=content,
                        is_error=bool(block.is_error),
                    )
                )
        return parts


class ResultCollector:
    """Folds stream parts into a `GenerateResult` (what `generate` returns)."""

    def __init__(self) -> None:
        self._texts: dict[str, list[str]] = {}
        self._text_order: list[str] = []
        # Index in _text_order where the last model turn's text starts: a turn ends with results.
        self._final_from = 0
        self._last_message = -1
        self._reasoning: dict[str, list[str]] = {}
        self._signatures: dict[str, str] = {}
        self._redacted: dict[str, str] = {}
        self._calls: dict[str, ToolCallRecord] = {}
        # What the model wrote and the provider ran, in order: ("reasoning" | "text" | "call" |
        # "result", id): the turns of `response_messages`.
        self._order: list[tuple[str, str]] = []
        self._warnings: list[CallWarning] = []
        self._mode: Mode = "executor"
        self._finish: FinishPart | None = None
        self.error: ErrorPart | None = None

    def add(self, part: StreamPart) -> None:
        """Take one part into account."""
        match part:
            case StreamStartPart():
                self._warnings.extend(part.warnings)
                self._mode = part.mode
            case TextStartPart():
                if part.message_index > self._last_message:
                    # A new model turn: only its text is the final text.
                    self._last_message = part.message_index
                    self._final_from = len(self._text_order)
                self._texts[part.id] = []
                self._text_order.append(part.id)
                self._order.append(("text", part.id))
            case TextDeltaPart():
                self._texts.setdefault(part.id, []).append(part.delta)
            case ReasoningStartPart():
                self._reasoning.setdefault(part.id, [])
                self._order.append(("reasoning", part.id))
            case ReasoningDeltaPart():
                self._reasoning.setdefault(part.id, []).append(part.delta)
            case ReasoningEndPart():
                if part.signature:
                    self._signatures[part.id] = part.signature
                if part.redacted:
                    self._redacted[part.id] = part.redacted
            case DiscardPart():
                for part_id in part.ids:
                    self._texts.pop(part_id, None)
                    self._reasoning.pop(part_id, None)
                    self._calls.pop(part_id, None)
                self._order = [(kind, i) for kind, i in self._order if i not in part.ids]
                kept = [i for i in self._text_order if i in self._texts]
                self._final_from -= sum(1 for i in self._text_order[: self._final_from]
                                        if i not in self._texts)  # fmt: skip
                self._text_order = kept
            case ToolCallPart():
                self._calls[part.tool_call_id] = ToolCallRecord(
                    tool_call_id=part.tool_call_id,
                    tool_name=part.tool_name,
                    input=part.input,
                    provider_executed=part.provider_executed,
                    invalid=part.invalid,
                    invalid_reason=part.invalid_reason,
                )
                self._order.append(("call", part.tool_call_id))
            case ToolResultPart():
                call = self._calls.get(part.tool_call_id)
                if call is not None:
                    self._calls[part.tool_call_id] = call.model_copy(update={"result": part})
                self._final_from = len(self._text_order)
                self._order.append(("result", part.tool_call_id))
            case ErrorPart():
                self.error = part
            case FinishPart():
                self._finish = part
            case TextEndPart() | ToolInputStartPart() | ToolInputDeltaPart() | ToolInputEndPart():
                pass

    @property
    def tool_call_count(self) -> int:
        """Tool calls so far (those of cut API streams taken back)."""
        return len(self._calls)

    @property
    def invalid_calls(self) -> list[ToolCallRecord]:
        """The calls so far marked invalid (unknown tool, arguments off the schema)."""
        return [call for call in self._calls.values() if call.invalid]

    @property
    def text_chars(self) -> int:
        """Characters of text so far, every turn's."""
        return sum(len(chunk) for part_id in self._text_order for chunk in self._texts[part_id])

    def _final_reasoning(self) -> list[ReasoningRecord]:
        """The reasoning blocks after the last tool result: the last model turn's."""
        last_result = max((i for i, (kind, _) in enumerate(self._order) if kind == "result"),
                          default=-1)  # fmt: skip
        return [
            ReasoningRecord(
                text="".join(self._reasoning[part_id]),
                signature=self._signatures.get(part_id),
                redacted=self._redacted.get(part_id),
            )
            for kind, part_id in self._order[last_result + 1 :]
            if kind == "reasoning" and part_id in self._reasoning
        ]

    def _response_messages(self) -> list[dict[str, Any]]:
        """The reply in the request format: each model turn (signed reasoning, text, calls) and
        the results of the calls the provider ran, as the live conversation holds them."""
        messages: list[dict[str, Any]] = []
        blocks: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []
        for kind, part_id in self._order:
            if kind == "result":
                call = self._calls.get(part_id)
                if call is not None and call.result is not None:
                    results.append(call.result.message_block())
                continue
            if results:  # the results ended a turn: this block starts the next one
                messages += [{"role": "assistant", "content": blocks},
                             {"role": "tool", "content": results}]  # fmt: skip
                blocks, results = [], []
            if kind == "reasoning" and part_id in self._redacted:
                data = self._redacted[part_id]
                blocks.append({"type": "reasoning", "text": "", "redacted": data})
            elif kind == "reasoning" and part_id in self._signatures:
                text = "".join(self._reasoning.get(part_id, []))
                blocks.append(
                    {"type": "reasoning", "text": text, "signature": self._signatures[part_id]}
                )
            elif kind == "text" and "".join(self._texts.get(part_id, [])):
                blocks.append({"type": "text", "text": "".join(self._texts[part_id])})
            elif kind == "call" and part_id in self._calls:
                call = self._calls[part_id]
                blocks.append(
                    {"type": "tool-call", "tool_call_id": part_id, "tool_name": call.tool_name,
                     "input": call.input}
                )  # fmt: skip
        if blocks or results:
            messages.append({"role": "assistant", "content": blocks})
        if results:
            messages.append({"role": "tool", "content": results})
        return messages

    def result(self) -> GenerateResult:
        """The result so far (complete once the finish part was added)."""
        texts = ["".join(self._texts[i]) for i in self._text_order]
        finish = self._finish
        return GenerateResult(
            text="".join(texts[self._final_from :]),
            all_text="".join(texts),
            reasoning="".join("".join(chunks) for chunks in self._reasoning.values()),
            final_reasoning=self._final_reasoning(),
            tool_calls=list(self._calls.values()),
            response_messages=self._response_messages(),
            finish_reason=finish.finish_reason if finish else ("error" if self.error else "other"),
            usage=finish.usage if finish else Usage(),
            cost_usd=finish.cost_usd if finish else None,
            session_id=finish.session_id if finish else None,
            num_turns=finish.num_turns if finish else 0,
            api_calls=finish.api_calls if finish else 0,
            raw_stop_reason=finish.raw_stop_reason if finish else None,
            structured_output=finish.structured_output if finish else None,
            warnings=list(self._warnings),
            mode=self._mode,
            provider_details=dict(finish.provider_details) if finish else {},
        )
