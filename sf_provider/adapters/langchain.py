"""LangChain adapter: `ChatClaudeAgent`, a `BaseChatModel` over `ClaudeAgentProvider`.

LangChain runs its own tools, so every call is a single-turn query: the tools bound with
`bind_tools` are offered without executors and the calls come back as `AIMessage.tool_calls`;
history (calls, `ToolMessage`s, signed thinking) reaches the model natively, and replies come
back as `ChatAnthropic` gives them. This module only converts messages in and results out::

    agent = ChatClaudeAgent(settings=ProviderSettings(model="...")).bind_tools([get_weather])
    while (reply := await agent.ainvoke(messages)).tool_calls:
        messages += [reply, *(get_weather.invoke(call) for call in reply.tool_calls)]

Settings: the table in docs/model-settings.md; history, what is refused, errors and replies:
docs/frameworks/langchain.md.
"""

from __future__ import annotations

try:
    import langchain_core  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "sf_provider.adapters.langchain needs the extra: pip install 'sf-provider[langchain]'"
    ) from exc

import json
import warnings
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import aclosing
from functools import partial
from operator import itemgetter
from typing import Annotated, Any, Literal

from langchain_core import exceptions as langchain_errors
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import BaseChatModel, LangSmithParams, LanguageModelInput
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
from langchain_core.output_parsers.openai_tools import JsonOutputKeyToolsParser, PydanticToolsParser
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableLambda, RunnableMap, RunnablePassthrough
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_json_schema, convert_to_openai_tool
from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    FiniteFloat,
    SecretStr,
    Strict,
    StrictInt,
    model_validator,
)
from pydantic.v1 import BaseModel as BaseModelV1

from .. import _door as door
from .. import types as sf
from .._anthropic_format import message as anthropic_message
from .._door import ErrorKind
from ..errors import (
    InvalidMessagesError,
    ProviderError,
    StreamRetractionError,
    StructuredOutputError,
    ToolChoiceViolationError,
    UnsupportedRequestError,
)
from ..provider import CallOptions, ClaudeAgentProvider
from ..settings import Effort, ProviderSettings, Thinking
from ..tools import FunctionTool, tool_from_spec

__all__ = ["ChatClaudeAgent", "StreamRetractionError"]  # (the error is `sf_provider`'s, kept here)

#: What `bind_tools` accepts, like every LangChain chat model.
ToolLike = Mapping[str, Any] | type | Callable[..., Any] | BaseTool


#: The model's own settings, applied to every call over the provider's (`_call_options`).
_OWN_FIELDS = (
    "model", "max_tokens", "timeout", "max_retries", "thinking", "effort",
    "temperature", "top_p", "top_k", "stop_sequences",
)  # fmt: skip

#: Provider settings that change what the model is asked, or how its answer may end: with the
#: model's own settings, the LLM cache key (`_identifying_params`). `extra_args` are CLI flags,
#: which can change the prompt or the tools (`--append-system-prompt`, `--disallowedTools`).
_ANSWER_SETTINGS = (
    *_OWN_FIELDS, "system_prompt", "max_turns", "max_budget_usd", "extra_args"
)  # fmt: skip

#: A sampling setting: any finite number, as the provider's call option takes it.
_Sampling = Annotated[FiniteFloat, Strict()]


def _thinking(value: Any) -> Any:
    """ChatAnthropic's `thinking` dicts as the provider's `Thinking`; other values as given."""
    return door.thinking_option(value) if isinstance(value, Mapping) else value


