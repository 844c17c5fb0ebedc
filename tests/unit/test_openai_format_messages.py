"""Chat Completions messages -> the provider's messages, on plain data: every field a message
carries reaches the model, asks for nothing, or is refused naming it (`messages[i].<field>`)."""

from __future__ import annotations

from typing import Any

import pytest
from refusals import assert_refusal

from sf_provider import InvalidMessagesError, ProviderError, UnsupportedRequestError
from sf_provider._messages import convert_messages
from sf_provider._openai_format import (
    UnsupportedParameterError,
    chat_request,
    provider_messages,
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
from sf_provider.gateway._errors import error_info

QUESTION = {"role": "user", "content": "Weather in Paris?"}
CALL = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
PIXEL = "data:image/png;base64,iVBORw0KGgo="


def refused(messages: list[dict[str, Any]]) -> UnsupportedParameterError:
    with pytest.raises(UnsupportedParameterError) as info:
        provider_messages(messages)
    return info.value


# -- what official clients send back is accepted


def test_an_openai_python_message_dumped_whole_is_accepted() -> None:
    # `ChatCompletionMessage.model_dump()`: every field, the unused ones null.
    dumped = {
        "content": None,
        "refusal": None,
        "role": "assistant",
        "annotations": None,
        "audio": None,
        "function_call": None,
        "tool_calls": [CALL],
    }
    converted = provider_messages([QUESTION, dumped, {"role": "tool", "tool_call_id": "c1"}])
    assert converted[1] == AssistantMessage((ToolCall("c1", "get_weather", {}),))


def test_empty_values_of_known_fields_are_accepted() -> None:
    converted = provider_messages(
        [
            {"role": "system", "content": "Be brief.", "name": None},
            {"role": "user", "content": "hi", "name": ""},
            {"role": "assistant", "content": "Hello.", "annotations": [], "audio": {},
             "provider_specific_fields": {}, "images": [], "reasoning_items": None,
             "refusal": ""},
            {"role": "user", "content": "more", "tool_calls": []},
        ]
    )  # fmt: skip
    assert [type(m) for m in converted] == [
        SystemMessage,
        UserMessage,
        AssistantMessage,
        UserMessage,
    ]
    assert converted[2] == AssistantMessage((Text("Hello."),))


def test_a_tool_messages_name_repeats_its_call_id_and_is_accepted() -> None:
    converted = provider_messages(
        [
            QUESTION,
            {"role": "assistant", "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "c1", "name": "get_weather", "content": "sunny"},
        ]
    )
    assert converted[2] == ToolMessage((ToolResult("c1", "sunny"),))


def test_cache_control_on_a_message_is_a_caching_hint_and_ignored() -> None:
    converted = provider_messages([{**QUESTION, "cache_control": {"type": "ephemeral"}}])
    assert converted == [UserMessage((Text(QUESTION["content"]),))]


# -- what cannot reach the model is refused, naming the field


@pytest.mark.parametrize("role", ["system", "user", "assistant"])
def test_one_name_per_role_is_accepted_as_it_loses_nothing_the_role_does_not_say(
    role: str,
) -> None:
    named = {"role": role, "content": "hello", "name": "Alice"}
    converted = provider_messages([named, QUESTION] if role != "user" else [named])
    assert converted == provider_messages(
        [{"role": role, "content": "hello"}, QUESTION][: 1 if role == "user" else 2]
    )


@pytest.mark.parametrize("role", ["user", "assistant"])
def test_different_names_in_one_role_are_refused_saying_to_put_them_into_the_content(
    role: str,
) -> None:
    messages = [
        {"role": "user", "content": "start"},
        {"role": role, "content": "hello", "name": "Alice"},
        {"role": role, "content": "hi", "name": "Bob"},
        QUESTION,
    ]
    error = refused(messages)
    assert error.param == "messages[2].name"
    assert "no participant names" in str(error)
    assert "Put the speaker into the content" in str(error)


@pytest.mark.parametrize(
    ("message", "param"),
    [
        ({"role": "user", "content": "hi", "colour": "blue"}, "messages[0].colour"),
        ({"role": "assistant", "content": "hi", "weight": 1}, "messages[0].weight"),
        ({"role": "tool", "tool_call_id": "c1", "content": "x", "id": "m1"}, "messages[0].id"),
        ({"role": "user", "content": "hi", "tool_call_id": "c1"}, "messages[0].tool_call_id"),
        ({"role": "user", "content": "hi", "tool_calls": [CALL]}, "messages[0].tool_calls"),
        ({"role": "system", "content": "hi", "refusal": "no"}, "messages[0].refusal"),
        ({"role": "assistant", "content": "hi", "audio": {"id": "a1"}}, "messages[0].audio"),
        (
            {"role": "assistant", "content": "hi", "annotations": [{"type": "url_citation"}]},
            "messages[0].annotations",
        ),
        (
            {"role": "assistant", "content": None, "function_call": {"name": "f"}},
            "messages[0].function_call",
        ),
        (
            {"role": "assistant", "content": "hi", "provider_specific_fields": {"x": 1}},
            "messages[0].provider_specific_fields",
        ),
    ],
    ids=[
        "unknown on user",
        "unknown on assistant",
        "unknown on tool",
        "tool_call_id on user",
        "tool_calls on user",
        "refusal on system",
        "audio to replay",
        "annotations",
        "function_call",
        "provider_specific_fields",
    ],
)
def test_a_field_that_would_not_reach_the_model_is_refused_naming_it(
    message: dict[str, Any], param: str
) -> None:
    error = refused([message])
    assert error.param == param
    assert param in str(error)
    info = error_info(error)
    assert (info.status, info.param, info.code) == (400, param, "unsupported_parameter")


def test_the_first_refused_field_is_named_in_a_later_message() -> None:
    error = refused([QUESTION, {"role": "assistant", "content": "ok", "speaker": "bot"}])
    assert error.param == "messages[1].speaker"


def test_top_level_reading_refuses_message_fields_too() -> None:
    with pytest.raises(UnsupportedParameterError, match=r"messages\[0\]\.mood"):
        chat_request({"model": "m", "messages": [{"role": "user", "content": "hi", "mood": "A"}]})


# -- assistant fields that carry what the model said


def test_a_refusal_next_to_content_reaches_the_model_too() -> None:
    converted = provider_messages(
        [QUESTION, {"role": "assistant", "content": "Sorry.", "refusal": "I can't do that."}]
    )
    assert converted[1] == AssistantMessage((Text("Sorry."), Text("I can't do that.")))


def test_a_refusal_that_is_the_content_is_not_doubled() -> None:
    converted = provider_messages(
        [QUESTION, {"role": "assistant", "content": "No.", "refusal": "No."}]
    )
    assert converted[1] == AssistantMessage((Text("No."),))


def test_reasoning_content_without_thinking_blocks_is_replayed_with_a_warning() -> None:
    converted = provider_messages(
        [QUESTION, {"role": "assistant", "content": "Sunny.", "reasoning_content": "Hm."},
         {"role": "user", "content": "thanks"}]
    )  # fmt: skip
    assert converted[1] == AssistantMessage((Reasoning("Hm."), Text("Sunny.")))
    conversation = convert_messages(converted)
    assert [w.code for w in conversation.warnings] == ["history-flattened"]
    replayed = conversation.history[1]["content"][0]
    assert replayed == {"type": "text", "text": "<reasoning>Hm.</reasoning>"}


def test_reasoning_content_next_to_thinking_blocks_is_their_text() -> None:
    signed = {"type": "thinking", "thinking": "Hm.", "signature": "sig"}
    converted = provider_messages(
        [QUESTION, {"role": "assistant", "content": "Sunny.", "reasoning_content": "Hm.",
                    "thinking_blocks": [signed]}]
    )  # fmt: skip
    assert converted[1] == AssistantMessage((Reasoning("Hm.", signature="sig"), Text("Sunny.")))


# -- image detail


@pytest.mark.parametrize("detail", ["auto", "high", None])
def test_an_image_with_detail_auto_or_high_is_sent(detail: str | None) -> None:
    image: dict[str, Any] = {"url": PIXEL, "detail": detail}
    content = [{"type": "text", "text": "What is it?"}, {"type": "image_url", "image_url": image}]
    converted = provider_messages([{"role": "user", "content": content}])
    assert converted[0] == UserMessage((Text("What is it?"), Image(url=PIXEL)))


def test_detail_low_is_refused_since_claude_has_no_low_detail_mode() -> None:
    image = {"type": "image_url", "image_url": {"url": PIXEL, "detail": "low"}}
    content = [{"type": "text", "text": "What is it?"}, image]
    error = refused([{"role": "user", "content": content}])
    assert error.param == "messages[0].content[1].image_url.detail"
    assert "no low-detail mode" in str(error)


@pytest.mark.parametrize(
    ("image", "param"),
    [
        ({"url": PIXEL, "detail": "ultra"}, "messages[0].content[0].image_url.detail"),
        ({"url": PIXEL, "format": "image/png"}, "messages[0].content[0].image_url.format"),
    ],
    ids=["unknown detail", "unknown field"],
)
def test_other_image_url_values_are_refused_naming_them(image: dict[str, Any], param: str) -> None:
    error = refused([{"role": "user", "content": [{"type": "image_url", "image_url": image}]}])
    assert error.param == param


def test_an_image_url_without_a_url_is_invalid() -> None:
    with pytest.raises(InvalidMessagesError, match="needs"):
        provider_messages([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}])


@pytest.mark.parametrize(
    ("params", "options"),
    [
        ({"reasoning_effort": "minimal"}, {"effort": "low"}),
        ({"reasoning_effort": "high"}, {"effort": "high"}),
        ({"reasoning_effort": "none"}, {"thinking": "disabled"}),
        ({"reasoning_effort": "max"}, {"effort": "max"}),  # LiteLLM's, for Anthropic models
        ({"reasoning_effort": "default"}, {}),  # LiteLLM's: asks for nothing
        ({"thinking": {"type": "enabled", "budget_tokens": 2048}}, {"thinking": 2048}),
        ({"thinking": {"type": "adaptive"}}, {"thinking": "adaptive"}),
        ({"thinking": {"type": "disabled"}, "reasoning_effort": "none"}, {"thinking": "disabled"}),
        ({"thinking": {"type": "adaptive"}, "reasoning_effort": "low"},
         {"thinking": "adaptive", "effort": "low"}),
    ],
)  # fmt: skip
def test_reasoning_effort_and_thinking_become_call_options(
    params: dict[str, Any], options: dict[str, Any]
) -> None:
    assert chat_request({"messages": [QUESTION], **params}).options == options


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ({"reasoning_effort": "extreme"}, "'extreme' is not one of"),
        ({"reasoning_effort": {"effort": "high"}}, r"\{'effort': 'high'\} is not one of"),
        ({"thinking": "on"}, "thinking: must be an object"),
        ({"thinking": {"type": "enabled"}}, "thinking.budget_tokens: required"),
        ({"thinking": {"type": "sometimes"}}, "thinking.type: 'sometimes' is not supported"),
        ({"thinking": {"type": "adaptive"}, "reasoning_effort": "none"}, "contradicts"),
    ],
)
def test_a_bad_reasoning_parameter_is_refused_by_name(params: dict[str, Any], problem: str) -> None:
    with pytest.raises(UnsupportedParameterError, match=problem) as refused:
        chat_request({"messages": [QUESTION], **params})
    assert refused.value.param in params


