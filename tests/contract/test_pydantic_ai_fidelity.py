"""The pydantic-ai adapter honours what the Agent asks for, or says loudly that it cannot.

Every tool, setting and message part either shows in the request the scripted API received, or
raises / warns by pydantic-ai's own convention (`UserError`, `UnsupportedSettingWarning`).
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from pydantic import BaseModel
from pydantic_ai import Agent, ToolOutput
from pydantic_ai.direct import model_request
from pydantic_ai.exceptions import (
    ModelConnectionError,
    ModelContextWindowExceededError,
    ModelHTTPError,
    ModelRateLimitError,
    UnsupportedSettingWarning,
    UserError,
)
from pydantic_ai.messages import (
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.settings import ModelSettings, ToolOrOutput
from pydantic_ai.tools import ToolDefinition

from sf_provider import ClaudeAgentProvider
from sf_provider import errors as sf_errors
from sf_provider.adapters.pydantic_ai import ClaudeAgentModel
from sf_provider.testing import (
    RecordedRequest,
    Reply,
    ScriptedMessagesAPI,
    fault,
    http_error,
    redacted_thinking,
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
SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}


def model_for(api: ScriptedMessagesAPI) -> ClaudeAgentModel:
    return ClaudeAgentModel(ClaudeAgentProvider(api.settings()))


def system_text(request: RecordedRequest) -> str:
    system = request.body.get("system")
    if isinstance(system, list):
        return "\n".join(str(b.get("text", "")) for b in system)
    return str(system or "")


def offered(request: RecordedRequest) -> list[str]:
    return sorted(name.removeprefix("mcp__sf__") for name in request.tool_names)


# -- tool_choice


def tools_model(request: RecordedRequest) -> Reply:
    """Calls the first tool it is offered (the output tool if there is one), else answers."""
    names = offered(request)
    if "final_result" in names:
        return reply(tool_use("final_result", {"name": "Paris"}))
    if names and not request.tool_results():
        return reply(tool_use(names[0], {"x": 1}))
    return reply(text("ok"))


def parameters(*, output: bool) -> ModelRequestParameters:
    """Two function tools, and an output tool that stands for the Agent's output (no text)."""
    tools = [ToolDefinition(name=n, parameters_json_schema=SCHEMA) for n in ("tool_a", "tool_b")]
    if not output:
        return ModelRequestParameters(function_tools=tools)
    final = ToolDefinition(name="final_result", parameters_json_schema=SCHEMA, kind="output")
    return ModelRequestParameters(
        function_tools=tools, output_mode="tool", output_tools=[final], allow_text_output=False
    )


ANY_TOOL = {"type": "any"}


@pytest.mark.parametrize(
    ("tool_choice", "output", "tools", "sent"),
    [
        ("auto", False, ["tool_a", "tool_b"], None),
        ("none", False, [], None),
        ("none", True, ["final_result"], {"type": "tool", "name": "mcp__sf__final_result"}),
        ("required", False, ["tool_a", "tool_b"], {"type": "any"}),
        (["tool_a"], False, ["tool_a"], {"type": "tool", "name": "mcp__sf__tool_a"}),
        (["tool_a", "final_result"], True, ["final_result", "tool_a"], {"type": "any"}),
        (ToolOrOutput(function_tools=["tool_a"]), False, ["tool_a"], None),
        (ToolOrOutput(function_tools=["tool_b"]), True, ["final_result", "tool_b"], ANY_TOOL),
    ],
    ids=["auto", "none", "none+output", "required", "one", "list+output", "tool-or-text",
         "tool-or-output"],
)  # fmt: skip
async def test_tool_choice_offers_exactly_the_chosen_tools_and_requires_a_call_when_asked(
    tool_choice: Any, output: bool, tools: list[str], sent: dict[str, Any] | None
) -> None:
    async with ScriptedMessagesAPI(tools_model) as api:
        await model_request(
            model_for(api),
            [ModelRequest.user_text_prompt("hi")],
            model_settings={"tool_choice": tool_choice},
            model_request_parameters=parameters(output=output),
        )
    assert offered(api.requests[0]) == tools
    assert api.requests[0].body.get("tool_choice") == sent


async def test_tool_choice_none_in_an_agent_run_offers_no_tool() -> None:
    runs: list[int] = []
    async with ScriptedMessagesAPI(tools_model) as api:
        agent = Agent(model_for(api))

        @agent.tool_plain
        def tool_a(x: int) -> int:
            runs.append(x)
            return x

        result = await agent.run("hi", model_settings={"tool_choice": "none"})
    assert result.output == "ok" and runs == []
    assert api.requests[0].tool_names == []


