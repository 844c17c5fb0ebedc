"""A pydantic-ai Agent on Claude through sf-provider, offline.

The Agent runs its own two tools (single-turn mode); the model is the real bundled Claude Code CLI
talking to a scripted Messages API on 127.0.0.1, so no credentials or network are needed.

    python examples/pydantic_ai_agent.py
"""

from __future__ import annotations

import anyio
from pydantic_ai import Agent

from sf_provider import ClaudeAgentProvider
from sf_provider.adapters.pydantic_ai import ClaudeAgentModel
from sf_provider.testing import RecordedRequest, Reply, ScriptedMessagesAPI, reply, text, tool_use


def scripted_model(request: RecordedRequest) -> Reply:
    """Plays the model: look up the city, then convert, then answer from both results."""
    results = request.tool_result_texts()
    if not results:
        return reply(tool_use("get_temperature", {"city": "Paris"}))
    if len(results) == 1:
        return reply(tool_use("to_fahrenheit", {"celsius": float(str(results[0]))}))
    return reply(text(f"Paris is {results[0]} °C, that is {results[1]} °F."))


async def main() -> None:
    async with ScriptedMessagesAPI(scripted_model) as api:
        agent = Agent(ClaudeAgentModel(ClaudeAgentProvider(api.settings())))

        @agent.tool_plain
        def get_temperature(city: str) -> float:
            """Current temperature of a city in °C."""
            return 21.0

        @agent.tool_plain
        def to_fahrenheit(celsius: float) -> float:
            """Convert °C to °F."""
            return celsius * 9 / 5 + 32

        result = await agent.run("How warm is it in Paris, in °F?")
    print(result.output)
    print(f"model requests: {len(api.requests)}, usage: {result.usage.total_tokens} tokens")


if __name__ == "__main__":
    anyio.run(main)
