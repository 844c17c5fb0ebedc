"""The OpenAI Responses API format <-> the provider: pure, no HTTP, no storage.

`parse_request` reads a `POST /v1/responses` body (`ResponsesRequest`); `provider_call` turns its
input items, after the stored conversation `previous_response_id` names (the gateway looks it up),
into one provider call. `response_object` / `output_items` render a `GenerateResult` and
`EventMapper` the stream parts as the API's `response` object and its SSE events. What each field
does (honoured, ignored, refused with a 400 naming it): docs/gateway.md, "Request parameters".

Signed thinking travels as `reasoning` items: the thinking as their summary, the signature (or a
redacted block's data) in `encrypted_content`, which a client sends back as it came.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import _request as req
from . import _wire as wire
from . import types as t
from ._blocks import Block, BlockEvent, Blocks, Delta, End, Start, declined
from ._wire import UnsupportedParameterError
from .errors import InvalidMessagesError, UnsupportedRequestError
from .tools import FunctionTool

__all__ = [
    "DROPPABLE",
    "EventMapper",
    "ResponsesRequest",
    "UnsupportedParameterError",
    "input_item_list",
    "input_messages",
    "item_id",
    "item_response",
    "numbered_input",
    "output_items",
    "parse_request",
    "provider_call",
    "reference",
    "response_id",
    "response_object",
    "stored_response_query",
]

JSON = dict[str, Any]


# --------------------------------------------------------------------------- parameters

#: Fields read and honoured (`parse_request`).
_HONOURED = frozenset({
    "model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls", "text",
    "max_output_tokens", "reasoning", "temperature", "top_p", "stream", "stream_options", "store",
    "previous_response_id", "include", "metadata", "user",
})  # fmt: skip

#: Fields that tag the request or hint at caching, and change nothing in the answer;
#: `max_tool_calls` bounds calls to hosted tools, of which none are offered here.
_IGNORED = frozenset(
    {"safety_identifier", "prompt_cache_key", "prompt_cache_retention", "max_tool_calls"}
)

#: Fields accepted only at the value that asks for nothing, and why any other is refused.
_ONLY_DEFAULT: dict[str, tuple[tuple[Any, ...], str]] = {
    "background": ((False,), "the answer comes on this request; background responses are not run"),
    "truncation": (
        ("disabled",),
        "nothing is dropped from a conversation here: one too long for the model is an error",
    ),
    "top_logprobs": ((0,), "the Messages API returns no log probabilities"),
    "service_tier": (("auto", "default"), "the Claude Code CLI has no service tier setting"),
    "conversation": ((), "conversations are not kept here: continue with previous_response_id"),
    "prompt": ((), "stored prompts are not kept here: send instructions and input"),
}

#: What `drop` (the gateway's `--drop-params`) may leave out, as on Chat Completions: the
#: sampling settings, and a value above, of `text.verbosity` or in `include` that cannot be
#: honoured. Not `conversation` or `prompt` (left out, the model would get another question)
#: nor `background` (its client expects to be answered at once and to come back for it).
DROPPABLE = frozenset(
    {*wire.SAMPLING, "truncation", "top_logprobs", "service_tier", "text.verbosity", "include"}
)
_VERBOSITY = "the Claude Code CLI has no verbosity setting"

#: `include` values: encrypted reasoning is in every reasoning item anyway.
_INCLUDABLE = frozenset({"reasoning.encrypted_content"})


@dataclass(frozen=True)
class ResponsesRequest:
    """A `POST /v1/responses` body, read for the provider."""

    #: The request's `model` (None: the provider's default); echoed in the response.
    model: str | None
    #: The input items (a string input as one user message), as sent: with the output they are
    #: the conversation a later `previous_response_id` continues (the gateway replaces each
    #: `item_reference` by the item it names, and numbers them: `numbered_input`).
    items: list[JSON]
    instructions: str | None
    tools: list[FunctionTool]
    #: Call options for the provider (model, tool_choice, parallel_tool_calls, max_tokens,
    #: output_schema, effort, thinking, temperature, top_p).
    options: JSON = field(default_factory=dict)
    stream: bool = False
    store: bool = True
    previous_response_id: str | None = None
    #: `text.format` asked for JSON: the answer's text is the structured output.
    structured: bool = False
    #: The request fields a response object repeats (`response_object`).
    echo: JSON = field(default_factory=dict)
    #: A `parameter-dropped` warning for each parameter `drop` left out.
    dropped: list[t.CallWarning] = field(default_factory=list)


def parse_request(body: Mapping[str, Any], drop: Collection[str] = ()) -> ResponsesRequest:
    """Read a Responses API request body; refuse what cannot be honoured, naming the field. Of
    the `DROPPABLE` parameters named in `drop` (`--drop-params`), the sampling settings and a
    value that cannot be honoured are left out instead, each with a warning."""
    given = {k: v for k, v in body.items() if v is not None}
    droppable = DROPPABLE.intersection(drop)
    read = _HONOURED | _IGNORED
    dropped = wire.known_parameters(given, "a Responses API field", read, _ONLY_DEFAULT, droppable)
    text = given.get("text")
    if (
        "text.verbosity" in droppable
        and isinstance(text, Mapping)
        and text.get("verbosity") not in (None, "medium")
    ):
        dropped.append(wire.dropped("text.verbosity", _VERBOSITY))
        given["text"] = {k: v for k, v in text.items() if k != "verbosity"}
    previous = given.get("previous_response_id")
    if previous is not None and (not isinstance(previous, str) or not previous):
        raise UnsupportedParameterError("previous_response_id", "must be a response id")
    if "input" not in given and previous is None:
        raise InvalidMessagesError("'input' is required: a string or a list of input items")
    items = _items(given.get("input", []))
    instructions = given.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise UnsupportedParameterError("instructions", "must be a string")
    options = wire.model_option(given)
    model = options.get("model")
    tools = wire.function_tools(given.get("tools", []), nested=False)
    if "tool_choice" in given:
        tools, options["tool_choice"] = wire.tool_choice(tools, given["tool_choice"], nested=False)
    for name in ("parallel_tool_calls", "stream", "store"):
        if name in given and not isinstance(given[name], bool):
            raise UnsupportedParameterError(name, "must be true or false")
    if "parallel_tool_calls" in given:
        options["parallel_tool_calls"] = given["parallel_tool_calls"]
    limit = given.get("max_output_tokens")
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise UnsupportedParameterError("max_output_tokens", "must be a positive integer")
        options["max_tokens"] = limit
    options.update(wire.sampling(given, UnsupportedParameterError))  # sent as written
    options |= _reasoning_options(given.get("reasoning"))
    schema = _output_schema(given.get("text"))
    if schema is not None:
        options["output_schema"] = schema
    stream = given.get("stream", False)
    wire.stream_options(given.get("stream_options"), stream)
    dropped += _include(given.get("include"), "include" in droppable)
    metadata = given.get("metadata", {})
    if not isinstance(metadata, Mapping) or not all(isinstance(v, str) for v in metadata.values()):
        raise UnsupportedParameterError("metadata", "must be an object of string values")
    echo = {
        "instructions": instructions,
        "max_output_tokens": limit,
        "metadata": dict(metadata),
        "parallel_tool_calls": given.get("parallel_tool_calls", True),
        "previous_response_id": previous,
        "reasoning": {"effort": None, "summary": None, **(given.get("reasoning") or {})},
        "temperature": given.get("temperature"),
        "text": {"format": {"type": "text"}, "verbosity": "medium", **(given.get("text") or {})},
        "tool_choice": given.get("tool_choice", "auto"),
        "tools": list(given.get("tools", [])),
        "top_p": given.get("top_p"),
        "user": given.get("user"),
    }
    return ResponsesRequest(
        model,
        items,
        instructions,
        tools,
        options,
        stream=stream,
        store=given.get("store", True),
        previous_response_id=previous,
        structured=schema is not None,
        echo=echo,
        dropped=dropped,
    )


def _include(value: Any, drop: bool = False) -> list[t.CallWarning]:
    """Check `include`; with `drop`, a value that cannot be honoured is left out instead, with
    a warning naming it."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UnsupportedParameterError("include", "must be a list of strings")
    unknown = [name for name in value if name not in _INCLUDABLE]
    why = "only reasoning.encrypted_content is known (and always included)"
    if unknown and drop:
        return [wire.dropped("include", f"{', '.join(unknown)} cannot be honoured: {why}")]
    if unknown:
        raise UnsupportedParameterError(
            "include", f"{unknown[0]!r} cannot be honoured: {why}; leave the others out"
        )
    return []


