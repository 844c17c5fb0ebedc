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
from ._error_kinds import SentParts
from ._messages import IMAGE_DETAIL, NO_LOW_DETAIL, TOOLS_NEEDED
from ._thinking import thinking_option
from ._tool_choice import NamedToolChoice, ToolChoice, offered_tools
from ._wire import UnsupportedParameterError
from .errors import InvalidMessagesError, UnsupportedRequestError
from .settings import EFFORT_NAMES
from .tools import FunctionTool, tools_from_specs

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


def _default(value: Any, allowed: tuple[Any, ...]) -> bool:
    if isinstance(value, list):
        value = tuple(value)
    return any(type(value) is type(a) and value == a for a in allowed) or (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and any(isinstance(a, int | float) and not isinstance(a, bool) and value == a
                for a in allowed)
    )  # fmt: skip


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
    (`wire.called_tools`). Of the `DROPPABLE` parameters named in `drop` (`drop_params`), the
    sampling settings and a value that cannot be honoured are left out, each with a warning.
    """
    given = {k: v for k, v in body.items() if v is not None}
    dropped: list[t.CallWarning] = []
    for name, value in list(given.items()):
        if name in wire.SAMPLING and name in drop:
            dropped.append(wire.dropped(name))
            del given[name]
        elif name in _ONLY_DEFAULT:
            allowed, reason = _ONLY_DEFAULT[name]
            if _default(value, allowed):
                continue
            if name not in DROPPABLE or name not in drop:
                raise UnsupportedParameterError(
                    name, f"{json.dumps(value)} cannot be honoured: {reason}; leave it out"
                )
            dropped.append(wire.dropped(name, reason))
            del given[name]
        elif name not in _HONOURED and name not in _IGNORED:
            raise UnsupportedParameterError(
                name, "not a Chat Completions parameter this server knows; leave it out"
            )
    if "messages" not in given:
        raise InvalidMessagesError("'messages' is required: a non-empty list of messages")
    tools = _function_tools(given.get("tools") or [])
    options: dict[str, Any] = {}
    model = given.get("model")
    if model is not None:
        if not isinstance(model, str) or not model.strip():
            raise UnsupportedParameterError("model", "must be a model name (a string)")
        options["model"] = model
    if "tool_choice" in given:
        # Only the allowed tools are offered: the model cannot call one it is not shown.
        choice, subset = _tool_choice(given["tool_choice"])
        try:
            tools = offered_tools(tools, choice, allowed=subset)
        except UnsupportedRequestError as exc:
            param = "tool_choice" if subset is None else "tool_choice.allowed_tools"
            raise UnsupportedParameterError(param, str(exc)) from None
        options["tool_choice"] = choice
    if "parallel_tool_calls" in given:
        if not isinstance(given["parallel_tool_calls"], bool):
            raise UnsupportedParameterError("parallel_tool_calls", "must be true or false")
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
    effort = given.get("reasoning_effort")
    if effort == "none":
        options["thinking"] = "disabled"
    elif effort is not None and effort != "default":
        # `EFFORT_NAMES`: OpenAI's names, and LiteLLM's `max`; LiteLLM's `default` asks nothing.
        if not isinstance(effort, str) or effort not in EFFORT_NAMES:
            raise UnsupportedParameterError(
                "reasoning_effort",
                f"{effort!r} is not one of none, default, {', '.join(EFFORT_NAMES)}",
            )
        options["effort"] = EFFORT_NAMES[effort]
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
    structured = False
    if "response_format" in given:
        schema = _output_schema(given["response_format"])
        if schema is not None:
            options["output_schema"] = schema
            structured = True
    stream = given.get("stream", False)
    if not isinstance(stream, bool):
        raise UnsupportedParameterError("stream", "must be true or false")
    stream_options = given.get("stream_options")
    if stream_options is not None and not stream:
        raise UnsupportedParameterError(
            "stream_options", "is only allowed when 'stream' is true; leave it out or stream"
        )
    stream_options = stream_options or {}
    if not isinstance(stream_options, Mapping):
        raise UnsupportedParameterError("stream_options", "must be an object")
    unknown = sorted(set(stream_options) - {"include_usage", "include_obfuscation"})
    if unknown:
        raise UnsupportedParameterError(
            "stream_options", f"{', '.join(unknown)} cannot be honoured; send include_usage"
        )
    messages = provider_messages(given["messages"])
    if not tools and req.holds_tool_blocks(messages):
        called = wire.called_tools(messages)
        if not called or options.get("tool_choice", "none") not in ("auto", "none"):
            raise UnsupportedParameterError("tools", TOOLS_NEEDED)
        tools, options["tool_choice"] = called, "none"
    stop = _stop_sequences(given.get("stop"))
    if stop:
        options["stop_sequences"] = stop
    include_usage = bool(stream_options.get("include_usage"))
    return ChatRequest(model, messages, tools, options, stream, include_usage, structured, dropped)


def _stop_sequences(stop: Any) -> list[str]:
    """OpenAI's `stop` (a string or a list of up to 4 strings) as a list of the non-empty ones
    (an empty one stops nothing; OpenAI's API takes `""` as no stop)."""
    stops = [stop] if isinstance(stop, str) else [] if stop is None else stop
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise UnsupportedParameterError("stop", "must be a string or a list of strings")
    return [s for s in stops if s]


#: The fields of `response_format.json_schema`: `strict` holds anyway (the CLI checks the answer
#: against the schema), `name` and `description` reach the model in the schema (`_described`).
_JSON_SCHEMA_FIELDS = ("name", "description", "schema", "strict")


def _output_schema(response_format: Any) -> dict[str, Any] | None:
    """`response_format` -> the provider's `output_schema` (None: plain text)."""
    kind = response_format.get("type") if isinstance(response_format, Mapping) else None
    if isinstance(response_format, Mapping):
        extra = sorted(k for k in response_format if k not in ("type", "json_schema"))
        if extra:
            raise UnsupportedParameterError(
                f"response_format.{extra[0]}", "not a response_format field this server knows"
            )
    if kind == "text":
        return None
    if kind == "json_object":
        # JSON mode promises a JSON object, any object: a schema that admits every one.
        return {"type": "object"}
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, Mapping) else None
        if not isinstance(spec, Mapping) or not isinstance(schema, Mapping):
            raise UnsupportedParameterError(
                "response_format", "json_schema needs a 'schema' object: {'json_schema': "
                "{'name': ..., 'schema': {...}}}",
            )  # fmt: skip
        unknown = sorted(
            k for k, v in spec.items() if k not in _JSON_SCHEMA_FIELDS and v is not None
        )
        if unknown:
            raise UnsupportedParameterError(
                f"response_format.json_schema.{unknown[0]}",
                f"not a json_schema field this server knows; send {', '.join(_JSON_SCHEMA_FIELDS)}",
            )
        return _described(dict(schema), spec.get("name"), spec.get("description"))
    raise UnsupportedParameterError(
        "response_format", f"type {kind!r} is not one of text, json_object, json_schema"
    )


