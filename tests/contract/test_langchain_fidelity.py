"""The LangChain adapter: what a LangChain user passes takes effect in the request or fails loudly.

Each test names one argument, option or message part and proves it from the scripted API's
request log, or from the named error raised before any request.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest
from langchain_core import exceptions as langchain_errors
from langchain_core.caches import InMemoryCache
from langchain_core.callbacks import BaseCallbackHandler, get_usage_metadata_callback
from langchain_core.exceptions import OutputParserException
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool
from pydantic import BaseModel, ValidationError, field_validator
from pydantic import v1 as pydantic_v1

from sf_provider import (
    APIError,
    ClaudeAgentProvider,
    ContextWindowExceededError,
    InvalidMessagesError,
    ProviderError,
    ProviderSettings,
    QueryTimeoutError,
    RateLimitError,
    UnsupportedRequestError,
    UnsupportedSettingError,
)
from sf_provider import _request as req
from sf_provider.adapters.langchain import ChatClaudeAgent, _provider_messages
from sf_provider.testing import (
    RecordedRequest,
    Reply,
    ScriptedMessagesAPI,
    http_error,
    redacted_thinking,
    reply,
    text,
    thinking,
    tool_use,
)

pytestmark = [pytest.mark.cli]

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFQ5HAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg"
)


class Answer(BaseModel):
    """An answer."""

    answer: str


class Weather(BaseModel):
    """Get the weather of a city."""

    city: str


WEATHER_OPENAI = {
    "type": "function",
    "function": {
        "name": "Weather",
        "description": "Get the weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def assistant_blocks(body: dict[str, Any]) -> list[tuple[str, str | None]]:
    """(type, signature) of every assistant block the request replayed."""
    return [
        (block["type"], block.get("signature"))
        for message in body["messages"]
        if message["role"] == "assistant"
        for block in message["content"]
    ]


async def replay(message: AIMessage, **model: Any) -> tuple[ScriptedMessagesAPI, AIMessage]:
    """Send `message` back with a result for its call, as an agent loop does."""
    history: list[BaseMessage] = [
        HumanMessage("Weather in Paris?"),
        message,
        ToolMessage("sunny", tool_call_id=message.tool_calls[0]["id"]),
    ]
    async with ScriptedMessagesAPI([reply(text("Sunny."))]) as api:
        chat = ChatClaudeAgent(settings=api.settings(), **model).bind_tools([Weather])
        answer = await chat.ainvoke(history)
    return api, answer


# -- with_structured_output


@pytest.mark.anyio
async def test_structured_output_json_schema_uses_the_providers_output_schema() -> None:
    script = [reply(tool_use("StructuredOutput", {"answer": "Paris"}))]
    async with ScriptedMessagesAPI(script) as api:
        chat = ChatClaudeAgent(settings=api.settings())
        structured = chat.with_structured_output(Answer, method="json_schema", strict=True)
        answer = await structured.ainvoke("Capital of France?")
    assert answer == Answer(answer="Paris")
    (request,) = api.requests
    assert request.tool_names == ["StructuredOutput"], "the CLI's tool, not a client tool"
    (tool,) = request.tools
    assert tool["input_schema"]["properties"] == {"answer": {"type": "string"}}


@pytest.mark.anyio
async def test_structured_output_json_schema_with_include_raw() -> None:
    script = [reply(tool_use("StructuredOutput", {"answer": "Paris"}))]
    async with ScriptedMessagesAPI(script) as api:
        chat = ChatClaudeAgent(settings=api.settings())
        schema = Answer.model_json_schema()
        structured = chat.with_structured_output(schema, method="json_schema", include_raw=True)
        result: Any = await structured.ainvoke("Capital of France?")
    assert result["parsed"] == {"answer": "Paris"} and result["parsing_error"] is None
    assert isinstance(result["raw"], AIMessage)
    assert api.requests[0].tool_names == ["StructuredOutput"]


@pytest.mark.anyio
async def test_structured_output_function_calling_stays_a_tool_call_with_include_raw() -> None:
    async with ScriptedMessagesAPI([reply(tool_use("Answer", {"answer": "Paris"}))]) as api:
        chat = ChatClaudeAgent(settings=api.settings())
        structured = chat.with_structured_output(Answer, include_raw=True)
        result: Any = await structured.ainvoke("Capital of France?")
    assert result["parsed"] == Answer(answer="Paris")
    assert api.requests[0].tool_names == ["mcp__sf__Answer"]


@pytest.mark.anyio
async def test_structured_output_from_a_json_schema_dict_is_a_tool_call() -> None:
    # A JSON Schema dict (with a title) is a function tool to LangChain: it was refused as a
    # server tool of type 'object'.
    script = [reply(tool_use("Answer", {"answer": "Paris"})), reply(text("ok"))]
    async with ScriptedMessagesAPI(script) as api:
        chat = ChatClaudeAgent(settings=api.settings())
        structured = chat.with_structured_output(Answer.model_json_schema())
        answer = await structured.ainvoke("Capital of France?")
        await chat.bind_tools([Weather.model_json_schema()]).ainvoke("Weather in Paris?")
    assert answer == {"answer": "Paris"}
    assert [r.tool_names for r in api.requests] == [["mcp__sf__Answer"], ["mcp__sf__Weather"]]
    assert api.requests[1].tools[0]["input_schema"]["properties"] == {
        "city": {"title": "City", "type": "string"}
    }


@pytest.mark.parametrize("method", ["function_calling", "json_schema"])
@pytest.mark.anyio
async def test_structured_output_answered_in_text_is_a_parsing_error_with_include_raw(
    method: str,
) -> None:
    # LangChain's convention: with include_raw, what the reply could not give is the
    # `parsing_error`, beside the reply itself. The provider's error was raised instead.
    async with ScriptedMessagesAPI(lambda request: reply(text("Paris, I think."))) as api:
        chat = ChatClaudeAgent(settings=api.settings())
        structured = chat.with_structured_output(Answer, method=method, include_raw=True)
        result: Any = await structured.ainvoke("Capital of France?")
        answers = len(api.requests)  # json_schema: the CLI asked the model again
        with pytest.raises(ProviderError, match="without"):  # without include_raw: raised
            await chat.with_structured_output(Answer, method=method).ainvoke("Capital?")
    assert result["parsed"] is None
    assert isinstance(result["parsing_error"], OutputParserException)
    assert "answered without" in str(result["parsing_error"])  # the provider's error message
    # Every answer's text, as `astream` sends it (the invoked reply kept the last one's only).
    assert result["raw"].text == "Paris, I think." * answers
    assert result["raw"].usage_metadata["output_tokens"] > 0


@pytest.mark.parametrize(
    ("method", "answered_by"),
    [("function_calling", "Answer"), ("json_schema", "StructuredOutput")],
)
@pytest.mark.anyio
async def test_structured_output_streamed_with_include_raw_hands_back_the_parsing_error(
    method: str, answered_by: str
) -> None:
    # Streamed, the text reply was handed on as `raw`, then the parse raised
    # (OutputParserException) after a chunk saying `parsing_error: None`: a fallback replaces
    # only a stream that has not started. As `ainvoke` gives it, the reply and what it lacks.
    def model(request: RecordedRequest) -> Reply:
        if "France" in json.dumps(request.body["messages"][0]):
            return reply(text("Paris, I think."))
        return reply(tool_use(answered_by, {"answer": "Rome"}))

    async with ScriptedMessagesAPI(model) as api:
        chat = ChatClaudeAgent(settings=api.settings())
        structured = chat.with_structured_output(Answer, method=method, include_raw=True)
        failed: dict[str, Any] = {}
        async for chunk in structured.astream("Capital of France?"):
            failed |= chunk
        answers = len(api.requests)  # json_schema: the CLI asked the model again
        answered: dict[str, Any] = {}
        async for chunk in structured.astream("Capital of Italy?"):
            answered |= chunk
    assert failed["parsed"] is None
    assert isinstance(failed["parsing_error"], OutputParserException)
    assert "answered without" in str(failed["parsing_error"])  # the provider's error message
    assert isinstance(failed["raw"], AIMessageChunk)
    assert failed["raw"].text == "Paris, I think." * answers, "every answer's text, as invoked"
    assert answered["parsed"] == Answer(answer="Rome") and answered["parsing_error"] is None


@pytest.mark.parametrize("streamed", [False, True], ids=["invoked", "streamed"])
@pytest.mark.anyio
async def test_a_call_off_its_schema_is_reported_in_invalid_tool_calls(streamed: bool) -> None:
    # The call is handed back as the model made it (LangChain's tool runner refuses it), and the
    # reply says why it is invalid.
    async with ScriptedMessagesAPI([reply(tool_use("Weather", {"city": 5}))]) as api:
        chat = ChatClaudeAgent(settings=api.settings()).bind_tools([Weather])
        if streamed:
            chunks = [chunk async for chunk in chat.astream("Weather in Paris?")]
            answer: BaseMessage = chunks[0]
            for chunk in chunks[1:]:
                answer += chunk
        else:
            answer = await chat.ainvoke("Weather in Paris?")
    assert isinstance(answer, AIMessage)
    ((call_id, reason),) = answer.response_metadata["invalid_tool_calls"].items()
    assert [(c["id"], c["name"], c["args"]) for c in answer.tool_calls] == [
        (call_id, "Weather", {"city": 5})
    ]
    assert reason.startswith("arguments violate the schema of 'Weather': ")


class AnswerV1(pydantic_v1.BaseModel):
    """An answer."""

    answer: str


@pytest.mark.parametrize(
    ("method", "include_raw", "answered_by"),
    [
        ("json_schema", False, "StructuredOutput"),
        ("json_schema", True, "StructuredOutput"),
        ("function_calling", True, "AnswerV1"),
    ],
)
@pytest.mark.anyio
async def test_structured_output_of_a_pydantic_v1_model_is_that_model(
    method: str, include_raw: bool, answered_by: str
) -> None:
    # As ChatAnthropic gives it (LangChain's standard test_structured_output_pydantic_2_v1):
    # these came back as plain dicts, only pydantic v2 models being recognised.
    async with ScriptedMessagesAPI([reply(tool_use(answered_by, {"answer": "Paris"}))]) as api:
        chat = ChatClaudeAgent(settings=api.settings())
        structured = chat.with_structured_output(AnswerV1, method=method, include_raw=include_raw)
        result: Any = await structured.ainvoke("Capital of France?")
    answer = result["parsed"] if include_raw else result
    assert isinstance(answer, AnswerV1) and answer.answer == "Paris"
    assert api.requests[0].tools[0]["input_schema"]["properties"]["answer"]["type"] == "string"


class CapitalV2(BaseModel):
    """A capital."""

    answer: str

    @field_validator("answer")
    @classmethod
    def _capital(cls, value: str) -> str:
        if value != "Paris":
            raise ValueError("not the capital")
        return value


class CapitalV1(pydantic_v1.BaseModel):
    """A capital."""

    answer: str

    @pydantic_v1.validator("answer")
    def _capital(cls, value: str) -> str:
        if value != "Paris":
            raise ValueError("not the capital")
        return value


@pytest.mark.parametrize("schema", [CapitalV2, CapitalV1], ids=["v2", "v1"])
@pytest.mark.parametrize("method", ["function_calling", "json_schema"])
@pytest.mark.anyio
async def test_an_object_the_model_refuses_fails_alike_for_pydantic_v1_and_v2(
    schema: type, method: str
) -> None:
    # The schema lets any string through (so the CLI takes "Lyon"); the model's validator does
    # not: raised without include_raw, the parsing_error with it, for either pydantic.
    called = "StructuredOutput" if method == "json_schema" else schema.__name__
    answer = reply(tool_use(called, {"answer": "Lyon"}))
    async with ScriptedMessagesAPI(lambda request: answer) as api:
        chat = ChatClaudeAgent(settings=api.settings())
        with pytest.raises(ValueError, match="not the capital"):
            await chat.with_structured_output(schema, method=method).ainvoke("Capital?")
        structured = chat.with_structured_output(schema, method=method, include_raw=True)
        result: Any = await structured.ainvoke("Capital?")
    assert len(api.requests) == 2
    assert result["parsed"] is None and isinstance(result["raw"], AIMessage)
    assert isinstance(result["parsing_error"], ValueError)
    assert "not the capital" in str(result["parsing_error"])


def test_structured_output_refuses_what_it_cannot_do() -> None:
    with pytest.raises(UnsupportedRequestError, match=r"'function_calling'.*'json_schema'"):
        ChatClaudeAgent().with_structured_output(Answer, **{"method": "no-such-method"})


@pytest.mark.anyio
async def test_json_mode_is_json_schema_with_a_warning_as_chat_anthropic_reads_it() -> None:
    answer = reply(tool_use("StructuredOutput", {"answer": "Paris"}))
    async with ScriptedMessagesAPI(lambda request: answer) as api:
        chat = ChatClaudeAgent(settings=api.settings())
        with pytest.warns(UserWarning, match="'json_mode'.* uses 'json_schema'"):
            structured = chat.with_structured_output(Answer, method="json_mode")
        assert await structured.ainvoke("Capital?") == Answer(answer="Paris")
    assert "StructuredOutput" in api.requests[0].tool_names


@pytest.mark.parametrize(
    ("failure", "langchain_error", "provider_error", "retryable"),
    [
        # (Each kind through each door: tests/unit/test_error_kinds.py.)
        (http_error(429), "ModelRateLimitError", RateLimitError, True),
        (http_error(400, "prompt is too long: 250000 tokens > 200000 maximum"),
         "ContextOverflowError", ContextWindowExceededError, False),
    ],
)  # fmt: skip
@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
@pytest.mark.anyio
async def test_api_failures_are_langchains_model_errors_too(
    failure: Any,
    langchain_error: str,
    provider_error: type[Exception],
    retryable: bool,
    stream: bool,
) -> None:
    # As ChatAnthropic raises them: LangChain's agent middleware goes by these (a retry
    # middleware retried even a rejected key; summarization waits for ContextOverflowError).
    async with ScriptedMessagesAPI([failure]) as api:
        chat = ChatClaudeAgent(settings=api.settings())
        with pytest.raises(provider_error) as caught:
            if stream:
                async for _ in chat.astream("Weather?"):
                    pass
            else:
                await chat.ainvoke("Weather?")
    assert isinstance(caught.value, getattr(langchain_errors, langchain_error))
    assert caught.value.is_retryable is retryable  # type: ignore[attr-defined]
    assert len(api.all_requests) == 1


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        (APIError("HTTP 408", status=408), True),
        (APIError("HTTP 409", status=409), True),
        (APIError("HTTP 422", status=422), False),
        (QueryTimeoutError("query ran past timeout", kind="timeout", seconds=1.0), True),
    ],
    ids=["408", "409", "422", "timeout"],
)
def test_a_langchain_error_says_retryable_as_the_provider_does_and_pickles_whole(
    error: Any, retryable: bool
) -> None:
    """408 and 409 were `ModelInvalidRequestError` (not retryable) though the provider says
    retry; a pickled timeout came back without its message (OSError's `__new__`)."""
    import pickle

    from sf_provider.adapters.langchain import _as_langchain_error

    _as_langchain_error(error)
    assert error.is_retryable is retryable is error.retryable
    back = pickle.loads(pickle.dumps(error))
    assert (type(back).__name__, str(back), back.args) == (
        type(error).__name__,
        str(error),
        error.args,
    )
    assert isinstance(back, langchain_errors.ModelError)


def test_bad_input_is_langchains_invalid_request_error_too() -> None:
    with pytest.raises(InvalidMessagesError) as caught:
        ChatClaudeAgent().invoke([AIMessage("Prefilled, with nothing to answer.")])
    assert isinstance(caught.value, langchain_errors.ModelInvalidRequestError)


# -- tools and tool_choice


def test_anthropic_tool_choice_dicts_map_to_the_providers() -> None:
    model = ChatClaudeAgent()
    for given, expected in [({"type": "auto"}, "auto"), ({"type": "any"}, "required"),
                            ({"type": "none"}, "none")]:  # fmt: skip
        bound: Any = model.bind_tools([Weather], tool_choice=given)
        assert bound.kwargs["tool_choice"] == expected


@pytest.mark.parametrize(
    ("one_call", "sent"),
    [
        ({"parallel_tool_calls": False}, {"type": "auto"}),
        (
            {"tool_choice": {"type": "tool", "name": "Weather", "disable_parallel_tool_use": True}},
            {"type": "tool", "name": "mcp__sf__Weather"},
        ),
        ({"tool_choice": {"type": "any", "disable_parallel_tool_use": True}}, {"type": "any"}),
    ],
    ids=["parallel_tool_calls", "tool", "any"],
)
@pytest.mark.anyio
async def test_one_call_per_turn_reaches_the_request(
    one_call: dict[str, Any], sent: dict[str, Any]
) -> None:
    async with ScriptedMessagesAPI([reply(tool_use("Weather", {"city": "Paris"}))]) as api:
        bound: Any = ChatClaudeAgent(settings=api.settings()).bind_tools([Weather], **one_call)
        assert bound.kwargs["parallel_tool_calls"] is False
        answer = await bound.ainvoke("Weather in Paris?")
    assert [call["args"] for call in answer.tool_calls] == [{"city": "Paris"}]
    assert api.requests[0].body["tool_choice"] == {**sent, "disable_parallel_tool_use": True}
    bound = ChatClaudeAgent().bind_tools([Weather], parallel_tool_calls=True)
    assert bound.kwargs["parallel_tool_calls"] is True


@pytest.mark.parametrize(
    "server_tool",
    [
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
        {"type": "bash_20250124", "name": "bash"},
        {"type": "code_execution_20250522", "name": "code_execution"},
    ],
)
def test_server_and_built_in_tools_are_refused(server_tool: dict[str, Any]) -> None:
    with pytest.raises(UnsupportedRequestError, match="server or built-in tool"):
        ChatClaudeAgent().bind_tools([Weather, server_tool])


def test_bind_tools_strict_marks_every_tool_strict() -> None:
    # `strict: true` in a tool dict: tests/unit/test_tool_rules.py, the same on every door.
    bound = ChatClaudeAgent().bind_tools([Weather], strict=True)
    assert [t["strict"] for t in bound.kwargs["tools"]] == [True]  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_tools_given_to_invoke_or_bind_are_converted_like_bind_tools() -> None:
    script = [reply(text("ok")), reply(text("ok"))]
    async with ScriptedMessagesAPI(script) as api:
        chat = ChatClaudeAgent(settings=api.settings())
        await chat.ainvoke("Weather?", tools=[Weather])
        await chat.bind(tools=[WEATHER_OPENAI]).ainvoke("Weather?")
    for request in api.requests:
        assert request.tool_names == ["mcp__sf__Weather"]
        assert request.tools[0]["input_schema"]["properties"] == {"city": {"type": "string"}}


# -- call options


@pytest.mark.parametrize(
    ("option", "problem"),
    [
        ("seed", "seed is not supported: the Messages API has no such setting"),
        ("service_tier", "service_tier is not supported: the Claude Code CLI cannot choose"),
        ("extra_headers", "extra_headers is not supported: the Claude Code CLI makes the API"),
        ("frobnicate", "unknown option 'frobnicate'; ChatClaudeAgent calls take"),
    ],
)
@pytest.mark.anyio
async def test_invoke_options_the_cli_cannot_honour_fail_before_any_request(
    option: str, problem: str
) -> None:
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        chat = ChatClaudeAgent(settings=api.settings())
        with pytest.raises(UnsupportedRequestError, match=problem):
            await chat.ainvoke("hi", **{option: 0.5})
    assert api.requests == []


@pytest.mark.anyio
async def test_chat_anthropic_thinking_dicts_reach_the_request() -> None:
    script = [reply(text("ok")), reply(text("ok"))]
    async with ScriptedMessagesAPI(script) as api:
        budget = ChatClaudeAgent(
            settings=api.settings(warm_processes=0),
            model="claude-sonnet-4-5",
            thinking={"type": "enabled", "budget_tokens": 2048},
        )
        assert budget.thinking == 2048
        await budget.ainvoke("hi")
        chat = ChatClaudeAgent(settings=api.settings(warm_processes=0))
        await chat.ainvoke("hi", thinking={"type": "adaptive"})
    sent_budget = api.requests[0].body["thinking"]
    assert (sent_budget["type"], sent_budget["budget_tokens"]) == ("enabled", 2048)
    assert api.requests[1].body["thinking"]["type"] == "adaptive"
    assert ChatClaudeAgent(thinking={"type": "disabled"}).thinking == "disabled"
    with pytest.raises(ValidationError, match=r"thinking\.budget_tokens: required"):
        ChatClaudeAgent(thinking={"type": "enabled"})


def test_a_provider_and_settings_together_are_refused() -> None:
    with pytest.raises(ValidationError, match="a provider or settings, not both"):
        ChatClaudeAgent(provider=ClaudeAgentProvider(), settings=ClaudeAgentProvider().settings)


@pytest.mark.anyio
async def test_sampling_and_stop_of_the_model_and_the_call_reach_the_request() -> None:
    script = [reply(text("ok"))] * 4
    async with ScriptedMessagesAPI(script) as api:
        chat = ChatClaudeAgent(
            settings=api.settings(warm_processes=0),
            temperature=0.2,
            top_p=0.9,
            top_k=5,
            stop=["END"],
        )
        await chat.ainvoke("hi")
        # A call's own values hold over the model's; its `stop` replaces the model's (as
        # ChatAnthropic's does) and joins its `stop_sequences`.
        await chat.ainvoke("hi", temperature=0.7, top_k=2, stop=["Observation:"])
        chunks = chat.bind(top_p=0.5, stop_sequences=["A"]).astream("hi", stop=["B"])
        assert "".join([chunk.text async for chunk in chunks]) == "ok"
        await ChatClaudeAgent(settings=api.settings(), stop_sequences=["C"]).ainvoke("hi")
    sent = [
        {k: r.body.get(k) for k in ("temperature", "top_p", "top_k", "stop_sequences")}
        for r in api.requests
    ]
    assert sent == [
        {"temperature": 0.2, "top_p": 0.9, "top_k": 5, "stop_sequences": ["END"]},
        {"temperature": 0.7, "top_p": 0.9, "top_k": 2, "stop_sequences": ["Observation:"]},
        {"temperature": 0.2, "top_p": 0.5, "top_k": 5, "stop_sequences": ["A", "B"]},
        {"temperature": None, "top_p": None, "top_k": None, "stop_sequences": ["C"]},
    ]
    params = chat._get_ls_params(stop=["B"])
    assert (params.get("ls_temperature"), params.get("ls_stop")) == (0.2, ["B"])


@pytest.mark.parametrize("value", ["0.5", True, float("inf")])
def test_a_sampling_value_that_is_no_number_is_refused_at_construction(value: Any) -> None:
    with pytest.raises(ValidationError, match="temperature"):
        ChatClaudeAgent(temperature=value)


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
@pytest.mark.anyio
async def test_an_api_refusal_of_a_setting_is_langchains_invalid_request_error(
    stream: bool,
) -> None:
    refusal = http_error(400, "temperature is deprecated for this model.")
    async with ScriptedMessagesAPI(lambda request: refusal) as api:  # (tried thrice by the CLI)
        chat = ChatClaudeAgent(settings=api.settings(model="claude-opus-5-5"), temperature=0.3)
        with pytest.raises(UnsupportedSettingError, match="deprecated for this model") as caught:
            if stream:
                async for _ in chat.astream("Weather?"):
                    pass
            else:
                await chat.ainvoke("Weather?")
    assert isinstance(caught.value, langchain_errors.ModelInvalidRequestError)
    assert (caught.value.setting, caught.value.model) == ("temperature", "claude-opus-5-5")
    assert api.requests[0].body["temperature"] == 0.3


@pytest.mark.anyio
async def test_api_key_is_the_clis_key() -> None:
    async with ScriptedMessagesAPI([reply(text("ok"))] * 2) as api:
        keyless = api.settings()
        keyless = keyless.model_copy(
            update={"env": {k: v for k, v in keyless.env.items() if k != "ANTHROPIC_API_KEY"}}
        )
        await ChatClaudeAgent(settings=keyless, api_key="sk-ant-from-langchain").ainvoke("hi")
        await ChatClaudeAgent(settings=keyless, anthropic_api_key="sk-ant-other").ainvoke("hi")
    assert [r.headers.get("x-api-key") for r in api.requests] == [
        "sk-ant-from-langchain",
        "sk-ant-other",
    ]


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"provider": ClaudeAgentProvider()}, "a provider or an api_key, not both"),
        ({"settings": ProviderSettings(env={"ANTHROPIC_API_KEY": "sk-ant-other"})},
         r"api_key and settings.env\['ANTHROPIC_API_KEY'\] are two different keys"),
    ],
)  # fmt: skip
def test_an_api_key_that_would_be_ignored_is_refused(
    arguments: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ValidationError, match=problem) as caught:
        ChatClaudeAgent(api_key="sk-ant-secret", **arguments)
    assert "sk-ant-secret" not in str(caught.value)


