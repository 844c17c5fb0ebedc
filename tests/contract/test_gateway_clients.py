"""The gateway through the helpers of the official clients, as applications use them: the
`anthropic` SDK's tool runner and message threads, the `openai` SDK's helpers. Each test runs the
real CLI behind uvicorn on loopback and proves what the client gets from what the scripted
Messages API saw.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anthropic
import anyio
import httpx
import pytest
from anthropic import beta_async_tool
from conftest import serving

from sf_provider.gateway import GatewaySettings, create_app
from sf_provider.testing import ScriptedMessagesAPI, reply, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

MODEL = "claude-haiku-4-5"


@asynccontextmanager
async def gateway(api: ScriptedMessagesAPI, **provider: Any) -> AsyncIterator[str]:
    """The gateway on a free loopback port, its provider talking to `api`; yields its URL."""
    async with serving(create_app(GatewaySettings(provider=api.settings(**provider)))) as url:
        yield url


def anthropic_client(url: str) -> anthropic.AsyncAnthropic:
    """An official client without retries: each scripted answer serves the request it was for."""
    return anthropic.AsyncAnthropic(base_url=url, api_key="gateway-test-key", max_retries=0)


# -- anthropic: message threads


@beta_async_tool
async def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city.
    """
    return f"{city}: 18 C"


async def test_the_anthropic_tool_runner_runs_its_tool_through_the_gateway() -> None:
    # The runner asks for a server-held thread first; the gateway cannot hold one and answers
    # the API's `thread_unsupported_request`, on which the runner sends the whole conversation.
    script = [
        reply(text("Checking."), tool_use("get_weather", {"city": "Paris"}, id="toolu_paris")),
        reply(text("Paris is at 18 C.")),
    ]
    async with (
        ScriptedMessagesAPI(script) as api,
        gateway(api) as url,
        anthropic_client(url) as client,
    ):
        runner = client.beta.messages.tool_runner(
            model=MODEL,
            max_tokens=300,
            tools=[get_weather],
            messages=[{"role": "user", "content": "Weather in Paris?"}],
        )
        final = await runner.until_done()
    assert [(b.type, getattr(b, "text", None)) for b in final.content] == [
        ("text", "Paris is at 18 C.")
    ]
    assert len(api.requests) == 2, "one model turn for the call, one for the answer"
    assert api.requests[0].tool_names == ["mcp__sf__get_weather"]
    [result] = api.requests[1].results()
    assert result.tool_use_id == "toolu_paris"
    assert result.text.startswith("Paris: 18 C")


async def test_a_thread_is_refused_in_the_apis_own_terms_before_any_cli_starts() -> None:
    async with ScriptedMessagesAPI([]) as api, gateway(api) as url:
        async with anthropic_client(url) as client:
            thread = client.beta.messages.thread(model=MODEL, max_tokens=100)
            with pytest.raises(anthropic.BadRequestError) as info:
                await thread.send({"role": "user", "content": "hi"})
        async with httpx.AsyncClient(timeout=60) as http:
            continued = await http.post(
                f"{url}/v1/messages",
                json={
                    "model": MODEL,
                    "max_tokens": 100,
                    "messages": [{"role": "user", "content": "and?"}],
                    "thread": {"type": "continue", "previous_message_id": "msg_gone"},
                },
            )
    assert info.value.error_code == "thread_unsupported_request"
    body: Any = info.value.body
    assert body["error"]["type"] == "invalid_request_error"
    assert "thread" in body["error"]["message"]
    assert continued.status_code == 400
    assert continued.json()["error"]["details"]["error_code"] == "thread_unsupported_request"
    assert api.all_requests == []


async def test_a_thread_that_is_not_an_object_of_a_known_type_is_a_plain_400() -> None:
    body = {
        "model": MODEL,
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "hi"}],
        "thread": {"type": "fork"},
    }
    async with (
        ScriptedMessagesAPI([]) as api,
        gateway(api) as url,
        httpx.AsyncClient(timeout=60) as http,
    ):
        answer = await http.post(f"{url}/v1/messages", json=body)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert "thread.type" in error["message"]
    assert "details" not in error
    assert api.all_requests == []