class ChatClaudeAgent(BaseChatModel):
    """Claude through the Claude Code CLI as a LangChain chat model; LangChain runs the tools.

    Give it a `provider` (a `ClaudeAgentProvider`), or `settings` (a `ProviderSettings`) and/or
    `api_key` (the CLI's `ANTHROPIC_API_KEY`) to build one. Its other fields apply to every call,
    over the provider's settings; any other constructor argument is refused. Keyword arguments
    of `invoke`/`stream`/`bind` are the provider's call options, checked before anything starts.
    What each does, what is refused, and how replies and errors look: docs/model-settings.md
    and docs/frameworks/langchain.md.
    """

    # Errors name the field, not the input: `api_key` is a credential.
    model_config = ConfigDict(
        arbitrary_types_allowed=True, extra="forbid", hide_input_in_errors=True
    )

    provider: ClaudeAgentProvider = Field(default_factory=ClaudeAgentProvider, exclude=True)
    settings: ProviderSettings | None = Field(
        default=None, exclude=True, description="Builds `provider` when it is not given."
    )
    model: str | None = Field(default=None, description="Claude model; None = the provider's.")
    max_tokens: int | None = Field(default=None, ge=1, description="Output token limit per call.")
    timeout: float | None = Field(default=None, gt=0, description="Seconds a call may take.")
    max_retries: int | None = Field(default=None, ge=0, description="HTTP retries of the CLI.")
    thinking: Annotated[Thinking | None, BeforeValidator(_thinking)] = Field(
        default=None, description="Extended thinking (`Thinking`; ChatAnthropic's dicts too)."
    )
    effort: Effort | None = Field(default=None, description="Effort level (`Effort`).")
    temperature: _Sampling | None = Field(default=None, description="Sent as written.")
    top_p: _Sampling | None = Field(default=None, description="Sent as written.")
    top_k: StrictInt | None = Field(default=None, description="Sent as written.")
    stop_sequences: list[str] | None = Field(
        default=None,
        validation_alias=AliasChoices("stop", "stop_sequences"),
        description="Stop sequences of every call (`stop`); a call's `stop` replaces them.",
    )
    api_key: SecretStr | None = Field(
        default=None,
        exclude=True,
        validation_alias=AliasChoices("api_key", "anthropic_api_key"),
        description="The CLI's ANTHROPIC_API_KEY, in the `env` of the provider built here.",
    )
    streaming: bool = Field(
        default=False,
        description="LangChain's flag: `invoke` streams, so callbacks get each token.",
    )

    @model_validator(mode="after")
    def _provider_from_settings(self) -> ChatClaudeAgent:
        settings = self.settings
        if self.api_key is not None:
            settings = _with_key(settings or ProviderSettings(), self.api_key)
        if settings is not None:
            if "provider" in self.model_fields_set:
                given = "settings" if self.settings is not None else "an api_key"
                raise ValueError(
                    f"give ChatClaudeAgent a provider or {given}, not both: a provider keeps "
                    f"the settings (and key) it was built with, so these would be ignored"
                )
            self.provider = ClaudeAgentProvider(settings)
        return self

    @property
    def _llm_type(self) -> str:
        return "claude-agent-sdk"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        """Everything that shapes the answer (`_ANSWER_SETTINGS`, the model's own over the
        provider's): LangChain's LLM cache keys on it, and tracing shows it."""
        settings = self.provider.settings.model_dump(mode="json", include=set(_ANSWER_SETTINGS))
        return settings | self._call_options({})

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        """What LangSmith records of a call, as ChatAnthropic reports it (provider `anthropic`,
        so a run is priced as Claude), with the model and output limit the call applies."""
        options = self._call_options(kwargs, stop)
        params = LangSmithParams(ls_provider="anthropic", ls_model_type="chat")
        if model := self._requested_model(options.get("model")):
            params["ls_model_name"] = model
        if max_tokens := options.get("max_tokens") or self.provider.settings.max_tokens:
            params["ls_max_tokens"] = max_tokens
        if options.get("temperature") is not None:
            params["ls_temperature"] = options["temperature"]
        if stops := stop or options.get("stop_sequences"):
            params["ls_stop"] = stops
        return params

    def _requested_model(self, model: Any) -> str | None:
        """The model a call asks for: its own, or the provider's."""
        model = model or self.provider.settings.model
        return str(model) if model else None

    def _call_options(
        self, kwargs: dict[str, Any], stop: list[str] | None = None
    ) -> dict[str, Any]:
        """The model's own settings (those set), under the call's keyword arguments; a call's
        `stop` replaces the model's (as ChatAnthropic's does)."""
        own = {name: getattr(self, name) for name in _OWN_FIELDS if getattr(self, name) is not None}
        if stop:
            own.pop("stop_sequences", None)
        return {**own, **kwargs}

    def bind_tools(
        self,
        tools: Sequence[ToolLike],
        *,
        tool_choice: str | dict[str, Any] | bool | None = None,
        strict: bool | None = None,
        parallel_tool_calls: bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Offer these tools to the model; LangChain (or the application) runs the calls.

        `tools`: anything `convert_to_openai_tool` takes; `tool_choice`: ChatAnthropic's and
        ChatOpenAI's forms; `strict=True` makes every tool `FunctionTool.strict`;
        `parallel_tool_calls` is the provider's call option (docs/model-settings.md).
        """
        # Checked here too, so that a bad tool or choice fails now, not at the first call.
        options = _options({"tool_choice": tool_choice, "parallel_tool_calls": parallel_tool_calls,
                            **kwargs})  # fmt: skip
        offered = _bound_tools(tools, options)
        if strict:
            offered = [t.model_copy(update={"strict": True}) for t in offered]
        # Plain data in the binding: LangChain serialises bound kwargs (tracing, caching).
        choice = options.pop("tool_choice")
        plain = choice if isinstance(choice, str) else choice.model_dump()
        fields = {"name", "description", "input_schema", "strict"}
        definitions = [t.model_dump(include=fields) for t in offered]
        return self.bind(tools=definitions, tool_choice=plain, **options)

    def with_structured_output(
        self,
        schema: dict[str, Any] | type,
        *,
        include_raw: bool = False,
        method: Literal["function_calling", "json_schema", "json_mode"] = "function_calling",
        strict: bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, dict[str, Any] | BaseModel]:
        """Answers as `schema` (a pydantic model, TypedDict or JSON Schema dict):
        `method="function_calling"` (the default) by a tool call, `"json_schema"` by the
        provider's `output_schema` (the CLI's `StructuredOutput` tool; `"json_mode"` too, with
        a warning, as ChatAnthropic reads it); `include_raw=True` hands back a text answer with
        a `parsing_error` (docs/frameworks/langchain.md)."""
        if method == "json_mode":
            warnings.warn(
                "ChatClaudeAgent: with_structured_output(method='json_mode') uses 'json_schema', "
                "as ChatAnthropic does: the Messages API has no JSON mode",
                UserWarning,
                stacklevel=2,
            )
            method = "json_schema"
        if method not in ("function_calling", "json_schema"):
            raise UnsupportedRequestError(
                f"with_structured_output(method={method!r}) is not supported: use "
                f"'function_calling' (a tool call, the default) or 'json_schema' (the CLI's "
                f"structured output)"
            )
        if kwargs:
            raise UnsupportedRequestError(
                f"with_structured_output got unsupported arguments {sorted(kwargs)}: it takes "
                f"schema, include_raw, method and strict"
            )
        traced = {"kwargs": {"method": method, "strict": strict}, "schema": schema}
        parser: Runnable[Any, Any]
        if method == "function_calling":
            llm = self.bind_tools(
                [schema], tool_choice="any", strict=strict, ls_structured_output_format=traced
            )
            if isinstance(schema, type) and issubclass(schema, (BaseModel, BaseModelV1)):
                parser = PydanticToolsParser(tools=[schema], first_tool_only=True)
            else:
                name = convert_to_openai_tool(schema)["function"]["name"]
                parser = JsonOutputKeyToolsParser(key_name=name, first_tool_only=True)
            parser = RunnableLambda(_answered) | parser
        else:
            llm = self.bind(
                output_schema=convert_to_json_schema(schema), ls_structured_output_format=traced
            )
            parser = RunnableLambda(partial(_structured_output, schema))
        if not include_raw:
            return llm | parser
        # The reply also when it is not what was asked (text instead of the call or object):
        # LangChain's convention is to hand it back with a `parsing_error`, not to raise. Parsed
        # whole before anything is handed on: a fallback replaces only a stream not yet started.
        parse = RunnablePassthrough.assign(
            parsed=itemgetter("raw") | parser, parsing_error=lambda _: None
        )
        parsed = RunnableLambda(parse.invoke, parse.ainvoke, name="parse").with_fallbacks(
            [RunnablePassthrough.assign(parsed=lambda _: None)], exception_key="parsing_error"
        )
        return RunnableMap(raw=llm.bind(**{_KEEP_REPLY: True})) | parsed

    # -- async: the real path

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        keep_reply = bool(kwargs.pop(_KEEP_REPLY, False))
        collector = door.ResultCollector()  # as `provider.generate`, keeping a reply that failed
        failure = None
        try:
            request, lost = _request(
                self.provider, messages, stop, self._call_options(kwargs, stop)
            )
            async with aclosing(door.stream(self.provider, request)) as parts:
                async for part in parts:
                    collector.add(part)
        except ProviderError as exc:
            if not (keep_reply and isinstance(exc, _NOT_ANSWERING)):
                _as_langchain_error(exc)
                raise
            failure = str(exc)  # the reply, also when it is not the call or object asked for
        result = collector.result()
        _warn(result.warnings)
        message = _ai_message(result, self._requested_model(request.options.model), lost)
        if failure is not None:
            message.response_metadata[_NOT_ANSWERED] = failure
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        keep_reply = bool(kwargs.pop(_KEEP_REPLY, False))
        try:
            request, lost = _request(
                self.provider, messages, stop, self._call_options(kwargs, stop)
            )
            model = self._requested_model(request.options.model)
            mapper = _ChunkMapper(model, blocks=bool(request.tools))
            mapper.warnings.extend(lost)
            async with aclosing(door.stream(self.provider, request)) as parts:
                async for part in parts:
                    for chunk in mapper.chunks(part):
                        if run_manager is not None and chunk.text:
                            await run_manager.on_llm_new_token(chunk.text, chunk=chunk)
                        yield chunk
        except ProviderError as exc:
            if not (keep_reply and isinstance(exc, _NOT_ANSWERING)):
                _as_langchain_error(exc)
                raise
            # After the finish chunk: the reply streamed whole, and this says what it lacks.
            empty: str | list[str | dict[str, Any]] = [] if request.tools else ""
            metadata = {_NOT_ANSWERED: str(exc)}
            yield _chunk(AIMessageChunk(content=empty, response_metadata=metadata))

    # -- sync: the async path on an event loop of its own

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return door.run_sync(lambda: self._agenerate(messages, stop, None, **kwargs))

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for chunk in door.iterate_in_thread(lambda: self._astream(messages, stop, None, **kwargs)):
            if run_manager is not None and chunk.text:
                run_manager.on_llm_new_token(chunk.text, chunk=chunk)
            yield chunk


# --------------------------------------------------------------------------- tools


def _function_tool(tool: ToolLike) -> FunctionTool:
    """A LangChain tool as a `FunctionTool` without an executor (LangChain runs the calls), by
    the tool layer's one rule (`tool_from_spec`); a `BaseTool`, function or pydantic model goes
    through `convert_to_openai_tool` first, with the `BaseTool.extras` that conversion drops."""
    if isinstance(tool, FunctionTool) or (isinstance(tool, Mapping) and "toolSpec" not in tool):
        return tool_from_spec(tool)  # (Bedrock's `toolSpec` dict: LangChain reads it)
    spec = convert_to_openai_tool(tool)
    if isinstance(tool, BaseTool) and tool.extras:
        spec = {**tool.extras, **spec}
    return tool_from_spec(spec)


def _bound_tools(tools: Sequence[ToolLike], options: dict[str, Any]) -> list[FunctionTool]:
    """The tools, and the call options' `tool_choice` read as the provider's (in place; an
    Anthropic-style `disable_parallel_tool_use` is `parallel_tool_calls=False`)."""
    offered = [_function_tool(t) for t in tools]
    if "tool_choice" in options:
        choice = options["tool_choice"]
        if isinstance(choice, Mapping) and choice.get("disable_parallel_tool_use"):
            options["parallel_tool_calls"] = False
        options["tool_choice"] = _tool_choice(choice)
        door.offered_tools(offered, options["tool_choice"])
    return offered


def _tool_choice(choice: str | dict[str, Any] | bool | None) -> door.ToolChoice:
    """LangChain's `tool_choice` (ChatAnthropic's and ChatOpenAI's forms) -> the provider's
    (what it means for the tools: `_tool_choice.offered_tools`)."""
    match choice:  # (a mapping pattern ignores other keys: `disable_parallel_tool_use`, ...)
        case None | "auto" | False | {"type": "auto"}:
            return "auto"
        case "none" | {"type": "none"}:
            return "none"
        case "any" | "required" | True | {"type": "any"}:
            return "required"
        case (
            (str() as name)
            | {"type": "tool", "name": str(name)}
            | {"type": "function", "function": {"name": str(name)}}
        ):
            return door.NamedToolChoice(name=name)
    raise UnsupportedRequestError(
        f"tool_choice {choice!r} is not understood: use 'auto', 'none', 'any', 'required' or a "
        f"tool name"
    )


#: Keyword arguments other chat models take that the provider cannot honour, and why.
_NO_SWITCH = {
    **dict.fromkeys(
        ("seed", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "n"),
        "the Messages API has no such setting",
    ),
    "service_tier": "the Claude Code CLI cannot choose a service tier",
    **dict.fromkeys(
        ("extra_headers", "extra_body", "extra_query", "betas", "mcp_servers"),
        "the Claude Code CLI makes the API request itself and takes no extra request fields",
    ),
    "response_format": "use with_structured_output(schema, method='json_schema') instead",
}  # fmt: skip

#: Keyword arguments LangChain itself reads: it takes `ls_structured_output_format` back before
#: the model is called; `stream` (`invoke(..., stream=True)`, as ChatAnthropic takes it) has
#: already chosen `_stream` or `_generate` when it reaches the model, so `_request` drops it.
_LANGCHAIN_OWN = {"ls_structured_output_format", "stream"}


def _options(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments of `invoke`/`bind` as the provider's call options; one the CLI cannot
    honour, or an unknown one, raises `UnsupportedRequestError` before anything starts."""
    options: dict[str, Any] = {}
    for name, value in kwargs.items():
        if name == "parallel_tool_calls" and value is None:
            continue  # bind_tools' default: not set
        if name in _NO_SWITCH:
            raise UnsupportedRequestError(f"{name} is not supported: {_NO_SWITCH[name]}")
        if name not in CallOptions.model_fields and name not in ("tools", *_LANGCHAIN_OWN):
            raise UnsupportedRequestError(
                f"unknown option {name!r}; ChatClaudeAgent calls take "
                f"{sorted(CallOptions.model_fields)} (and tools)"
            )
        options[name] = _thinking(value) if name == "thinking" else value
    return options


