"""Conversation history reaches the model natively: the app-executed tool loop through the CLI."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from sf_provider import (
    ClaudeAgentProvider,
    FunctionTool,
    GenerateResult,
    InvalidMessagesError,
    StreamStartPart,
    UnsupportedRequestError,
)
from sf_provider._mapping import ResultCollector
from sf_provider.testing import RecordedRequest, ScriptedMessagesAPI, reply, text, tool_use
from sf_provider.tools import ToolOutput

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

TOOLS = [
    FunctionTool(
        name="get_weather",
        input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
    ),
    FunctionTool(
        name="convert",
        input_schema={"type": "object", "properties": {"celsius": {"type": "number"}}},
    ),
]

SCRIPT = [
    reply(
        text("Checking both."),
        tool_use("get_weather", {"city": "Paris"}),
        tool_use("get_weather", {"city": "Tokyo"}),
    ),
    reply(text("Converting."), tool_use("convert", {"celsius": 18})),
    reply(text("Paris is 64.4 °F; Tokyo's station is offline.")),
]


def app_runs(call_name: str, arguments: dict[str, Any]) -> tuple[Any, bool]:
    """The application's own tools: Tokyo's station fails."""
    if call_name == "get_weather":
        if arguments["city"] == "Tokyo":
            return "station offline", True
        return {"celsius": 18}, False
    return "64.4 °F", False


def results_message(result: GenerateResult) -> dict[str, Any]:
    content = []
    for call in result.tool_calls:
        output, failed = app_runs(call.tool_name, call.input)
        content.append(
            {"type": "tool-result", "tool_call_id": call.tool_call_id, "output": output,
             "is_error": failed}
        )  # fmt: skip
    return {"role": "tool", "content": content}


def assert_native_replay(request: RecordedRequest, messages: list[dict[str, Any]]) -> None:
    """The request carries every prior call and result as native blocks with the app's ids."""
    uses = {b["id"]: b for b in request.tool_uses()}
    results = {b["tool_use_id"]: b for b in request.tool_results()}
    for message in messages:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block["type"] == "tool-call":
                use = uses[block["tool_call_id"]]
                assert use["name"] == f"mcp__sf__{block['tool_name']}"
                assert use["input"] == block["input"]
            if block["type"] == "tool-result":
                sent = results[block["tool_call_id"]]
                output = block["output"]
                expected = output if isinstance(output, str) else '{"celsius": 18}'
                # As the CLI records its own results: a success as a text block, an error as text.
                if not block["is_error"]:
                    expected = [{"type": "text", "text": expected}]
                assert sent["content"] == expected
                assert bool(sent.get("is_error")) == block["is_error"]
    calls = sum(1 for m in messages for b in m["content"] if isinstance(b, dict)
                and b["type"] == "tool-call")  # fmt: skip
    assert len(uses) == calls and len(results) == calls, "nothing flattened, nothing extra"
    roles = [m["role"] for m in request.messages if m["role"] != "system"]
    assert all(a != b for a, b in itertools.pairwise(roles)), roles


async def test_a_three_turn_app_executed_loop_replays_history_natively() -> None:
    async with ScriptedMessagesAPI(SCRIPT) as api:
        provider = ClaudeAgentProvider(api.settings())
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in °F?"}]
        for _ in range(3):
            result = await provider.generate(messages, tools=TOOLS)
            if result.finish_reason != "tool-calls":
                break
            messages += [result.assistant_message(), results_message(result)]
    assert result.text == "Paris is 64.4 °F; Tokyo's station is offline."
    assert len(api.requests) == 3, "one model call per generate, no hidden extra turn"
    assert len(api.requests[0].messages) >= 1
    assert_native_replay(api.requests[1], messages[:3])
    assert_native_replay(api.requests[2], messages)
    first_ids = [c["id"] for c in api.requests[2].tool_uses()]
    assert first_ids == ["toolu_scripted_0001", "toolu_scripted_0002", "toolu_scripted_0004"]
    errors = [b for b in api.requests[2].tool_results() if b.get("is_error")]
    assert [b["content"] for b in errors] == ["station offline"]


async def test_the_same_loop_through_stream() -> None:
    async with ScriptedMessagesAPI(SCRIPT) as api:
        provider = ClaudeAgentProvider(api.settings())
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in °F?"}]
        for _ in range(3):
            collector = ResultCollector()
            async for part in provider.stream(messages, tools=TOOLS):
                collector.add(part)
            result = collector.result()
            if result.finish_reason != "tool-calls":
                break
            messages += [result.assistant_message(), results_message(result)]
    assert result.text == "Paris is 64.4 °F; Tokyo's station is offline."
    assert_native_replay(api.requests[2], messages)


