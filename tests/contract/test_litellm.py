"""The LiteLLM provider: `litellm.completion` / `acompletion(model="claude-agent/...")` on the real
CLI against the scripted API, offline (every socket this process opens is checked)."""

from __future__ import annotations

import os

# Before LiteLLM is imported: otherwise it fetches its model cost map from the network.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

import ipaddress
import json
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import litellm
import pytest
from litellm import exceptions as litellm_errors

from sf_provider import QueryTimeoutError, UnsupportedSettingError
from sf_provider.adapters.litellm import ClaudeAgentLLM, register
from sf_provider.testing import (
    HTTPErrorReply,
    RecordedRequest,
    Reply,
    ScriptedMessagesAPI,
    fault,
    http_error,
    reply,
    result_text,
    text,
    thinking,
    tool_use,
)

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.cli,
    # LiteLLM's own types, built by pydantic on first use.
    pytest.mark.filterwarnings("ignore:Item 'summary' on TypedDict:UserWarning"),
]

litellm.suppress_debug_info = True

MODEL = "claude-agent/claude-sonnet-5-5"
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
QUESTION = [{"role": "user", "content": "Weather in Paris?"}]

outside: list[str] = []


def _local(host: Any) -> bool:
    if host in ("localhost", None, ""):
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Any connection or name look-up of this process that leaves the machine fails, and is
    recorded: LiteLLM must make none."""
    connect, getaddrinfo = socket.socket.connect, socket.getaddrinfo

    def guarded_connect(self: socket.socket, address: Any) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _local(address[0]):
            outside.append(f"connect {address}")
            raise OSError(f"test: no network beyond loopback ({address})")
        connect(self, address)

    def guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not _local(host.decode() if isinstance(host, bytes) else host):
            outside.append(f"getaddrinfo {host}")
            raise socket.gaierror(f"test: no name look-ups beyond loopback ({host})")
        return getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket, "getaddrinfo", guarded_getaddrinfo)
    outside.clear()
    yield
    assert outside == [], "LiteLLM reached beyond loopback"


@asynccontextmanager
async def registered(api: ScriptedMessagesAPI, **settings: Any) -> AsyncIterator[ClaudeAgentLLM]:
    handler = register(settings=api.settings(**settings))
    try:
        yield handler
    finally:
        await handler.provider.aclose()


def weather_model(request: RecordedRequest) -> Reply:
    """Calls get_weather, then answers from its result."""
    results = [result_text(b) for b in request.tool_results()]
    if not results:
        return reply(text("Checking."), tool_use("get_weather", {"city": "Paris"}))
    return reply(text(f"Paris: {results[0].splitlines()[0]}."))


async def test_acompletion_answers_with_usage() -> None:
    async with ScriptedMessagesAPI([reply(text("Paris is sunny."))]) as api, registered(api):
        response = await litellm.acompletion(model=MODEL, messages=QUESTION)
    assert response.choices[0].message.content == "Paris is sunny."
    assert response.choices[0].finish_reason == "stop"
    assert response.usage.prompt_tokens > 0 and response.usage.completion_tokens > 0
    assert api.requests[0].body["model"] == "claude-sonnet-5-5"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_the_clis_cost_is_litellms_response_cost(stream: bool) -> None:
    # LiteLLM has no prices for claude-agent models (an alias such as `sonnet` least of all):
    # its callbacks and spend tracking counted 0 (`_hidden_params["response_cost"]` is what it
    # hands them).
    model = "claude-agent/sonnet"
    async with ScriptedMessagesAPI([reply(text("Sunny."))] * 2) as api, registered(api) as handler:
        own = await handler.provider.generate(QUESTION, model="sonnet")
        if stream:
            chunks = await litellm.acompletion(
                model=model,
                messages=QUESTION,
                stream=True,
                stream_options={"include_usage": True},
            )
            response = litellm.stream_chunk_builder([chunk async for chunk in chunks])
        else:
            response = await litellm.acompletion(model=model, messages=QUESTION)
    assert own.cost_usd
    assert response._hidden_params["response_cost"] == pytest.approx(own.cost_usd)
    assert litellm.completion_cost(completion_response=response) == pytest.approx(own.cost_usd)
    assert response.usage.cost == pytest.approx(own.cost_usd)


@pytest.mark.parametrize("model", [MODEL, "claude-agent/sonnet", "claude-agent/default"])
async def test_litellms_model_info_says_what_the_provider_does(model: str) -> None:
    # Frameworks ask LiteLLM before sending tools (CrewAI and DSPy fall back to prompting for
    # them when supports_function_calling is False): it was False for every claude-agent model.
    script = [reply(tool_use("get_weather", {"city": "Paris"}))]
    async with ScriptedMessagesAPI(script) as api, registered(api):
        assert litellm.supports_function_calling(model)
        assert litellm.utils.supports_tool_choice(model)
        assert litellm.supports_response_schema(model)
        assert litellm.supports_vision(model)
        assert not litellm.supports_pdf_input(model)
        assert not litellm.supports_web_search(model)
        response = await litellm.acompletion(model=model, messages=QUESTION, tools=[WEATHER_TOOL])
    assert response.choices[0].message.tool_calls[0].function.name == "get_weather"
    assert api.requests[0].tool_names == ["mcp__sf__get_weather"]
    if model == MODEL:  # a model LiteLLM knows: its context size too
        assert litellm.get_model_info(model)["max_input_tokens"]


async def test_a_tool_loop_sends_calls_out_and_takes_results_back_in() -> None:
    async with ScriptedMessagesAPI(weather_model) as api, registered(api):
        messages: list[Any] = list(QUESTION)
        first = await litellm.acompletion(model=MODEL, messages=messages, tools=[WEATHER_TOOL])
        message = first.choices[0].message
        assert first.choices[0].finish_reason == "tool_calls"
        assert message.content == "Checking."
        call = message.tool_calls[0]
        assert (call.function.name, json.loads(call.function.arguments)) == (
            "get_weather",
            {"city": "Paris"},
        )
        messages += [message, {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
        second = await litellm.acompletion(model=MODEL, messages=messages, tools=[WEATHER_TOOL])
    assert second.choices[0].message.content == "Paris: sunny."
    assert api.requests[0].tool_names == ["mcp__sf__get_weather"]
    last = api.requests[-1]
    assert [b["id"] for b in last.tool_uses()] == [call.id]
    assert [b["tool_use_id"] for b in last.tool_results()] == [call.id]


async def test_streaming_gives_text_and_tool_call_deltas_and_usage() -> None:
    script = [
        Reply(
            content=[text("Checking now."), tool_use("get_weather", {"city": "Paris"}, id="t1")],
            chunk_size=4,
        )
    ]
    async with ScriptedMessagesAPI(script) as api, registered(api):
        stream = await litellm.acompletion(
            model=MODEL,
            messages=QUESTION,
            tools=[WEATHER_TOOL],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert len([d for d in deltas if d.content]) > 1, "the text streams in pieces"
    fragments = [t for d in deltas for t in d.tool_calls or []]
    assert len(fragments) > 2, "the arguments stream in fragments"
    rebuilt = litellm.stream_chunk_builder(chunks)
    message = rebuilt.choices[0].message
    assert message.content == "Checking now."
    assert [(c.id, c.function.name) for c in message.tool_calls] == [("t1", "get_weather")]
    assert json.loads(message.tool_calls[0].function.arguments) == {"city": "Paris"}
    assert rebuilt.choices[0].finish_reason == "tool_calls"
    assert rebuilt.usage.completion_tokens > 0


def test_the_sync_calls_work_too() -> None:
    import anyio

    async def main() -> None:
        async with ScriptedMessagesAPI(weather_model) as api:
            handler = register(settings=api.settings(warm_processes=0))
            first = await anyio.to_thread.run_sync(
                lambda: litellm.completion(model=MODEL, messages=QUESTION, tools=[WEATHER_TOOL])
            )
            call = first.choices[0].message.tool_calls[0]
            follow_up = [
                *QUESTION,
                first.choices[0].message,
                {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
            ]

            def stream() -> list[Any]:
                chunks = litellm.completion(
                    model=MODEL, messages=follow_up, tools=[WEATHER_TOOL], stream=True
                )
                return list(chunks)

            chunks = await anyio.to_thread.run_sync(stream)
            await handler.provider.aclose()
        text_out = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text_out == "Paris: sunny."
        assert len(api.requests) == 2

    anyio.run(main)


async def test_streamed_thinking_arrives_and_goes_back_signed() -> None:
    # LiteLLM's GenericStreamingChunk has no field for reasoning: it used to be dropped.
    script = [
        Reply(
            content=[thinking("A tool knows it."), tool_use("get_weather", {"city": "Paris"})],
            chunk_size=4,
            usage={"output_tokens": 33},
        ),
        reply(text("Sunny.")),
    ]
    async with ScriptedMessagesAPI(script) as api, registered(api):
        stream = await litellm.acompletion(
            model=MODEL,
            messages=QUESTION,
            tools=[WEATHER_TOOL],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
        assert len({c.id for c in chunks}) == 1, "one stream, one id"
        deltas = [c.choices[0].delta for c in chunks if c.choices]
        pieces = [getattr(d, "reasoning_content", None) for d in deltas]
        assert len([p for p in pieces if p]) > 1, "the reasoning streams in pieces"
        rebuilt = litellm.stream_chunk_builder(chunks)
        message = rebuilt.choices[0].message
        assert message.reasoning_content == "A tool knows it."
        assert message.thinking_blocks == [
            {"type": "thinking", "thinking": "A tool knows it.", "signature": "scripted-signature"}
        ]
        assert rebuilt.usage.completion_tokens == 33, "the API's usage, not LiteLLM's estimate"
        call = message.tool_calls[0]
        follow_up = [*QUESTION, message, {"role": "tool", "tool_call_id": call.id, "content": "ok"}]
        await litellm.acompletion(model=MODEL, messages=follow_up, tools=[WEATHER_TOOL])
    assistant = next(m for m in api.requests[-1].messages if m["role"] == "assistant")
    assert [b["type"] for b in assistant["content"]] == ["thinking", "tool_use"]
    assert assistant["content"][0]["signature"] == "scripted-signature"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_the_querys_warnings_are_user_warnings_and_in_the_answer(stream: bool) -> None:
    # Reasoning without its signed blocks can only be replayed as text: a warning says so.
    unsigned = [
        *QUESTION,
        {"role": "assistant", "content": "Sunny.", "reasoning_content": "I looked outside."},
        {"role": "user", "content": "And tomorrow?"},
    ]
    async with ScriptedMessagesAPI([reply(text("Rain."))]) as api, registered(api):
        with pytest.warns(UserWarning, match=r"ClaudeAgentLLM: .*\(history-flattened\)"):
            if stream:
                response = await litellm.acompletion(model=MODEL, messages=unsigned, stream=True)
                chunks = [chunk async for chunk in response]
                fields = chunks[0].choices[0].delta.provider_specific_fields
                assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Rain."
            else:
                answer = await litellm.acompletion(model=MODEL, messages=unsigned)
                fields = answer.choices[0].message.provider_specific_fields
                assert answer.choices[0].message.content == "Rain."
    assert [w["code"] for w in fields["warnings"]] == ["history-flattened"]
    assert len(api.requests) == 1


async def test_a_parameter_that_cannot_be_honoured_is_a_bad_request_naming_it() -> None:
    async with ScriptedMessagesAPI([]) as api, registered(api):
        with pytest.raises(litellm_errors.BadRequestError, match="'n'"):
            await litellm.acompletion(model=MODEL, messages=QUESTION, n=2)
        with pytest.raises(litellm_errors.BadRequestError, match="unknown role"):
            await litellm.acompletion(model=MODEL, messages=[{"role": "robot", "content": "x"}])
        with pytest.raises(litellm_errors.BadRequestError, match="min_p"):  # was dropped
            await litellm.acompletion(model=MODEL, messages=QUESTION, extra_body={"min_p": 0.1})
    assert api.all_requests == []


async def test_reasoning_effort_reaches_the_request_when_litellm_lets_it_through() -> None:
    # LiteLLM's list for custom providers lacks reasoning_effort: it is let through by name.
    async with ScriptedMessagesAPI([reply(text("Sunny."))]) as api, registered(api):
        await litellm.acompletion(
            model=MODEL,
            messages=QUESTION,
            reasoning_effort="low",
            allowed_openai_params=["reasoning_effort"],
        )
    assert api.requests[0].body["output_config"]["effort"] == "low"


async def test_thinking_reaches_the_request_as_the_messages_api_object() -> None:
    older = "claude-agent/claude-sonnet-4-5"  # takes thinking off and a budget
    budget = {"type": "enabled", "budget_tokens": 2048}  # the CLI adds a display setting
    async with ScriptedMessagesAPI([reply(text("Sunny."))] * 2) as api, registered(api):
        for thinking_config in ({"type": "disabled"}, budget):
            await litellm.acompletion(
                model=older,
                messages=QUESTION,
                thinking=thinking_config,
                allowed_openai_params=["thinking"],
            )
        with pytest.raises(litellm_errors.BadRequestError, match=r"thinking\.budget_tokens"):
            await litellm.acompletion(
                model=MODEL,
                messages=QUESTION,
                thinking={"type": "enabled", "budget_tokens": 10},
                allowed_openai_params=["thinking"],
            )
    sent = [r.body["thinking"] for r in api.requests]
    assert sent[0] == {"type": "disabled"}
    assert (sent[1]["type"], sent[1]["budget_tokens"]) == ("enabled", 2048)


async def test_drop_params_does_not_drop_what_this_provider_honours() -> None:
    # LiteLLM's list for custom providers lacks reasoning_effort and thinking: with drop_params
    # it dropped them before the call, silently.
    script = [reply(text("Sunny."))] * 2
    async with ScriptedMessagesAPI(script) as api, registered(api):
        await litellm.acompletion(
            model=MODEL, messages=QUESTION, reasoning_effort="low", drop_params=True
        )
        await litellm.acompletion(
            model="claude-agent/claude-sonnet-4-5",
            messages=QUESTION,
            thinking={"type": "disabled"},
            drop_params=True,
        )
    assert api.requests[0].body["output_config"]["effort"] == "low"
    assert api.requests[1].body["thinking"] == {"type": "disabled"}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_what_drop_params_drops_is_a_warning(stream: bool) -> None:
    async with ScriptedMessagesAPI([reply(text("Sunny."))]) as api, registered(api):
        with pytest.warns(UserWarning, match=r"'verbosity' .*\(parameter-dropped\)"):
            response = await litellm.acompletion(
                model=MODEL, messages=QUESTION, verbosity="low", drop_params=True, stream=stream
            )
            if stream:
                chunks = [chunk async for chunk in response]
                fields = chunks[0].choices[0].delta.provider_specific_fields
            else:
                fields = response.choices[0].message.provider_specific_fields
    assert [w["code"] for w in fields["warnings"]] == ["parameter-dropped"]
    assert len(api.requests) == 1


async def test_sampling_and_one_call_per_turn_reach_the_request_as_written() -> None:
    # LiteLLM passes temperature and top_p on by its list for custom providers, top_k as a
    # provider's own parameter.
    sampling = {"temperature": 0.2, "top_p": 0.9, "top_k": 5}
    async with ScriptedMessagesAPI([reply(text("Sunny."))]) as api, registered(api):
        await litellm.acompletion(
            model=MODEL,
            messages=QUESTION,
            tools=[WEATHER_TOOL],
            parallel_tool_calls=False,
            **sampling,
        )
    sent = api.requests[0].body
    assert {k: sent[k] for k in sampling} == sampling
    assert sent["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}


async def test_an_api_refusal_of_a_sampling_setting_is_a_bad_request_naming_it() -> None:
    def refuse(_request: RecordedRequest) -> HTTPErrorReply:  # the CLI tries a 400 three times
        return http_error(400, "temperature is deprecated for this model.")

    async with ScriptedMessagesAPI(refuse) as api, registered(api):
        with pytest.raises(litellm_errors.BadRequestError) as info:
            await litellm.acompletion(model=MODEL, messages=QUESTION, temperature=0.3)
    assert "temperature is deprecated for this model" in str(info.value)
    assert isinstance(info.value.__cause__, UnsupportedSettingError)
    assert info.value.__cause__.setting == "temperature"
    assert {r.body["temperature"] for r in api.requests} == {0.3}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_drop_params_drops_sampling_and_what_cannot_be_honoured_with_a_warning(
    stream: bool,
) -> None:
    # CrewAI sends temperature; newer models refuse it: drop_params keeps leaving it out.
    unhonoured: dict[str, Any] = {"temperature": 0.2, "top_p": 0.9, "top_k": 5, "seed": 7}
    async with ScriptedMessagesAPI([reply(text("Sunny."))]) as api, registered(api):
        with pytest.warns(UserWarning, match=r"\(parameter-dropped\)") as said:
            response = await litellm.acompletion(
                model=MODEL, messages=QUESTION, drop_params=True, stream=stream, **unhonoured
            )
            if stream:
                chunks = [chunk async for chunk in response]
                fields = chunks[0].choices[0].delta.provider_specific_fields
            else:
                fields = response.choices[0].message.provider_specific_fields
        with pytest.raises(litellm_errors.UnsupportedParamsError, match="drop_params"):
            await litellm.acompletion(model=MODEL, messages=QUESTION, seed=7)
    assert all(any(f"'{name}'" in str(w.message) for w in said) for name in unhonoured)
    warned = fields["warnings"]
    assert [w["code"] for w in warned] == ["parameter-dropped"] * 4
    assert all(any(f"'{name}'" in w["message"] for w in warned) for name in unhonoured)
    assert len(api.requests) == 1
    assert not unhonoured.keys() & api.requests[0].body.keys()


async def test_a_history_with_tool_calls_but_no_tools_is_answered_in_text() -> None:
    """AutoGen's reflection after a tool call sends the calls and results without `tools`: it
    was refused; the called tools are defined again, uncallable (tool_choice 'none')."""
    history = [
        *QUESTION,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "21 C"},
    ]
    async with ScriptedMessagesAPI([reply(text("Paris: 21 C."))]) as api, registered(api):
        response = await litellm.acompletion(model=MODEL, messages=history)
    assert response.choices[0].message.content == "Paris: 21 C."
    assert api.requests[0].tool_names == ["mcp__sf__get_weather"]


async def test_api_errors_are_litellm_exceptions_by_status() -> None:
    async with ScriptedMessagesAPI([http_error(429), http_error(529)]) as api, registered(api):
        with pytest.raises(litellm_errors.RateLimitError) as limited:
            await litellm.acompletion(model=MODEL, messages=QUESTION)
        with pytest.raises(litellm_errors.ServiceUnavailableError):
            stream = await litellm.acompletion(model=MODEL, messages=QUESTION, stream=True)
            async for _ in stream:
                pass
    assert limited.value.status_code == 429
    assert type(limited.value.__cause__).__name__ == "RateLimitError"
    assert len(api.requests) == 2


async def test_a_server_error_of_the_api_is_litellms_internal_server_error() -> None:
    # As LiteLLM's Anthropic provider raises it: a Router's RetryPolicy retries it by that name
    # (it was a BadGatewayError, which no RetryPolicy field names).
    from litellm.types.router import RetryPolicy

    script = [http_error(500), reply(text("Sunny.")), http_error(500)]
    async with ScriptedMessagesAPI(script) as api, registered(api, warm_processes=0):
        router = litellm.Router(
            model_list=[{"model_name": "claude", "litellm_params": {"model": MODEL}}],
            retry_policy=RetryPolicy(InternalServerErrorRetries=1, DefaultRetries=0),
            retry_after=0,
        )
        response = await router.acompletion(model="claude", messages=QUESTION)
        with pytest.raises(litellm_errors.InternalServerError) as caught:
            await litellm.acompletion(model=MODEL, messages=QUESTION)
    assert response.choices[0].message.content == "Sunny."
    assert len(api.all_requests) == 3  # the 500, the Router's retry, the call that failed
    assert type(caught.value.__cause__).__name__ == "APIError"


@pytest.mark.usefixtures("no_login")
async def test_missing_claude_credentials_are_litellms_authentication_error() -> None:
    """It was an InternalServerError (500), which a Router retries."""
    async with ScriptedMessagesAPI([]) as api, registered(api, env={"ANTHROPIC_API_KEY": ""}):
        with pytest.raises(litellm_errors.AuthenticationError) as caught:
            await litellm.acompletion(model=MODEL, messages=QUESTION)
    assert caught.value.status_code == 401
    assert type(caught.value.__cause__).__name__ == "CredentialsMissingError"
    assert "ANTHROPIC_API_KEY" in str(caught.value)
    assert api.all_requests == []


async def test_a_lost_connection_is_litellms_api_connection_error() -> None:
    async with ScriptedMessagesAPI([fault("drop")]) as api, registered(api, warm_processes=0):
        with pytest.raises(litellm_errors.APIConnectionError) as caught:
            await litellm.acompletion(model=MODEL, messages=QUESTION)
    assert type(caught.value.__cause__).__name__ == "APIConnectionError"
    assert len(api.all_requests) == 1


async def test_the_providers_timeout_holds_under_litellms_default() -> None:
    # LiteLLM passes its default timeout (600 s) on every call: it must not replace a shorter
    # ProviderSettings.timeout.
    # 20 s leaves a loaded machine room to start the CLI; the scripted API holds the wait.
    script = [fault("hang", seconds=120)]
    async with ScriptedMessagesAPI(script) as api, registered(api, warm_processes=0, timeout=20):
        with pytest.raises(litellm_errors.Timeout) as caught:
            await litellm.acompletion(model=MODEL, messages=QUESTION)
    cause = caught.value.__cause__
    assert isinstance(cause, QueryTimeoutError)
    assert (cause.kind, cause.seconds) == ("timeout", 20.0)
    assert len(api.all_requests) == 1, "it expired while the model was answering"


async def test_max_retries_are_the_clis_retries() -> None:
    script = [http_error(529), reply(text("Sunny."))]
    async with ScriptedMessagesAPI(script) as api, registered(api, warm_processes=0):
        response = await litellm.acompletion(model=MODEL, messages=QUESTION, max_retries=1)
    assert response.choices[0].message.content == "Sunny."
    assert len(api.all_requests) == 2


async def test_the_anthropic_beta_header_is_sent_and_other_headers_are_warnings() -> None:
    headers = {"anthropic-beta": "context-1m-2025-08-07", "X-Trace": "abc"}
    async with ScriptedMessagesAPI([reply(text("Sunny."))]) as api, registered(api):
        with pytest.warns(UserWarning, match=r"header 'x-trace' .*\(parameter-dropped\)"):
            await litellm.acompletion(model=MODEL, messages=QUESTION, extra_headers=headers)
    sent = api.requests[0].headers
    assert "context-1m-2025-08-07" in sent.get("anthropic-beta", "").split(",")
    assert "x-trace" not in {name.lower() for name in sent}


@pytest.mark.parametrize("given", [{"api_key": "sk-ant-other"}, {"api_base": "http://127.0.0.1:9"}])
async def test_a_per_call_key_or_endpoint_is_refused_not_ignored(given: dict[str, str]) -> None:
    (name,) = given
    async with ScriptedMessagesAPI([reply(text("Sunny."))]) as api, registered(api):
        with pytest.raises(litellm_errors.BadRequestError, match=f"{name}: this provider cannot"):
            await litellm.acompletion(model=MODEL, messages=QUESTION, **given)
    assert api.all_requests == []


_IMPORT_PROBE = """
import ipaddress, json, socket
attempts = []
connect, getaddrinfo = socket.socket.connect, socket.getaddrinfo
def local(host):
    try:
        return host in ("localhost", None) or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
def guarded_connect(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and not local(address[0]):
        attempts.append(str(address))
        raise OSError("no network")
    return connect(self, address)
def guarded_getaddrinfo(host, *args, **kwargs):
    if not local(host):
        attempts.append(str(host))
        raise socket.gaierror("no network")
    return getaddrinfo(host, *args, **kwargs)
socket.socket.connect = guarded_connect
socket.getaddrinfo = guarded_getaddrinfo
from sf_provider.adapters.litellm import register
register()
print(json.dumps(attempts))
"""


def test_importing_and_registering_reaches_no_network() -> None:
    import subprocess
    import sys

    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    out = subprocess.run(
        [sys.executable, "-c", _IMPORT_PROBE], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out.strip().splitlines()[-1]) == []
