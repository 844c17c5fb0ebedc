"""`_blocks.Blocks`: the content blocks every streaming door writes, from the stream's parts."""

from __future__ import annotations

import pytest

from sf_provider._blocks import BlockEvent, Blocks, Delta, End, Start
from sf_provider.errors import StreamRetractionError
from sf_provider.types import (
    DiscardPart,
    FinishPart,
    ReasoningDeltaPart,
    ReasoningEndPart,
    ReasoningStartPart,
    StreamPart,
    StreamStartPart,
    TextDeltaPart,
    TextEndPart,
    TextStartPart,
    ToolCallPart,
    ToolInputDeltaPart,
    ToolInputEndPart,
    ToolInputStartPart,
    ToolResultPart,
)


def events(parts: list[StreamPart], blocks: Blocks | None = None) -> list[BlockEvent]:
    blocks = blocks or Blocks(remedy="resend")
    return [event for part in parts for event in blocks.add(part)]


def shape(found: list[BlockEvent]) -> list[tuple[str, ...]]:
    """Each event as (event, kind, index, delta), a passed-on part as its type."""
    out: list[tuple[str, ...]] = []
    for event in found:
        if isinstance(event, Start | Delta | End):
            delta = (event.delta,) if isinstance(event, Delta) else ()
            out.append((type(event).__name__, event.block.kind, str(event.block.index), *delta))
        else:
            out.append((event.type,))
    return out


CALL = ToolCallPart(tool_call_id="c1", tool_name="get_weather", input={"city": "Paris"})


def test_blocks_open_with_their_first_delta_and_are_numbered_in_order() -> None:
    found = events([
        StreamStartPart(mode="single-turn"),
        TextStartPart(id="t0"), TextEndPart(id="t0"),  # said nothing: no block
        ReasoningStartPart(id="r1"), ReasoningDeltaPart(id="r1", delta="Hm."),
        ReasoningEndPart(id="r1", signature="sig"),
        TextStartPart(id="t1"), TextDeltaPart(id="t1", delta="Hi"), TextEndPart(id="t1"),
        ToolInputStartPart(id="c1", tool_name="get_weather"),
        ToolInputDeltaPart(id="c1", delta='{"city": "Paris"}'), ToolInputEndPart(id="c1"),
        CALL,
        FinishPart(finish_reason="tool-calls"),
    ])  # fmt: skip
    assert shape(found) == [
        ("stream-start",),
        ("Start", "reasoning", "0"), ("Delta", "reasoning", "0", "Hm."), ("End", "reasoning", "0"),
        ("Start", "text", "1"), ("Delta", "text", "1", "Hi"), ("End", "text", "1"),
        ("Start", "tool-call", "2"), ("Delta", "tool-call", "2", '{"city": "Paris"}'),
        ("End", "tool-call", "2"),
        ("finish",),
    ]  # fmt: skip
    reasoning, call = found[3], found[-2]
    assert isinstance(reasoning, End) and reasoning.block.signature == "sig"
    assert isinstance(call, End) and call.block.call == CALL and call.block.nth == 0


def test_reasoning_with_nothing_to_send_back_is_no_block_and_sealed_reasoning_is_one() -> None:
    found = events([
        ReasoningStartPart(id="r1"), ReasoningEndPart(id="r1"),
        ReasoningStartPart(id="r2"), ReasoningEndPart(id="r2", redacted="opaque"),
        ReasoningStartPart(id="r3"), ReasoningEndPart(id="r3", signature="sig"),  # no text shown
    ])  # fmt: skip
    assert shape(found) == [
        ("Start", "reasoning", "0"), ("End", "reasoning", "0"),
        ("Start", "reasoning", "1"), ("End", "reasoning", "1"),
    ]  # fmt: skip
    assert isinstance(found[0], Start) and found[0].block.redacted == "opaque"
    assert isinstance(found[2], Start) and found[2].block.signature == "sig"


