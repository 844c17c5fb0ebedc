"""The behaviour matrix: the same scripted cases through every front door, one outcome each.

Seven doors: the core provider (`generate` / `stream`), pydantic-ai (`ClaudeAgentModel`),
LangChain (`ChatClaudeAgent`), LiteLLM (`claude-agent/...`), and the gateway's
`/v1/chat/completions`, `/v1/responses` and `/v1/messages` served on loopback and spoken to with
the official `openai` and `anthropic` clients. Each door is one small class that sends a neutral
`Case` in its own vocabulary (its own message types, tool definitions, settings, the application
or the framework running the tools) and reads the answer back into a neutral `Outcome`: the
calls, the text, the finish reason in the core's vocabulary, the structured object, and the
error kind from the door's own error type (one table per door). Every case runs the real CLI
against the scripted Messages API, and what the model was sent is proven from its request log.

A (door, case) that encodes behaviour still being built (issue 28) is marked
`xfail(strict=True)` in `TARGET`: when it starts passing the mark must go.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, ClassVar

import anthropic
import litellm
import openai
import pytest
from conftest import serving
from langchain_core import exceptions as langchain_errors
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool as langchain_tool
from pydantic import BaseModel
from pydantic_ai import Agent, NativeOutput
from pydantic_ai import exceptions as pydantic_ai_errors
from pydantic_ai.direct import model_request, model_request_stream
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import ToolDefinition

import sf_provider.errors as sf_errors
from sf_provider import (
    ClaudeAgentProvider,
    DiscardPart,
    FinishPart,
    FunctionTool,
    TextDeltaPart,
)
from sf_provider.adapters.langchain import ChatClaudeAgent
from sf_provider.adapters.litellm import register
from sf_provider.adapters.pydantic_ai import ClaudeAgentModel
from sf_provider.gateway import GatewaySettings, create_app
from sf_provider.testing import (
    RecordedRequest,
    Reply,
    Responder,
    ScriptedMessagesAPI,
    ScriptItem,
    SentToolResult,
    fault,
    http_error,
    reply,
    text,
    tool_use,
)

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.cli,
    # LiteLLM's own types, built by pydantic on first use.
    pytest.mark.filterwarnings("ignore:Item.*on TypedDict:UserWarning"),
]

litellm.suppress_debug_info = True

MODEL = "claude-sonnet-5-5"
# A 1x1 transparent PNG.
PIXEL = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000100e5270de40000000049454e44ae426082"
    )
).decode()
PIXEL_URL = f"data:image/png;base64,{PIXEL}"


# --------------------------------------------------------------------------- the neutral case


def get_celsius(city: str) -> float:
    """Current temperature of a city in °C."""
    return {"Lyon": 15.0, "Paris": 18.0}[city]


def to_fahrenheit(celsius: float) -> float:
    """Convert °C to °F."""
    return celsius * 9 / 5 + 32


TOOLS = {f.__name__: f for f in (get_celsius, to_fahrenheit)}


class City(BaseModel):
    """A city's temperature."""

    city: str
    celsius: float


@dataclass(frozen=True)
class Call:
    """A tool call already in the history (the model made it in an earlier turn)."""

    id: str
    name: str
    args: dict[str, Any]
    #: The application's result for it, and whether that result is an error.
    result: str
    is_error: bool = False


@dataclass(frozen=True)
class Case:
    """One request, in no door's vocabulary, and the scripted model that answers it."""

    #: A fresh script per run (a list is used up; a responder answers from the request).
    script: Callable[[], Sequence[ScriptItem] | Responder]
    prompt: str = "How warm is Lyon?"
    #: Tool names (from `TOOLS`) the request offers.
    tools: tuple[str, ...] = ()
    #: The application or the framework runs the tools and sends the results back (a loop);
    #: otherwise one request, and its calls are returned.
    run_tools: bool = False
    #: An earlier turn of calls and their results, after the prompt.
    history: tuple[Call, ...] = ()
    image: bool = False
    stop: tuple[str, ...] = ()
    max_tokens: int | None = None
    #: "none", "required" or a tool's name.
    tool_choice: str | None = None
    output: type[BaseModel] | None = None
    stream: bool = False
    temperature: float | None = None
    #: False: at most one tool call per model turn (`parallel_tool_calls`).
    parallel: bool = True


@dataclass
class Outcome:
    """What a door answered, normalised: the same case must give the same outcome everywhere."""

    #: (id, tool name, arguments): the ids are the model's own, whoever ran the tools.
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    #: With an `output`: the words of the reply besides the object, where the door hands the
    #: reply back with it (the core, pydantic-ai's response, LangChain's raw message); on the
    #: wire doors the object is the answer's text, and nothing else is.
    text: str = ""
    #: In the core's vocabulary: stop, length, tool-calls, content-filter (other, error for the
    #: rest).
    finish: str | None = None
    structured: Any = None
    #: From the door's own error type: context-window, stream-retraction, tool-choice-violated,
    #: refused (bad request), declined (the model's refusal), or `other: <type>: <message>`.
    error: str | None = None
    #: The core stream only: a part of the answer was taken back (`DiscardPart`).
    retracted: bool = False


def schema(name: str) -> dict[str, Any]:
    """A tool's JSON Schema, as the core derives it from the function."""
    return FunctionTool.from_function(TOOLS[name]).input_schema


# --------------------------------------------------------------------------- the doors


#: The one class a stream taken back raises everywhere.
RETRACTION = (sf_errors.StreamRetractionError,)


class Door:
    """One front door: sends a `Case` its own way and reads the answer into an `Outcome`."""

    name: ClassVar[str]
    #: The door's own error types -> the neutral kind; the first match wins.
    errors: ClassVar[Sequence[tuple[type[BaseException], str]]] = ()

    def __init__(self, api: ScriptedMessagesAPI, stack: AsyncExitStack) -> None:
        self.api = api
        self.stack = stack

    async def send(self, case: Case) -> Outcome:
        raise NotImplementedError

    def error_kind(self, exc: BaseException) -> str:
        chain: list[BaseException] = [exc]
        # `original_exception`: LiteLLM's MidStreamFallbackError carries the error it wraps
        # there (so its Router can fall back), not as the cause.
        while len(chain) < 10 and (
            cause := chain[-1].__cause__ or getattr(chain[-1], "original_exception", None)
        ):
            chain.append(cause)
        # The one class, or the door's own wrapper of it.
        if any(isinstance(e, RETRACTION) for e in chain):
            return "stream-retraction"
        if any(isinstance(e, sf_errors.ToolChoiceViolationError) for e in chain):
            return "tool-choice-violated"
        for error_type, kind in self.errors:
            if isinstance(exc, error_type):
                return kind
        return f"other: {type(exc).__module__}.{type(exc).__name__}: {exc}"[:300]