def _reasoning_options(reasoning: Any) -> JSON:
    """`reasoning` -> thinking options: `effort` as the provider's effort (`none`: thinking
    off); a `summary` asks for nothing more (the reasoning items carry the model's thinking)."""
    if reasoning is None:
        return {}
    if not isinstance(reasoning, Mapping):
        raise UnsupportedParameterError("reasoning", "must be an object")
    for key, value in reasoning.items():
        if key in ("summary", "generate_summary"):
            if value not in (None, "auto", "concise", "detailed"):
                raise UnsupportedParameterError(
                    f"reasoning.{key}", f"{json.dumps(value)} is not one of auto, concise, detailed"
                )
        elif key != "effort":
            raise UnsupportedParameterError(
                f"reasoning.{key}", "not a reasoning field this server knows; leave it out"
            )
    return wire.effort(reasoning.get("effort"), "reasoning.effort")


def _output_schema(text: Any) -> JSON | None:
    """`text` -> the provider's `output_schema` (None: plain text)."""
    if text is None:
        return None
    if not isinstance(text, Mapping):
        raise UnsupportedParameterError("text", "must be an object")
    for key in text:
        if key not in ("format", "verbosity"):
            raise UnsupportedParameterError(
                f"text.{key}", "not a text field this server knows; leave it out"
            )
    if text.get("verbosity") not in (None, "medium"):
        raise UnsupportedParameterError(
            "text.verbosity",
            f"{json.dumps(text['verbosity'])} cannot be honoured: {_VERBOSITY}; leave it out "
            f"(or send 'medium')",
        )
    spec = text.get("format")
    kind = spec.get("type") if isinstance(spec, Mapping) else None
    return None if spec is None else wire.output_schema(kind, "text.format", spec, "text.format")


