"""What `ChatClaudeAgent` refuses before any process starts: messages the provider cannot send
(the pure conversion `_provider_messages`: an `InvalidMessagesError` that names the message,
says what is wrong and what to send instead), and arguments it cannot honour."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, ChatMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, ValidationError

from sf_provider import ProviderSettings
from sf_provider import _request as req
from sf_provider.adapters.langchain import ChatClaudeAgent, _provider_messages
from sf_provider.errors import InvalidMessagesError, UnsupportedRequestError

PIXEL = "data:image/png;base64,iVBORw0KGgo="


def test_a_system_message_holding_an_image_is_refused() -> None:
    system = SystemMessage([{"type": "text", "text": "Be brief."},
                            {"type": "image_url", "image_url": {"url": PIXEL}}])  # fmt: skip
    with pytest.raises(InvalidMessagesError) as caught:
        _provider_messages([system, HumanMessage("What is it?")])
    message = str(caught.value)
    assert message.startswith("message 0 (SystemMessage): a system message holds text only")
    assert "not 'image_url'" in message and "HumanMessage" in message  # what, and what to do


def test_a_chat_message_of_an_unknown_role_is_refused() -> None:
    with pytest.raises(InvalidMessagesError) as caught:
        _provider_messages([HumanMessage("Hi"), ChatMessage(role="narrator", content="Later.")])
    assert str(caught.value) == (
        "message 1 (ChatMessage): role 'narrator' cannot be sent; use system, human, ai or tool "
        "messages"
    )


def test_chat_messages_of_known_roles_are_sent_in_their_role() -> None:
    # The other side of the refusal: ChatMessage's roles the Messages API has are kept.
    messages = [ChatMessage(role=role, content=role) for role in ("system", "user", "assistant")]
    assert _provider_messages(messages)[0] == [
        req.SystemMessage("system"),
        req.UserMessage((req.Text("user"),)),
        req.AssistantMessage((req.Text("assistant"),)),
    ]


@pytest.mark.parametrize(
    "image_url", [{}, {"url": None}, {"detail": "high"}, 7], ids=["empty", "none", "no-url", "int"]
)
def test_an_image_url_block_without_a_url_is_refused(image_url: Any) -> None:
    human = HumanMessage([{"type": "text", "text": "Look:"},
                          {"type": "image_url", "image_url": image_url}])  # fmt: skip
    with pytest.raises(InvalidMessagesError) as caught:
        _provider_messages([human])
    assert str(caught.value) == "message 0 (HumanMessage): an image_url block needs {'url': ...}"


def test_an_image_url_given_as_a_plain_string_is_its_url() -> None:
    human = HumanMessage([{"type": "image_url", "image_url": PIXEL}])
    assert _provider_messages([human])[0] == [req.UserMessage((req.Image(url=PIXEL),))]


@pytest.mark.parametrize("thought", [42, ["a", "b"], {"text": "hm"}])
def test_a_thinking_block_whose_text_is_not_a_string_is_refused(thought: Any) -> None:
    ai = AIMessage([{"type": "thinking", "thinking": thought, "signature": "sig"},
                    {"type": "text", "text": "Paris."}])  # fmt: skip
    with pytest.raises(InvalidMessagesError) as caught:
        _provider_messages([HumanMessage("Capital?"), ai, HumanMessage("Sure?")])
    message = str(caught.value)
    assert message.startswith("message 1 (AIMessage): a thinking block's text must be a string")


def test_a_thinking_block_without_text_is_sent_as_empty_signed_thinking() -> None:
    # None is not a refusal: signed thinking whose text was left out goes back with its signature.
    ai = AIMessage([{"type": "thinking", "signature": "sig"}, {"type": "text", "text": "Paris."}])
    converted, _ = _provider_messages([HumanMessage("Capital?"), ai, HumanMessage("Sure?")])
    assert converted[1] == req.AssistantMessage(
        (req.Reasoning("", signature="sig"), req.Text("Paris."))
    )


@pytest.mark.parametrize(
    "block",
    [
        {"type": "audio", "base64": "AAAA", "mime_type": "audio/wav"},
        {"type": "file", "url": "https://example.com/a.pdf"},
    ],
    ids=["audio", "file"],
)
def test_a_user_block_that_is_neither_text_nor_an_image_is_refused(block: dict[str, Any]) -> None:
    with pytest.raises(InvalidMessagesError) as caught:
        _provider_messages([HumanMessage([{"type": "text", "text": "Hear this:"}, block])])
    assert str(caught.value) == (
        f"message 0 (HumanMessage): a user block must be text or an image (image_url, or an "
        f"image with base64 + mime_type or url), not {block['type']!r}"
    )


@pytest.mark.parametrize(
    ("block", "image"),
    [
        ({"type": "image", "url": "https://example.com/a.png"},
         req.Image(url="https://example.com/a.png")),
        ({"type": "image", "source": {"type": "url", "url": "https://example.com/b.png"}},
         req.Image(url="https://example.com/b.png")),
        ({"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"},
         req.Image(data="iVBORw0KGgo=", media_type="image/png")),
    ],
    ids=["v1-url", "anthropic-url-source", "v1-base64"],
)  # fmt: skip
def test_image_blocks_by_url_or_data_are_sent_as_images(
    block: dict[str, Any], image: req.Image
) -> None:
    assert _provider_messages([HumanMessage([block])])[0] == [req.UserMessage((image,))]


def test_an_image_block_with_no_data_url_or_source_is_refused() -> None:
    with pytest.raises(InvalidMessagesError) as caught:
        _provider_messages([HumanMessage([{"type": "image", "mime_type": "image/png"}])])
    assert str(caught.value) == (
        "message 0 (HumanMessage): an image block needs base64 + mime_type, a url, or an "
        "Anthropic source (base64 or url)"
    )


@pytest.mark.parametrize(
    "block",
    [
        {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": 7},
        {"type": "image", "source": {"type": "base64", "data": b"raw", "media_type": "image/png"}},
        {"type": "image", "source": {"type": "url", "url": ["https://example.com/a.png"]}},
    ],
    ids=["mime-type", "source-data", "source-url"],
)
def test_an_image_whose_fields_are_not_strings_is_refused(block: dict[str, Any]) -> None:
    with pytest.raises(InvalidMessagesError) as caught:
        _provider_messages([HumanMessage([block])])
    assert str(caught.value) == (
        "message 0 (HumanMessage): an image's data, media type and url are strings"
    )


def test_an_assistant_block_of_another_kind_is_refused() -> None:
    ai = AIMessage([{"type": "text", "text": "Here:"},
                    {"type": "image_url", "image_url": {"url": PIXEL}}])  # fmt: skip
    with pytest.raises(InvalidMessagesError) as caught:
        _provider_messages([HumanMessage("Draw a dot."), ai, HumanMessage("Thanks.")])
    assert str(caught.value) == (
        "message 1 (AIMessage): an assistant block must be text, reasoning or a tool call, not "
        "'image_url'"
    )


def test_a_streamed_tool_call_chunk_is_sent_once_from_tool_calls() -> None:
    # An aggregated stream's message keeps its `tool_call_chunk` blocks beside `tool_calls`.
    chunk = {"type": "tool_call_chunk", "name": "add", "args": '{"a": 1}', "id": "c1", "index": 0}
    ai = AIMessage([chunk], tool_calls=[{"name": "add", "args": {"a": 1}, "id": "c1"}])
    converted, _ = _provider_messages([HumanMessage("Add."), ai])
    assert converted[1] == req.AssistantMessage((req.ToolCall("c1", "add", {"a": 1}),))


def test_a_tool_call_without_an_id_is_refused() -> None:
    ai = AIMessage("", tool_calls=[{"name": "add", "args": {"a": 1}, "id": None}])
    with pytest.raises(InvalidMessagesError) as caught:
        _provider_messages([HumanMessage("Add."), ai, HumanMessage("Well?")])
    assert str(caught.value) == (
        "message 1 (AIMessage): tool call 'add' needs an id (the ToolMessage answering it has "
        "the same), a 'name' and 'args' (an object)"
    )


# -- arguments


class Answer(BaseModel):
    """An answer."""

    answer: str


def chat() -> ChatClaudeAgent:
    return ChatClaudeAgent(settings=ProviderSettings())  # nothing starts until a call


def test_an_unknown_with_structured_output_argument_is_refused() -> None:
    with pytest.raises(UnsupportedRequestError) as caught:
        chat().with_structured_output(Answer, tool_name="answer")
    assert str(caught.value) == (
        "with_structured_output got unsupported arguments ['tool_name']: it takes schema, "
        "include_raw, method and strict"
    )


@pytest.mark.parametrize("tool_choice", [{"type": "bogus"}, 3, {"type": "tool"}])
def test_a_tool_choice_not_understood_is_refused_when_bound(tool_choice: Any) -> None:
    with pytest.raises(UnsupportedRequestError) as caught:
        chat().bind_tools([Answer], tool_choice=tool_choice)
    assert str(caught.value) == (
        f"tool_choice {tool_choice!r} is not understood: use 'auto', 'none', 'any', 'required' "
        f"or a tool name"
    )


def test_an_empty_api_key_is_refused() -> None:
    with pytest.raises(ValidationError) as caught:
        ChatClaudeAgent(api_key="")
    assert "api_key is empty: give the key, or leave api_key out" in str(caught.value)
    assert ChatClaudeAgent(api_key="sk-x").provider.settings.env["ANTHROPIC_API_KEY"] == "sk-x"
