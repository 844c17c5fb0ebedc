"""Pure mappers: SDK messages -> stream parts (`PartMapper`) -> a result (`ResultCollector`)."""

from __future__ import annotations

import json
from typing import Any

import pytest
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

from sf_provider._mapping import PartMapper, ResultCollector
from sf_provider._outcome import QueryOutcome, finish_reason, usage_from
from sf_provider.types import (
    FinishPart,
    ReasoningDeltaPart,
    ReasoningEndPart,
    ReasoningStartPart,
    StreamPart,
    TextDeltaPart,
    TextEndPart,
    TextStartPart,
    ToolCallPart,
    ToolInputDeltaPart,
    ToolInputStartPart,
    ToolResultPart,
    Usage,
)

MODEL = "claude-test"


# -- builders for SDK messages


def event(raw: dict[str, Any], parent: str | None = None) -> StreamEvent:
    return StreamEvent(uuid="u", session_id="s", event=raw, parent_tool_use_id=parent)


def message_start(message_id: str) -> StreamEvent:
    return event({"type": "message_start", "message": {"id": message_id}})


def block_start(index: int, block: dict[str, Any]) -> StreamEvent:
    return event({"type": "content_block_start", "index": index, "content_block": block})


def block_delta(index: int, delta: dict[str, Any]) -> StreamEvent:
    return event({"type": "content_block_delta", "index": index, "delta": delta})


def block_stop(index: int) -> StreamEvent:
    return event({"type": "content_block_stop", "index": index})


def assistant(*blocks: Any, message_id: str | None = None) -> AssistantMessage:
    return AssistantMessage(content=list(blocks), model=MODEL, message_id=message_id)


def tool_result(call_id: str, text: str, *, is_error: bool = False) -> UserMessage:
    block = ToolResultBlock(
        tool_use_id=call_id, content=[{"type": "text", "text": text}], is_error=is_error
    )
    return UserMessage(content=[block])


def result_message(
    *,
    subtype: str = "success",
    is_error: bool = False,
    stop_reason: str | None = "end_turn",
    usage: dict[str, Any] | None = None,
    structured_output: Any = None,
) -> ResultMessage:
    return ResultMessage(
        subtype=subtype,
        duration_ms=120,
        duration_api_ms=100,
        is_error=is_error,
        num_turns=2,
        session_id="sess-1",
        stop_reason=stop_reason,
        total_cost_usd=0.0012,
        usage=usage,
        structured_output=structured_output,
    )


def map_all(messages: list[Any], mapper: PartMapper | None = None) -> list[StreamPart]:
    mapper = mapper or PartMapper("sf", provider_executed=True)
    return [part for message in messages for part in mapper.map(message)]


def types_of(parts: list[StreamPart]) -> list[str]:
    return [part.type for part in parts]


# -- streamed text


STREAMED_TEXT = [
    message_start("msg_1"),
    block_start(0, {"type": "text", "text": ""}),
    block_delta(0, {"type": "text_delta", "text": "Hel"}),
    block_delta(0, {"type": "text_delta", "text": "lo"}),
    # The SDK yields the whole message before the stream's content_block_stop.
    assistant(TextBlock("Hello"), message_id="msg_1"),
    block_stop(0),
]


def test_streamed_text_yields_start_deltas_end_once() -> None:
    parts = map_all(STREAMED_TEXT)

    assert types_of(parts) == ["text-start", "text-delta", "text-delta", "text-end"]


def test_streamed_text_deltas_share_the_block_id() -> None:
    parts = map_all(STREAMED_TEXT)

    assert (
        len(
            {
                part.id
                for part in parts
                if isinstance(part, TextStartPart | TextDeltaPart | TextEndPart)
            }
        )
        == 1
    )
    assert "".join(p.delta for p in parts if isinstance(p, TextDeltaPart)) == "Hello"