def _described(schema: dict[str, Any], name: Any, description: Any) -> dict[str, Any]:
    """`wire.described`, the format's name and description checked first."""
    for key, value in (("name", name), ("description", description)):
        if value is not None and not isinstance(value, str):
            raise UnsupportedParameterError(
                f"response_format.json_schema.{key}", "must be a string"
            )
    return wire.described(schema, name, description)


# --------------------------------------------------------------------------- tools


def _function_tools(tools: Any) -> list[FunctionTool]:
    """OpenAI function tools -> `FunctionTool`s without executors (the client runs them), read
    by the tool layer's one rule (`tool_from_spec`), each error naming `tools[i]...`."""
    if not isinstance(tools, Sequence) or isinstance(tools, str | bytes):
        raise UnsupportedParameterError("tools", "must be a list of function tools")
    for i, tool in enumerate(tools):
        kind = tool.get("type") if isinstance(tool, Mapping) else None
        if kind != "function":
            raise UnsupportedParameterError(
                "tools",
                f"tools[{i}] is not a function tool ({{'type': 'function', 'function': "
                f"{{'name', 'description', 'parameters'}}}}); type {kind!r} cannot be offered",
            )
    try:
        return tools_from_specs(tools)
    except UnsupportedRequestError as exc:
        raise UnsupportedParameterError("tools", str(exc)) from None


def _tool_choice(choice: Any) -> tuple[ToolChoice, list[str] | None]:
    """OpenAI's `tool_choice` -> the provider's (what it means: `_tool_choice.offered_tools`),
    and the names of the tools `allowed_tools` lets the model call (None: all)."""
    match choice:
        case "auto" | "none" | "required":
            return choice, None
        case {"type": "function", "function": {"name": str(name)}}:
            return NamedToolChoice(name=name), None
        case {"type": "allowed_tools"}:
            return _allowed_tools(choice.get("allowed_tools"))
        case _:
            raise UnsupportedParameterError(
                "tool_choice",
                f"{json.dumps(choice)} is not one of 'auto', 'none', 'required', "
                f"{{'type': 'function', 'function': {{'name': ...}}}} or "
                f"{{'type': 'allowed_tools', 'allowed_tools': {{...}}}}",
            )


