"""`StopCutter` on plain stream parts: where the answer ends, what is left out, the finish
reason and the stop sequence it names (`CallOptions.stop_sequences`; through the real CLI in
`tests/contract/test_stop.py`)."""

from __future__ import annotations

from sf_provider import types as T
from sf_provider._mapping import ResultCollector
from sf_provider._stop import StopCutter


def _cut(parts: list[T.StreamPart], stops: list[str] | None = None) -> tuple[str, list[str], str]:
    cutter, collector = StopCutter(stops or ["Observation:"]), ResultCollector()
    for part in parts:
        for kept in cutter.parts(part):
            collector.add(kept)
    result = collector.result()
    return result.finish_reason, [c.tool_name for c in result.tool_calls], result.text


def _text(*deltas: str) -> list[T.StreamPart]:
    return [
        T.TextStartPart(id="t1"),
        *(T.TextDeltaPart(id="t1", delta=d) for d in deltas),
        T.TextEndPart(id="t1"),
    ]


def test_a_stop_split_across_deltas_is_held_back_and_cut() -> None:
    cutter = StopCutter(["Observation:"])
    kept = [k for p in _text("Thought: x\nObserv", "ation: y") for k in cutter.parts(p)]
    deltas = [k.delta for k in kept if isinstance(k, T.TextDeltaPart)]
    assert deltas == ["Thought: x\n"], "the possible start of the stop was held back, then cut"
    assert sum(isinstance(k, T.TextEndPart) for k in kept) == 1
    finish = cutter.parts(T.FinishPart(finish_reason="stop"))[0]
    assert isinstance(finish, T.FinishPart)
    assert finish.provider_details == {"stop_sequence": "Observation:"}


def test_held_back_text_that_is_no_stop_is_passed_on() -> None:
    cutter = StopCutter(["Observation:"])
    kept = [k for p in _text("Obs", "cure") for k in cutter.parts(p)]
    assert "".join(k.delta for k in kept if isinstance(k, T.TextDeltaPart)) == "Obscure"
    finish = cutter.parts(T.FinishPart(finish_reason="stop", raw_stop_reason="end_turn"))[0]
    assert isinstance(finish, T.FinishPart) and "stop_sequence" not in finish.provider_details


def test_the_stop_completed_first_is_the_one_that_stops() -> None:
    """The API, writing token by token, stops at the sequence that is complete first, even
    when another one began earlier."""
    cutter = StopCutter(["xyz", "y"])
    kept = [k for p in _text("axyz") for k in cutter.parts(p)]
    assert [k.delta for k in kept if isinstance(k, T.TextDeltaPart)] == ["ax"]
    finish = cutter.parts(T.FinishPart(finish_reason="stop"))[0]
    assert isinstance(finish, T.FinishPart) and finish.provider_details["stop_sequence"] == "y"


def test_what_comes_after_the_stop_is_left_out_and_a_call_before_it_keeps_tool_calls() -> None:
    before = T.ToolCallPart(tool_call_id="c1", tool_name="search", input={})
    after = T.ToolCallPart(tool_call_id="c2", tool_name="fetch", input={})
    parts = [before, *_text("a Observation: b"), after, T.FinishPart(finish_reason="tool-calls")]
    assert _cut(parts) == ("tool-calls", ["search"], "a ")
    parts = [*_text("a Observation: b"), after, T.FinishPart(finish_reason="tool-calls")]
    assert _cut(parts) == ("stop", [], "a ")


def test_a_stop_in_an_attempt_taken_back_does_not_cut_the_answer_that_follows() -> None:
    """The stop was found in a stream the CLI then took back and asked again: the cutter
    swallowed the discard and the retry, so the answer was the discarded text."""
    parts = [
        T.TextStartPart(id="t1"),
        T.TextDeltaPart(id="t1", delta="Old answer Observation: z"),
        T.DiscardPart(ids=["t1"], reason="cut"),
        T.TextStartPart(id="t2"),
        T.TextDeltaPart(id="t2", delta="New answer"),
        T.TextEndPart(id="t2"),
        T.FinishPart(finish_reason="stop"),
    ]
    assert _cut(parts) == ("stop", [], "New answer")


def test_a_call_taken_back_does_not_make_the_stopped_answer_a_tool_call() -> None:
    parts = [
        T.ToolInputStartPart(id="c1", tool_name="search"),
        T.ToolInputEndPart(id="c1"),
        T.ToolCallPart(tool_call_id="c1", tool_name="search", input={}),
        T.DiscardPart(ids=["c1"], reason="cut"),
        T.TextStartPart(id="t2"),
        T.TextDeltaPart(id="t2", delta="Thought: x\nObservation: y"),
        T.TextEndPart(id="t2"),
        T.FinishPart(finish_reason="stop"),
    ]
    assert _cut(parts) == ("stop", [], "Thought: x\n")