def test_streamed_thinking_yields_reasoning_with_its_signature() -> None:
    parts = map_all(
        [
            message_start("msg_1"),
            block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
            block_delta(0, {"type": "thinking_delta", "thinking": "Let me think"}),
            block_delta(0, {"type": "signature_delta", "signature": "sig-"}),
            block_delta(0, {"type": "signature_delta", "signature": "abc"}),
            assistant(ThinkingBlock("Let me think", "sig-abc"), message_id="msg_1"),
            block_stop(0),
        ]
    )

    [start, delta, end] = parts
    assert isinstance(start, ReasoningStartPart)
    assert isinstance(delta, ReasoningDeltaPart) and delta.delta == "Let me think"
    assert isinstance(end, ReasoningEndPart) and end.signature == "sig-abc"


def test_events_of_a_subagent_are_ignored() -> None:
    parts = map_all(
        [
            event({"type": "message_start", "message": {"id": "msg_9"}}, parent="toolu_parent"),
            event(
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
                parent="toolu_parent",
            ),
        ]
    )

    assert parts == []


# -- non-streamed messages


def test_non_streamed_assistant_message_yields_full_parts() -> None:
    parts = map_all(
        [
            assistant(
                ThinkingBlock("hmm", "sig"),
                TextBlock("Adding."),
                ToolUseBlock(id="toolu_1", name="mcp__sf__add", input={"a": 1, "b": 2}),
                message_id="msg_never_streamed",
            )
        ]
    )

    assert types_of(parts) == [
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "text-start",
        "text-delta",
        "text-end",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-end",
        "tool-call",
    ]


def test_non_streamed_text_carries_the_whole_text() -> None:
    parts = map_all([assistant(TextBlock("Hello, world"))])

    assert [p.delta for p in parts if isinstance(p, TextDeltaPart)] == ["Hello, world"]


def test_non_streamed_tool_input_is_its_json() -> None:
    parts = map_all([assistant(ToolUseBlock(id="toolu_1", name="mcp__sf__say", input={"w": "é"}))])

    [delta] = [p for p in parts if isinstance(p, ToolInputDeltaPart)]
    assert json.loads(delta.delta) == {"w": "é"}
    assert "é" in delta.delta


def test_system_message_yields_nothing() -> None:
    assert map_all([SystemMessage(subtype="init", data={"tools": []})]) == []


# -- tool calls


STREAMED_TOOL_USE = [
    message_start("msg_1"),
    block_start(0, {"type": "tool_use", "id": "toolu_1", "name": "mcp__sf__add", "input": {}}),
    block_delta(0, {"type": "input_json_delta", "partial_json": '{"a": 1, '}),
    block_delta(0, {"type": "input_json_delta", "partial_json": '"b": 2}'}),
    assistant(
        ToolUseBlock(id="toolu_1", name="mcp__sf__add", input={"a": 1, "b": 2}), message_id="msg_1"
    ),
    block_stop(0),
]


def test_tool_input_end_precedes_tool_call_in_the_real_sdk_order() -> None:
    parts = map_all(STREAMED_TOOL_USE)

    assert types_of(parts) == [
        "tool-input-start",
        "tool-input-delta",
        "tool-input-delta",
        "tool-input-end",
        "tool-call",
    ]


def test_tool_call_carries_the_complete_input() -> None:
    [call] = [p for p in map_all(STREAMED_TOOL_USE) if isinstance(p, ToolCallPart)]

    assert (call.tool_call_id, call.input, call.provider_executed) == (
        "toolu_1",
        {"a": 1, "b": 2},
        True,
    )


def test_bridge_tool_name_is_mapped_to_the_app_name() -> None:
    parts = map_all(STREAMED_TOOL_USE)

    assert {p.tool_name for p in parts if isinstance(p, ToolInputStartPart | ToolCallPart)} == {
        "add"
    }


def test_tool_name_of_another_server_is_kept() -> None:
    [*_, call] = map_all([assistant(ToolUseBlock(id="t", name="mcp__other__x", input={}))])

    assert isinstance(call, ToolCallPart) and call.tool_name == "mcp__other__x"


def test_tool_call_is_not_provider_executed_when_the_mapper_says_so() -> None:
    mapper = PartMapper("sf", provider_executed=False)
    [*_, call] = map_all([assistant(ToolUseBlock(id="t", name="mcp__sf__x", input={}))], mapper)

    assert isinstance(call, ToolCallPart) and call.provider_executed is False