def test_sampling_settings_are_call_options_as_written() -> None:
    # The API judges their values (ADR 0009); top_k is not OpenAI's, but LiteLLM passes it on.
    sampling = {"temperature": 0.1, "top_p": 1, "top_k": 5}
    assert chat_request({"messages": [QUESTION], **sampling}).options == sampling
    for name, value, kind in [("temperature", "0.1", "a number"), ("top_k", 0.5, "an integer")]:
        with pytest.raises(UnsupportedParameterError, match=f"must be {kind}") as info:
            chat_request({"messages": [QUESTION], name: value})
        assert info.value.param == name


def test_drop_leaves_out_sampling_and_values_that_cannot_be_honoured_with_warnings() -> None:
    body = {"messages": [QUESTION], "temperature": 0.1, "top_k": 5, "seed": 7, "n": 1}
    chat = chat_request(body, drop=body)
    assert chat.options == {}
    said = {w.message.split("'")[1]: w for w in chat.dropped}
    assert sorted(said) == ["seed", "temperature", "top_k"], "n=1 asks for nothing"
    assert {w.code for w in chat.dropped} == {"parameter-dropped"}
    assert "no seeded sampling" in said["seed"].message
    # Only the names in `drop`; legacy functions are never dropped: they change the calls.
    kept = chat_request(body, drop={"seed"})
    assert kept.options == {"temperature": 0.1, "top_k": 5}
    with pytest.raises(UnsupportedParameterError) as info:
        chat_request({"messages": [QUESTION], "functions": [{}]}, drop={"functions"})
    assert info.value.param == "functions"