class CoreDoor(Door):
    """`ClaudeAgentProvider.generate` (the application runs the tools) or `stream`."""

    name = "core"
    errors = (
        (sf_errors.ContextWindowExceededError, "context-window"),
        (sf_errors.UnsupportedRequestError, "refused"),
    )

    async def send(self, case: Case) -> Outcome:
        provider = ClaudeAgentProvider(self.api.settings(warm_processes=0))
        self.stack.push_async_callback(provider.aclose)
        tools = [
            FunctionTool.from_function(TOOLS[n]).model_copy(update={"executor": None})
            for n in case.tools
        ]
        options: dict[str, Any] = {}
        if case.max_tokens:
            options["max_tokens"] = case.max_tokens
        if case.stop:
            options["stop_sequences"] = list(case.stop)
        if case.tool_choice in ("none", "required"):
            options["tool_choice"] = case.tool_choice
        elif case.tool_choice:
            options["tool_choice"] = {"type": "tool", "name": case.tool_choice}
        if case.output:
            options["output_schema"] = case.output.model_json_schema()
        if case.temperature is not None:
            options["temperature"] = case.temperature
        if not case.parallel:
            options["parallel_tool_calls"] = False
        content: Any = case.prompt
        if case.image:
            content = [
                {"type": "text", "text": case.prompt},
                {"type": "image", "data": PIXEL, "media_type": "image/png"},
            ]
        messages: list[dict[str, Any]] = [{"role": "user", "content": content}]
        if case.history:
            messages.append(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool-call", "tool_call_id": c.id, "tool_name": c.name,
                         "input": c.args}
                        for c in case.history
                    ],
                }
            )  # fmt: skip
            messages.append(
                {
                    "role": "tool",
                    "content": [
                        {"type": "tool-result", "tool_call_id": c.id, "output": c.result,
                         "is_error": c.is_error}
                        for c in case.history
                    ],
                }
            )  # fmt: skip
        if case.stream:
            # The core's stream hands a cut back as a DiscardPart: its consumer drops those parts.
            outcome, deltas = Outcome(), list[tuple[str, str]]()
            async for part in provider.stream(messages, tools=tools, **options):
                if isinstance(part, TextDeltaPart):
                    deltas.append((part.id, part.delta))
                elif isinstance(part, DiscardPart):
                    outcome.retracted |= any(i in part.ids for i, _ in deltas)
                    deltas = [(i, d) for i, d in deltas if i not in part.ids]
                elif isinstance(part, FinishPart):
                    outcome.finish = part.finish_reason
                    outcome.structured = part.structured_output
            outcome.text = "".join(d for _, d in deltas)
            return outcome
        calls: list[tuple[str, dict[str, Any]]] = []
        while True:
            result = await provider.generate(messages, tools=tools, **options)
            calls += [(c.tool_call_id, c.tool_name, c.input) for c in result.tool_calls]
            if case.output:  # the object is the answer
                return Outcome(calls, result.text, result.finish_reason, result.structured_output)
            if not (case.run_tools and result.tool_calls):
                return Outcome(calls, result.text, result.finish_reason)
            outputs = [
                {"type": "tool-result", "tool_call_id": c.tool_call_id,
                 "output": TOOLS[c.tool_name](**c.input)}
                for c in result.tool_calls
            ]  # fmt: skip
            messages += [result.assistant_message(), {"role": "tool", "content": outputs}]


class PydanticAIDoor(Door):
    """An `Agent` running its tools, or one `model_request` (streamed: `model_request_stream`)."""

    name = "pydantic-ai"
    errors = (
        (pydantic_ai_errors.ModelContextWindowExceededError, "context-window"),
        (sf_errors.UnsupportedRequestError, "refused"),
        (pydantic_ai_errors.UserError, "refused"),
    )
    FINISH: ClassVar[dict[str | None, str]] = {
        "tool_call": "tool-calls",
        "content_filter": "content-filter",
    }

    async def send(self, case: Case) -> Outcome:
        provider = ClaudeAgentProvider(self.api.settings(warm_processes=0))
        self.stack.push_async_callback(provider.aclose)
        model = ClaudeAgentModel(provider)
        settings = ModelSettings()
        if case.max_tokens:
            settings["max_tokens"] = case.max_tokens
        if case.stop:
            settings["stop_sequences"] = list(case.stop)
        if case.tool_choice in ("none", "required"):
            settings["tool_choice"] = case.tool_choice  # type: ignore[typeddict-item]
        elif case.tool_choice:
            settings["tool_choice"] = [case.tool_choice]  # type: ignore[typeddict-item]
        if case.temperature is not None:
            settings["temperature"] = case.temperature
        if not case.parallel:
            settings["parallel_tool_calls"] = False
        prompt: list[Any] = [case.prompt]
        if case.image:
            prompt.append(BinaryContent(data=base64.b64decode(PIXEL), media_type="image/png"))
        if case.run_tools or case.output:
            output: Any = NativeOutput(case.output) if case.output else str
            agent = Agent(model, output_type=output, model_settings=settings)
            for name in case.tools:
                agent.tool_plain(TOOLS[name])
            run = await agent.run(
                prompt, event_stream_handler=self._read_events if case.stream else None
            )
            responses = [m for m in run.all_messages() if isinstance(m, ModelResponse)]
            calls = [
                (p.tool_call_id, p.tool_name, p.args_as_dict())
                for r in responses
                for p in r.parts
                if isinstance(p, ToolCallPart)
            ]
            if case.output:
                # The object is the response's last text (as pydantic-ai reads native output).
                texts = [p.content for r in responses for p in r.parts if isinstance(p, TextPart)]
                said = "".join(texts[:-1])
                return Outcome(calls, said, "stop", run.output.model_dump())
            return Outcome(calls, run.output, self._finish(responses[-1]))
        history: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart(prompt)])]
        if case.history:
            history.append(
                ModelResponse(
                    parts=[ToolCallPart(c.name, c.args, tool_call_id=c.id) for c in case.history]
                )
            )
            history.append(
                ModelRequest(
                    parts=[
                        ToolReturnPart(
                            c.name,
                            c.result,
                            tool_call_id=c.id,
                            outcome="failed" if c.is_error else "success",
                        )
                        for c in case.history
                    ]
                )
            )
        tools = [
            ToolDefinition(name=n, parameters_json_schema=schema(n), description=TOOLS[n].__doc__)
            for n in case.tools
        ]
        parameters = ModelRequestParameters(function_tools=tools)
        if case.stream:
            async with model_request_stream(
                model, history, model_settings=settings, model_request_parameters=parameters
            ) as stream:
                async for _ in stream:
                    pass
            response = stream.get()
        else:
            response = await model_request(
                model, history, model_settings=settings, model_request_parameters=parameters
            )
        calls = [(p.tool_call_id, p.tool_name, p.args_as_dict()) for p in response.tool_calls]
        return Outcome(calls, response.text or "", self._finish(response))

    def _finish(self, response: ModelResponse) -> str | None:
        return self.FINISH.get(response.finish_reason, response.finish_reason)

    @staticmethod
    async def _read_events(_ctx: Any, events: AsyncIterable[Any]) -> None:
        """With it, the Agent streams each model request (`request_stream`)."""
        async for _ in events:
            pass


