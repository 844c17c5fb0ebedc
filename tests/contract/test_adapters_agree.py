"""One scenario, three front doors: the core provider, pydantic-ai and LangChain agree.

The same scripted model, the same two tools (run by the application or the framework, never by
the provider), through the real CLI: each path must produce the same tool calls with the same
arguments and the same final text.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool as langchain_tool
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, ToolCallPart

from sf_provider import ClaudeAgentProvider, FunctionTool
from sf_provider.adapters.langchain import ChatClaudeAgent
from sf_provider.adapters.pydantic_ai import ClaudeAgentModel
from sf_provider.testing import RecordedRequest, Reply, ScriptedMessagesAPI, reply, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

PROMPT = "How warm is Lyon in °F?"
EXPECTED_CALLS = [("get_celsius", {"city": "Lyon"}), ("to_fahrenheit", {"celsius": 15.0})]
EXPECTED_TEXT = "Lyon: 15 °C = 59 °F."


def get_celsius(city: str) -> float:
    """Current temperature of a city in °C."""
    return 15.0


def to_fahrenheit(celsius: float) -> float:
    """Convert °C to °F."""
    return celsius * 9 / 5 + 32


def _result(block: dict[str, Any]) -> float:
    content = block["content"]
    raw = content if isinstance(content, str) else "".join(c.get("text", "") for c in content)
    return float(json.loads(raw))


def scripted_model(request: RecordedRequest) -> Reply:
    """Asks for the °C, then converts what it got, then answers from both results."""
    results = [_result(b) for b in request.tool_results()]
    if not results:
        return reply(tool_use("get_celsius", {"city": "Lyon"}))
    if len(results) == 1:
        return reply(tool_use("to_fahrenheit", {"celsius": results[0]}))
    return reply(text(f"Lyon: {results[0]:g} °C = {results[1]:g} °F."))


Outcome = tuple[list[tuple[str, dict[str, Any]]], str]


async def through_the_core_provider(api: ScriptedMessagesAPI) -> Outcome:
    functions = {"get_celsius": get_celsius, "to_fahrenheit": to_fahrenheit}
    tools = [FunctionTool.from_function(f) for f in functions.values()]
    tools = [t.model_copy(update={"executor": None}) for t in tools]  # the app runs them
    provider = ClaudeAgentProvider(api.settings())
    messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
    calls: list[tuple[str, dict[str, Any]]] = []
    while (result := await provider.generate(messages, tools=tools)).tool_calls:
        calls += [(c.tool_name, c.input) for c in result.tool_calls]
        outputs = [
            {
                "type": "tool-result",
                "tool_call_id": c.tool_call_id,
                "output": functions[c.tool_name](**c.input),
            }
            for c in result.tool_calls
        ]
        messages += [result.assistant_message(), {"role": "tool", "content": outputs}]
    return calls, result.text


async def through_pydantic_ai(api: ScriptedMessagesAPI) -> Outcome:
    agent = Agent(ClaudeAgentModel(ClaudeAgentProvider(api.settings())))
    agent.tool_plain(get_celsius)
    agent.tool_plain(to_fahrenheit)
    run = await agent.run(PROMPT)
    calls = [
        (part.tool_name, part.args_as_dict())
        for message in run.all_messages()
        if isinstance(message, ModelResponse)
        for part in message.parts
        if isinstance(part, ToolCallPart)
    ]
    return calls, run.output


async def through_langchain(api: ScriptedMessagesAPI) -> Outcome:
    tools = {f.__name__: langchain_tool(f) for f in (get_celsius, to_fahrenheit)}
    model = ChatClaudeAgent(settings=api.settings()).bind_tools(list(tools.values()))
    messages: list[BaseMessage] = [HumanMessage(PROMPT)]
    calls: list[tuple[str, dict[str, Any]]] = []
    while True:
        answer = await model.ainvoke(messages)
        assert isinstance(answer, AIMessage)
        if not answer.tool_calls:
            return calls, str(answer.content)
        messages.append(answer)
        for call in answer.tool_calls:
            calls.append((call["name"], call["args"]))
            output = tools[call["name"]].invoke(call["args"])
            messages.append(ToolMessage(content=str(output), tool_call_id=call["id"]))


PATHS: dict[str, Callable[[ScriptedMessagesAPI], Awaitable[Outcome]]] = {
    "core": through_the_core_provider,
    "pydantic-ai": through_pydantic_ai,
    "langchain": through_langchain,
}


@pytest.mark.parametrize("path", list(PATHS))
async def test_every_front_door_yields_the_same_calls_and_answer(path: str) -> None:
    async with ScriptedMessagesAPI(scripted_model) as api:
        calls, final_text = await PATHS[path](api)
    assert calls == EXPECTED_CALLS
    assert final_text == EXPECTED_TEXT
    assert len(api.requests) == 3, "one model call per step, no hidden extra turn"
    assert api.errors == []
