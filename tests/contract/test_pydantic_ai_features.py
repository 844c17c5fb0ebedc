"""pydantic-ai features as its users combine them, through a real `Agent` on the real CLI.

Each test is a feature pydantic-ai's own models serve (history a capability rewrote, another
provider's history, `NativeOutput`'s retries, the Agent's lifecycle, stream cancellation) and
what the request the scripted API received shows of it, the warning that says what could not
be sent, or the processes left.
"""

from __future__ import annotations

import json

import pytest
from conftest import cli_processes, leftover_query_dirs, no_cli_left
from pydantic import BaseModel
from pydantic_ai import Agent, BinaryContent, NativeOutput
from pydantic_ai.capabilities.process_history import ProcessHistory
from pydantic_ai.exceptions import RunCancelled
from pydantic_ai.messages import (
    CompactionPart,
    FilePart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    UserPromptPart,
)
from pydantic_ai.models import (
    _conversation_summary_text,  # pyright: ignore[reportPrivateUsage]
)

from sf_provider import ClaudeAgentProvider
from sf_provider.adapters.pydantic_ai import ClaudeAgentModel
from sf_provider.testing import (
    RecordedRequest,
    ScriptedMessagesAPI,
    ScriptItem,
    fault,
    reply,
    text,
    tool_use,
)

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

# A 1x1 PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


def model_for(api: ScriptedMessagesAPI) -> ClaudeAgentModel:
    return ClaudeAgentModel(ClaudeAgentProvider(api.settings()))


def texts(request: RecordedRequest, role: str) -> list[str]:
    """The text blocks of the request's messages of one role, in order."""
    out: list[str] = []
    for message in request.messages:
        if message["role"] != role:
            continue
        content = message["content"]
        if isinstance(content, str):
            out.append(content)
        else:
            out += [str(b["text"]) for b in content if b.get("type") == "text"]
    return out


# -- history a capability rewrote


async def test_a_summary_a_history_processor_wrote_is_sent_as_pydantic_ai_frames_it() -> None:
    """A `CompactionPart` in a request (an application's summary of the earlier conversation,
    as Pydantic AI Harness's `SummarizingCompaction` writes it) was a `UserError` ("cannot send
    a CompactionPart"); pydantic-ai's models send it as framed user text."""

    def summarise(messages: list[ModelMessage]) -> list[ModelMessage]:
        if len(messages) <= 1:
            return messages
        summary = ModelRequest(parts=[CompactionPart("The user asked about Paris; it is sunny.")])
        return [summary, *messages[-1:]]

    async with ScriptedMessagesAPI([reply(text("Sunny.")), reply(text("Still sunny."))]) as api:
        agent = Agent(model_for(api), capabilities=[ProcessHistory(summarise)])
        first = await agent.run("Weather in Paris?")
        second = await agent.run("And now?", message_history=first.all_messages())
    assert second.output == "Still sunny."
    assert texts(api.requests[1], "user") == [
        _conversation_summary_text("The user asked about Paris; it is sunny."),
        "And now?",
    ]
    assert "Sunny." not in texts(api.requests[1], "assistant"), "the summary replaced it"


# -- another provider's history


async def test_another_providers_compaction_is_replayed_as_text_with_a_warning() -> None:
    """Anthropic's readable compaction summary and OpenAI's encrypted one in a response were a
    `UserError` ("cannot replay a CompactionPart"): the readable one is told as text, the
    encrypted one (nothing Claude can read) is left out, each with a warning."""
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("q1")]),
        ModelResponse(
            parts=[
                CompactionPart("Earlier: the user likes tea.", provider_name="anthropic"),
                TextPart("a1"),
            ],
            provider_name="anthropic",
        ),
        ModelRequest(parts=[UserPromptPart("q2")]),
        ModelResponse(
            parts=[
                CompactionPart(
                    None,
                    id="cmp_1",
                    provider_name="openai",
                    provider_details={"encrypted_content": "gAAAA"},
                ),
                TextPart("a2"),
            ],
            provider_name="openai",
        ),
    ]
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        with pytest.warns(UserWarning) as seen:
            result = await Agent(model_for(api)).run("q3", message_history=history)
    assert result.output == "ok"
    assert texts(api.requests[0], "assistant") == [
        '<compaction provider="anthropic">Earlier: the user likes tea.</compaction>',
        "a1",
        "a2",
    ]
    messages = [str(w.message) for w in seen if "compaction" in str(w.message)]
    assert messages == [
        "ClaudeAgentModel: anthropic's compaction summary was replayed as text (history-flattened)",
        "ClaudeAgentModel: openai's compaction (cmp_1) is encrypted for openai alone and was "
        "left out (compaction-dropped)",
    ]
    response = result.all_messages()[-1]
    assert isinstance(response, ModelResponse) and response.provider_details is not None
    codes = [w["code"] for w in response.provider_details["warnings"]]
    assert codes == ["history-flattened", "compaction-dropped"]