class LangChainDoor(Door):
    """`ChatClaudeAgent` with bound tools; the application runs them (LangChain's loop)."""

    name = "langchain"
    errors = (
        (langchain_errors.ContextOverflowError, "context-window"),
        (sf_errors.UnsupportedRequestError, "refused"),
        (langchain_errors.ModelRefusalError, "declined"),
    )

    async def send(self, case: Case) -> Outcome:
        provider = ClaudeAgentProvider(self.api.settings(warm_processes=0))
        self.stack.push_async_callback(provider.aclose)
        extra: dict[str, Any] = {"max_tokens": case.max_tokens} if case.max_tokens else {}
        if case.temperature is not None:
            extra["temperature"] = case.temperature
        chat = ChatClaudeAgent(provider=provider, **extra)
        tools = {n: langchain_tool(TOOLS[n]) for n in case.tools}
        model: Any = chat
        if case.output:  # the reply too: its text is what the model said besides the object
            model = chat.with_structured_output(case.output, method="json_schema", include_raw=True)
        elif tools:
            choice = {"tool_choice": case.tool_choice} if case.tool_choice else {}
            if not case.parallel:
                choice["parallel_tool_calls"] = False
            model = chat.bind_tools(list(tools.values()), **choice)
        content: Any = case.prompt
        if case.image:
            content = [
                {"type": "text", "text": case.prompt},
                {"type": "image_url", "image_url": {"url": PIXEL_URL}},
            ]
        messages: list[BaseMessage] = [HumanMessage(content)]
        if case.history:
            messages.append(
                AIMessage(
                    "",
                    tool_calls=[{"name": c.name, "args": c.args, "id": c.id} for c in case.history],
                )
            )
            messages += [
                ToolMessage(
                    c.result, tool_call_id=c.id, status="error" if c.is_error else "success"
                )
                for c in case.history
            ]
        stop = {"stop": list(case.stop)} if case.stop else {}
        if case.output:
            if case.stream:  # the parser takes the whole reply: one chunk (a refusal: two)
                answer = {}
                async for chunk in model.astream(messages):
                    answer.update(chunk)
            else:
                answer = await model.ainvoke(messages)
            if answer["parsing_error"] is not None:
                raise answer["parsing_error"]
            raw = answer["raw"]
            finish = raw.response_metadata.get("finish_reason")
            return Outcome(text=raw.text, finish=finish, structured=answer["parsed"].model_dump())
        if case.stream:
            chunks = [chunk async for chunk in model.astream(messages, **stop)]
            folded = chunks[0]
            for chunk in chunks[1:]:
                folded = folded + chunk
            return self._outcome(folded, [])
        calls: list[tuple[str, dict[str, Any]]] = []
        while True:
            answer = await model.ainvoke(messages, **stop)
            assert isinstance(answer, AIMessage)
            if not (case.run_tools and answer.tool_calls):
                return self._outcome(answer, calls)
            messages.append(answer)
            for call in answer.tool_calls:
                calls.append((call["id"] or "", call["name"], call["args"]))
                output = tools[call["name"]].invoke(call["args"])
                messages.append(ToolMessage(content=str(output), tool_call_id=call["id"]))

    def _outcome(self, answer: AIMessage, calls: list[tuple[str, dict[str, Any]]]) -> Outcome:
        calls = calls + [(c["id"] or "", c["name"], c["args"]) for c in answer.tool_calls]
        return Outcome(calls, answer.text, answer.response_metadata.get("finish_reason"))


