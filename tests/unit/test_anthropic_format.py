"""The Anthropic Messages format <-> the provider, on plain data: requests become one provider
call (or a 400 naming the parameter), stream parts become the API's events and message."""

from __future__ import annotations

from typing import Any

import pytest

from sf_provider import (
    DiscardPart,
    ErrorPart,
    FinishPart,
    GenerateResult,
    InvalidMessagesError,
    InvalidToolSchemaError,
    ProviderError,
    ReasoningDeltaPart,
    ReasoningEndPart,
    ReasoningStartPart,
    StreamPart,
    StreamStartPart,
    TextDeltaPart,
    TextEndPart,
    TextStartPart,
    ToolCallPart,
    ToolInputDeltaPart,
    ToolInputEndPart,
    ToolInputStartPart,
    UnsupportedRequestError,
    Usage,
)
from sf_provider._anthropic_format import (
    CLI_BETAS,
    EventMapper,
    ThreadUnsupportedError,
    header_betas,
    message,
    parse_request,
)
from sf_provider._mapping import ResultCollector
from sf_provider._messages import convert_messages
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

WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


# A 1x1 PNG.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgAAACAAEA5ScN5AAAAABJRU5ErkJggg=="


def request(**overrides: Any) -> dict[str, Any]:
    return {
        "model": "claude-haiku-4-5",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "hi"}],
        **overrides,
    }


# -- requests


def test_a_plain_request_is_a_provider_call_with_model_and_max_tokens() -> None:
    call = parse_request(request())
    assert call.messages == [UserMessage((Text("hi"),))]
    assert call.options == {"model": "claude-haiku-4-5", "max_tokens": 100}
    assert call.tools == [] and not call.stream and not call.structured


def test_system_as_a_string_or_text_blocks_leads_the_messages() -> None:
    as_string = parse_request(request(system="Be terse."))
    as_blocks = parse_request(
        request(
            system=[
                {"type": "text", "text": "Be terse.", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "Use metric."},
            ]
        )
    )
    assert as_string.messages[0] == SystemMessage("Be terse.")
    assert as_blocks.messages[0] == SystemMessage("Be terse.\nUse metric.")


def test_custom_tools_become_function_tools_without_executors() -> None:
    call = parse_request(request(tools=[WEATHER, {**WEATHER, "name": "other", "type": "custom"}]))
    assert [t.name for t in call.tools] == ["get_weather", "other"]
    assert call.tools[0].description == "Weather for a city."
    assert call.tools[0].input_schema["properties"] == {"city": {"type": "string"}}
    assert all(t.executor is None for t in call.tools)


def test_a_tool_loop_becomes_native_history() -> None:
    call = parse_request(
        request(
            tools=[WEATHER],
            messages=[
                {"role": "user", "content": "Weather in Paris?"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "Look it up.", "signature": "sig"},
                        {"type": "text", "text": "Checking."},
                        {
                            "type": "tool_use",
                            "id": "toolu_1",
                            "name": "get_weather",
                            "input": {"city": "Paris"},
                        },
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_1",
                            "content": [
                                {"type": "text", "text": "18"},
                                {"type": "text", "text": "C"},
                            ],
                        },
                        {"type": "text", "text": "And tomorrow?"},
                    ],
                },
            ],
        )
    )
    assert call.messages[1:] == [
        AssistantMessage(
            (
                Reasoning("Look it up.", signature="sig"),
                Text("Checking."),
                ToolCall("toolu_1", "get_weather", {"city": "Paris"}),
            )
        ),
        # Its text blocks as sent: not glued into one text (with a "\n" between).
        ToolMessage((ToolResult("toolu_1", (Text("18"), Text("C"))),)),
        UserMessage((Text("And tomorrow?"),)),
    ]
    conversation = convert_messages(call.messages)  # what the provider makes of them
    assert [t["role"] for t in conversation.history] == ["user", "assistant"]
    assert conversation.history[1]["content"][0]["type"] == "thinking"
    assert [b["type"] for b in conversation.prompt] == ["tool_result", "text"]
    assert conversation.prompt[0]["content"] == [
        {"type": "text", "text": "18"},
        {"type": "text", "text": "C"},
    ]