async def test_a_file_another_model_generated_is_left_out_with_a_warning() -> None:
    """An image another model generated (a `FilePart` in its response) was a `UserError`
    ("cannot replay a FilePart"), which ended the conversation there; the Messages API takes no
    file in an assistant turn, so it is left out, as pydantic-ai's Anthropic model leaves it
    out, with a warning."""
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("Draw a pixel.")]),
        ModelResponse(
            parts=[FilePart(BinaryContent(PNG, media_type="image/png")), TextPart("Here it is.")],
            provider_name="openai",
        ),
    ]
    async with ScriptedMessagesAPI([reply(text("A pixel."))]) as api:
        with pytest.warns(UserWarning, match="file-dropped") as seen:
            result = await Agent(model_for(api)).run("What did you draw?", message_history=history)
    assert result.output == "A pixel."
    assert texts(api.requests[0], "assistant") == ["Here it is."]
    assert api.requests[0].blocks("image") == []
    assert [str(w.message) for w in seen if "file-dropped" in str(w.message)] == [
        "ClaudeAgentModel: openai's generated file (image/png) was left out: the Messages API "
        "takes no files in an assistant turn (file-dropped)"
    ]


# -- NativeOutput


class City(BaseModel):
    name: str
    celsius: int


async def test_native_output_whose_object_the_cli_rejects_gets_the_agents_own_retry() -> None:
    """An object that does not match the schema is refused by the CLI, and asking again would
    be a second model turn: the run ended with `EmptyToolRoutingError`. It is an answer without
    output to the Agent, which asks again, as with pydantic-ai's other models."""
    script = [
        reply(tool_use("StructuredOutput", {"name": "Paris"})),
        reply(tool_use("StructuredOutput", {"name": "Paris", "celsius": 20})),
    ]
    async with ScriptedMessagesAPI(script) as api:
        agent = Agent(model_for(api), output_type=NativeOutput(City))
        result = await agent.run("Weather in Paris as data.")
    assert result.output == City(name="Paris", celsius=20)
    assert len(api.requests) == 2 and result.usage.requests == 2
    assert len(texts(api.requests[1], "user")) == 2, "the Agent's own feedback after the prompt"


# -- the Agent's lifecycle


async def test_async_with_agent_stops_the_processes_of_a_provider_the_model_made() -> None:
    """`async with agent:` enters the model so it closes what it opened on exit (pydantic-ai's
    providers close the HTTP client they made). The warm CLI of a provider the model made from
    settings stayed up until garbage collection or its idle timeout; one the user passed stays
    theirs to close."""
    async with ScriptedMessagesAPI([reply(text("a")), reply(text("b"))]) as api:
        owned = Agent(ClaudeAgentModel(api.settings()))
        async with owned:
            assert (await owned.run("hi")).output == "a"
            assert len(cli_processes()) == 1, "kept warm for the next run"
        await no_cli_left()
        assert not cli_processes()
        provider = ClaudeAgentProvider(api.settings())
        theirs = Agent(ClaudeAgentModel(provider))
        async with theirs:
            assert (await theirs.run("hi")).output == "b"
        assert len(cli_processes()) == 1, "the user's provider keeps its warm process"
        await provider.aclose()
    await no_cli_left()
    assert not cli_processes()