async def test_tool_choice_none_after_tool_calls_keeps_the_tools_defined() -> None:
    # As pydantic-ai's Anthropic model sends it (tools, tool_choice none): the Messages API
    # refuses a history with tool calls and no tool definitions.
    history: list[Any] = [
        ModelRequest.user_text_prompt("hi"),
        ModelResponse(parts=[ToolCallPart("tool_a", {"x": 1}, tool_call_id="toolu_1")]),
        ModelRequest(parts=[ToolReturnPart("tool_a", "1", tool_call_id="toolu_1")]),
    ]
    async with ScriptedMessagesAPI([reply(text("done"))]) as api:
        response = await model_request(
            model_for(api),
            history,
            model_settings={"tool_choice": "none"},
            model_request_parameters=parameters(output=False),
        )
    assert [p.content for p in response.parts if isinstance(p, TextPart)] == ["done"]
    assert offered(api.requests[0]) == ["tool_a", "tool_b"]
    assert api.requests[0].body["tool_choice"] == {"type": "none"}


@pytest.mark.parametrize(
    ("tool_choice", "error"),
    [
        (["tool_c"], "tool_choice names 'tool_c', which is not among the request's tools"),
        (ToolOrOutput(function_tools=["tool_c"]), "tool_choice names 'tool_c', which is not"),
    ],
    ids=["list", "tool-or-output"],
)
async def test_tool_choice_naming_no_offered_tool_is_a_user_error(
    tool_choice: Any, error: str
) -> None:
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        with pytest.raises(UserError, match=error):
            await model_request(
                model_for(api),
                [ModelRequest.user_text_prompt("hi")],
                model_settings={"tool_choice": tool_choice},
                model_request_parameters=parameters(output=False),
            )
    assert api.requests == []


async def test_tool_choice_required_without_function_tools_is_a_user_error() -> None:
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        with pytest.raises(UserError, match="tool_choice 'required' needs at least one tool"):
            await model_request(
                model_for(api),
                [ModelRequest.user_text_prompt("hi")],
                model_settings={"tool_choice": "required"},
            )
    assert api.requests == []


async def test_tool_choice_in_executor_mode_is_a_user_error() -> None:
    from sf_provider import FunctionTool

    tool = FunctionTool(name="t", input_schema=SCHEMA, executor=lambda arguments: "1")
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        model = ClaudeAgentModel(ClaudeAgentProvider(api.settings()), mode="executor", tools=[tool])
        with pytest.raises(UserError, match="mode='executor'"):
            await Agent(model).run("hi", model_settings={"tool_choice": "none"})
    assert api.requests == []


async def test_a_text_reply_to_tool_choice_required_is_the_providers_error() -> None:
    # Asked for by `tool_choice` (not only for the Agent's output, which pydantic-ai retries):
    # the provider's ToolChoiceViolationError, saying what to do, not a model API error.
    async with ScriptedMessagesAPI([reply(text("No tool needed."))]) as api:
        with pytest.raises(sf_errors.ToolChoiceViolationError) as caught:
            await model_request(
                model_for(api),
                [ModelRequest.user_text_prompt("hi")],
                model_settings={"tool_choice": "required"},
                model_request_parameters=parameters(output=False),
            )
    assert str(caught.value).startswith("tool_choice required a call of ")
    assert str(caught.value).endswith("retry, or relax tool_choice")
    assert api.requests[0].body["tool_choice"] == ANY_TOOL


async def test_an_empty_reply_is_the_providers_error() -> None:
    # Neither text nor a call: nothing for the Agent to read, and not an API failure.
    async with ScriptedMessagesAPI(lambda request: reply()) as api:
        with pytest.raises(sf_errors.EmptyToolRoutingError) as caught:
            await Agent(model_for(api)).run("hi")
    message = str(caught.value)
    assert message.startswith("the model returned neither a tool call nor text")
    assert message.endswith("Retry, or check the prompt and tools")


async def test_a_native_tool_is_a_user_error_before_the_cli_starts() -> None:
    # The model supports no native (built-in) tool: pydantic-ai's own check refuses it.
    from pydantic_ai.native_tools import WebSearchTool

    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        with pytest.raises(UserError, match=r"Native tool\(s\) \['WebSearchTool'\] not supported"):
            await model_request(
                model_for(api),
                [ModelRequest.user_text_prompt("hi")],
                model_request_parameters=ModelRequestParameters(native_tools=[WebSearchTool()]),
            )
    assert api.requests == []


# -- deferred loading


