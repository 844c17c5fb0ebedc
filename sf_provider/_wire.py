"""What the wire formats read and write alike: the Messages API's thinking blocks (which LiteLLM's
`thinking_blocks` carry on the OpenAI side too), a tool result's content as its output, the
sampling settings and what `drop_params` says of them, the hint of a stream taken back, and what
OpenAI's two formats (Chat Completions and Responses) read alike: the parameters they know (and
those accepted only at the value that asks for nothing), `tool_choice`, a JSON-schema output
format, reasoning effort, a call's arguments, an image's detail, the tools a history calls, and
the error of a content part of the wrong type or without its text (`part_error`).

Imports neither `provider` nor a wire-format module: they import it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from ._messages import IMAGE_DETAIL, NO_LOW_DETAIL, TOOLS_NEEDED
from ._request import AssistantMessage, Image, Message, Reasoning, Text, ToolCall, holds_tool_blocks
from ._tool_choice import NamedToolChoice, ToolChoice, offered_tools
from .errors import InvalidMessagesError, UnsupportedRequestError
from .settings import EFFORT_NAMES
from .tools import FunctionTool, tools_from_specs
from .types import CallWarning

__all__ = [
    "HOSTED",
    "RESEND",
    "SAMPLING",
    "UnsupportedParameterError",
    "arguments",
    "asks_nothing",
    "dropped",
    "effort",
    "function_tools",
    "history_tools",
    "image_detail",
    "known_parameters",
    "model_option",
    "output_schema",
    "part_error",
    "reasoning",
    "sampling",
    "stream_options",
    "thinking_block",
    "tool_choice",
    "tool_output",
]


class UnsupportedParameterError(UnsupportedRequestError):
    """A request parameter of an OpenAI-shaped API the provider cannot honour; `param` names
    it (the error body's `param`)."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(f"parameter {param!r}: {message}")
        self.param = param


#: What a client whose stream was taken back after it was sent (`SentParts.discard`) can do.
RESEND = "send the request again (without stream, the redo is folded in correctly)"


def thinking_block(text: str, signature: str | None, redacted: str | None) -> dict[str, Any]:
    """Reasoning as the Messages API's block to replay: `redacted_thinking` with its data, or
    signed `thinking` ({} for unsigned reasoning, which cannot be replayed as thinking)."""
    if redacted:
        return {"type": "redacted_thinking", "data": redacted}
    if signature:
        return {"type": "thinking", "thinking": text, "signature": signature}
    return {}


def reasoning(block: Mapping[str, Any], where: str) -> Reasoning:
    """A `thinking` or `redacted_thinking` block (checked to be one of them by the caller) as a
    `Reasoning` part; a redacted block needs its data."""
    if block.get("type") == "redacted_thinking":
        data = block.get("data")
        if not isinstance(data, str) or not data:
            raise InvalidMessagesError(f"{where}: a redacted_thinking block needs its 'data'")
        return Reasoning("", redacted=data)
    signature = block.get("signature")
    return Reasoning(
        str(block.get("thinking", "")),
        signature if isinstance(signature, str) and signature else None,
    )


# --------------------------------------------------------------------------- OpenAI's formats


#: Why a tool type of OpenAI's other than `function` (a hosted tool) is refused.
HOSTED = "hosted tools are not offered here (only 'function' tools, which the client runs)"
#: Why OpenAI's `custom` tool (client-run, with free-form text input) is refused.
_CUSTOM = (
    "a custom tool takes free-form text, which the Messages API cannot ask a model for: define "
    "it as a 'function' tool with a string parameter"
)


def asks_nothing(value: Any, allowed: tuple[Any, ...]) -> bool:
    """Whether `value` is one of `allowed`, the values of a parameter that ask for nothing (a
    list as the tuple, a number as any number equal to it, but no bool)."""
    if isinstance(value, list):
        value = tuple(value)
    return any(type(value) is type(a) and value == a for a in allowed) or (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and any(isinstance(a, int | float) and not isinstance(a, bool) and value == a
                for a in allowed)
    )  # fmt: skip


def known_parameters(
    given: dict[str, Any],
    what: str,
    read: Collection[str],
    only_default: Mapping[str, tuple[tuple[Any, ...], str]],
    drop: Collection[str] = (),
) -> list[CallWarning]:
    """Refuse a parameter of `given` (the request body without nulls) that is neither `read`
    nor, at a value that asks for nothing (`asks_nothing`), in `only_default` (the values and
    why any other cannot be honoured), naming it; `what` is what it is not ("a Chat Completions
    parameter"). The sampling settings and an `only_default` value named in `drop`
    (`drop_params`) are taken out of `given` instead, each with its `dropped` warning."""
    warnings: list[CallWarning] = []
    for name, value in list(given.items()):
        if name in SAMPLING and name in drop:
            warnings.append(dropped(name))
            del given[name]
        elif name in only_default:
            allowed, reason = only_default[name]
            if asks_nothing(value, allowed):
                continue
            if name not in drop:
                raise UnsupportedParameterError(
                    name, f"{json.dumps(value)} cannot be honoured: {reason}; leave it out"
                )
            warnings.append(dropped(name, reason))
            del given[name]
        elif name not in read:
            raise UnsupportedParameterError(name, f"not {what} this server knows; leave it out")
    return warnings


def model_option(body: Mapping[str, Any]) -> dict[str, Any]:
    """The `model` a request names, as the call option (none named: the provider's)."""
    model = body.get("model")
    if model is None:
        return {}
    if not isinstance(model, str) or not model.strip():
        raise UnsupportedParameterError("model", "must be a model name (a string)")
    return {"model": model}


def stream_options(value: Any, stream: Any, known: tuple[str, ...] = ()) -> Mapping[str, Any]:
    """`stream_options`, sent only with `stream`, of the `known` fields (and
    `include_obfuscation`, which asks for nothing: events are never obfuscated)."""
    if value is None:
        return {}
    if not stream:
        raise UnsupportedParameterError(
            "stream_options", "is only allowed when 'stream' is true; leave it out or stream"
        )
    known = (*known, "include_obfuscation")
    if not isinstance(value, Mapping) or set(value) - set(known):
        raise UnsupportedParameterError(
            "stream_options", f"an object of {', '.join(known)} only (none other is known)"
        )
    return value


def function_tools(tools: Any, *, nested: bool) -> list[FunctionTool]:
    """OpenAI function tools (`nested`: Chat Completions' `{"type": "function", "function":
    {...}}`; else the Responses API's, flat) -> `FunctionTool`s without executors (the client
    runs them), by the tool layer's one rule (`tool_from_spec`), each error naming the tool."""
    if not isinstance(tools, Sequence) or isinstance(tools, str | bytes):
        raise UnsupportedParameterError("tools", "must be a list of function tools")
    specs = []
    for i, tool in enumerate(tools):
        kind = tool.get("type") if isinstance(tool, Mapping) else None
        if kind != "function":
            why = _CUSTOM if kind == "custom" else HOSTED
            problem = f"type {kind!r} cannot be offered: {why}"
            raise UnsupportedParameterError(f"tools[{i}]", problem)
        flat = {"parameters": None, **{k: v for k, v in tool.items() if k != "type"}}
        specs.append(tool if nested else flat)  # flat with no parameters: no arguments
    try:
        return tools_from_specs(specs)
    except UnsupportedRequestError as exc:
        raise UnsupportedParameterError("tools", str(exc)) from None


def tool_choice(
    tools: list[FunctionTool], choice: Any, *, nested: bool
) -> tuple[list[FunctionTool], ToolChoice]:
    """The tools to offer for OpenAI's `tool_choice` and the provider's choice (what it means:
    `_tool_choice.offered_tools`): only those `allowed_tools` lists are offered, since the model
    cannot call a tool it is not shown. `nested`: Chat Completions' forms, a function named in
    `{"function": {"name"}}` and the `allowed_tools` object under its own key; else the
    Responses API's, flat."""
    where = "tool_choice.allowed_tools" if nested else "tool_choice"
    function = "{'type': 'function', 'function': {'name': ...}}" if nested else (
        "{'type': 'function', 'name': ...}"
    )  # fmt: skip
    kind = choice.get("type") if isinstance(choice, Mapping) else None
    allowed: list[str] | None = None
    if choice in ("auto", "none", "required"):
        chosen: ToolChoice = choice
    elif kind == "function" and (name := _function_name(choice, nested)):
        chosen = NamedToolChoice(name=name)
    elif kind == "allowed_tools":
        spec = choice.get("allowed_tools") if nested else {**choice, "type": None}
        if not isinstance(spec, Mapping) or {k for k, v in spec.items() if v} - {"mode", "tools"}:
            raise UnsupportedParameterError(
                where, "must be {'mode': 'auto' | 'required', 'tools': [...]}"
            )
        mode, listed = spec.get("mode"), spec.get("tools")
        if mode not in ("auto", "required"):
            raise UnsupportedParameterError(
                f"{where}.mode", f"{json.dumps(mode)} is not 'auto' or 'required'"
            )
        chosen = mode
        if not isinstance(listed, list):
            raise UnsupportedParameterError(f"{where}.tools", "must be a non-empty list of tools")
        allowed = [_function_name(tool, nested) or "" for tool in listed]
        if "" in allowed:
            i = allowed.index("")
            raise UnsupportedParameterError(f"{where}.tools[{i}]", f"must be {function}")
    else:
        hosted = f"type {kind!r} cannot be chosen: only function tools are offered here. " if (
            isinstance(kind, str) and kind not in ("function", "allowed_tools")
        ) else ""  # fmt: skip
        raise UnsupportedParameterError(
            "tool_choice",
            f"{hosted}{json.dumps(choice)} is not one of 'auto', 'none', 'required', {function} "
            f"or {{'type': 'allowed_tools', ...}}",
        )
    try:
        return offered_tools(tools, chosen, allowed=allowed), chosen
    except UnsupportedRequestError as exc:
        raise UnsupportedParameterError(
            "tool_choice" if allowed is None else where, str(exc)
        ) from None


def _function_name(tool: Any, nested: bool) -> str | None:
    """The name of `{"type": "function", ...}` (`nested`: in its `function` object)."""
    if not isinstance(tool, Mapping) or tool.get("type") != "function":
        return None
    named = tool.get("function") if nested else tool
    name = named.get("name") if isinstance(named, Mapping) else None
    return name if isinstance(name, str) and name else None


#: The fields of a `json_schema` output format: `strict` holds anyway (the CLI checks the
#: answer against the schema), `name` and `description` go into the schema the model is shown.
_JSON_SCHEMA_FIELDS = ("name", "description", "schema", "strict")


def output_schema(kind: Any, path: str, spec: Any, spec_path: str) -> dict[str, Any] | None:
    """An OpenAI output format (its `kind`, the format at `path`; a `json_schema` one's fields
    in `spec`, at `spec_path`) as the provider's `output_schema` (None: plain text).

    A JSON schema's `name` and `description`, which OpenAI shows the model to say what the
    answer is for, go into the schema as its `title` and `description`: the CLI offers the
    model only the schema (as its StructuredOutput tool's input)."""
    if kind == "text":
        return None
    if kind == "json_object":
        # JSON mode promises a JSON object, any object: a schema that admits every one.
        return {"type": "object"}
    if kind != "json_schema":
        raise UnsupportedParameterError(
            path, f"type {kind!r} is not one of text, json_object, json_schema"
        )
    if not isinstance(spec, Mapping) or not isinstance(spec.get("schema"), Mapping):
        raise UnsupportedParameterError(f"{spec_path}.schema", "required: a JSON Schema object")
    known = {*_JSON_SCHEMA_FIELDS, "type"} if path == spec_path else _JSON_SCHEMA_FIELDS
    unknown = sorted(k for k, v in spec.items() if k not in known and v is not None)
    if unknown:
        raise UnsupportedParameterError(
            f"{spec_path}.{unknown[0]}",
            f"not a json_schema field this server knows; send {', '.join(_JSON_SCHEMA_FIELDS)}",
        )
    name, description = spec.get("name"), spec.get("description")
    for key, value in (("name", name), ("description", description)):
        if value is not None and not isinstance(value, str):
            raise UnsupportedParameterError(f"{spec_path}.{key}", "must be a string")
    schema = dict(spec["schema"])
    if name and "title" not in schema:
        schema["title"] = name
    own = schema.get("description")
    if description and not own:
        schema["description"] = description
    elif description and own != description:
        schema["description"] = f"{description}\n\n{own}"
    return schema


def effort(value: Any, param: str) -> dict[str, Any]:
    """OpenAI's reasoning effort as call options: `none` turns thinking off, `default`
    (LiteLLM's) asks for nothing, the others are `EFFORT_NAMES` (OpenAI's and LiteLLM's)."""
    if value is None or value == "default":
        return {}
    if value == "none":
        return {"thinking": "disabled"}
    if not isinstance(value, str) or value not in EFFORT_NAMES:
        raise UnsupportedParameterError(
            param, f"{value!r} is not one of none, default, {', '.join(EFFORT_NAMES)}"
        )
    return {"effort": EFFORT_NAMES[value]}


def arguments(raw: Any, where: str) -> dict[str, Any]:
    """A function call's `arguments` (JSON text; an object as it is): nothing is `{}`."""
    if isinstance(raw, Mapping):
        return dict(raw)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    try:
        found = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        found = None
    except RecursionError:
        raise InvalidMessagesError(
            f"{where}: 'arguments' is JSON nested too deeply to read; flatten it"
        ) from None
    if not isinstance(found, dict):
        raise InvalidMessagesError(f"{where}: 'arguments' must be a JSON object, as JSON text")
    return found


def part_error(part: Mapping[str, Any], where: str, kinds: tuple[str, ...]) -> InvalidMessagesError:
    """The error of a content part whose type is not one of `kinds`, or of one of them without
    its text (`refusal` for a refusal part, else `text`)."""
    kind = part.get("type")
    if kind in kinds:
        key = "refusal" if kind == "refusal" else "text"
        return InvalidMessagesError(f"{where}: {kind!r} parts need {key!r} as a string")
    *others, last = map(repr, kinds)
    named = f"{', '.join(others)} or {last}" if others else last
    return InvalidMessagesError(f"{where}: a content part here must be {named}, not {kind!r}")


def tool_output(parts: Sequence[Text | Image]) -> str | tuple[Text | Image, ...]:
    """A tool result's content parts as its `ToolResult.output`: one text part as its text,
    none as "", several as the blocks they are (each reaches the model as sent)."""
    if len(parts) == 1 and isinstance(parts[0], Text):
        return parts[0].text
    return tuple(parts) or ""


def image_detail(detail: Any, path: str) -> None:
    """Refuse an image's `detail` that cannot be honoured (`IMAGE_DETAIL`)."""
    if detail == "low":
        raise UnsupportedParameterError(path, NO_LOW_DETAIL)
    if detail is not None and detail not in IMAGE_DETAIL:
        raise UnsupportedParameterError(path, f"{json.dumps(detail)} is not one of auto, high, low")


def history_tools(
    messages: Sequence[Message], tools: list[FunctionTool], options: dict[str, Any]
) -> list[FunctionTool]:
    """The tools to offer: `tools`, or for a request without tools whose history holds tool
    calls, the tools it calls, defined again (with `options`' tool_choice set to "none"). The
    Messages API refuses tool calls in a request that defines no tools, and OpenAI's API takes
    them (AutoGen's reflection after a tool call sends the calls and results without `tools`).
    The provider then tells the model to answer in text and refuses a call; their schemas are
    unknown here and admit any arguments."""
    if tools or not holds_tool_blocks(messages):
        return tools
    names = dict.fromkeys(
        part.name
        for message in messages
        if isinstance(message, AssistantMessage)
        for part in message.parts
        if isinstance(part, ToolCall)
    )
    if not names or options.get("tool_choice", "none") not in ("auto", "none"):
        raise UnsupportedParameterError("tools", TOOLS_NEEDED)
    options["tool_choice"] = "none"
    later = "Called earlier in this conversation; not available for this reply."
    return [FunctionTool(name, later, {"type": "object"}) for name in names]


#: The sampling settings: sent as written (ADR 0009), so the model and the API version judge them.
SAMPLING = ("temperature", "top_p", "top_k")


def sampling(body: Mapping[str, Any], refuse: Callable[[str, str], Exception]) -> dict[str, Any]:
    """The sampling settings of a request body as call options; one that is not a number
    (`top_k`: an integer) raises `refuse(name, problem)`. Their values are the API's to judge."""
    settings: dict[str, Any] = {}
    for name in SAMPLING:
        value = body.get(name)
        if value is None:
            continue
        integer = name == "top_k"
        if isinstance(value, bool) or not isinstance(value, int if integer else float | int):
            raise refuse(name, "must be an integer" if integer else "must be a number")
        settings[name] = value
    return settings


def dropped(name: str, why: str = "") -> CallWarning:
    """The `parameter-dropped` warning for a parameter `drop_params` left out (LiteLLM's, or the
    gateway's `--drop-params`)."""
    return CallWarning(
        code="parameter-dropped",
        message=f"the parameter {name!r} was dropped (drop_params) and did not reach the model"
        + (f": {why}" if why else ""),
    )