async def test_a_model_entered_twice_stops_its_processes_when_the_last_one_leaves() -> None:
    async with ScriptedMessagesAPI([reply(text("a")), reply(text("b"))]) as api:
        model = ClaudeAgentModel(api.settings())
        first, second = Agent(model), Agent(model)
        async with first:
            async with second:
                assert (await second.run("hi")).output == "a"
            assert (await first.run("hi")).output == "b", "the model still serves the other"
            assert len(cli_processes()) == 1
        await no_cli_left()
        assert not cli_processes()


# -- stream cancellation

LONG_TEXT = "word " * 50


def stalled_mid_stream(request: RecordedRequest) -> ScriptItem:
    """The first request streams the start of a long text, then the stream drops, and every
    later request for that prompt (the CLI's retry or non-streaming fallback) is never answered
    (`hang`): the query waits on the API, mid-stream, until it is cancelled. The next run's
    prompt ("again") gets "after". A list script handed the `hang` to the second request, which
    was the next run's when the cancel stopped the CLI before it sent its fallback (a loaded
    machine), and that run then hung."""
    if request.index == 0:
        return fault("drop_mid_stream", events=4, reply=reply(text(LONG_TEXT)))
    if "again" in json.dumps(request.body["messages"]):
        return reply(text("after"))
    return fault("hang")


@pytest.mark.parametrize("debounce_by", [None, 0.1], ids=["between-pulls", "pull-under-way"])
async def test_cancel_stops_a_streamed_querys_cli_and_the_model_serves_the_next_run(
    debounce_by: float | None,
) -> None:
    """`cancel()` of a streamed run (pydantic-ai's stream cancellation) stops the query as leaving
    `async with provider.stream(...)` early does: its CLI is stopped before `cancel()` returns,
    the text ends where it was cut, and the response is recorded as interrupted. `stream_text()`
    debounces in a task of its own, whose pull is under way when the consumer cancels; without
    debouncing, the cancel lands between pulls."""
    async with ScriptedMessagesAPI(stalled_mid_stream) as api:
        provider = ClaudeAgentProvider(api.settings())
        agent = Agent(ClaudeAgentModel(provider))
        chunks: list[str] = []
        async with agent.run_stream("talk") as streamed:
            async for chunk in streamed.stream_text(delta=True, debounce_by=debounce_by):
                chunks.append(chunk)
                if len(chunks) == 1:
                    assert leftover_query_dirs(), "the query runs while its text streams"
                    await streamed.cancel()
                    assert leftover_query_dirs() == [], "cancel() returned with the CLI stopped"
        assert streamed.cancelled
        response = streamed.all_messages()[-1]
        assert isinstance(response, ModelResponse) and response.state == "interrupted"
        cut = "".join(chunks)
        assert [p.content for p in response.parts if isinstance(p, TextPart)] == [cut]
        assert 0 < len(cut) < len(LONG_TEXT) and LONG_TEXT.startswith(cut)
        await no_cli_left()
        assert not cli_processes()
        assert (await agent.run("again")).output == "after"
        assert len(cli_processes()) == 1, "the next run's process, kept warm"
        await provider.aclose()
    # The cut stream, perhaps the CLI's retry or fallback, then the next run's request.
    assert api.requests[0].body["stream"] is True
    assert "again" in json.dumps(api.requests[-1].body["messages"])


async def test_agent_run_cancel_ends_the_run_and_stops_its_cli() -> None:
    """`AgentRun.cancel()` ends the whole run (`RunCancelled`, pydantic-ai's outcome): the task
    that pulls the stream is cancelled, which stops the query's CLI."""
    async with ScriptedMessagesAPI(stalled_mid_stream) as api:
        provider = ClaudeAgentProvider(api.settings())
        agent = Agent(ClaudeAgentModel(provider))
        with pytest.raises(RunCancelled):
            async with agent.iter("talk") as run:
                async for node in run:
                    if Agent.is_model_request_node(node):
                        async with node.stream(run.ctx) as stream:
                            async for _ in stream:
                                assert leftover_query_dirs(), "the query runs while it streams"
                                run.cancel()
        await no_cli_left()
        assert not cli_processes() and leftover_query_dirs() == []
        assert (await agent.run("again")).output == "after"
        await provider.aclose()