class OpenAIStyleDoor(Door):
    """Chat Completions: the application sends the tools as functions and runs them."""

    FINISH: ClassVar[dict[str | None, str]] = {
        "tool_calls": "tool-calls",
        "content_filter": "content-filter",
    }

    async def create(self, **request: Any) -> Any:
        raise NotImplementedError

    async def send(self, case: Case) -> Outcome:
        request: dict[str, Any] = {"model": self.model}
        if case.tools:
            request["tools"] = [
                {"type": "function", "function": {"name": n, "description": TOOLS[n].__doc__,
                                                  "parameters": schema(n)}}
                for n in case.tools
            ]  # fmt: skip
        if case.tool_choice in ("none", "required"):
            request["tool_choice"] = case.tool_choice
        elif case.tool_choice:
            request["tool_choice"] = {"type": "function", "function": {"name": case.tool_choice}}
        if case.max_tokens:
            request["max_tokens"] = case.max_tokens
        if case.stop:
            request["stop"] = list(case.stop)
        if case.temperature is not None:
            request["temperature"] = case.temperature
        if not case.parallel:
            request["parallel_tool_calls"] = False
        if case.output:
            request["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": case.output.__name__,
                                "schema": case.output.model_json_schema()},
            }  # fmt: skip
        content: Any = case.prompt
        if case.image:
            content = [
                {"type": "text", "text": case.prompt},
                {"type": "image_url", "image_url": {"url": PIXEL_URL}},
            ]
        messages: list[dict[str, Any]] = [{"role": "user", "content": content}]
        if case.history:
            assert not any(c.is_error for c in case.history), "Chat Completions has no error flag"
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": c.id, "type": "function",
                         "function": {"name": c.name, "arguments": json.dumps(c.args)}}
                        for c in case.history
                    ],
                }
            )  # fmt: skip
            messages += [
                {"role": "tool", "tool_call_id": c.id, "content": c.result} for c in case.history
            ]
        if case.stream:
            text_parts: list[str] = []
            finish = None
            async for chunk in await self.create(messages=messages, stream=True, **request):
                for choice in chunk.choices:
                    text_parts.append(choice.delta.content or "")
                    finish = choice.finish_reason or finish
            finish = self.FINISH.get(finish, finish)
            # The object is the answer's text on this wire (a refusal's: its words).
            if case.output and finish != "content-filter":
                return Outcome(finish=finish, structured=json.loads("".join(text_parts)))
            return Outcome(text="".join(text_parts), finish=finish)
        calls: list[tuple[str, dict[str, Any]]] = []
        while True:
            answer = await self.create(messages=messages, **request)
            choice = answer.choices[0]
            message = choice.message
            made = [
                (c.id, c.function.name, json.loads(c.function.arguments or "{}"))
                for c in message.tool_calls or []
            ]
            calls += made
            if not (case.run_tools and made):
                finish = self.FINISH.get(choice.finish_reason, choice.finish_reason)
                # The object is the answer's text on this wire (or no text; a refusal's: its
                # words).
                if case.output and finish != "content-filter":
                    return Outcome(
                        calls, "", finish, json.loads(message.content) if message.content else None
                    )
                return Outcome(calls, message.content or "", finish)
            messages.append(
                {
                    "role": "assistant",
                    "content": message.content,
                    "tool_calls": [
                        {"id": i, "type": "function",
                         "function": {"name": n, "arguments": json.dumps(a)}}
                        for i, n, a in made
                    ],
                }
            )  # fmt: skip
            messages += [
                {"role": "tool", "tool_call_id": i, "content": str(TOOLS[n](**a))}
                for i, n, a in made
            ]


class LiteLLMDoor(OpenAIStyleDoor):
    """`litellm.acompletion(model="claude-agent/...")` after `register()`."""

    name = "litellm"
    model = f"claude-agent/{MODEL}"
    errors = (
        (litellm.ContextWindowExceededError, "context-window"),
        (litellm.BadRequestError, "refused"),
    )

    async def create(self, **request: Any) -> Any:
        if not hasattr(self, "handler"):
            self.handler = register(settings=self.api.settings(warm_processes=0))
            self.stack.push_async_callback(self.handler.provider.aclose)
        return await litellm.acompletion(**request)


class ChatCompletionsDoor(OpenAIStyleDoor):
    """The gateway's `/v1/chat/completions` through the official `openai` client."""

    name = "chat-completions"
    model = MODEL

    def error_kind(self, exc: BaseException) -> str:
        message = str(exc)
        if isinstance(exc, openai.BadRequestError) and exc.code == "context_length_exceeded":
            return "context-window"
        if isinstance(exc, openai.APIError) and "cannot be taken back" in message:
            return "stream-retraction"
        if isinstance(exc, openai.InternalServerError) and "tool_choice required" in message:
            return "tool-choice-violated"
        if isinstance(exc, openai.BadRequestError):
            return "refused"
        return super().error_kind(exc)

    async def create(self, **request: Any) -> Any:
        if not hasattr(self, "client"):
            app = create_app(GatewaySettings(provider=self.api.settings(warm_processes=0)))
            url = await self.stack.enter_async_context(serving(app))
            self.client = await self.stack.enter_async_context(
                openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="sk-test", max_retries=0)
            )
        return await self.client.chat.completions.create(**request)


class MessagesDoor(Door):
    """The gateway's `/v1/messages` through the official `anthropic` client."""

    name = "messages"
    FINISH: ClassVar[dict[str | None, str]] = {
        "end_turn": "stop",
        "stop_sequence": "stop",
        "max_tokens": "length",
        "tool_use": "tool-calls",
        "refusal": "content-filter",
    }

    def error_kind(self, exc: BaseException) -> str:
        message = str(exc).lower()
        if isinstance(exc, anthropic.BadRequestError) and "prompt is too long" in message:
            return "context-window"
        if isinstance(exc, anthropic.APIError) and "cannot be taken back" in message:
            return "stream-retraction"
        if isinstance(exc, anthropic.InternalServerError) and "tool_choice required" in message:
            return "tool-choice-violated"
        if isinstance(exc, anthropic.BadRequestError):
            return "refused"
        return super().error_kind(exc)

    async def send(self, case: Case) -> Outcome:
        app = create_app(GatewaySettings(provider=self.api.settings(warm_processes=0)))
        url = await self.stack.enter_async_context(serving(app))
        client = await self.stack.enter_async_context(
            anthropic.AsyncAnthropic(base_url=url, api_key="sk-test", max_retries=0)
        )
        request: dict[str, Any] = {"model": MODEL, "max_tokens": case.max_tokens or 1024}
        if case.tools:
            request["tools"] = [
                {"name": n, "description": TOOLS[n].__doc__, "input_schema": schema(n)}
                for n in case.tools
            ]
        if case.tool_choice == "none":
            request["tool_choice"] = {"type": "none"}
        elif case.tool_choice == "required":
            request["tool_choice"] = {"type": "any"}
        elif case.tool_choice:
            request["tool_choice"] = {"type": "tool", "name": case.tool_choice}
        if not case.parallel:
            request["tool_choice"] = {
                "type": "auto",
                **request.get("tool_choice", {}),
                "disable_parallel_tool_use": True,
            }
        if case.stop:
            request["stop_sequences"] = list(case.stop)
        extra: dict[str, Any] = {}  # what anthropic 2.x's create() takes no parameter for
        if case.temperature is not None:
            extra["temperature"] = case.temperature
        if case.output:
            extra["output_config"] = {
                "format": {"type": "json_schema", "schema": case.output.model_json_schema()}
            }
        if extra:
            request["extra_body"] = extra
        content: list[dict[str, Any]] = [{"type": "text", "text": case.prompt}]
        if case.image:
            content.append(
                {"type": "image",
                 "source": {"type": "base64", "media_type": "image/png", "data": PIXEL}}
            )  # fmt: skip
        messages: list[dict[str, Any]] = [{"role": "user", "content": content}]
        if case.history:
            messages.append(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": c.id, "name": c.name, "input": c.args}
                        for c in case.history
                    ],
                }
            )
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": c.id, "content": c.result,
                         "is_error": c.is_error}
                        for c in case.history
                    ],
                }
            )  # fmt: skip
        if case.stream:
            async with client.messages.stream(messages=messages, **request) as stream:
                message = await stream.get_final_message()
            return self._outcome(message, [], case)
        calls: list[tuple[str, dict[str, Any]]] = []
        while True:
            message = await client.messages.create(messages=messages, **request)
            made = [(b.id, b.name, b.input) for b in message.content if b.type == "tool_use"]
            if not (case.run_tools and made):
                return self._outcome(message, calls, case)
            calls += made
            # The client's own content objects, sent straight back.
            messages.append({"role": "assistant", "content": message.content})
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": i, "content": str(TOOLS[n](**a))}
                        for i, n, a in made
                    ],
                }
            )

    def _outcome(
        self, message: Any, calls: list[tuple[str, dict[str, Any]]], case: Case
    ) -> Outcome:
        calls = calls + [(b.id, b.name, b.input) for b in message.content if b.type == "tool_use"]
        answer = "".join(b.text for b in message.content if b.type == "text")
        finish = self.FINISH.get(message.stop_reason, message.stop_reason)
        # The object is the answer's text on this wire (or no text; a refusal's: its words).
        if case.output and finish != "content-filter":
            return Outcome(calls, "", finish, json.loads(answer) if answer else None)
        return Outcome(calls, answer, finish)


