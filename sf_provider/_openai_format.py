"""The OpenAI Chat Completions format <-> the provider: requests in, completions and chunks out.

Shared by the gateway's `POST /v1/chat/completions` and the LiteLLM provider. Pure: nothing here
runs a query; tool calls go back to the client. What each parameter and message field does: the
table in docs/gateway.md, "Request parameters". Signed thinking travels as LiteLLM carries it:
`thinking_blocks` (its text also in `reasoning_content`).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import _request as req
from . import _wire as wire
from . import types as t
from ._blocks import Block, BlockEvent, Blocks, Delta, End, Start, declined
from ._thinking import thinking_option
from ._wire import UnsupportedParameterError
from .errors import InvalidMessagesError, UnsupportedRequestError
from .tools import FunctionTool

__all__ = [
    "DROPPABLE",
    "ChatRequest",
    "ChunkMapper",
    "UnsupportedParameterError",
    "chat_request",
    "completion",
    "completion_id",
    "provider_messages",
    "usage",
]


# --------------------------------------------------------------------------- parameters

#: Parameters read and honoured (see `chat_request`).
_HONOURED = frozenset({
    "model", "messages", "tools", "tool_choice", "parallel_tool_calls", "response_format",
    "max_tokens", "max_completion_tokens", "reasoning_effort", "thinking", "stream",
    "stream_options", "stop", *wire.SAMPLING,
})  # fmt: skip

#: Parameters the spec lets a server ignore: they tag the request or hint at caching, and
#: change nothing in the answer.
_IGNORED = frozenset(
    {"user", "metadata", "safety_identifier", "prompt_cache_key", "prompt_cache_retention"}
)

#: Parameters accepted only at the value that asks for nothing, and why any other is refused.
_ONLY_DEFAULT: dict[str, tuple[tuple[Any, ...], str]] = {
    "n": ((1,), "one choice per request: the Claude Code CLI answers once"),
    "presence_penalty": ((0, 0.0), "the Messages API has no presence penalty"),
    "frequency_penalty": ((0, 0.0), "the Messages API has no frequency penalty"),
    "logit_bias": (({},), "the Messages API has no logit bias"),
    "logprobs": ((False,), "the Messages API returns no log probabilities"),
    "top_logprobs": ((0,), "the Messages API returns no log probabilities"),
    "seed": ((), "the Messages API has no seeded sampling"),
    "store": ((False,), "nothing is stored for later retrieval here"),
    "service_tier": (("auto", "default"), "the Claude Code CLI has no service tier setting"),
    "modalities": ((("text",),), "the answer is text only"),
    "audio": ((), "the answer is text only"),
    "prediction": ((), "the Messages API has no predicted outputs"),
    "verbosity": ((), "the Claude Code CLI has no verbosity setting"),
    "web_search_options": ((), "no built-in web search: send your own tools"),
    "functions": ((), "legacy function calling: send `tools` instead"),
    "function_call": ((), "legacy function calling: send `tool_choice` instead"),
}

#: What `drop_params` may leave out (LiteLLM's, and the gateway's `--drop-params`): the sampling
#: settings, and a value of the parameters above that cannot be honoured. Not the legacy
#: `functions`: they change which calls come back.
DROPPABLE = frozenset({*wire.SAMPLING, *_ONLY_DEFAULT} - {"functions", "function_call"})


@dataclass(frozen=True)
class ChatRequest:
    """A Chat Completions request read for the provider."""

    #: The request's `model` (None: the provider's default); echoed in the answer.
    model: str | None
    messages: list[req.Message]
    tools: list[FunctionTool]
    #: Call options for `generate` / `stream` (model, tool_choice, max_tokens, output_schema,
    #: effort, thinking, stop_sequences, parallel_tool_calls, temperature, top_p, top_k).
    options: dict[str, Any] = field(default_factory=dict)
    stream: bool = False
    #: `stream_options.include_usage`: a last chunk with the usage.
    include_usage: bool = False
    #: `response_format` asked for JSON: the answer's content is the structured output.
    structured: bool = False
    #: A `parameter-dropped` warning for each parameter `drop` left out.
    dropped: list[t.CallWarning] = field(default_factory=list)


def chat_request(body: Mapping[str, Any], drop: Collection[str] = ()) -> ChatRequest:
    """Read a Chat Completions request body; refuse what cannot be honoured.

    `stop` and `parallel_tool_calls` become the call options `stop_sequences` and
    `parallel_tool_calls`, and the sampling settings are sent as written; a history with tool
    calls in a request without `tools` gets the called tools defined again, uncallable
    (`wire.history_tools`). Of the `DROPPABLE` parameters named in `drop` (`drop_params`), the
    sampling settings and a value that cannot be honoured are left out, each with a warning.
    """
    given = {k: v for k, v in body.items() if v is not None}
    read, droppable = _HONOURED | _IGNORED, DROPPABLE.intersection(drop)
    dropped = wire.known_parameters(
        given, "a Chat Completions parameter", read, _ONLY_DEFAULT, droppable
    )
    if "messages" not in given:
        raise InvalidMessagesError("'messages' is required: a non-empty list of messages")
    tools = wire.function_tools(given.get("tools") or [], nested=True)
    options = wire.model_option(given)
    if "tool_choice" in given:
        tools, options["tool_choice"] = wire.tool_choice(tools, given["tool_choice"], nested=True)
    for name in ("parallel_tool_calls", "stream"):
        if name in given and not isinstance(given[name], bool):
            raise UnsupportedParameterError(name, "must be true or false")
    if "parallel_tool_calls" in given:
        options["parallel_tool_calls"] = given["parallel_tool_calls"]
    limits = {k: given[k] for k in ("max_completion_tokens", "max_tokens") if k in given}
    for name, limit in limits.items():
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise UnsupportedParameterError(name, "must be a positive integer")
    if len(set(limits.values())) > 1:
        raise UnsupportedParameterError(
            "max_completion_tokens",
            f"{limits['max_completion_tokens']} contradicts max_tokens "
            f"{limits['max_tokens']}: both set the output limit; send one of them "
            f"(max_tokens is the older name of max_completion_tokens)",
        )
    if limits:
        options["max_tokens"] = next(iter(limits.values()))
    options.update(wire.sampling(given, UnsupportedParameterError))
    options |= wire.effort(given.get("reasoning_effort"), "reasoning_effort")
    if "thinking" in given:  # LiteLLM's Anthropic-style parameter (the Messages API's object)
        try:
            thinking = thinking_option(given["thinking"])
        except UnsupportedRequestError as exc:
            raise UnsupportedParameterError("thinking", str(exc)) from None
        if options.get("thinking", thinking) != thinking:
            raise UnsupportedParameterError(
                "thinking", "contradicts reasoning_effort 'none' (thinking off); send one of them"
            )
        options["thinking"] = thinking
    schema = _output_schema(given.get("response_format"))
    if schema is not None:
        options["output_schema"] = schema
    stream = given.get("stream", False)
    stream_options = wire.stream_options(given.get("stream_options"), stream, ("include_usage",))
    messages = provider_messages(given["messages"])
    tools = wire.history_tools(messages, tools, options)
    if stop := _stop_sequences(given.get("stop")):
        options["stop_sequences"] = stop
    include_usage = bool(stream_options.get("include_usage"))
    structured, model = schema is not None, options.get("model")
    return ChatRequest(model, messages, tools, options, stream, include_usage, structured, dropped)


def _stop_sequences(stop: Any) -> list[str]:
    """OpenAI's `stop` (a string or a list of up to 4 strings) as a list of the non-empty ones
    (an empty one stops nothing; OpenAI's API takes `""` as no stop)."""
    stops = [stop] if isinstance(stop, str) else [] if stop is None else stop
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise UnsupportedParameterError("stop", "must be a string or a list of strings")
    return [s for s in stops if s]


def _output_schema(response_format: Any) -> dict[str, Any] | None:
    """`response_format` -> the provider's `output_schema` (None: plain text)."""
    if response_format is None:
        return None
    if not isinstance(response_format, Mapping):
        raise UnsupportedParameterError("response_format", "must be an object with a 'type'")
    extra = sorted(k for k in response_format if k not in ("type", "json_schema"))
    if extra:
        raise UnsupportedParameterError(
            f"response_format.{extra[0]}", "not a response_format field; send 'type' (and "
            "'json_schema')",
        )  # fmt: skip
    spec = response_format.get("json_schema")
    path = "response_format.json_schema"
    return wire.output_schema(response_format.get("type"), "response_format", spec, path)


# --------------------------------------------------------------------------- messages in

#: The fields a message of each role is read for, besides `role` and `content`.
#: `name` is checked across the messages (`_check_names`).
_MESSAGE_FIELDS: dict[str, frozenset[str]] = {
    "system": frozenset({"name"}),
    "developer": frozenset({"name"}),
    "user": frozenset({"name"}),
    "assistant": frozenset({"name", "tool_calls", "refusal", "thinking_blocks",
                            "reasoning_content"}),
    # A tool message's `name` repeats what its `tool_call_id` says: which call it answers.
    "tool": frozenset({"tool_call_id", "name"}),
}  # fmt: skip

#: Message fields of the OpenAI format (and LiteLLM's) that ask for nothing when empty (`null`,
#: `""`, `[]`, `{}`: official clients send them back so); with a value, where the role does not
#: read them (`_MESSAGE_FIELDS`), each is refused for its reason.
_EMPTY_ONLY: dict[str, str] = {
    "audio": "an audio answer cannot be sent back: answers here are text only; leave it out",
    "function_call": "legacy function calling cannot be sent; use 'tool_calls'",
    "annotations": "annotations describe an answer's text and cannot be sent back to the model; "
    "leave them out",
    # LiteLLM's answer fields (`Message.model_dump()` sends them back).
    "provider_specific_fields": "provider-specific fields of an answer cannot be sent back to "
    "the model; leave them out",
    "images": "images of an answer cannot be sent back as the model's own; leave them out",
    "reasoning_items": "reasoning items cannot be sent back; send the signed 'thinking_blocks'",
    "tool_calls": "only an assistant message can hold tool calls",
    "tool_call_id": "only a tool message answers a tool call",
    "refusal": "only an assistant message can hold a refusal",
    "thinking_blocks": "only an assistant message can hold thinking",
    "reasoning_content": "only an assistant message can hold reasoning",
}


def _check_fields(message: Mapping[str, Any], role: str, path: str) -> None:
    """Refuse a field of `message` that would not reach the model, naming it (`path.field`)."""
    # `cache_control` (LiteLLM's caching hint) changes cost, never the answer, and the CLI sets
    # its own cache breakpoints: ignored.
    read = {"role", "content", "cache_control", *_MESSAGE_FIELDS[role]}
    for key, value in message.items():
        if key in read or value is None:
            continue
        if key not in _EMPTY_ONLY:
            raise UnsupportedParameterError(
                f"{path}.{key}", f"not a field of a {role} message this server knows; leave it out"
            )
        if value or not isinstance(value, str | list | tuple | Mapping):  # not empty
            raise UnsupportedParameterError(f"{path}.{key}", _EMPTY_ONLY[key])


def _check_names(messages: Sequence[Any]) -> None:
    """Refuse speaker names the model would need: messages of one role with different names."""
    names: dict[str, str] = {}  # role -> the first name its messages carry
    for i, message in enumerate(messages):
        role, name = message.get("role"), message.get("name")
        role = "system" if role == "developer" else role
        if role == "tool" or not isinstance(name, str) or not name:
            continue
        first = names.setdefault(role, name)
        if name != first:
            raise UnsupportedParameterError(
                f"messages[{i}].name",
                f"the {role} messages carry different names ({first!r}, {name!r}), which the "
                f"model would never see: the Messages API has no participant names, so it could "
                f"not tell who said what. Put the speaker into the content (for example "
                f"'{name}: ...'; LangGraph's include_agent_name='inline' does this)",
            )


def provider_messages(messages: Any) -> list[req.Message]:
    """Chat Completions messages -> the provider's typed messages (`sf_provider._request`), each
    part as its own block (nothing is glued together); what each role may carry:
    docs/messages.md."""
    if not isinstance(messages, Sequence) or isinstance(messages, str | bytes) or not messages:
        raise InvalidMessagesError("'messages' must be a non-empty list of messages")
    converted: list[req.Message] = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise InvalidMessagesError(f"messages[{i}] must be an object")
        role = message.get("role")
        where = f"messages[{i}] ({role})"
        if role == "function":
            raise InvalidMessagesError(
                f"{where}: legacy 'function' messages cannot be sent; use 'tool' messages"
            )
        if not isinstance(role, str) or role not in _MESSAGE_FIELDS:
            raise InvalidMessagesError(
                f"messages[{i}]: unknown role {role!r}; use system, developer, user, assistant "
                f"or tool"
            )
        _check_fields(message, role, f"messages[{i}]")
        content = message.get("content")
        if role in ("system", "developer"):
            if any(not isinstance(m, req.SystemMessage) for m in converted):
                raise UnsupportedRequestError(
                    f"{where}: a {role} message after the conversation started cannot be kept "
                    f"in its place by the CLI (it takes one system prompt); put every system "
                    f"and developer message first"
                )
            lines = [block.text for block in _text_blocks(content, where)]
            converted.append(req.SystemMessage("\n".join(lines)))
        elif role == "user":
            content_path = f"messages[{i}].content"
            converted.append(req.UserMessage(_user_content(content, where, content_path)))
        elif role == "assistant":
            parts = _assistant_content(message, where)
            if parts:  # an empty turn says nothing the API would accept
                converted.append(req.AssistantMessage(parts))
        else:  # tool
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise InvalidMessagesError(f"{where}: a tool message needs its 'tool_call_id'")
            output = wire.tool_output(_text_blocks(content, where))
            converted.append(req.ToolMessage((req.ToolResult(call_id, output),)))
    _check_names(messages)
    return converted


def _parts(content: Any, where: str) -> list[Mapping[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, Sequence) and all(isinstance(p, Mapping) for p in content):
        return list(content)
    raise InvalidMessagesError(f"{where}: content must be a string or a list of content parts")


def _text_blocks(content: Any, where: str) -> tuple[req.Text, ...]:
    """The text parts of a message that holds text only, each a text block."""
    blocks = []
    for part in _parts(content, where):
        if part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise wire.part_error(part, where, ("text",))
        blocks.append(req.Text(part["text"]))
    return tuple(blocks)


def _user_content(content: Any, where: str, path: str) -> tuple[req.Text | req.Image, ...]:
    blocks: list[req.Text | req.Image] = []
    for j, part in enumerate(_parts(content, where)):
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            blocks.append(req.Text(part["text"]))
        elif kind == "image_url":
            url = _image_url(part.get("image_url"), where, f"{path}[{j}].image_url")
            blocks.append(req.Image(url=url))
        else:
            raise wire.part_error(part, where, ("text", "image_url"))
    return tuple(blocks)


def _image_url(image: Any, where: str, path: str) -> str:
    """An `image_url` part's URL; its `detail` checked (`IMAGE_DETAIL`), other fields refused."""
    if isinstance(image, str):
        return image
    if not isinstance(image, Mapping) or not isinstance(image.get("url"), str):
        raise InvalidMessagesError(f"{where}: an image_url part needs {{'url': ...}}")
    for key, value in image.items():
        if key not in ("url", "detail") and value is not None:
            raise UnsupportedParameterError(
                f"{path}.{key}", "not an image_url field this server knows; send 'url' (and "
                "'detail') only",
            )  # fmt: skip
    wire.image_detail(image.get("detail"), f"{path}.detail")
    return str(image["url"])


def _assistant_content(message: Mapping[str, Any], where: str) -> tuple[req.AssistantPart, ...]:
    blocks: list[req.AssistantPart] = []
    thinking_blocks = message.get("thinking_blocks") or []
    for i, block in enumerate(thinking_blocks):
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind not in ("thinking", "redacted_thinking"):
            raise InvalidMessagesError(
                f"{where}.thinking_blocks[{i}]: a thinking block must be of type 'thinking' or "
                f"'redacted_thinking', not {kind!r}"
            )
        blocks.append(wire.reasoning(block, f"{where}.thinking_blocks[{i}]"))
    reasoning = message.get("reasoning_content")
    if reasoning is not None and not isinstance(reasoning, str):
        raise InvalidMessagesError(f"{where}: 'reasoning_content' must be a string")
    if reasoning and not thinking_blocks:
        # Reasoning without its signed blocks cannot go back as thinking: the provider replays
        # it as text and says so (a `history-flattened` warning). With `thinking_blocks` it is
        # their text, as `message` writes it.
        blocks.append(req.Reasoning(reasoning))
    for part in _parts(message.get("content"), where):
        kind = part.get("type")
        text = part.get("text") if kind == "text" else part.get("refusal")
        if kind not in ("text", "refusal") or not isinstance(text, str):
            raise wire.part_error(part, where, ("text", "refusal"))
        if text:
            blocks.append(req.Text(text))
    refusal = message.get("refusal")
    if refusal is not None and not isinstance(refusal, str):
        raise InvalidMessagesError(f"{where}: 'refusal' must be a string")
    if refusal and req.Text(refusal) not in blocks:
        blocks.append(req.Text(refusal))  # what the model said: its refusal
    calls = message.get("tool_calls") or []
    if not isinstance(calls, Sequence):
        raise InvalidMessagesError(f"{where}: 'tool_calls' must be a list")
    for j, call in enumerate(calls):
        here = f"{where}, tool_calls[{j}]"
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(call.get("id"), str):
            raise InvalidMessagesError(
                f"{here}: a tool call needs an 'id' and a 'function' with 'name' and 'arguments'"
            )
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidMessagesError(f"{here}: a tool call's function needs a 'name'")
        blocks.append(
            req.ToolCall(call["id"], name, wire.arguments(function.get("arguments"), here))
        )
    return tuple(blocks)


# --------------------------------------------------------------------------- answers out

#: The provider's finish reason as OpenAI's (`tool-calls` only with calls to answer).
_FINISH: dict[t.FinishReason, str] = {
    "stop": "stop",
    "length": "length",
    "tool-calls": "tool_calls",
    "content-filter": "content_filter",
    "error": "stop",
    "other": "stop",
}


def usage(value: t.Usage) -> dict[str, Any]:
    """Usage in OpenAI's shape: prompt tokens include cache reads and writes, and the details
    count each."""
    return {
        "prompt_tokens": value.input_total,
        "completion_tokens": value.output_tokens,
        "total_tokens": value.total_tokens,
        "prompt_tokens_details": {
            "cached_tokens": value.cache_read_input_tokens,
            "cache_write_tokens": value.cache_creation_input_tokens,
        },
    }


def completion_id() -> str:
    """A new completion id."""
    return f"chatcmpl-{uuid.uuid4().hex}"


def message(result: t.GenerateResult, *, structured: bool = False) -> dict[str, Any]:
    """The assistant message of a `GenerateResult` (single-turn: its calls are the client's).
    With `structured`, the content is the structured output alone (none with calls instead;
    the model's words when it declined: `declined`)."""
    structured = structured and not declined(result.finish_reason)
    content: str | None = None if structured else result.text or None
    if structured and result.structured_output is not None:
        content = json.dumps(result.structured_output, ensure_ascii=False)
    answer: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    calls = [c for c in result.tool_calls if not c.provider_executed]
    if calls:
        answer["tool_calls"] = [
            {"id": c.tool_call_id, "type": "function", "function": {
                "name": c.tool_name, "arguments": json.dumps(c.input, ensure_ascii=False)}}
            for c in calls
        ]  # fmt: skip
    if result.reasoning:
        answer["reasoning_content"] = result.reasoning
    blocks = [wire.thinking_block(r.text, r.signature, r.redacted) for r in result.final_reasoning]
    if any(blocks):
        answer["thinking_blocks"] = [block for block in blocks if block]
    return answer


def completion(
    result: t.GenerateResult,
    *,
    model: str,
    structured: bool = False,
    id: str | None = None,
    created: int | None = None,
) -> dict[str, Any]:
    """A `chat.completion` object for a `GenerateResult`."""
    return {
        "id": id or completion_id(),
        "object": "chat.completion",
        "created": created or int(time.time()),
        "model": model,
        "system_fingerprint": None,
        "choices": [
            {
                "index": 0,
                "message": message(result, structured=structured),
                "logprobs": None,
                "finish_reason": _FINISH[result.finish_reason],
            }
        ],
        "usage": usage(result.usage),
    }


class ChunkMapper:
    """Stream parts -> the choices of `chat.completion.chunk`s: `{"delta", "finish_reason"}`.

    The first choice (`start`) gives the role (and no content: a reply of calls only has
    none, as whole). Text and reasoning stream as they come; a tool call opens with its index,
    id and name, then its arguments in fragments as the model writes them; the signed and
    redacted thinking blocks come in one `thinking_blocks` delta right before the finish (a
    client merges a list delta of objects by their `index`, which these do not carry); the
    finish part gives the finish reason and `usage` (none after an error part: the error comes
    next). With `structured`, the content is the structured output as JSON, sent whole at the
    end.
    """

    def __init__(self, *, structured: bool = False) -> None:
        self.usage: t.Usage | None = None
        self._blocks = Blocks(remedy=wire.RESEND, structured=structured)
        self._thinking: list[dict[str, Any]] = []  # the thinking blocks ended so far

    @staticmethod
    def start() -> dict[str, Any]:
        """The first choice: the role."""
        return {"delta": {"role": "assistant", "content": None}, "finish_reason": None}

    def choices(self, part: t.StreamPart) -> list[dict[str, Any]]:
        """The choices one part becomes (often none)."""
        return [choice for event in self._blocks.add(part) for choice in self._choices(event)]

    def _choices(self, event: BlockEvent) -> list[dict[str, Any]]:
        match event:
            case Delta(block=Block(kind="text")):
                return [_choice({"content": event.delta})]
            case Delta(block=Block(kind="reasoning")):
                return [_choice({"reasoning_content": event.delta})]
            case End(block=Block(kind="reasoning") as block):
                thinking = wire.thinking_block(block.text, block.signature, block.redacted)
                self._thinking += [thinking] if thinking else []
            case Start(block=Block(kind="tool-call") as call):
                function = {"name": call.name, "arguments": ""}
                opened = {
                    "index": call.nth,
                    "id": call.id,
                    "type": "function",
                    "function": function,
                }
                return [_choice({"tool_calls": [opened]})]
            case Delta(block=Block(kind="tool-call") as call):
                function = {"arguments": event.delta}
                return [_choice({"tool_calls": [{"index": call.nth, "function": function}]})]
            case t.FinishPart() if not self._blocks.failed:
                self.usage = event.usage
                held = [_choice({"thinking_blocks": self._thinking})] if self._thinking else []
                return [*held, {"delta": {}, "finish_reason": _FINISH[event.finish_reason]}]
        return []  # the provider raises right after an error part; no call has an executor


def _choice(delta: dict[str, Any]) -> dict[str, Any]:
    return {"delta": delta, "finish_reason": None}
