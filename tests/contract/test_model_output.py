"""Model output read as what it is (issue 12, item 7), through the real CLI.

- A plain JSON answer is text: only the documented envelope shapes are calls.
- An answer cut at the output limit is a result (finish reason `length` and the text), not a
  lost connection; the CLI's own resume requests are counted, not hidden.
- In single-turn mode the app answers every call, unknown names included: the CLI's own "No
  such tool" result is never reported, so an Agent's retry is the one result for its call.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from pydantic_ai import Agent

from sf_provider import ClaudeAgentProvider, FunctionTool
from sf_provider.adapters.langchain import ChatClaudeAgent
from sf_provider.adapters.pydantic_ai import ClaudeAgentModel
from sf_provider.testing import ScriptedMessagesAPI, reply, result_text, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

WEATHER = FunctionTool(
    name="get_weather",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)

#: The follow-up the CLI sends after a reply that stopped at max_tokens (2.1.332 wraps it in a
#: `<system-reminder>`; 2.1.330 sent it bare).
RESUME_NUDGE = "Output token limit hit. Resume directly"


def last_user_text(messages: list[dict[str, Any]]) -> str:
    content = messages[-1]["content"]
    if isinstance(content, str):
        return content
    return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))


# -- a plain JSON answer is text


PLAIN_JSON = ['{"name": "Paris"}', '{"id": 7, "name": "Widget"}', '{"tool": "hammer"}']


@pytest.mark.parametrize("answer", PLAIN_JSON)
async def test_a_plain_json_answer_is_text_in_single_turn(answer: str) -> None:
    async with ScriptedMessagesAPI([reply(text(answer))]) as api:
        provider = ClaudeAgentProvider(api.settings())
        result = await provider.generate("Capital of France, as JSON?", tools=[WEATHER])
    assert result.mode == "single-turn"
    assert (result.text, result.tool_calls, result.finish_reason) == (answer, [], "stop")
    assert len(api.requests) == 1


async def test_langchain_returns_a_plain_json_answer_as_content_not_a_call() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    async with ScriptedMessagesAPI([reply(text('{"name": "Paris"}'))]) as api:
        model = ChatClaudeAgent(settings=api.settings()).bind_tools([add])
        answer = await model.ainvoke([HumanMessage("Capital of France, as JSON?")])
    assert (answer.content, answer.tool_calls) == ('{"name": "Paris"}', [])
    assert answer.response_metadata["finish_reason"] == "stop"


# -- an answer cut at the output limit


@pytest.mark.parametrize("mode", ["single-turn", "executor"])
async def test_an_answer_the_cli_stops_resuming_finishes_with_length_and_its_text(
    mode: str,
) -> None:
    pieces = ["The list: one, two, ", "three, four, ", "five, six, ", "seven, eig"]
    script = [reply(text(piece), stop_reason="max_tokens") for piece in pieces]
    weather = WEATHER.model_copy(update={"executor": lambda arguments: "sunny"})
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(max_tokens=50))
        result = await provider.generate("List them.", tools=[weather], mode=mode)
    assert (result.finish_reason, result.raw_stop_reason) == ("length", "max_tokens")
    assert result.text == "".join(pieces)
    assert result.provider_details["output_limit_hits"] == 4
    # The CLI resumes a cut answer three times, in single-turn mode too; nothing runs meanwhile.
    assert len(api.requests) == 4
    assert [r.body["max_tokens"] for r in api.requests] == [50] * 4
    assert all(RESUME_NUDGE in last_user_text(r.messages) for r in api.requests[1:])
    assert api.remaining == 0 and not api.errors


async def test_a_resumed_answer_is_one_answer_made_of_its_pieces() -> None:
    script = [reply(text("The first half, "), stop_reason="max_tokens"), reply(text("the end."))]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(max_tokens=50))
        result = await provider.generate("Tell me.", tools=[WEATHER])
    assert (result.text, result.finish_reason) == ("The first half, the end.", "stop")
    assert result.provider_details["output_limit_hits"] == 1
    assert len(api.requests) == 2


# -- an unknown tool name in single-turn mode: the app's answer is the only one


@pytest.mark.parametrize("warm_processes", [0, 2], ids=["fresh", "warm"])
async def test_a_pydantic_ai_agent_retries_an_unknown_tool_name_end_to_end(
    warm_processes: int,
) -> None:
    script = [
        reply(tool_use("get_temperature", {"city": "Paris"}, offered=False)),  # no such tool
        reply(tool_use("get_celsius", {"city": "Paris"})),
        reply(text("Paris: 20 °C.")),
    ]
    runs: list[str] = []
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=warm_processes))
        agent = Agent(ClaudeAgentModel(provider))

        @agent.tool_plain
        def get_celsius(city: str) -> float:
            """Current temperature of a city in °C."""
            runs.append(city)
            return 20.0

        result = await agent.run("How warm is Paris?")
        await provider.aclose()
    assert (result.output, runs) == ("Paris: 20 °C.", ["Paris"])
    assert len(api.requests) == 3
    for request in api.requests:
        answered = Counter(b["tool_use_id"] for b in request.tool_results())
        assert answered == Counter(b["id"] for b in request.tool_uses()), "one result per call"
    [unknown] = api.requests[1].tool_results()
    assert unknown["is_error"] is True
    assert "Unknown tool name: 'get_temperature'" in result_text(unknown)
    assert "No such tool available" not in str(api.requests[2].messages)
