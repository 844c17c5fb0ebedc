"""LiteLLM provider: `litellm.completion(model="claude-agent/<model>")` on `ClaudeAgentProvider`.

`register()` adds `ClaudeAgentLLM` to `litellm.custom_provider_map`, so every framework that
reaches models through LiteLLM (CrewAI, DSPy, smolagents, the OpenAI Agents SDK's
`LitellmModel`, ...) gets Claude through the Claude Code CLI with real tool calling. Requests
are read as the gateway's `/v1/chat/completions` reads them (`sf_provider._openai_format`);
errors are LiteLLM's exception types, by the kind of error (`_error_kinds.classify`).

What each parameter does, LiteLLM's parameter lists, cost, model info, warnings, timeouts and
headers: docs/frameworks/litellm.md (the docs site's "LiteLLM" page) and the parameter table of
docs/gateway.md.
"""

from __future__ import annotations

try:
    import litellm
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "sf_provider.adapters.litellm needs the extra: pip install 'sf-provider[litellm]'"
    ) from exc

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, NoReturn

import httpx
from litellm import exceptions as errors
from litellm.llms.custom_llm import CustomLLM
from litellm.types.llms.openai import ChatCompletionToolCallChunk
from litellm.types.utils import (
    Delta,
    GenericStreamingChunk,
    ModelResponse,
    ModelResponseStream,
    StreamingChoices,
)
from litellm.utils import custom_llm_setup

from .. import _door as door
from .._anthropic_format import header_betas
from .._door import ErrorKind, classify, iterate_in_thread, run_sync, warn_user
from .._openai_format import (
    DROPPABLE,
    ChunkMapper,
    UnsupportedParameterError,
    chat_request,
    completion,
    completion_id,
)
from .._openai_format import usage as openai_usage
from ..errors import ProviderError, UnsupportedRequestError
from ..provider import ClaudeAgentProvider
from ..settings import ProviderSettings
from ..types import CallWarning, FinishPart, StreamStartPart, Usage

__all__ = ["PROVIDER_NAME", "ClaudeAgentLLM", "register"]

#: The provider prefix of model names: `claude-agent/<model>`.
PROVIDER_NAME = "claude-agent"

#: Keys LiteLLM itself may put among the optional params of a custom provider's call
#: (`extra_body` is read as request parameters: what it holds is honoured or refused by name).
_LITELLM_KEYS = frozenset({"extra_body", "max_retries"})

#: Parameters this provider honours that LiteLLM's list for custom providers lacks: dropped by
#: LiteLLM under `drop_params`, they are taken back from its record of the call.
_RESTORED = frozenset({"reasoning_effort", "thinking"})

#: Parameters LiteLLM drops or renames without loss: `user` only tags a request, and
#: `max_completion_tokens` arrives as `max_tokens`.
_DROPPED_HARMLESSLY = frozenset({"user", "max_completion_tokens"})

#: Delta fields a `GenericStreamingChunk` cannot carry: sent as a `ModelResponseStream`.
_REASONING_FIELDS = frozenset({"reasoning_content", "thinking_blocks"})

#: LiteLLM's model info for every `<name>/<model>` (`litellm.supports_function_calling`, ...),
#: which frameworks read before sending tools (CrewAI, DSPy): what the provider refuses is said
#: to be unsupported.
_CAPABILITIES: dict[str, Any] = {
    "mode": "chat",
    **dict.fromkeys(
        ("supports_function_calling", "supports_parallel_function_calling", "supports_tool_choice",
         "supports_response_schema", "supports_vision", "supports_system_messages",
         "supports_reasoning", "supports_native_streaming"),
        True,
    ),
    **dict.fromkeys(
        ("supports_pdf_input", "supports_audio_input", "supports_web_search",
         "supports_computer_use", "supports_assistant_prefill",
         "supports_mid_conversation_system", "supports_tool_search"),
        False,
    ),
}  # fmt: skip

#: The CLI's model aliases (and "default", its default model): the model they stand for
#: changes with the CLI, so they get the capabilities without context sizes.
_ALIASES = ("default", "opus", "sonnet", "haiku")

#: Context sizes taken from LiteLLM's entry for the same Anthropic model. No prices: the cost
#: is the CLI's, reported in `usage.cost` (`_usage`).
_SIZES = ("max_tokens", "max_input_tokens", "max_output_tokens")