def test_a_tool_error_result_keeps_is_error() -> None:
    call = parse_request(
        request(
            tools=[{**WEATHER, "name": "x"}],
            messages=[
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "t1", "name": "x", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "boom",
                     "is_error": True}]},
            ]
        )
    )  # fmt: skip
    assert call.messages[-1] == ToolMessage((ToolResult("t1", "boom", is_error=True),))


@pytest.mark.parametrize("value", ["false", 0, None])
def test_a_tool_result_is_error_that_is_no_bool_is_refused(value: Any) -> None:
    # "false" was sent as an error result (bool("false") is True).
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "x", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "ok", "is_error": value}]},
    ]  # fmt: skip
    with pytest.raises(InvalidMessagesError, match=r"\.is_error: must be true or false"):
        parse_request(request(messages=messages))


def test_images_from_base64_and_url_sources() -> None:
    call = parse_request(
        request(
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "image", "source": {"type": "base64",
                                                     "media_type": "image/png", "data": PNG}},
                        {"type": "image", "source": {"type": "url",
                                                     "url": "https://example.com/a.png"}},
                    ],
                }
            ]
        )
    )  # fmt: skip
    assert call.messages[0] == UserMessage(
        (Image(data=PNG, media_type="image/png"), Image(url="https://example.com/a.png"))
    )


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        # required, none and a named tool: tests/unit/test_tool_rules.py, with every door's.
        ({"type": "auto"}, "auto"),
        ({"type": "auto", "disable_parallel_tool_use": False}, "auto"),
    ],
)
def test_tool_choice(choice: dict[str, Any], expected: Any) -> None:
    call = parse_request(request(tools=[WEATHER], tool_choice=choice))
    assert call.options["tool_choice"] == expected


def test_stop_sequences_and_one_call_per_turn_are_call_options() -> None:
    """The provider honours or refuses them (`CallOptions`), as for every door."""
    choice = {"type": "auto", "disable_parallel_tool_use": True}
    call = parse_request(request(tools=[WEATHER], tool_choice=choice, stop_sequences=["END"]))
    assert call.options["stop_sequences"] == ["END"]
    assert call.options["parallel_tool_calls"] is False
    call = parse_request(request(stop_sequences=[]))
    assert "stop_sequences" not in call.options and "parallel_tool_calls" not in call.options


def test_sampling_settings_are_call_options_as_written() -> None:
    """The API judges their values (ADR 0009): none is refused here."""
    sampling = {"temperature": 0.3, "top_p": 1, "top_k": 5}
    call = parse_request(request(**sampling))
    assert {k: call.options[k] for k in sampling} == sampling
    assert call.dropped == []
    call = parse_request(request(temperature=None, top_p=None, top_k=None))
    assert not {"temperature", "top_p", "top_k"} & call.options.keys()


def test_drop_params_leaves_sampling_and_what_cannot_be_honoured_out_with_warnings() -> None:
    body = request(temperature=0.3, top_k=True, speed="fast", service_tier="auto")
    call = parse_request(body, drop=True)
    assert not {"temperature", "top_k", "speed", "service_tier"} & call.options.keys()
    assert [w.code for w in call.dropped] == ["parameter-dropped"] * 3
    said = [w.message for w in call.dropped]
    assert [m.split("'")[1] for m in said] == ["temperature", "top_k", "speed"]
    assert "cannot ask for another speed" in said[2]


STOPPED: list[StreamPart] = [
    TextStartPart(id="t1"),
    TextDeltaPart(id="t1", delta="Thought: x\n"),
    TextEndPart(id="t1"),
    FinishPart(
        finish_reason="stop",
        raw_stop_reason="end_turn",
        provider_details={"stop_sequence": "Observation:"},
    ),
]


def test_an_answer_ended_at_a_stop_sequence_says_so_in_both_forms() -> None:
    delta = events_for(STOPPED)[-2]["delta"]
    assert delta == {"stop_reason": "stop_sequence", "stop_sequence": "Observation:"}
    answer = message(folded(STOPPED), message_id="m", model="x", structured=False)
    assert (answer["stop_reason"], answer["stop_sequence"]) == ("stop_sequence", "Observation:")


