"""The Responses API format <-> the provider, on plain data: a request's fields and input items
become one provider call (or a 400 naming the field), and stream parts and results become the
`response` object and its events. No CLI runs here."""

from __future__ import annotations

import json
from typing import Any

import pytest
from refusals import assert_refusal

from sf_provider import (
    InvalidMessagesError,
    ProviderError,
    StreamRetractionError,
    UnsupportedRequestError,
)
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
from sf_provider._responses_format import (
    DROPPABLE,
    EventMapper,
    UnsupportedParameterError,
    input_item_list,
    input_messages,
    item_id,
    item_response,
    numbered_input,
    output_items,
    parse_request,
    provider_call,
    reference,
    response_object,
)
from sf_provider._tool_choice import NamedToolChoice
from sf_provider.gateway._errors import error_info
from sf_provider.types import (
    DiscardPart,
    FinishPart,
    GenerateResult,
    ReasoningDeltaPart,
    ReasoningEndPart,
    ReasoningStartPart,
    StreamStartPart,
    TextDeltaPart,
    TextEndPart,
    TextStartPart,
    ToolCallPart,
    ToolInputDeltaPart,
    ToolInputEndPart,
    ToolInputStartPart,
    Usage,
)

TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    "strict": True,
}
CALL = {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"}
OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}
PIXEL = "data:image/png;base64,iVBORw0KGgo="


def refused(**body: Any) -> UnsupportedParameterError:
    with pytest.raises(UnsupportedParameterError) as info:
        call = parse_request({"input": "hi", **body})
        provider_call(call)
    return info.value


def messages(items: list[Any], **body: Any) -> list[Any]:
    return provider_call(parse_request({"input": items, **body}))[0]


# --------------------------------------------------------------------------- requests


def test_a_string_input_is_one_user_turn_after_the_instructions() -> None:
    call = parse_request({"model": "sonnet", "input": "Hi.", "instructions": "Be brief."})
    turns, tools, options = provider_call(call)
    assert turns == [SystemMessage("Be brief."), UserMessage((Text("Hi."),))]
    assert (tools, options) == ([], {"model": "sonnet"})
    assert call.store and not call.stream


def test_the_fields_that_shape_the_answer_become_call_options() -> None:
    call = parse_request(
        {
            "input": "hi",
            "tools": [TOOL],
            "tool_choice": {"type": "function", "name": "get_weather"},
            "parallel_tool_calls": False,
            "max_output_tokens": 300,
            "reasoning": {"effort": "high", "summary": "auto"},
            "temperature": 0.2,
            "top_p": 0.9,
            "metadata": {"run": "7"},
            "user": "u1",
            "include": ["reasoning.encrypted_content"],
            "background": False,
            "truncation": "disabled",
            "prompt_cache_key": "k",
        }
    )
    _, tools, options = provider_call(call)
    assert [(t.name, t.strict) for t in tools] == [("get_weather", True)]
    assert options == {
        "tool_choice": NamedToolChoice(name="get_weather"),
        "parallel_tool_calls": False,
        "max_tokens": 300,
        "effort": "high",
        "temperature": 0.2,
        "top_p": 0.9,
    }
    assert call.echo["metadata"] == {"run": "7"}


def test_reasoning_effort_none_turns_thinking_off() -> None:
    assert parse_request({"input": "hi", "reasoning": {"effort": "none"}}).options == {
        "thinking": "disabled"
    }


def test_allowed_tools_narrows_the_tools_offered() -> None:
    other = {**TOOL, "name": "get_time"}
    choice = {
        "type": "allowed_tools",
        "mode": "required",
        "tools": [{"type": "function", "name": "get_time"}],
    }
    call = parse_request({"input": "hi", "tools": [TOOL, other], "tool_choice": choice})
    assert [t.name for t in call.tools] == ["get_time"]
    assert call.options["tool_choice"] == "required"