def test_a_call_comes_with_its_arguments_whole_when_none_streamed() -> None:
    streamed_nothing = [ToolInputStartPart(id="c1", tool_name="get_weather"), CALL]
    for parts in (streamed_nothing, [CALL]):  # (a call from a legacy envelope: not streamed)
        found = events(parts)
        assert shape(found) == [
            ("Start", "tool-call", "0"),
            ("Delta", "tool-call", "0", '{"city": "Paris"}'),
            ("End", "tool-call", "0"),
        ]


def test_whole_calls_come_at_their_call_part_and_calls_the_provider_ran_are_passed_on() -> None:
    ran = CALL.model_copy(update={"provider_executed": True})
    result = ToolResultPart(tool_call_id="c1", tool_name="get_weather", output="sunny")
    found = events(
        [ToolInputStartPart(id="c1", tool_name="get_weather"),
         ToolInputDeltaPart(id="c1", delta="{}"), CALL, ran, result],
        Blocks(remedy="resend", whole_calls=True),
    )  # fmt: skip
    assert shape(found)[:3] == [
        ("Start", "tool-call", "0"),
        ("Delta", "tool-call", "0", '{"city": "Paris"}'),
        ("End", "tool-call", "0"),
    ]
    assert found[3:] == [ran, result]


def test_structured_output_is_one_text_block_in_place_of_the_models_text() -> None:
    finish = FinishPart(finish_reason="stop", structured_output={"city": "Paris"})
    found = events(
        [TextStartPart(id="t1"), TextDeltaPart(id="t1", delta="Here."), TextEndPart(id="t1"),
         finish],
        Blocks(remedy="resend", structured=True),
    )  # fmt: skip
    assert shape(found) == [
        ("Start", "text", "0"),
        ("Delta", "text", "0", '{"city": "Paris"}'),
        ("End", "text", "0"),
        ("finish",),
    ]


def test_a_refusal_has_no_object_so_its_words_are_written_in_its_place() -> None:
    declined = FinishPart(finish_reason="content-filter")
    said = [
        TextStartPart(id="t1"), TextDeltaPart(id="t1", delta="Half"), TextEndPart(id="t1"),
        DiscardPart(ids=["t1"], reason="cut"),  # held back, never sent: dropped
        TextStartPart(id="t2"), TextDeltaPart(id="t2", delta="I can't "),
        TextDeltaPart(id="t2", delta="help."), TextEndPart(id="t2"),
        TextStartPart(id="t3"), TextDeltaPart(id="t3", delta="No."), TextEndPart(id="t3"),
    ]  # fmt: skip
    found = events([*said, declined], Blocks(remedy="resend", structured=True))
    assert shape(found) == [
        ("discard",),
        ("Start", "text", "0"),
        ("Delta", "text", "0", "I can't help."),
        ("End", "text", "0"),
        ("Start", "text", "1"),
        ("Delta", "text", "1", "No."),
        ("End", "text", "1"),
        ("finish",),
    ]
    # Not declined, and no object: nothing is written (the words are no answer there).
    stopped = events(
        [*said, FinishPart(finish_reason="stop")], Blocks(remedy=None, structured=True)
    )
    assert shape(stopped) == [("discard",), ("finish",)]


def test_a_discard_of_a_started_block_raises_unless_nothing_was_handed_out() -> None:
    sent = [TextStartPart(id="t1"), TextDeltaPart(id="t1", delta="Half")]
    cut = DiscardPart(ids=["t1"], reason="the stream was cut")
    blocks = Blocks(remedy="send it again")
    events(sent, blocks)
    never_sent = DiscardPart(ids=["t9"], reason="cut")
    assert events([never_sent], blocks) == [never_sent]  # passed on, for a door that folds
    with pytest.raises(StreamRetractionError, match=r"send it again$"):
        blocks.add(cut)
    folded = events([*sent, cut, TextDeltaPart(id="t2", delta="Whole")], Blocks(remedy=None))
    assert shape(folded)[2:] == [
        ("discard",),
        ("Start", "text", "1"),
        ("Delta", "text", "1", "Whole"),
    ]