@pytest.mark.parametrize(
    ("thinking", "expected"),
    [
        ({"type": "enabled", "budget_tokens": 2048}, 2048),
        ({"type": "adaptive"}, "adaptive"),
        ({"type": "disabled"}, "disabled"),
    ],
)
def test_thinking(thinking: dict[str, Any], expected: Any) -> None:
    assert parse_request(request(thinking=thinking)).options["thinking"] == expected


def test_output_config_sets_effort_and_structured_output() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    call = parse_request(
        request(output_config={"effort": "low", "format": {"type": "json_schema",
                                                           "schema": schema}})
    )  # fmt: skip
    assert call.options["effort"] == "low"
    assert call.options["output_schema"] == schema
    assert call.structured


@pytest.mark.parametrize(
    "overrides",
    [
        {"metadata": {"user_id": "u1"}},
        {"metadata": {}},
        {"metadata": {"user_id": None}},
        {"cache_control": {"type": "ephemeral"}},
        {"service_tier": "auto"},
        {"speed": "standard"},
        {"stop_sequences": []},
        {"top_p": None, "top_k": None, "container": None},
        {"tools": [{**WEATHER, "cache_control": {"type": "ephemeral"}, "strict": False}]},
        {"stream": True},
    ],
    ids=lambda overrides: ",".join(overrides),
)
def test_parameters_the_gateway_may_accept(overrides: dict[str, Any]) -> None:
    parse_request(request(**overrides))


REFUSED: dict[str, tuple[dict[str, Any], type[ProviderError], str]] = {
    "stop_sequences": ({"stop_sequences": ["END", ""]}, UnsupportedRequestError, "non-empty"),
    "stop_sequences-text": ({"stop_sequences": "END"}, UnsupportedRequestError, "stop_sequences:"),
    "temperature-true": ({"temperature": True}, UnsupportedRequestError, "temperature:"),
    "temperature-text": ({"temperature": "0.3"}, UnsupportedRequestError, "must be a number"),
    "top_k-float": ({"top_k": 3.0}, UnsupportedRequestError, "top_k: must be an integer"),
    "service_tier": ({"service_tier": "standard_only"}, UnsupportedRequestError, "service_tier"),
    "speed": ({"speed": "fast"}, UnsupportedRequestError, "speed:"),
    "unknown": ({"container": "c1"}, UnsupportedRequestError, "container:"),
    # The Messages API takes metadata.user_id only, and refuses any other key.
    "metadata-key": (
        {"metadata": {"user_id": "u1", "team": "a"}},
        UnsupportedRequestError,
        "metadata.team:",
    ),
    "metadata-user_id": (
        {"metadata": {"user_id": 7}},
        UnsupportedRequestError,
        "metadata.user_id:",
    ),
    "mcp_servers": ({"mcp_servers": []}, UnsupportedRequestError, "mcp_servers:"),
    "no-model": ({"model": None}, UnsupportedRequestError, "model:"),
    "no-max_tokens": ({"max_tokens": None}, UnsupportedRequestError, "max_tokens:"),
    "bad-max_tokens": ({"max_tokens": 0}, UnsupportedRequestError, "max_tokens:"),
    "server-tool": (
        {"tools": [{"type": "web_search_20250305", "name": "web_search"}]},
        UnsupportedRequestError,
        "web_search (web_search_20250305)",
    ),
    "tool-without-schema": ({"tools": [{"name": "x"}]}, UnsupportedRequestError, "input_schema"),
    "tool-schema": (
        {"tools": [{"name": "x", "input_schema": {"type": "string"}}]},
        InvalidToolSchemaError,
        "must describe an object",
    ),
    "one-call-per-turn-not-bool": (
        {"tools": [WEATHER], "tool_choice": {"type": "any", "disable_parallel_tool_use": 1}},
        UnsupportedRequestError,
        "tool_choice.disable_parallel_tool_use:",
    ),
    "thinking-display": (
        {"thinking": {"type": "adaptive", "display": "omitted"}},
        UnsupportedRequestError,
        "thinking.display:",
    ),
    "thinking-between-tools": (
        {"thinking": {"type": "between_tools"}},
        UnsupportedRequestError,
        "thinking.type:",
    ),
    "thinking-small-budget": (
        {"thinking": {"type": "enabled", "budget_tokens": 100}},
        UnsupportedRequestError,
        "thinking.budget_tokens:",
    ),
    "format-type": (
        {"output_config": {"format": {"type": "xml"}}},
        UnsupportedRequestError,
        "output_config.format:",
    ),
    "unknown-role": (
        {"messages": [{"role": "tool", "content": "x"}]},
        InvalidMessagesError,
        "messages[0].role: unknown role 'tool'",
    ),
    "no-messages": ({"messages": []}, InvalidMessagesError, "messages:"),
    "prefill": (
        {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "{"}]},
        InvalidMessagesError,
        "messages[1]: a final assistant message",
    ),
    "late-system": (
        {
            "messages": [
                {"role": "user", "content": "x"},
                {"role": "system", "content": "y"},
                {"role": "user", "content": "z"},
            ]
        },
        InvalidMessagesError,
        "messages[1]: a system message after",
    ),
    "document": (
        {"messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]},
        UnsupportedRequestError,
        "messages[0].content[0].type: 'document'",
    ),
    "file-image": (
        {
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "image", "source": {"type": "file", "file_id": "f1"}}],
                }
            ]
        },
        UnsupportedRequestError,
        "messages[0].content[0].source.type",
    ),
    "document-in-tool-result": (
        {
            "messages": [
                {"role": "user", "content": "x"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {}}],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t",
                            "content": [
                                {
                                    "type": "document",
                                    "source": {"type": "url", "url": "https://e.com/a.pdf"},
                                }
                            ],
                        }
                    ],
                },
            ]
        },
        UnsupportedRequestError,
        "messages[2].content[0].content[0]",
    ),
    "result-after-text": (
        {
            "tools": [WEATHER],
            "messages": [
                {"role": "user", "content": "Weather?"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Here you go:"},
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "21C"},
                    ],
                },
            ],
        },
        InvalidMessagesError,
        # Not "the tool call(s) toolu_1 before it have no result": the result is right there.
        "messages[2].content[1]: a tool_result block comes after a text block; the Messages API "
        "requires a user message's tool_result blocks first, before any text or image",
    ),
    "citations": (
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "x", "citations": [{"type": "char_location"}]}
                    ],
                }
            ]
        },
        UnsupportedRequestError,
        "messages[0].content[0].citations",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED), ids=list(REFUSED))