def test_a_json_schema_text_format_is_the_output_schema_with_its_name_and_description() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    text_format = {
        "type": "json_schema",
        "name": "weather",
        "description": "The weather.",
        "schema": schema,
        "strict": True,
    }
    call = parse_request({"input": "hi", "text": {"format": text_format, "verbosity": "medium"}})
    assert call.structured
    assert call.options["output_schema"] == {
        **schema,
        "title": "weather",
        "description": "The weather.",
    }
    json_mode = parse_request({"input": "hi", "text": {"format": {"type": "json_object"}}})
    assert json_mode.options["output_schema"] == {"type": "object"}
    assert not parse_request({"input": "hi", "text": {"format": {"type": "text"}}}).structured


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        ({"tools": [{"type": "web_search"}]}, "tools[0]", "'web_search'"),
        ({"tools": [TOOL], "tool_choice": {"type": "file_search"}}, "tool_choice", "file_search"),
        ({"background": True}, "background", "background responses"),
        ({"truncation": "auto"}, "truncation", "one too long"),
        ({"top_logprobs": 3}, "top_logprobs", "log probabilities"),
        ({"conversation": "conv_1"}, "conversation", "previous_response_id"),
        ({"prompt": {"id": "p"}}, "prompt", "instructions"),
        ({"include": ["message.output_text.logprobs"]}, "include", "message.output_text"),
        ({"text": {"verbosity": "high"}}, "text.verbosity", "verbosity"),
        ({"text": {"format": {"type": "grammar"}}}, "text.format", "'grammar'"),
        ({"reasoning": {"effort": "extreme"}}, "reasoning.effort", "'extreme'"),
        ({"max_output_tokens": 0}, "max_output_tokens", "positive"),
        ({"metadata": {"n": 1}}, "metadata", "string values"),
        ({"stream_options": {"include_obfuscation": False}}, "stream_options", "'stream'"),
        ({"seed": 3}, "seed", "not a Responses API field"),
        ({"tool_choice": "required"}, "tool_choice", "needs at least one tool"),
    ],
)
def test_what_cannot_be_honoured_is_refused_naming_the_field(
    body: dict[str, Any], param: str, words: str
) -> None:
    error = refused(**body)
    assert error.param == param
    assert words in str(error)
    info = error_info(error)
    assert (info.status, info.param, info.code) == (400, param, "unsupported_parameter")


def test_drop_params_leaves_out_what_cannot_be_honoured_with_a_warning_each() -> None:
    """As on Chat Completions (`--drop-params`): the sampling settings and a value that asks for
    what cannot be honoured are left out, each with a `parameter-dropped` warning naming it."""
    body = {
        "input": "hi",
        "temperature": 0.2,
        "top_p": 0.9,
        "truncation": "auto",
        "top_logprobs": 3,
        "service_tier": "priority",
        "text": {"verbosity": "low"},
        # What the OpenAI Agents SDK adds to `include` with top_logprobs.
        "include": ["message.output_text.logprobs", "reasoning.encrypted_content"],
    }
    call = parse_request(body, drop=DROPPABLE)
    named = sorted(w.message.split("'")[1] for w in call.dropped)
    assert named == sorted(
        [
            "temperature",
            "top_p",
            "truncation",
            "top_logprobs",
            "service_tier",
            "text.verbosity",
            "include",
        ]
    )
    [include] = [w for w in call.dropped if "'include'" in w.message]
    assert "message.output_text.logprobs" in include.message
    assert {w.code for w in call.dropped} == {"parameter-dropped"}
    assert not {"temperature", "top_p"} & call.options.keys()
    assert call.echo["text"] == {"format": {"type": "text"}, "verbosity": "medium"}
    assert call.echo["temperature"] is None
    with pytest.raises(UnsupportedParameterError):
        parse_request(body)