async def test_history_in_executor_mode_is_replayed_natively_too() -> None:
    runs: list[dict[str, Any]] = []
    tool = FunctionTool(
        name="get_weather",
        input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
        executor=lambda arguments: runs.append(arguments) or "sunny",
    )
    history = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [
            {"type": "tool-call", "tool_call_id": "app-1", "tool_name": "get_weather",
             "input": {"city": "Paris"}}]},
        {"role": "tool", "content": [
            {"type": "tool-result", "tool_call_id": "app-1", "output": "rainy"}]},
        {"role": "user", "content": "And Rome?"},
    ]  # fmt: skip
    script = [reply(tool_use("get_weather", {"city": "Rome"})), reply(text("Rome: sunny."))]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings())
        result = await provider.generate(history, tools=[tool])
    assert result.text == "Rome: sunny." and runs == [{"city": "Rome"}]
    first = api.requests[0]
    assert [b["id"] for b in first.tool_uses()] == ["app-1"]
    assert [(b["tool_use_id"], b["content"]) for b in first.tool_results()] == [
        ("app-1", [{"type": "text", "text": "rainy"}])
    ]
    turns = [m for m in first.messages if m["role"] != "system"]  # the CLI's own entries aside
    assert turns[-1]["role"] == "user"
    assert "And Rome?" in str(turns[-1]["content"])


async def test_an_image_in_the_prompt_reaches_the_model_as_an_image_block() -> None:
    pixel = (
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJ"
        "RU5ErkJggg=="
    )
    async with ScriptedMessagesAPI([reply(text("A pixel."))]) as api:
        provider = ClaudeAgentProvider(api.settings())
        result = await provider.generate(
            [{"role": "user", "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image", "url": f"data:image/png;base64,{pixel}"}]}]
        )  # fmt: skip
    assert result.text == "A pixel."
    images = api.requests[0].blocks("image")
    assert [i["source"] for i in images] == [
        {"type": "base64", "media_type": "image/png", "data": pixel}
    ]


@pytest.mark.parametrize("later", [False, True], ids=["answering-the-result", "in-the-history"])
async def test_an_image_in_a_tool_result_reaches_the_model_inside_the_result(later: bool) -> None:
    pixel = (
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJ"
        "RU5ErkJggg=="
    )
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "What is on the screen?"},
        {"role": "assistant", "content": [
            {"type": "tool-call", "tool_call_id": "toolu_1", "tool_name": "get_weather",
             "input": {"city": "Paris"}}]},
        {"role": "tool", "content": [
            {"type": "tool-result", "tool_call_id": "toolu_1", "content": [
                {"type": "text", "text": "the map:"},
                {"type": "image", "data": pixel, "media_type": "image/png"}]}]},
    ]  # fmt: skip
    if later:
        messages += [
            {"role": "assistant", "content": "A map of Paris."},
            {"role": "user", "content": "And the colour?"},
        ]
    async with ScriptedMessagesAPI([reply(text("Blue."))]) as api:
        provider = ClaudeAgentProvider(api.settings())
        assert (await provider.generate(messages, tools=TOOLS)).text == "Blue."
    (result,) = api.requests[0].blocks("tool_result")
    assert result["content"][:2] == [  # (the CLI may append its own reminders to the last one)
        {"type": "text", "text": "the map:"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": pixel}},
    ]


@pytest.mark.parametrize("warm", [0, 1], ids=["fresh", "continued"])
async def test_an_image_an_executor_returned_is_in_the_response_messages_and_replayed(
    warm: int,
) -> None:
    pixel = (
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJ"
        "RU5ErkJggg=="
    )
    screen = [{"type": "text", "text": "the screen:"},
              {"type": "image", "data": pixel, "media_type": "image/png"}]  # fmt: skip
    shot = FunctionTool(
        name="screenshot",
        executor=lambda arguments: ToolOutput(
            content=[screen[0], {"type": "image", "data": pixel, "mimeType": "image/png"}]
        ),
    )
    script = [reply(tool_use("screenshot", {})), reply(text("Blue.")), reply(text("Square."))]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=warm))
        first = await provider.generate("What is on the screen?", tools=[shot])
        assert first.response_messages[1]["content"] == [
            {"type": "tool-result", "tool_call_id": "toolu_scripted_0001", "content": screen,
             "is_error": False}
        ]  # fmt: skip
        history = [
            {"role": "user", "content": "What is on the screen?"},
            *first.response_messages,
            {"role": "user", "content": "Its shape?"},
        ]
        second = await provider.generate(history, tools=[shot])
        await provider.aclose()
    assert second.text == "Square."
    assert second.provider_details["process"] == ("continued" if warm else "fresh")
    sent = api.requests[2].blocks("tool_result")
    assert [b["content"][1]["source"]["data"] for b in sent] == [pixel]