class ResponsesDoor(Door):
    """The gateway's `/v1/responses` through the official `openai` client; a tool loop
    continues with `previous_response_id`, sending only the results."""

    name = "responses"

    def error_kind(self, exc: BaseException) -> str:
        message = str(exc)
        if isinstance(exc, openai.BadRequestError) and exc.code == "context_length_exceeded":
            return "context-window"
        if "cannot be taken back" in message:  # an `error` event of the stream
            return "stream-retraction"
        if isinstance(exc, openai.InternalServerError) and "tool_choice required" in message:
            return "tool-choice-violated"
        if isinstance(exc, openai.BadRequestError):
            return "refused"
        return super().error_kind(exc)

    @staticmethod
    def _finish(response: Any) -> str:
        if response.status == "incomplete":
            reason = response.incomplete_details.reason
            return "content-filter" if reason == "content_filter" else "length"
        return "tool-calls" if response.output[-1].type == "function_call" else "stop"

    async def send(self, case: Case) -> Outcome:
        app = create_app(GatewaySettings(provider=self.api.settings(warm_processes=0)))
        url = await self.stack.enter_async_context(serving(app))
        client = await self.stack.enter_async_context(
            openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="sk-test", max_retries=0)
        )
        request: dict[str, Any] = {"model": MODEL}
        if case.tools:
            request["tools"] = [
                {"type": "function", "name": n, "description": TOOLS[n].__doc__,
                 "parameters": schema(n), "strict": False}
                for n in case.tools
            ]  # fmt: skip
        if case.tool_choice in ("none", "required"):
            request["tool_choice"] = case.tool_choice
        elif case.tool_choice:
            request["tool_choice"] = {"type": "function", "name": case.tool_choice}
        if case.max_tokens:
            request["max_output_tokens"] = case.max_tokens
        if case.temperature is not None:
            request["temperature"] = case.temperature
        if not case.parallel:
            request["parallel_tool_calls"] = False
        if case.output:
            request["text"] = {
                "format": {"type": "json_schema", "name": case.output.__name__,
                           "schema": case.output.model_json_schema()}
            }  # fmt: skip
        content: Any = case.prompt
        if case.image:
            content = [
                {"type": "input_text", "text": case.prompt},
                {"type": "input_image", "image_url": PIXEL_URL, "detail": "auto"},
            ]
        items: list[dict[str, Any]] = [{"role": "user", "content": content}]
        for c in case.history:
            assert not c.is_error, "a function_call_output has no error flag"
            items.append({"type": "function_call", "call_id": c.id, "name": c.name,
                          "arguments": json.dumps(c.args)})  # fmt: skip
        items += [
            {"type": "function_call_output", "call_id": c.id, "output": c.result}
            for c in case.history
        ]
        if case.stream:
            text_parts: list[str] = []
            async for event in await client.responses.create(input=items, stream=True, **request):
                if event.type == "response.output_text.delta":
                    text_parts.append(event.delta)
                elif event.type == "error":  # after the stream began: an event, not a status
                    raise RuntimeError(event.message)
                elif event.type in ("response.completed", "response.incomplete"):
                    finish = self._finish(event.response)
            # The object is the answer's text on this wire (a refusal's: its words).
            if case.output and finish != "content-filter":
                return Outcome(finish=finish, structured=json.loads("".join(text_parts)))
            return Outcome(text="".join(text_parts), finish=finish)
        calls: list[tuple[str, dict[str, Any]]] = []
        response = await client.responses.create(input=items, **request)
        while True:
            made = [
                (i.call_id, i.name, json.loads(i.arguments or "{}"))
                for i in response.output
                if i.type == "function_call"
            ]
            calls += made
            if not (case.run_tools and made):
                answer = response.output_text
                # The object is the answer's text on this wire (or no text; a refusal's: its
                # words).
                if case.output and self._finish(response) != "content-filter":
                    return Outcome(
                        calls, "", self._finish(response), json.loads(answer) if answer else None
                    )
                return Outcome(calls, answer, self._finish(response))
            results = [
                {"type": "function_call_output", "call_id": i, "output": str(TOOLS[n](**a))}
                for i, n, a in made
            ]
            response = await client.responses.create(
                input=results, previous_response_id=response.id, **request
            )


DOORS: dict[str, type[Door]] = {
    d.name: d
    for d in (CoreDoor, PydanticAIDoor, LangChainDoor, LiteLLMDoor, ChatCompletionsDoor,
              ResponsesDoor, MessagesDoor)
}  # fmt: skip