@pytest.mark.parametrize(
    ("name", "value"),
    [("background", True), ("conversation", "conv_1"), ("prompt", {"id": "pmpt_1"})],
)
def test_drop_params_still_refuses_what_carries_the_conversation_or_how_it_is_answered(
    name: str, value: Any
) -> None:
    """Left out, a stored conversation or prompt would be a different question, and a
    background request's client expects to be answered at once and come back for the answer."""
    with pytest.raises(UnsupportedParameterError) as info:
        parse_request({"input": "hi", name: value}, drop=DROPPABLE)
    assert info.value.param == name


# --------------------------------------------------------------------------- input items


def test_consecutive_items_of_a_turn_are_one_message() -> None:
    items = [
        {"role": "developer", "content": "Answer in French."},
        {"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "thinking:sig"},
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
        },
        CALL,
        {**CALL, "call_id": "call_2"},
        OUTPUT,
        {**OUTPUT, "call_id": "call_2", "output": [{"type": "input_text", "text": "rainy"}]},
        {"role": "user", "content": "Thanks."},
    ]
    assert messages(items, tools=[TOOL]) == [
        SystemMessage("Answer in French."),
        UserMessage((Text("Weather?"),)),
        AssistantMessage(
            (
                Reasoning("", signature="sig"),
                Text("Checking."),
                ToolCall("call_1", "get_weather", {}),
                ToolCall("call_2", "get_weather", {}),
            )
        ),
        ToolMessage((ToolResult("call_1", "sunny"), ToolResult("call_2", "rainy"))),
        UserMessage((Text("Thanks."),)),
    ]


def test_reasoning_items_replay_signed_redacted_or_plain() -> None:
    signed = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Hm."}],
              "encrypted_content": "thinking:sig"}  # fmt: skip
    redacted = {"type": "reasoning", "summary": [], "encrypted_content": "redacted_thinking:xyz"}
    foreign = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "A plan."}],
               "encrypted_content": "gAAAA-openai"}  # fmt: skip
    empty = {"type": "reasoning", "summary": []}
    turns = messages([{"role": "user", "content": "hi"}, signed, redacted, foreign, empty])
    assert turns[1] == AssistantMessage(
        (Reasoning("Hm.", signature="sig"), Reasoning("", redacted="xyz"), Reasoning("A plan."))
    )


def test_an_image_is_a_user_part_and_low_detail_or_a_file_is_refused() -> None:
    image = {"type": "input_image", "image_url": PIXEL, "detail": "high"}
    [turn] = messages([{"role": "user", "content": [image]}])
    assert turn == UserMessage((Image(url=PIXEL),))
    for part, param in [
        ({**image, "detail": "low"}, "input[0].content[0].detail"),
        ({"type": "input_image", "file_id": "file_1"}, "input[0].content[0].file_id"),
        ({"type": "input_file", "file_id": "file_1"}, "input[0].content[0]"),
    ]:
        with pytest.raises(UnsupportedParameterError) as info:
            messages([{"role": "user", "content": [part]}])
        assert info.value.param == param


@pytest.mark.parametrize(
    ("item", "param"),
    [
        ({"type": "item_reference", "id": "msg_1"}, "input[1].type"),
        ({"type": "web_search_call", "id": "ws_1"}, "input[1].type"),
        ({"role": "user", "content": "x", "name": "Ann"}, "input[1].name"),
        (
            {"role": "assistant", "content": [{"type": "output_text", "text": "x",
                                               "annotations": [{"type": "url_citation"}]}]},
            "input[1].content[0].annotations",
        ),
    ],
)  # fmt: skip
def test_an_item_that_would_not_reach_the_model_is_refused_naming_it(
    item: dict[str, Any], param: str
) -> None:
    with pytest.raises(UnsupportedParameterError) as info:
        messages([{"role": "user", "content": "hi"}, item])
    assert info.value.param == param


def test_a_system_message_after_the_conversation_started_is_refused() -> None:
    with pytest.raises(UnsupportedRequestError, match=r"input\[1\].*'instructions'"):
        messages([{"role": "user", "content": "hi"}, {"role": "developer", "content": "x"}])


