"""Request messages -> the CLI's prompt and system text (`convert_messages`)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sf_provider._messages import Conversation, convert_messages
from sf_provider.errors import InvalidMessagesError


def test_string_prompt_is_the_prompt() -> None:
    assert convert_messages("What is 2+3?") == Conversation(prompt="What is 2+3?")


@pytest.mark.parametrize("prompt", ["", "  \n\t"])
def test_empty_string_prompt_is_rejected(prompt: str) -> None:
    with pytest.raises(InvalidMessagesError, match="empty"):
        convert_messages(prompt)


def test_empty_message_list_is_rejected() -> None:
    with pytest.raises(InvalidMessagesError, match="non-empty"):
        convert_messages([])


def test_single_user_turn_is_the_prompt_without_warnings() -> None:
    conversation = convert_messages([{"role": "user", "content": "Hi"}])

    assert conversation == Conversation(prompt="Hi")


def test_system_messages_are_collected_in_order() -> None:
    conversation = convert_messages(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "system", "content": [{"type": "text", "text": "Use metric units."}]},
            {"role": "user", "content": "Weather?"},
        ]
    )

    assert conversation.system == ["Be brief.", "Use metric units."]
    assert conversation.prompt == "Weather?"


def test_text_blocks_are_joined_by_newlines() -> None:
    content = [{"type": "text", "text": "line one"}, "line two"]

    assert convert_messages([{"role": "user", "content": content}]).prompt == "line one\nline two"


MULTI_TURN = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello!"},
    {"role": "user", "content": "What is 2+3?"},
]


def test_multi_turn_is_flattened_into_a_labelled_transcript() -> None:
    conversation = convert_messages(MULTI_TURN)

    assert conversation.prompt == (
        "Conversation so far:\n\n[user]\nHi\n\n[assistant]\nHello!\n\n[user]\nWhat is 2+3?"
    )
    assert conversation.system == ["Be brief."]


def test_multi_turn_warns_history_flattened() -> None:
    [warning] = convert_messages(MULTI_TURN).warnings

    assert warning.code == "history-flattened"
    assert "2 earlier turn(s)" in warning.message


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        (
            [{"role": "user", "content": "a"}, {"role": "tool", "content": "b"}],
            "message 1: unknown role 'tool'",
        ),
        ([{"role": "user"}], "message 0 (user) has no 'content'"),
        ([{"role": "user", "content": "a"}, "b"], "message 1 must be a dict, got str"),
        ([{"role": "user", "content": 5}], "message 0 (user): content must be a string or a list"),
        (
            [{"role": "user", "content": [{"type": "image", "source": {}}]}],
            "message 0 (user), block 0: content of type 'image' is not supported",
        ),
    ],
    ids=["unknown-role", "missing-content", "non-dict", "content-not-text", "image-block"],
)
def test_invalid_message_is_rejected_naming_its_index(messages: list[Any], expected: str) -> None:
    with pytest.raises(InvalidMessagesError) as info:
        convert_messages(messages)

    assert expected in str(info.value)


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
        [{"role": "system", "content": "Be brief."}],
    ],
    ids=["ends-with-assistant", "only-system"],
)
def test_last_message_not_from_user_is_rejected(messages: list[Any]) -> None:
    with pytest.raises(
        InvalidMessagesError, match="last non-system message must come from the user"
    ):
        convert_messages(messages)


def test_last_message_not_from_user_error_names_its_index() -> None:
    with pytest.raises(InvalidMessagesError, match="message 1"):
        convert_messages(
            [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]
        )


@pytest.mark.parametrize("role", [["user"], {"name": "user"}])
def test_unhashable_role_is_rejected_as_invalid_messages(role: Any) -> None:
    with pytest.raises(InvalidMessagesError, match="message 0: unknown role"):
        convert_messages([{"role": role, "content": "Hi"}])


_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["role", "content", "type", "text"]) | st.text(max_size=4),
            children | st.sampled_from(["user", "assistant", "system", "text"]),
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