async def test_a_deferred_tool_is_offered_only_once_tool_search_reveals_it() -> None:
    runs: list[int] = []

    def model(request: RecordedRequest) -> Reply:
        done = len(request.tool_results())
        if done == 0:
            return reply(tool_use("search_tools", {"queries": ["rare"]}))
        if done == 1:
            return reply(tool_use("rare_tool", {"x": 3}))
        return reply(text("done"))

    async with ScriptedMessagesAPI(model) as api:
        agent = Agent(model_for(api))

        @agent.tool_plain(defer_loading=True)
        def rare_tool(x: int) -> int:
            """A rarely needed tool."""
            runs.append(x)
            return x

        @agent.tool_plain
        def common_tool(x: int) -> int:
            return x

        result = await agent.run("hi")
    assert result.output == "done" and runs == [3]
    assert offered(api.requests[0]) == ["common_tool", "search_tools"], "held back: not offered"
    assert offered(api.requests[1]) == ["common_tool", "rare_tool", "search_tools"]


# -- strict tools


class City(BaseModel):
    name: str


@pytest.mark.parametrize("on", ["tool", "output"])
async def test_a_strict_tool_or_output_is_held_by_checking_the_call(on: str) -> None:
    # strict=True is FunctionTool.strict (tools.tool_from_spec, the same on every door): a call
    # off the schema is a StrictToolCallError, not a call pydantic-ai would run or retry.
    name = "tool_a" if on == "tool" else "final_result"

    def off_schema(request: RecordedRequest) -> Reply:
        return reply(tool_use(name, {"wrong": 1}))

    async with ScriptedMessagesAPI(off_schema) as api:
        agent = Agent(model_for(api), output_type=ToolOutput(City, strict=on == "output"))

        @agent.tool_plain(strict=on == "tool")
        def tool_a(x: int) -> int:
            return x

        with pytest.raises(sf_errors.StrictToolCallError, match=f"'{name}' does not match"):
            await agent.run("hi")
    assert len(api.requests) == 1


# -- user prompt parts