def test_malformed_items_are_invalid_messages() -> None:
    for item, words in [
        ({**CALL, "arguments": "{not json"}, "must be a JSON object"),
        ({**CALL, "call_id": ""}, "needs its 'call_id'"),
        ({"role": "robot", "content": "x"}, "unknown role"),
        ({"role": "user", "content": 7}, "content must be"),
    ]:
        with pytest.raises(InvalidMessagesError, match=words):
            messages([{"role": "user", "content": "hi"}, item], tools=[TOOL])


def _after_hi(*items: Any) -> dict[str, Any]:
    return {"input": [{"role": "user", "content": "hi"}, *items]}


def _part(role: str, part: dict[str, Any]) -> dict[str, Any]:
    return _after_hi({"role": role, "content": [part]})


#: Malformed fields and items: (body, error, what the message starts with: the `param` of an
#: UnsupportedParameterError, else the message's place, and what it says to send).
MALFORMED: dict[str, tuple[dict[str, Any], type[ProviderError], str, str]] = {
    "no-input": ({}, InvalidMessagesError, "'input' is required", "a string or a list"),
    "input-number": ({"input": 5}, InvalidMessagesError, "'input' must be", "a string or a list"),
    "previous_response_id": (
        {"input": "hi", "previous_response_id": 5}, UnsupportedParameterError,
        "previous_response_id", "must be a response id",
    ),
    "instructions": (
        {"input": "hi", "instructions": ["Be brief."]}, UnsupportedParameterError,
        "instructions", "must be a string",
    ),
    "store": ({"input": "hi", "store": "yes"}, UnsupportedParameterError, "store", "true or false"),
    "include": (
        {"input": "hi", "include": "reasoning.encrypted_content"}, UnsupportedParameterError,
        "include", "must be a list of strings",
    ),
    "reasoning": (
        {"input": "hi", "reasoning": "high"}, UnsupportedParameterError, "reasoning",
        "must be an object",
    ),
    "reasoning-summary": (
        {"input": "hi", "reasoning": {"summary": "long"}}, UnsupportedParameterError,
        "reasoning.summary", '"long" is not one of auto, concise, detailed',
    ),
    "reasoning-key": (
        {"input": "hi", "reasoning": {"budget": 5}}, UnsupportedParameterError,
        "reasoning.budget", "leave it out",
    ),
    "text": ({"input": "hi", "text": "json"}, UnsupportedParameterError, "text", "an object"),
    "text-key": (
        {"input": "hi", "text": {"style": "terse"}}, UnsupportedParameterError, "text.style",
        "leave it out",
    ),
    "tools-object": (
        {"input": "hi", "tools": TOOL}, UnsupportedParameterError, "tools",
        "must be a list of function tools",
    ),
    "tool-unknown-field": (
        {"input": "hi", "tools": [{**TOOL, "colour": "red"}]}, UnsupportedParameterError,
        "tools", "tools[0].colour (tool 'get_weather') cannot be honoured",
    ),
    "allowed_tools-mode": (
        {"input": "hi", "tools": [TOOL],
         "tool_choice": {"type": "allowed_tools", "mode": "any", "tools": []}},
        UnsupportedParameterError, "tool_choice.mode", "is not 'auto' or 'required'",
    ),
    "allowed_tools-tool": (
        {"input": "hi", "tools": [TOOL],
         "tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": [{"name": "x"}]}},
        UnsupportedParameterError, "tool_choice.tools[0]",
        "must be {'type': 'function', 'name': ...}",
    ),
    "system-image": (
        {"input": [{"role": "system", "content": [{"type": "input_image", "image_url": PIXEL}]},
                   {"role": "user", "content": "hi"}]},
        InvalidMessagesError, "input[0]", "a system message holds text only: send input_text",
    ),
    "user-file": (
        _part("user", {"type": "input_file", "file_id": "file_1"}), UnsupportedParameterError,
        "input[1].content[0]", "send the content as text or images",
    ),
    "user-text-null": (
        _part("user", {"type": "input_text", "text": None}), InvalidMessagesError,
        "input[1].content[0]", "'input_text' parts need 'text' as a string",
    ),
    "user-output_text": (
        _part("user", {"type": "output_text", "text": "x"}), InvalidMessagesError,
        "input[1].content[0]", "must be 'input_text' or 'input_image', not 'output_text'",
    ),
    "image-without-url": (
        _part("user", {"type": "input_image", "detail": "auto"}), UnsupportedParameterError,
        "input[1].content[0].image_url", "the image as a data: URL",
    ),
    "assistant-image": (
        _part("assistant", {"type": "input_image", "image_url": PIXEL}), InvalidMessagesError,
        "input[1].content[0]", "must be 'output_text', 'input_text' or 'refusal'",
    ),
    "assistant-text-missing": (
        _part("assistant", {"type": "output_text"}), InvalidMessagesError, "input[1].content[0]",
        "'output_text' parts need 'text' as a string",
    ),
    "function_call-without-name": (
        _after_hi({**CALL, "name": None}), InvalidMessagesError, "input[1]",
        "a function_call needs its 'name'",
    ),
    "function_call_output-without-call_id": (
        _after_hi({"type": "function_call_output", "output": "sunny"}), InvalidMessagesError,
        "input[1]", "a function_call_output needs its 'call_id'",
    ),
    "reasoning-summary-part": (
        _after_hi({"type": "reasoning", "summary": [{"type": "text", "text": "Hm."}]}),
        InvalidMessagesError, "input[1].summary", "must be a list of summary_text parts",
    ),
    "reasoning-content-text": (
        _after_hi({"type": "reasoning", "content": "Hm."}), InvalidMessagesError,
        "input[1].content", "must be a list of reasoning_text parts",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(MALFORMED), ids=list(MALFORMED))