def _tool(**extra: Any) -> dict[str, Any]:
    function = {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}
    return {"type": "function", "function": {**function, **extra.pop("function", {})}, **extra}


# -- text parts: each stays its own, nothing glued together


def _weather_loop(tool_content: Any) -> list[dict[str, Any]]:
    return [
        QUESTION,
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": tool_content},
    ]


def test_a_tool_messages_text_parts_reach_the_model_as_separate_blocks() -> None:
    # Not "Temperature: 21CHumidity: 40%": a tool result takes a list of text blocks.
    parts = [
        {"type": "text", "text": "Temperature: 21C"},
        {"type": "text", "text": "Humidity: 40%"},
    ]
    converted = provider_messages(_weather_loop(parts))
    assert converted[2] == ToolMessage(
        (ToolResult("c1", (Text("Temperature: 21C"), Text("Humidity: 40%"))),)
    )
    assert convert_messages(converted).prompt == [
        {"type": "tool_result", "tool_use_id": "c1", "content": parts}
    ]


@pytest.mark.parametrize(
    ("content", "output"),
    [("sunny", "sunny"), ([{"type": "text", "text": "sunny"}], "sunny"), ([], ""), (None, "")],
    ids=["string", "one-part", "no-parts", "null"],
)
def test_a_tool_message_with_one_text_or_none_is_its_output(content: Any, output: str) -> None:
    converted = provider_messages(_weather_loop(content))
    assert converted[2] == ToolMessage((ToolResult("c1", output),))


