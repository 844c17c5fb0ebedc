"""A LangChain agent loop on `ChatClaudeAgent`, offline: the real bundled Claude Code CLI talks
to a scripted Messages API on 127.0.0.1, and LangChain runs the tools.

    python examples/langchain_agent.py

For the real model, drop the `ScriptedMessagesAPI` and build the model with
`ChatClaudeAgent(settings=ProviderSettings(model="claude-sonnet-5-5"))`.
"""

from __future__ import annotations

import asyncio

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import BaseTool, tool

from sf_provider.adapters.langchain import ChatClaudeAgent
from sf_provider.testing import RecordedRequest, Reply, ScriptedMessagesAPI, reply, text, tool_use


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


TOOLS: dict[str, BaseTool] = {"add": add, "multiply": multiply}


def scripted_model(request: RecordedRequest) -> Reply:
    """Stands in for Claude: reads the tool results it was sent and decides the next step."""
    names = {b["id"]: b["name"].rsplit("__", 1)[-1] for b in request.tool_uses()}
    texts = request.tool_result_texts()
    results = {
        names[b["tool_use_id"]]: t for b, t in zip(request.tool_results(), texts, strict=True)
    }
    if "add" not in results:
        return reply(text("Adding first."), tool_use("add", {"a": 2, "b": 3}))
    if "multiply" not in results:
        return reply(tool_use("multiply", {"a": int(results["add"]), "b": 4}))
    return reply(text(f"(2 + 3) * 4 = {results['multiply']}."))


async def main() -> None:
    async with ScriptedMessagesAPI(scripted_model) as api:
        model = ChatClaudeAgent(settings=api.settings()).bind_tools([add, multiply])
        messages: list[BaseMessage] = [HumanMessage("What is (2 + 3) * 4?")]
        while True:
            answer = await model.ainvoke(messages)
            assert isinstance(answer, AIMessage)
            messages.append(answer)
            if not answer.tool_calls:
                break
            for call in answer.tool_calls:
                result = TOOLS[call["name"]].invoke(call)
                print(f"tool {call['name']}({call['args']}) -> {result.content}")
                messages.append(result)
    print(f"answer: {answer.content}")
    print(f"usage: {answer.usage_metadata}")
    print(f"cost_usd: {answer.response_metadata['cost_usd']}")


if __name__ == "__main__":
    asyncio.run(main())