def _allowed_tools(spec: Any) -> tuple[ToolChoice, list[str]]:
    """OpenAI's `allowed_tools`: the mode (`auto`: may call; `required`: must call one of them)
    and the names of the tools the model may call."""
    if not isinstance(spec, Mapping) or set(spec) - {"mode", "tools"}:
        raise UnsupportedParameterError(
            "tool_choice.allowed_tools", "must be {'mode': 'auto' | 'required', 'tools': [...]}"
        )
    mode, listed = spec.get("mode"), spec.get("tools")
    if mode not in ("auto", "required"):
        raise UnsupportedParameterError(
            "tool_choice.allowed_tools.mode", f"{json.dumps(mode)} is not 'auto' or 'required'"
        )
    if not isinstance(listed, list):
        raise UnsupportedParameterError(
            "tool_choice.allowed_tools.tools", "must be a non-empty list of tools"
        )
    allowed: list[str] = []
    for i, tool in enumerate(listed):
        match tool:
            case {"type": "function", "function": {"name": str(name)}}:
                allowed.append(name)
            case _:
                raise UnsupportedParameterError(
                    f"tool_choice.allowed_tools.tools[{i}]",
                    "must be {'type': 'function', 'function': {'name': ...}}",
                )
    return mode, allowed


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


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str | list | tuple | Mapping) and not value)


def _check_fields(message: Mapping[str, Any], role: str, path: str) -> None:
    """Refuse a field of `message` that would not reach the model, naming it (`path.field`)."""
    # `cache_control` (LiteLLM's caching hint) changes cost, never the answer, and the CLI sets
    # its own cache breakpoints: ignored.
    read = {"role", "content", "cache_control", *_MESSAGE_FIELDS[role]}
    for key, value in message.items():
        if key in read:
            continue
        if key in _EMPTY_ONLY:
            if not _empty(value):
                raise UnsupportedParameterError(f"{path}.{key}", _EMPTY_ONLY[key])
        elif value is not None:
            raise UnsupportedParameterError(
                f"{path}.{key}", f"not a field of a {role} message this server knows; leave it out"
            )


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
    part as its own block (nothing is glued together); what each role may carry: the README."""
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
            parts = _text_blocks(content, where)
            # Several parts: each its own block, as sent.
            output = parts if len(parts) > 1 else parts[0].text if parts else ""
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
            raise InvalidMessagesError(
                f"{where}: only text can go here, not a {part.get('type')!r} part"
            )
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
            raise InvalidMessagesError(
                f"{where}: a user content part must be 'text' or 'image_url', not {kind!r}"
            )
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
    detail = image.get("detail")
    if detail == "low":
        raise UnsupportedParameterError(f"{path}.detail", NO_LOW_DETAIL)
    if detail is not None and detail not in IMAGE_DETAIL:
        raise UnsupportedParameterError(
            f"{path}.detail", f"{json.dumps(detail)} is not one of auto, high, low"
        )
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
    texts = []
    for part in _parts(message.get("content"), where):
        kind = part.get("type")
        text = part.get("text") if kind == "text" else part.get("refusal")
        if kind not in ("text", "refusal") or not isinstance(text, str):
            raise InvalidMessagesError(
                f"{where}: an assistant content part must be 'text' or 'refusal', not {kind!r}"
            )
        if text:
            texts.append(text)
            blocks.append(req.Text(text))
    refusal = message.get("refusal")
    if refusal is not None and not isinstance(refusal, str):
        raise InvalidMessagesError(f"{where}: 'refusal' must be a string")
    if refusal and refusal not in texts:
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
        blocks.append(req.ToolCall(call["id"], name, _arguments(function, here)))
    return tuple(blocks)


def _arguments(function: Mapping[str, Any], where: str) -> dict[str, Any]:
    raw = function.get("arguments")
    if isinstance(raw, Mapping):
        return dict(raw)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    try:
        arguments = json.loads(raw)
    except (TypeError, ValueError):
        raise InvalidMessagesError(f"{where}: 'arguments' is not valid JSON") from None
    except RecursionError:
        raise InvalidMessagesError(
            f"{where}: 'arguments' is JSON nested too deeply to read; flatten it"
        ) from None
    if not isinstance(arguments, dict):
        raise InvalidMessagesError(f"{where}: 'arguments' must be a JSON object")
    return arguments


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
    """Usage in OpenAI's shape: prompt tokens include cache reads and writes."""
    return {
        "prompt_tokens": value.input_total,
        "completion_tokens": value.output_tokens,
        "total_tokens": value.total_tokens,
        "prompt_tokens_details": {"cached_tokens": value.cache_read_input_tokens},
    }