def _with_key(settings: ProviderSettings, api_key: SecretStr) -> ProviderSettings:
    """`settings` whose CLI gets `api_key` as its ANTHROPIC_API_KEY."""
    key, env = api_key.get_secret_value(), settings.env
    if not key:
        raise ValueError("api_key is empty: give the key, or leave api_key out")
    if env.get("ANTHROPIC_API_KEY", key) != key:  # names only: keys stay out of errors
        raise ValueError(
            "api_key and settings.env['ANTHROPIC_API_KEY'] are two different keys for the CLI; "
            "keep one"
        )
    return settings.model_copy(update={"env": {**env, "ANTHROPIC_API_KEY": key}})


#: A private binding of `with_structured_output(include_raw=True)`: the call returns the reply
#: even when it is not the call or object asked for, marking it with `_NOT_ANSWERED` (the
#: provider's error message), which the parser turns into the `parsing_error`.
_KEEP_REPLY = "_sf_keep_reply"
_NOT_ANSWERED = "structured_output_error"

#: What the provider raises for a reply that is not the call or object asked for.
_NOT_ANSWERING = (ToolChoiceViolationError, StructuredOutputError)


#: LangChain's error for a reply the model declined (`ModelRefusalError`, langchain-core 1.7.5
#: and later; a parsing error before), as ChatAnthropic's `with_structured_output` raises it.
_DECLINED: type[Exception] = getattr(langchain_errors, "ModelRefusalError", OutputParserException)