# --------------------------------------------------------------------------- the cases


def weather(request: RecordedRequest) -> Reply:
    """Asks for Lyon's °C, then answers from the result."""
    results = request.tool_result_texts()
    if not results:
        return reply(tool_use("get_celsius", {"city": "Lyon"}, "toolu_lyon"))
    return reply(text(f"Lyon: {float(results[0]):g} °C."))


def two_cities(request: RecordedRequest) -> Reply:
    """Asks for two cities at once (parallel calls in one turn), then answers from both."""
    results = request.tool_result_texts()
    if not results:
        return reply(
            tool_use("get_celsius", {"city": "Lyon"}, "toolu_lyon"),
            tool_use("get_celsius", {"city": "Paris"}, "toolu_paris"),
        )
    return reply(text(f"Lyon {float(results[0]):g} °C, Paris {float(results[1]):g} °C."))


def structured(request: RecordedRequest) -> Reply:
    if request.tool_results():
        return reply(text("done"))
    # Words before the object: the object alone is the answer on every door.
    return reply(
        text("Here it is."), tool_use("StructuredOutput", {"city": "Paris", "celsius": 18})
    )


def structured_after_text(request: RecordedRequest) -> Reply:
    """Answers in text first; asked again (the CLI's "You MUST call the StructuredOutput tool",
    or pydantic-ai's retry), answers with words and the object."""
    if any(m["role"] == "assistant" for m in request.messages):
        return reply(text("Paris."), tool_use("StructuredOutput", {"city": "Paris", "celsius": 18}))
    return reply(text("Paris, I think."))


def answers(*items: ScriptItem) -> Callable[[], list[ScriptItem]]:
    return lambda: list(items)


TOO_LONG = "prompt is too long: 250000 tokens > 200000 maximum"


def refuse_temperature(_request: RecordedRequest) -> ScriptItem:
    """The API's answer to a temperature on Opus 4.7 and later (a function: the CLI tries a
    plain 400 three times)."""
    return http_error(400, "temperature is deprecated for this model.")


PIECES = ["The list: one, two, ", "three, four, ", "five, six, ", "seven, eig"]
#: Cut at the output limit four times: the CLI resumes a cut answer three times, then stops.
CUT = answers(*[reply(text(p), stop_reason="max_tokens") for p in PIECES])
#: The stop sequence "END" is split across the scripted API's 8-character deltas.
STOPPED = answers(reply(text("Lyon is mild. END Ignore this.")))
DECLINED = "I can't help with that."
#: The model declines (stop reason `refusal`); the CLI asks it once more, and it declines again.
REFUSED = answers(*[reply(text(DECLINED), stop_reason="refusal")] * 2)


def always_declines(_request: RecordedRequest) -> Reply:
    """Declines however often it is asked (a framework may ask again)."""
    return reply(text(DECLINED), stop_reason="refusal")


@dataclass(frozen=True)
class Expected:
    """What every door must give for a case (`outcome`), and what the API must have seen."""

    case: Case
    outcome: Outcome
    check: Callable[[ScriptedMessagesAPI], None] = lambda api: None
    #: A door whose outcome is its own (the core stream hands back a DiscardPart, not an error).
    per_door: dict[str, Outcome] = field(default_factory=dict)
    #: What the door's error must say (the setting and the API's words).
    mentions: str | None = None


def offered(request: RecordedRequest) -> list[str]:
    """The application's tools the model was offered (the bridge's prefix taken off)."""
    return sorted(n.rsplit("__", 1)[-1] for n in request.tool_names)


def check_one_call_then_results(api: ScriptedMessagesAPI) -> None:
    first, second = api.requests
    assert offered(first) == ["get_celsius"]
    assert [(b["id"], b["input"]) for b in second.tool_uses()] == [("toolu_lyon", {"city": "Lyon"})]
    assert [(r.tool_use_id, r.text, r.is_error) for r in second.results()] == [
        ("toolu_lyon", "15.0", False)
    ]


def check_parallel(api: ScriptedMessagesAPI) -> None:
    _, second = api.requests
    assert [b["id"] for b in second.tool_uses()] == ["toolu_lyon", "toolu_paris"]
    assert [(r.tool_use_id, r.text) for r in second.results()] == [
        ("toolu_lyon", "15.0"),
        ("toolu_paris", "18.0"),
    ]
    user_turns = [m for m in second.messages if m["role"] == "user"]
    assert sum(1 for b in user_turns[-1]["content"] if b["type"] == "tool_result") == 2, (
        "both results in one user turn"
    )


def check_error_result(api: ScriptedMessagesAPI) -> None:
    (request,) = api.requests
    assert [b["id"] for b in request.tool_uses()] == ["call_1"]
    assert request.results() == [SentToolResult("call_1", True, "station offline")]


def check_max_tokens(api: ScriptedMessagesAPI) -> None:
    assert [r.body["max_tokens"] for r in api.requests] == [50] * 4


def check_asked_twice(api: ScriptedMessagesAPI) -> None:
    first, second = api.requests
    assert first.messages[0] == second.messages[0], "the CLI repeats the refused request"


def check_declined_again(api: ScriptedMessagesAPI) -> None:
    """Asked at least twice (the CLI repeats a refused request; a framework may ask again)."""
    assert len(api.requests) >= 2
    assert all(r.messages[0] == api.requests[0].messages[0] for r in api.requests)


def check_one_request(api: ScriptedMessagesAPI) -> None:
    assert len(api.requests) == 1, "no retry, no summary of the history"


def check_no_request(api: ScriptedMessagesAPI) -> None:
    assert api.all_requests == [], "refused by the CLI, before the API"


def check_offered(*names: str) -> Callable[[ScriptedMessagesAPI], None]:
    def check(api: ScriptedMessagesAPI) -> None:
        (request,) = api.requests
        assert offered(request) == sorted(names)

    return check


def check_image(api: ScriptedMessagesAPI) -> None:
    (request,) = api.requests
    (image,) = request.blocks("image")
    assert image["source"] == {"type": "base64", "media_type": "image/png", "data": PIXEL}


def check_sent(**fields: Any) -> Callable[[ScriptedMessagesAPI], None]:
    """Every request the model got carries these body fields, as the API reads them."""

    def check(api: ScriptedMessagesAPI) -> None:
        assert api.requests
        for request in api.requests:
            assert {k: request.body.get(k) for k in fields} == fields

    return check