def test_what_cannot_be_honoured_is_refused_naming_it(case: str) -> None:
    overrides, error, named = REFUSED[case]
    with pytest.raises(error) as info:
        parse_request(request(**overrides))
    assert named in str(info.value)


@pytest.mark.parametrize("empty", ["", []], ids=["string", "list"])
def test_an_assistant_message_with_no_content_is_left_out_and_the_user_turns_join(
    empty: Any,
) -> None:
    # As the README says of the provider's messages: no made-up "(no content)" turn, no "first\n".
    call = parse_request(
        request(messages=[{"role": "user", "content": "first"},
                          {"role": "assistant", "content": empty},
                          {"role": "user", "content": "second"}])
    )  # fmt: skip
    conversation = convert_messages(call.messages)
    assert conversation.history == []
    assert conversation.prompt == [
        {"type": "text", "text": "first"},
        {"type": "text", "text": "second"},
    ]


def test_a_body_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(UnsupportedRequestError, match="body"):
        parse_request([1, 2])


def in_user(*blocks: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": list(blocks)}]}


def in_assistant(*blocks: Any) -> dict[str, Any]:
    turns = [{"role": "user", "content": "go"}, {"role": "assistant", "content": list(blocks)}]
    return {"messages": [*turns, {"role": "user", "content": "next"}]}


CALLED = {"type": "tool_use", "id": "t1", "name": "get_weather"}

#: Malformed parameters and blocks: (overrides, error, the parameter the message starts with,
#: what it says to send instead).
MALFORMED: dict[str, tuple[dict[str, Any], type[ProviderError], str, str]] = {
    "stream": ({"stream": "yes"}, UnsupportedRequestError, "stream", "must be true or false"),
    "metadata": ({"metadata": "u1"}, UnsupportedRequestError, "metadata", "must be an object"),
    "thread-not-object": ({"thread": "t1"}, UnsupportedRequestError, "thread", "an object"),
    "thread-type": (
        {"thread": {"type": "fork"}}, UnsupportedRequestError, "thread.type",
        "'fork'; use 'create' or 'continue'",
    ),
    "thread-key": (
        {"thread": {"type": "create", "ttl": 5}}, UnsupportedRequestError, "thread.ttl",
        "drop it",
    ),
    "thread-continue-without-id": (
        {"thread": {"type": "continue"}}, UnsupportedRequestError,
        "thread.previous_message_id", "required: a message id string",
    ),
    "output_config": (
        {"output_config": "high"}, UnsupportedRequestError, "output_config", "must be an object"
    ),
    "effort": (
        {"output_config": {"effort": "huge"}}, UnsupportedRequestError, "output_config.effort",
        "'huge'; use low, medium, high, xhigh or max",
    ),
    "format-without-schema": (
        {"output_config": {"format": {"type": "json_schema"}}}, UnsupportedRequestError,
        "output_config.format.schema", "must be a JSON Schema object",
    ),
    "thinking-key": (
        {"thinking": {"type": "adaptive", "budget_tokens": 2048}}, UnsupportedRequestError,
        "thinking.budget_tokens", "drop it",
    ),
    "tool_choice-string": (
        {"tool_choice": "auto"}, UnsupportedRequestError, "tool_choice", "an object with a 'type'"
    ),
    "tool_choice-type": (
        {"tool_choice": {"type": "required"}}, UnsupportedRequestError, "tool_choice.type",
        "'required'; use 'auto', 'any', 'tool' or 'none'",
    ),
    "tool_choice-without-name": (
        {"tools": [WEATHER], "tool_choice": {"type": "tool"}}, UnsupportedRequestError,
        "tool_choice.name", "required for type 'tool'",
    ),
    "tools-object": ({"tools": WEATHER}, UnsupportedRequestError, "tools", "must be a list"),
    "tool-not-object": (
        {"tools": ["get_weather"]}, UnsupportedRequestError, "tools[0]", "must be an object"
    ),
    "system-number": (
        {"system": 5}, InvalidMessagesError, "system", "a string or a list of text blocks"
    ),
    "system-image": (
        {"system": [{"type": "image", "source": {}}]}, InvalidMessagesError, "system[0]",
        "only text blocks are accepted here, not 'image'",
    ),
    "system-text-missing": (
        {"system": [{"type": "text"}]}, InvalidMessagesError, "system[0].text",
        "required: a string",
    ),
    "message-string": (
        {"messages": ["hi"]}, InvalidMessagesError, "messages[0]",
        "must be an object with 'role' and 'content'",
    ),
    "message-without-content": (
        {"messages": [{"role": "user"}]}, InvalidMessagesError, "messages[0].content",
        "required: a string or a list of blocks",
    ),
    "content-number": (
        {"messages": [{"role": "user", "content": 5}]}, InvalidMessagesError,
        "messages[0].content", "a string or a list of content blocks",
    ),
    "block-without-type": (
        in_user({"text": "hi"}), InvalidMessagesError, "messages[0].content[0]",
        "must be an object with a 'type'",
    ),
    "image-without-source": (
        in_user({"type": "image"}), InvalidMessagesError, "messages[0].content[0].source",
        "required: an object",
    ),
    "base64-without-media_type": (
        in_user({"type": "image", "source": {"type": "base64", "data": PNG}}),
        InvalidMessagesError, "messages[0].content[0].source",
        "a base64 image needs string 'data' and 'media_type'",
    ),
    "image-url-ftp": (
        in_user({"type": "image", "source": {"type": "url", "url": "ftp://e.com/a.png"}}),
        InvalidMessagesError, "messages[0].content[0].source.url", "an http(s) URL",
    ),
    "tool_result-without-id": (
        in_user({"type": "tool_result", "content": "21C"}), InvalidMessagesError,
        "messages[0].content[0].tool_use_id", "required: a string",
    ),
    "user-empty": (
        in_user(), InvalidMessagesError, "messages[0].content",
        "a user message needs content: send text, image or tool_result blocks",
    ),
    "thinking-unsigned": (
        in_assistant({"type": "thinking", "thinking": "Hm."}), InvalidMessagesError,
        "messages[1].content[0]", "send it back as the API returned it",
    ),
    "tool_use-caller": (
        in_assistant({**CALLED, "input": {}, "caller": {"type": "code_execution_20250825"}}),
        UnsupportedRequestError, "messages[1].content[0].caller",
        "leave it out or send {'type': 'direct'}",
    ),
    "tool_use-without-id": (
        in_assistant({"type": "tool_use", "name": "get_weather", "input": {}}),
        InvalidMessagesError, "messages[1].content[0]", "needs string 'id' and 'name'",
    ),
    "tool_use-input-text": (
        in_assistant({**CALLED, "input": '{"city": "Paris"}'}), InvalidMessagesError,
        "messages[1].content[0].input", "required: an object",
    ),
    "assistant-image": (
        in_assistant({"type": "image", "source": {"type": "url", "url": "https://e.com/a"}}),
        UnsupportedRequestError, "messages[1].content[0].type",
        "use text, thinking or tool_use",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(MALFORMED), ids=list(MALFORMED))
def test_a_malformed_parameter_or_block_is_refused_naming_it_and_what_to_send(case: str) -> None:
    overrides, error, param, advice = MALFORMED[case]
    with pytest.raises(ProviderError) as info:
        parse_request(request(**overrides))
    assert type(info.value) is error
    assert str(info.value).startswith(f"{param}: ")
    assert advice in str(info.value)


@pytest.mark.parametrize(
    "thread",
    [{"type": "create"}, {"type": "continue", "previous_message_id": "msg_1"}],
    ids=["create", "continue"],
)
def test_a_thread_is_refused_as_the_api_refuses_one_it_cannot_keep(thread: Any) -> None:
    with pytest.raises(ThreadUnsupportedError) as info:
        parse_request(request(thread=thread))
    assert str(info.value).startswith("thread: this gateway holds no conversation")
    assert "send the whole conversation without `thread`" in str(info.value)
    assert info.value.details == {"error_code": "thread_unsupported_request"}


def test_a_leading_system_message_joins_the_system_prompt() -> None:
    turns = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    call = parse_request(request(system="You help.", messages=turns))
    assert call.messages == [
        SystemMessage("You help."),
        SystemMessage("Be brief."),
        UserMessage((Text("hi"),)),
    ]


def test_effort_alone_asks_for_no_structured_output() -> None:
    call = parse_request(request(output_config={"effort": "high"}))
    assert call.options["effort"] == "high"
    assert not call.structured and "output_schema" not in call.options


# -- responses


def events_for(parts: list[StreamPart], *, structured: bool = False) -> list[dict[str, Any]]:
    mapper = EventMapper("claude-haiku-4-5", message_id="msg_1", structured=structured)
    events = [mapper.start()]
    for part in parts:
        events += mapper.add(part)
    return events


def folded(parts: list[StreamPart]) -> GenerateResult:
    """What `generate` makes of the parts: the provider's own collector."""
    collector = ResultCollector()
    for part in parts:
        collector.add(part)
    return collector.result()


FINISH = FinishPart(
    finish_reason="tool-calls",
    raw_stop_reason="tool_use",
    usage=Usage(input_tokens=30, output_tokens=7, cache_read_input_tokens=5),
)
TURN: list[StreamPart] = [
    StreamStartPart(mode="single-turn"),
    ReasoningStartPart(id="r1"),
    ReasoningDeltaPart(id="r1", delta="Think."),
    ReasoningEndPart(id="r1", signature="sig"),
    TextStartPart(id="t1"),
    TextDeltaPart(id="t1", delta="Check"),
    TextDeltaPart(id="t1", delta="ing."),
    TextEndPart(id="t1"),
    ToolInputStartPart(id="toolu_1", tool_name="get_weather"),
    ToolInputDeltaPart(id="toolu_1", delta='{"city": '),
    ToolInputDeltaPart(id="toolu_1", delta='"Paris"}'),
    ToolInputEndPart(id="toolu_1"),
    ToolCallPart(tool_call_id="toolu_1", tool_name="get_weather", input={"city": "Paris"}),
    FINISH,
]


def test_thinking_text_and_a_call_stream_as_the_apis_events() -> None:
    events = events_for(TURN)
    assert [(e["type"], e.get("index"), (e.get("delta") or {}).get("type")) for e in events] == [
        ("message_start", None, None),
        ("content_block_start", 0, None),
        ("content_block_delta", 0, "thinking_delta"),
        ("content_block_delta", 0, "signature_delta"),
        ("content_block_stop", 0, None),
        ("content_block_start", 1, None),
        ("content_block_delta", 1, "text_delta"),
        ("content_block_delta", 1, "text_delta"),
        ("content_block_stop", 1, None),
        ("content_block_start", 2, None),
        ("content_block_delta", 2, "input_json_delta"),
        ("content_block_delta", 2, "input_json_delta"),
        ("content_block_stop", 2, None),
        ("message_delta", None, None),
        ("message_stop", None, None),
    ]
    assert [e["content_block"] for e in events if e["type"] == "content_block_start"] == [
        {"type": "thinking", "thinking": "", "signature": ""},
        {"type": "text", "text": ""},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}},
    ]
    assert events[3]["delta"] == {"type": "signature_delta", "signature": "sig"}
    assert events[-2]["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert events[-2]["usage"] == {
        "input_tokens": 30,
        "output_tokens": 7,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 5,
    }
    start = events[0]["message"]
    assert (start["id"], start["model"], start["content"], start["stop_reason"]) == (
        "msg_1", "claude-haiku-4-5", [], None
    )  # fmt: skip