def test_a_malformed_field_or_item_is_refused_naming_it_and_what_to_send(case: str) -> None:
    body, error, named, advice = MALFORMED[case]
    with pytest.raises(ProviderError) as info:
        provider_call(parse_request(body))
    assert_refusal(info.value, error, named, advice)


def test_the_previous_conversation_comes_first_and_errors_name_where_it_is() -> None:
    previous = [{"role": "user", "content": "Weather?"}, CALL]
    call = parse_request({"input": [OUTPUT], "tools": [TOOL], "instructions": "New."})
    turns, _, _ = provider_call(call, previous)
    assert turns == [
        SystemMessage("New."),
        UserMessage((Text("Weather?"),)),
        AssistantMessage((ToolCall("call_1", "get_weather", {}),)),
        ToolMessage((ToolResult("call_1", "sunny"),)),
    ]
    with pytest.raises(InvalidMessagesError, match=r"previous_response_id.items\[1\]"):
        provider_call(call, [{"role": "user", "content": "hi"}, {**CALL, "name": ""}])


def test_a_history_with_calls_and_no_tools_gets_the_called_tools_uncallable() -> None:
    _, tools, options = provider_call(
        parse_request({"input": [{"role": "user", "content": "hi"}, CALL, OUTPUT]})
    )
    assert [t.name for t in tools] == ["get_weather"]
    assert options["tool_choice"] == "none"


