"""The Anthropic Messages API format <-> the provider: pure, no HTTP.

`parse_request` reads a `POST /v1/messages` body into one provider call (`MessagesCall`);
`message` renders the `GenerateResult` and `EventMapper` the stream parts of that call as the
API's message and SSE events. What each parameter does (honoured, ignored, refused with a 400
naming it): the table in docs/gateway.md, "Request parameters".
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from . import _request as req
from . import _wire as wire
from . import types as t
from ._blocks import Block, BlockEvent, Blocks, Delta, End, Start, declined
from ._outcome import STOP_SEQUENCE_DETAIL
from ._thinking import thinking_option
from ._tool_choice import NamedToolChoice, ToolChoice, offered_tools
from .errors import InvalidMessagesError, UnsupportedRequestError
from .tools import FunctionTool, tools_from_specs

__all__ = [
    "CLI_BETAS",
    "EventMapper",
    "MessagesCall",
    "ThreadUnsupportedError",
    "header_betas",
    "message",
    "message_id",
    "parse_request",
]

JSON = dict[str, Any]

#: Parameters read by `parse_request`; any other top-level key is refused.
_KNOWN = frozenset({
    "model", "max_tokens", "messages", "system", "stream", "tools", "tool_choice", "thinking",
    "output_config", "temperature", "top_p", "top_k", "stop_sequences", "metadata",
    "cache_control", "service_tier", "speed", "thread",
})  # fmt: skip

#: Parameters the gateway can honour only at one value: the default the CLI's request gets.
_DEFAULT_ONLY: dict[str, tuple[Any, str]] = {
    "service_tier": ("auto", "the CLI cannot choose a service tier"),
    "speed": ("standard", "the CLI cannot ask for another speed"),
}

#: The betas the bundled Claude Code CLI (2.1.330) sends on every request by itself, whatever the
#: model and whether its endpoint is Anthropic's own or a custom base URL (measured: the
#: `anthropic-beta` header of its requests): a client's header may repeat them. It adds others
#: for some models (`effort-...`, `per-turn-control-...`) or only for Anthropic's own endpoint
#: (`prompt-caching-scope-...`); a client asking for one of those gets it passed on.
CLI_BETAS = frozenset(
    {
        "claude-code-20250219",
        "interleaved-thinking-2025-05-14",
        "context-management-2025-06-27",
        "thinking-token-count-2026-05-13",
        "thinking-display-updates-2026-08-18",
    }
)

_STOP_REASONS: dict[t.FinishReason, str] = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool-calls": "tool_use",
    "content-filter": "refusal",
}
#: The API's own stop reasons: a raw one the provider's finish reason does not name is kept.
_API_STOP_REASONS = frozenset({
    "end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal",
    "model_context_window_exceeded",
})  # fmt: skip


@dataclass(frozen=True)
class MessagesCall:
    """One `POST /v1/messages` as a provider call: `provider.stream(messages, tools=tools,
    **options)`. `structured` is true when the answer must be the JSON of `output_config.format`;
    `dropped` has a `parameter-dropped` warning for each parameter `drop_params` left out.
    """

    model: str
    messages: list[req.Message]
    tools: list[FunctionTool] = field(default_factory=list)
    options: JSON = field(default_factory=dict)
    stream: bool = False
    structured: bool = False
    dropped: list[t.CallWarning] = field(default_factory=list)


class ThreadUnsupportedError(UnsupportedRequestError):
    """A request asked for a server-held conversation (`thread`), which the gateway does not keep:
    answered as the Messages API answers a request it cannot thread (400, `error.details.
    error_code` `thread_unsupported_request`; what the clients then do: docs/gateway.md)."""

    details: ClassVar[dict[str, str]] = {"error_code": "thread_unsupported_request"}


def _refuse(param: str, problem: str) -> UnsupportedRequestError:
    return UnsupportedRequestError(f"{param}: {problem}")


def _check_keys(obj: Mapping[str, Any], where: str, known: set[str], ignored: set[str]) -> None:
    """Refuse keys of `obj` that are neither read (`known`) nor safe to ignore (`ignored`)."""
    extra = sorted(k for k, v in obj.items() if k not in known | ignored and v is not None)
    if extra:
        raise _refuse(
            f"{where}.{extra[0]}" if where else extra[0],
            "not supported by this gateway (the Claude Code CLI cannot honour it); drop it",
        )


def header_betas(headers: Iterable[str]) -> list[str]:
    """The betas of the `anthropic-beta` request header(s) (comma-separated) to pass on for the
    call (`CallOptions.betas`): all but those the CLI sends on every request by itself."""
    betas = (beta.strip() for value in headers for beta in value.split(","))
    return list(dict.fromkeys(beta for beta in betas if beta and beta not in CLI_BETAS))


def parse_request(body: Any, *, drop: bool = False) -> MessagesCall:
    """A Messages API request body as a provider call; a 400-worthy problem raises a
    `ProviderError` (`UnsupportedRequestError`, `InvalidMessagesError`, `ToolDefinitionError`)
    whose message starts with the parameter it is about. With `drop` (`drop_params`), the
    sampling settings and a value of `_DEFAULT_ONLY` that cannot be honoured are left out, each
    with a warning. What each parameter does: docs/gateway.md."""
    if not isinstance(body, Mapping):
        raise _refuse("body", f"must be a JSON object, not {type(body).__name__}")
    _check_keys(body, "", set(_KNOWN), set())
    dropped = [wire.dropped(name) for name in wire.SAMPLING if drop and body.get(name) is not None]
    _thread(body.get("thread"))
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _refuse("model", "required: a model name string")
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise _refuse("max_tokens", "required: an integer of at least 1")
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise _refuse("stream", "must be true or false")
    for name, (default, why) in _DEFAULT_ONLY.items():
        value = body.get(name)
        if value is not None and (value != default or isinstance(value, bool)):
            if not drop:
                raise _refuse(name, f"only {default!r} can be honoured ({why}); drop it")
            dropped.append(wire.dropped(name, why))
    stop = body.get("stop_sequences")
    if stop is not None and (
        not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop)
    ):
        raise _refuse("stop_sequences", "must be a list of non-empty strings")
    metadata = body.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, Mapping):
            raise _refuse("metadata", "must be an object")
        _check_keys(metadata, "metadata", {"user_id"}, set())  # the API takes user_id only
        user_id = metadata.get("user_id")
        if user_id is not None and not isinstance(user_id, str):
            raise _refuse("metadata.user_id", "must be a string")

    sampling = {} if drop else wire.sampling(body, _refuse)
    options: JSON = {"model": model, "max_tokens": max_tokens, **sampling}
    if stop:
        options["stop_sequences"] = stop
    structured = _output_config(body.get("output_config"), options)
    thinking = thinking_option(body.get("thinking"))
    if thinking is not None:
        options["thinking"] = thinking
    tools = _tools(body.get("tools"))
    _tool_choice(body.get("tool_choice"), tools, options)
    system = "" if body.get("system") is None else _text_of(body["system"], "system")
    messages: list[req.Message] = [req.SystemMessage(system)] if system else []
    messages += _messages(body.get("messages"))
    return MessagesCall(model, messages, tools, options, bool(stream), structured, dropped)


# -- parameters


def _thread(thread: Any) -> None:
    """Refuse a well-formed `thread` as the API refuses one it cannot honour (the clients then
    send the whole conversation); a malformed one is an ordinary 400."""
    if thread is None:
        return
    if not isinstance(thread, Mapping):
        raise _refuse("thread", "must be an object")
    kind = thread.get("type")
    if kind == "create":
        _check_keys(thread, "thread", {"type"}, set())
    elif kind == "continue":
        _check_keys(thread, "thread", {"type", "previous_message_id"}, set())
        if not isinstance(thread.get("previous_message_id"), str):
            raise _refuse("thread.previous_message_id", "required: a message id string")
    else:
        raise _refuse("thread.type", f"{kind!r}; use 'create' or 'continue'")
    raise ThreadUnsupportedError(
        "thread: this gateway holds no conversation between requests (each request runs on the "
        "history it sends); send the whole conversation without `thread`. The SDKs' tool runners "
        "do this by themselves; call `client.beta.messages.thread()` with "
        "unsupported_request_behavior='continue_unthreaded'"
    )


def _output_config(config: Any, options: JSON) -> bool:
    """Effort and structured output; True when the answer must be JSON."""
    if config is None:
        return False
    if not isinstance(config, Mapping):
        raise _refuse("output_config", "must be an object")
    _check_keys(config, "output_config", {"effort", "format"}, set())
    effort = config.get("effort")
    if effort is not None:
        if effort not in ("low", "medium", "high", "xhigh", "max"):
            raise _refuse(
                "output_config.effort", f"{effort!r}; use low, medium, high, xhigh or max"
            )
        options["effort"] = effort
    schema_format = config.get("format")
    if schema_format is None:
        return False
    if not isinstance(schema_format, Mapping) or schema_format.get("type") != "json_schema":
        raise _refuse("output_config.format", 'only {"type": "json_schema", "schema": {...}}')
    _check_keys(schema_format, "output_config.format", {"type", "schema"}, set())
    schema = schema_format.get("schema")
    if not isinstance(schema, Mapping):
        raise _refuse("output_config.format.schema", "must be a JSON Schema object")
    options["output_schema"] = dict(schema)
    return True


#: The Messages API's tool choices -> the provider's (a named `tool`: `NamedToolChoice`).
_TOOL_CHOICES: dict[str, ToolChoice] = {"auto": "auto", "any": "required", "none": "none"}


def _tool_choice(choice: Any, tools: list[FunctionTool], options: JSON) -> None:
    """The Messages API's `tool_choice` as the call options `tool_choice` (what it means:
    `_tool_choice.offered_tools`; one the tools cannot meet is refused naming tool_choice) and,
    for `disable_parallel_tool_use`, `parallel_tool_calls`."""
    if choice is None:
        return
    if not isinstance(choice, Mapping):
        raise _refuse("tool_choice", "must be an object with a 'type'")
    kind, name = choice.get("type"), choice.get("name")
    if kind not in ("auto", "any", "tool", "none"):
        raise _refuse("tool_choice.type", f"{kind!r}; use 'auto', 'any', 'tool' or 'none'")
    named = {"name"} if kind == "tool" else set()
    _check_keys(choice, "tool_choice", {"type", "disable_parallel_tool_use", *named}, set())
    if kind == "tool":
        if not isinstance(name, str) or not name:
            raise _refuse("tool_choice.name", "required for type 'tool'")
        chosen: ToolChoice = NamedToolChoice(name=name)
    else:
        chosen = _TOOL_CHOICES[kind]
    one_call = choice.get("disable_parallel_tool_use")
    if one_call is not None and not isinstance(one_call, bool):
        raise _refuse("tool_choice.disable_parallel_tool_use", "must be true or false")
    if one_call:
        options["parallel_tool_calls"] = False
    offered_tools(tools, chosen)
    options["tool_choice"] = chosen


def _tools(tools: Any) -> list[FunctionTool]:
    """Custom tools, read by the tool layer's one rule (`tool_from_spec`); server tools are
    refused all at once, naming each."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise _refuse("tools", "must be a list")
    server = [
        f"{tool.get('name', '?')} ({tool['type']})"
        for tool in tools
        if isinstance(tool, Mapping) and tool.get("type") not in (None, "custom")
    ]
    if server:
        raise _refuse(
            "tools",
            f"server tools are not supported by this gateway: {', '.join(server)}. Only custom "
            f"tools (name, description, input_schema) can be offered; they come back to you as "
            f"tool_use blocks",
        )
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            raise _refuse(f"tools[{i}]", "must be an object")
        if "input_schema" not in tool:
            raise _refuse(f"tools[{i}].input_schema", "required: a JSON Schema object")
    return tools_from_specs(tools)