def test_the_same_parts_fold_into_the_non_streaming_message() -> None:
    answer = message(folded(TURN), message_id="msg_1", model="claude-haiku-4-5", structured=False)
    assert answer == {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5",
        "content": [
            {"type": "thinking", "thinking": "Think.", "signature": "sig"},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
             "input": {"city": "Paris"}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 30, "output_tokens": 7, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 5},
    }  # fmt: skip


def test_a_call_without_streamed_input_is_sent_whole() -> None:
    """A call read from a legacy JSON envelope has no tool-input parts."""
    call = ToolCallPart(tool_call_id="envelope-call-1-0", tool_name="x", input={"a": 1})
    events = events_for([call, FINISH])
    assert [e["type"] for e in events[1:4]] == [
        "content_block_start", "content_block_delta", "content_block_stop"
    ]  # fmt: skip
    assert events[1]["content_block"] == {
        "type": "tool_use", "id": "envelope-call-1-0", "name": "x", "input": {}
    }  # fmt: skip
    assert events[2]["delta"] == {"type": "input_json_delta", "partial_json": '{"a": 1}'}


CUT: list[StreamPart] = [
    TextStartPart(id="t1"),
    TextDeltaPart(id="t1", delta="Half an ans"),
    TextEndPart(id="t1"),
    DiscardPart(ids=["t1"], reason="cut"),
    TextStartPart(id="t2"),
    TextDeltaPart(id="t2", delta="Five."),
    TextEndPart(id="t2"),
    FinishPart(finish_reason="stop", raw_stop_reason="end_turn"),
]