def test_input_messages_is_the_inverse_of_the_output_items() -> None:
    result = GenerateResult(
        text="Checking.",
        finish_reason="tool-calls",
        response_messages=[
            {
                "role": "assistant",
                "content": [
                    {"type": "reasoning", "text": "Hm.", "signature": "sig"},
                    {"type": "reasoning", "text": "", "redacted": "xyz"},
                    {"type": "text", "text": "Checking."},
                    {"type": "tool-call", "tool_call_id": "toolu_1", "tool_name": "get_weather",
                     "input": {"city": "Paris"}},
                ],
            }
        ],
        tool_calls=[{"tool_call_id": "toolu_1", "tool_name": "get_weather",
                     "input": {"city": "Paris"}}],
    )  # fmt: skip
    items = output_items(result, response="resp_" + "0" * 32)
    assert [i["type"] for i in items] == ["reasoning", "reasoning", "message", "function_call"]
    assert items[3]["call_id"] == "toolu_1"
    assert json.loads(items[3]["arguments"]) == {"city": "Paris"}
    assert input_messages(items) == [
        AssistantMessage(
            (
                Reasoning("Hm.", signature="sig"),
                Reasoning("", redacted="xyz"),
                Text("Checking."),
                ToolCall("toolu_1", "get_weather", {"city": "Paris"}),
            )
        )
    ]


# --------------------------------------------------------------------------- answers


def test_a_response_at_the_output_limit_is_incomplete_with_cached_tokens_in_its_usage() -> None:
    call = parse_request({"input": "hi", "max_output_tokens": 5, "metadata": {"a": "b"}})
    usage = Usage(input_tokens=3, cache_read_input_tokens=10, cache_creation_input_tokens=2,
                  output_tokens=5)  # fmt: skip
    response = response_object(
        call, id="resp_1", model="m", created_at=1, output=[], finish="length", usage=usage
    )
    assert response["status"] == "incomplete"
    assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert response["usage"] == {
        "input_tokens": 15,
        "input_tokens_details": {"cached_tokens": 10, "cache_write_tokens": 2},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 20,
    }
    assert (response["max_output_tokens"], response["metadata"]) == (5, {"a": "b"})
    done = response_object(call, id="r", model="m", created_at=1, output=[], finish="tool-calls")
    assert (done["status"], done["incomplete_details"]) == ("completed", None)


def stream_of(mapper: EventMapper, parts: list[Any]) -> list[dict[str, Any]]:
    events = mapper.start()
    for part in parts:
        events += mapper.add(part)
    return [*events, mapper.finish()]


def test_stream_parts_become_the_documented_events_in_order() -> None:
    mapper = EventMapper(parse_request({"input": "hi", "tools": [TOOL]}), id="resp_1", model="m")
    events = stream_of(
        mapper,
        [
            StreamStartPart(),
            ReasoningStartPart(id="r"),
            ReasoningDeltaPart(id="r", delta="Hm."),
            ReasoningEndPart(id="r", signature="sig"),
            TextStartPart(id="t"),
            TextDeltaPart(id="t", delta="Check"),
            TextDeltaPart(id="t", delta="ing."),
            TextEndPart(id="t"),
            ToolInputStartPart(id="toolu_1", tool_name="get_weather"),
            ToolInputDeltaPart(id="toolu_1", delta='{"city": '),
            ToolInputDeltaPart(id="toolu_1", delta='"Paris"}'),
            ToolInputEndPart(id="toolu_1"),
            ToolCallPart(tool_call_id="toolu_1", tool_name="get_weather", input={"city": "Paris"}),
            FinishPart(finish_reason="tool-calls", usage=Usage(input_tokens=1, output_tokens=2)),
        ],
    )
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e.get("output_index") for e in events[2:-1]] == [0] * 6 + [1] * 7 + [2] * 5
    final = events[-1]["response"]
    assert final["status"] == "completed"
    assert [(i["type"], i["status"]) for i in final["output"][1:]] == [
        ("message", "completed"),
        ("function_call", "completed"),
    ]
    assert final["output"][0]["encrypted_content"] == "thinking:sig"
    assert final["output"][1]["content"][0]["text"] == "Checking."
    assert final["output"][2]["arguments"] == '{"city": "Paris"}'
    assert final["usage"]["total_tokens"] == 3
    assert mapper.response is final


