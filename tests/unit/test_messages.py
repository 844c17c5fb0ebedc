"""Request messages -> Messages API turns (`convert_messages`): history and the turn to answer."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sf_provider._messages import Conversation, convert_messages
from sf_provider.errors import InvalidMessagesError


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def call(call_id: str, name: str = "get_weather", **arguments: Any) -> dict[str, Any]:
    return {"type": "tool-call", "tool_call_id": call_id, "tool_name": name, "input": arguments}


def result(call_id: str, output: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "tool-result", "tool_call_id": call_id, "output": output, **extra}


def test_string_prompt_is_one_text_block_with_no_history() -> None:
    conversation = convert_messages("What is 2+3?")
    assert conversation == Conversation(prompt=[text("What is 2+3?")])
    assert conversation.prompt_text == "What is 2+3?"


@pytest.mark.parametrize("prompt", ["", "  \n\t"])
def test_empty_string_prompt_is_rejected(prompt: str) -> None:
    with pytest.raises(InvalidMessagesError, match="empty"):
        convert_messages(prompt)


def test_empty_message_list_is_rejected() -> None:
    with pytest.raises(InvalidMessagesError, match="non-empty"):
        convert_messages([])


def test_system_messages_go_to_the_system_prompt_in_order() -> None:
    conversation = convert_messages(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "system", "content": [text("Be kind.")]},
        ]
    )
    assert conversation.system == ["Be brief.", "Be kind."]
    assert conversation.prompt == [text("Hi")]


def test_an_app_executed_tool_loop_becomes_native_blocks_with_the_same_ids() -> None:
    conversation = convert_messages(
        [
            {"role": "user", "content": "Weather in Paris and Tokyo?"},
            {
                "role": "assistant",
                "content": [text("Checking."), call("c1", city="Paris"), call("c2", city="Tokyo")],
            },
            {
                "role": "tool",
                "content": [result("c2", {"error": "offline"}, is_error=True), result("c1", "18C")],
            },
        ]
    )
    assert conversation.history == [
        {"role": "user", "content": [text("Weather in Paris and Tokyo?")]},
        {
            "role": "assistant",
            "content": [
                text("Checking."),
                {"type": "tool_use", "id": "c1", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "c2", "name": "get_weather", "input": {"city": "Tokyo"}},
            ],
        },
    ]
    assert conversation.prompt == [
        {
            "type": "tool_result",
            "tool_use_id": "c2",
            "content": '{"error": "offline"}',
            "is_error": True,
        },
        # A success as one text block, as the CLI records the results it ran itself.
        {"type": "tool_result", "tool_use_id": "c1", "content": [text("18C")]},
    ]
    assert conversation.warnings == []


def test_user_text_after_tool_results_joins_the_same_turn() -> None:
    conversation = convert_messages(
        [
            {"role": "user", "content": "Go"},
            {"role": "assistant", "content": [call("c1")]},
            {"role": "tool", "content": [result("c1", "done")]},
            {"role": "user", "content": "Now summarise."},
        ]
    )
    assert [b["type"] for b in conversation.prompt] == ["tool_result", "text"]


def test_images_from_base64_and_data_urls_become_base64_sources() -> None:
    conversation = convert_messages(
        [
            {
                "role": "user",
                "content": [
                    {"type": "image", "data": "AAAA", "media_type": "image/png"},
                    {"type": "image", "url": "data:image/jpeg;base64,BBBB"},
                    {"type": "image", "url": "https://example.org/cat.png"},
                ],
            }
        ]
    )
    assert [b["source"] for b in conversation.prompt] == [
        {"type": "base64", "media_type": "image/png", "data": "AAAA"},
        {"type": "base64", "media_type": "image/jpeg", "data": "BBBB"},
        {"type": "url", "url": "https://example.org/cat.png"},
    ]


def test_a_tool_result_with_content_blocks_keeps_them_and_its_error_flag() -> None:
    image = {"type": "image", "data": "AAAA", "media_type": "image/png"}
    conversation = convert_messages(
        [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": [call("c1")]},
            {"role": "tool", "content": [
                {"type": "tool-result", "tool_call_id": "c1", "is_error": True,
                 "content": [text("broken:"), image]}]},
        ]
    )  # fmt: skip
    assert conversation.prompt == [
        {
            "type": "tool_result",
            "tool_use_id": "c1",
            "content": [
                text("broken:"),
                {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                             "data": "AAAA"}},
            ],
            "is_error": True,
        }
    ]  # fmt: skip


def test_signed_reasoning_is_replayed_as_thinking() -> None:
    conversation = convert_messages(
        [
            {"role": "user", "content": "Q"},
            {
                "role": "assistant",
                "content": [{"type": "reasoning", "text": "t", "signature": "s"}],
            },
            {"role": "user", "content": "Q2"},
        ]
    )
    assert conversation.history[1]["content"] == [
        {"type": "thinking", "thinking": "t", "signature": "s"}
    ]
    assert conversation.warnings == []


def test_unsigned_reasoning_is_flattened_to_text_with_a_warning() -> None:
    conversation = convert_messages(
        [
            {"role": "user", "content": "Q"},
            {"role": "assistant", "content": [{"type": "reasoning", "text": "hmm"}]},
            {"role": "user", "content": "Q2"},
        ]
    )
    assert conversation.history[1]["content"] == [text("<reasoning>hmm</reasoning>")]
    assert [w.code for w in conversation.warnings] == ["history-flattened"]
    assert "message 1" in conversation.warnings[0].message


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([{"role": "robot", "content": "x"}], "message 0: unknown role 'robot'"),
        ([{"role": "user"}], "message 0 (user) has no 'content'"),
        (["hello"], "message 0 must be a dict"),
        ([{"role": "user", "content": 5}], "message 0 (user): content must be"),
        ([{"role": "user", "content": [{"type": "audio"}]}], "message 0 (user), block 0"),
        (
            [{"role": "user", "content": "a"}, {"role": "tool", "content": [result("zz", "x")]}],
            "message 1 (tool), block 0: tool result for 'zz' has no matching tool call",
        ),
        (
            [
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": [call("c1")]},
                {"role": "user", "content": "b"},
            ],
            "message 2 (user): the tool call(s) c1 before it have no result",
        ),
        (
            [
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": [call("c1"), call("c1")]},
            ],
            "message 1 (assistant), block 1: tool call id 'c1' is used twice",
        ),
        (
            [{"role": "user", "content": "a"}, {"role": "assistant", "content": [call("c1")]}],
            "the last tool call(s) c1 have no result",
        ),
        (
            [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
            "message 1: the conversation must end with a user or tool message",
        ),
        (
            [{"role": "assistant", "content": "a"}, {"role": "user", "content": "b"}],
            "message 0: the conversation must start with a user message",
        ),
        ([{"role": "user", "content": [{"type": "image", "url": "ftp://x"}]}], "data: URL"),
        ([{"role": "system", "content": "only system"}], "must end with a user or tool message"),
        (
            [{"role": "user", "content": "a"}, {"role": "assistant", "content": [call("c1")]},
             {"role": "tool", "content": [result("c1", "x", content=[text("y")])]}],
            "a tool-result has 'output' or 'content', not both",
        ),
        (
            [{"role": "user", "content": "a"}, {"role": "assistant", "content": [call("c1")]},
             {"role": "tool", "content": [
                 {"type": "tool-result", "tool_call_id": "c1", "content": []}]}],
            "a tool-result's 'content' is empty",
        ),
        (
            [{"role": "user", "content": "a"}, {"role": "assistant", "content": [call("c1")]},
             {"role": "tool", "content": [
                 {"type": "tool-result", "tool_call_id": "c1", "content": [{"type": "audio"}]}]}],
            "block 0, block 0: a tool-result content block must be 'text' or 'image'",
        ),
    ],
    ids=[
        "unknown-role", "no-content", "not-a-dict", "bad-content", "unknown-block",
        "orphan-result", "call-without-result", "duplicate-call-id", "trailing-open-call",
        "ends-with-assistant", "starts-with-assistant", "bad-image-url", "only-system",
        "result-output-and-content", "result-empty-content", "result-audio",
    ],
)  # fmt: skip
def test_malformed_history_is_rejected_naming_where(messages: list[Any], expected: str) -> None:
    with pytest.raises(InvalidMessagesError) as info:
        convert_messages(messages)
    assert expected in str(info.value)


@pytest.mark.parametrize("role", [["user"], {"name": "user"}])
def test_unhashable_role_is_rejected_as_invalid_messages(role: Any) -> None:
    with pytest.raises(InvalidMessagesError, match="message 0: unknown role"):
        convert_messages([{"role": role, "content": "Hi"}])


_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                ["role", "content", "type", "text", "tool_call_id", "tool_name", "input", "output"]
            )
            | st.text(max_size=4),
            children
            | st.sampled_from(
                ["user", "assistant", "system", "tool", "text", "tool-call", "tool-result", "c1"]
            ),
            max_size=4,
        )
    ),
    max_leaves=16,
)


@settings(max_examples=300, deadline=None, database=None)
@example([{"role": [], "content": "x"}])
@given(_JSONISH)
def test_any_jsonish_input_converts_or_raises_invalid_messages(messages: Any) -> None:
    try:
        result = convert_messages(messages)
    except InvalidMessagesError:
        return
    assert isinstance(result, Conversation)