def test_a_discarded_attempt_is_not_in_the_message() -> None:
    answer = message(folded(CUT), message_id="m", model="x", structured=False)
    assert answer["content"] == [{"type": "text", "text": "Five."}]
    assert answer["stop_reason"] == "end_turn"


def test_an_error_part_means_no_message_delta() -> None:
    parts: list[StreamPart] = [
        ErrorPart(error_type="APIError", message="boom"),
        FinishPart(finish_reason="error"),
    ]
    assert [e["type"] for e in events_for(parts)] == ["message_start"]


STRUCTURED: list[StreamPart] = [
    TextStartPart(id="t1"),
    TextDeltaPart(id="t1", delta="Here it is."),
    TextEndPart(id="t1"),
    # The CLI's own StructuredOutput call is no call to answer: the core's reason is stop.
    FinishPart(finish_reason="stop", raw_stop_reason="tool_use",
               structured_output={"city": "Paris"}),
]  # fmt: skip


def test_structured_output_is_one_json_text_block_in_both_forms() -> None:
    events = events_for(STRUCTURED, structured=True)
    deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
    assert deltas == [{"type": "text_delta", "text": '{"city": "Paris"}'}]
    assert events[-2]["delta"]["stop_reason"] == "end_turn", "the CLI's own tool, no client call"
    answer = message(folded(STRUCTURED), message_id="m", model="x", structured=True)
    assert answer["content"] == [{"type": "text", "text": '{"city": "Paris"}'}]
    assert answer["stop_reason"] == "end_turn"