def _answered(message: BaseMessage) -> BaseMessage:
    """The reply, unless it is not what `with_structured_output` asked for."""
    if message.response_metadata.get("finish_reason") == "content-filter":
        raise _DECLINED(
            f"the model declined to produce the requested output (stop reason 'refusal'): "
            f"{message.text}; rephrase the request, or try another model"
        )
    failure = message.response_metadata.get(_NOT_ANSWERED)
    if failure:
        raise OutputParserException(str(failure), llm_output=message.text)
    return message


def _structured_output(schema: dict[str, Any] | type, message: BaseMessage) -> Any:
    """The object of a `method="json_schema"` reply, as `schema` (a pydantic model, v2 or
    `pydantic.v1`, as ChatAnthropic gives it) or a dict. A model that refuses the object raises
    its `ValidationError` (with `include_raw=True`: the `parsing_error`)."""
    _answered(message)
    value = message.response_metadata.get("structured_output")
    if value is None:
        raise OutputParserException("the reply carries no structured output")
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_validate(value)
    if isinstance(schema, type) and issubclass(schema, BaseModelV1):
        return schema.parse_obj(value)
    return value


# --------------------------------------------------------------------------- messages in


def _request(
    provider: ClaudeAgentProvider,
    messages: list[BaseMessage],
    stop: list[str] | None,
    kwargs: dict[str, Any],
) -> tuple[door.Request, list[sf.CallWarning]]:
    """The provider's request, and what the messages lost (warned of here, and reported with
    the reply's `response_metadata["warnings"]`)."""
    options = _options(kwargs)
    options.pop("stream", None)  # LangChain's own, already acted on (`_LANGCHAIN_OWN`)
    if stop:  # LangChain's `stop` (invoke, bind): the provider's stop sequences
        options["stop_sequences"] = [*options.get("stop_sequences", ()), *stop]
    # `bind(tools=...)` and `invoke(..., tools=...)` take what bind_tools takes.
    tools = _bound_tools(options.pop("tools", None) or [], options)
    converted, lost = _provider_messages(messages)
    _warn(lost)
    return door.request(converted, tools, provider=provider, **options), lost


def _warn(call_warnings: Sequence[sf.CallWarning]) -> None:
    """What was not sent as given, as a Python `UserWarning` too, so it is seen without looking
    at `response_metadata["warnings"]` (as the pydantic-ai adapter does)."""
    door.warn_user("ChatClaudeAgent", call_warnings, stacklevel=2)


#: LangChain message types (and ChatMessage roles) of speakers, by the role they speak in.
_SPEAKERS = dict.fromkeys(("human", "HumanMessageChunk", "user"), "user") | dict.fromkeys(
    ("ai", "AIMessageChunk", "assistant"), "assistant"
)


def _provider_messages(
    messages: Sequence[BaseMessage],
) -> tuple[list[door.Message], list[sf.CallWarning]]:
    """LangChain messages as the provider's typed messages, and what they lost (sent as
    `ChatAnthropic` sends it); what cannot be sent is an `InvalidMessagesError`."""
    converted: list[door.Message] = []
    lost: list[sf.CallWarning] = []
    answered: dict[str, int] = {}  # tool call id -> the last message answering it
    for i, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            answered |= {call_id: i for call_id, _, _ in _results(message)}
    speakers: dict[str, set[str]] = {}  # role -> the names its messages carry
    for i, message in enumerate(messages):
        where = f"message {i} ({type(message).__name__})"
        role = message.role if isinstance(message, ChatMessage) else message.type
        speaker = _SPEAKERS.get(role)
        if speaker and message.name:
            speakers.setdefault(speaker, set()).add(message.name)
        if isinstance(message, SystemMessage) or role == "system":
            if converted and not isinstance(converted[-1], door.SystemMessage):
                raise InvalidMessagesError(
                    f"{where}: system messages must come first (consecutive, at the start): "
                    f"the request has one system prompt, so this one would move; put it at "
                    f"the start or send it as a HumanMessage"
                )
            lines = []  # its text blocks, on their own lines
            for block in _content_blocks(message.content):
                if block.get("type") != "text":
                    raise InvalidMessagesError(
                        f"{where}: a system message holds text only, not {block.get('type')!r}: "
                        f"send it in a HumanMessage"
                    )
                lines.append(str(block.get("text", "")))
            converted.append(door.SystemMessage("\n".join(lines)))
        elif isinstance(message, HumanMessage) or role == "user":
            converted.append(door.UserMessage(_user_content(message.content, where, lost)))
        elif isinstance(message, AIMessage) or role == "assistant":
            answers = {call_id for call_id, j in answered.items() if j > i}
            content = _assistant_content(message, where, answers, lost)
            if content:
                converted.append(door.AssistantMessage(content))
            elif i < len(messages) - 1:
                # The API refuses an empty assistant turn but a last one (an empty prefill,
                # which asks for nothing: left out silently there, as the request is the same).
                lost.append(
                    sf.CallWarning(
                        code="empty-turn-dropped",
                        message=f"{where}: an assistant message with no content (no text, "
                        f"thinking or tool calls) was left out, as ChatAnthropic leaves it out: "
                        f"the Messages API refuses an empty assistant turn",
                    )
                )
        elif isinstance(message, ToolMessage):
            results = (_tool_result(*result, where, lost) for result in _results(message))
            converted.append(door.ToolMessage(tuple(results)))
        else:
            raise InvalidMessagesError(
                f"{where}: role {role!r} cannot be sent; use system, human, ai or tool messages"
            )
    for role, names in speakers.items():
        if len(names) > 1:  # one speaker per role: the role already says who spoke
            lost.append(
                sf.CallWarning(
                    code="names-dropped",
                    message=f"the {role} messages carry different names "
                    f"({', '.join(map(repr, sorted(names)))}), which were not sent: the "
                    f"Messages API has no speaker names (ChatAnthropic drops them too), so the "
                    f"model cannot tell who said what. Put the speaker in the content",
                )
            )
    return converted, lost


