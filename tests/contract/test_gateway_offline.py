"""`sf-provider gateway --offline`: the gateway and the real CLI against the built-in scripted
model (`sf_provider.testing.call_each_tool`), no credential needed. One gateway process serves
the module's tests, as a user would run it; clients run their tools and get the final answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from offline_gateway import OfflineGateway, offline_gateway

from sf_provider.cli import main
from sf_provider.gateway._http import KEYS_ENV

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

MODEL = "claude-haiku-4-5"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OfflineGateway]:
    where = tmp_path_factory.mktemp("offline-gateway")
    with offline_gateway(where) as running:
        yield running
    assert running.process.returncode in (0, 143), running.log
    assert "Application shutdown complete" in running.log
    assert list(where.glob("sf-provider-*")) == [], "its queries' temp dirs are removed"


def test_the_help_says_what_offline_does(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["gateway", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "--offline no credential, no network: the real Claude Code CLI answers from a " in (
        shown
    )
    assert "calls each offered tool once" in shown


def test_an_open_port_offline_is_refused_for_what_it_risks_not_for_an_account(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEYS_ENV, raising=False)

    assert main(["gateway", "--offline", "--host", "0.0.0.0"]) == 2

    said = " ".join(capsys.readouterr().err.split())
    assert "spend your Claude account" not in said  # the scripted model costs nothing
    risk = "no Claude account is spent, but anyone there could start Claude Code processes"
    assert f"offline, {risk} on this machine" in said
    assert f"Pass --api-key KEY (or set {KEYS_ENV}), leave --host at 127.0.0.1" in said
    assert "--allow-no-auth to serve it open" in said


def test_start_up_says_it_is_offline_and_which_model_answers(gateway: OfflineGateway) -> None:
    assert "sf-provider gateway: offline: no credential, no network" in gateway.log
    assert "built-in scripted model (sf_provider.testing.call_each_tool" in gateway.log


async def test_the_openai_agents_sdk_runs_both_its_tools_and_gets_the_answer(
    gateway: OfflineGateway,
) -> None:
    import agents

    agents.set_tracing_disabled(True)
    runs: list[tuple[str, str]] = []

    @agents.function_tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        runs.append(("get_weather", city))
        return f"sunny in {city}"

    @agents.function_tool
    def convert(celsius: float, unit: str) -> str:
        """Convert a temperature."""
        runs.append(("convert", unit))
        return f"{celsius * 9 / 5 + 32} F"

    async with openai.AsyncOpenAI(
        base_url=f"{gateway.url}/v1", api_key="offline", max_retries=0
    ) as client:
        agent = agents.Agent(
            name="assistant",
            tools=[get_weather, convert],
            model=agents.OpenAIChatCompletionsModel(model=MODEL, openai_client=client),
        )
        result = await agents.Runner.run(agent, "Weather in Paris, in Fahrenheit?")
    assert sorted(runs) == [("convert", "example"), ("get_weather", "example")]
    assert result.final_output == (
        "Offline model: convert returned '33.8 F'; get_weather returned 'sunny in example'."
    )


def test_litellm_runs_its_tool_and_gets_the_answer_streamed(gateway: OfflineGateway) -> None:
    import litellm

    tool = {
        "type": "function",
        "function": {
            "name": "book_room",
            "description": "Book a hotel room.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "enum": ["Paris", "Tokyo"]},
                    "nights": {"type": "integer", "minimum": 2},
                    "guest": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}, "vip": {"type": "boolean"}},
                        "required": ["name", "vip"],
                    },
                    "extras": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                    "note": {"type": "string"},
                },
                "required": ["city", "nights", "guest", "extras"],
            },
        },
    }
    route = {"model": f"openai/{MODEL}", "api_base": f"{gateway.url}/v1", "api_key": "k"}
    messages: list[Any] = [{"role": "user", "content": "Book me a room."}]
    first = litellm.completion(**route, messages=messages, tools=[tool])
    [call] = first.choices[0].message.tool_calls
    arguments = json.loads(call.function.arguments)
    assert arguments == {
        "city": "Paris",
        "nights": 2,
        "guest": {"name": "example", "vip": False},
        "extras": ["example"],
    }
    messages.append(first.choices[0].message)
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "booked: #42"})
    chunks = litellm.completion(**route, messages=messages, tools=[tool], stream=True)
    answer = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert answer == "Offline model: book_room returned 'booked: #42'."


async def test_the_responses_api_calls_the_tool_then_answers(gateway: OfflineGateway) -> None:
    tool: Any = {
        "type": "function",
        "name": "lookup",
        "parameters": {
            "type": "object",
            "properties": {"key": {"type": "string", "default": "colour"}},
            "required": ["key"],
        },
    }
    async with openai.AsyncOpenAI(
        base_url=f"{gateway.url}/v1", api_key="k", max_retries=0
    ) as client:
        first = await client.responses.create(model=MODEL, input="Look it up.", tools=[tool])
        [call] = [item for item in first.output if item.type == "function_call"]
        assert (call.name, json.loads(call.arguments)) == ("lookup", {"key": "colour"})
        second = await client.responses.create(
            model=MODEL,
            previous_response_id=first.id,
            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "blue"}],
            tools=[tool],
        )
    assert second.output_text == "Offline model: lookup returned 'blue'."


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
async def test_every_route_answers(gateway: OfflineGateway, stream: bool) -> None:
    """Chat Completions, Messages and Responses, plain and streamed: without tools, each
    answers with the user's words."""
    said = "Hello from a test."
    expected = f"Offline model: you said {said!r}."
    async with (
        openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key="k", max_retries=0) as gpt,
        anthropic.AsyncAnthropic(base_url=gateway.url, api_key="k", max_retries=0) as claude,
    ):
        user: Any = [{"role": "user", "content": said}]
        if stream:
            chat = "".join(
                [
                    c.choices[0].delta.content or ""
                    async for c in await gpt.chat.completions.create(
                        model=MODEL, messages=user, stream=True
                    )
                    if c.choices
                ]
            )
            async with claude.messages.stream(
                model=MODEL, max_tokens=100, messages=user
            ) as streamed:
                message = "".join([t async for t in streamed.text_stream])
            events = await gpt.responses.create(model=MODEL, input=said, stream=True)
            responses = "".join(
                [e.delta async for e in events if e.type == "response.output_text.delta"]
            )
        else:
            completion = await gpt.chat.completions.create(model=MODEL, messages=user)
            chat = completion.choices[0].message.content or ""
            answer = await claude.messages.create(model=MODEL, max_tokens=100, messages=user)
            message = "".join(b.text for b in answer.content if b.type == "text")
            responses = (await gpt.responses.create(model=MODEL, input=said)).output_text
    assert (chat, message, responses) == (expected, expected, expected)