# -- request ids


async def test_each_response_has_a_request_id_the_official_clients_read() -> None:
    """The clients report a response's request id (`_request_id`, and in their errors); the
    gateway sent none. Each response, answers and errors alike, now has its own, under both
    clients' header names."""
    import openai

    async with (
        ScriptedMessagesAPI([reply(text("Hi.")), reply(text("Hi."))]) as api,
        gateway(api) as url,
        anthropic_client(url) as claude,
        openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0) as gpt,
    ):
        message = await claude.messages.create(
            model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hi"}]
        )
        completion = await gpt.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}]
        )
        with pytest.raises(openai.BadRequestError) as refused:
            await gpt.chat.completions.create(model=MODEL, messages=[], temperature=0.5)
    ids = [message._request_id, completion._request_id, refused.value.request_id]
    assert all(isinstance(i, str) and i.startswith("req_") for i in ids), ids
    assert len(set(ids)) == 3


# -- agent frameworks: their stop and tool_choice reach the API request (issue 28)


async def test_a_smolagents_tool_calling_agent_runs_through_the_gateway() -> None:
    """smolagents' `ToolCallingAgent` sends `tool_choice: "required"` and its ReAct stop
    sequences on every step, and ends by calling its `final_answer` tool: each step is one
    model call with the choice forced (`any`, thinking off) and the stop sequences sent."""
    from smolagents import OpenAIModel, ToolCallingAgent, tool

    runs: list[str] = []

    @tool  # by this name: smolagents warns of a decorator it does not read as its own
    def get_weather(city: str) -> str:
        """Current weather for a city.

        Args:
            city: The city.
        """
        runs.append(city)
        return "sunny, 21 C"

    script = [
        reply(tool_use("get_weather", {"city": "Paris"})),
        reply(tool_use("final_answer", {"answer": "Paris: sunny, 21 C."})),
    ]
    async with ScriptedMessagesAPI(script) as api, gateway(api) as url:
        model = OpenAIModel(model_id=MODEL, api_base=f"{url}/v1", api_key="k")
        agent = ToolCallingAgent(tools=[get_weather], model=model, max_steps=3, verbosity_level=0)
        # Its client is synchronous: off the event loop that serves the gateway.
        answer = await anyio.to_thread.run_sync(agent.run, "Weather in Paris?")
    assert answer == "Paris: sunny, 21 C."
    assert runs == ["Paris"]
    assert len(api.requests) == 2
    for request in api.requests:
        assert request.body["stop_sequences"] == ["Observation:", "Calling tools:"]
        assert request.body["tool_choice"] == {"type": "any"}
        assert request.body["thinking"] == {"type": "disabled"}
        assert sorted(request.tool_names) == ["mcp__sf__final_answer", "mcp__sf__get_weather"]


async def test_the_openai_agents_sdk_with_a_required_tool_choice_runs_through_it() -> None:
    """`ModelSettings(tool_choice="required")` forces the first turn's call; the SDK resets the
    choice after a tool call (`reset_tool_choice`), so the next turn may answer in text."""
    import agents
    import openai

    agents.set_tracing_disabled(True)

    @agents.function_tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return "sunny, 21 C"

    script = [
        reply(tool_use("get_weather", {"city": "Paris"})),
        reply(text("Paris: sunny, 21 C.")),
    ]
    async with (
        ScriptedMessagesAPI(script) as api,
        gateway(api) as url,
        openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="k", max_retries=0) as client,
    ):
        agent = agents.Agent(
            name="weather",
            tools=[get_weather],
            model=agents.OpenAIChatCompletionsModel(model=MODEL, openai_client=client),
            model_settings=agents.ModelSettings(tool_choice="required", parallel_tool_calls=False),
        )
        result = await agents.Runner.run(agent, "Weather in Paris?")
    assert result.final_output == "Paris: sunny, 21 C."
    first, second = (r.body for r in api.requests)
    assert first["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert first["thinking"] == {"type": "disabled"}
    assert second["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