def test_tool_result_takes_the_tool_name_from_the_earlier_call() -> None:
    parts = map_all([*STREAMED_TOOL_USE, tool_result("toolu_1", "3")])

    [result] = [p for p in parts if isinstance(p, ToolResultPart)]
    assert (result.tool_call_id, result.tool_name, result.output, result.is_error) == (
        "toolu_1",
        "add",
        "3",
        False,
    )
    assert result.content == [{"type": "text", "text": "3"}]


def test_tool_result_error_flag_is_kept() -> None:
    parts = map_all([*STREAMED_TOOL_USE, tool_result("toolu_1", "boom", is_error=True)])

    [result] = [p for p in parts if isinstance(p, ToolResultPart)]
    assert result.is_error is True


def test_tool_result_with_string_content_is_its_text() -> None:
    message = UserMessage(content=[ToolResultBlock(tool_use_id="toolu_1", content="plain")])

    [result] = map_all([*STREAMED_TOOL_USE, message])[-1:]
    assert isinstance(result, ToolResultPart)
    assert (result.output, result.content) == ("plain", [{"type": "text", "text": "plain"}])


def test_user_prompt_message_yields_nothing() -> None:
    assert map_all([UserMessage(content="What is 1+2?")]) == []


# -- API errors


def test_synthetic_error_message_yields_no_text_and_is_the_outcomes_api_failure() -> None:
    mapper = PartMapper("sf", provider_executed=True)
    message = AssistantMessage(
        content=[TextBlock("API Error: 429 rate limited")], model="<synthetic>", error="rate_limit"
    )

    parts = mapper.map(message)

    assert parts == []
    failure = mapper.outcome(result_message(is_error=True)).api_failure
    assert failure is not None
    assert (failure.kind, failure.text) == ("rate_limit", "API Error: 429 rate limited")


# -- finish


@pytest.mark.parametrize(
    ("stop_reason", "reason"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("refusal", "content-filter"),
        ("something_new", "other"),
        (None, "other"),
    ],
)
def test_finish_reason_of_a_stop_reason(stop_reason: str | None, reason: str) -> None:
    assert finish_reason(QueryOutcome(result_message(stop_reason=stop_reason))) == reason


def test_finish_reason_is_tool_calls_only_when_calls_are_handed_back() -> None:
    stopped_at_calls = result_message(stop_reason="tool_use")
    handed_back = QueryOutcome(stopped_at_calls, single_turn=True, handed_back=True)
    assert finish_reason(handed_back) == "tool-calls"
    # Calls the provider ran, or only the CLI's StructuredOutput call: nothing to answer.
    assert finish_reason(QueryOutcome(stopped_at_calls)) == "stop"
    assert finish_reason(QueryOutcome(stopped_at_calls, single_turn=True)) == "stop"


def test_finish_reason_of_max_turns_is_length() -> None:
    message = result_message(subtype="error_max_turns", is_error=True, stop_reason="tool_use")

    assert finish_reason(QueryOutcome(message)) == "length"


def test_finish_reason_of_an_error_result_or_a_failed_query_is_error() -> None:
    failed = result_message(is_error=True, stop_reason="end_turn")
    assert finish_reason(QueryOutcome(failed)) == "error"
    assert finish_reason(QueryOutcome(result_message()), failed=True) == "error"


def test_a_structured_answer_after_calls_the_provider_ran_finishes_with_stop() -> None:
    # The last turn called only the CLI's StructuredOutput tool; the app's call was answered
    # by its executor: no call is left for the application, so the reason is not tool-calls.
    messages = [
        assistant(ToolUseBlock(id="toolu_1", name="mcp__sf__add", input={"a": 1})),
        tool_result("toolu_1", "3"),
        assistant(ToolUseBlock(id="toolu_2", name="StructuredOutput", input={"sum": 3})),
        result_message(stop_reason="tool_use", structured_output={"sum": 3}),
    ]
    finish = map_all(messages)[-1]
    assert isinstance(finish, FinishPart)
    assert (finish.finish_reason, finish.structured_output) == ("stop", {"sum": 3})


def test_usage_from_none_is_all_zero() -> None:
    assert usage_from(None) == Usage()


def test_usage_from_counts_missing_and_non_int_keys_as_zero() -> None:
    usage = usage_from({"input_tokens": "12", "output_tokens": 3.5, "cache_read_input_tokens": 7})

    assert usage == Usage(cache_read_input_tokens=7)