# -- messages in


def test_a_system_message_after_the_start_is_refused() -> None:
    assert _provider_messages([SystemMessage("A"), SystemMessage("B"), HumanMessage("q")])[0][
        :2
    ] == [
        req.SystemMessage("A"),
        req.SystemMessage("B"),
    ]
    history = [SystemMessage("A"), HumanMessage("q1"), AIMessage("a1"), SystemMessage("French")]
    with pytest.raises(InvalidMessagesError, match=r"message 3 .*system messages must come first"):
        _provider_messages([*history, HumanMessage("q2")])


@pytest.mark.anyio
@pytest.mark.parametrize(
    "image",
    [
        {"type": "image", "base64": PNG, "mime_type": "image/png"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
    ],
    ids=["v1", "anthropic", "openai"],
)
async def test_an_image_in_a_tool_message_reaches_the_model_inside_the_result(
    image: dict[str, Any],
) -> None:
    call = {"name": "Weather", "args": {"city": "Paris"}, "id": "toolu_01"}
    history = [
        HumanMessage("Draw."),
        AIMessage("", tool_calls=[call]),
        ToolMessage([{"type": "text", "text": "chart:"}, image], tool_call_id="toolu_01"),
    ]
    async with ScriptedMessagesAPI([reply(text("A bar chart."))]) as api:
        chat = ChatClaudeAgent(settings=api.settings(warm_processes=0))
        await chat.bind_tools([Weather]).ainvoke(history)
    (result,) = api.requests[0].blocks("tool_result")
    assert result["content"] == [
        {"type": "text", "text": "chart:"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
    ]


@pytest.mark.anyio
async def test_text_parts_of_tool_and_system_messages_reach_the_model_apart() -> None:
    """A tool that returned a list of strings reached the model as "report.pdfnotes.txt", and a
    SystemMessage's blocks were glued the same way."""
    call = {"name": "Weather", "args": {"city": "Paris"}, "id": "toolu_01"}
    history = [
        SystemMessage([{"type": "text", "text": "Be brief."}, "Answer in French."]),
        HumanMessage("Files?"),
        AIMessage("", tool_calls=[call]),
        ToolMessage(["report.pdf", "notes.txt"], tool_call_id="toolu_01"),
    ]
    async with ScriptedMessagesAPI([reply(text("Deux fichiers."))]) as api:
        chat = ChatClaudeAgent(settings=api.settings(warm_processes=0))
        await chat.bind_tools([Weather]).ainvoke(history)
    (result,) = api.requests[0].blocks("tool_result")
    assert result["content"] == [
        {"type": "text", "text": "report.pdf"},
        {"type": "text", "text": "notes.txt"},
    ]
    system = [block["text"] for block in api.requests[0].body["system"]]
    assert "Be brief.\nAnswer in French." in system


def test_a_file_in_a_tool_message_is_refused() -> None:
    call = {"name": "chart", "args": {}, "id": "toolu_01"}
    pdf = {"type": "file", "base64": PNG, "mime_type": "application/pdf"}
    history = [HumanMessage("Draw."), AIMessage("", tool_calls=[call]),
               ToolMessage([pdf], tool_call_id="toolu_01")]  # fmt: skip
    with pytest.raises(InvalidMessagesError, match=r"message 2 .*file blocks cannot be sent"):
        _provider_messages(history)


@pytest.mark.parametrize(
    "image",
    [
        {"type": "image", "file_id": "file_01"},
        {"type": "image", "source": {"type": "file", "file_id": "file_01"}},
    ],
)
def test_an_image_by_file_id_is_refused_clearly(image: dict[str, Any]) -> None:
    with pytest.raises(InvalidMessagesError, match="images by file id"):
        _provider_messages([HumanMessage([{"type": "text", "text": "Look:"}, image])])


@pytest.mark.anyio
async def test_tool_use_blocks_without_tool_calls_are_replayed_as_calls() -> None:
    handmade = AIMessage(
        [{"type": "tool_use", "id": "toolu_07", "name": "Weather", "input": {"city": "Paris"}}]
    )
    assert handmade.tool_calls == []
    history: list[BaseMessage] = [
        HumanMessage("Weather in Paris?"),
        handmade,
        ToolMessage("sunny", tool_call_id="toolu_07"),
    ]
    async with ScriptedMessagesAPI([reply(text("Sunny."))]) as api:
        await ChatClaudeAgent(settings=api.settings()).bind_tools([Weather]).ainvoke(history)
    (use,) = api.requests[0].tool_uses()
    assert (use["id"], use["input"]) == ("toolu_07", {"city": "Paris"})
    assert [r["tool_use_id"] for r in api.requests[0].tool_results()] == ["toolu_07"]


# -- results out, and back in


SIGNED_CALL = [
    reply(thinking("Paris, then.", signature="SIG-1"), tool_use("Weather", {"city": "Paris"}))
]


@pytest.mark.anyio
async def test_a_streamed_reply_replays_its_signed_thinking() -> None:
    async with ScriptedMessagesAPI(SIGNED_CALL) as api:
        chat = ChatClaudeAgent(settings=api.settings()).bind_tools([Weather])
        full: AIMessageChunk | None = None
        async for chunk in chat.astream("Weather in Paris?"):
            assert isinstance(chunk, AIMessageChunk)
            full = chunk if full is None else full + chunk
    assert full is not None and [c["args"] for c in full.tool_calls] == [{"city": "Paris"}]
    api, answer = await replay(full)
    assert assistant_blocks(api.requests[0].body) == [("thinking", "SIG-1"), ("tool_use", None)]
    assert "warnings" not in answer.response_metadata, "nothing was flattened"


@pytest.mark.parametrize("output_version", ["v0", "v1"])
@pytest.mark.anyio
async def test_a_reply_replays_with_its_signed_thinking_in_either_output_version(
    output_version: str,
) -> None:
    async with ScriptedMessagesAPI(SIGNED_CALL) as api:
        chat = ChatClaudeAgent(settings=api.settings(), output_version=output_version)
        message = await chat.bind_tools([Weather]).ainvoke("Weather in Paris?")
    api, _ = await replay(message, output_version=output_version)
    assert assistant_blocks(api.requests[0].body) == [("thinking", "SIG-1"), ("tool_use", None)]


@pytest.mark.anyio
async def test_usage_reaches_the_usage_callback_and_content_blocks_show_reasoning_once() -> None:
    script = [reply(thinking("Deep thought."), text("42"))]
    async with ScriptedMessagesAPI(script) as api:
        with get_usage_metadata_callback() as callback:
            answer = await ChatClaudeAgent(settings=api.settings()).ainvoke("The answer?")
    model = api.requests[0].body["model"]
    assert answer.response_metadata["model_name"] == model
    assert answer.response_metadata["model_provider"] == "anthropic"
    assert callback.usage_metadata == {model: answer.usage_metadata}
    assert [b["type"] for b in answer.content_blocks] == ["reasoning", "text"]


@pytest.mark.anyio
async def test_a_streamed_text_reply_streams_plain_strings_and_names_its_model() -> None:
    async with ScriptedMessagesAPI([reply(text("A fairly long streamed answer."))]) as api:
        chat = ChatClaudeAgent(settings=api.settings())
        chunks = [chunk async for chunk in chat.astream("Say something.")]
    assert all(isinstance(c.content, str) for c in chunks)
    assert "".join(str(c.content) for c in chunks) == "A fairly long streamed answer."
    assert chunks[-1].response_metadata["model_name"] == api.requests[0].body["model"]


@pytest.mark.anyio
async def test_with_tools_bound_text_before_a_call_is_kept_in_the_streamed_message() -> None:
    script = [reply(text("Let me check."), tool_use("Weather", {"city": "Paris"}))]
    async with ScriptedMessagesAPI(script) as api:
        chat = ChatClaudeAgent(settings=api.settings()).bind_tools([WEATHER_OPENAI])
        chunks = [chunk async for chunk in chat.astream("Weather in Paris?")]
    full = chunks[0]
    for chunk in chunks[1:]:
        full = full + chunk
    # Blocks from the first chunk, as ChatAnthropic streams with tools bound: a plain string
    # before a block would be left out of `.content_blocks`.
    assert [b["type"] for b in full.content_blocks] == ["text", "tool_call"]
    assert full.content_blocks[0]["text"] == "Let me check."
    assert [c["name"] for c in full.tool_calls] == ["Weather"]


INTERLEAVED_CALL = reply(
    thinking("Paris.", signature="SIG-1"),
    text("Let me check."),
    thinking("Then the weather.", signature="SIG-2"),
    tool_use("Weather", {"city": "Paris"}),
)


@pytest.mark.anyio
async def test_invoke_gives_the_blocks_in_the_order_written_as_astream_does() -> None:
    async with ScriptedMessagesAPI([INTERLEAVED_CALL, INTERLEAVED_CALL]) as api:
        chat = ChatClaudeAgent(settings=api.settings()).bind_tools([Weather])
        message = await chat.ainvoke("Weather in Paris?")
        full: AIMessageChunk | None = None
        async for chunk in chat.astream("Weather in Paris?"):
            full = chunk if full is None else full + chunk
    written = ["thinking", "text", "thinking", "tool_use"]
    assert [b["type"] for b in message.content if isinstance(b, dict)] == written
    assert full is not None
    assert [b["type"] for b in full.content if isinstance(b, dict)] == written
    api, _ = await replay(message)
    assert assistant_blocks(api.requests[0].body) == [
        ("thinking", "SIG-1"), ("text", None), ("thinking", "SIG-2"), ("tool_use", None)
    ]  # fmt: skip


REDACTED_CALL = [reply(redacted_thinking("OPAQUE-1"), tool_use("Weather", {"city": "Paris"}))]


@pytest.mark.parametrize(
    ("how", "output_version"),
    [("ainvoke", "v0"), ("ainvoke", "v1"), ("astream", "v0")],
)
@pytest.mark.anyio
async def test_redacted_thinking_comes_back_and_replays_before_the_call(
    how: str, output_version: str
) -> None:
    async with ScriptedMessagesAPI(REDACTED_CALL) as api:
        chat = ChatClaudeAgent(settings=api.settings(), output_version=output_version)
        bound = chat.bind_tools([Weather])
        if how == "ainvoke":
            message: AIMessage = await bound.ainvoke("Weather in Paris?")
        else:
            full: AIMessageChunk | None = None
            async for chunk in bound.astream("Weather in Paris?"):
                full = chunk if full is None else full + chunk
            assert full is not None
            message = full
    if output_version == "v0":
        assert message.content[0] == {"type": "redacted_thinking", "data": "OPAQUE-1"} | (
            {"index": 0} if how == "astream" else {}
        )
    api, answer = await replay(message, output_version=output_version)
    assistant = [m for m in api.requests[0].messages if m["role"] == "assistant"][-1]
    assert assistant["content"][0] == {"type": "redacted_thinking", "data": "OPAQUE-1"}
    assert [b["type"] for b in assistant["content"]] == ["redacted_thinking", "tool_use"]
    assert "warnings" not in answer.response_metadata


# -- history the Messages API cannot carry as given: sent as ChatAnthropic sends it, or loud


def texts_of(body: dict[str, Any], role: str) -> list[str]:
    """The text blocks of every `role` turn of the request, in order."""
    return [
        block["text"]
        for message in body["messages"]
        if message["role"] == role
        for block in (
            [{"type": "text", "text": message["content"]}]
            if isinstance(message["content"], str)
            else message["content"]
        )
        if block.get("type") == "text"
    ]


def warning_codes(message: BaseMessage) -> list[str]:
    return [w["code"] for w in message.response_metadata.get("warnings", [])]


async def ask(history: list[BaseMessage]) -> tuple[ScriptedMessagesAPI, AIMessage]:
    async with ScriptedMessagesAPI([reply(text("Sunny."))]) as api:
        answer = (
            await ChatClaudeAgent(settings=api.settings()).bind_tools([Weather]).ainvoke(history)
        )
    return api, answer


def invalid_call(args: str | None, call_id: str | None = "toolu_bad") -> dict[str, Any]:
    """An `AIMessage.invalid_tool_calls` entry, as LangChain makes one from unparsable args."""
    return {"type": "invalid_tool_call", "name": "Weather", "args": args, "id": call_id,
            "error": "Function Weather arguments are not valid JSON."}  # fmt: skip


@pytest.mark.parametrize("kept_in", ["invalid_tool_calls", "content", "both"])
@pytest.mark.anyio
async def test_an_invalid_tool_call_is_sent_with_the_tool_message_answering_it(
    kept_in: str,
) -> None:
    # `output_version="v1"` messages hold it in both: an `invalid_tool_call` content block too.
    call = invalid_call('{"city": "Paris"}')
    message = AIMessage(
        [call] if kept_in != "invalid_tool_calls" else "",
        invalid_tool_calls=[call] if kept_in != "content" else [],
    )
    history: list[BaseMessage] = [
        HumanMessage("Weather in Paris?"),
        message,
        ToolMessage("Error: not valid JSON, try again", tool_call_id="toolu_bad", status="error"),
    ]
    api, answer = await ask(history)
    (use,) = api.requests[0].tool_uses()
    assert (use["id"], use["input"]) == ("toolu_bad", {"city": "Paris"})
    (result,) = api.requests[0].results()
    assert (result.tool_use_id, result.is_error) == ("toolu_bad", True)
    assert "warnings" not in answer.response_metadata


@pytest.mark.anyio
async def test_an_invalid_tool_calls_unparsable_arguments_are_sent_as_none_with_a_warning() -> None:
    history: list[BaseMessage] = [
        HumanMessage("Weather in Paris?"),
        AIMessage("", invalid_tool_calls=[invalid_call('{"city": "Par')]),
        ToolMessage("Error: not valid JSON, try again", tool_call_id="toolu_bad", status="error"),
    ]
    with pytest.warns(UserWarning, match=r"message 1 .*'Weather'.*\{\"city\": \"Par.*\(tool-call"):
        api, answer = await ask(history)
    (use,) = api.requests[0].tool_uses()
    assert (use["id"], use["input"]) == ("toolu_bad", {})  # as ChatAnthropic sends it
    assert warning_codes(answer) == ["tool-call-arguments-dropped"]


def test_invalid_tool_call_arguments_nested_too_deeply_are_sent_as_none_with_a_warning() -> None:
    deep = "[" * 100_000 + "]" * 100_000  # too deep for the JSON reader, not only unparsable
    history: list[BaseMessage] = [
        HumanMessage("Weather in Paris?"),
        AIMessage("", invalid_tool_calls=[invalid_call(deep)]),
        ToolMessage("Error: not valid JSON, try again", tool_call_id="toolu_bad", status="error"),
    ]
    converted, lost = _provider_messages(history)
    assert converted[1] == req.AssistantMessage((req.ToolCall("toolu_bad", "Weather", {}),))
    assert [w.code for w in lost] == ["tool-call-arguments-dropped"]


@pytest.mark.anyio
async def test_an_invalid_tool_call_no_tool_message_answers_is_refused_before_any_request() -> None:
    history: list[BaseMessage] = [
        HumanMessage("Weather in Paris?"),
        AIMessage("", invalid_tool_calls=[invalid_call('{"city": "Par')]),
        HumanMessage("Well?"),
    ]
    async with ScriptedMessagesAPI([reply(text("Sunny."))]) as api:
        chat = ChatClaudeAgent(settings=api.settings()).bind_tools([Weather])
        with pytest.raises(
            InvalidMessagesError,
            match=r"message 1 .*invalid tool call 'Weather' \(toolu_bad\) has no ToolMessage",
        ):
            await chat.ainvoke(history)
    assert api.requests == []


@pytest.mark.parametrize(("call_id", "name"), [(None, "Weather"), ("toolu_bad", None)])
def test_an_invalid_tool_call_without_an_id_or_name_is_refused(
    call_id: str | None, name: str | None
) -> None:
    call = {**invalid_call("{}", call_id), "name": name}
    history = [HumanMessage("Weather?"), AIMessage("", invalid_tool_calls=[call])]
    with pytest.raises(InvalidMessagesError, match=r"message 1 .*needs an id and a name"):
        _provider_messages([*history, HumanMessage("Well?")])


@pytest.mark.parametrize("empty", ["", "   ", [{"type": "text", "text": ""}]])
@pytest.mark.anyio
async def test_an_empty_assistant_message_in_the_history_is_left_out_with_a_warning(
    empty: Any,
) -> None:
    history: list[BaseMessage] = [HumanMessage("Hello?"), AIMessage(empty), HumanMessage("Hi?")]
    with pytest.warns(
        UserWarning,
        match=r"message 1 \(AIMessage\): .*no content.*left out.*\(empty-turn-dropped\)",
    ):
        api, answer = await ask(history)
    assert texts_of(api.requests[0].body, "assistant") == []
    assert {"Hello?", "Hi?"} <= set(texts_of(api.requests[0].body, "user"))
    assert warning_codes(answer) == ["empty-turn-dropped"]
    # Last, it is the empty prefill ChatAnthropic sends, which asks for nothing: no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        api, answer = await ask([HumanMessage("Hello?"), AIMessage(empty)])
    assert texts_of(api.requests[0].body, "assistant") == []
    assert "warnings" not in answer.response_metadata


@pytest.mark.anyio
async def test_different_speaker_names_draw_a_warning_since_the_api_has_no_names() -> None:
    history: list[BaseMessage] = [
        HumanMessage("I'm cold.", name="alice"),
        AIMessage("Close the window."),
        HumanMessage("I'm hot.", name="bob"),
    ]
    with pytest.warns(UserWarning, match=r"'alice', 'bob'.*who said what.*\(names-dropped\)"):
        api, answer = await ask(history)
    assert texts_of(api.requests[0].body, "user")[-1] == "I'm hot."
    assert warning_codes(answer) == ["names-dropped"]
    # One speaker per role loses nothing the role does not say: no warning, as ChatAnthropic.
    _, answer = await ask([HumanMessage("Hi.", name="alice"), AIMessage("Hello.", name="bot"),
                           HumanMessage("Weather?", name="alice")])  # fmt: skip
    assert "warnings" not in answer.response_metadata


@pytest.mark.anyio
async def test_what_the_history_lost_is_reported_on_the_streamed_reply_too() -> None:
    history: list[BaseMessage] = [HumanMessage("Hello?"), AIMessage(""), HumanMessage("Hi?")]
    async with ScriptedMessagesAPI([reply(text("Hello."))]) as api:
        chat = ChatClaudeAgent(settings=api.settings())
        with pytest.warns(UserWarning, match=r"\(empty-turn-dropped\)"):
            chunks = [chunk async for chunk in chat.astream(history)]
    assert warning_codes(chunks[-1]) == ["empty-turn-dropped"]
    assert "".join(str(c.content) for c in chunks) == "Hello."


@pytest.mark.parametrize(
    "refused",
    [
        AIMessage("", additional_kwargs={"refusal": "I can't help with that."}),
        AIMessage([{"type": "refusal", "refusal": "I can't help with that."}]),
    ],
    ids=["additional_kwargs", "block"],
)
@pytest.mark.anyio
async def test_an_assistant_refusal_in_the_history_reaches_the_model_as_its_text(
    refused: AIMessage,
) -> None:
    # ChatOpenAI's refusals; the gateway sends the OpenAI format's the same way.
    history: list[BaseMessage] = [HumanMessage("Help me."), refused, HumanMessage("Why not?")]
    api, answer = await ask(history)
    assert texts_of(api.requests[0].body, "assistant") == ["I can't help with that."]
    assert "warnings" not in answer.response_metadata


@pytest.mark.parametrize(
    "cited",
    [
        {"type": "text", "text": "Paris.", "citations": [
            {"type": "char_location", "cited_text": "Paris is the capital.",
             "document_index": 0, "start_char_index": 0, "end_char_index": 21}]},
        {"type": "text", "text": "Paris.", "annotations": [
            {"type": "citation", "cited_text": "Paris is the capital."}]},
    ],
    ids=["anthropic", "v1"],
)  # fmt: skip
@pytest.mark.anyio
async def test_citations_on_replayed_text_draw_a_warning(cited: dict[str, Any]) -> None:
    history: list[BaseMessage] = [
        HumanMessage("Capital?"),
        AIMessage([cited]),
        HumanMessage("Sure?"),
    ]
    with pytest.warns(UserWarning, match=r"message 1 .*citations.*\(citations-dropped\)"):
        api, answer = await ask(history)
    assert texts_of(api.requests[0].body, "assistant") == ["Paris."]
    assert warning_codes(answer) == ["citations-dropped"]


@pytest.mark.anyio
async def test_a_tool_message_of_tool_result_blocks_is_sent_as_those_results() -> None:
    # ChatAnthropic sends a ToolMessage whose content is tool_result blocks as those blocks.
    history: list[BaseMessage] = [
        HumanMessage("Weather in Paris?"),
        AIMessage("", tool_calls=[{"name": "Weather", "args": {"city": "Paris"}, "id": "toolu_1"}]),
        ToolMessage(
            [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}],
            tool_call_id="toolu_1",
        ),
    ]
    api, _ = await ask(history)
    (result,) = api.requests[0].results()
    assert (result.tool_use_id, result.text, result.is_error) == ("toolu_1", "sunny", False)


def test_a_legacy_function_call_is_refused() -> None:
    legacy = AIMessage(
        "", additional_kwargs={"function_call": {"name": "Weather", "arguments": "{}"}}
    )
    with pytest.raises(InvalidMessagesError, match=r"message 1 .*function_call.*tool_calls"):
        _provider_messages([HumanMessage("Weather?"), legacy, HumanMessage("Well?")])


@pytest.mark.anyio
async def test_gemini_calls_repeated_as_a_function_call_replay_once_from_tool_calls() -> None:
    # ChatGoogleGenerativeAI repeats its call in `additional_kwargs["function_call"]` next to
    # `tool_calls`: a history moved over from Gemini was refused as a legacy function call.
    gemini = AIMessage(
        "",
        additional_kwargs={"function_call": {"name": "Weather", "arguments": '{"city": "Paris"}'}},
        tool_calls=[{"name": "Weather", "args": {"city": "Paris"}, "id": "call_1"}],
        response_metadata={"model_provider": "google_genai"},
    )
    history: list[BaseMessage] = [
        HumanMessage("Weather?"), gemini, ToolMessage("sunny", tool_call_id="call_1")
    ]  # fmt: skip
    api, _ = await ask(history)
    (use,) = api.requests[0].tool_uses()
    assert (use["id"], use["input"]) == ("call_1", {"city": "Paris"})
    (result,) = api.requests[0].results()
    assert (result.tool_use_id, result.text) == ("call_1", "sunny")


@pytest.mark.anyio
async def test_a_flattened_history_warning_is_also_a_python_warning() -> None:
    unsigned = AIMessage([{"type": "reasoning", "reasoning": "Paris is in France."},
                          {"type": "text", "text": "Paris."}])  # fmt: skip
    history: list[BaseMessage] = [HumanMessage("Capital?"), unsigned, HumanMessage("Sure?")]
    with pytest.warns(UserWarning, match=r"reasoning without a signature.*\(history-flattened\)"):
        _, answer = await ask(history)
    assert warning_codes(answer) == ["history-flattened"]


@pytest.mark.parametrize(
    "block",
    [
        {"type": "thinking", "thinking": "France's capital.", "signature": "gemini-signature"},
        {"type": "reasoning", "reasoning": "France's capital.",
         "extras": {"signature": "gemini-signature"}},
    ],
    ids=["v0", "v1"],
)  # fmt: skip
@pytest.mark.anyio
async def test_thinking_another_provider_signed_is_replayed_as_text_not_as_claudes(
    block: dict[str, Any],
) -> None:
    # ChatGoogleGenerativeAI's thinking has the shape of Anthropic's, with Gemini's thought
    # signature: sent as Claude's signed thinking, the Messages API refuses the request
    # (an invalid signature), so a conversation moved over from Gemini failed.
    gemini = AIMessage(
        [block, {"type": "text", "text": "Paris."}],
        response_metadata={"model_provider": "google_genai"},
    )
    history: list[BaseMessage] = [HumanMessage("Capital?"), gemini, HumanMessage("Sure?")]
    with pytest.warns(UserWarning, match=r"\(history-flattened\)"):
        api, answer = await ask(history)
    assert assistant_blocks(api.requests[0].body) == [("text", None), ("text", None)]
    assistant = texts_of(api.requests[0].body, "assistant")
    assert assistant == ["<reasoning>France's capital.</reasoning>", "Paris."]
    assert warning_codes(answer) == ["history-flattened"]


@pytest.mark.parametrize("in_tool_calls", [True, False], ids=["also-in-tool_calls", "only-block"])
@pytest.mark.anyio
async def test_chat_openais_function_call_blocks_replay_as_the_calls_they_are(
    in_tool_calls: bool,
) -> None:
    # ChatOpenAI (Responses API) keeps its calls in the content as `function_call` blocks (and
    # in `tool_calls`): a history moved over from it was refused as holding no tool call.
    call = {"type": "function_call", "name": "Weather", "arguments": '{"city": "Paris"}',
            "call_id": "call_1", "id": "fc_1"}  # fmt: skip
    calls = (
        [{"name": "Weather", "args": {"city": "Paris"}, "id": "call_1"}] if in_tool_calls else []
    )
    openai = AIMessage(
        [{"type": "reasoning", "id": "rs_1", "summary": []}, call],
        tool_calls=calls,
        response_metadata={"model_provider": "openai"},
    )
    history: list[BaseMessage] = [
        HumanMessage("Weather?"), openai, ToolMessage("sunny", tool_call_id="call_1")
    ]  # fmt: skip
    api, _ = await ask(history)
    (use,) = api.requests[0].tool_uses()
    assert (use["id"], use["name"], use["input"]) == (
        "call_1",
        "mcp__sf__Weather",
        {"city": "Paris"},
    )
    (result,) = api.requests[0].results()
    assert (result.tool_use_id, result.text) == ("call_1", "sunny")


@pytest.mark.anyio
async def test_chat_openais_reasoning_summary_is_replayed_as_text_with_a_warning() -> None:
    # ChatOpenAI (Responses API) keeps a reasoning block's text in its `summary` parts, one
    # block per part in `.content_blocks`: it was replayed as an empty `<reasoning></reasoning>`.
    summary = [{"type": "summary_text", "text": "France's capital."},
               {"type": "summary_text", "text": "Paris, then."}]  # fmt: skip
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": summary, "encrypted_content": "g"}
    openai = AIMessage([reasoning, {"type": "text", "text": "Paris."}])
    history: list[BaseMessage] = [HumanMessage("Capital?"), openai, HumanMessage("Sure?")]
    with pytest.warns(UserWarning, match=r"\(history-flattened\)"):
        api, answer = await ask(history)
    assert texts_of(api.requests[0].body, "assistant") == [
        "<reasoning>France's capital.</reasoning>",
        "<reasoning>Paris, then.</reasoning>",
        "Paris.",
    ]
    assert warning_codes(answer) == ["history-flattened"] * 2  # one per block


@pytest.mark.anyio
async def test_reasoning_content_of_another_provider_is_replayed_as_text_with_a_warning() -> None:
    # ChatDeepSeek (and others) keep the reasoning in additional_kwargs, not in the content.
    deepseek = AIMessage("Paris.", additional_kwargs={"reasoning_content": "France's capital."})
    history: list[BaseMessage] = [HumanMessage("Capital?"), deepseek, HumanMessage("Sure?")]
    with pytest.warns(UserWarning, match=r"\(history-flattened\)"):
        api, answer = await ask(history)
    assistant = texts_of(api.requests[0].body, "assistant")
    assert assistant == ["<reasoning>France's capital.</reasoning>", "Paris."]
    assert warning_codes(answer) == ["history-flattened"]
    # Ours repeats the signed thinking of the content: that is replayed once, signed.
    async with ScriptedMessagesAPI(SIGNED_CALL) as api:
        message = await ChatClaudeAgent(settings=api.settings()).bind_tools([Weather]).ainvoke("?")
    assert message.additional_kwargs["reasoning_content"] == "Paris, then."
    api, answer = await replay(message)
    assert assistant_blocks(api.requests[0].body) == [("thinking", "SIG-1"), ("tool_use", None)]


# -- the LLM cache keys on everything that shapes the answer


@pytest.mark.anyio
async def test_models_asked_differently_do_not_share_llm_cache_entries() -> None:
    cache = InMemoryCache()
    script = [reply(text("Short.")), reply(text("Longer.")), reply(text("Bonjour."))]
    async with ScriptedMessagesAPI(script) as api:
        settings = api.settings(warm_processes=0)
        short = ChatClaudeAgent(settings=settings, max_tokens=100, cache=cache)
        longer = ChatClaudeAgent(settings=settings, max_tokens=2000, cache=cache)
        same = ChatClaudeAgent(settings=settings, max_tokens=100, cache=cache)
        french = ChatClaudeAgent(
            settings=api.settings(warm_processes=0, system_prompt="Answer in French."),
            max_tokens=100,
            cache=cache,
        )
        answers = [(await m.ainvoke("Hi")).content for m in (short, longer, same, french)]
    assert answers == ["Short.", "Longer.", "Short.", "Bonjour."], "`same` is served the cache"
    assert [r.body["max_tokens"] for r in api.requests] == [100, 2000, 100]
    assert json.dumps(short._identifying_params)  # also traced: plain JSON


# -- image_url fields


@pytest.mark.parametrize(
    ("image_url", "problem"),
    [
        ({"url": f"data:image/png;base64,{PNG}", "detail": "low"}, "no low-detail mode"),
        ({"url": f"data:image/png;base64,{PNG}", "format": "png"}, r"field\(s\) 'format'"),
    ],
    ids=["detail-low", "unknown-field"],
)
@pytest.mark.anyio
async def test_image_url_fields_that_cannot_be_honoured_are_refused_before_any_request(
    image_url: dict[str, Any], problem: str
) -> None:
    # As the gateway's OpenAI format refuses them.
    message = HumanMessage([{"type": "text", "text": "What?"},
                            {"type": "image_url", "image_url": image_url}])  # fmt: skip
    async with ScriptedMessagesAPI([reply(text("A dot."))]) as api:
        chat = ChatClaudeAgent(settings=api.settings(warm_processes=0))
        with pytest.raises(InvalidMessagesError, match=rf"message 0 .*{problem}"):
            await chat.ainvoke([message])
        high = {**image_url, "detail": "high"}
        high.pop("format", None)
        await chat.ainvoke([HumanMessage([{"type": "image_url", "image_url": high}])])
    (request,) = api.requests
    (image,) = request.blocks("image")
    assert image["source"]["data"].rstrip("=") == PNG  # the high-detail image was sent


# -- tool fields the CLI cannot send


@tool(extras={"defer_loading": True, "cache_control": {"type": "ephemeral"}})
def deferred_weather(city: str) -> str:
    """Get the weather of a city."""
    return "sunny"


ANTHROPIC_TOOL = {
    "name": "Weather",
    "description": "Get the weather of a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


@pytest.mark.parametrize(
    ("extra_tool", "problem"),
    [
        # A BaseTool's extras, which convert_to_openai_tool would drop; the fields of tool
        # dicts, by shape: tests/unit/test_tool_rules.py, the same on every door.
        (deferred_weather, r"defer_loading \(tool 'deferred_weather'\) cannot be honoured"),
        ({**WEATHER_OPENAI, "function": {**WEATHER_OPENAI["function"], "defer_loading": True}},
         r"function.defer_loading \(tool 'Weather'\) cannot be honoured"),
    ],
    ids=["base-tool-extras", "openai"],
)  # fmt: skip
@pytest.mark.anyio
async def test_tool_fields_the_cli_cannot_send_are_refused_before_any_request(
    extra_tool: Any, problem: str
) -> None:
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        chat = ChatClaudeAgent(settings=api.settings(warm_processes=0))
        with pytest.raises(UnsupportedRequestError, match=problem):
            chat.bind_tools([extra_tool])
        with pytest.raises(UnsupportedRequestError, match=problem):
            await chat.ainvoke("Weather?", tools=[extra_tool])
        # cache_control alone is ignored (the CLI places its own cache breakpoints).
        cached = {**ANTHROPIC_TOOL, "cache_control": {"type": "ephemeral"}}
        await chat.bind_tools([cached]).ainvoke("Weather?")
    (request,) = api.requests
    assert request.tool_names == ["mcp__sf__Weather"]


# -- typed blocks in tool messages


def tool_history(content: Any) -> list[BaseMessage]:
    call = {"name": "Weather", "args": {"city": "Paris"}, "id": "toolu_01"}
    return [HumanMessage("Weather in Paris?"), AIMessage("", tool_calls=[call]),
            ToolMessage(content, tool_call_id="toolu_01")]  # fmt: skip


@pytest.mark.anyio
async def test_a_text_plain_block_in_a_tool_message_is_sent_as_its_text() -> None:
    plain = {"type": "text-plain", "text": "sunny", "mime_type": "text/plain"}
    api, answer = await ask(tool_history([plain]))
    (result,) = api.requests[0].results()
    assert result.text == "sunny"
    assert "warnings" not in answer.response_metadata


@pytest.mark.parametrize(
    "block",
    [
        {"type": "search_result", "source": "https://example.com", "title": "Weather",
         "content": [{"type": "text", "text": "sunny"}]},
        {"type": "tool_reference", "tool_name": "Weather"},
        {"type": "text-plain", "url": "https://example.com/w.txt", "mime_type": "text/plain"},
    ],
    ids=["search_result", "tool_reference", "text-plain-by-url"],
)  # fmt: skip
@pytest.mark.anyio
async def test_content_blocks_a_tool_result_cannot_carry_are_refused_not_sent_as_json(
    block: dict[str, Any],
) -> None:
    async with ScriptedMessagesAPI([reply(text("Sunny."))]) as api:
        chat = ChatClaudeAgent(settings=api.settings(warm_processes=0)).bind_tools([Weather])
        with pytest.raises(InvalidMessagesError, match=rf"message 2 .*{block['type']} block"):
            await chat.ainvoke(tool_history([block]))
        await chat.ainvoke(tool_history([{"city": "Paris", "sky": "sunny"}]))  # plain data
    (request,) = api.requests
    (result,) = request.results()
    assert json.loads(result.text) == [{"city": "Paris", "sky": "sunny"}]


# -- citations on user text


@pytest.mark.anyio
async def test_citations_on_user_text_draw_a_warning() -> None:
    cited = {"type": "text", "text": "Paris is the capital.", "annotations": [
        {"type": "citation", "cited_text": "Paris is the capital of France."}]}  # fmt: skip
    history: list[BaseMessage] = [HumanMessage([cited])]
    with pytest.warns(UserWarning, match=r"message 0 .*citations.*\(citations-dropped\)"):
        api, answer = await ask(history)
    assert texts_of(api.requests[0].body, "user") == ["Paris is the capital."]
    assert warning_codes(answer) == ["citations-dropped"]


# -- LangChain's own `stream` keyword


class TokenCounter(BaseCallbackHandler):
    def __init__(self) -> None:
        self.tokens: list[str] = []

    def on_llm_new_token(self, token: str, **kwargs: Any) -> None:
        self.tokens.append(token)


@pytest.mark.parametrize("stream", [True, False])
def test_invoke_with_stream_picks_streaming_as_langchain_means_it(stream: bool) -> None:
    with ScriptedMessagesAPI([reply(text("A fairly long streamed answer."))]) as api:
        counter = TokenCounter()
        chat = ChatClaudeAgent(settings=api.settings(warm_processes=0))
        answer = chat.invoke("Say something.", stream=stream, config={"callbacks": [counter]})
    assert answer.content == "A fairly long streamed answer."
    assert len(api.requests) == 1
    assert (len(counter.tokens) > 1) is stream, "streamed token by token only with stream=True"


@pytest.mark.parametrize(
    ("call", "streamed"),
    [({}, True), ({"stream": False}, False)],
    ids=["streaming", "stream-false-wins"],
)
def test_streaming_true_makes_invoke_stream_as_langchain_means_it(
    call: dict[str, Any], streamed: bool
) -> None:
    # LangChain's conventional constructor flag: it was refused (extra="forbid").
    with ScriptedMessagesAPI([reply(text("A fairly long streamed answer."))]) as api:
        counter = TokenCounter()
        chat = ChatClaudeAgent(settings=api.settings(warm_processes=0), streaming=True)
        answer = chat.invoke("Say something.", config={"callbacks": [counter]}, **call)
    assert answer.content == "A fairly long streamed answer."
    assert len(api.requests) == 1
    assert (len(counter.tokens) > 1) is streamed
    if streamed:
        assert "".join(counter.tokens) == answer.content


@pytest.mark.anyio
async def test_streaming_true_makes_ainvoke_stream_too() -> None:
    async with ScriptedMessagesAPI([reply(text("A fairly long streamed answer."))]) as api:
        counter = TokenCounter()
        chat = ChatClaudeAgent(settings=api.settings(), streaming=True)
        answer = await chat.ainvoke("Say something.", config={"callbacks": [counter]})
    assert len(api.requests) == 1
    assert len(counter.tokens) > 1 and "".join(counter.tokens) == answer.content


# -- what LangSmith records of a call


class RunMetadata(BaseCallbackHandler):
    def __init__(self) -> None:
        self.metadata: list[dict[str, Any]] = []

    def on_chat_model_start(self, *args: Any, metadata: Any = None, **kwargs: Any) -> None:
        self.metadata.append(dict(metadata or {}))


@pytest.mark.parametrize(
    ("settings", "model", "call"),
    [
        ({"model": "claude-haiku-4-5", "max_tokens": 300}, {}, {}),
        ({"model": "claude-haiku-4-5"}, {"model": "claude-sonnet-4-5", "max_tokens": 300}, {}),
        ({"model": "claude-haiku-4-5"}, {"model": "claude-sonnet-4-5"}, {"max_tokens": 300}),
    ],
    ids=["settings", "constructor-over-settings", "call-over-both"],
)
@pytest.mark.anyio
async def test_traces_name_provider_anthropic_and_the_model_the_request_asks_for(
    settings: dict[str, Any], model: dict[str, Any], call: dict[str, Any]
) -> None:
    # LangSmith prices a run by ls_provider and ls_model_name, as ChatAnthropic reports them.
    # With the model in `settings=` there was no ls_model_name, and the provider was the
    # class name's "claudeagent".
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        runs = RunMetadata()
        chat = ChatClaudeAgent(settings=api.settings(warm_processes=0, **settings), **model)
        call_model = {"model": "claude-opus-4-5"} if call else {}
        await chat.ainvoke("hi", config={"callbacks": [runs]}, **call, **call_model)
    (metadata,) = runs.metadata
    (request,) = api.requests
    assert metadata["ls_provider"] == "anthropic"
    assert metadata["ls_model_name"] == request.body["model"]
    assert metadata["ls_max_tokens"] == request.body["max_tokens"] == 300