# --------------------------------------------------------------------------- input items in


def _items(value: Any) -> list[JSON]:
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    if not isinstance(value, list) or not all(isinstance(i, Mapping) for i in value):
        raise InvalidMessagesError("'input' must be a string or a list of input items (objects)")
    return [dict(item) for item in value]


#: The fields each input item type is read with (besides `type`): `id` and `status` name and
#: describe an item the API gave out, and ask for nothing.
_ITEM_FIELDS: dict[str, frozenset[str]] = {
    "message": frozenset({"role", "content", "id", "status"}),
    "function_call": frozenset({"call_id", "name", "arguments", "id", "status"}),
    "function_call_output": frozenset({"call_id", "output", "id", "status"}),
    "reasoning": frozenset({"summary", "content", "encrypted_content", "id", "status"}),
}
_ROLES = ("user", "assistant", "system", "developer")


def _check_fields(item: Mapping[str, Any], known: frozenset[str], path: str, what: str) -> None:
    for key, value in item.items():
        if key != "type" and key not in known and value not in (None, [], {}, ""):
            raise UnsupportedParameterError(
                f"{path}.{key}", f"not a field of {what} this server knows; leave it out"
            )


def provider_call(
    request: ResponsesRequest, previous: Sequence[Mapping[str, Any]] = ()
) -> tuple[list[req.Message], list[FunctionTool], JSON]:
    """The provider call for `request`: its instructions, the `previous` conversation (the
    items of the response it continues) and its own input as typed messages, with its tools and
    call options. A history with tool calls in a request without `tools` gets the called tools
    defined again, uncallable (`wire.history_tools`)."""
    items = [*previous, *request.items]
    messages = input_messages(items, request.instructions, replayed=len(previous))
    options = dict(request.options)
    return messages, wire.history_tools(messages, list(request.tools), options), options


def input_messages(
    items: Sequence[Mapping[str, Any]], instructions: str | None = None, *, replayed: int = 0
) -> list[req.Message]:
    """Input items -> typed messages: consecutive assistant items (messages, reasoning,
    function calls) are one assistant turn, consecutive function call outputs one tool turn.
    The first `replayed` items are a stored conversation (named so in errors)."""
    messages: list[req.Message] = [req.SystemMessage(instructions)] if instructions else []
    turn: list[req.AssistantPart] = []
    results: list[req.ToolResult] = []

    def close() -> None:
        if turn:
            messages.append(req.AssistantMessage(tuple(turn)))
            turn.clear()
        if results:
            messages.append(req.ToolMessage(tuple(results)))
            results.clear()

    for i, item in enumerate(items):
        path = f"input[{i - replayed}]" if i >= replayed else f"previous_response_id.items[{i}]"
        kind = item.get("type", "message" if "role" in item else None)
        if kind not in _ITEM_FIELDS:
            raise UnsupportedParameterError(
                f"{path}.type",
                f"{kind!r} is not an input item this server reads (message, function_call, "
                f"function_call_output, reasoning, item_reference): {wire.HOSTED}",
            )
        _check_fields(item, _ITEM_FIELDS[kind], path, f"a {kind} item")
        if kind == "function_call_output":
            if turn:
                close()
            results.append(_tool_result(item, path))
            continue
        if results:
            close()
        if kind == "function_call":
            turn.append(_function_call(item, path))
        elif kind == "reasoning":
            turn.extend(_reasoning(item, path))
        elif item.get("role") == "assistant":
            turn.extend(_assistant_content(item.get("content"), path))
        else:
            close()
            started = any(not isinstance(m, req.SystemMessage) for m in messages)
            messages.append(_message(item, path, started=started))
    close()
    return messages