# -- system and messages


def _text_of(blocks: Any, where: str) -> str:
    if isinstance(blocks, str):
        return blocks
    if not isinstance(blocks, list):
        raise InvalidMessagesError(f"{where}: must be a string or a list of text blocks")
    return "\n".join(_text_block(block, f"{where}[{i}]").text for i, block in enumerate(blocks))


def _messages(messages: Any) -> list[req.Message]:
    if not isinstance(messages, list) or not messages:
        raise InvalidMessagesError("messages: required: a non-empty list of messages")
    converted: list[req.Message] = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping):
            raise InvalidMessagesError(f"{where}: must be an object with 'role' and 'content'")
        _check_keys(message, where, {"role", "content"}, set())
        role = message.get("role")
        if "content" not in message:
            raise InvalidMessagesError(f"{where}.content: required: a string or a list of blocks")
        content = message["content"]
        if role == "system":
            if any(not isinstance(m, req.SystemMessage) for m in converted):
                raise InvalidMessagesError(
                    f"{where}: a system message after the conversation began cannot be kept in "
                    f"its place by the CLI; move it into 'system'"
                )
            converted.append(req.SystemMessage(_text_of(content, f"{where}.content")))
        elif role == "user":
            converted += _user(content, f"{where}.content")
        elif role == "assistant":
            converted.append(_assistant(content, f"{where}.content"))
        else:
            raise InvalidMessagesError(
                f"{where}.role: unknown role {role!r}; use 'user' or 'assistant'"
            )
    if messages[-1].get("role") == "assistant":
        raise InvalidMessagesError(
            f"messages[{len(messages) - 1}]: a final assistant message (a prefill to continue) "
            f"is not supported through the CLI; end with a user message"
        )
    return converted