def check_all(
    *checks: Callable[[ScriptedMessagesAPI], None],
) -> Callable[[ScriptedMessagesAPI], None]:
    def check(api: ScriptedMessagesAPI) -> None:
        for one in checks:
            one(api)

    return check


FORCED_OFF = {"type": "disabled"}  # thinking, with a forced tool choice


def check_structured(api: ScriptedMessagesAPI) -> None:
    assert api.requests[0].tool_names == ["StructuredOutput"]


def check_asked_again(api: ScriptedMessagesAPI) -> None:
    first, second = api.requests
    assert first.tool_names == ["StructuredOutput"]
    said = [b["text"] for m in second.messages if m["role"] == "assistant" for b in m["content"]]
    assert said == ["Paris, I think."], "the text answer stays in the conversation"


PARIS = {"city": "Paris", "celsius": 18}
LYON = tool_use("get_celsius", {"city": "Lyon"}, "toolu_lyon")
#: The doors whose answer is the object (in the answer's text): the model's words are not sent.
OBJECT_ONLY = {
    door: Outcome(structured=PARIS, finish="stop")
    for door in ("litellm", "chat-completions", "responses", "messages")
}
#: The model answered in text, was asked again, and answered with words and the object: every
#: door hands back (or streams) the words of both turns, as the stream sends them and the
#: conversation holds them.
AFTER_TEXT = Outcome(text="Paris, I think.Paris.", structured=PARIS, finish="stop")


CASES: dict[str, Expected] = {
    "tool-call": Expected(
        Case(lambda: weather, tools=("get_celsius",), run_tools=True),
        Outcome([("toolu_lyon", "get_celsius", {"city": "Lyon"})], "Lyon: 15 °C.", "stop"),
        check_one_call_then_results,
    ),
    "parallel-tool-calls": Expected(
        Case(lambda: two_cities, "Lyon and Paris?", tools=("get_celsius",), run_tools=True),
        Outcome(
            [
                ("toolu_lyon", "get_celsius", {"city": "Lyon"}),
                ("toolu_paris", "get_celsius", {"city": "Paris"}),
            ],
            "Lyon 15 °C, Paris 18 °C.",
            "stop",
        ),
        check_parallel,
    ),
    "error-tool-result": Expected(
        Case(
            answers(reply(text("The station is offline."))),
            tools=("get_celsius",),
            history=(Call("call_1", "get_celsius", {"city": "Lyon"}, "station offline", True),),
        ),
        Outcome([], "The station is offline.", "stop"),
        check_error_result,
    ),
    "stop": Expected(
        Case(STOPPED, stop=("END", "Ignore")),
        Outcome([], "Lyon is mild. ", "stop"),
        check_sent(stop_sequences=["END", "Ignore"]),
    ),
    "stop-streamed": Expected(
        Case(STOPPED, stop=("END", "Ignore"), stream=True),
        Outcome([], "Lyon is mild. ", "stop"),
        check_sent(stop_sequences=["END", "Ignore"]),
    ),
    "max-tokens": Expected(
        Case(CUT, max_tokens=50),
        Outcome([], "".join(PIECES), "length"),
        check_max_tokens,
    ),
    "max-tokens-streamed": Expected(
        Case(CUT, max_tokens=50, stream=True),
        Outcome([], "".join(PIECES), "length"),
        check_max_tokens,
    ),
    "context-window-api": Expected(
        Case(answers(http_error(400, TOO_LONG))),
        Outcome(error="context-window"),
        check_one_request,
    ),
    "context-window-cli": Expected(
        Case(answers(reply(text("ok"))), "word " * 1_500_000),
        Outcome(error="context-window"),
        check_no_request,
    ),
    "tool-choice-none": Expected(
        Case(answers(reply(text("About 15 °C."))), tools=("get_celsius",), tool_choice="none"),
        Outcome([], "About 15 °C.", "stop"),
        check_offered(),
    ),
    "tool-choice-required": Expected(
        Case(
            answers(reply(tool_use("get_celsius", {"city": "Lyon"}, "toolu_lyon"))),
            tools=("get_celsius", "to_fahrenheit"),
            tool_choice="required",
        ),
        Outcome([("toolu_lyon", "get_celsius", {"city": "Lyon"})], "", "tool-calls"),
        check_all(
            check_offered("get_celsius", "to_fahrenheit"),
            check_sent(tool_choice={"type": "any"}, thinking=FORCED_OFF),
        ),
    ),
    "tool-choice-required-unmet": Expected(
        Case(
            answers(reply(text("About 15 °C."))),
            tools=("get_celsius", "to_fahrenheit"),
            tool_choice="required",
        ),
        Outcome(error="tool-choice-violated"),
    ),
    "tool-choice-named": Expected(
        Case(
            answers(reply(tool_use("to_fahrenheit", {"celsius": 15}, "toolu_f"))),
            tools=("get_celsius", "to_fahrenheit"),
            tool_choice="to_fahrenheit",
        ),
        Outcome([("toolu_f", "to_fahrenheit", {"celsius": 15})], "", "tool-calls"),
        check_all(
            check_offered("to_fahrenheit"),
            check_sent(
                tool_choice={"type": "tool", "name": "mcp__sf__to_fahrenheit"}, thinking=FORCED_OFF
            ),
        ),
    ),
    "tool-choice-none-after-calls": Expected(
        Case(
            answers(reply(text("Lyon: 15 °C."))),
            tools=("get_celsius",),
            history=(Call("call_1", "get_celsius", {"city": "Lyon"}, "15.0"),),
            tool_choice="none",
        ),
        Outcome([], "Lyon: 15 °C.", "stop"),
        check_sent(tool_choice={"type": "none"}),
    ),
    "parallel-tool-calls-off": Expected(
        Case(
            answers(reply(tool_use("get_celsius", {"city": "Lyon"}, "toolu_lyon"))),
            "Lyon and Paris?",
            tools=("get_celsius",),
            parallel=False,
        ),
        Outcome([("toolu_lyon", "get_celsius", {"city": "Lyon"})], "", "tool-calls"),
        check_sent(tool_choice={"type": "auto", "disable_parallel_tool_use": True}),
    ),
    "temperature": Expected(
        Case(answers(reply(text("About 15 °C."))), temperature=0.3),
        Outcome([], "About 15 °C.", "stop"),
        check_sent(temperature=0.3),
    ),
    "temperature-refused": Expected(
        Case(lambda: refuse_temperature, temperature=0.3),
        Outcome(error="refused"),
        check_sent(temperature=0.3),
        mentions="temperature is deprecated for this model",
    ),
    "stream-retraction": Expected(
        Case(
            answers(fault("drop_mid_stream", events=5), reply(text("Five, said twice over."))),
            "Five?",
            stream=True,
        ),
        Outcome(error="stream-retraction"),
        per_door={"core": Outcome(text="Five, said twice over.", finish="stop", retracted=True)},
    ),
    "structured-output": Expected(
        Case(lambda: structured, "Weather in Paris?", output=City),
        Outcome(text="Here it is.", structured=PARIS, finish="stop"),
        check_structured,
        per_door=OBJECT_ONLY,
    ),
    "structured-output-after-text": Expected(
        Case(lambda: structured_after_text, "Weather in Paris?", output=City),
        AFTER_TEXT,
        check_asked_again,
        per_door={
            **OBJECT_ONLY,
            # `GenerateResult.text` is the last model turn's; `all_text` has both.
            "core": Outcome(text="Paris.", structured=PARIS, finish="stop"),
        },
    ),
    "structured-output-after-text-streamed": Expected(
        Case(lambda: structured_after_text, "Weather in Paris?", output=City, stream=True),
        AFTER_TEXT,
        check_asked_again,
        per_door=OBJECT_ONLY,
    ),
    "structured-output-with-a-call": Expected(
        Case(answers(reply(text("Let me check."), LYON)), tools=("get_celsius",), output=City),
        # The words are no answer on the wire doors: there, the answer is the object, and
        # `responses.parse` would parse them as one.
        Outcome([("toolu_lyon", "get_celsius", {"city": "Lyon"})], "", "tool-calls"),
        per_door={
            "core": Outcome(
                [("toolu_lyon", "get_celsius", {"city": "Lyon"})], "Let me check.", "tool-calls"
            )
        },
    ),
    "image": Expected(
        Case(answers(reply(text("A transparent pixel."))), "What is this?", image=True),
        Outcome([], "A transparent pixel.", "stop"),
        check_image,
    ),
    # A refusal is an answer that ended for safety (finish reason content-filter, each door's
    # own name for it), not a failure to retry: the words of both refused turns, as streamed.
    "refusal": Expected(
        Case(REFUSED),
        Outcome([], DECLINED * 2, "content-filter"),
        check_asked_twice,
        # `GenerateResult.text` is the last model turn's (`all_text` has both), and so is a
        # Chat Completions message's content.
        per_door={
            door: Outcome([], DECLINED, "content-filter")
            for door in ("core", "litellm", "chat-completions")
        },
    ),
    "refusal-structured": Expected(
        Case(lambda: always_declines, output=City),
        # There is no object: where the answer would be the object, the words are the answer.
        Outcome([], DECLINED * 2, "content-filter"),
        check_declined_again,
        per_door={
            **{
                door: Outcome([], DECLINED, "content-filter")
                for door in ("core", "litellm", "chat-completions")
            },
            # As with pydantic-ai's own AnthropicModel: the Agent reads the refusal's words as
            # the output, and asks again once.
            "pydantic-ai": Outcome(
                error="other: pydantic_ai.exceptions.UnexpectedModelBehavior: Exceeded maximum "
                "output retries (1)"
            ),
            # `ModelRefusalError`, as ChatAnthropic's `with_structured_output` raises it.
            "langchain": Outcome(error="declined"),
        },
    ),
    "refusal-streamed": Expected(
        Case(REFUSED, stream=True),
        Outcome([], DECLINED * 2, "content-filter"),
        check_asked_twice,
    ),
    "refusal-structured-streamed": Expected(
        Case(lambda: always_declines, output=City, stream=True),
        Outcome([], DECLINED * 2, "content-filter"),
        check_declined_again,
        per_door={
            "pydantic-ai": Outcome(
                error="other: pydantic_ai.exceptions.UnexpectedModelBehavior: Exceeded maximum "
                "output retries (1)"
            ),
            "langchain": Outcome(error="declined"),
        },
    ),
}


