"""Request messages -> Messages API turns (`convert_messages`): history and the turn to answer."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sf_provider._messages import Conversation, convert_messages
from sf_provider.errors import InvalidMessagesError

# The first bytes of each image type the Messages API takes: what the check reads (the data must
# also decode as base64). PNG is a whole 1x1 image.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgAAACAAEA5ScN5AAAAABJRU5ErkJggg=="
HEADS = {
    "image/jpeg": b"\xff\xd8\xff\xe0\x00\x10JFIF\x00",
    "image/png": base64.b64decode(PNG),
    "image/gif": b"GIF89a\x01\x00\x01\x00\x00\x00",
    "image/webp": b"RIFF\x24\x00\x00\x00WEBPVP8 ",
}
JPEG = base64.b64encode(HEADS["image/jpeg"]).decode()


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
                    {"type": "image", "data": PNG, "media_type": "image/png"},
                    {"type": "image", "url": f"data:image/jpeg;base64,{JPEG}"},
                    {"type": "image", "url": "https://example.org/cat.png"},
                ],
            }
        ]
    )
    assert [b["source"] for b in conversation.prompt] == [
        {"type": "base64", "media_type": "image/png", "data": PNG},
        {"type": "base64", "media_type": "image/jpeg", "data": JPEG},
        {"type": "url", "url": "https://example.org/cat.png"},
    ]


def test_a_tool_result_with_content_blocks_keeps_them_and_its_error_flag() -> None:
    image = {"type": "image", "data": PNG, "media_type": "image/png"}
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
                                             "data": PNG}},
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
            "message 2 (user): the tool call(s) c1 before it have no result; a 'tool' message "
            "with their results must come right after the assistant message making them",
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


@pytest.mark.parametrize(
    "content",
    ["", "  \n", [], [text("")], [text("  "), text("\t")]],
    ids=["empty-string", "blank-string", "no-blocks", "empty-block", "blank-blocks"],
)
def test_a_blank_last_user_turn_is_refused_as_an_empty_prompt_string_is(content: Any) -> None:
    with pytest.raises(InvalidMessagesError, match="message 0: the last user turn is empty"):
        convert_messages([{"role": "user", "content": content}])
    with pytest.raises(InvalidMessagesError, match="message 2: the last user turn is empty"):
        convert_messages(
            [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
             {"role": "user", "content": content}]
        )  # fmt: skip


def test_a_last_user_turn_with_an_image_or_a_tool_result_beside_blank_text_is_kept() -> None:
    image = {"type": "image", "data": PNG, "media_type": "image/png"}
    assert len(convert_messages([{"role": "user", "content": [text(" "), image]}]).prompt) == 2
    conversation = convert_messages(
        [{"role": "user", "content": "a"}, {"role": "assistant", "content": [call("c1")]},
         {"role": "tool", "content": [result("c1", "done")]}, {"role": "user", "content": ""}]
    )  # fmt: skip
    assert [b["type"] for b in conversation.prompt] == ["tool_result", "text"]


@pytest.mark.parametrize("flag", ["false", "true", 0, 1, None])
def test_a_tool_result_is_error_that_is_no_bool_is_refused(flag: Any) -> None:
    with pytest.raises(InvalidMessagesError) as info:
        convert_messages(
            [{"role": "user", "content": "a"}, {"role": "assistant", "content": [call("c1")]},
             {"role": "tool", "content": [result("c1", "x", is_error=flag)]}]
        )  # fmt: skip
    assert str(info.value) == (
        f"message 2 (tool), block 0: a tool-result's 'is_error' must be true or false (a bool), "
        f"not {flag!r}"
    )


def test_a_tool_result_tool_name_must_name_the_calls_tool() -> None:
    history = [{"role": "user", "content": "a"}, {"role": "assistant", "content": [call("c1")]}]
    same = [*history, {"role": "tool", "content": [result("c1", "x", tool_name="get_weather")]}]
    assert convert_messages(same).prompt == [
        {"type": "tool_result", "tool_use_id": "c1", "content": [text("x")]}
    ]
    other = [*history, {"role": "tool", "content": [result("c1", "x", tool_name="delete")]}]
    with pytest.raises(InvalidMessagesError, match="names the tool 'delete', but that call is of"):
        convert_messages(other)


@pytest.mark.parametrize(
    ("image", "problem"),
    [
        ({"data": PNG, "media_type": "image/png", "url": "https://example.org/a.png"},
         "an image block has 'data' or 'url', not both; keep one"),
        ({"url": "https://example.org/a.png", "media_type": "image/png"},
         "'media_type' goes with 'data'"),
        ({"url": "https://example.org/a.png", "detail": "low"},
         "image detail 'low' cannot be honoured: Claude has no low-detail mode"),
        ({"url": "https://example.org/a.png", "detail": "tiny"},
         "image detail 'tiny' is not one of 'auto', 'high'"),
    ],
    ids=["data-and-url", "url-with-media-type", "detail-low", "detail-unknown"],
)  # fmt: skip
def test_an_image_block_that_would_lose_something_is_refused(
    image: dict[str, Any], problem: str
) -> None:
    with pytest.raises(InvalidMessagesError) as info:
        convert_messages([{"role": "user", "content": [text("Look:"), {"type": "image", **image}]}])
    assert str(info.value).startswith(f"message 0 (user), block 1: {problem}")


@pytest.mark.parametrize("detail", ["auto", "high"])
def test_an_image_detail_claude_honours_is_accepted(detail: str) -> None:
    image = {"type": "image", "url": "https://example.org/a.png", "detail": detail}
    assert convert_messages([{"role": "user", "content": [image]}]).prompt == [
        {"type": "image", "source": {"type": "url", "url": "https://example.org/a.png"}}
    ]


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([{"role": "user", "content": "Hi", "name": "ada"}],
         "message 0 (user): a user message has unknown key(s) 'name' (the Messages API has no "
         "participant names"),
        ([{"role": "user", "content": [{"type": "text", "text": "Hi", "citations": []}]}],
         "message 0 (user), block 0: a text block has unknown key(s) 'citations'"),
        ([{"role": "user", "content": "a"},
          {"role": "assistant", "content": [{**call("c1"), "provider_executed": True}]},
          {"role": "tool", "content": [result("c1", "x")]}],
         "message 1 (assistant), block 0: a tool-call has unknown key(s) 'provider_executed'"),
        ([{"role": "user", "content": "a"},
          {"role": "assistant", "content": [call("c1")]},
          {"role": "tool", "content": [result("c1", "x", outcome="failed")]}],
         "message 2 (tool), block 0: a tool-result has unknown key(s) 'outcome'"),
        ([{"role": "user", "content": "a"},
          {"role": "assistant", "content": [{"type": "reasoning", "text": "t", "sig": "s"}]},
          {"role": "user", "content": "b"}],
         "message 1 (assistant), block 0: a reasoning block has unknown key(s) 'sig'"),
        ([{"role": "user", "content": [{"type": "image", "url": "https://x.org", "alt": "a"}]}],
         "message 0 (user), block 0: an image block has unknown key(s) 'alt'"),
        ([{"role": "system", "content": "Be brief.", "priority": 1},
          {"role": "user", "content": "Hi"}],
         "message 0 (system): a system message has unknown key(s) 'priority'"),
    ],
    ids=["message-name", "text-citations", "call-extra", "result-extra", "reasoning-extra",
         "image-extra", "system-extra"],
)  # fmt: skip
def test_an_unknown_key_on_a_message_or_block_is_refused_naming_it(
    messages: list[Any], expected: str
) -> None:
    with pytest.raises(InvalidMessagesError) as info:
        convert_messages(messages)
    assert str(info.value).startswith(expected)
    assert "remove them" in str(info.value)


def test_cache_control_on_messages_and_blocks_is_ignored() -> None:
    hint = {"type": "ephemeral"}
    conversation = convert_messages(
        [{"role": "system", "content": "Be brief.", "cache_control": hint},
         {"role": "user", "content": [{**text("Hi"), "cache_control": hint}],
          "cache_control": hint}]
    )  # fmt: skip
    assert (conversation.system, conversation.prompt) == (["Be brief."], [text("Hi")])


def test_a_system_content_list_of_strings_is_refused_not_a_crash() -> None:
    with pytest.raises(InvalidMessagesError, match=r"message 0 \(system\): a text block must be"):
        convert_messages([{"role": "system", "content": ["Be brief."]},
                          {"role": "user", "content": "Hi"}])  # fmt: skip


# -- images: what the CLI could not send as an image is refused, not replaced by a text note


@pytest.mark.parametrize("media_type", list(HEADS))
def test_an_image_of_each_type_the_api_takes_is_accepted(media_type: str) -> None:
    data = base64.b64encode(HEADS[media_type]).decode()
    for image in ({"data": data, "media_type": media_type},
                  {"url": f"data:{media_type};base64,{data}"}):  # fmt: skip
        prompt = convert_messages([{"role": "user", "content": [{"type": "image", **image}]}])
        assert prompt.prompt == [
            {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
        ]


def test_image_data_without_its_base64_padding_is_accepted_as_sent() -> None:
    unpadded = PNG.rstrip("=")
    image = {"type": "image", "data": unpadded, "media_type": "image/png"}
    assert convert_messages([{"role": "user", "content": [image]}]).prompt[0]["source"] == {
        "type": "base64", "media_type": "image/png", "data": unpadded
    }  # fmt: skip


_NOT_BASE64 = "the image data is not valid base64"
_BAD_IMAGES = [
    ("not-base64", "@@@not-base64@@@", "image/png", _NOT_BASE64),
    ("base64url", base64.urlsafe_b64encode(b"\xff\xfb\xff" * 4).decode(), "image/jpeg",
     _NOT_BASE64),
    ("line-breaks", PNG[:20] + "\n" + PNG[20:], "image/png", _NOT_BASE64),
    ("non-ascii", PNG + "é", "image/png", _NOT_BASE64),
    ("pdf", base64.b64encode(b"%PDF-1.4 x").decode(), "application/pdf",
     "image media type 'application/pdf' is not one the Messages API takes (image/jpeg, "
     "image/png, image/gif, image/webp)"),
    ("jpg-alias", JPEG, "image/jpg", "image media type 'image/jpg' is not one"),
    ("svg", base64.b64encode(b"<svg/>").decode(), "image/svg+xml",
     "image media type 'image/svg+xml' is not one"),
    ("png-as-jpeg", PNG, "image/jpeg",
     "the image is declared 'image/jpeg', but its data is image/png data"),
    ("text-as-png", base64.b64encode(b"hello, world").decode(), "image/png",
     "the image is declared 'image/png', but its data is not a JPEG, PNG, GIF or WebP image"),
    ("empty", "", "image/png", "the image is declared 'image/png', but its data is empty"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("data", "media_type", "problem"),
    [case[1:] for case in _BAD_IMAGES],
    ids=[case[0] for case in _BAD_IMAGES],
)
def test_image_data_the_cli_could_not_send_as_an_image_is_refused_naming_the_block(
    data: str, media_type: str, problem: str
) -> None:
    # The CLI would replace it by "[Image could not be processed ...]" and answer 200.
    forms = [{"data": data, "media_type": media_type}]
    if data and "\n" not in data:
        forms.append({"url": f"data:{media_type};base64,{data}"})
    for image in forms:
        with pytest.raises(InvalidMessagesError) as info:
            convert_messages(
                [{"role": "user", "content": [text("Look:"), {"type": "image", **image}]}]
            )
        assert str(info.value).startswith(f"message 0 (user), block 1: {problem}")
    # In a tool result's content too (the same check, the block named).
    with pytest.raises(InvalidMessagesError) as info:
        convert_messages(
            [{"role": "user", "content": "a"}, {"role": "assistant", "content": [call("c1")]},
             {"role": "tool", "content": [{"type": "tool-result", "tool_call_id": "c1",
              "content": [{"type": "image", **forms[0]}]}]}]
        )  # fmt: skip
    assert str(info.value).startswith(f"message 2 (tool), block 0, block 0: {problem}")


# -- an assistant turn with no content


@pytest.mark.parametrize(
    "empty",
    ["", [], [text("")], [text(""), text("")], "   \n ", [text(" "), text("\t")]],
    ids=["string", "list", "block", "blocks", "blank-string", "blank-blocks"],
)
def test_an_assistant_turn_with_no_content_is_left_out_and_the_user_turns_join(
    empty: Any,
) -> None:
    # Not an assistant turn the CLI fills with "(no content)", nor user text with an added "\n".
    conversation = convert_messages(
        [{"role": "user", "content": "first"}, {"role": "assistant", "content": empty},
         {"role": "user", "content": "second"}]
    )  # fmt: skip
    assert conversation.history == []
    assert conversation.prompt == [text("first"), text("second")]
    history = convert_messages(
        [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
         {"role": "user", "content": "c"}, {"role": "assistant", "content": empty},
         {"role": "user", "content": "d"}]
    )  # fmt: skip
    assert history.history == [
        {"role": "user", "content": [text("a")]},
        {"role": "assistant", "content": [text("b")]},
    ]
    assert history.prompt == [text("c"), text("d")]


@pytest.mark.parametrize("empty", ["", []], ids=["string", "list"])
def test_a_last_assistant_turn_with_no_content_is_still_refused(empty: Any) -> None:
    with pytest.raises(InvalidMessagesError, match="message 1: the conversation must end with"):
        convert_messages(
            [{"role": "user", "content": "a"}, {"role": "assistant", "content": empty}]
        )


# -- typed messages (`sf_provider._request`): what every front door builds


def test_typed_messages_become_the_same_turns_as_the_dict_format() -> None:
    from sf_provider._request import (
        AssistantMessage,
        Image,
        Reasoning,
        SystemMessage,
        Text,
        ToolCall,
        ToolMessage,
        ToolResult,
        UserMessage,
    )

    dicts: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [text("Weather?"), {"type": "image", "data": JPEG,
                                                         "media_type": "image/jpeg"}]},
        {"role": "assistant", "content": [
            {"type": "reasoning", "text": "think", "signature": "sig"},
            {"type": "reasoning", "text": "", "redacted": "opaque"},
            call("c1", city="Paris"),
        ]},
        {"role": "tool", "content": [result("c1", {"celsius": 21}, is_error=True)]},
        {"role": "user", "content": "And tomorrow?"},
    ]  # fmt: skip
    typed = [
        SystemMessage("Be brief."),
        UserMessage((Text("Weather?"), Image(data=JPEG, media_type="image/jpeg"))),
        AssistantMessage(
            (
                Reasoning("think", signature="sig"),
                Reasoning("", redacted="opaque"),
                ToolCall("c1", "get_weather", {"city": "Paris"}),
            )
        ),
        ToolMessage((ToolResult("c1", '{"celsius": 21}', is_error=True),)),
        UserMessage((Text("And tomorrow?"),)),
    ]
    assert convert_messages(typed) == convert_messages(dicts)
    # Mixed lists are read message by message.
    assert convert_messages([*typed[:3], *dicts[3:]]) == convert_messages(dicts)


def test_typed_messages_are_checked_like_dicts() -> None:
    from sf_provider._request import Image, Text, ToolMessage, ToolResult, UserMessage

    with pytest.raises(InvalidMessagesError, match="not valid base64"):
        convert_messages([UserMessage((Image(data="@@", media_type="image/png"),))])
    with pytest.raises(InvalidMessagesError, match="no matching tool call"):
        convert_messages([UserMessage((Text("hi"),)), ToolMessage((ToolResult("x", "1"),))])
    with pytest.raises(InvalidMessagesError, match="detail"):
        convert_messages([UserMessage((Image(url="https://x/y.png", detail="low"),))])


def test_holds_tool_blocks_reads_typed_messages() -> None:
    from sf_provider._request import (
        AssistantMessage,
        Text,
        ToolCall,
        UserMessage,
        holds_tool_blocks,
    )

    assert not holds_tool_blocks([UserMessage((Text("hi"),))])
    assert holds_tool_blocks([AssistantMessage((ToolCall("c", "t", {}),))])
