"""Stream parts as the content blocks a streaming door writes: one set of rules for every door.

A door's renderer feeds each part to `Blocks.add` and writes what comes back in its own
vocabulary: a content block's `Start`, its `Delta`s and its `End`, in order, each with its
`Block` (index, kind, id, what it has written so far), and every other part as it is (stream
start, finish, errors, calls the provider ran and their results, discards).

- Text is a block from its first delta: a text block that says nothing is none. With
  `structured`, the model's text is held back and the structured output is one text block,
  written whole right before the finish part; when the model declined (`declined`), there is
  no object, and its text is written there instead, as the APIs send a refusal.
- Reasoning is a block from its first delta, or from its end when it is signed or redacted
  (`Block.signature` / `redacted` are set before its `Start` then); unsigned reasoning that
  said nothing is none.
- A tool call to hand back is a block from its input's start to its call part (`Block.call`),
  and its deltas add up to its arguments as JSON: a call whose input did not stream (read
  from a legacy envelope) comes whole, and one whose input streamed nothing gets its
  arguments whole before its end. With `whole_calls`, every call comes whole at its call part.
  A call the provider ran (executor mode) is no block: its part is passed on.
- A discard that takes back a block already started raises `StreamRetractionError`
  (`SentParts`) naming `remedy` (with no `remedy`, nothing was handed out: it never raises).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

from . import types as t
from ._error_kinds import SentParts

__all__ = ["Block", "BlockEvent", "Blocks", "Delta", "End", "Start", "declined"]

Kind = Literal["text", "reasoning", "tool-call"]

#: The structured output's text block (`structured`).
_STRUCTURED = "structured-output"


def declined(finish_reason: t.FinishReason) -> bool:
    """Whether the model declined to answer (finish reason `content-filter`): where the answer
    would be the structured output, its words are the answer then (there is no object)."""
    return finish_reason == "content-filter"


@dataclass
class Block:
    """A content block being written."""

    #: Its place among the stream's blocks, and among those of its kind (OpenAI's call index).
    index: int
    nth: int
    kind: Kind
    #: The part id; a tool call's: its call id.
    id: str
    #: A tool call's tool name.
    name: str = ""
    #: The deltas written so far (at a `Delta`: with it).
    chunks: list[str] = field(default_factory=list)
    signature: str | None = None
    redacted: str | None = None
    #: A tool call's part, at its `End`.
    call: t.ToolCallPart | None = None

    @property
    def text(self) -> str:
        """Everything written so far: a tool call's arguments JSON."""
        return "".join(self.chunks)


@dataclass(frozen=True)
class Start:
    """A block begins."""

    block: Block


@dataclass(frozen=True)
class Delta:
    """More of a block: text, reasoning, or a fragment of a call's arguments JSON."""

    block: Block
    delta: str


@dataclass(frozen=True)
class End:
    """A block is complete."""

    block: Block


BlockEvent = Start | Delta | End | t.StreamPart


class Blocks:
    """The blocks of one stream, from its parts (see the module docstring)."""

    def __init__(
        self, *, remedy: str | None, structured: bool = False, whole_calls: bool = False
    ) -> None:
        self._remedy = remedy
        self._structured = structured
        self._whole_calls = whole_calls
        self._open: dict[str, Block] = {}  # part id -> its block, while it is written
        self._count: dict[str, int] = {}  # kind -> blocks of that kind so far
        self._sent = SentParts()  # ids of the blocks started
        self._held: dict[str, list[str]] = {}  # `structured`: text part id -> its deltas
        #: An error part came: the error is raised next, so a finish part after it is no answer.
        self.failed = False

    def add(self, part: t.StreamPart) -> list[BlockEvent]:
        """The events one part becomes."""
        match part:
            case t.TextDeltaPart() if self._structured:
                self._held.setdefault(part.id, []).append(part.delta)
                return []
            case t.TextDeltaPart():
                return self._write(part.id, part.delta, "text")
            case t.TextEndPart() if part.id in self._open:
                return [End(self._open.pop(part.id))]
            case t.ReasoningDeltaPart():
                return self._write(part.id, part.delta, "reasoning")
            case t.ReasoningEndPart():
                block = self._open.pop(part.id, None)
                events: list[BlockEvent] = []
                if block is None:
                    if not (part.signature or part.redacted):
                        return []  # said nothing, and holds nothing to send back
                    block = self._block(part.id, "reasoning")
                    del self._open[part.id]
                    events.append(Start(block))
                block.signature, block.redacted = part.signature, part.redacted
                return [*events, End(block)]
            case t.ToolInputStartPart() if not self._whole_calls:
                return [Start(self._block(part.id, "tool-call", part.tool_name))]
            case t.ToolInputDeltaPart() if part.id in self._open:
                return self._write(part.id, part.delta, "tool-call")
            case t.ToolCallPart() if not part.provider_executed:
                return self._call(part)
            case t.ToolCallPart():
                self._sent.add(part.tool_call_id)  # passed on: handed out as it is
            case t.DiscardPart():
                if self._remedy is not None:
                    self._sent.discard(part, self._remedy)
                for part_id in part.ids:
                    self._open.pop(part_id, None)
                    self._held.pop(part_id, None)
                return [part]
            case t.ErrorPart():
                self.failed = True
            case t.FinishPart() if self._structured and part.structured_output is not None:
                text = json.dumps(part.structured_output, ensure_ascii=False)
                written = self._write(_STRUCTURED, text, "text")
                return [*written, End(self._open.pop(_STRUCTURED)), part]
            case t.FinishPart() if self._structured and declined(part.finish_reason):
                said: list[BlockEvent] = []
                for part_id, deltas in self._held.items():
                    said += self._write(part_id, "".join(deltas), "text")
                    said.append(End(self._open.pop(part_id)))
                return [*said, part]
            case (
                t.TextStartPart()
                | t.TextEndPart()
                | t.ReasoningStartPart()
                | t.ToolInputStartPart()
                | t.ToolInputDeltaPart()
                | t.ToolInputEndPart()
            ):
                return []
        return [part]

    def _block(self, part_id: str, kind: Kind, name: str = "") -> Block:
        """A new block, open until its end (a reasoning block opened at its end: closed)."""
        nth = self._count.get(kind, 0)
        self._count[kind] = nth + 1
        self._sent.add(part_id)
        block = self._open[part_id] = Block(sum(self._count.values()) - 1, nth, kind, part_id, name)
        return block

    def _write(self, part_id: str, delta: str, kind: Kind) -> list[BlockEvent]:
        """A delta of `part_id`'s block, opening it (a new block of `kind`) first."""
        events: list[BlockEvent] = []
        block = self._open.get(part_id)
        if block is None:
            block = self._block(part_id, kind)
            events.append(Start(block))
        block.chunks.append(delta)
        return [*events, Delta(block, delta)]

    def _call(self, part: t.ToolCallPart) -> list[BlockEvent]:
        call_id, events = part.tool_call_id, list[BlockEvent]()
        block = self._open.get(call_id)
        if block is None:  # not streamed (or `whole_calls`): it comes whole
            block = self._block(call_id, "tool-call", part.tool_name)
            events.append(Start(block))
        if not block.text.strip():
            arguments = json.dumps(part.input, ensure_ascii=False)
            events += self._write(call_id, arguments, "tool-call")
        block.call = part
        return [*events, End(self._open.pop(call_id))]