#: (door, case) pairs that encode behaviour being built now (issue 28): strict xfails, to drop
#: when it lands.
TARGET: dict[tuple[str, str], str] = {}
#: (door, case) pairs a door cannot express at all.
NOT_EXPRESSIBLE: dict[tuple[str, str], str] = {
    **{
        (door, "error-tool-result"): "a Chat Completions tool message has no error flag"
        for door in ("litellm", "chat-completions")
    },
    ("responses", "error-tool-result"): "a function_call_output has no error flag",
    ("pydantic-ai", "structured-output-with-a-call"): "with an output type, the Agent runs tools",
    ("langchain", "structured-output-with-a-call"): "with_structured_output binds no tools",
    ("responses", "stop"): "the Responses API has no stop sequences",
    ("responses", "stop-streamed"): "the Responses API has no stop sequences",
}


def matrix() -> list[Any]:
    params = []
    for case in CASES:
        for door in DOORS:
            marks: list[Any] = []
            if (door, case) in TARGET:
                marks.append(pytest.mark.xfail(strict=True, reason=TARGET[door, case]))
            if (door, case) in NOT_EXPRESSIBLE:
                marks.append(pytest.mark.skip(reason=NOT_EXPRESSIBLE[door, case]))
            params.append(pytest.param(door, case, marks=marks, id=f"{case}-{door}"))
    return params


@pytest.mark.parametrize(("door", "case"), matrix())
async def test_every_front_door_gives_the_same_outcome(door: str, case: str) -> None:
    expected = CASES[case]
    async with ScriptedMessagesAPI(expected.case.script()) as api, AsyncExitStack() as stack:
        front = DOORS[door](api, stack)
        try:
            outcome = await front.send(expected.case)
        except Exception as exc:  # every door's error is read into the outcome
            outcome = Outcome(error=front.error_kind(exc))
            assert expected.mentions is None or expected.mentions in str(exc), str(exc)
    assert outcome == expected.per_door.get(door, expected.outcome)
    expected.check(api)
    assert api.errors == []
