"""LangChain adapter: `ChatClaudeAgent`, a `BaseChatModel` over `ClaudeAgentProvider`.

LangChain runs its own tools, so every call is a **single-turn** query: the tools bound with
`bind_tools` are offered to the model without executors, and the calls come back as
`AIMessage.tool_calls` for the application (or an agent loop) to run. History reaches the model
natively: `AIMessage.tool_calls` become `tool_use` blocks and `ToolMessage`s `tool_result`
blocks, with the same ids.

Example::

    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool

    from sf_provider import ProviderSettings
    from sf_provider.adapters.langchain import ChatClaudeAgent

    @tool
    def get_weather(city: str) -> str:
        "Current weather for a city."
        return "sunny"

    model = ChatClaudeAgent(settings=ProviderSettings(model="claude-sonnet-5-5"))
    agent = model.bind_tools([get_weather])
    messages = [HumanMessage("Weather in Paris?")]
    while (reply := await agent.ainvoke(messages)).tool_calls:
        messages.append(reply)
        messages += [get_weather.invoke(call) for call in reply.tool_calls]  # ToolMessages
    print(reply.content, reply.usage_metadata)

Everything goes through `ClaudeAgentProvider.generate` / `stream`: this module only converts
messages in and results out.
"""

from __future__ import annotations

try:
    import langchain_core  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "sf_provider.adapters.langchain needs the extra: pip install 'sf-provider[langchain]'"
    ) from exc

import json
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import aclosing
from typing import Any, TypeVar

from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.ai import InputTokenDetails, UsageMetadata
from langchain_core.messages.tool import ToolCall, tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field, model_validator

from .._sync import iterate_in_thread, run_sync
from ..errors import InvalidMessagesError, ProviderError, UnsupportedRequestError
from ..provider import ClaudeAgentProvider, NamedToolChoice, ToolChoice
from ..settings import Effort, ProviderSettings, Thinking
from ..tools import FunctionTool
from ..types import (
    CallWarning,
    DiscardPart,
    ErrorPart,
    FinishPart,
    GenerateResult,
    ReasoningDeltaPart,
    ReasoningEndPart,
    ReasoningStartPart,
    StreamPart,
    StreamStartPart,
    TextDeltaPart,
    TextEndPart,
    TextStartPart,
    ToolCallPart,
    ToolInputDeltaPart,
    ToolInputEndPart,
    ToolInputStartPart,
    ToolResultPart,
    Usage,
)

__all__ = ["ChatClaudeAgent", "StreamRetractionError"]

_T = TypeVar("_T")

#: What `bind_tools` accepts, like every LangChain chat model.
ToolLike = Mapping[str, Any] | type | Callable[..., Any] | BaseTool


class StreamRetractionError(ProviderError):
    """The API stream was cut and the turn redone after some of it had been streamed.

    The provider takes back the parts of the cut attempt (a `discard` part), but LangChain
    chunks already handed out cannot be taken back; `ainvoke`/`invoke` fold the redo correctly.
    """

    retryable = True