def _blocks(content: Any, where: str) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise InvalidMessagesError(f"{where}: must be a string or a list of content blocks")
    return content


def _block_type(block: Any, where: str) -> str:
    if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
        raise InvalidMessagesError(f"{where}: a content block must be an object with a 'type'")
    return str(block["type"])


def _text_block(block: Any, where: str) -> req.Text:
    kind = _block_type(block, where)
    if kind != "text":
        raise InvalidMessagesError(f"{where}: only text blocks are accepted here, not {kind!r}")
    _check_keys(block, where, {"type", "text"}, {"cache_control"})
    if not isinstance(block.get("text"), str):
        raise InvalidMessagesError(f"{where}.text: required: a string")
    return req.Text(block["text"])


def _image_block(block: Mapping[str, Any], where: str) -> req.Image:
    _check_keys(block, where, {"type", "source"}, {"cache_control"})
    source = block.get("source")
    if not isinstance(source, Mapping):
        raise InvalidMessagesError(f"{where}.source: required: an object")
    kind = source.get("type")
    if kind == "base64":
        _check_keys(source, f"{where}.source", {"type", "data", "media_type"}, set())
        data, media = source.get("data"), source.get("media_type")
        if not isinstance(data, str) or not isinstance(media, str):
            raise InvalidMessagesError(
                f"{where}.source: a base64 image needs string 'data' and 'media_type'"
            )
        return req.Image(data=data, media_type=media)
    if kind == "url":
        _check_keys(source, f"{where}.source", {"type", "url"}, set())
        url = source.get("url")
        if not isinstance(url, str) or not url.startswith(("https://", "http://")):
            raise InvalidMessagesError(f"{where}.source.url: required: an http(s) URL")
        return req.Image(url=url)
    raise _refuse(
        f"{where}.source.type",
        f"{kind!r} image sources are not supported; send the image as 'base64' or 'url'",
    )