def test_a_system_messages_text_parts_are_joined_with_a_line_break() -> None:
    # Not "Be brief.Use metric units.": the system prompt is one text, its parts on their lines.
    system = {
        "role": "system",
        "content": [
            {"type": "text", "text": "Be brief."},
            {"type": "text", "text": "Use metric units."},
        ],
    }
    conversation = convert_messages(provider_messages([system, QUESTION]))
    assert conversation.system == ["Be brief.\nUse metric units."]
    one = convert_messages(provider_messages([{"role": "system", "content": "Be brief."},
                                              QUESTION]))  # fmt: skip
    assert one.system == ["Be brief."]


def test_deeply_nested_tool_call_arguments_are_refused_not_a_recursion_error() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": deep}}
    with pytest.raises(InvalidMessagesError) as info:
        provider_messages([QUESTION, {"role": "assistant", "tool_calls": [call]},
                           {"role": "tool", "tool_call_id": "c1", "content": "x"}])  # fmt: skip
    assert str(info.value) == (
        "messages[1] (assistant), tool_calls[0]: 'arguments' is JSON nested too deeply to read; "
        "flatten it"
    )
    assert error_info(info.value).status == 400


# -- parameters that contradict or need another


@pytest.mark.parametrize(
    ("params", "limit"),
    [
        ({"max_tokens": 50}, 50),
        ({"max_completion_tokens": 50}, 50),
        ({"max_tokens": 50, "max_completion_tokens": 50}, 50),
        ({"max_tokens": None, "max_completion_tokens": 50}, 50),
    ],
)
def test_max_tokens_or_max_completion_tokens_is_the_output_limit(
    params: dict[str, Any], limit: int
) -> None:
    assert chat_request({"messages": [QUESTION], **params}).options == {"max_tokens": limit}


def test_max_tokens_and_max_completion_tokens_that_differ_are_refused() -> None:
    # It was the larger, max_completion_tokens, silently winning over max_tokens.
    with pytest.raises(UnsupportedParameterError) as info:
        chat_request({"messages": [QUESTION], "max_tokens": 50, "max_completion_tokens": 4000})
    assert info.value.param == "max_completion_tokens"
    assert "4000 contradicts max_tokens 50" in str(info.value)
    assert error_info(info.value).status == 400


@pytest.mark.parametrize("stream", [None, False])
def test_stream_options_without_stream_is_refused_as_openai_refuses_it(stream: Any) -> None:
    body = {"messages": [QUESTION], "stream": stream, "stream_options": {"include_usage": True}}
    with pytest.raises(UnsupportedParameterError) as info:
        chat_request(body)
    assert info.value.param == "stream_options"
    assert "only allowed when 'stream' is true" in str(info.value)
    streamed = chat_request({**body, "stream": True})
    assert (streamed.stream, streamed.include_usage) == (True, True)
    assert not chat_request({**body, "stream_options": None}).stream


