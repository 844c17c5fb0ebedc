"""What the pydantic-ai adapter refuses before any process starts (pydantic-ai's `UserError`,
saying what is wrong and what to do), and the history items it converts by the pure conversion
(`_to_provider_messages`) or the tool choice it resolves (`_offered_tools`)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.exceptions import UnsupportedSettingWarning, UserError
from pydantic_ai.messages import (
    ImageUrl,
    InstructionDeltaPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    SpeechPart,
    TextContent,
    TextPart,
    ToolAvailabilityDeltaPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.settings import ModelSettings, ToolOrOutput
from pydantic_ai.tools import ToolDefinition

from sf_provider import ClaudeAgentProvider, FunctionTool, NamedToolChoice, ProviderSettings
from sf_provider import _request as req
from sf_provider.adapters.pydantic_ai import (
    ClaudeAgentModel,
    _model_options,
    _offered_tools,
    _to_provider_messages,
)
from sf_provider.testing import ScriptedMessagesAPI, reply, text

SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}


def executor_tool(name: str = "lookup") -> FunctionTool:
    return FunctionTool(name=name, input_schema=SCHEMA, executor=lambda arguments: "1")


# -- the constructor


def test_tools_in_single_turn_mode_are_a_user_error() -> None:
    with pytest.raises(UserError) as caught:
        ClaudeAgentModel(ProviderSettings(), tools=[executor_tool()])
    assert str(caught.value) == (
        "tools=[...] are run by the provider in mode='executor'; in single-turn mode give the "
        "Agent its tools instead"
    )


@pytest.mark.parametrize(
    ("tools", "named"),
    [
        ([], "without one: no tools given"),
        (
            [executor_tool(), FunctionTool(name="bare", input_schema=SCHEMA)],
            "without one: bare)",
        ),
    ],
    ids=["no-tools", "no-executor"],
)
def test_executor_mode_without_executors_is_a_user_error(
    tools: list[FunctionTool], named: str
) -> None:
    with pytest.raises(UserError) as caught:
        ClaudeAgentModel(ProviderSettings(), mode="executor", tools=tools)
    message = str(caught.value)
    assert message.startswith(
        "mode='executor' needs tools=[FunctionTool(..., executor=...)], every one with an executor"
    )
    assert named in message


# -- executor mode and the Agent's own tools


class Answer(BaseModel):
    answer: str


@pytest.mark.anyio
async def test_agent_tools_in_executor_mode_are_a_user_error_before_any_request() -> None:
    # The Agent's tools (and its output tools: `output_type` is a tool call by default) would be
    # offered to a query that runs only the model's executors: refused, naming them.
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        model = ClaudeAgentModel(
            ClaudeAgentProvider(api.settings()), mode="executor", tools=[executor_tool()]
        )
        agent = Agent(model)

        @agent.tool_plain
        def weather(city: str) -> str:
            """The weather of a city."""
            return "sunny"

        with pytest.raises(UserError) as with_tool:
            await agent.run("Weather in Paris?")
        with pytest.raises(UserError) as with_output:
            await Agent(model, output_type=Answer).run("Capital of France?")
    assert api.requests == []
    assert str(with_tool.value) == (
        "mode='executor' runs only the tools given to ClaudeAgentModel(tools=...); the Agent's "
        "own tools and output tools (weather) need mode='single-turn'"
    )
    assert "output tools (final_result) need mode='single-turn'" in str(with_output.value)


# -- tool_choice naming tools of which only some are offered


def parameters() -> ModelRequestParameters:
    tools = [ToolDefinition(name=n, parameters_json_schema=SCHEMA) for n in ("tool_a", "tool_b")]
    return ModelRequestParameters(function_tools=tools)


@pytest.mark.parametrize(
    "tool_choice",
    [["tool_a", "tool_c", "tool_d"], ToolOrOutput(function_tools=["tool_a", "tool_c", "tool_d"])],
    ids=["list", "tool-or-output"],
)
def test_tool_choice_naming_some_tools_not_offered_warns_and_offers_the_others(
    tool_choice: Any,
) -> None:
    # pydantic-ai's rule: the names not offered are left out with a warning while one is offered.
    settings = ModelSettings(tool_choice=tool_choice)
    with pytest.warns(UserWarning) as caught:
        tools, choice = _offered_tools(settings, parameters())
    (warning,) = caught
    assert str(warning.message) == (
        "Some tools in `tool_choice` are not offered in this request and are ignored: "
        "['tool_c', 'tool_d']; offered: ['tool_a', 'tool_b']"
    )
    assert [t.name for t in tools] == ["tool_a"]
    # As a list, one tool is required and named; with ToolOrOutput, text is still allowed.
    named = NamedToolChoice(name="tool_a")
    assert choice == ("auto" if isinstance(tool_choice, ToolOrOutput) else named)


# -- history parts


async def converted(*messages: ModelMessage) -> list[req.Message]:
    return await _to_provider_messages(messages)


@pytest.mark.anyio
async def test_text_content_is_sent_as_its_text_without_its_metadata() -> None:
    prompt = UserPromptPart(["Look:", TextContent("the app's note", metadata={"id": 7})])
    assert await converted(ModelRequest(parts=[prompt])) == [
        req.UserMessage((req.Text("Look:"), req.Text("the app's note")))
    ]


@pytest.mark.anyio
async def test_an_image_url_is_sent_by_its_url() -> None:
    # Not downloaded here (force_download is False): the Messages API fetches it.
    url = "https://example.com/cat.png"
    prompt = UserPromptPart(["What is it?", ImageUrl(url)])
    assert await converted(ModelRequest(parts=[prompt])) == [
        req.UserMessage((req.Text("What is it?"), req.Image(url=url)))
    ]


REMEDY = (
    "as it is: call model.prepare_messages(messages) first and pass the result (an Agent run "
    "does this), or leave the part out"
)


@pytest.mark.parametrize(
    "part",
    [
        SpeechPart(speaker="user", transcript="Hello?"),
        InstructionDeltaPart(id="agent:1", content="Be brief."),
        ToolAvailabilityDeltaPart(tools_added=["weather"]),
    ],
    ids=lambda part: type(part).__name__,
)
@pytest.mark.anyio
async def test_a_request_part_only_prepare_messages_translates_is_a_user_error(part: Any) -> None:
    with pytest.raises(UserError) as caught:
        await converted(ModelRequest(parts=[part]))
    assert str(caught.value) == f"ClaudeAgentModel cannot send a {type(part).__name__} {REMEDY}"


@pytest.mark.anyio
async def test_a_spoken_response_is_a_user_error_that_prepare_messages_resolves() -> None:
    history: list[ModelMessage] = [
        ModelRequest(parts=[SpeechPart(speaker="user", transcript="Hello?")]),
        ModelResponse(parts=[SpeechPart(speaker="assistant", transcript="Hi.")]),
    ]
    with pytest.raises(UserError) as caught:
        await converted(history[1])
    assert str(caught.value) == f"ClaudeAgentModel cannot replay a SpeechPart {REMEDY}"
    # The remedy the message gives works: the parts become text.
    model = ClaudeAgentModel(ProviderSettings())
    prepared = model.prepare_messages(history, ModelRequestParameters())
    assert isinstance(prepared[1], ModelResponse) and prepared[1].parts == [TextPart("Hi.")]
    assert await _to_provider_messages(prepared) == [
        req.UserMessage((req.Text("Hello?"),)),
        req.AssistantMessage((req.Text("Hi."),)),
    ]


@pytest.mark.anyio
async def test_a_call_the_provider_ran_is_replayed_with_its_text_result() -> None:
    # Executor mode's history: the call, and right after it its result (here text, not blocks).
    response = ModelResponse(
        parts=[
            NativeToolCallPart("lookup", {"x": 1}, "c1", provider_name="claude-agent-sdk"),
            NativeToolReturnPart("lookup", "20", "c1", provider_name="claude-agent-sdk"),
            TextPart("It is 20."),
        ]
    )
    assert await converted(response) == [
        req.AssistantMessage((req.ToolCall("c1", "lookup", {"x": 1}),)),
        req.ToolMessage((req.ToolResult("c1", "20", False),)),
        req.AssistantMessage((req.Text("It is 20."),)),
    ]


# -- settings


def test_a_setting_of_another_provider_warns_and_is_not_sent() -> None:
    # Another model's settings (ModelSettings is a TypedDict: any key reaches the model).
    settings: Any = {"anthropic_metadata": {"user_id": "u1"}, "max_tokens": 50}
    with pytest.warns(UnsupportedSettingWarning) as caught:
        options = _model_options(settings, None)
    (warning,) = caught
    assert str(warning.message) == (
        "The `anthropic_metadata` setting is not supported by ClaudeAgentModel (the Claude Code "
        "CLI has no switch for it) and will be ignored."
    )
    assert options == {"max_tokens": 50}
