"""`TurnRecorder`: the turns a live CLI process adds to its conversation, in the form a request's
history takes, on plain SDK dataclasses (the live comparison is in test_continuation.py)."""

from __future__ import annotations

from claude_agent_sdk import (
    AssistantMessage,
    ConversationResetMessage,
    StreamEvent,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)

from sf_provider._history import TurnRecorder
from sf_provider._messages import convert_messages


def assistant(*blocks: object, message_id: str = "m1") -> AssistantMessage:
    return AssistantMessage(content=list(blocks), model="claude", message_id=message_id)  # type: ignore[arg-type]


def record(*messages: object) -> TurnRecorder:
    recorder = TurnRecorder("sf")
    for message in messages:
        recorder.add(message)
    return recorder


def test_an_executor_round_is_recorded_as_the_history_an_app_would_send() -> None:
    recorder = record(
        # The SDK yields one message per content block of an API message.
        assistant(ThinkingBlock("hmm", "sig")),
        assistant(TextBlock("Adding.")),
        assistant(ToolUseBlock("t1", "mcp__sf__add", {"a": 1})),
        assistant(ToolUseBlock("t2", "mcp__sf__add", {})),
        UserMessage(content=[ToolResultBlock("t1", [{"type": "text", "text": "2"}])]),
        UserMessage(content=[ToolResultBlock("t2", "boom", is_error=True)]),
        assistant(TextBlock("Done."), message_id="m2"),
        SystemMessage(subtype="api_retry", data={}),  # adds no turn
    )
    assert recorder.complete
    history = convert_messages(
        [
            {"role": "user", "content": "Add."},
            {"role": "assistant", "content": [
                {"type": "reasoning", "text": "hmm", "signature": "sig"},
                {"type": "text", "text": "Adding."},
                {"type": "tool-call", "tool_call_id": "t1", "tool_name": "add", "input": {"a": 1}},
                {"type": "tool-call", "tool_call_id": "t2", "tool_name": "add", "input": {}}]},
            {"role": "tool", "content": [
                {"type": "tool-result", "tool_call_id": "t1", "output": "2"},
                {"type": "tool-result", "tool_call_id": "t2", "output": "boom", "is_error": True}]},
            {"role": "assistant", "content": "Done."},
            {"role": "user", "content": "Next."},
        ]
    ).history  # fmt: skip
    assert recorder.turns == history[1:]  # all but the user turn that started the query


def test_what_the_app_history_cannot_hold_makes_the_record_incomplete() -> None:
    assert not record(assistant(ThinkingBlock("hmm", ""))).complete  # unsigned thinking
    assert not record(SystemMessage(subtype="compact_boundary", data={})).complete
    reset = ConversationResetMessage(new_conversation_id="c", uuid="u", session_id="s")
    assert not record(reset).complete
    synthetic = AssistantMessage(content=[TextBlock("API Error")], model="<synthetic>")
    assert not record(synthetic).complete


def test_a_redacted_thinking_block_is_recorded_from_the_stream() -> None:
    # The SDK drops the block from its AssistantMessage, which arrives empty; the stream has it.
    start = {"type": "content_block_start", "index": 0,
             "content_block": {"type": "redacted_thinking", "data": "opaque"}}  # fmt: skip
    recorder = record(
        StreamEvent(uuid="u", session_id="s", event=start),
        assistant(),
        assistant(ToolUseBlock("t1", "mcp__sf__add", {"a": 1})),
    )
    assert recorder.complete
    history = convert_messages(
        [
            {"role": "user", "content": "add"},
            {"role": "assistant", "content": [
                {"type": "reasoning", "text": "", "redacted": "opaque"},
                {"type": "tool-call", "tool_call_id": "t1", "tool_name": "add", "input": {"a": 1}},
            ]},
            {"role": "tool", "content": [
                {"type": "tool-result", "tool_call_id": "t1", "output": "2"}]},
        ]
    ).history  # fmt: skip
    assert recorder.turns == history[1:2]