class ChatClaudeAgent(BaseChatModel):
    """Claude through the Claude Code CLI as a LangChain chat model; LangChain runs the tools.

    Give it a `provider` (a `ClaudeAgentProvider`) or `settings` (a `ProviderSettings`; the
    provider is built from them). `model`, `max_tokens`, `timeout`, `max_retries`, `thinking`
    and `effort` are taken the way `ChatAnthropic` takes them and apply to every call (over the
    provider's settings); any other constructor argument (`temperature`, `top_p`, ...) is
    refused: the Claude Code CLI has no switch for it. Keyword arguments of `invoke`/`stream`
    (and of `bind`) that are not `tools`/`tool_choice` are passed on as the provider's call
    options (`model`, `system_prompt`, `max_tokens`, ...); an unknown one raises
    `UnsupportedRequestError`.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    provider: ClaudeAgentProvider = Field(default_factory=ClaudeAgentProvider, exclude=True)
    settings: ProviderSettings | None = Field(
        default=None, exclude=True, description="Builds `provider` when it is not given."
    )
    model: str | None = Field(default=None, description="Claude model; None = the provider's.")
    max_tokens: int | None = Field(default=None, ge=1, description="Output token limit per call.")
    timeout: float | None = Field(default=None, gt=0, description="Seconds a call may take.")
    max_retries: int | None = Field(default=None, ge=0, description="HTTP retries of the CLI.")
    thinking: Thinking | None = Field(default=None, description="Extended thinking (`Thinking`).")
    effort: Effort | None = Field(default=None, description="Effort level (`Effort`).")

    @model_validator(mode="after")
    def _provider_from_settings(self) -> ChatClaudeAgent:
        if self.settings is not None and "provider" not in self.model_fields_set:
            self.provider = ClaudeAgentProvider(self.settings)
        return self

    @property
    def _llm_type(self) -> str:
        return "claude-agent-sdk"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model": self.model or self.provider.settings.model}

    def _call_options(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The model's own settings (those set), under the call's keyword arguments."""
        fields = ("model", "max_tokens", "timeout", "max_retries", "thinking", "effort")
        own = {name: getattr(self, name) for name in fields if getattr(self, name) is not None}
        return {**own, **kwargs}

    def bind_tools(
        self,
        tools: Sequence[ToolLike],
        *,
        tool_choice: str | dict[str, Any] | bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Offer these tools to the model; LangChain (or the application) runs the calls.

        `tools`: `BaseTool`s, functions, pydantic models or tool dicts (anything
        `convert_to_openai_tool` takes). `tool_choice`: `"auto"` / `None`, `"none"`, `"any"` /
        `"required"` / `True` (some call), a tool name, or `{"type": "tool", "name": ...}` /
        `{"type": "function", "function": {"name": ...}}`.
        """
        definitions = [tool_definition(t) for t in tools]
        for definition in definitions:
            _function_tool(definition)  # a bad name or schema fails here, not at the first call
        choice = _tool_choice(tool_choice, [d["name"] for d in definitions])
        # Plain data in the binding: LangChain serialises bound kwargs (tracing, caching).
        plain = choice if isinstance(choice, str) else choice.model_dump()
        return self.bind(tools=definitions, tool_choice=plain, **kwargs)

    # -- async: the real path

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        provider_messages, tools, options = _request(messages, stop, self._call_options(kwargs))
        result = await self.provider.generate(provider_messages, tools=tools, **options)
        return ChatResult(generations=[ChatGeneration(message=ai_message(result))])

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        provider_messages, tools, options = _request(messages, stop, self._call_options(kwargs))
        chunks = _ChunkMapper()
        async with aclosing(self.provider.stream(provider_messages, tools=tools, **options)) as s:
            async for part in s:
                chunk = chunks.chunk(part)
                if chunk is None:
                    continue
                if run_manager is not None and chunk.text:
                    await run_manager.on_llm_new_token(chunk.text, chunk=chunk)
                yield chunk

    # -- sync: the async path on an event loop of its own

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return run_sync(lambda: self._agenerate(messages, stop, None, **kwargs))

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for chunk in iterate_in_thread(lambda: self._astream(messages, stop, None, **kwargs)):
            if run_manager is not None and chunk.text:
                run_manager.on_llm_new_token(chunk.text, chunk=chunk)
            yield chunk


# --------------------------------------------------------------------------- tools


def tool_definition(tool: ToolLike) -> dict[str, Any]:
    """A LangChain tool as a JSON-schema tool definition: `{name, description, input_schema}`."""
    function = convert_to_openai_tool(tool)["function"]
    return {
        "name": function["name"],
        "description": function.get("description", ""),
        "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
    }


def _function_tool(definition: Mapping[str, Any]) -> FunctionTool:
    # No executor: the query is single-turn and the calls go back to LangChain.
    return FunctionTool(
        name=definition["name"],
        description=definition.get("description", ""),
        input_schema=definition["input_schema"],
    )


def _tool_choice(choice: str | dict[str, Any] | bool | None, names: list[str]) -> ToolChoice:
    name: Any
    match choice:
        case None | "auto" | False:
            return "auto"
        case "none":
            return "none"
        case "any" | "required" | True:
            return "required"
        case str():
            name = choice
        case {"type": "tool", "name": name}:
            pass
        case {"type": "function", "function": {"name": name}}:
            pass
        case _:
            raise UnsupportedRequestError(
                f"tool_choice {choice!r} is not understood: use 'auto', 'none', 'any', "
                f"'required' or a tool name"
            )
    if name not in names:
        raise UnsupportedRequestError(
            f"tool_choice names {name!r}, which is not among the bound tools {names}"
        )
    return NamedToolChoice(name=name)


# --------------------------------------------------------------------------- messages in


def _request(
    messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[FunctionTool], dict[str, Any]]:
    if stop:
        raise UnsupportedRequestError(
            "stop sequences are not supported: the Claude Code CLI has no stop-sequence option"
        )
    options = dict(kwargs)
    tools = [_function_tool(d) for d in options.pop("tools", None) or []]
    if "tool_choice" in options:
        options["tool_choice"] = _tool_choice(options["tool_choice"], [t.name for t in tools])
    return provider_messages(messages), tools, options


def provider_messages(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """LangChain messages in the provider's request format (see `sf_provider._messages`)."""
    converted: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        where = f"message {i} ({type(message).__name__})"
        role = message.role if isinstance(message, ChatMessage) else message.type
        if isinstance(message, SystemMessage) or role == "system":
            converted.append({"role": "system", "content": _text_of(message.content, where)})
        elif isinstance(message, HumanMessage) or role == "user":
            converted.append({"role": "user", "content": _user_content(message.content, where)})
        elif isinstance(message, AIMessage) or role == "assistant":
            content = _assistant_content(message, where)
            if content:  # an empty turn says nothing the API would accept
                converted.append({"role": "assistant", "content": content})
        elif isinstance(message, ToolMessage):
            result = {
                "type": "tool-result",
                "tool_call_id": message.tool_call_id,
                "output": _tool_output(message.content),
                "is_error": message.status == "error",
            }
            converted.append({"role": "tool", "content": [result]})
        else:
            raise InvalidMessagesError(
                f"{where}: role {role!r} cannot be sent; use system, human, ai or tool messages"
            )
    return converted


def _content_blocks(content: str | list[str | dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [{"type": "text", "text": b} if isinstance(b, str) else b for b in content]


def _text_of(content: str | list[str | dict[str, Any]], where: str) -> str:
    texts = []
    for block in _content_blocks(content):
        if block.get("type") != "text":
            raise InvalidMessagesError(f"{where}: only text can go here, not {block.get('type')!r}")
        texts.append(str(block.get("text", "")))
    return "".join(texts)


def _user_content(content: str | list[str | dict[str, Any]], where: str) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in _content_blocks(content):
        kind = block.get("type")
        if kind == "text":
            blocks.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind == "image_url":  # OpenAI style: {"image_url": {"url": ...}} or a plain url
            image = block.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else image
            blocks.append({"type": "image", "url": url})
        elif kind == "image" and isinstance(block.get("base64"), str):  # LangChain v1 block
            media = block.get("mime_type")
            blocks.append({"type": "image", "data": block["base64"], "media_type": media})
        elif kind == "image" and isinstance(block.get("url"), str):
            blocks.append({"type": "image", "url": block["url"]})
        elif kind == "image" and isinstance(block.get("source"), Mapping):  # Anthropic style
            source = block["source"]
            if source.get("type") == "base64":
                blocks.append(
                    {"type": "image", "data": source["data"], "media_type": source["media_type"]}
                )
            else:
                blocks.append({"type": "image", "url": source.get("url")})
        else:
            raise InvalidMessagesError(
                f"{where}: a user block must be text or an image (image_url, or an image with "
                f"base64 + mime_type or url), not {kind!r}"
            )
    return blocks


def _assistant_content(message: BaseMessage, where: str) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in _content_blocks(message.content):
        kind = block.get("type")
        if kind == "text":
            if block.get("text"):
                blocks.append({"type": "text", "text": str(block["text"])})
        elif kind == "thinking":  # Anthropic style, signed
            blocks.append(
                {"type": "reasoning", "text": block.get("thinking", ""),
                 "signature": block.get("signature")}
            )  # fmt: skip
        elif kind == "reasoning":  # LangChain v1 standard block
            extras = block.get("extras") or {}
            blocks.append(
                {"type": "reasoning", "text": block.get("reasoning", ""),
                 "signature": block.get("signature") or extras.get("signature")}
            )  # fmt: skip
        elif kind in ("tool_use", "tool_call", "tool_call_chunk"):
            pass  # the calls are taken from `tool_calls`, which carries the ids
        else:
            raise InvalidMessagesError(
                f"{where}: an assistant block must be text, reasoning or a tool call, not {kind!r}"
            )
    for call in message.tool_calls if isinstance(message, AIMessage) else []:
        if not call.get("id"):
            raise InvalidMessagesError(
                f"{where}: tool call {call['name']!r} has no id; the tool message answering it "
                f"needs the same id"
            )
        blocks.append(
            {"type": "tool-call", "tool_call_id": call["id"], "tool_name": call["name"],
             "input": call["args"]}
        )  # fmt: skip
    return blocks


def _tool_output(content: str | list[str | dict[str, Any]]) -> Any:
    if isinstance(content, str):
        return content
    blocks = _content_blocks(content)
    if all(b.get("type") == "text" for b in blocks):
        return "".join(str(b.get("text", "")) for b in blocks)
    return blocks  # sent as JSON


# --------------------------------------------------------------------------- results out


def usage_metadata(usage: Usage) -> UsageMetadata:
    """The provider's usage as LangChain's: input tokens include cache reads and writes."""
    input_tokens = (
        usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens
    )
    return UsageMetadata(
        input_tokens=input_tokens,
        output_tokens=usage.output_tokens,
        total_tokens=input_tokens + usage.output_tokens,
        input_token_details=InputTokenDetails(
            cache_read=usage.cache_read_input_tokens,
            cache_creation=usage.cache_creation_input_tokens,
        ),
    )


def _response_metadata(
    finish: FinishPart | GenerateResult, warnings: list[CallWarning], invalid: dict[str, str]
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "finish_reason": finish.finish_reason,
        "stop_reason": finish.raw_stop_reason,
        "cost_usd": finish.cost_usd,
        "session_id": finish.session_id,
        "num_turns": finish.num_turns,
        "api_calls": finish.api_calls,
        # Which CLI process served the query: fresh, warm, or continued (its conversation).
        "process": finish.provider_details.get("process"),
    }
    structured = getattr(finish, "structured_output", None)  # with the `output_schema` option
    if structured is not None:
        metadata["structured_output"] = structured
    if warnings:
        metadata["warnings"] = [w.model_dump() for w in warnings]
    if invalid:  # unknown tool or off-schema arguments: LangChain's tool runner reports it too
        metadata["invalid_tool_calls"] = invalid
    return metadata


def ai_message(result: GenerateResult) -> AIMessage:
    """A `GenerateResult` of a single-turn query as an `AIMessage`."""
    calls: list[ToolCall] = []
    for call in result.tool_calls:
        _app_call(call.provider_executed, call.tool_name)
        calls.append(ToolCall(name=call.tool_name, args=call.input, id=call.tool_call_id))
    invalid = {c.tool_call_id: c.invalid_reason or "" for c in result.tool_calls if c.invalid}
    additional = {"reasoning_content": result.reasoning} if result.reasoning else {}
    # Signed thinking goes into the content as Anthropic-style blocks (as ChatAnthropic does), so
    # that the next request replays it: the API wants it back with the calls.
    content: str | list[str | dict[str, Any]] = result.text
    signed = [r for r in result.final_reasoning if r.signature]
    if signed:
        content = [
            {"type": "thinking", "thinking": r.text, "signature": r.signature} for r in signed
        ]
        if result.text:
            content.append({"type": "text", "text": result.text})
    return AIMessage(
        content=content,
        tool_calls=calls,
        usage_metadata=usage_metadata(result.usage),
        response_metadata=_response_metadata(result, result.warnings, invalid),
        additional_kwargs=additional,
    )


def _app_call(provider_executed: bool, name: str) -> None:
    # The adapter offers tools without executors, so the provider never runs one itself.
    if provider_executed:
        raise UnsupportedRequestError(
            f"the provider executed tool {name!r}, but this adapter leaves every call to "
            f"LangChain; use the tools bound with bind_tools, not a registry with executors"
        )


class _ChunkMapper:
    """Stream parts -> `ChatGenerationChunk`s; the finish part becomes the last chunk."""

    def __init__(self) -> None:
        self.warnings: list[CallWarning] = []
        self.invalid: dict[str, str] = {}
        self.streamed: set[str] = set()  # part and call ids already handed to LangChain
        self.calls = 0

    def chunk(self, part: StreamPart) -> ChatGenerationChunk | None:
        match part:
            case StreamStartPart():
                self.warnings.extend(part.warnings)
            case TextDeltaPart():
                self.streamed.add(part.id)
                return _chunk(AIMessageChunk(content=part.delta))
            case ReasoningDeltaPart():
                self.streamed.add(part.id)
                return _chunk(AIMessageChunk(content="", additional_kwargs={
                    "reasoning_content": part.delta}))  # fmt: skip
            case ToolCallPart():
                _app_call(part.provider_executed, part.tool_name)
                self.streamed.add(part.tool_call_id)
                if part.invalid:
                    self.invalid[part.tool_call_id] = part.invalid_reason or ""
                call = tool_call_chunk(
                    name=part.tool_name,
                    args=json.dumps(part.input),
                    id=part.tool_call_id,
                    index=self.calls,
                )
                self.calls += 1
                return _chunk(AIMessageChunk(content="", tool_call_chunks=[call]))
            case ToolResultPart():
                _app_call(part.provider_executed, part.tool_name)
            case DiscardPart():
                taken_back = self.streamed.intersection(part.ids)
                if taken_back:
                    raise StreamRetractionError(
                        f"{part.reason}, after {len(taken_back)} streamed part(s) of the cut "
                        f"attempt; LangChain chunks cannot be taken back: retry, or use "
                        f"invoke/ainvoke, which fold the redo correctly"
                    )
            case FinishPart():
                return _chunk(
                    AIMessageChunk(
                        content="",
                        usage_metadata=usage_metadata(part.usage),
                        response_metadata=_response_metadata(part, self.warnings, self.invalid),
                        chunk_position="last",
                    )
                )
            case (
                ErrorPart()  # the provider raises right after it
                | TextStartPart()
                | TextEndPart()
                | ReasoningStartPart()
                | ReasoningEndPart()
                | ToolInputStartPart()
                | ToolInputDeltaPart()  # the call is streamed whole, as its tool-call part
                | ToolInputEndPart()
            ):
                pass
        return None


def _chunk(message: AIMessageChunk) -> ChatGenerationChunk:
    return ChatGenerationChunk(message=message)