class ClaudeAgentLLM(CustomLLM):
    """LiteLLM's custom-provider handler over one `ClaudeAgentProvider` (see the module doc).

    Give it a `provider`, or `settings` to build one (default: `ProviderSettings()`).
    """

    def __init__(
        self,
        provider: ClaudeAgentProvider | None = None,
        *,
        settings: ProviderSettings | None = None,
        name: str = PROVIDER_NAME,
    ) -> None:
        super().__init__()
        self.provider = provider or ClaudeAgentProvider(settings)
        self.name = name

    # -- async: the real path

    async def acompletion(self, *args: Any, **kwargs: Any) -> ModelResponse:
        """`litellm.acompletion(model="claude-agent/...")` without `stream`."""
        request, structured, model, lost = self._request(kwargs)
        collector = door.ResultCollector()
        try:
            async with door.stream(self.provider, request) as parts:
                async for part in parts:
                    collector.add(part)
        except ProviderError as exc:
            _raise(exc, model, self.name)
        result = collector.result()
        answer = completion(result, model=model, structured=structured)
        answer["usage"] = _usage(result.usage, result.cost_usd)
        _warned(answer["choices"][0]["message"], [*lost, *result.warnings])
        return ModelResponse(**answer)

    async def astreaming(  # type: ignore[override]  # LiteLLM iterates an async generator
        self, *args: Any, **kwargs: Any
    ) -> AsyncIterator[GenericStreamingChunk | ModelResponseStream]:
        """`litellm.acompletion(model="claude-agent/...", stream=True)`: `ChunkMapper`'s chunks,
        reasoning as LiteLLM's `ModelResponseStream` (its `GenericStreamingChunk` has no field
        for it), the rest as generic chunks, whose usage LiteLLM takes as given."""
        request, structured, model, lost = self._request(kwargs)
        mapper = ChunkMapper(structured=structured)
        stream_id = completion_id()
        try:
            async with door.stream(self.provider, request) as parts:
                async for part in parts:
                    if isinstance(part, StreamStartPart):
                        start = mapper.start()
                        _warned(start["delta"], [*lost, *part.warnings])
                        yield _stream_chunk(stream_id, model, start)
                    for choice in mapper.choices(part):
                        if not _REASONING_FIELDS.isdisjoint(choice["delta"]):
                            yield _stream_chunk(stream_id, model, choice)
                            continue
                        usage = None  # the finish part's, with the finish reason
                        if isinstance(part, FinishPart) and choice["finish_reason"] is not None:
                            usage = _usage(part.usage, part.cost_usd)
                        yield _generic_chunk(choice, usage)
        except ProviderError as exc:
            _raise(exc, model, self.name)

    # -- sync: the async path on an event loop of its own (`sf_provider._sync`)

    def completion(self, *args: Any, **kwargs: Any) -> ModelResponse:
        """`litellm.completion(model="claude-agent/...")` without `stream`."""
        return run_sync(lambda: self.acompletion(**kwargs))

    def streaming(  # type: ignore[override]  # LiteLLM takes its ModelResponseStream too
        self, *args: Any, **kwargs: Any
    ) -> Iterator[GenericStreamingChunk | ModelResponseStream]:
        """`litellm.completion(model="claude-agent/...", stream=True)`. One task consumes the
        whole stream; leaving the iteration early stops the query's CLI."""
        return iterate_in_thread(lambda: self.astreaming(**kwargs))

    # -- the request

    def _request(
        self, kwargs: Mapping[str, Any]
    ) -> tuple[door.Request, bool, str, list[CallWarning]]:
        """The call's request, whether its answer is structured, its model and the warnings of
        what did not reach the model; what cannot be honoured raises LiteLLM's error."""
        model = str(kwargs.get("model") or "default")
        given = kwargs.get("optional_params") or {}
        optional = {k: v for k, v in given.items() if k not in _LITELLM_KEYS}
        extra = given.get("extra_body") or {}
        dropped = _dropped_by_litellm(kwargs, given)
        restored = {k: v for k, v in dropped.items() if k in _RESTORED}
        lost = [
            _dropped(f"LiteLLM dropped the parameter {name!r} (drop_params) before this provider "
                     f"saw it: it did not reach the model")
            for name in sorted(dropped.keys() - _RESTORED - _DROPPED_HARMLESSLY)
        ]  # fmt: skip
        headers = {str(k).lower(): str(v) for k, v in (kwargs.get("headers") or {}).items()}
        lost += [
            _dropped(f"the header {name!r} (extra_headers or litellm.headers) was not sent: the "
                     f"Claude Code CLI makes the API request and takes no headers from the call")
            for name in sorted(headers.keys() - {"anthropic-beta"})
        ]  # fmt: skip
        # LiteLLM lets an application send back its `Message` objects: as plain dicts.
        given_messages = kwargs.get("messages") or []
        messages = [m.model_dump() if hasattr(m, "model_dump") else m for m in given_messages]
        body = {**restored, **optional, **extra, "messages": messages}
        if model != "default":
            body["model"] = model
        # Under drop_params what LiteLLM passed on may be left out (`DROPPABLE`); what
        # `extra_body` holds is asked for by name.
        from_litellm = set(optional) - set(extra)
        drop = litellm.drop_params is True or (
            (kwargs.get("litellm_params") or {}).get("drop_params") is True
        )
        try:
            for name in ("api_key", "api_base"):
                if kwargs.get(name):
                    raise UnsupportedRequestError(
                        f"{name}: this provider cannot use a per-call {name}; the Claude Code "
                        f"CLI reaches the API with the provider's credentials and endpoint "
                        f"(ProviderSettings.env: ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, or the "
                        f"environment): configure them there and leave {name} out"
                    )
            chat = chat_request(body, drop=from_litellm if drop else ())
            lost += chat.dropped
            options = {**chat.options, "betas": header_betas([headers.get("anthropic-beta", "")])}
            if isinstance(given.get("max_retries"), int):  # `max_retries` / `num_retries`
                options["max_retries"] = given["max_retries"]
            # LiteLLM always passes a timeout (its default: `litellm.request_timeout`, 600 s), so
            # it cannot lengthen the provider's own: the shorter one holds.
            timeout = kwargs.get("timeout")
            if isinstance(timeout, httpx.Timeout):
                timeout = timeout.read
            if isinstance(timeout, int | float) and timeout > 0:
                own = self.provider.settings.timeout
                options["timeout"] = float(timeout) if own is None else min(own, float(timeout))
            request = door.request(chat.messages, chat.tools, provider=self.provider, **options)
        except UnsupportedParameterError as exc:
            if drop or exc.param not in DROPPABLE or exc.param not in from_litellm:
                _raise(exc, model, self.name)
            raise errors.UnsupportedParamsError(
                f"{exc}, or pass drop_params=True to drop it (with a warning)",
                llm_provider=self.name,
                model=model,
            ) from exc
        except ProviderError as exc:
            _raise(exc, model, self.name)
        return request, chat.structured, model, lost