def test_usage_from_reads_all_four_counts() -> None:
    raw = {
        "input_tokens": 10,
        "output_tokens": 5,
        "cache_creation_input_tokens": 2,
        "cache_read_input_tokens": 1,
        "service_tier": "standard",
    }

    assert usage_from(raw).total_tokens == 18


def test_result_message_maps_to_a_finish_part() -> None:
    [finish] = map_all([result_message(usage={"input_tokens": 10, "output_tokens": 5})])

    assert finish.type == "finish"
    assert (finish.finish_reason, finish.usage.output_tokens, finish.cost_usd) == (
        "stop",
        5,
        0.0012,
    )
    assert (finish.session_id, finish.num_turns, finish.duration_ms) == ("sess-1", 2, 120)


# -- ResultCollector


def collect(messages: list[Any]) -> Any:
    collector = ResultCollector()
    for part in map_all(messages):
        collector.add(part)
    return collector.result()


AGENT_RUN = [
    assistant(
        TextBlock("Let me add."),
        ToolUseBlock(id="toolu_1", name="mcp__sf__add", input={"a": 1, "b": 2}),
    ),
    tool_result("toolu_1", "3"),
    assistant(TextBlock("The sum is 3.")),
    result_message(),
]


def test_text_is_only_the_text_after_the_last_tool_result() -> None:
    assert collect(AGENT_RUN).text == "The sum is 3."


def test_all_text_holds_every_text_in_order() -> None:
    all_text = collect(AGENT_RUN).all_text

    assert all_text.startswith("Let me add.")
    assert all_text.endswith("The sum is 3.")


def test_text_without_tool_calls_is_all_text() -> None:
    result = collect([assistant(TextBlock("Hi "), TextBlock("there")), result_message()])

    assert (result.text, result.all_text) == ("Hi there", "Hi there")


def test_text_is_the_last_turns_text_when_the_run_ends_on_a_tool_call() -> None:
    result = collect([assistant(TextBlock("Calling."), ToolUseBlock("t", "mcp__sf__x", {}))])

    assert result.text == "Calling."


def test_tool_calls_carry_their_results() -> None:
    [call] = collect(AGENT_RUN).tool_calls

    assert (call.tool_call_id, call.tool_name, call.input) == ("toolu_1", "add", {"a": 1, "b": 2})
    assert call.result is not None
    assert call.result.output == "3"


def test_result_takes_finish_reason_and_usage_from_the_finish_part() -> None:
    result = collect([assistant(TextBlock("ok")), result_message(usage={"input_tokens": 4})])

    assert (result.finish_reason, result.usage.input_tokens, result.session_id) == (
        "stop",
        4,
        "sess-1",
    )


def test_reasoning_is_collected() -> None:
    result = collect([assistant(ThinkingBlock("a", "s"), ThinkingBlock("b", "s"))])

    assert result.reasoning == "ab"


def test_response_messages_hold_every_turn_and_the_results_the_provider_ran() -> None:
    assert collect(AGENT_RUN).response_messages == [
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me add."},
            {"type": "tool-call", "tool_call_id": "toolu_1", "tool_name": "add",
             "input": {"a": 1, "b": 2}}]},
        {"role": "tool", "content": [
            {"type": "tool-result", "tool_call_id": "toolu_1", "output": "3", "is_error": False}]},
        {"role": "assistant", "content": [{"type": "text", "text": "The sum is 3."}]},
    ]  # fmt: skip


def test_single_turn_response_messages_are_the_assistant_message() -> None:
    mapper = PartMapper("sf", provider_executed=False)
    collector = ResultCollector()
    reply = assistant(
        ThinkingBlock("hmm", "sig"), TextBlock("Calling."), ToolUseBlock("t", "mcp__sf__x", {})
    )
    for part in [*mapper.map(reply), *mapper.map(result_message())]:
        collector.add(part)
    result = collector.result()
    assert result.response_messages == [result.assistant_message()]
    assert result.assistant_message()["content"][0] == {
        "type": "reasoning", "text": "hmm", "signature": "sig"
    }  # fmt: skip