def _content_blocks(content: str | list[str | dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [{"type": "text", "text": b} if isinstance(b, str) else b for b in content]


def _user_content(
    content: str | list[str | dict[str, Any]],
    where: str,
    lost: list[sf.CallWarning],
    what: str = "a user block",
) -> tuple[door.Text | door.Image, ...]:
    blocks: list[door.Text | door.Image] = []
    for block in _content_blocks(content):
        kind = block.get("type")
        if kind == "text":
            blocks.append(door.Text(str(block.get("text", ""))))
            _note_citations(block, where, lost)
        elif kind in _IMAGES:
            blocks.append(_image(block, where))
        else:
            raise InvalidMessagesError(
                f"{where}: {what} must be text or an image (image_url, or an image with "
                f"base64 + mime_type or url), not {kind!r}"
            )
    return tuple(blocks)


def _image(block: Mapping[str, Any], where: str) -> door.Image:
    """An image block: OpenAI's `image_url` (read as the gateway's OpenAI format reads it: its
    `detail` is checked with every image's, other fields refused), LangChain v1's (base64 +
    mime_type, or a url) or Anthropic's (a base64 or url `source`)."""
    found = block.get("source")
    source: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    if block.get("type") == "image_url":
        image = block.get("image_url")  # {"url": ..., "detail": ...} or a plain url
        image = {"url": image} if isinstance(image, str) else image
        if not isinstance(image, Mapping) or not isinstance(image.get("url"), str):
            raise InvalidMessagesError(f"{where}: an image_url block needs {{'url': ...}}")
        unknown = [k for k, v in image.items() if k not in ("url", "detail") and v is not None]
        if unknown:
            raise InvalidMessagesError(
                f"{where}: image_url field(s) {', '.join(map(repr, unknown))} cannot be sent: "
                f"an image goes to the model by its url only; send 'url' (and 'detail') only"
            )
        fields = {"url": image["url"], "detail": image.get("detail")}
    elif block.get("file_id") or source.get("type") == "file":
        raise InvalidMessagesError(
            f"{where}: images by file id (the Files API) are not supported: the CLI "
            f"cannot fetch uploaded files; send the image as base64 or a URL"
        )
    elif isinstance(block.get("base64"), str):
        fields = {"data": block["base64"], "media_type": block.get("mime_type")}
    elif isinstance(block.get("url"), str):
        fields = {"url": block["url"]}
    elif source.get("type") == "base64":
        fields = {"data": source.get("data"), "media_type": source.get("media_type")}
    elif source:
        fields = {"url": source.get("url")}
    else:
        raise InvalidMessagesError(
            f"{where}: an image block needs base64 + mime_type, a url, or an Anthropic source "
            f"(base64 or url)"
        )
    if any(value is not None and not isinstance(value, str) for value in fields.values()):
        raise InvalidMessagesError(f"{where}: an image's data, media type and url are strings")
    return door.Image(**fields)


def _note_citations(block: Mapping[str, Any], where: str, lost: list[sf.CallWarning]) -> None:
    """A `citations-dropped` warning (once per message) when a text block carries citations
    (Anthropic's `citations`, LangChain v1 `annotations`): only the text is sent."""
    warning = sf.CallWarning(
        code="citations-dropped",
        message=f"{where}: the citations of its text were not sent, only the text: the "
        f"provider sends message text without citations",
    )
    if (block.get("citations") or block.get("annotations")) and warning not in lost:
        lost.append(warning)


def _assistant_content(
    message: BaseMessage, where: str, answered: set[str], lost: list[sf.CallWarning]
) -> tuple[door.AssistantPart, ...]:
    """An AI message's parts; `answered` holds the call ids later tool messages answer."""
    blocks: list[door.AssistantPart] = []
    ai = message if isinstance(message, AIMessage) else None
    # ChatGoogleGenerativeAI repeats a call of its `tool_calls` there: only a call given there
    # alone is the legacy one, which no ToolMessage can answer.
    if message.additional_kwargs.get("function_call") and not (ai and ai.tool_calls):
        raise InvalidMessagesError(
            f"{where}: a legacy OpenAI function_call cannot be sent, and its FunctionMessage "
            f"neither; give the call as tool_calls (with an id) answered by a ToolMessage"
        )
    # A signature is Claude's only in a reply of Claude's (ours, ChatAnthropic's) or one built by
    # hand: Gemini's thinking has Anthropic's shape with its own thought signature, which the
    # Messages API refuses. Another provider's is replayed unsigned, as text (ChatAnthropic
    # reads signatures of `model_provider="anthropic"` replies only, as the pydantic-ai adapter
    # does of its own and Anthropic's).
    provider = message.response_metadata.get("model_provider")
    claudes = provider in (None, "anthropic")
    calls: list[Mapping[str, Any]] = list(ai.tool_calls) if ai else []
    invalid: list[Mapping[str, Any]] = list(ai.invalid_tool_calls) if ai else []
    seen = {call.get("id") for call in [*calls, *invalid]}
    for block in _content_blocks(message.content):
        kind = block.get("type")
        if kind in ("text", "refusal"):  # a refusal (ChatOpenAI's) is what the model said
            text = str(block.get(kind, ""))
            if text.strip():  # the API refuses blank text blocks (ChatAnthropic leaves them out)
                blocks.append(door.Text(text))
            _note_citations(block, where, lost)
        elif kind == "reasoning" and block.get(kind) is None and block.get("summary"):
            # ChatOpenAI's (Responses API): its text in summary parts, each a reasoning block
            # of its own in `.content_blocks`; replayed unsigned, as text.
            for part in block["summary"]:
                thought = part.get("text") if isinstance(part, Mapping) else None
                if not isinstance(thought, str):
                    raise InvalidMessagesError(
                        f"{where}: a reasoning summary part needs its 'text' (a string)"
                    )
                blocks.append(door.Reasoning(thought))
        elif kind in ("thinking", "reasoning"):  # Anthropic style, signed; LangChain v1's
            thought, extras = block.get(kind), block.get("extras") or {}
            if thought is not None and not isinstance(thought, str):
                raise InvalidMessagesError(f"{where}: a thinking block's text must be a string")
            signature = block.get("signature") or extras.get("signature")
            signed = signature if isinstance(signature, str) and signature and claudes else None
            blocks.append(door.Reasoning(thought or "", signature=signed))
        elif kind == "redacted_thinking" or (
            kind == "non_standard" and (block.get("value") or {}).get("type") == "redacted_thinking"
        ):  # Anthropic style (v1 output wraps it as non_standard): the data goes back as is
            redacted = block if kind == "redacted_thinking" else block["value"]
            blocks.append(door.reasoning(redacted, where))
        elif kind in ("tool_use", "tool_call", "invalid_tool_call"):
            # `tool_calls` and `invalid_tool_calls` carry the calls; one only in the content (an
            # Anthropic-style message built by hand, v1 content) is taken from there.
            if block.get("id") not in seen:
                seen.add(block.get("id"))
                arguments = block.get("input" if kind == "tool_use" else "args")
                found = {"name": block.get("name"), "args": arguments, "id": block.get("id")}
                (invalid if kind == "invalid_tool_call" else calls).append(found)
        elif kind == "function_call":  # ChatOpenAI's (Responses API), in `tool_calls` too
            if block.get("call_id") not in seen:
                seen.add(block.get("call_id"))
                arguments = door.arguments(block.get("arguments"), where)
                calls.append({"name": block.get("name"), "args": arguments,
                              "id": block.get("call_id")})  # fmt: skip
        elif kind == "tool_call_chunk":
            pass  # a streamed piece of a call in `tool_calls`
        else:
            raise InvalidMessagesError(
                f"{where}: an assistant block must be text, reasoning or a tool call, not {kind!r}"
            )
    reasoning = message.additional_kwargs.get("reasoning_content")  # ChatDeepSeek's, and ours
    if (
        isinstance(reasoning, str)
        and reasoning.strip()
        and not any(isinstance(b, door.Reasoning) for b in blocks)  # else it repeats the content
    ):  # unsigned: replayed as text with a `history-flattened` warning, as reasoning blocks are
        blocks.insert(0, door.Reasoning(reasoning))
    refusal = message.additional_kwargs.get("refusal")  # ChatOpenAI's, with empty content
    if (
        isinstance(refusal, str)
        and refusal.strip()
        and not any(isinstance(b, door.Text) for b in blocks)
    ):
        blocks.append(door.Text(refusal))
    for call in calls:
        call_id, name, arguments = call.get("id"), call.get("name"), call.get("args")
        if not (call_id and name and isinstance(name, str) and isinstance(arguments, Mapping)):
            raise InvalidMessagesError(
                f"{where}: tool call {name or call_id!r} needs an id (the ToolMessage answering "
                f"it has the same), a 'name' and 'args' (an object)"
            )
        blocks.append(door.ToolCall(str(call_id), name, dict(arguments)))
    known = {call.get("id") for call in calls}
    for call in invalid:
        if call.get("id") not in known:  # a call in `tool_calls` too is sent from there
            blocks.append(_invalid_call(call, where, answered, lost))
    return tuple(blocks)


def _invalid_call(
    call: Mapping[str, Any], where: str, answered: set[str], lost: list[sf.CallWarning]
) -> door.ToolCall:
    """An invalid tool call (unparsable arguments) as a call, as ChatAnthropic sends it: its
    arguments when they are a JSON object, else none (`{}`) and a warning."""
    call_id, name, args = call.get("id"), call.get("name"), call.get("args")
    if not call_id or not name:
        raise InvalidMessagesError(
            f"{where}: invalid tool call {name or call_id!r} needs an id and a name to be sent "
            f"(ChatAnthropic leaves it out): give it both, or remove it from invalid_tool_calls"
        )
    if call_id not in answered:
        raise InvalidMessagesError(
            f"{where}: invalid tool call {name!r} ({call_id}) has no ToolMessage answering it; "
            f"it is sent as a call, and the Messages API needs a result for every call: answer "
            f"it with ToolMessage(<what was wrong>, tool_call_id={call_id!r}, status='error'), "
            f"or remove it from invalid_tool_calls"
        )
    try:
        arguments = door.arguments(args, where)
    except InvalidMessagesError:
        lost.append(
            sf.CallWarning(
                code="tool-call-arguments-dropped",
                message=f"{where}: invalid tool call {name!r} ({call_id}) was sent with no "
                f"arguments ({{}}), as ChatAnthropic sends it: its arguments {args!r} are not "
                f"a JSON object",
            )
        )
        arguments = {}
    return door.ToolCall(str(call_id), str(name), arguments)


def _results(message: ToolMessage) -> list[tuple[str, Any, bool]]:
    """A tool message's results (call id, content, is_error): its own, or its Anthropic
    `tool_result` blocks' (sent as such, as ChatAnthropic sends them)."""
    content, error = message.content, message.status == "error"
    if (
        isinstance(content, list)
        and content
        and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    ):
        return [
            (str(b.get("tool_use_id")), b.get("content") or "", bool(b.get("is_error", error)))
            for b in content
            if isinstance(b, dict)
        ]
    return [(message.tool_call_id, content, error)]


#: Tool message blocks sent as the result's content blocks (as ChatAnthropic sends them).
_IMAGES = {"image", "image_url"}

#: Tool message blocks sent as their text: `text`, and LangChain v1 `text-plain` holding text.
_TEXTS = {"text", "text-plain"}


def _tool_result(
    call_id: str, content: Any, is_error: bool, where: str, lost: list[sf.CallWarning]
) -> door.ToolResult:
    """A tool message's result, as the model would get it from ChatAnthropic: a string; text
    blocks (a tool that returned a list of strings, say), each its own; with images, text and
    image parts; a list of plain data, as JSON. Content blocks of a kind the provider's tool
    results cannot carry are refused, as blocks of unknown kinds are in other messages, rather
    than sent as JSON markup."""
    if isinstance(content, str):
        return door.ToolResult(call_id, content, is_error)
    blocks = _content_blocks(content)
    kinds = {str(b["type"]) for b in blocks if isinstance(b, Mapping) and b.get("type")}
    output: str | tuple[door.Text | door.Image, ...]
    if kinds & _IMAGES:  # each block its own part, text or an image (another is refused)
        output = _user_content(content, where, lost, "a block of a tool result with images")
    elif all(isinstance(b, Mapping) and b.get("type") in _TEXTS for b in blocks):
        texts = [_text_block(block, where, lost) for block in blocks]
        output = "".join(texts) if len(texts) <= 1 else tuple(map(door.Text, texts))
    elif unknown := sorted(kinds - _TEXTS):
        raise InvalidMessagesError(
            f"{where}: a tool result with {', '.join(unknown)} blocks cannot be sent: the "
            f"provider's tool results carry text, JSON and images only (it sends no documents, "
            f"audio or video in any message, and content blocks sent as JSON would show the "
            f"model markup). Return text (or a JSON string) from the tool"
        )
    else:
        output = json.dumps(blocks, ensure_ascii=False)  # plain data, not content blocks
    return door.ToolResult(call_id, output, is_error)


def _text_block(block: Mapping[str, Any], where: str, lost: list[sf.CallWarning]) -> str:
    """A text block's text; a v1 `text-plain` block's, which must hold just its text (the
    provider sends no documents: ChatAnthropic sends a `text-plain` block as one)."""
    _note_citations(block, where, lost)
    if block.get("type") == "text-plain":
        other = [key for key in ("base64", "url", "file_id", "title", "context") if block.get(key)]
        if other or not isinstance(block.get("text"), str):
            raise InvalidMessagesError(
                f"{where}: a text-plain block in a tool result is sent as its text, so it needs "
                f"'text' and cannot carry {', '.join(other) or 'only base64, url or file_id'}: "
                f"put the text itself in 'text'"
            )
    return str(block.get("text", ""))


# --------------------------------------------------------------------------- results out


def _usage_metadata(usage: sf.Usage) -> UsageMetadata:
    """The provider's usage as LangChain's: input tokens include cache reads and writes."""
    return UsageMetadata(
        input_tokens=usage.input_total,
        output_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens,
        input_token_details=InputTokenDetails(
            cache_read=usage.cache_read_input_tokens,
            cache_creation=usage.cache_creation_input_tokens,
        ),
    )


def _response_metadata(
    finish: sf.FinishPart | sf.GenerateResult,
    warnings: list[sf.CallWarning],
    invalid: dict[str, str],
    requested_model: str | None,
) -> dict[str, Any]:
    stop_sequence = finish.provider_details.get(door.STOP_SEQUENCE_DETAIL)
    metadata: dict[str, Any] = {
        # As ChatAnthropic's (also `stop_sequence` when it ended at one of `stop`):
        # `.content_blocks` reads the content as Anthropic's, and `get_usage_metadata_callback`
        # counts usage per model name.
        "model_provider": "anthropic",
        "finish_reason": finish.finish_reason,
        "stop_reason": finish.raw_stop_reason if stop_sequence is None else "stop_sequence",
        "stop_sequence": stop_sequence,
        "cost_usd": finish.cost_usd,
        "session_id": finish.session_id,
        "num_turns": finish.num_turns,
        "api_calls": finish.api_calls,
        # Which CLI process served the query: fresh, warm, or continued (its conversation).
        "process": finish.provider_details.get("process"),
    }
    model = door.response_model(finish.provider_details) or requested_model
    if model:
        metadata["model_name"] = model
    if finish.structured_output is not None:  # with the `output_schema` option
        metadata["structured_output"] = finish.structured_output
    if warnings:
        metadata["warnings"] = [w.model_dump() for w in warnings]
    if invalid:  # unknown tool or off-schema arguments: LangChain's tool runner reports it too
        metadata["invalid_tool_calls"] = invalid
    return metadata


def _ai_message(
    result: sf.GenerateResult, requested_model: str | None, lost: list[sf.CallWarning]
) -> AIMessage:
    """A query's result as an `AIMessage`: the text, or, with signed or redacted thinking or
    tool calls, the Messages API's content blocks as `ChatAnthropic` gives them (the next
    request replays the thinking, which the API wants back with the calls). The text is every
    text block of the reply, as `astream` sends it: also a turn the CLI asked the model again
    after (an `output_schema` answered in text first), which `result.text` leaves out."""
    for call in result.tool_calls:
        _app_call(call.provider_executed, call.tool_name)
    # The blocks as `/v1/messages` answers them (the id and model are not read here).
    blocks = anthropic_message(result, message_id="", model="", structured=False)["content"]
    invalid = {c.tool_call_id: c.invalid_reason or "" for c in result.tool_calls if c.invalid}
    warnings = [*lost, *result.warnings]
    return AIMessage(
        content=(
            blocks
            if any(b["type"] != "text" for b in blocks)
            else "".join(b["text"] for b in blocks)
        ),
        tool_calls=[
            ToolCall(name=c.tool_name, args=c.input, id=c.tool_call_id) for c in result.tool_calls
        ],
        usage_metadata=_usage_metadata(result.usage),
        response_metadata=_response_metadata(result, warnings, invalid, requested_model),
        additional_kwargs={"reasoning_content": result.reasoning} if result.reasoning else {},
    )


def _app_call(provider_executed: bool, name: str) -> None:
    # The adapter offers tools without executors, so the provider never runs one itself.
    if provider_executed:
        raise UnsupportedRequestError(
            f"the provider executed tool {name!r}, but this adapter leaves every call to "
            f"LangChain; use the tools bound with bind_tools, not a registry with executors"
        )


class _ChunkMapper:
    """Stream parts -> `ChatGenerationChunk`s; the finish part becomes the last chunk.

    With tools bound (`blocks`), everything streams as Anthropic content blocks with an
    `index`, as `ChatAnthropic` streams it, so that the chunks add up to a message that replays
    (thinking with its signature, then the calls) and whose `.content_blocks` keep text written
    before a call. Without tools, text streams as plain strings until a thinking block has been
    streamed, and as blocks after it.
    """

    def __init__(self, requested_model: str | None, *, blocks: bool = False) -> None:
        self.requested_model = requested_model
        self.blocks = blocks
        self.warnings: list[sf.CallWarning] = []
        self.invalid: dict[str, str] = {}
        self._strings: set[str] = set()  # text blocks streamed as plain strings
        remedy = "retry, or use invoke/ainvoke, which fold the redo correctly"
        self._parts = door.Blocks(remedy=remedy, whole_calls=True)  # a call streams whole

    def chunks(self, part: sf.StreamPart) -> list[ChatGenerationChunk]:
        """The chunks one part becomes (often none)."""
        return [
            _chunk(m) for item in self._parts.add(part) if (m := self._message(item)) is not None
        ]

    def _message(self, item: door.BlockEvent) -> AIMessageChunk | None:
        match item:
            case sf.StreamStartPart():
                _warn(item.warnings)
                self.warnings.extend(item.warnings)
            case door.Start(block=block) if block.kind == "text" and not self.blocks:
                self._strings.add(block.id)
            case door.Start():
                self.blocks = True  # thinking or a call: later text streams as blocks too
            case door.Delta(block=block) if block.id in self._strings:
                return AIMessageChunk(content=item.delta)
            case door.Delta(block=block) if block.kind == "text":
                return AIMessageChunk(content=[{"type": "text", "text": item.delta,
                                                "index": block.index}])  # fmt: skip
            case door.Delta(block=block) if block.kind == "reasoning":
                thinking = {"type": "thinking", "thinking": item.delta, "index": block.index}
                return AIMessageChunk(
                    content=[thinking], additional_kwargs={"reasoning_content": item.delta}
                )
            case door.End(block=block) if block.redacted or block.signature:
                # Its signature, or the redacted block whole, as ChatAnthropic streams them.
                replay = door.thinking_block("", block.signature, block.redacted)
                return AIMessageChunk(content=[{**replay, "index": block.index}])
            case door.End(block=door.Block(call=sf.ToolCallPart() as call) as block):
                if call.invalid:
                    self.invalid[call.tool_call_id] = call.invalid_reason or ""
                use = {"type": "tool_use", "id": call.tool_call_id, "name": call.tool_name,
                       "input": call.input, "index": block.index}  # fmt: skip
                chunk = tool_call_chunk(name=call.tool_name, args=json.dumps(call.input),
                                        id=call.tool_call_id, index=block.index)  # fmt: skip
                return AIMessageChunk(content=[use], tool_call_chunks=[chunk])
            case sf.ToolCallPart() | sf.ToolResultPart():  # the provider ran it: none should
                _app_call(item.provider_executed, item.tool_name)
            case sf.FinishPart():
                metadata = _response_metadata(
                    item, self.warnings, self.invalid, self.requested_model
                )
                # Empty content of the stream's own kind (a string would become a text block).
                return AIMessageChunk(
                    content=[] if self.blocks else "",
                    usage_metadata=_usage_metadata(item.usage),
                    response_metadata=metadata,
                    chunk_position="last",
                )
        return None


def _chunk(message: AIMessageChunk) -> ChatGenerationChunk:
    # On every chunk, as ChatAnthropic does: `output_version="v1"` translates chunk by chunk.
    message.response_metadata["model_provider"] = "anthropic"
    return ChatGenerationChunk(message=message)


# --------------------------------------------------------------------------- errors out


#: LangChain's standard model error (`langchain_core.exceptions`, langchain-core 1.6 on) for each
#: kind of error (`_error_kinds.classify`), as ChatAnthropic maps the Messages API's; None for
#: failures of the CLI itself and replies that were not what was asked.
_LANGCHAIN_ERRORS: dict[ErrorKind, type[langchain_errors.ModelError] | None] = {
    ErrorKind.INVALID_REQUEST: langchain_errors.ModelInvalidRequestError,  # what the API refuses
    ErrorKind.REQUEST_REJECTED: langchain_errors.ModelInvalidRequestError,
    ErrorKind.AUTHENTICATION: langchain_errors.ModelAuthenticationError,
    ErrorKind.PERMISSION: langchain_errors.ModelPermissionDeniedError,
    ErrorKind.RATE_LIMIT: langchain_errors.ModelRateLimitError,
    ErrorKind.OVERLOADED: langchain_errors.ModelAPIError,  # the API's 529, as its other 5xx
    ErrorKind.TIMEOUT: langchain_errors.ModelTimeoutError,
    ErrorKind.CONNECTION: langchain_errors.ModelConnectionError,
    ErrorKind.CONTEXT_WINDOW: langchain_errors.ContextOverflowError,
    ErrorKind.NOT_FOUND: langchain_errors.ModelNotFoundError,
    ErrorKind.TOO_LARGE: langchain_errors.ModelInvalidRequestError,
    # 5xx, 408, 409: retryable, as the provider's error says.
    ErrorKind.UPSTREAM: langchain_errors.ModelAPIError,
    ErrorKind.BAD_OUTPUT: None,
    # A stream cut off for the client (what LangChain's retry middleware retries).
    ErrorKind.STREAM_RETRACTED: langchain_errors.ModelConnectionError,
    ErrorKind.PROVIDER: None,
    ErrorKind.INTERNAL: None,
}


#: (provider error class, LangChain error class) -> the class deriving from both.
_MIXED: dict[tuple[type[ProviderError], type[Exception]], type[ProviderError]] = {}


def _as_langchain_error(exc: ProviderError) -> None:
    """Make `exc` also LangChain's standard model error (a class deriving from both, the
    original name kept), which LangChain's agent middleware acts on, while code catching the
    provider's error still catches it."""
    kind = _LANGCHAIN_ERRORS[door.classify(exc).kind]
    if kind is not None and not isinstance(exc, kind):
        exc.__class__ = _mixed(type(exc), kind)


def _mixed(base: type[ProviderError], kind: type[Exception]) -> type[ProviderError]:
    if (base, kind) not in _MIXED:

        def reduce(self: ProviderError) -> tuple[Any, ...]:
            # Pickled as the provider's error, made LangChain's again when loaded: the class
            # has no importable name of its own.
            return _unpickled_error, (base, self.args, self.__dict__)

        namespace = {"__module__": base.__module__, "__qualname__": base.__qualname__,
                     "__doc__": base.__doc__, "__reduce__": reduce}  # fmt: skip
        _MIXED[base, kind] = type(base.__name__, (base, kind), namespace)
    return _MIXED[base, kind]


def _unpickled_error(
    base: type[ProviderError], args: tuple[Any, ...], state: dict[str, Any]
) -> ProviderError:
    exc = base.__new__(base, *args)
    exc.args = args  # OSError's `__new__` (QueryTimeoutError is a TimeoutError) keeps none
    exc.__dict__.update(state)
    _as_langchain_error(exc)
    return exc