def _message(item: Mapping[str, Any], path: str, *, started: bool) -> req.Message:
    role = item.get("role")
    if role not in _ROLES:
        raise InvalidMessagesError(
            f"{path}: unknown role {role!r}; use user, assistant, system or developer"
        )
    parts = _media(item.get("content"), f"{path}.content")
    if role == "user":
        return req.UserMessage(parts)
    if started:
        raise UnsupportedRequestError(
            f"{path}: a {role} message after the conversation started cannot be kept in its "
            f"place by the CLI (it takes one system prompt); put system and developer "
            f"messages first, or into 'instructions'"
        )
    texts = [p.text for p in parts if isinstance(p, req.Text)]
    if len(texts) != len(parts):
        raise InvalidMessagesError(
            f"{path}: a {role} message holds text only: send input_text parts"
        )
    return req.SystemMessage("\n".join(texts))


def _parts(content: Any, path: str) -> list[Mapping[str, Any]]:
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    if isinstance(content, list) and all(isinstance(p, Mapping) for p in content):
        return list(content)
    raise InvalidMessagesError(f"{path}: content must be a string or a list of content parts")


def _media(content: Any, path: str) -> tuple[req.Text | req.Image, ...]:
    """Text and image parts (a user message's, a function call output's)."""
    found: list[req.Text | req.Image] = []
    for j, part in enumerate(_parts(content, path)):
        kind, here = part.get("type"), f"{path}[{j}]"
        if kind == "input_text" and isinstance(part.get("text"), str):
            _check_fields(part, frozenset({"text"}), here, "an input_text part")
            found.append(req.Text(part["text"]))
        elif kind == "input_image":
            found.append(_image(part, here))
        elif kind in ("input_file", "input_audio"):
            raise UnsupportedParameterError(
                here, f"{kind} cannot be sent here: send the content as text or images"
            )
        else:
            raise wire.part_error(part, here, ("input_text", "input_image"))
    return tuple(found)


def _image(part: Mapping[str, Any], path: str) -> req.Image:
    if part.get("file_id"):
        raise UnsupportedParameterError(
            f"{path}.file_id", "files are not kept here: send the image as a data: URL"
        )
    _check_fields(part, frozenset({"image_url", "detail"}), path, "an input_image part")
    url, detail = part.get("image_url"), part.get("detail")
    if not isinstance(url, str) or not url:
        raise UnsupportedParameterError(
            f"{path}.image_url", "required: the image as a data: URL (or an https URL)"
        )
    wire.image_detail(detail, f"{path}.detail")
    return req.Image(url=url)


def _assistant_content(content: Any, path: str) -> list[req.AssistantPart]:
    texts: list[req.AssistantPart] = []
    for j, part in enumerate(_parts(content, f"{path}.content")):
        kind, here = part.get("type"), f"{path}.content[{j}]"
        key = "refusal" if kind == "refusal" else "text"
        if kind not in ("output_text", "input_text", "refusal") or not isinstance(
            part.get(key), str
        ):
            raise wire.part_error(part, here, ("output_text", "input_text", "refusal"))
        for extra in ("annotations", "logprobs"):  # sent back with every output_text
            if part.get(extra):
                raise UnsupportedParameterError(
                    f"{here}.{extra}",
                    f"{extra} describe an answer's text and cannot be sent "
                    f"back to the model; leave them out",
                )
        _check_fields(part, frozenset({key, "annotations", "logprobs"}), here, f"a {kind} part")
        if part[key]:  # an empty text says nothing the API would accept
            texts.append(req.Text(part[key]))
    return texts