def completion_id() -> str:
    """A new completion id."""
    return f"chatcmpl-{uuid.uuid4().hex}"


def _arguments_json(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, ensure_ascii=False)


def message(result: t.GenerateResult, *, structured: bool = False) -> dict[str, Any]:
    """The assistant message of a `GenerateResult` (single-turn: its calls are the client's)."""
    content: str | None = result.text or None
    if structured and result.structured_output is not None:
        content = json.dumps(result.structured_output, ensure_ascii=False)
    answer: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    calls = [c for c in result.tool_calls if not c.provider_executed]
    if calls:
        answer["tool_calls"] = [
            {"id": c.tool_call_id, "type": "function",
             "function": {"name": c.tool_name, "arguments": _arguments_json(c.input)}}
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

    The first choice (`start`) gives the role. Text and reasoning stream as they come; a tool
    call opens with its index, id and name, then its arguments in fragments as the model
    writes them; the finish part gives the finish reason and `usage`. With `structured`, the
    content is the structured output as JSON, sent whole at the end.
    """

    def __init__(self, *, structured: bool = False) -> None:
        self.structured = structured
        self.usage: t.Usage | None = None
        self._index: dict[str, int] = {}  # call id -> index in tool_calls
        self._arguments: dict[str, str] = {}  # call id -> arguments sent so far
        self._reasoning: dict[str, list[str]] = {}
        self._sent = SentParts()  # part and call ids something was sent for

    @staticmethod
    def start() -> dict[str, Any]:
        """The first choice: the role."""
        return {"delta": {"role": "assistant", "content": ""}, "finish_reason": None}

    def choices(self, part: t.StreamPart) -> list[dict[str, Any]]:
        """The choices one part becomes (often none)."""
        match part:
            case t.TextDeltaPart():
                if self.structured:
                    return []  # the answer is the structured output, at the end
                self._sent.add(part.id)
                return [_choice({"content": part.delta})]
            case t.ReasoningDeltaPart():
                self._sent.add(part.id)
                self._reasoning.setdefault(part.id, []).append(part.delta)
                return [_choice({"reasoning_content": part.delta})]
            case t.ReasoningEndPart():
                text = "".join(self._reasoning.pop(part.id, []))
                block = wire.thinking_block(text, part.signature, part.redacted)
                return [_choice({"thinking_blocks": [block]})] if block else []
            case t.ToolInputStartPart():
                return [self._open_call(part.id, part.tool_name, "")]
            case t.ToolInputDeltaPart():
                self._arguments[part.id] = self._arguments.get(part.id, "") + part.delta
                return [self._call_delta(part.id, {"arguments": part.delta})]
            case t.ToolCallPart():
                arguments = _arguments_json(part.input)
                if part.tool_call_id not in self._index:  # not streamed: a recovered call
                    return [self._open_call(part.tool_call_id, part.tool_name, arguments)]
                if not self._arguments.get(part.tool_call_id, "").strip():
                    # No argument fragments came (a call without arguments): send them whole,
                    # so the client reads valid JSON.
                    return [self._call_delta(part.tool_call_id, {"arguments": arguments})]
                return []
            case t.DiscardPart():
                self._sent.discard(part, wire.RESEND)
                return []
            case t.FinishPart():
                self.usage = part.usage
                choices = []
                if self.structured and part.structured_output is not None:
                    content = json.dumps(part.structured_output, ensure_ascii=False)
                    choices.append(_choice({"content": content}))
                choices.append({"delta": {}, "finish_reason": _FINISH[part.finish_reason]})
                return choices
            case (
                t.StreamStartPart()
                | t.TextStartPart()
                | t.TextEndPart()
                | t.ReasoningStartPart()
                | t.ToolInputEndPart()
                | t.ErrorPart()  # the provider raises right after it
                | t.ToolResultPart()  # only for calls the provider ran: none have executors
            ):
                return []

    def _open_call(self, call_id: str, name: str, arguments: str) -> dict[str, Any]:
        self._index[call_id] = len(self._index)
        self._sent.add(call_id)
        self._arguments[call_id] = arguments
        call = {"index": self._index[call_id], "id": call_id, "type": "function",
                "function": {"name": name, "arguments": arguments}}  # fmt: skip
        return _choice({"tool_calls": [call]})

    def _call_delta(self, call_id: str, function: dict[str, Any]) -> dict[str, Any]:
        return _choice({"tool_calls": [{"index": self._index[call_id], "function": function}]})


def _choice(delta: dict[str, Any]) -> dict[str, Any]:
    return {"delta": delta, "finish_reason": None}