@pytest.mark.parametrize(
    ("finish_reason", "raw", "expected"),
    [
        ("stop", "end_turn", "end_turn"),
        ("stop", "stop_sequence", "end_turn"),
        ("length", "max_tokens", "max_tokens"),
        ("tool-calls", "tool_deferred", "tool_use"),
        ("content-filter", "refusal", "refusal"),
        ("other", "pause_turn", "pause_turn"),
        ("other", "something_new", "end_turn"),
    ],
)
def test_stop_reasons(finish_reason: Any, raw: str, expected: str) -> None:
    finish = FinishPart(finish_reason=finish_reason, raw_stop_reason=raw)
    result = GenerateResult(text="", finish_reason=finish_reason, raw_stop_reason=raw)
    answer = message(result, message_id="msg_1", model="sonnet", structured=False)
    events = EventMapper("sonnet", message_id="msg_1").add(finish)
    assert answer["stop_reason"] == events[0]["delta"]["stop_reason"] == expected


# -- redacted thinking: opaque data, no text; back to the model as it came

REDACTED_TURN: list[StreamPart] = [
    StreamStartPart(mode="single-turn"),
    ReasoningStartPart(id="r1"),
    ReasoningEndPart(id="r1", redacted="opaque"),
    ToolInputStartPart(id="toolu_1", tool_name="get_weather"),
    ToolInputDeltaPart(id="toolu_1", delta='{"city": "Paris"}'),
    ToolInputEndPart(id="toolu_1"),
    ToolCallPart(tool_call_id="toolu_1", tool_name="get_weather", input={"city": "Paris"}),
    FINISH,
]


