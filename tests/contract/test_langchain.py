"""The LangChain adapter: LangChain runs its own tools; history reaches the model natively."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import BaseTool, tool

from sf_provider import StreamRetractionError
from sf_provider import _request as req
from sf_provider.adapters.langchain import ChatClaudeAgent, _provider_messages
from sf_provider.testing import (
    RecordedRequest,
    Reply,
    ScriptedMessagesAPI,
    fault,
    reply,
    result_text,
    text,
    tool_use,
)

pytestmark = [pytest.mark.cli]

ROOT = Path(__file__).resolve().parents[2]
ANSWER = "(2 + 3) * 4 = 20."

runs: Counter[str] = Counter()


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    runs["add"] += 1
    return a + b


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    runs["multiply"] += 1
    return a * b


TOOLS: dict[str, BaseTool] = {"add": add, "multiply": multiply}


@pytest.fixture(autouse=True)
def _reset_runs() -> None:
    runs.clear()


def scripted_model(request: RecordedRequest) -> Reply:
    """Calls add, then (having read add's result) multiply, then answers from both results."""
    names = {b["id"]: b["name"].rsplit("__", 1)[-1] for b in request.tool_uses()}
    results = {names[b["tool_use_id"]]: result_text(b) for b in request.tool_results()}
    if "add" not in results:
        return reply(text("Adding first."), tool_use("add", {"a": 2, "b": 3}))
    if "multiply" not in results:
        return reply(tool_use("multiply", {"a": int(results["add"]), "b": 4}))
    return reply(text(f"(2 + 3) * 4 = {results['multiply']}."))


def run_tools(message: AIMessage) -> list[ToolMessage]:
    """What an agent loop does with a reply: run each call with the LangChain tool."""
    return [TOOLS[call["name"]].invoke(call) for call in message.tool_calls]


def start() -> list[BaseMessage]:
    return [SystemMessage("You are a calculator."), HumanMessage("What is (2 + 3) * 4?")]


def assert_native_replay(api: ScriptedMessagesAPI, messages: list[BaseMessage]) -> None:
    """The last request carries every call and result as native blocks with LangChain's ids."""
    ids = [c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    assert len(ids) == 2
    last = api.requests[-1]
    assert [b["id"] for b in last.tool_uses()] == ids
    assert [b["tool_use_id"] for b in last.tool_results()] == ids
    assert [b["content"] for b in last.tool_results()] == [
        [{"type": "text", "text": "5"}],
        [{"type": "text", "text": "20"}],
    ]
    assert [b["input"] for b in last.tool_uses()] == [{"a": 2, "b": 3}, {"a": 5, "b": 4}]
    assert "You are a calculator." in str(last.body.get("system"))


def assert_usage(message: AIMessage) -> None:
    usage = message.usage_metadata
    assert usage is not None
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert set(usage.get("input_token_details", {})) == {"cache_read", "cache_creation"}


@pytest.mark.anyio
async def test_an_agent_loop_runs_langchain_tools_and_replays_them_natively() -> None:
    async with ScriptedMessagesAPI(scripted_model) as api:
        model = ChatClaudeAgent(settings=api.settings()).bind_tools([add, multiply])
        messages = start()
        for _ in range(4):
            answer = await model.ainvoke(messages)
            messages.append(answer)
            if not answer.tool_calls:
                break
            messages += run_tools(answer)
    assert answer.content == ANSWER
    assert runs == {"add": 1, "multiply": 1}, "each tool ran once, by LangChain"
    assert len(api.requests) == 3, "one model call per ainvoke"
    assert api.requests[0].tool_names == ["mcp__sf__add", "mcp__sf__multiply"]
    assert_native_replay(api, messages)
    first = messages[2]
    assert isinstance(first, AIMessage) and first.text == "Adding first."
    assert first.content == [  # as ChatAnthropic gives a reply with calls
        {"type": "text", "text": "Adding first."},
        {"type": "tool_use", "id": first.tool_calls[0]["id"], "name": "add",
         "input": {"a": 2, "b": 3}},
    ]  # fmt: skip
    assert first.response_metadata["finish_reason"] == "tool-calls"
    assert answer.response_metadata["finish_reason"] == "stop"
    assert answer.response_metadata["session_id"]
    assert_usage(answer)


@pytest.mark.anyio
async def test_the_same_loop_through_astream() -> None:
    texts: list[str] = []
    async with ScriptedMessagesAPI(scripted_model) as api:
        model = ChatClaudeAgent(settings=api.settings()).bind_tools([add, multiply])
        messages = start()
        for _ in range(4):
            texts.clear()
            full: AIMessageChunk | None = None
            async for chunk in model.astream(messages):
                assert isinstance(chunk, AIMessageChunk)
                texts.append(chunk.text)
                full = chunk if full is None else full + chunk
            assert full is not None
            messages.append(full)
            if not full.tool_calls:
                break
            messages += run_tools(full)
    assert "".join(texts) == ANSWER and len([t for t in texts if t]) > 1, "text streams"
    # With tools bound, content streams as indexed blocks, as ChatAnthropic's does.
    assert full.text == ANSWER
    assert [(b["type"], b.get("text")) for b in full.content_blocks] == [("text", ANSWER)]
    assert runs == {"add": 1, "multiply": 1}
    calls = [c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    assert [(c["name"], c["args"]) for c in calls] == [
        ("add", {"a": 2, "b": 3}),
        ("multiply", {"a": 5, "b": 4}),
    ]
    assert_native_replay(api, messages)
    assert_usage(full)
    assert full.response_metadata["finish_reason"] == "stop"


@contextmanager
def api_in_background(script: Any) -> Iterator[ScriptedMessagesAPI]:
    """The (async) scripted API on an event loop of its own thread, for sync code to call."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    api = ScriptedMessagesAPI(script)
    asyncio.run_coroutine_threadsafe(api.__aenter__(), loop).result(10)
    try:
        yield api
    finally:
        asyncio.run_coroutine_threadsafe(api.__aexit__(None, None, None), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


def sync_loop(model: Any) -> tuple[AIMessage, list[BaseMessage]]:
    messages = start()
    for _ in range(4):
        answer = model.invoke(messages)
        messages.append(answer)
        if not answer.tool_calls:
            break
        messages += run_tools(answer)
    return answer, messages


def test_sync_invoke_works_from_plain_sync_code() -> None:
    with api_in_background(scripted_model) as api:
        model = ChatClaudeAgent(settings=api.settings()).bind_tools([add, multiply])
        answer, messages = sync_loop(model)
    assert answer.content == ANSWER
    assert runs == {"add": 1, "multiply": 1}
    assert_native_replay(api, messages)
    assert_usage(answer)


def test_sync_invoke_works_while_an_event_loop_runs() -> None:
    with api_in_background(scripted_model) as api:
        model = ChatClaudeAgent(settings=api.settings()).bind_tools([add, multiply])

        async def inside_a_loop() -> tuple[AIMessage, list[BaseMessage]]:
            return sync_loop(model)

        answer, _ = asyncio.run(inside_a_loop())
    assert answer.content == ANSWER and runs == {"add": 1, "multiply": 1}


def test_sync_stream_yields_text_chunks() -> None:
    with api_in_background([reply(text("A fairly long streamed answer."))]) as api:
        model = ChatClaudeAgent(settings=api.settings())
        chunks = list(model.stream("Say something."))
    assert "".join(c.text for c in chunks) == "A fairly long streamed answer."
    assert len([c for c in chunks if c.text]) > 1
    last = chunks[-1]
    assert isinstance(last, AIMessageChunk) and last.usage_metadata is not None


def test_leaving_a_sync_stream_early_stops_the_query() -> None:
    with api_in_background([reply(text("x" * 400))]) as api:
        model = ChatClaudeAgent(settings=api.settings())
        stream = model.stream("Long answer, please.")
        assert next(stream).text
        stream.close()  # cancels the worker's task: the CLI is stopped, its temp dir removed
    # The suite's leak check (conftest) fails if a CLI process or temp dir were left behind.


#: Sync `invoke` inside a running event loop (a notebook cell), interrupted (Ctrl-C) while the
#: model is asked: the API never answers, so the call ends only if the interrupt stops it.
INTERRUPTED_IN_A_LOOP = """
import asyncio, os, signal, subprocess
from sf_provider.adapters.langchain import ChatClaudeAgent
from sf_provider.testing import ScriptedMessagesAPI, fault


def interrupt(request):
    os.kill(os.getpid(), signal.SIGINT)
    return fault("hang")


async def a_notebook_cell(chat):
    return chat.invoke("Hi")


with ScriptedMessagesAPI(interrupt) as api:
    chat = ChatClaudeAgent(settings=api.settings(warm_processes=0))
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(a_notebook_cell(chat))
    except KeyboardInterrupt:
        ps = ["ps", "-ww", "-o", "args=", "--ppid", str(os.getpid())]
        out = subprocess.run(ps, capture_output=True, text=True, check=True).stdout
        left = [line for line in out.splitlines() if "claude" in line and "defunct" not in line]
        print("interrupted; requests:", len(api.requests), "CLIs left:", left)
    loop.close()
"""


def test_interrupting_a_sync_invoke_inside_a_running_loop_stops_its_query() -> None:
    # The call ran on a worker thread whose end the interrupted caller still waited for: the
    # cell hung until the answer came (here: never), and the CLI ran on.
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_IN_A_LOOP],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "interrupted; requests: 1 CLIs left: []", done.stderr


def test_tool_choice_maps_to_the_providers() -> None:
    model = ChatClaudeAgent()
    choices = {
        None: "auto",
        "auto": "auto",
        "none": "none",
        "any": "required",
        "required": "required",
        "multiply": {"type": "tool", "name": "multiply"},
        "add": {"type": "tool", "name": "add"},
    }
    for given, expected in choices.items():
        bound: Any = model.bind_tools([add, multiply], tool_choice=given)
        assert bound.kwargs["tool_choice"] == expected, given
        assert [t["name"] for t in bound.kwargs["tools"]] == ["add", "multiply"]
    # A name not bound: tests/unit/test_tool_rules.py, the same words on every door.


def test_bound_tools_are_json_schema_definitions() -> None:
    bound: Any = ChatClaudeAgent().bind_tools([add])
    (definition,) = bound.kwargs["tools"]
    assert definition["name"] == "add" and definition["description"] == "Add two integers."
    schema = definition["input_schema"]
    assert schema["type"] == "object" and set(schema["properties"]) == {"a", "b"}


@pytest.mark.anyio
async def test_tool_choice_required_reaches_the_request() -> None:
    async with ScriptedMessagesAPI([reply(tool_use("add", {"a": 1, "b": 1}))]) as api:
        model = ChatClaudeAgent(settings=api.settings()).bind_tools([add], tool_choice="add")
        answer = await model.ainvoke("One plus one?")
    assert [c["name"] for c in answer.tool_calls] == ["add"]
    body = api.requests[0].body
    assert body["tool_choice"] == {"type": "tool", "name": "mcp__sf__add"}
    assert body["thinking"] == {"type": "disabled"}  # the API refuses a forced call with it


def test_messages_convert_faithfully() -> None:
    pixel = "iVBORw0KGgo="
    messages: list[BaseMessage] = [
        SystemMessage("Be brief."),
        HumanMessage(
            [
                {"type": "text", "text": "Look:"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{pixel}"}},
            ]
        ),
        AIMessage("Adding.", tool_calls=[{"name": "add", "args": {"a": 1}, "id": "c1"}]),
        ToolMessage("boom", tool_call_id="c1", status="error"),
    ]
    assert _provider_messages(messages)[0] == [
        req.SystemMessage("Be brief."),
        req.UserMessage((req.Text("Look:"), req.Image(url=f"data:image/png;base64,{pixel}"))),
        req.AssistantMessage((req.Text("Adding."), req.ToolCall("c1", "add", {"a": 1}))),
        req.ToolMessage((req.ToolResult("c1", "boom", is_error=True),)),
    ]


@pytest.mark.anyio
async def test_a_cut_stream_after_streamed_text_raises_a_retryable_error() -> None:
    script = [fault("drop_mid_stream", events=5), reply(text("Five, said twice over."))]
    streamed: list[str] = []
    async with ScriptedMessagesAPI(script) as api:
        model = ChatClaudeAgent(settings=api.settings())
        with pytest.raises(StreamRetractionError, match="cannot be taken back") as caught:
            async for chunk in model.astream("Five?"):
                streamed.append(chunk.text)
    assert streamed and caught.value.retryable


@pytest.mark.anyio
async def test_ainvoke_folds_a_cut_stream_correctly() -> None:
    script = [fault("drop_mid_stream", events=5), reply(text("Five, said twice over."))]
    async with ScriptedMessagesAPI(script) as api:
        answer = await ChatClaudeAgent(settings=api.settings()).ainvoke("Five?")
    assert answer.content == "Five, said twice over."


#: A reply that goes on past a stop sequence and calls a tool after it.
PAST_THE_STOP = reply(
    text("Thought: add them.\nObservation: made up"), tool_use("add", {"a": 2, "b": 3})
)


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True], ids=["invoke", "bound-stream"])
async def test_stop_ends_the_answer_before_the_first_stop_sequence(streamed: bool) -> None:
    """`stop` was refused; now the provider's stop sequences, reported as ChatAnthropic does."""
    async with ScriptedMessagesAPI([PAST_THE_STOP]) as api:
        chat = ChatClaudeAgent(settings=api.settings(warm_processes=0)).bind_tools([add])
        if streamed:
            chunks = [c async for c in chat.bind(stop=["Observation:"]).astream("2+3?")]
            answer: BaseMessage = chunks[0]
            for chunk in chunks[1:]:
                answer += chunk  # type: ignore[assignment]
        else:
            answer = await chat.ainvoke("2+3?", stop=["Observation:"])
    assert isinstance(answer, AIMessage)
    assert answer.text == "Thought: add them.\n"
    assert answer.tool_calls == [], "written after the stop: the API would never have sent it"
    metadata = answer.response_metadata
    assert (metadata["stop_reason"], metadata["stop_sequence"]) == ("stop_sequence", "Observation:")
    assert len(api.requests) == 1


def test_importing_sf_provider_does_not_import_langchain() -> None:
    code = "import sf_provider, sys; assert 'langchain_core' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_the_example_runs_offline() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "langchain_agent.py")],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "tool add(" in done.stdout and "tool multiply(" in done.stdout
    assert "answer: (2 + 3) * 4 = 20." in done.stdout