# -- an answer cut at the output limit (the CLI resumes it, then may give up)


def message_delta(stop_reason: str) -> StreamEvent:
    return event({"type": "message_delta", "delta": {"stop_reason": stop_reason}})


def streamed_text(message_id: str, value: str, stop_reason: str) -> list[Any]:
    return [
        message_start(message_id),
        block_start(0, {"type": "text", "text": ""}),
        block_delta(0, {"type": "text_delta", "text": value}),
        assistant(TextBlock(value), message_id=message_id),
        block_stop(0),
        message_delta(stop_reason),
    ]


#: What the CLI (2.1.330) sends between the pieces of a cut answer.
RESUME_NUDGE = UserMessage(
    content=[TextBlock("Output token limit hit. Resume directly — no apology, no recap ...")]
)
#: What the CLI sends when it stops resuming.
OUTPUT_LIMIT_ERROR = AssistantMessage(
    content=[TextBlock("API Error: Claude's response exceeded the 50 output token maximum.")],
    model="<synthetic>",
    error="max_output_tokens",
)


def test_a_resumed_answer_is_one_turn_whose_text_is_every_piece() -> None:
    messages = [
        *streamed_text("msg_1", "The first half, ", "max_tokens"),
        RESUME_NUDGE,
        *streamed_text("msg_2", "the second half.", "end_turn"),
        result_message(),
    ]
    mapper = PartMapper("sf", provider_executed=True)
    collector = ResultCollector()
    for part in map_all(messages, mapper):
        collector.add(part)
    got = collector.result()
    assert (got.text, got.finish_reason) == ("The first half, the second half.", "stop")
    assert got.provider_details["output_limit_hits"] == 1


def test_an_answer_the_cli_stopped_resuming_finishes_with_length_and_its_text() -> None:
    messages = [
        *streamed_text("msg_1", "Cut ", "max_tokens"),
        RESUME_NUDGE,
        *streamed_text("msg_2", "and cut again", "max_tokens"),
        OUTPUT_LIMIT_ERROR,
        result_message(is_error=True, stop_reason="stop_sequence"),
    ]
    mapper = PartMapper("sf", provider_executed=False, hold_envelopes=True)
    collector = ResultCollector()
    for part in map_all(messages, mapper):
        collector.add(part)
    got = collector.result()
    assert mapper.outcome(messages[-1]).output_limit_reached
    assert (got.text, got.finish_reason, got.raw_stop_reason) == (
        "Cut and cut again",
        "length",
        "max_tokens",
    )
    assert got.provider_details["output_limit_hits"] == 2


def test_a_cut_message_with_a_whole_call_is_answered_and_the_next_turn_is_new() -> None:
    cut = AssistantMessage(
        content=[TextBlock("Adding."), ToolUseBlock(id="toolu_1", name="mcp__sf__add", input={})],
        model=MODEL,
        message_id="msg_1",
        stop_reason="max_tokens",
    )
    messages = [
        cut,
        tool_result("toolu_1", "3"),
        assistant(TextBlock("Sum: 3."), message_id="msg_2"),
    ]
    parts = map_all(messages)
    assert [p.message_index for p in parts if isinstance(p, TextStartPart)] == [0, 1]


NO_SUCH_TOOL = "<tool_use_error>Error: No such tool available: nope</tool_use_error>"


def test_single_turn_reports_no_result_the_cli_made_for_a_call_it_hands_back() -> None:
    # An unknown tool name: the CLI answers "No such tool available" itself; the app answers
    # the call (it came back invalid), so the CLI's answer is not a result.
    mapper = PartMapper("sf", provider_executed=False, tools={})
    messages = [
        assistant(ToolUseBlock(id="toolu_1", name="mcp__sf__nope", input={})),
        tool_result("toolu_1", NO_SUCH_TOOL, is_error=True),
        result_message(stop_reason="tool_deferred"),
    ]
    parts = map_all(messages, mapper)
    assert [p.type for p in parts if p.type.startswith("tool-")][-1] == "tool-call"
    assert not [p for p in parts if isinstance(p, ToolResultPart)]
    [call] = [p for p in parts if isinstance(p, ToolCallPart)]
    assert call.invalid and "not exposed" in (call.invalid_reason or "")