@pytest.mark.parametrize("tool_choice", [None, "none"])
def test_history_with_tool_calls_in_a_request_without_tools_defines_them_uncallable(
    tool_choice: Any,
) -> None:
    # The Messages API refuses tool calls in a request without tools (the CLI made three
    # requests, each refused upstream: "... must define tools"); OpenAI's API takes them.
    body = {"messages": _weather_loop("sunny"), "tool_choice": tool_choice}
    chat = chat_request(body)
    assert [(t.name, t.input_schema) for t in chat.tools] == [("get_weather", {"type": "object"})]
    assert chat.options["tool_choice"] == "none"
    with_tools = chat_request({**body, "tools": [_tool()]})
    assert [t.name for t in with_tools.tools] == ["get_weather"]
    assert with_tools.tools[0].input_schema != {"type": "object"}, "the request's own tool"


def test_history_with_tool_calls_without_tools_is_refused_when_a_call_is_required() -> None:
    body = {"messages": _weather_loop("sunny"), "tool_choice": "required"}
    with pytest.raises(UnsupportedParameterError) as info:
        chat_request(body)
    assert info.value.param == "tool_choice"
    assert "tool_choice 'required' needs at least one tool" in str(info.value)


# -- malformed parameters and messages: each refused naming it, saying what to send


def _assistant(**fields: Any) -> dict[str, Any]:
    return {"messages": [QUESTION, {"role": "assistant", **fields}]}


def _allowed(spec: Any) -> dict[str, Any]:
    return {"tools": [_tool()], "tool_choice": {"type": "allowed_tools", "allowed_tools": spec}}


def _call(**function: Any) -> dict[str, Any]:
    return _assistant(content=None, tool_calls=[{"id": "c1", "function": function}])