def test_a_call_without_argument_fragments_sends_its_arguments_whole() -> None:
    mapper = EventMapper(parse_request({"input": "hi", "tools": [TOOL]}), id="r", model="m")
    call = ToolCallPart(tool_call_id="toolu_1", tool_name="get_weather", input={})
    events = mapper.add(call)
    assert [e["type"] for e in events] == [
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
    ]
    assert events[1]["delta"] == events[2]["arguments"] == "{}"


def test_a_redacted_block_is_an_item_without_a_summary_and_silence_is_no_item() -> None:
    mapper = EventMapper(parse_request({"input": "hi"}), id="r", model="m")
    events = mapper.add(ReasoningEndPart(id="r1", redacted="xyz"))
    assert [e["type"] for e in events] == [
        "response.output_item.added",
        "response.output_item.done",
    ]
    assert events[1]["item"]["encrypted_content"] == "redacted_thinking:xyz"
    assert mapper.add(TextStartPart(id="t")) + mapper.add(TextEndPart(id="t")) == []
    assert mapper.add(ReasoningEndPart(id="r2")) == []


def test_the_structured_output_is_one_message_at_the_end() -> None:
    text_format = {"format": {"type": "json_schema", "name": "w", "schema": {"type": "object"}}}
    mapper = EventMapper(parse_request({"input": "hi", "text": text_format}), id="r", model="m")
    assert mapper.add(TextDeltaPart(id="t", delta="ignored")) == []
    events = mapper.add(FinishPart(finish_reason="stop", structured_output={"city": "Paris"}))
    [delta] = [e for e in events if e["type"] == "response.output_text.delta"]
    assert json.loads(delta["delta"]) == {"city": "Paris"}
    assert mapper.finish()["response"]["output"][0]["content"][0]["text"] == '{"city": "Paris"}'


def test_a_stream_taken_back_after_it_was_sent_raises_and_before_it_was_does_not() -> None:
    mapper = EventMapper(parse_request({"input": "hi"}), id="r", model="m")
    assert mapper.add(DiscardPart(ids=["t"], reason="the stream broke")) == []
    mapper.add(TextDeltaPart(id="t", delta="Hi"))
    with pytest.raises(StreamRetractionError):
        mapper.add(DiscardPart(ids=["t"], reason="the stream broke"))


def test_a_failure_after_the_stream_began_is_an_error_then_response_failed() -> None:
    mapper = EventMapper(parse_request({"input": "hi"}), id="r", model="m")
    mapper.start()
    mapper.add(TextDeltaPart(id="t", delta="Hi"))
    error, failed = mapper.failed("api_error", "it broke")
    assert error == {
        "type": "error",
        "sequence_number": 5,
        "code": "api_error",
        "message": "it broke",
        "param": None,
    }
    assert failed["type"] == "response.failed"
    assert failed["response"]["status"] == "failed"
    assert failed["response"]["error"] == {"code": "api_error", "message": "it broke"}
    assert failed["response"]["output"][0]["status"] == "in_progress"


@pytest.mark.parametrize(("name", "value"), [("temperature", "hot"), ("top_p", True)])
def test_a_sampling_setting_that_is_no_number_is_refused_by_name(name: str, value: Any) -> None:
    """Sent as written when a number (the API judges the range); anything else names it."""
    assert refused(**{name: value}).param == name


# --------------------------------------------------------------------------- item ids

RESPONSE = "resp_" + "ab" * 16


def test_an_item_id_names_the_response_it_belongs_to() -> None:
    ids = [
        item_id(RESPONSE, "message", 0),
        item_id(RESPONSE, "function_call", 12),
        item_id(RESPONSE, "function_call_output", 1, given=True),
        item_id(RESPONSE, "reasoning", 3),
    ]
    assert [i.split("_", 1)[0] for i in ids] == ["msg", "fc", "fco", "rs"]
    assert len(set(ids)) == len(ids)
    assert {item_response(i) for i in ids} == {RESPONSE}
    for foreign in ("msg_1", "msg_" + "ab" * 16, "rs_abc_1", RESPONSE, ""):
        assert item_response(foreign) is None