#: How a user turn's and a tool result's text and image blocks are read.
_MEDIA: dict[str, Callable[[Mapping[str, Any], str], req.Text | req.Image]] = {
    "text": _text_block,
    "image": _image_block,
}


def _tool_result(block: Mapping[str, Any], where: str) -> req.ToolResult:
    _check_keys(block, where, {"type", "tool_use_id", "content", "is_error"}, {"cache_control"})
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidMessagesError(f"{where}.tool_use_id: required: a string")
    is_error = block.get("is_error", False)
    if not isinstance(is_error, bool):  # "false" would be truthy: sent as an error
        raise InvalidMessagesError(f"{where}.is_error: must be true or false, not {is_error!r}")
    parts: list[req.Text | req.Image] = []
    for i, item in enumerate(_blocks(block.get("content", ""), f"{where}.content")):
        here = f"{where}.content[{i}]"
        kind = _block_type(item, here)
        if kind not in _MEDIA:
            raise _refuse(
                here, f"{kind!r} blocks in a tool result are not supported; send text and images"
            )
        parts.append(_MEDIA[kind](item, here))
    return req.ToolResult(call_id, wire.tool_output(parts), is_error)


def _user(content: Any, where: str) -> list[req.Message]:
    """A user message: its tool results as a `ToolMessage`, its text and images as a
    `UserMessage`, in their order."""
    results: list[req.ToolResult] = []
    parts: list[req.Text | req.Image] = []
    for i, block in enumerate(_blocks(content, where)):
        here = f"{where}[{i}]"
        kind = _block_type(block, here)
        if kind in _MEDIA:
            parts.append(_MEDIA[kind](block, here))
        elif kind == "tool_result":
            if parts:
                before = "text" if isinstance(parts[-1], req.Text) else "image"
                raise InvalidMessagesError(
                    f"{here}: a tool_result block comes after a {before} block; the Messages "
                    f"API requires a user message's tool_result blocks first, before any text "
                    f"or image: move them to the start of the content"
                )
            results.append(_tool_result(block, here))
        else:
            raise _refuse(
                f"{here}.type",
                f"{kind!r} blocks are not supported in user messages; use text, image or "
                f"tool_result",
            )
    if not results and not parts:
        raise InvalidMessagesError(
            f"{where}: a user message needs content: send text, image or tool_result blocks"
        )
    out: list[req.Message] = [req.ToolMessage(tuple(results))] if results else []
    return out + ([req.UserMessage(tuple(parts))] if parts else [])