#: (body fields, error, what the message starts with: a `param` of UnsupportedParameterError,
#: else the message's place, and what it says to send).
MALFORMED: dict[str, tuple[dict[str, Any], type[ProviderError], str, str]] = {
    "no-messages": (
        {"messages": None}, InvalidMessagesError, "'messages' is required",
        "a non-empty list of messages",
    ),
    "messages-text": (
        {"messages": "hi"}, InvalidMessagesError, "'messages' must be",
        "a non-empty list of messages",
    ),
    "message-text": ({"messages": ["hi"]}, InvalidMessagesError, "messages[0]", "an object"),
    "function-role": (
        {"messages": [{"role": "function", "name": "f", "content": "x"}]}, InvalidMessagesError,
        "messages[0] (function)", "use 'tool' messages",
    ),
    "unknown-role": (
        {"messages": [{"role": "bot", "content": "x"}]}, InvalidMessagesError, "messages[0]",
        "use system, developer, user, assistant or tool",
    ),
    "late-developer": (
        {"messages": [QUESTION, {"role": "developer", "content": "Be brief."}]},
        UnsupportedRequestError, "messages[1] (developer)",
        "put every system and developer message first",
    ),
    "tool-without-call-id": (
        {"messages": [QUESTION, {"role": "tool", "content": "x"}]}, InvalidMessagesError,
        "messages[1] (tool)", "needs its 'tool_call_id'",
    ),
    "content-number": (
        {"messages": [{"role": "user", "content": 5}]}, InvalidMessagesError,
        "messages[0] (user)", "content must be a string or a list of content parts",
    ),
    "system-image": (
        {"messages": [{"role": "system", "content": [{"type": "image_url", "image_url": PIXEL}]},
                      QUESTION]},
        InvalidMessagesError, "messages[0] (system)", "must be 'text', not 'image_url'",
    ),
    "system-text-number": (
        {"messages": [{"role": "system", "content": [{"type": "text", "text": 5}]}, QUESTION]},
        InvalidMessagesError, "messages[0] (system)", "'text' parts need 'text' as a string",
    ),
    "user-audio": (
        {"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]},
        InvalidMessagesError, "messages[0] (user)",
        "must be 'text' or 'image_url', not 'input_audio'",
    ),
    "user-text-null": (
        {"messages": [{"role": "user", "content": [{"type": "text", "text": None}]}]},
        InvalidMessagesError, "messages[0] (user)", "'text' parts need 'text' as a string",
    ),
    "thinking-block-type": (
        _assistant(content="x", thinking_blocks=[{"type": "text", "text": "Hm."}]),
        InvalidMessagesError, "messages[1] (assistant).thinking_blocks[0]",
        "must be of type 'thinking' or 'redacted_thinking', not 'text'",
    ),
    "reasoning_content-number": (
        _assistant(content="x", reasoning_content=5), InvalidMessagesError,
        "messages[1] (assistant)", "'reasoning_content' must be a string",
    ),
    "assistant-image": (
        _assistant(content=[{"type": "image_url", "image_url": PIXEL}]), InvalidMessagesError,
        "messages[1] (assistant)", "must be 'text' or 'refusal', not 'image_url'",
    ),
    "assistant-refusal-part-null": (
        _assistant(content=[{"type": "refusal"}]), InvalidMessagesError,
        "messages[1] (assistant)", "'refusal' parts need 'refusal' as a string",
    ),
    "refusal-number": (
        _assistant(content="x", refusal=5), InvalidMessagesError, "messages[1] (assistant)",
        "'refusal' must be a string",
    ),
    "tool_calls-object": (
        _assistant(content=None, tool_calls=CALL), InvalidMessagesError,
        "messages[1] (assistant)", "'tool_calls' must be a list",
    ),
    "tool_call-without-id": (
        _assistant(content=None, tool_calls=[{"function": {"name": "get_weather"}}]),
        InvalidMessagesError, "messages[1] (assistant), tool_calls[0]",
        "needs an 'id' and a 'function' with 'name' and 'arguments'",
    ),
    "tool_call-without-name": (
        _call(arguments="{}"), InvalidMessagesError, "messages[1] (assistant), tool_calls[0]",
        "a tool call's function needs a 'name'",
    ),
    "arguments-list": (
        _call(name="get_weather", arguments="[1]"), InvalidMessagesError,
        "messages[1] (assistant), tool_calls[0]", "'arguments' must be a JSON object",
    ),
    "model-empty": ({"model": " "}, UnsupportedParameterError, "model", "a model name"),
    "parallel_tool_calls": (
        {"parallel_tool_calls": "no"}, UnsupportedParameterError, "parallel_tool_calls",
        "must be true or false",
    ),
    "stream": ({"stream": 1}, UnsupportedParameterError, "stream", "must be true or false"),
    "max_tokens": (
        {"max_tokens": 0}, UnsupportedParameterError, "max_tokens", "a positive integer"
    ),
    "max_completion_tokens": (
        {"max_completion_tokens": 1.5}, UnsupportedParameterError, "max_completion_tokens",
        "a positive integer",
    ),
    "stop-numbers": (
        {"stop": [1]}, UnsupportedParameterError, "stop", "a string or a list of strings"
    ),
    "stream_options-key": (
        {"stream": True, "stream_options": {"include_usage": True, "chunk_size": 1}},
        UnsupportedParameterError, "stream_options",
        "an object of include_usage, include_obfuscation only",
    ),
    "response_format-text": (
        {"response_format": "json"}, UnsupportedParameterError, "response_format",
        "an object with a 'type'",
    ),
    "response_format-key": (
        {"response_format": {"type": "json_object", "schema": {}}}, UnsupportedParameterError,
        "response_format.schema", "send 'type' (and 'json_schema')",
    ),
    "response_format-type": (
        {"response_format": {"type": "xml"}}, UnsupportedParameterError, "response_format",
        "not one of text, json_object, json_schema",
    ),
    "json_schema-without-schema": (
        {"response_format": {"type": "json_schema", "json_schema": {"name": "answer"}}},
        UnsupportedParameterError, "response_format.json_schema.schema",
        "required: a JSON Schema object",
    ),
    "json_schema-key": (
        {"response_format": {"type": "json_schema", "json_schema": {"schema": {}, "x": 1}}},
        UnsupportedParameterError, "response_format.json_schema.x",
        "send name, description, schema, strict",
    ),
    "json_schema-name": (
        {"response_format": {"type": "json_schema", "json_schema": {"schema": {}, "name": 1}}},
        UnsupportedParameterError, "response_format.json_schema.name", "must be a string",
    ),
    "tools-object": (
        {"tools": _tool()}, UnsupportedParameterError, "tools", "a list of function tools"
    ),
    "tools-hosted": (
        {"tools": [{"type": "web_search"}]}, UnsupportedParameterError, "tools[0]",
        "only 'function' tools",
    ),
    "tools-custom": (
        {"tools": [{"type": "custom", "custom": {"name": "run_sql"}}]},
        UnsupportedParameterError, "tools[0]",
        "a custom tool takes free-form text, which the Messages API cannot ask a model for: "
        "define it as a 'function' tool with a string parameter",
    ),
    "tool-unknown-field": (
        {"tools": [_tool(colour="red")]}, UnsupportedParameterError, "tools",
        "tools[0].colour (tool 'get_weather') cannot be honoured",
    ),
    "allowed_tools-key": (
        _allowed({"mode": "auto", "tools": [], "order": 1}), UnsupportedParameterError,
        "tool_choice.allowed_tools", "must be {'mode': 'auto' | 'required', 'tools': [...]}",
    ),
    "allowed_tools-mode": (
        _allowed({"mode": "any", "tools": []}), UnsupportedParameterError,
        "tool_choice.allowed_tools.mode", "is not 'auto' or 'required'",
    ),
    "allowed_tools-tools-text": (
        _allowed({"mode": "auto", "tools": "get_weather"}), UnsupportedParameterError,
        "tool_choice.allowed_tools.tools", "a non-empty list of tools",
    ),
    "allowed_tools-tool-name": (
        _allowed({"mode": "auto", "tools": ["get_weather"]}), UnsupportedParameterError,
        "tool_choice.allowed_tools.tools[0]",
        "must be {'type': 'function', 'function': {'name': ...}}",
    ),
    "allowed_tools-unknown-tool": (
        _allowed({"mode": "auto", "tools": [{"type": "function", "function": {"name": "x"}}]}),
        UnsupportedParameterError, "tool_choice.allowed_tools",
        "name one of them or offer the tool",
    ),
    "tool_choice-hosted": (
        {"tools": [_tool()], "tool_choice": {"type": "web_search"}}, UnsupportedParameterError,
        "tool_choice", "only function tools are offered here",
    ),
    "tool_choice-any": (
        {"tools": [_tool()], "tool_choice": "any"}, UnsupportedParameterError, "tool_choice",
        "is not one of 'auto', 'none', 'required'",
    ),
    "results-without-calls-or-tools": (
        {"messages": [QUESTION, {"role": "tool", "tool_call_id": "c1", "content": "x"}]},
        UnsupportedParameterError, "tools", "send in 'tools' the tools the history calls",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(MALFORMED), ids=list(MALFORMED))
def test_a_malformed_parameter_or_message_is_refused_naming_it_and_what_to_send(
    case: str,
) -> None:
    fields, error, named, advice = MALFORMED[case]
    with pytest.raises(ProviderError) as info:
        chat_request({"messages": [QUESTION], **fields})
    assert_refusal(info.value, error, named, advice)


def test_the_fields_that_shape_the_answer_become_call_options() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    image = {"type": "image_url", "image_url": PIXEL}  # LiteLLM's form: the URL alone
    chat = chat_request(
        {"messages": [{"role": "user", "content": [image]}], "tools": [_tool()],
         "parallel_tool_calls": False, "stop": ["END", ""],
         "response_format": {"type": "json_schema", "json_schema": {"schema": schema}}}
    )  # fmt: skip
    assert chat.options == {
        "parallel_tool_calls": False,
        "stop_sequences": ["END"],  # an empty stop stops nothing
        "output_schema": schema,
    }
    assert chat.structured
    assert chat.messages == [UserMessage((Image(url=PIXEL),))]


@pytest.mark.parametrize(
    ("arguments", "read"),
    [({"city": "Paris"}, {"city": "Paris"}), ("", {}), (None, {}), (" ", {})],
    ids=["object", "empty", "null", "blank"],
)
def test_tool_call_arguments_as_an_object_or_nothing_are_read(arguments: Any, read: Any) -> None:
    call = {"id": "c1", "function": {"name": "get_weather", "arguments": arguments}}
    converted = provider_messages([QUESTION, {"role": "assistant", "tool_calls": [call]}])
    assert converted[1] == AssistantMessage((ToolCall("c1", "get_weather", read),))