def _function_call(item: Mapping[str, Any], path: str) -> req.ToolCall:
    call_id, name, raw = item.get("call_id"), item.get("name"), item.get("arguments")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidMessagesError(f"{path}: a function_call needs its 'call_id'")
    if not isinstance(name, str) or not name:
        raise InvalidMessagesError(f"{path}: a function_call needs its 'name'")
    return req.ToolCall(call_id, name, wire.arguments(raw, path))


def _tool_result(item: Mapping[str, Any], path: str) -> req.ToolResult:
    call_id, output = item.get("call_id"), item.get("output")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidMessagesError(f"{path}: a function_call_output needs its 'call_id'")
    return req.ToolResult(call_id, wire.tool_output(_media(output, f"{path}.output")))


#: `encrypted_content` of the reasoning items given out here: signed thinking, or a redacted
#: block's data. Anything else is no thinking the model could verify.
_SIGNED, _REDACTED = "thinking:", "redacted_thinking:"


def _reasoning(item: Mapping[str, Any], path: str) -> list[req.Reasoning]:
    texts: list[str] = []
    for key, kind in (("content", "reasoning_text"), ("summary", "summary_text")):
        parts = item.get(key) or []
        if not isinstance(parts, list) or not all(
            isinstance(p, Mapping) and p.get("type") == kind and isinstance(p.get("text"), str)
            for p in parts
        ):
            raise InvalidMessagesError(f"{path}.{key}: must be a list of {kind} parts")
        if not texts:  # the reasoning's own text, else its summary
            texts = [p["text"] for p in parts]
    text, sealed = "\n\n".join(texts), item.get("encrypted_content")
    if isinstance(sealed, str) and sealed.startswith(_REDACTED):
        return [req.Reasoning("", redacted=sealed.removeprefix(_REDACTED))]
    if isinstance(sealed, str) and sealed.startswith(_SIGNED):
        return [req.Reasoning(text, signature=sealed.removeprefix(_SIGNED))]
    # Unsigned reasoning (or another model's): replayed as text, with a warning.
    return [req.Reasoning(text)] if text else []


# --------------------------------------------------------------------------- answers out


def response_id() -> str:
    """A new response id."""
    return f"resp_{uuid.uuid4().hex}"


#: The prefix of each item type's ids, as OpenAI writes them.
_ID_PREFIXES = {
    "message": "msg",
    "function_call": "fc",
    "function_call_output": "fco",
    "reasoning": "rs",
}
#: An item id given out here: its type's prefix, the hex of the response it belongs to, and its
#: place there (`in` for an input item).
_ITEM_ID = re.compile(r"[a-z]+_([0-9a-f]{32})_(?:in)?[0-9]+")


def item_id(response: str, kind: str, index: int, *, given: bool = False) -> str:
    """The id of the item at `index` of response `response`'s output (`given`: of its input).
    An id names the response it belongs to, so a store finds it by its response's id
    (`item_response`): stable, and visible only to whoever may read that response."""
    place = f"in{index}" if given else str(index)
    return f"{_ID_PREFIXES.get(kind, 'item')}_{response.removeprefix('resp_')}_{place}"


def item_response(item: str) -> str | None:
    """The id of the response the item id `item` belongs to (None: not an id given out here)."""
    found = _ITEM_ID.fullmatch(item)
    return f"resp_{found[1]}" if found else None


def numbered_input(response: str, items: Sequence[Mapping[str, Any]]) -> list[JSON]:
    """`items`, the input of response `response`, each with an id: its own if it came with
    one (an item sent back, a reference resolved), else the one it gets here (`item_id`)."""
    return [
        dict(item)
        if item.get("id")
        else {**item, "id": item_id(response, str(item.get("type", "message")), i, given=True)}
        for i, item in enumerate(items)
    ]