async def test_an_empty_assistant_turn_is_left_out_and_the_user_turns_join() -> None:
    # As the README says (and pydantic-ai's Anthropic model does): nothing is sent for it.
    history = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "second"},
    ]
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        await provider.generate(history)
    turns = [m for m in api.requests[0].messages if m["role"] != "system"]
    assert [m["role"] for m in turns] == ["user"]
    assert [b["text"].strip() for b in turns[0]["content"]] == ["first", "second"]


async def test_unsigned_reasoning_in_history_is_flattened_with_a_warning() -> None:
    history = [
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "content": [{"type": "reasoning", "text": "thinking aloud"},
                                          {"type": "text", "text": "A1"}]},
        {"role": "user", "content": "Q2"},
    ]  # fmt: skip
    async with ScriptedMessagesAPI([reply(text("A2"))]) as api:
        provider = ClaudeAgentProvider(api.settings())
        parts = [p async for p in provider.stream(history)]
    start = parts[0]
    assert isinstance(start, StreamStartPart)
    assert [w.code for w in start.warnings] == ["history-flattened"]
    assert "<reasoning>thinking aloud</reasoning>" in str(api.requests[0].messages)


async def test_malformed_history_fails_before_anything_starts() -> None:
    async with ScriptedMessagesAPI([]) as api:
        provider = ClaudeAgentProvider(api.settings())
        with pytest.raises(InvalidMessagesError, match="no matching tool call"):
            provider.stream(
                [{"role": "user", "content": "x"},
                 {"role": "tool", "content": [
                     {"type": "tool-result", "tool_call_id": "ghost", "output": "?"}]}]
            )  # fmt: skip
    assert api.all_requests == []


@pytest.mark.parametrize("tool_choice", ["auto", "none"])
async def test_tool_history_without_tools_fails_before_anything_starts(tool_choice: str) -> None:
    """The Messages API refuses tool blocks in a request that defines no tools: the query
    failed with the API's 400 only after the CLI had sent it three times."""
    history = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": [
            {"type": "tool-call", "tool_call_id": "t1", "tool_name": "get_weather",
             "input": {}}]},
        {"role": "tool", "content": [
            {"type": "tool-result", "tool_call_id": "t1", "output": "sunny"}]},
    ]  # fmt: skip
    async with ScriptedMessagesAPI([]) as api:
        provider = ClaudeAgentProvider(api.settings())
        with pytest.raises(InvalidMessagesError, match="refuses those in a request that defines"):
            provider.stream(history, tool_choice=tool_choice)
    assert api.all_requests == []


async def test_history_needs_an_isolated_config_dir() -> None:
    async with ScriptedMessagesAPI([]) as api:
        provider = ClaudeAgentProvider(api.settings(isolate=False))
        with pytest.raises(UnsupportedRequestError, match="isolate=True"):
            provider.stream(
                [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                 {"role": "user", "content": "c"}]
            )  # fmt: skip


@pytest.mark.parametrize("model", [None, "opus", "claude-opus-5-5"])
async def test_signed_thinking_in_the_history_reaches_the_model(model: str | None) -> None:
    """The CLI replays a transcript's thinking only from turns of the model it runs: the
    transcript names that model, learnt from the CLI when the settings name none or an alias."""
    history = [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": [
            {"type": "reasoning", "text": "Oslo needs a lookup.", "signature": "sig-oslo"},
            {"type": "tool-call", "tool_call_id": "app-1", "tool_name": "get_weather",
             "input": {"city": "Oslo"}}]},
        {"role": "tool", "content": [
            {"type": "tool-result", "tool_call_id": "app-1", "output": "snow"}]},
    ]  # fmt: skip
    async with ScriptedMessagesAPI([reply(text("Oslo: snow."))]) as api:
        provider = ClaudeAgentProvider(api.settings(model=model))
        result = await provider.generate(history, tools=TOOLS)
    assert result.text == "Oslo: snow."
    (request,) = api.requests
    assert request.blocks("thinking") == [
        {"type": "thinking", "thinking": "Oslo needs a lookup.", "signature": "sig-oslo"}
    ]