@contextmanager
def serving(body: bytes, content_type: str) -> Iterator[str]:
    """A local HTTP server answering every GET with `body`; yields its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


async def test_an_image_url_with_force_download_is_sent_as_the_downloaded_bytes() -> None:
    with serving(PNG, "image/png") as base:
        async with ScriptedMessagesAPI([reply(text("a pixel"))]) as api:
            image = ImageUrl(f"{base}/pixel.png", force_download="allow-local")
            result = await Agent(model_for(api)).run(["What is this?", image])
    assert result.output == "a pixel"
    [sent] = api.requests[0].blocks("image")
    assert sent["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": base64.b64encode(PNG).decode(),
    }


async def test_a_file_it_cannot_send_is_a_user_error_naming_its_media_type() -> None:
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        pdf = BinaryContent(b"%PDF-1.4", media_type="application/pdf")
        with pytest.raises(UserError, match="BinaryContent of media type 'application/pdf'"):
            await Agent(model_for(api)).run(["Summarise this", pdf])
    assert api.requests == []


async def test_an_image_a_tool_returned_is_sent_inside_its_result() -> None:
    """As pydantic-ai's Anthropic model sends it; the run failed with "returned files", after
    the tool had run."""
    script = [reply(tool_use("screenshot", {})), reply(text("blue"))]
    async with ScriptedMessagesAPI(script) as api:
        agent = Agent(model_for(api))

        @agent.tool_plain
        def screenshot() -> list[Any]:
            """Take a screenshot."""
            return ["the screen:", BinaryContent(data=PNG, media_type="image/png")]

        result = await agent.run("What colour is the screen?")
    assert result.output == "blue"
    [sent] = api.requests[1].tool_results()
    assert sent["content"] == [
        {"type": "text", "text": "the screen:"},
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/png",
                "data": base64.b64encode(PNG).decode(),
            },
        },
    ]


async def test_a_file_a_tool_returned_that_it_cannot_send_is_a_user_error() -> None:
    script = [reply(tool_use("report", {})), reply(text("ok"))]
    async with ScriptedMessagesAPI(script) as api:
        agent = Agent(model_for(api))

        @agent.tool_plain
        def report() -> BinaryContent:
            """The report."""
            return BinaryContent(b"%PDF-1.4", media_type="application/pdf")

        with pytest.raises(UserError, match="tool 'report' returned a BinaryContent of media"):
            await agent.run("Summarise the report.")
    assert len(api.requests) == 1


# -- history from another provider


async def test_another_providers_native_tool_is_replayed_as_text_with_a_warning() -> None:
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("Search the web for A.")]),
        ModelResponse(
            parts=[
                NativeToolCallPart(
                    "web_search",
                    {"query": "A"},
                    tool_call_id="srvtoolu_1",
                    provider_name="anthropic",
                ),
                NativeToolReturnPart(
                    "web_search",
                    [{"url": "https://a.example", "title": "A"}],
                    tool_call_id="srvtoolu_1",
                    provider_name="anthropic",
                ),
                TextPart("Found A."),
            ],
            provider_name="anthropic",
        ),
    ]
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        with pytest.warns(UserWarning, match="history-flattened") as seen:
            result = await Agent(model_for(api)).run("More?", message_history=history)
    assert [str(w.message) for w in seen if "history-flattened" in str(w.message)] == [
        f"ClaudeAgentModel: anthropic's native tool {kind} 'web_search' (srvtoolu_1) was "
        f"replayed as text (history-flattened)"
        for kind in ("call", "result")
    ]
    request = api.requests[0]
    assert request.tool_uses() == [] and request.tool_results() == []
    assert [b["text"] for b in request.blocks("text") if "native-tool" in b["text"]] == [
        '<native-tool-call provider="anthropic" name="web_search">{"query":"A"}</native-tool-call>',
        '<native-tool-result provider="anthropic" name="web_search">'
        '[{"url":"https://a.example","title":"A"}]</native-tool-result>',
    ]
    response = result.all_messages()[-1]
    assert isinstance(response, ModelResponse) and response.provider_details is not None
    assert [w["code"] for w in response.provider_details["warnings"]] == ["history-flattened"] * 2


async def test_flattened_foreign_reasoning_is_a_python_warning_too() -> None:
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("q1")]),
        ModelResponse(
            parts=[ThinkingPart("hmm", signature="enc", provider_name="openai"), TextPart("a1")],
            provider_name="openai",
        ),
    ]
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        with pytest.warns(UserWarning, match="reasoning without a signature.*history-flattened"):
            await Agent(model_for(api)).run("q2", message_history=history)
    assert "<reasoning>hmm</reasoning>" in [b["text"] for b in api.requests[0].blocks("text")]


# -- settings


async def test_a_timeout_that_is_not_a_number_warns_that_seconds_are_needed() -> None:
    settings: ModelSettings = {"timeout": httpx.Timeout(30)}
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        with pytest.warns(UnsupportedSettingWarning, match="as a number of seconds"):
            result = await Agent(model_for(api)).run("hi", model_settings=settings)
    assert result.output == "ok"


# -- redacted thinking


@pytest.mark.parametrize("warm_processes", [0, 1], ids=["fresh", "continued"])
async def test_redacted_thinking_comes_back_as_pydantic_ai_names_it_and_goes_back(
    warm_processes: int,
) -> None:
    script = [
        reply(redacted_thinking("OPAQUE-1"), tool_use("get_city", {})),
        reply(text("Paris.")),
    ]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=warm_processes))
        agent = Agent(ClaudeAgentModel(provider))

        @agent.tool_plain
        def get_city() -> str:
            """The user's city."""
            return "Paris"

        result = await agent.run("Where am I?")
        await provider.aclose()
    thinking = [p for m in result.all_messages() for p in getattr(m, "parts", [])
                if isinstance(p, ThinkingPart)]  # fmt: skip
    assert [(p.id, p.content, p.signature) for p in thinking] == [
        ("redacted_thinking", "", "OPAQUE-1")
    ]
    assistant = [m for m in api.requests[1].messages if m["role"] == "assistant"][-1]
    assert [b["type"] for b in assistant["content"]] == ["redacted_thinking", "tool_use"]
    assert assistant["content"][0]["data"] == "OPAQUE-1"


async def test_anthropic_models_redacted_thinking_in_history_is_replayed_as_redacted() -> None:
    history: list[Any] = [
        ModelRequest(parts=[UserPromptPart("Where am I?")]),
        ModelResponse(
            parts=[
                ThinkingPart(
                    content="", id="redacted_thinking", signature="ENC==", provider_name="anthropic"
                ),
                ToolCallPart("get_city", {}, tool_call_id="toolu_1"),
            ],
            provider_name="anthropic",
        ),
        ModelRequest(parts=[ToolReturnPart("get_city", "Paris", tool_call_id="toolu_1")]),
    ]
    async with ScriptedMessagesAPI([reply(text("Paris."))]) as api:
        model = ClaudeAgentModel(ClaudeAgentProvider(api.settings(warm_processes=0)))
        # The tool stays defined: the Messages API refuses tool blocks without tool definitions.
        tools = [ToolDefinition(name="get_city", parameters_json_schema=SCHEMA)]
        await model_request(
            model, history, model_request_parameters=ModelRequestParameters(function_tools=tools)
        )
    assistant = [m for m in api.requests[0].messages if m["role"] == "assistant"][-1]
    assert assistant["content"][0] == {"type": "redacted_thinking", "data": "ENC=="}


