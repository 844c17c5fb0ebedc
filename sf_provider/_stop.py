"""Stop sequences on stream parts: the answer ends where the first stop sequence would have
stopped the API (`CallOptions.stop_sequences`). Pure: it reads and makes stream parts only.

The CLI sends no stop sequences to the API (until it can: issue 28), so the model writes on;
`StopCutter` cuts the text where the first stop sequence begins and leaves out what the model
wrote after it. The provider's query loop applies it to its parts, so every front door
(gateway, LiteLLM, LangChain, pydantic-ai) only passes its stop field through.
"""

from __future__ import annotations

from collections.abc import Sequence

from .types import (
    DiscardPart,
    FinishPart,
    FinishReason,
    StreamPart,
    TextDeltaPart,
    TextEndPart,
    ToolCallPart,
)

__all__ = ["STOP_SEQUENCE_DETAIL", "StopCutter"]

#: The `FinishPart.provider_details` key naming the stop sequence the answer ended at (the
#: Anthropic API's `stop_sequence`).
STOP_SEQUENCE_DETAIL = "stop_sequence"


class StopCutter:
    """Stop sequences on stream parts: the answer ends before the first stop sequence in its
    text, as the API would have stopped there.

    The text is cut where the stop sequence the model completed first begins; what the model
    wrote after it (text, tool calls, reasoning) is left out, and the finish reason is `stop`
    (`tool-calls` when a call came before it), with the sequence in the finish part's
    `provider_details["stop_sequence"]`. Text that may be the start of a stop sequence is held
    back until the next delta decides. The query itself runs to its end, so its process stays
    usable, and everything the model wrote is still billed (the usage counts it). Agent
    frameworks that parse text actions (smolagents, CrewAI) send stop sequences on every request.
    """

    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = tuple(stops)
        self.stopped = False
        #: The stop sequence the answer ended at.
        self.matched: str | None = None
        self._stop_block: str | None = None  # the text block the stop was found in
        self._text: dict[str, str] = {}  # text block id -> its text so far
        self._sent: dict[str, int] = {}  # text block id -> characters passed on
        self._calls: set[str] = set()  # calls passed on (and not taken back)

    def parts(self, part: StreamPart) -> list[StreamPart]:
        """The parts `part` becomes (none while text is held back or after the stop)."""
        if not self.stops:
            return [part]
        if isinstance(part, DiscardPart):
            # A cut attempt taken back: what it held is gone, its stop too (the CLI asks
            # again, and the answer that follows is read afresh).
            for part_id in part.ids:
                self._text.pop(part_id, None)
                self._sent.pop(part_id, None)
            self._calls.difference_update(part.ids)
            if self._stop_block in part.ids:
                self.stopped, self.matched, self._stop_block = False, None, None
            return [part]
        if isinstance(part, FinishPart):
            return [self.finish(part)]
        if self.stopped:
            return []
        match part:
            case TextDeltaPart():
                text = self._text[part.id] = self._text.get(part.id, "") + part.delta
                sent = self._sent.get(part.id, 0)
                # A stop sequence may begin in text already passed on but held back: search
                # from the first character that could start one ending in the new text.
                start = max(0, sent - max(len(s) for s in self.stops))
                found = [(i + len(s), i, s) for s in self.stops if (i := text.find(s, start)) >= 0]
                if found:
                    # The one completed first is where the API, writing token by token, stops.
                    _, at, self.matched = min(found)
                    self.stopped, self._stop_block = True, part.id
                    return [*self._pass(part.id, at), TextEndPart(id=part.id)]
                return self._pass(part.id, len(text) - self._held(text))
            case TextEndPart():
                return [*self._pass(part.id, len(self._text.get(part.id, ""))), part]
            case ToolCallPart() if not part.provider_executed:
                self._calls.add(part.tool_call_id)
                return [part]
            case _:
                return [part]

    def finish(self, part: FinishPart) -> FinishPart:
        """The finish part of an answer that ended at a stop sequence says so (finish reason
        and `provider_details["stop_sequence"]`); any other is passed on as it is."""
        if not self.stopped:
            return part
        reason: FinishReason = "tool-calls" if self._calls else "stop"
        details = {**part.provider_details, STOP_SEQUENCE_DETAIL: self.matched}
        return part.model_copy(update={"finish_reason": reason, "provider_details": details})

    def _held(self, text: str) -> int:
        """How many last characters of `text` could begin a stop sequence."""
        return max(
            (n for s in self.stops for n in range(1, len(s)) if text.endswith(s[:n])), default=0
        )

    def _pass(self, block: str, upto: int) -> list[StreamPart]:
        sent = self._sent.get(block, 0)
        if upto <= sent:
            return []
        self._sent[block] = upto
        return [TextDeltaPart(id=block, delta=self._text[block][sent:upto])]
