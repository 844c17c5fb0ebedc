"""Redacted thinking (the API's `redacted_thinking`: encrypted reasoning, opaque data, no text)
comes back in the result and goes back to the model as it came, through the real CLI.

The SDK drops the block from its AssistantMessage, so it is read from the stream. The API asks
for the thinking blocks of a turn that called tools to be sent back with its results: a block
lost here would change the next request whenever the conversation is not continued on the
process that holds it.
"""

from __future__ import annotations

import pytest

from sf_provider import ClaudeAgentProvider, FunctionTool, ReasoningEndPart
from sf_provider.testing import (
    Reply,
    ScriptedMessagesAPI,
    redacted_thinking,
    reply,
    text,
    tool_use,
)

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

MODEL = "claude-sonnet-5-5"  # named: the CLI replays thinking of the model it runs
WEATHER = FunctionTool(
    "get_weather",
    "Current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def first_turn() -> list[Reply]:
    return [reply(redacted_thinking("opaque-1"), tool_use("get_weather", {"city": "Paris"}))]


async def test_a_redacted_block_ends_with_its_data_in_the_stream() -> None:
    async with ScriptedMessagesAPI(first_turn()) as api:
        provider = ClaudeAgentProvider(api.settings(model=MODEL, warm_processes=0))
        ends = []
        async with provider.stream("Weather in Paris?", tools=[WEATHER]) as parts:
            async for part in parts:
                if isinstance(part, ReasoningEndPart):
                    ends.append(part)
    assert [(e.redacted, e.signature) for e in ends] == [("opaque-1", None)]


@pytest.mark.parametrize("appended", ["response_messages", "assistant_message"])
@pytest.mark.parametrize("warm_processes", [0, 1], ids=["fresh", "continued"])
async def test_a_redacted_block_goes_back_before_its_calls(
    warm_processes: int, appended: str
) -> None:
    """Either way of appending the reply carries the block (`assistant_message()` left it out:
    the model lost it, and the next step could not continue on the warm process)."""
    script = [*first_turn(), reply(text("Sunny in Paris."))]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(model=MODEL, warm_processes=warm_processes))
        first = await provider.generate("Weather in Paris?", tools=[WEATHER])
        (call,) = first.tool_calls
        assert first.final_reasoning[0].redacted == "opaque-1"
        assert first.response_messages[0]["content"][0] == {
            "type": "reasoning",
            "text": "",
            "redacted": "opaque-1",
        }
        reply_turns = (
            first.response_messages
            if appended == "response_messages"
            else [first.assistant_message()]
        )
        history = [
            {"role": "user", "content": "Weather in Paris?"},
            *reply_turns,
            {
                "role": "tool",
                "content": [
                    {"type": "tool-result", "tool_call_id": call.tool_call_id, "output": "sunny"}
                ],
            },
        ]
        second = await provider.generate(history, tools=[WEATHER])
        await provider.aclose()
    assert second.text == "Sunny in Paris."
    expected = "continued" if warm_processes else "fresh"
    assert second.provider_details["process"] == expected
    assistant = [m for m in api.requests[1].messages if m["role"] == "assistant"]
    assert [b["type"] for b in assistant[-1]["content"]] == ["redacted_thinking", "tool_use"]
    assert assistant[-1]["content"][0]["data"] == "opaque-1"


async def test_a_history_with_only_redacted_thinking_is_replayed_for_the_default_model() -> None:
    # The CLI replays thinking only from turns of the model it runs: with its default model
    # (an alias), the provider learns which model that is before it writes the transcript.
    history = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [
            {"type": "reasoning", "text": "", "redacted": "opaque-2"},
            {"type": "tool-call", "tool_call_id": "toolu_1", "tool_name": "get_weather",
             "input": {"city": "Paris"}},
        ]},
        {"role": "tool", "content": [
            {"type": "tool-result", "tool_call_id": "toolu_1", "output": "sunny"}]},
    ]  # fmt: skip
    async with ScriptedMessagesAPI([reply(text("Sunny."))]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))  # no model: the default
        await provider.generate(history, tools=[WEATHER])
    assistant = [m for m in api.requests[0].messages if m["role"] == "assistant"]
    assert [b["type"] for b in assistant[-1]["content"]] == ["redacted_thinking", "tool_use"]