# -- errors as pydantic-ai's models raise them


@pytest.mark.parametrize(
    ("script", "category", "status"),
    [
        # (Each kind through each door: tests/unit/test_error_kinds.py.)
        ([http_error(429, "slow down")], ModelRateLimitError, 429),
        ([http_error(400, "prompt is too long: 9 tokens > 1 maximum")],
         ModelContextWindowExceededError, 400),
    ],
    ids=["429", "too-long"],
)  # fmt: skip
async def test_an_api_failure_is_pydantic_ais_error_of_its_category(
    script: list[Any], category: type[Exception], status: int
) -> None:
    async with ScriptedMessagesAPI(script) as api:
        with pytest.raises(ModelHTTPError) as caught:
            await Agent(model_for(api)).run("hi")
    assert isinstance(caught.value, category)
    assert caught.value.status_code == status
    assert isinstance(caught.value.__cause__, sf_errors.APIError)


async def test_a_prompt_the_cli_itself_refuses_as_too_long_is_the_context_window_error() -> None:
    """The CLI measures the prompt and never sends it, so the error has no HTTP status: that
    was a `ModelConnectionError` ("retry"), where LangChain users got the context overflow."""
    async with ScriptedMessagesAPI(lambda _request: reply(text("ok"))) as api:
        model = ClaudeAgentModel(ClaudeAgentProvider(api.settings(warm_processes=0)))
        with pytest.raises(ModelContextWindowExceededError) as caught:
            await Agent(model).run("word " * 1_500_000)
    assert api.all_requests == [], "refused by the CLI, before the API"
    assert not isinstance(caught.value, ModelConnectionError | ModelHTTPError)
    cause = caught.value.__cause__
    assert isinstance(cause, sf_errors.ContextWindowExceededError) and cause.status is None


async def test_a_lost_connection_is_a_model_connection_error() -> None:
    async with ScriptedMessagesAPI([fault("drop")]) as api:
        with pytest.raises(ModelConnectionError) as caught:
            await Agent(model_for(api)).run("hi")
    assert isinstance(caught.value.__cause__, sf_errors.APIConnectionError)


async def test_a_fallback_model_falls_back_when_claude_is_overloaded() -> None:
    async with ScriptedMessagesAPI([http_error(529)]) as api:
        backup = FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("backup")]))
        result = await Agent(FallbackModel(model_for(api), backup)).run("hi")
    assert result.output == "backup" and len(api.requests) == 1


async def test_a_cut_stream_is_folded_by_request_and_raised_by_request_stream() -> None:
    """`request` reads the query to its end before anything reaches the caller, so the attempt
    the CLI redid is left out silently; `request_stream` handed it out already, so taking it
    back is the one `StreamRetractionError` every streaming door raises (here pydantic-ai's
    `ModelAPIError` wrapping it)."""
    from pydantic_ai.direct import model_request_stream
    from pydantic_ai.exceptions import ModelAPIError

    script = [fault("drop_mid_stream", events=5), reply(text("Five, said twice over."))]
    async with ScriptedMessagesAPI(script) as api:
        response = await model_request(
            model_for(api), [ModelRequest.user_text_prompt("Count.")],
            model_request_parameters=parameters(output=False),
        )  # fmt: skip
    assert [p.content for p in response.parts if isinstance(p, TextPart)] == [
        "Five, said twice over."
    ]
    async with ScriptedMessagesAPI(list(script)) as api:
        with pytest.raises(ModelAPIError) as caught:
            async with model_request_stream(
                model_for(api), [ModelRequest.user_text_prompt("Count.")],
                model_request_parameters=parameters(output=False),
            ) as stream:  # fmt: skip
                async for _ in stream:
                    pass
    assert isinstance(caught.value.__cause__, sf_errors.StreamRetractionError)


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_response_names_the_model_that_answered(streamed: bool) -> None:
    # With no model set (the CLI picks it), the response said "default" (the model's own
    # name), where pydantic-ai's models name the model that answered and LangChain's
    # `response_metadata["model_name"]` does.
    async with ScriptedMessagesAPI([reply(text("Hello."))]) as api:
        model = model_for(api)
        agent = Agent(model)
        if streamed:
            async with agent.run_stream("Hi") as run:
                assert await run.get_output() == "Hello."
            response = run.response
        else:
            response = (await agent.run("Hi")).response
    answered = api.requests[0].body["model"]
    assert model.model_name == "default" and answered != "default"
    assert response.model_name == answered