def input_item_list(items: Sequence[Mapping[str, Any]], query: Sequence[tuple[str, str]]) -> JSON:
    """`GET /v1/responses/{id}/input_items`: a page of `items` (a stored response's input, each
    with its id) as OpenAI lists them, by the query's `order` (`desc` unless `asc`), `limit`
    (1 to 100, 20 unless given) and `after` (the id of the item the page starts after)."""
    given: dict[str, str] = {}
    for name, value in query:
        if name in ("include", "include[]"):
            _include([value])
        elif name in ("order", "limit", "after"):
            given[name] = value
        else:
            raise UnsupportedParameterError(
                name, "not a query parameter of input_items (order, limit, after, include)"
            )
    order = given.get("order", "desc")
    if order not in ("asc", "desc"):
        raise UnsupportedParameterError("order", f"{order!r} is not one of asc, desc")
    limit = given.get("limit", "20")
    if not limit.isdigit() or not 1 <= int(limit) <= 100:
        raise UnsupportedParameterError("limit", f"{limit!r} is not an integer from 1 to 100")
    listed = [_listed(item) for item in (items if order == "asc" else reversed(items))]
    if "after" in given:
        ids = [item["id"] for item in listed]
        if given["after"] not in ids:
            raise UnsupportedParameterError(
                "after", f"{given['after']!r} is not an input item of this response"
            )
        listed = listed[ids.index(given["after"]) + 1 :]
    page = listed[: int(limit)]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": len(listed) > len(page),
    }


def stored_response_query(query: Sequence[tuple[str, str]]) -> None:
    """Check the query of `GET /v1/responses/{id}`: `include` (every response holds the
    encrypted reasoning already); `stream` only false, since only a background response can be
    streamed again, and none is run here. Any other parameter is refused by name."""
    for name, value in query:
        if name == "stream" and value.lower() != "false":
            raise UnsupportedParameterError(
                "stream",
                f"{value!r} cannot be honoured: only a background response can be streamed "
                f"again, and background responses are not run here; GET it without stream",
            )
    for name, value in query:
        if name in ("include", "include[]"):
            _include([value])
        elif name != "stream":
            raise UnsupportedParameterError(
                name,
                "not a query parameter of GET /v1/responses/{id} this server honours (include, "
                "stream false; starting_after and include_obfuscation only go with stream)",
            )


def _listed(item: Mapping[str, Any]) -> JSON:
    """An input item as the API lists it: a message's text content as a content part."""
    content = item.get("content")
    if item.get("type", "message") != "message" or not isinstance(content, str):
        return {"type": "message", **item} if "role" in item else dict(item)
    kind = "output_text" if item.get("role") == "assistant" else "input_text"
    return {"type": "message", **item, "content": [{"type": kind, "text": content}]}


def reference(item: Mapping[str, Any], path: str) -> str | None:
    """The item id an `item_reference` input item names (its `type` may be left out, as in
    OpenAI's API); None: `item` is no reference."""
    kind = item.get("type")
    if kind != "item_reference" and (kind is not None or "role" in item or "id" not in item):
        return None
    _check_fields(item, frozenset({"id"}), path, "an item_reference")
    named = item.get("id")
    if not isinstance(named, str) or not named:
        raise InvalidMessagesError(f"{path}: an item_reference needs the 'id' of a stored item")
    return named


def _output_text(text: str) -> JSON:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _message_item(item_id: str, text: str | None) -> JSON:
    content = [] if text is None else [_output_text(text)]
    return {
        "id": item_id,
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": content,
    }


def _call_item(item_id: str, call_id: str, name: str, arguments: str) -> JSON:
    return {
        "id": item_id,
        "type": "function_call",
        "status": "completed",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }


def _reasoning_item(item_id: str, text: str, signature: str | None, redacted: str | None) -> JSON:
    item: JSON = {"id": item_id, "type": "reasoning", "summary": []}
    if text:
        item["summary"] = [{"type": "summary_text", "text": text}]
    if redacted:
        item["encrypted_content"] = _REDACTED + redacted
    elif signature:
        item["encrypted_content"] = _SIGNED + signature
    return item


def _arguments(arguments: Mapping[str, Any]) -> str:
    return json.dumps(arguments, ensure_ascii=False)


def output_items(
    result: t.GenerateResult, *, response: str, structured: bool = False
) -> list[JSON]:
    """The output items of a `GenerateResult`, in the order the model wrote them: reasoning,
    one message per text block, and the function calls the client must run; their ids are
    those of response `response` (`item_id`). With `structured`, the only message is the
    structured output (none when the model calls tools instead; the model's words when it
    declined: `declined`), as `EventMapper` streams it."""
    structured = structured and not declined(result.finish_reason)
    items: list[JSON] = []

    def next_id(kind: str) -> str:
        return item_id(response, kind, len(items))

    if structured and result.structured_output is not None:
        for r in result.final_reasoning:
            items.append(_reasoning_item(next_id("reasoning"), r.text, r.signature, r.redacted))
        text = json.dumps(result.structured_output, ensure_ascii=False)
        return [*items, _message_item(next_id("message"), text)]
    handed_back = {c.tool_call_id for c in result.tool_calls if not c.provider_executed}
    for message in result.response_messages:
        for block in message["content"] if message["role"] == "assistant" else []:
            kind = block["type"]
            if kind == "text" and not structured:
                items.append(_message_item(next_id("message"), block["text"]))
            elif kind == "reasoning":
                signature, redacted = block.get("signature"), block.get("redacted")
                sealed = _reasoning_item(next_id("reasoning"), block["text"], signature, redacted)
                items.append(sealed)
            elif kind == "tool-call" and block["tool_call_id"] in handed_back:
                call_id, name = block["tool_call_id"], block["tool_name"]
                arguments = _arguments(block["input"])
                items.append(_call_item(next_id("function_call"), call_id, name, arguments))
    return items


