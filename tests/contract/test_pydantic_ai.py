"""The pydantic-ai adapter: a real `pydantic_ai.Agent` on the real CLI against the scripted API."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent, NativeOutput
from pydantic_ai.messages import (
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    TextPart,
)

from sf_provider import ClaudeAgentProvider, FunctionTool
from sf_provider.adapters.pydantic_ai import ClaudeAgentModel
from sf_provider.testing import RecordedRequest, Reply, ScriptedMessagesAPI, reply, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "How warm is Paris in °F?"
ANSWER = "Paris: 20 °C = 68.0 °F."


def result_text(block: dict[str, Any]) -> str:
    content = block["content"]
    if isinstance(content, list):
        return "".join(c.get("text", "") for c in content)
    return str(content)


def two_step_model(request: RecordedRequest, preamble: str = "Looking it up.") -> Reply:
    """Calls tool A, then (after seeing A's result) tool B, then answers from both results."""
    results = [result_text(b) for b in request.tool_results()]
    if not results:
        first = [text(preamble)] if preamble else []
        return reply(*first, tool_use("get_celsius", {"city": "Paris"}))
    if len(results) == 1:
        return reply(tool_use("to_fahrenheit", {"celsius": float(results[0])}))
    return reply(text(f"Paris: {float(results[0]):g} °C = {results[1]} °F."))


def weather_agent(api: ScriptedMessagesAPI, runs: list[str]) -> Agent[None, str]:
    agent = Agent(ClaudeAgentModel(ClaudeAgentProvider(api.settings())))

    @agent.tool_plain
    def get_celsius(city: str) -> float:
        """Current temperature of a city in °C."""
        runs.append(f"get_celsius({city})")
        return 20.0

    @agent.tool_plain
    def to_fahrenheit(celsius: float) -> float:
        """Convert °C to °F."""
        runs.append(f"to_fahrenheit({celsius:g})")
        return celsius * 9 / 5 + 32

    return agent


def assert_native_history(api: ScriptedMessagesAPI) -> None:
    """Each follow-up request carries the earlier calls and results as native blocks, same ids."""
    assert len(api.requests) == 3
    first_call = api.requests[1].tool_uses()
    assert [b["name"] for b in first_call] == ["mcp__sf__get_celsius"]
    assert first_call[0]["input"] == {"city": "Paris"}
    assert [(b["tool_use_id"], result_text(b)) for b in api.requests[1].tool_results()] == [
        (first_call[0]["id"], "20.0")
    ]
    uses = api.requests[2].tool_uses()
    results = api.requests[2].tool_results()
    assert [b["id"] for b in uses] == [b["tool_use_id"] for b in results]
    assert uses[0]["id"] == first_call[0]["id"]
    assert [result_text(b) for b in results] == ["20.0", "68.0"]
    assert not any(b.get("is_error") for b in results)


async def test_the_agent_runs_both_tools_itself_and_answers_from_their_results() -> None:
    runs: list[str] = []
    async with ScriptedMessagesAPI(two_step_model) as api:
        result = await weather_agent(api, runs).run(PROMPT)
    assert result.output == ANSWER
    assert runs == ["get_celsius(Paris)", "to_fahrenheit(20)"], "the Agent ran each tool once"
    assert_native_history(api)
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    assert result.usage.requests == 3
    responses = [m for m in result.all_messages() if isinstance(m, ModelResponse)]
    assert responses[0].provider_details is not None
    assert responses[0].provider_details["mode"] == "single-turn"
    assert responses[0].provider_details["session_id"]
    call = responses[0].parts[-1]
    assert (
        call.part_kind == "tool-call" and call.tool_call_id == api.requests[1].tool_uses()[0]["id"]
    )


async def test_the_same_loop_through_run_stream() -> None:
    # run_stream ends at the first text pydantic-ai can take as output, so no preamble here.
    runs: list[str] = []
    async with ScriptedMessagesAPI(lambda request: two_step_model(request, "")) as api:
        async with weather_agent(api, runs).run_stream(PROMPT) as streamed:
            chunks = [chunk async for chunk in streamed.stream_text(delta=True)]
        usage = streamed.usage
    assert "".join(chunks) == ANSWER
    assert runs == ["get_celsius(Paris)", "to_fahrenheit(20)"]
    assert_native_history(api)
    assert usage.input_tokens > 0 and usage.output_tokens > 0


class CityWeather(BaseModel):
    city: str
    celsius: int


async def test_structured_output_comes_back_through_the_output_tool() -> None:
    def model(request: RecordedRequest) -> Reply:
        return reply(tool_use("final_result", {"city": "Paris", "celsius": 20}))

    async with ScriptedMessagesAPI(model) as api:
        agent = Agent(
            ClaudeAgentModel(ClaudeAgentProvider(api.settings())), output_type=CityWeather
        )
        result = await agent.run("Weather in Paris as data.")
    assert result.output == CityWeather(city="Paris", celsius=20)
    assert len(api.requests) == 1
    assert api.requests[0].tool_names == ["mcp__sf__final_result"]
    response = result.all_messages()[-2]
    assert isinstance(response, ModelResponse)
    assert (response.provider_response_id or "").startswith("msg_"), "the API message's id"
    # No text output allowed: the output tool is required (sent as the API's tool_choice).
    assert api.requests[0].body["tool_choice"] == {"type": "any"}


@pytest.mark.parametrize("run", ["run", "run_stream"])
async def test_a_text_reply_where_the_output_tool_was_needed_gets_the_agents_own_retry(
    run: str,
) -> None:
    """The CLI cannot force the output tool's call: a model that answers in text got a
    `ToolChoiceViolationError` that ended the run. pydantic-ai asks again itself, as with its
    own models (its validation feedback on the text, then the output tool is called)."""
    script = [
        reply(text("Paris, about 20 degrees.")),
        reply(tool_use("final_result", {"city": "Paris", "celsius": 20})),
    ]
    async with ScriptedMessagesAPI(script) as api:
        agent = Agent(
            ClaudeAgentModel(ClaudeAgentProvider(api.settings())), output_type=CityWeather
        )
        if run == "run":
            output = (await agent.run("Weather in Paris as data.")).output
        else:
            async with agent.run_stream("Weather in Paris as data.") as streamed:
                output = await streamed.get_output()
    assert output == CityWeather(city="Paris", celsius=20)
    assert len(api.requests) == 2
    retry = [m for m in api.requests[1].messages if m["role"] == "user"][-1]
    assert "Paris, about 20 degrees." in str(retry["content"]), "the Agent's own feedback"


def structured_output_schema(request: RecordedRequest) -> dict[str, Any]:
    tools = request.body.get("tools", [])
    return next(t["input_schema"] for t in tools if t["name"] == "StructuredOutput")


@pytest.mark.parametrize("run", ["run", "run_stream"])
async def test_native_output_is_the_clis_structured_output(run: str) -> None:
    """`NativeOutput` was refused ("not supported by this model"). Its schema is now the
    provider's output_schema; the model's words before the object stay as commentary, and the
    next run's history carries the object as text (no StructuredOutput call to define)."""
    answer = reply(
        text("Here it is."), tool_use("StructuredOutput", {"city": "Paris", "celsius": 20})
    )
    async with ScriptedMessagesAPI([answer, reply(text("Still 20."))]) as api:
        agent = Agent(
            ClaudeAgentModel(ClaudeAgentProvider(api.settings())),
            output_type=NativeOutput(CityWeather),
        )
        if run == "run":
            result = await agent.run("Weather in Paris as data.")
            output, messages = result.output, result.all_messages()
        else:
            async with agent.run_stream("Weather in Paris as data.") as streamed:
                output = await streamed.get_output()
            messages = streamed.all_messages()
        assert output == CityWeather(city="Paris", celsius=20)
        assert structured_output_schema(api.requests[0])["required"] == ["city", "celsius"]
        response = messages[-1]
        assert isinstance(response, ModelResponse)
        assert response.parts[0] == TextPart(content="Here it is.")
        follow = await Agent(ClaudeAgentModel(ClaudeAgentProvider(api.settings()))).run(
            "And now?", message_history=messages
        )
    assert follow.output == "Still 20."
    replayed = [m for m in api.requests[1].messages if m["role"] == "assistant"][-1]
    assert [b.get("text") for b in replayed["content"]] == [
        "Here it is.",
        '{"city": "Paris", "celsius": 20}',
    ]
    assert "tools" not in api.requests[1].body or not api.requests[1].body["tools"]


async def test_native_output_of_a_scalar_and_after_a_tool_call() -> None:
    def model(request: RecordedRequest) -> Reply:
        if request.tool_results():
            return reply(tool_use("StructuredOutput", {"response": 20}))
        return reply(tool_use("get_celsius", {"city": "Paris"}))

    async with ScriptedMessagesAPI(model) as api:
        agent = Agent(
            ClaudeAgentModel(ClaudeAgentProvider(api.settings())), output_type=NativeOutput(int)
        )

        @agent.tool_plain
        def get_celsius(city: str) -> int:
            return 20

        result = await agent.run("How warm is Paris?")
    assert result.output == 20
    assert len(api.requests) == 2, "the tool call came back first, the object after its result"
    assert structured_output_schema(api.requests[1])["properties"]["response"]["type"] == "integer"


async def test_native_output_answered_in_text_gets_the_agents_own_retry() -> None:
    """The CLI's own request for the object is a second model turn, which single-turn does not
    allow: the text goes to the Agent, which asks again with its validation feedback."""
    script = [
        reply(text("Paris, about 20 degrees.")),
        reply(tool_use("StructuredOutput", {"city": "Paris", "celsius": 20})),
    ]
    async with ScriptedMessagesAPI(script) as api:
        agent = Agent(
            ClaudeAgentModel(ClaudeAgentProvider(api.settings())),
            output_type=NativeOutput(CityWeather),
        )
        result = await agent.run("Weather in Paris as data.")
    assert result.output == CityWeather(city="Paris", celsius=20)
    assert len(api.requests) == 2
    retry = [m for m in api.requests[1].messages if m["role"] == "user"][-1]
    assert "validation" in str(retry["content"]), "the Agent's own feedback"
    assert result.usage.requests == 2


async def test_thinking_comes_back_as_a_signed_thinking_part_and_is_replayed() -> None:
    from pydantic_ai.messages import ThinkingPart

    from sf_provider.testing import thinking

    script = [reply(thinking("Paris, surely.", "sig-1"), text("Paris.")), reply(text("Yes."))]
    async with ScriptedMessagesAPI(script) as api:
        agent = Agent(ClaudeAgentModel(ClaudeAgentProvider(api.settings())))
        first = await agent.run("Capital of France?")
        await agent.run("Sure?", message_history=first.all_messages())
    response = first.all_messages()[-1]
    assert isinstance(response, ModelResponse)
    (part,) = [p for p in response.parts if isinstance(p, ThinkingPart)]
    assert (part.content, part.signature, part.provider_name) == (
        "Paris, surely.",
        "sig-1",
        "claude-agent-sdk",
    )
    (replayed,) = api.requests[1].blocks("thinking")
    assert (replayed["thinking"], replayed["signature"]) == ("Paris, surely.", "sig-1")


def celsius_tool(runs: list[dict[str, Any]]) -> FunctionTool:
    """`get_celsius`, run by the provider (executor mode): notes its arguments in `runs`."""
    return FunctionTool(
        name="get_celsius",
        input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
        executor=lambda arguments: runs.append(arguments) or "20",
    )


async def test_executor_mode_reports_provider_executed_calls() -> None:
    runs: list[dict[str, Any]] = []
    tool = celsius_tool(runs)
    script = [reply(tool_use("get_celsius", {"city": "Paris"})), reply(text("20 °C."))]
    async with ScriptedMessagesAPI(script) as api:
        model = ClaudeAgentModel(ClaudeAgentProvider(api.settings()), mode="executor", tools=[tool])
        result = await Agent(model).run("Weather in Paris?")
    assert result.output == "20 °C." and runs == [{"city": "Paris"}]
    parts = [p for m in result.all_messages() if isinstance(m, ModelResponse) for p in m.parts]
    calls = [p for p in parts if isinstance(p, NativeToolCallPart)]
    returns = [p for p in parts if isinstance(p, NativeToolReturnPart)]
    assert [(c.tool_name, c.args) for c in calls] == [("get_celsius", {"city": "Paris"})]
    assert [(r.tool_call_id, r.content) for r in returns] == [(calls[0].tool_call_id, "20")]


async def test_executor_mode_warns_that_a_tool_calls_limit_does_not_count_its_calls() -> None:
    # pydantic-ai counts only the calls it runs itself: a limit that seems to hold would not.
    from pydantic_ai.exceptions import UnsupportedSettingWarning
    from pydantic_ai.usage import UsageLimits

    runs: list[dict[str, Any]] = []
    tool = celsius_tool(runs)
    calls = [reply(tool_use("get_celsius", {"city": city})) for city in ("Paris", "Rome")]
    async with ScriptedMessagesAPI([*calls, reply(text("20 °C in both."))]) as api:
        model = ClaudeAgentModel(ClaudeAgentProvider(api.settings()), mode="executor", tools=[tool])
        agent = Agent(model)
        with pytest.warns(UnsupportedSettingWarning) as caught:
            async with agent.run_stream(
                "Weather in Paris and Rome?", usage_limits=UsageLimits(tool_calls_limit=1)
            ) as streamed:
                output = await streamed.get_output()
    (warning,) = caught
    assert str(warning.message) == (
        "`UsageLimits(tool_calls_limit=1)` does not count the tools ClaudeAgentModel runs in "
        "mode='executor' (inside the query, like a provider's native tools); bound them with "
        "ProviderSettings.max_turns."
    )
    assert output == "20 °C in both." and runs == [{"city": "Paris"}, {"city": "Rome"}]


async def test_executor_mode_keeps_an_image_result_for_the_next_run() -> None:
    from sf_provider.tools import ToolOutput

    pixel = (
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJ"
        "RU5ErkJggg=="
    )
    tool = FunctionTool(
        name="screenshot",
        executor=lambda arguments: ToolOutput(
            content=[{"type": "text", "text": "screen:"},
                     {"type": "image", "data": pixel, "mimeType": "image/png"}]
        ),
    )  # fmt: skip
    script = [reply(tool_use("screenshot", {})), reply(text("Blue.")), reply(text("Square."))]
    async with ScriptedMessagesAPI(script) as api:
        model = ClaudeAgentModel(
            ClaudeAgentProvider(api.settings(warm_processes=0)), mode="executor", tools=[tool]
        )
        first = await Agent(model).run("What is on the screen?")
        second = await Agent(model).run("Its shape?", message_history=first.all_messages())
    assert second.output == "Square."
    (sent,) = api.requests[2].blocks("tool_result")
    assert sent["content"][1]["source"]["data"] == pixel


def test_importing_sf_provider_does_not_import_pydantic_ai() -> None:
    code = "import sf_provider, sys; assert 'pydantic_ai' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_example_runs_offline() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "pydantic_ai_agent.py")],
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Paris is 21.0 °C, that is 69.8 °F." in done.stdout
    assert "model requests: 3" in done.stdout


@pytest.mark.filterwarnings("ignore:`RetryPromptPart` is deprecated")
async def test_history_converts_faithfully_to_provider_messages() -> None:
    from pydantic_ai.messages import (
        ModelRequest,
        RetryPromptPart,
        SystemPromptPart,
        TextPart,
        ThinkingPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    from sf_provider._request import (
        AssistantMessage,
        Reasoning,
        SystemMessage,
        Text,
        ToolCall,
        ToolMessage,
        UserMessage,
    )
    from sf_provider.adapters.pydantic_ai import _to_provider_messages

    history = [
        ModelRequest(parts=[SystemPromptPart("Be brief."), UserPromptPart("Weather?")]),
        ModelResponse(
            parts=[
                ThinkingPart("hmm", signature="sig", provider_name="claude-agent-sdk"),
                TextPart("Checking."),
                ToolCallPart("get_celsius", {"city": "Paris"}, tool_call_id="c1"),
                ToolCallPart("to_fahrenheit", {"celsius": "x"}, tool_call_id="c2"),
            ]
        ),
        ModelRequest(
            parts=[
                ToolReturnPart("get_celsius", 20.0, tool_call_id="c1"),
                RetryPromptPart(
                    "celsius must be a number", tool_name="to_fahrenheit", tool_call_id="c2"
                ),
                RetryPromptPart("Please answer in one line."),
            ]
        ),
    ]
    messages = await _to_provider_messages(history, instructions="Use tools.")
    assert messages[:4] == [
        SystemMessage("Use tools."),
        SystemMessage("Be brief."),
        UserMessage((Text("Weather?"),)),
        AssistantMessage(
            (
                Reasoning("hmm", signature="sig"),
                Text("Checking."),
                ToolCall("c1", "get_celsius", {"city": "Paris"}),
                ToolCall("c2", "to_fahrenheit", {"celsius": "x"}),
            )
        ),
    ]
    tool, retry = messages[4], messages[5]
    assert isinstance(tool, ToolMessage) and isinstance(retry, UserMessage)
    assert [(r.call_id, r.is_error) for r in tool.results] == [("c1", False), ("c2", True)]
    assert tool.results[0].output == "20.0"
    assert "celsius must be a number" in str(tool.results[1].output)
    assert "Please answer in one line." in str(retry.parts[0])
