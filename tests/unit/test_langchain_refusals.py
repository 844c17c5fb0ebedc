"""LangChain messages the provider cannot send are refused by the pure conversion
(`_provider_messages`), before any process starts, with an `InvalidMessagesError` that names
the message, says what is wrong and what to send instead."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, ChatMessage, HumanMessage, SystemMessage

from sf_provider import _request as req
from sf_provider.adapters.langchain import _provider_messages
from sf_provider.errors import InvalidMessagesError

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