def test_a_redacted_block_streams_whole_in_its_start_event() -> None:
    events = events_for(REDACTED_TURN)
    starts = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    assert starts[0] == {"type": "redacted_thinking", "data": "opaque"}
    assert [(e["type"], e.get("index")) for e in events[1:3]] == [
        ("content_block_start", 0), ("content_block_stop", 0)
    ]  # fmt: skip


def test_a_redacted_block_is_in_the_non_streaming_message_and_parses_back() -> None:
    answer = message(folded(REDACTED_TURN), message_id="m", model="m", structured=False)
    assert answer["content"][0] == {"type": "redacted_thinking", "data": "opaque"}

    call = parse_request(
        request(tools=[WEATHER], messages=[
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": answer["content"]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]},
        ])
    )  # fmt: skip
    assert call.messages[1].parts[0] == Reasoning("", redacted="opaque")  # type: ignore[union-attr]
    history = convert_messages(call.messages).history
    assert history[1]["content"][0] == {"type": "redacted_thinking", "data": "opaque"}


def test_a_redacted_block_without_data_is_refused() -> None:
    with pytest.raises(InvalidMessagesError, match=r"messages\[1\].content\[0\]: .*'data'"):
        parse_request(
            request(messages=[
                {"role": "user", "content": "x"},
                {"role": "assistant", "content": [{"type": "redacted_thinking", "data": ""}]},
                {"role": "user", "content": "y"},
            ])
        )  # fmt: skip


# -- the anthropic-beta header


def test_the_betas_of_the_header_are_passed_on_but_the_clis_own() -> None:
    headers = ["claude-code-20250219, files-api-2025-04-14", " ", "files-api-2025-04-14,x-2026"]
    assert header_betas(headers) == ["files-api-2025-04-14", "x-2026"]
    assert header_betas(sorted(CLI_BETAS)) == []