def _usage(usage: t.Usage) -> JSON:
    """Usage in the Responses API's shape: input tokens include cache reads and writes."""
    return {
        "input_tokens": usage.input_total,
        "input_tokens_details": {
            "cached_tokens": usage.cache_read_input_tokens,
            "cache_write_tokens": usage.cache_creation_input_tokens,
        },
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.total_tokens,
    }


#: Finish reasons that leave a response incomplete, and the reason it gives.
_INCOMPLETE: dict[t.FinishReason, str] = {
    "length": "max_output_tokens",
    "content-filter": "content_filter",
}


def response_object(
    request: ResponsesRequest,
    *,
    id: str,
    model: str,
    created_at: int,
    output: list[JSON],
    finish: t.FinishReason | None = None,
    usage: t.Usage | None = None,
    error: JSON | None = None,
) -> JSON:
    """A `response` object: in progress (no `finish`), completed (now: `completed_at`) or
    incomplete (by `finish`), or failed (`error`: `{"code", "message"}`)."""
    if error is not None:
        status = "failed"
    elif finish is None:
        status = "in_progress"
    else:
        status = "incomplete" if finish in _INCOMPLETE else "completed"
    reason = _INCOMPLETE.get(finish) if finish is not None else None
    return {
        "id": id,
        "object": "response",
        "created_at": created_at,
        "completed_at": int(time.time()) if status == "completed" else None,
        "status": status,
        "background": False,
        "error": error,
        "incomplete_details": {"reason": reason} if reason else None,
        "model": model,
        "output": output,
        "service_tier": "default",
        "store": request.store,
        "truncation": "disabled",
        "usage": None if usage is None else _usage(usage),
        **request.echo,
    }


#: How each output item type streams its text: the prefix of its delta and done events, and
#: the part the text is written into (none: the item itself), with that part's index field.
_STREAMS: dict[str, tuple[str, str | None, str | None]] = {
    "message": ("response.output_text", "response.content_part", "content_index"),
    "reasoning": (
        "response.reasoning_summary_text",
        "response.reasoning_summary_part",
        "summary_index",
    ),
    "function_call": ("response.function_call_arguments", None, None),
}