def test_output_items_and_streamed_items_get_the_ids_of_their_place() -> None:
    result = GenerateResult(
        text="Checking.",
        finish_reason="tool-calls",
        response_messages=[
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {"type": "tool-call", "tool_call_id": "toolu_1", "tool_name": "get_weather",
                     "input": {}},
                ],
            }
        ],
        tool_calls=[{"tool_call_id": "toolu_1", "tool_name": "get_weather", "input": {}}],
    )  # fmt: skip
    items = output_items(result, response=RESPONSE)
    assert [i["id"] for i in items] == [
        item_id(RESPONSE, "message", 0),
        item_id(RESPONSE, "function_call", 1),
    ]
    mapper = EventMapper(parse_request({"input": "hi"}), id=RESPONSE, model="m")
    for part in [
        TextStartPart(id="t"),
        TextDeltaPart(id="t", delta="Checking."),
        TextEndPart(id="t"),
        ToolCallPart(tool_call_id="toolu_1", tool_name="get_weather", input={}),
    ]:
        mapper.add(part)
    assert [i["id"] for i in mapper.output] == [i["id"] for i in items]


def test_input_items_keep_their_ids_and_the_others_get_one() -> None:
    items = numbered_input(RESPONSE, [{"role": "user", "content": "hi"}, {**CALL, "id": "fc_x"}])
    assert [i["id"] for i in items] == [item_id(RESPONSE, "message", 0, given=True), "fc_x"]


@pytest.mark.parametrize(
    ("item", "named"),
    [
        ({"type": "item_reference", "id": "msg_1"}, "msg_1"),
        ({"id": "msg_1"}, "msg_1"),  # the type may be left out
        ({"role": "user", "content": "hi", "id": "msg_1"}, None),
        (CALL, None),
        ({"type": "message", "id": "msg_1", "content": "hi"}, None),
    ],
)
def test_a_reference_is_an_item_reference_or_an_item_of_an_id_alone(
    item: dict[str, Any], named: str | None
) -> None:
    assert reference(item, "input[0]") == named


def test_a_reference_without_an_id_or_with_other_fields_is_refused_naming_it() -> None:
    with pytest.raises(InvalidMessagesError, match=r"input\[2\]: an item_reference needs"):
        reference({"type": "item_reference"}, "input[2]")
    with pytest.raises(UnsupportedParameterError, match=r"input\[0\]\.role"):
        reference({"type": "item_reference", "id": "msg_1", "role": "user"}, "input[0]")


def test_input_items_are_listed_in_pages_as_openai_lists_them() -> None:
    items = [
        {"id": f"msg_{n}", "type": "message", "role": "user", "content": "hi"} for n in range(5)
    ]
    newest = input_item_list(items, [])
    assert [i["id"] for i in newest["data"]] == ["msg_4", "msg_3", "msg_2", "msg_1", "msg_0"]
    assert newest["data"][0]["content"] == [{"type": "input_text", "text": "hi"}]
    page = input_item_list(items, [("order", "asc"), ("limit", "2"), ("after", "msg_0")])
    assert (page["first_id"], page["last_id"], page["has_more"]) == ("msg_1", "msg_2", True)
    last = input_item_list(items, [("order", "asc"), ("after", "msg_4")])
    assert last == {"object": "list", "data": [], "first_id": None, "last_id": None,
                    "has_more": False}  # fmt: skip
    assert input_item_list(items, [("include[]", "reasoning.encrypted_content")]) == newest
    for query, named in [
        ([("page", "2")], "page"),
        ([("limit", "101")], "limit"),
        ([("order", "up")], "order"),
        ([("after", "msg_9")], "after"),
        ([("include", "message.input_image.image_url")], "include"),
    ]:
        with pytest.raises(UnsupportedParameterError) as refused:
            input_item_list(items, query)
        assert refused.value.param == named