def _dropped(message: str) -> CallWarning:
    return CallWarning(code="parameter-dropped", message=message)


def _dropped_by_litellm(kwargs: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters of the call that LiteLLM did not pass on in `given` (with `drop_params`,
    what its list for custom providers lacks), from its record of the call
    (`model_call_details`, what its callbacks get)."""
    details = getattr(kwargs.get("logging_obj"), "model_call_details", None)
    asked = details.get("optional_params") if isinstance(details, Mapping) else None
    if not isinstance(asked, Mapping):
        return {}
    return {k: v for k, v in asked.items() if k not in given and v is not None}


def _usage(usage: Usage, cost_usd: float | None) -> dict[str, Any]:
    """OpenAI's usage with the CLI's cost of the query as `cost`, which LiteLLM bills as a
    provider's own (it has no prices for `claude-agent/...` models)."""
    answer = openai_usage(usage)
    if cost_usd is not None:
        answer["cost"] = cost_usd
    return answer


def _stream_chunk(stream_id: str, model: str, choice: Mapping[str, Any]) -> ModelResponseStream:
    """One choice of `ChunkMapper` as LiteLLM's `ModelResponseStream`, which it passes on as
    it is (used for what a `GenericStreamingChunk` cannot carry)."""
    delta = Delta(**choice["delta"])
    answer = StreamingChoices(delta=delta, finish_reason=choice["finish_reason"], index=0)
    return ModelResponseStream(id=stream_id, model=model, choices=[answer])


def _warned(fields: dict[str, Any], call_warnings: Sequence[CallWarning]) -> None:
    """The query's warnings as `UserWarning`s and in the message's (or first delta's)
    `provider_specific_fields`."""
    if call_warnings:
        warn_user("ClaudeAgentLLM", call_warnings, stacklevel=3)
        fields["provider_specific_fields"] = {"warnings": [w.model_dump() for w in call_warnings]}


def _generic_chunk(
    choice: Mapping[str, Any], usage: dict[str, Any] | None
) -> GenericStreamingChunk:
    """One choice of `ChunkMapper` as LiteLLM's `GenericStreamingChunk` (one tool-call delta
    per chunk, as the mapper makes them)."""
    delta = choice["delta"]
    calls = delta.get("tool_calls") or []
    tool_use: ChatCompletionToolCallChunk | None = None
    if calls:
        call = calls[0]
        function = call.get("function") or {}
        tool_use = ChatCompletionToolCallChunk(
            id=call.get("id"),
            type="function",
            function={"name": function.get("name"), "arguments": function.get("arguments", "")},
            index=call["index"],
        )
    reason = choice.get("finish_reason")
    return GenericStreamingChunk(
        text=delta.get("content") or "",
        tool_use=tool_use,
        is_finished=reason is not None or usage is not None,
        finish_reason=reason or "",
        usage=usage,  # type: ignore[typeddict-item]
        index=0,
    )


#: LiteLLM's exception for each kind of error (`_error_kinds.classify`), as its Anthropic
#: provider raises them.
_LITELLM_ERRORS: dict[ErrorKind, type[Exception]] = {
    ErrorKind.INVALID_REQUEST: errors.BadRequestError,
    ErrorKind.REQUEST_REJECTED: errors.BadRequestError,
    ErrorKind.AUTHENTICATION: errors.AuthenticationError,
    ErrorKind.PERMISSION: errors.PermissionDeniedError,
    ErrorKind.RATE_LIMIT: errors.RateLimitError,
    ErrorKind.OVERLOADED: errors.ServiceUnavailableError,
    ErrorKind.TIMEOUT: errors.Timeout,
    ErrorKind.CONNECTION: errors.APIConnectionError,
    ErrorKind.CONTEXT_WINDOW: errors.ContextWindowExceededError,  # LiteLLM's (a BadRequestError)
    ErrorKind.NOT_FOUND: errors.NotFoundError,
    ErrorKind.TOO_LARGE: errors.BadRequestError,
    ErrorKind.UPSTREAM: errors.BadGatewayError,  # but a 5xx of the API's own: `_UPSTREAM`
    ErrorKind.BAD_OUTPUT: errors.BadGatewayError,
    ErrorKind.STREAM_RETRACTED: errors.BadGatewayError,
    ErrorKind.PROVIDER: errors.InternalServerError,
    ErrorKind.INTERNAL: errors.InternalServerError,
}

#: A server error of the Messages API keeps its status, as LiteLLM's Anthropic provider raises
#: it (a 500 is an `InternalServerError`, which Router retry policies name).
_UPSTREAM: dict[int, type[Exception]] = {
    502: errors.BadGatewayError,
    503: errors.ServiceUnavailableError,
    504: errors.Timeout,
}


def _raise(exc: ProviderError, model: str, provider: str) -> NoReturn:
    """The provider's error as LiteLLM's exception of its kind, with the provider's error as
    `__cause__`."""
    facts = classify(exc)
    args: dict[str, Any] = {"message": facts.message, "model": model, "llm_provider": provider}
    kind = _LITELLM_ERRORS[facts.kind]
    upstream = facts.upstream_status
    if facts.kind is ErrorKind.UPSTREAM and upstream is not None and upstream >= 500:
        kind = _UPSTREAM.get(upstream, errors.InternalServerError)
    if kind is errors.PermissionDeniedError:
        url = f"{provider}://{model}"
        args["response"] = httpx.Response(facts.status, request=httpx.Request("POST", url))
    elif kind is errors.RateLimitError and facts.retry_after:
        args["headers"] = {"retry-after": str(facts.retry_after)}
    error = kind(**args)
    if type(error) is errors.InternalServerError:
        # Set, not passed: LiteLLM before 1.110 has no `provider_status_code` parameter.
        error.provider_status_code = upstream
    raise error from exc


def register(
    provider: ClaudeAgentProvider | None = None,
    *,
    settings: ProviderSettings | None = None,
    name: str = PROVIDER_NAME,
) -> ClaudeAgentLLM:
    """Make `litellm.completion(model="<name>/<model>", ...)` run on a `ClaudeAgentProvider`.

    Registers a `ClaudeAgentLLM` under `name` in `litellm.custom_provider_map` (replacing one
    registered before under that name) and returns it. Its provider keeps warm CLI processes:
    `await handler.provider.aclose()` stops them (they also stop with the event loop and at
    exit).
    """
    handler = ClaudeAgentLLM(provider, settings=settings, name=name)
    kept = [item for item in litellm.custom_provider_map if item.get("provider") != name]
    litellm.custom_provider_map = [*kept, {"provider": name, "custom_handler": handler}]
    custom_llm_setup()  # type: ignore[no-untyped-call]
    litellm.register_model(_model_info(name))
    return handler


def _model_info(name: str) -> dict[str, dict[str, Any]]:
    """LiteLLM model info for `<name>/<model>`: the CLI's aliases, and every Anthropic chat
    model LiteLLM knows (with its context sizes), each with what this provider can do."""
    info = {f"{name}/{alias}": {**_CAPABILITIES, "litellm_provider": name} for alias in _ALIASES}
    for model, entry in litellm.model_cost.items():
        if entry.get("litellm_provider") == "anthropic" and entry.get("mode") == "chat":
            sizes = {key: entry[key] for key in _SIZES if entry.get(key)}
            info[f"{name}/{model}"] = {**sizes, **_CAPABILITIES, "litellm_provider": name}
    return info