class EventMapper:
    """Stream parts -> the Responses API's stream events, numbered, from `response.created` to
    `response.completed` / `response.incomplete` (`finish`) or `response.failed` (`failed`).

    Each text block is a message item, each reasoning block a reasoning item (its text as a
    summary part), each call to hand back a function_call item, in the order they come; text
    opens its item with its first delta (a block that says nothing is no item). With
    `structured`, the answer is one message holding the structured output as JSON, at the end.
    `response` is the response object as it stands.
    """

    def __init__(
        self, request: ResponsesRequest, *, id: str, model: str, created_at: int | None = None
    ) -> None:
        self.request = request
        self._frame: JSON = {"id": id, "model": model, "created_at": created_at or int(time.time())}
        self.output: list[JSON] = []
        self.response = response_object(request, output=[], **self._frame)
        self._number = 0
        self._items: dict[str, _Item] = {}  # part id -> the item it writes, while open
        self._blocks = Blocks(remedy=wire.RESEND, structured=request.structured)
        self._finish: t.FinishPart | None = None

    def start(self) -> list[JSON]:
        """`response.created` and `response.in_progress`."""
        return [
            self._event(f"response.{s}", response=self.response) for s in ("created", "in_progress")
        ]

    def add(self, part: t.StreamPart) -> list[JSON]:
        """The events one part becomes (often none)."""
        if isinstance(part, t.FinishPart):
            self._finish = part
        return [e for event in self._blocks.add(part) for e in self._events(event)]

    def _events(self, event: BlockEvent) -> list[JSON]:
        match event:
            case Start(block=Block(kind="text") as block):
                return self._open(block.id, _message_item(self._next_id("message"), None))
            case Start(block=Block(kind="reasoning") as block):
                return self._open(
                    block.id, _reasoning_item(self._next_id("reasoning"), "", None, None)
                )
            case Start(block=block):
                return self._open(
                    block.id, _call_item(self._next_id("function_call"), block.id, block.name, "")
                )
            case Delta(block=block):
                return self._write(block.id, event.delta)
            case End(block=block):
                return self._close(block.id, signature=block.signature, redacted=block.redacted)
        return []  # the provider raises right after an error part; no call has an executor

    def finish(self) -> JSON:
        """The last event: `response.completed`, or `response.incomplete` (max output tokens,
        content filter); `response` is then the complete response object."""
        finish = self._finish
        self.response = response_object(
            self.request,
            output=list(self.output),
            finish=finish.finish_reason if finish else "other",
            usage=finish.usage if finish else t.Usage(),
            **self._frame,
        )
        return self._event(f"response.{self.response['status']}", response=self.response)

    def failed(self, code: str, message: str, param: str | None = None) -> list[JSON]:
        """The events of a response that failed after its stream began: `error`, then
        `response.failed` with the response as it stood."""
        error = {"code": code, "message": message}
        self.response = response_object(
            self.request, output=list(self.output), error=error, **self._frame
        )
        return [
            self._event("error", code=code, message=message, param=param),
            self._event("response.failed", response=self.response),
        ]

    def _event(self, kind: str, of: _Item | None = None, /, **fields: Any) -> JSON:
        """An event, numbered; `of`: about that item's content (its id and index)."""
        self._number += 1
        at = {} if of is None else {"item_id": of.body["id"], "output_index": of.index}
        return {"type": kind, "sequence_number": self._number - 1, **at, **fields}

    def _next_id(self, kind: str) -> str:
        """The id of the next item to open (`_open` puts it at the end of the output)."""
        return item_id(self._frame["id"], kind, len(self.output))

    def _open(self, part_id: str, body: JSON) -> list[JSON]:
        body["status"] = "in_progress"
        self._items[part_id] = _Item(body, len(self.output))
        self.output.append(body)
        return [
            self._event("response.output_item.added", output_index=len(self.output) - 1, item=body)
        ]

    def _write(self, part_id: str, delta: str) -> list[JSON]:
        """A delta of the item `part_id` writes, opening its text part first."""
        events = []
        item = self._items[part_id]
        prefix, text_part, index = _STREAMS[item.body["type"]]
        where = {index: 0} if index else {}
        if text_part and not item.chunks:
            events.append(self._event(f"{text_part}.added", item, **where, part=item.text_part("")))
        item.chunks.append(delta)
        logprobs: JSON = {"logprobs": []} if item.body["type"] == "message" else {}
        return [*events, self._event(f"{prefix}.delta", item, **where, delta=delta, **logprobs)]

    def _close(self, part_id: str, **final: Any) -> list[JSON]:
        """The item `part_id` done: its text, its text part and itself, whole."""
        item = self._items.pop(part_id)
        kind, text = item.body["type"], "".join(item.chunks)
        prefix, text_part, index = _STREAMS[kind]
        where = {index: 0} if index else {}
        if kind == "message":
            body, done = _message_item(item.body["id"], text), {"text": text, "logprobs": []}
        elif kind == "reasoning":
            body = _reasoning_item(item.body["id"], text, final["signature"], final["redacted"])
            done = {"text": text}
        else:
            body = _call_item(item.body["id"], item.body["call_id"], item.body["name"], text)
            done = {"arguments": text, "name": item.body["name"]}
        events = []
        if item.chunks:
            events.append(self._event(f"{prefix}.done", item, **where, **done))
            if text_part:
                events.append(
                    self._event(f"{text_part}.done", item, **where, part=item.text_part(text))
                )
        self.output[item.index] = body
        return [
            *events,
            self._event("response.output_item.done", output_index=item.index, item=body),
        ]


@dataclass
class _Item:
    """An output item being streamed: its body as added, its index, what it has said so far."""

    body: JSON
    index: int
    chunks: list[str] = field(default_factory=list)

    def text_part(self, text: str) -> JSON:
        """The part its text is written into (a message's output_text, a summary_text)."""
        if self.body["type"] == "message":
            return _output_text(text)
        return {"type": "summary_text", "text": text}