def _assistant(content: Any, where: str) -> req.AssistantMessage:
    parts: list[req.AssistantPart] = []
    for i, block in enumerate(_blocks(content, where)):
        here = f"{where}[{i}]"
        kind = _block_type(block, here)
        if kind == "text":
            parts.append(_text_block(block, here))
        elif kind in ("thinking", "redacted_thinking"):
            fields = {"thinking", "signature"} if kind == "thinking" else {"data"}
            _check_keys(block, here, {"type", *fields}, {"cache_control"})
            if kind == "thinking" and not all(isinstance(block.get(k), str) for k in fields):
                raise InvalidMessagesError(
                    f"{here}: a thinking block needs string 'thinking' and 'signature'; send "
                    f"it back as the API returned it"
                )
            parts.append(wire.reasoning(block, here))
        elif kind == "tool_use":
            if block.get("caller") not in (None, {"type": "direct"}):
                raise _refuse(
                    f"{here}.caller",
                    "only direct tool calls can be sent back: leave it out or send "
                    "{'type': 'direct'}",
                )
            _check_keys(block, here, {"type", "id", "name", "input", "caller"}, {"cache_control"})
            call_id, name, arguments = block.get("id"), block.get("name"), block.get("input")
            if not isinstance(call_id, str) or not isinstance(name, str):
                raise InvalidMessagesError(f"{here}: a tool_use block needs string 'id' and 'name'")
            if not isinstance(arguments, Mapping):
                raise InvalidMessagesError(f"{here}.input: required: an object")
            parts.append(req.ToolCall(call_id, name, dict(arguments)))
        else:
            raise _refuse(
                f"{here}.type",
                f"{kind!r} blocks are not supported in assistant messages; use text, thinking "
                f"or tool_use",
            )
    return req.AssistantMessage(tuple(parts))


# -- the response


def message_id() -> str:
    """A new message id, `msg_...` like the API's."""
    return f"msg_{uuid.uuid4().hex[:24]}"


def _stop_fields(done: t.GenerateResult | t.FinishPart) -> tuple[str, str | None]:
    """The response's `stop_reason` (`tool_use` only with calls to answer; a raw stop reason of
    the API the finish reason does not name is kept) and `stop_sequence`: `stop_sequence` and
    the sequence when the answer ended at one of the request's `stop_sequences`, as the API
    answers."""
    matched = done.provider_details.get(STOP_SEQUENCE_DETAIL)
    if isinstance(matched, str):
        return "stop_sequence", matched
    raw = done.raw_stop_reason
    mapped = _STOP_REASONS.get(done.finish_reason)
    return mapped or (raw if raw in _API_STOP_REASONS else "end_turn"), None


def _envelope(
    message_id: str,
    model: str,
    content: list[JSON],
    stop: str | None,
    usage: t.Usage,
    stop_sequence: str | None = None,
) -> JSON:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": stop_sequence,
        "usage": usage.model_dump(),  # `Usage` has the Messages API's fields
    }


def message(result: t.GenerateResult, *, message_id: str, model: str, structured: bool) -> JSON:
    """The non-streaming response: the reply's blocks in the order the model wrote them (signed
    thinking, text, `tool_use`), its stop reason and usage. With `structured`, the model's text
    is left out and the answer is one text block holding the structured output (unless the
    model declined: `declined`)."""
    structured = structured and not declined(result.finish_reason)
    content: list[JSON] = []
    for turn in result.response_messages:
        if turn["role"] != "assistant":
            continue  # results of provider-run calls: none here, the client runs its tools
        for block in turn["content"]:
            kind = block["type"]
            if kind == "reasoning":  # signed or redacted: the reply holds no other
                reasoning = (block["text"], block.get("signature"), block.get("redacted"))
                content.append(wire.thinking_block(*reasoning))
            elif kind == "text" and not structured:
                content.append({"type": "text", "text": block["text"]})
            elif kind == "tool-call":
                content.append(
                    {"type": "tool_use", "id": block["tool_call_id"],
                     "name": block["tool_name"], "input": block["input"]}
                )  # fmt: skip
    if structured and result.structured_output is not None:
        content.append(
            {"type": "text", "text": json.dumps(result.structured_output, ensure_ascii=False)}
        )
    stop, sequence = _stop_fields(result)
    return _envelope(message_id, model, content, stop, result.usage, sequence)


#: The delta of each kind of block, and the field its text goes into.
_DELTAS = {"text": ("text_delta", "text"), "reasoning": ("thinking_delta", "thinking"),
           "tool-call": ("input_json_delta", "partial_json")}  # fmt: skip


class EventMapper:
    """Stream parts of one query -> the Messages API's SSE events (as dicts).

    `start()` gives `message_start`; `add(part)` the events for each part: a content block's
    start, deltas and stop, and for the finish part `message_delta` (stop reason, and usage,
    which the CLI reports when the query ends) and `message_stop`. With `structured`, the
    model's text is held back and the answer is one text block holding the structured output.
    A `discard` part that would take back blocks already sent raises `StreamRetractionError`.
    """

    def __init__(self, model: str, *, message_id: str, structured: bool = False) -> None:
        self.model = model
        self.message_id = message_id
        self._blocks = Blocks(remedy=wire.RESEND, structured=structured)

    def start(self) -> JSON:
        """The `message_start` event."""
        return {
            "type": "message_start",
            "message": _envelope(self.message_id, self.model, [], None, t.Usage()),
        }

    def add(self, part: t.StreamPart) -> list[JSON]:
        """The events for one stream part (often none)."""
        return [e for event in self._blocks.add(part) for e in self._events(event)]

    def _events(self, event: BlockEvent) -> list[JSON]:
        match event:
            case Start(block=block):
                return [{"type": "content_block_start", "index": block.index,
                         "content_block": _empty(block)}]  # fmt: skip
            case Delta(block=block):
                kind, key = _DELTAS[block.kind]
                delta = {"type": kind, key: event.delta}
                return [{"type": "content_block_delta", "index": block.index, "delta": delta}]
            case End(block=block):
                events = []
                if block.signature and not block.redacted:
                    delta = {"type": "signature_delta", "signature": block.signature}
                    events.append({"type": "content_block_delta", "index": block.index,
                                   "delta": delta})  # fmt: skip
                return [*events, {"type": "content_block_stop", "index": block.index}]
            case t.FinishPart() if not self._blocks.failed:
                stop, sequence = _stop_fields(event)
                ended = {"stop_reason": stop, "stop_sequence": sequence}
                usage = event.usage.model_dump()
                return [{"type": "message_delta", "delta": ended, "usage": usage},
                        {"type": "message_stop"}]  # fmt: skip
        return []  # gateway tools have no executors: no provider-executed calls or results


def _empty(block: Block) -> JSON:
    """A content block as it starts streaming: its content comes as deltas (a redacted
    block whole, as the API sends it)."""
    if block.kind == "text":
        return {"type": "text", "text": ""}
    if block.kind == "tool-call":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}
    if block.redacted:
        return wire.thinking_block("", None, block.redacted)
    return {"type": "thinking", "thinking": "", "signature": ""}
