"""The tool contract: `FunctionTool`, schema normalisation and name rules."""

from __future__ import annotations

import base64
import binascii
import contextvars
import dataclasses
import functools
import inspect
import math
import re
import threading
import warnings
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, get_type_hints

import jsonschema
import referencing
import referencing.jsonschema
from jsonschema.exceptions import SchemaError
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PydanticUserError,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from referencing.exceptions import InvalidAnchor, NoSuchAnchor, PointerToNowhere, Unresolvable

from ._patterns import pattern_problem, validator_class
from ._text import clip
from .errors import (
    DuplicateToolNameError,
    InvalidToolNameError,
    InvalidToolSchemaError,
    ToolDefinitionError,
    UnsupportedRequestError,
)

if TYPE_CHECKING:
    from .gates import CallContext, Gate

__all__ = [
    "Executor",
    "FunctionTool",
    "RunningCall",
    "ToolOutput",
    "ToolSpec",
    "current_call",
    "normalize_input_schema",
    "tool_from_spec",
    "tools_from_specs",
    "validate_tool_set",
]

#: What an executor is: a sync or async callable taking the validated arguments as a dict.
#: A sync one runs in a daemon thread of its own; `current_call()` tells it when to stop.
Executor = Callable[[dict[str, Any]], Any] | Callable[[dict[str, Any]], Awaitable[Any]]


@dataclasses.dataclass(frozen=True, eq=False)
class RunningCall:
    """The tool call an executor is running, as `current_call()` gives it.

    `cancelled` is set when the call is given up: its timeout expired, the query or the caller
    was cancelled, or the query was stopped. An async executor is cancelled by anyio as well; a
    sync one runs in a thread, which nothing can stop from outside, so a long-running sync
    executor should check the event (or wait on it instead of sleeping) and return early. Its
    result is discarded anyway.

    Example::

        def crawl(arguments):
            call = current_call()
            for url in arguments["urls"]:
                if call is not None and call.cancelled.is_set():
                    return "stopped"
                fetch(url)
            return "done"
    """

    tool: FunctionTool
    context: CallContext
    cancelled: threading.Event = dataclasses.field(default_factory=threading.Event)


_CURRENT_CALL: contextvars.ContextVar[RunningCall | None] = contextvars.ContextVar(
    "sf_provider_current_call", default=None
)


def current_call() -> RunningCall | None:
    """The tool call this executor or safety gate runs (in its thread or task); None outside
    one."""
    return _CURRENT_CALL.get()


# The Messages API accepts tool names matching ^[a-zA-Z0-9_-]{1,64}$ and the model sees
# `mcp__<bridge>__<name>`, so the app's name must fit in what the prefix leaves.
API_NAME_LIMIT = 64
_NAME_RE = re.compile(rf"^[a-zA-Z0-9_-]{{1,{API_NAME_LIMIT}}}$")

#: How deeply a tool schema may nest (objects and arrays; a property of a property is 4 levels
#: down). jsonschema checks a schema recursively, ~5 stack frames a level, so this keeps the
#: check well inside Python's default recursion limit of 1000 wherever the tool is built.
SCHEMA_DEPTH_LIMIT = 100

#: How deeply a call's arguments may nest (the model's, or a caller's): deeper ones are refused
#: before any schema check, as the envelope parser refuses deeper replies. Pydantic serializes
#: about 250 levels, so a call part holding deeper arguments could not be dumped as JSON.
ARGUMENT_DEPTH_LIMIT = 200

#: How many JSON values (objects, arrays, strings, numbers...) one tool schema may hold, and how
#: many properties one of its objects may list. Checking a schema costs ~0.1 ms a value, so a
#: schema at the limit is checked in about a second (off the gateway's event loop).
SCHEMA_VALUE_LIMIT = 10_000
SCHEMA_PROPERTY_LIMIT = 1_000


class ToolOutput(BaseModel):
    """A tool's result as the model receives it: MCP content blocks plus an error flag.

    An executor may return one to control the content exactly (for example an image block);
    anything else it returns is converted (a string as is, other values as JSON).
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    content: list[dict[str, Any]] = Field(
        description="MCP content blocks: {'type': 'text', 'text': str} or "
        "{'type': 'image', 'data': <base64 str>, 'mimeType': str}."
    )
    is_error: bool = False

    @field_validator("content")
    @classmethod
    def _check_blocks(cls, content: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each block is one the model can receive, checked here rather than failing later
        as a protocol error ("Invalid request parameters") that names nothing."""
        for i, block in enumerate(content):
            problem = _block_problem(block)
            if problem is not None:
                raise ValueError(
                    f"content[{i}]: {problem}. A block is {{'type': 'text', 'text': str}} or "
                    f"{{'type': 'image', 'data': <base64 str>, 'mimeType': 'image/png'}}"
                )
        return content

    @property
    def text(self) -> str:
        """The text blocks joined, as the app usually wants to read the result."""
        return "\n".join(str(b.get("text", "")) for b in self.content if b.get("type") == "text")

    @classmethod
    def from_text(cls, text: str, *, is_error: bool = False) -> ToolOutput:
        """A result made of one text block."""
        return cls(content=[{"type": "text", "text": text}], is_error=is_error)


#: The keys of each `ToolOutput` block type (MCP's shapes, as the bridge sends them on).
_BLOCK_KEYS = {"text": {"type", "text"}, "image": {"type", "data", "mimeType"}}


def _block_problem(block: Mapping[str, Any]) -> str | None:
    """What is wrong with a `ToolOutput` content block, or None."""
    kind = block.get("type")
    if not isinstance(kind, str) or kind not in _BLOCK_KEYS:
        return f"unknown block type {kind!r}; a tool result holds 'text' and 'image' blocks"
    if kind == "text" and not isinstance(block.get("text"), str):
        return "a text block needs a string 'text'"
    if kind == "image":
        missing = [k for k in ("data", "mimeType") if not isinstance(block.get(k), str)]
        if missing:
            return f"an image block needs {' and '.join(repr(k) for k in missing)} (strings)"
        problem = _image_problem(block["data"], block["mimeType"])
        if problem is not None:
            return problem
    extra = sorted(str(k) for k in block if k not in _BLOCK_KEYS[kind])
    if extra:
        return (
            f"a {kind} block has {', '.join(repr(k) for k in extra)}, which would not reach the "
            f"model; remove {'it' if len(extra) == 1 else 'them'}"
        )
    return None


#: The image types the Messages API takes. The CLI passes another (an SVG, a BMP) to the model
#: as a note that it was saved to a file in the query's temp dir, which the model cannot open.
IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")


def _image_problem(data: str, mime: str) -> str | None:
    """What keeps an image block from reaching the model as an image, or None. Data that is
    not base64 reached the model as the CLI's "malformed result" error, naming nothing."""
    if mime not in IMAGE_TYPES:
        return (
            f"an image block's mimeType {clip(mime, 80)!r} is not an image type the model takes "
            f"({', '.join(IMAGE_TYPES)}): convert the image, or return what it shows as text"
        )
    try:
        decoded = base64.b64decode(data, validate=True)
    except binascii.Error as exc:
        return f"an image block's data is not base64 ({exc}): encode the image's bytes"
    if not decoded:
        return "an image block's data is empty: it holds no image"
    return None


def normalize_input_schema(schema: Mapping[str, Any], *, tool_name: str = "?") -> dict[str, Any]:
    """Check `schema` as a JSON Schema and return it as an object schema, losing nothing.

    `{}` becomes `{"type": "object"}`; a schema with `properties` or a top-level `anyOf`/`oneOf`/
    `allOf` but no `type` gets `"type": "object"`; everything else (`$defs`, `$ref`, `enum`,
    `required`, nested objects, `anyOf`) is kept exactly. A schema that is not valid JSON Schema,
    that nests deeper than `SCHEMA_DEPTH_LIMIT`, that has a `$ref` not resolving within the
    schema itself (remote references are refused, never fetched), or that describes something
    other than an object, raises `InvalidToolSchemaError`.
    """
    if not isinstance(schema, Mapping):
        raise InvalidToolSchemaError(
            f"tool {tool_name!r}: input_schema must be a JSON Schema object (a dict), "
            f"got {type(schema).__name__}"
        )
    problem = _json_problem(schema, SCHEMA_DEPTH_LIMIT)
    if problem is not None and problem[0] == "deep":
        raise InvalidToolSchemaError(
            f"tool {tool_name!r}: input_schema nests deeper than {SCHEMA_DEPTH_LIMIT} levels "
            f"(at {_short(problem[1])}); the limit keeps checking it within Python's recursion "
            f"limit. Move repeated parts under '$defs' and point to them with '$ref'."
        )
    if problem is not None:
        _, where, value = problem
        raise InvalidToolSchemaError(
            f"tool {tool_name!r}: input_schema is not plain JSON at {where}: {_describe(value)} "
            f"cannot be sent to the model. Write the schema in JSON Schema terms, e.g. "
            f"{{'type': 'object', 'properties': {{'x': {{'type': 'string'}}}}}}, or build the tool "
            f"with FunctionTool.from_function(fn) from a typed function."
        )
    _check_size(schema, tool_name)
    result = dict(schema)
    if "$schema" in result and not isinstance(result["$schema"], str):
        raise InvalidToolSchemaError(
            f"tool {tool_name!r}: '$schema' must be a URI string, got {result['$schema']!r}"
        )
    try:
        jsonschema.validators.validator_for(
            result, default=jsonschema.Draft202012Validator
        ).check_schema(result)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        raise InvalidToolSchemaError(
            f"tool {tool_name!r}: input_schema is not a valid JSON Schema at {where}: "
            f"{exc.message}. Fix the schema (see https://json-schema.org)."
        ) from None
    except ValueError as exc:  # e.g. a '$schema' that is no URI, which jsonschema splits
        raise InvalidToolSchemaError(
            f"tool {tool_name!r}: input_schema is not a valid JSON Schema ({exc}). Fix the "
            f"schema (see https://json-schema.org)."
        ) from None
    _check_subschemas(result, tool_name)
    declared = result.get("type")
    if declared is None:
        result["type"] = "object"
    elif declared != "object" and not (isinstance(declared, list) and "object" in declared):
        raise InvalidToolSchemaError(
            f"tool {tool_name!r}: the model passes tool arguments as a JSON object, so "
            f"input_schema "
            f"must describe an object (type 'object'), not {declared!r}. Wrap the value in a "
            f"property, e.g. {{'type': 'object', 'properties': {{'value': ...}}}}."
        )
    elif isinstance(declared, list):
        raise InvalidToolSchemaError(
            f"tool {tool_name!r}: input_schema type must be exactly 'object', not {declared!r}"
        )
    return result


def arguments_too_deep(arguments: Any) -> str | None:
    """`$.path: ...` where `arguments` nest deeper than `ARGUMENT_DEPTH_LIMIT`, else None."""
    problem = _json_problem(arguments, ARGUMENT_DEPTH_LIMIT, values=False)
    if problem is None:
        return None
    where = problem[1] if len(problem[1]) <= 40 else problem[1][:40] + "..."
    return f"{where}: the arguments nest deeper than {ARGUMENT_DEPTH_LIMIT} levels"


def _json_problem(value: Any, limit: int, *, values: bool = True) -> tuple[str, str, Any] | None:
    """The first part of `value` that cannot go to the model as JSON, in one walk:
    `("deep", path, None)` for an object or array nested deeper than `limit`, or (unless
    `values` is false: depth only) `("value", path, value)` for what JSON cannot hold (a Python
    type or object, a non-finite number, a non-string key). Iterative, and the depth limit ends
    the walk of a dict that contains itself."""
    stack: list[tuple[str, int, Any]] = [("$", 1, value)]
    while stack:
        path, depth, item = stack.pop()
        if item is None or isinstance(item, str | bool | int):
            continue
        if isinstance(item, float):
            if values and not math.isfinite(item):
                return "value", path, item
            continue
        if isinstance(item, Mapping):
            children = []
            for key, child in item.items():
                if values and not isinstance(key, str):
                    return "value", f"{path} (a key)", key
                children.append((f"{path}.{key}", child))
        elif isinstance(item, list | tuple):
            children = [(f"{path}[{i}]", child) for i, child in enumerate(item)]
        elif values:
            return "value", path, item
        else:
            continue
        if depth > limit:
            return "deep", path, None
        stack.extend((p, depth + 1, v) for p, v in reversed(children))
    return None


def _check_size(schema: Mapping[str, Any], tool_name: str) -> None:
    """Refuse a schema of more than `SCHEMA_VALUE_LIMIT` values, or an object in it listing
    more than `SCHEMA_PROPERTY_LIMIT` properties, before anything slower looks at it."""
    count = 0
    stack: list[tuple[str, Any]] = [("$", schema)]
    while stack:
        path, item = stack.pop()
        count += 1
        if count > SCHEMA_VALUE_LIMIT:
            raise InvalidToolSchemaError(
                f"tool {tool_name!r}: input_schema holds more than {SCHEMA_VALUE_LIMIT:,} JSON "
                f"values (the limit keeps checking it and the model's calls cheap). Describe "
                f"the arguments more briefly, or split the tool"
            )
        if isinstance(item, Mapping):
            properties = item.get("properties")
            if isinstance(properties, Mapping) and len(properties) > SCHEMA_PROPERTY_LIMIT:
                raise InvalidToolSchemaError(
                    f"tool {tool_name!r}: input_schema lists {len(properties):,} properties at "
                    f"{_short(path)}.properties, more than the limit of "
                    f"{SCHEMA_PROPERTY_LIMIT:,}. Group them into nested objects, or split the tool"
                )
            stack.extend((f"{path}.{k}", v) for k, v in item.items())
        elif isinstance(item, list | tuple):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(item))


def _check_subschemas(schema: dict[str, Any], tool_name: str) -> None:
    """Check every subschema of a checked schema: each `$ref` (and `$dynamicRef`) resolves
    within the schema itself, and each regular expression can be matched in linear time.

    What arguments are validated against must be what the model sees: a reference to nothing
    would fail only later, when a call is validated, and a remote one would make the validator
    fetch a URL. Patterns are matched with RE2 (`_patterns`, ADR 0010), which has no
    lookarounds or backreferences: such a pattern is refused here, never matched by another
    engine. Only the schema's subschemas are looked at (a `{"$ref": ...}` inside `enum` or
    `default` is data), with the base URI each `$id` sets.
    """
    paths: dict[int, str] = {}  # id of each object in the schema -> its JSON path
    stack: list[tuple[str, Any]] = [("$", schema)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, Mapping):
            paths.setdefault(id(item), path)
            stack.extend((f"{path}.{k}", v) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(item))
    dialect = schema.get("$schema")
    specification = referencing.jsonschema.specification_with(
        dialect if isinstance(dialect, str) else "", default=referencing.jsonschema.DRAFT202012
    )
    root = specification.create_resource(schema)
    base = root.id() or ""
    try:
        # No `retrieve`: a reference outside the schema is unresolvable, never fetched.
        registry: referencing.Registry[Any] = referencing.Registry().with_resource(base, root)
        resources = [(registry.crawl().resolver(base), root)]
        seen: dict[str, str] = {}  # keyword -> where it first is
        while resources:
            resolver, resource = resources.pop()
            contents = resource.contents
            if isinstance(contents, Mapping):
                where = paths.get(id(contents), "$")
                _check_patterns(contents, where, tool_name)
                for keyword in ("patternProperties", "unevaluatedProperties"):
                    if keyword in contents:
                        seen.setdefault(keyword, where)
            for keyword in ("$ref", "$dynamicRef"):
                ref = contents.get(keyword) if isinstance(contents, Mapping) else None
                if isinstance(ref, str):
                    where = f"{paths.get(id(contents), '$')}.{keyword}"
                    _resolve(resolver.lookup, ref, where, tool_name)
            subresources = resource.subresources()
            resources.extend((resolver.in_subresource(sub), sub) for sub in subresources)
        if len(seen) == 2:
            # jsonschema finds the properties `unevaluatedProperties` leaves out by matching
            # `patternProperties` itself, with the backtracking engine.
            raise InvalidToolSchemaError(
                f"tool {tool_name!r}: input_schema has 'unevaluatedProperties' (at "
                f"{_short(seen['unevaluatedProperties'])}) and 'patternProperties' (at "
                f"{_short(seen['patternProperties'])}), which together cannot be checked in "
                f"linear time. Use 'additionalProperties' instead of 'unevaluatedProperties'"
            )
    except InvalidToolSchemaError:
        raise
    except ValueError as exc:  # urljoin: an '$id' that is no URI
        raise InvalidToolSchemaError(
            f"tool {tool_name!r}: input_schema has an '$id' that is not a valid URI ({exc}). "
            f"Fix or remove it."
        ) from None


def _check_patterns(subschema: Mapping[str, Any], where: str, tool_name: str) -> None:
    """Refuse a pattern of `subschema` that RE2 cannot match."""
    pattern = subschema.get("pattern")
    patterns = subschema.get("patternProperties")
    found = [(f"{where}.pattern", pattern)] if isinstance(pattern, str) else []
    if isinstance(patterns, Mapping):
        found += [(f"{where}.patternProperties", p) for p in patterns if isinstance(p, str)]
    for at, regex in found:
        problem = pattern_problem(regex)
        if problem is not None:
            raise InvalidToolSchemaError(
                f"tool {tool_name!r}: input_schema has the pattern {clip(regex, 80)!r} (at "
                f"{_short(at)}), which the linear-time engine (RE2) cannot match: {problem}. "
                f"Lookarounds ('(?=', '(?!', '(?<=') and backreferences ('\\1') are not "
                f"supported; rewrite the pattern without them"
            )


def _resolve(lookup: Callable[[str], object], ref: str, where: str, tool_name: str) -> None:
    keyword = where.rpartition(".")[2]
    try:
        lookup(ref)
    except (PointerToNowhere, NoSuchAnchor, InvalidAnchor):
        raise InvalidToolSchemaError(
            f"tool {tool_name!r}: input_schema has a {keyword} {ref!r} (at {_short(where)}) "
            f"that points to nothing in the schema. Add what it names (e.g. under '$defs') or "
            f"fix the reference."
        ) from None
    except (Unresolvable, ValueError):
        raise InvalidToolSchemaError(
            f"tool {tool_name!r}: input_schema has a {keyword} {ref!r} (at {_short(where)}) "
            f"that refers outside the schema. References must resolve within the schema "
            f"('#/$defs/...'); nothing is fetched. Copy the referenced schema under '$defs' "
            f"and refer to it there."
        ) from None


def _short(path: str) -> str:
    """A JSON path short enough for a message: its start and its end."""
    return path if len(path) <= 120 else f"{path[:60]} ... {path[-50:]}"


def _describe(value: Any) -> str:
    if isinstance(value, type):
        return f"the Python type {value.__name__}"
    if isinstance(value, float):
        return f"the number {value!r}"
    return f"a value of type {type(value).__name__} ({repr(value)[:40]})"


#: `FunctionTool`'s fields that may be given by position, in this order.
_POSITIONAL = ("name", "description", "input_schema", "executor")


class FunctionTool(BaseModel):
    """A function tool the model may call: name, description, JSON Schema and an optional executor.

    With an executor on every tool of a request the provider runs **executor mode** (the tools run
    inside the CLI's loop through the per-query bridge). The schema is checked and normalised when
    the tool is built (`normalize_input_schema`).

    Example::

        weather = FunctionTool(
            name="get_weather",
            description="Current weather for a city.",
            input_schema={"type": "object", "properties": {"city": {"type": "string"}},
                          "required": ["city"]},
            executor=lambda args: {"city": args["city"], "celsius": 21},
        )
    """

    model_config = ConfigDict(
        frozen=True, arbitrary_types_allowed=True, extra="forbid", defer_build=True
    )

    name: str = Field(description="Unique per request; letters, digits, '_' and '-'.")
    description: str = Field(default="", description="What the tool does, for the model.")
    input_schema: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object"}, description="JSON Schema of the arguments."
    )
    executor: Executor | None = Field(
        default=None, exclude=True, description="Runs the tool; None = the app runs it itself."
    )
    timeout: float | None = Field(
        default=None, gt=0, description="Seconds this tool may run; None = the provider's default."
    )
    group: str | None = Field(default=None, description="Tool group, for enabling tools in sets.")
    mutating: bool = Field(default=False, description="The tool changes state outside the process.")
    read_only: bool = Field(
        default=False,
        description="Free of side effects: parallel calls of it may overlap (MCP readOnlyHint).",
    )
    strict: bool = Field(
        default=False,
        description="The model's calls must match input_schema (OpenAI's and Anthropic's "
        "`strict`). The CLI cannot constrain the model's output, so it is held by a check: a "
        "reply whose call of this tool does not match is a StrictToolCallError (retryable), "
        "never a call handed back; in executor mode arguments are checked before the executor "
        "runs, as for every tool.",
    )

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        # fullmatch: `$` would also match before a trailing newline ("name\n"), which the CLI
        # renames (`name_`), leaving the request's tool unoffered.
        if not _NAME_RE.fullmatch(value):
            raise InvalidToolNameError(
                f"tool name {value!r} is not accepted by the Messages API: use only letters, "
                f"digits, '_' and '-' (at most {API_NAME_LIMIT} characters with the bridge prefix)"
            )
        return value

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "input_schema" in data:
            data = dict(data)
            data["input_schema"] = normalize_input_schema(
                data["input_schema"], tool_name=str(data.get("name", "?"))
            )
        return data

    @model_validator(mode="after")
    def _consistent(self) -> FunctionTool:
        if self.mutating and self.read_only:
            raise InvalidToolSchemaError(
                f"tool {self.name!r} cannot be both mutating and read_only"
            )
        return self

    def __init__(self, *args: Any, **data: Any) -> None:
        # `FunctionTool(name, description, input_schema, executor)` positionally, as documented.
        if len(args) > len(_POSITIONAL):
            raise TypeError(
                f"FunctionTool takes at most {len(_POSITIONAL)} positional arguments "
                f"({', '.join(_POSITIONAL)}), got {len(args)}; pass the others by keyword"
            )
        for field, value in zip(_POSITIONAL, args, strict=False):
            if field in data:
                raise TypeError(f"FunctionTool got {field!r} both by position and by keyword")
            data[field] = value
        # Raise our named errors as themselves, not wrapped in pydantic's ValidationError.
        try:
            super().__init__(**data)
        except ValidationError as exc:
            for error in exc.errors():
                cause = (error.get("ctx") or {}).get("error")
                if isinstance(cause, InvalidToolNameError | InvalidToolSchemaError):
                    raise cause from None
            raise

    # A cached_property, not a private attribute: it is read on every call of the tool, and
    # pydantic's private-attribute lookup costs ~5 us per read; this one costs a dict lookup.
    @functools.cached_property
    def args_validator(self) -> jsonschema.protocols.Validator:
        """The compiled JSON Schema validator of this tool's arguments (built once)."""
        cls = validator_class(
            jsonschema.validators.validator_for(
                self.input_schema, default=jsonschema.Draft202012Validator
            )
        )
        # Patterns matched in linear time (ADR 0010). A registry of its own, without
        # `retrieve`: jsonschema's default one fetches remote
        # references; every reference was resolved within the schema when the tool was built.
        validator: jsonschema.protocols.Validator = cls(
            self.input_schema, format_checker=cls.FORMAT_CHECKER, registry=referencing.Registry()
        )
        return validator

    def argument_errors(self, arguments: Mapping[str, Any]) -> list[str]:
        """Where `arguments` violate the input schema (the first five), as `$.path: message`.
        Arguments nested deeper than `ARGUMENT_DEPTH_LIMIT` are one error, unchecked."""
        deep = arguments_too_deep(arguments)
        if deep is not None:
            return [deep]
        try:
            errors = sorted(self.args_validator.iter_errors(arguments), key=lambda e: list(e.path))
        except RecursionError:
            # A recursive schema ('$ref': '#') is checked as deep as the arguments nest.
            return ["$: the arguments nest too deeply to be checked against the schema"]
        # Clipped: a message repeats the offending value, which the model and the log get.
        return [clip(f"{e.json_path}: {e.message}") for e in errors[:5]]

    async def call(
        self,
        arguments: Mapping[str, Any] | None = None,
        *,
        gate: Gate | None = None,
        ungated: bool = False,
        context: CallContext | None = None,
    ) -> ToolOutput:
        """Invoke the tool directly, through the one invocation layer (`invoke_tool`).

        Arguments are checked against the schema, the gate and the executor run under the
        tool's `timeout`, and a failure comes back as an error result, as on every transport. A
        tool does not know the registry it belongs to, so a `mutating` tool needs its gate given
        here: `gate=` (the same gate the registry has), or `ungated=True` to run it without
        one, on purpose (a test). Without either it raises `UnsupportedRequestError` and does
        not run: call it as `registry.call(name, arguments)`, which applies the registry's gate.
        Tools not marked `mutating` never reach a gate and run either way.

        Example::

            await search.call({"query": "cats"})              # not mutating: runs
            await registry.call("delete_file", {"path": p})    # the registry's gate decides
            await delete_file.call({"path": p}, gate=my_gate)  # this gate decides
        """
        from ._invoke import invoke_tool

        if self.mutating and gate is None and not ungated:
            raise UnsupportedRequestError(
                f"tool {self.name!r} is mutating, and FunctionTool.call does not know the gate "
                f"of the registry it belongs to: call it through ToolRegistry.call({self.name!r}, "
                f"...), which applies the registry's gate, or pass gate=... (ungated=True runs it "
                f"without a gate, e.g. in a test)"
            )
        return await invoke_tool(self, arguments, default_timeout=None, gate=gate, context=context)

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        **options: Any,
    ) -> FunctionTool:
        """A tool from a typed function: schema from its hints, description from its docstring.

        The executor validates the model's arguments with pydantic (so `int`, `Literal`, nested
        `BaseModel` and `list[...]` parameters arrive as real Python values) and calls `fn`
        with them (positional-only parameters by position, the others by keyword); `fn` may be
        sync or async, and an awaitable a sync `fn` returns (a sync wrapper of an async
        function) is awaited. `fn` may be a function, a method, a `functools.partial` or an
        instance with a `__call__` method. Every parameter name reaches the model as written,
        `_private` and pydantic's own names (`model_config`, `json`) included. What a
        `functools.partial` binds by keyword is left out of the schema: the app's to give (a
        user id, a client), never the model's, so it need not be JSON either. Arguments the
        function's types reject after the schema accepted them (a date-time's format, a
        validator) come back to the model as invalid arguments, like a schema violation.

        Refused with `ToolDefinitionError` (`InvalidToolSchemaError` for parameters): `*args`
        and `**kwargs` (the model passes named arguments only), a parameter whose type has no
        JSON Schema (named; bind it with `functools.partial`), and generator functions, sync or
        async (a tool returns one result: collect the items and return a list).
        """
        target = _described_callable(fn)
        label = _callable_label(fn, target)
        where = f"FunctionTool.from_function({label})"
        if inspect.isasyncgenfunction(target) or inspect.isgeneratorfunction(target):
            kind = "an async generator" if inspect.isasyncgenfunction(target) else "a generator"
            raise ToolDefinitionError(
                f"{where}: {label} is {kind} function, and a tool returns one result, not a "
                f"series of yielded ones: collect the items and return them (e.g. a list)"
            )
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError) as exc:
            raise ToolDefinitionError(
                f"{where}: cannot read the parameters of {label} ({exc}); pass a Python function, "
                f"method, functools.partial or callable instance, or build FunctionTool(name, "
                f"description, input_schema, executor) yourself"
            ) from None
        hints = get_type_hints(target, include_extras=True)
        # What a partial binds by keyword is the app's to give, not the model's: left out of
        # the schema (an argument the model passes for it is an invalid call), so a bound user
        # id cannot be overridden and a bound client need not be JSON.
        bound = _bound_keywords(fn)
        parameters = {p: v for p, v in signature.parameters.items() if p not in bound}
        untyped = [p for p in parameters if p not in hints]
        doc = description if description is not None else _callable_doc(fn, target)
        if untyped or not doc.strip():
            gaps = [f"untyped parameters {', '.join(untyped)}"] if untyped else []
            gaps += [] if doc.strip() else ["no docstring or description"]
            warnings.warn(
                f"FunctionTool.from_function({label!r}): "
                f"{' and '.join(gaps)}; the model sees only what the schema and description "
                f"say, so give every parameter a type hint and the function a docstring (or "
                f"pass description=...)",
                UserWarning,
                stacklevel=2,
            )
        fields: dict[str, Any] = {}
        names: dict[str, str] = {}  # parameter name -> field name of the arguments model
        positional: list[str] = []  # positional-only parameters, passed by position
        for pname, param in parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                stars = "*" if param.kind is param.VAR_POSITIONAL else "**"
                raise InvalidToolSchemaError(
                    f"{where}: the parameter {stars}{pname} cannot be described as a schema "
                    f"(*args/**kwargs): the model passes named arguments only. Give each "
                    f"argument a named, typed parameter, or build FunctionTool(name, "
                    f"description, input_schema, executor) with an executor taking the "
                    f"arguments dict"
                )
            if param.kind is param.POSITIONAL_ONLY:
                positional.append(pname)
            annotation = hints.get(pname, Any)
            default = ... if param.default is inspect.Parameter.empty else param.default
            field = pname
            if _reserved_by_pydantic(pname):
                # A name pydantic keeps for itself (`_private`, `model_config`, `json`): a field
                # of another name, with the parameter's name as its alias (schema and input).
                field = _free_field_name(len(fields), signature.parameters)
                annotation = Annotated[annotation, Field(alias=pname)]
            names[pname] = field
            fields[field] = (annotation, default)
        # Arguments the function does not take are the model's mistake, told to it as invalid
        # arguments (additionalProperties: false), not dropped before the call.
        try:
            args_model = create_model(
                f"{_model_name(label)}_arguments",
                __config__=ConfigDict(extra="forbid"),
                **fields,
            )
            schema = args_model.model_json_schema()
        except PydanticUserError as exc:  # a type pydantic cannot validate or describe
            raise _unschematic(where, fields, names, exc) from None
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            if isinstance(prop, dict):
                prop.pop("title", None)
        is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(target)

        async def executor(arguments: dict[str, Any]) -> Any:
            try:
                parsed = args_model.model_validate(arguments)
            except ValidationError as exc:  # what the schema could not say (a format, a validator)
                raise _ArgumentsRejected(_validation_problems(exc)) from None
            kwargs = {pname: getattr(parsed, field) for pname, field in names.items()}
            args = [kwargs.pop(pname) for pname in positional]
            if is_async:
                value = await fn(*args, **kwargs)
            else:
                from ._invoke import run_sync_in_daemon_thread

                value = await run_sync_in_daemon_thread(lambda: fn(*args, **kwargs))
            if inspect.isawaitable(value):  # a sync wrapper of an async function
                value = await value
            return value

        return cls(
            name=name or _default_tool_name(fn, target),
            description=doc,
            input_schema=schema,
            executor=executor,
            **options,
        )


class _ArgumentsRejected(Exception):
    """The function's own types rejected a call's arguments (`from_function`'s executor, after
    the schema accepted them): an invalid call, which `invoke_tool` tells the model as such."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def _validation_problems(exc: ValidationError) -> list[str]:
    """`$.path: message` for each error of a validation (the first five), as `argument_errors`
    gives a schema's: no model name, input echo or documentation URL."""
    problems = []
    for error in exc.errors(include_url=False)[:5]:
        path = "$" + "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]
        )
        problems.append(clip(f"{path}: {error['msg']}"))
    return problems


def _unschematic(
    where: str, fields: Mapping[str, Any], names: Mapping[str, str], exc: PydanticUserError
) -> InvalidToolSchemaError:
    """The error for a function whose parameters pydantic cannot turn into a schema, naming
    the first parameter that it cannot (found by trying each alone)."""
    params = {field: pname for pname, field in names.items()}
    culprit = None
    for field, definition in fields.items():
        try:
            create_model("parameter", **{field: definition}).model_json_schema()
        except PydanticUserError as own:
            culprit, exc = params.get(field, field), own
            break
    # Pydantic's first sentence: its advice after it (`arbitrary_types_allowed`) is for models.
    reason = str(exc).strip().splitlines()[0].split(". ")[0].rstrip(".")
    subject = f"the parameter {culprit!r}" if culprit else "its parameters"
    hint = f"{culprit}=..." if culprit else "name=..."
    return InvalidToolSchemaError(
        f"{where}: {subject} cannot be described to the model as JSON Schema ({reason}). A value "
        f"the application supplies (a client, a connection, settings) is not the model's to "
        f"give: bind it with functools.partial(fn, {hint}), which leaves it out of the schema "
        f"(the call's own context is sf_provider.current_call()). Otherwise give it a type "
        f"the model can send as JSON (str, int, a pydantic model, a dataclass, "
        f"typing_extensions.TypedDict, ...)"
    )


def _bound_keywords(fn: Any) -> set[str]:
    """The parameters `functools.partial`s (nested or not) around `fn` bind by keyword."""
    bound: set[str] = set()
    while isinstance(fn, functools.partial):
        bound.update(fn.keywords)
        fn = fn.func
    return bound


def _unwrapped(fn: Any) -> Any:
    """The callable a (possibly nested) `functools.partial` wraps, else `fn` itself."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn


def _is_instance(base: Any) -> bool:
    """Whether `base` (unwrapped) is a callable instance rather than a function or class."""
    return not (inspect.isroutine(base) or inspect.isclass(base))


def _described_callable(fn: Any) -> Any:
    """What describes `fn` (its hints, docstring, kind): the function a `functools.partial`
    wraps, a callable instance's bound `__call__`, else `fn` itself."""
    if not callable(fn):
        raise ToolDefinitionError(
            f"FunctionTool.from_function needs a callable (a function, method, functools.partial "
            f"or an instance with __call__), got {type(fn).__name__}"
        )
    target = _unwrapped(fn)
    return target.__call__ if _is_instance(target) else target


def _callable_label(fn: Any, target: Any) -> str:
    """`fn`'s name for messages: its qualified name, its class's for a callable instance."""
    base = _unwrapped(fn)
    if _is_instance(base):
        return f"{type(base).__qualname__} instance"
    return str(getattr(base, "__qualname__", None) or getattr(target, "__name__", repr(fn)))


def _default_tool_name(fn: Any, target: Any) -> str:
    base = _unwrapped(fn)
    if _is_instance(base):
        return type(base).__name__
    return str(getattr(base, "__name__", None) or getattr(target, "__name__", "tool"))


def _callable_doc(fn: Any, target: Any) -> str:
    """The docstring describing `fn`: the wrapped function's for a partial (not `partial`'s
    own), the class's or else `__call__`'s for a callable instance."""
    for candidate in (_unwrapped(fn), target):
        doc = inspect.getdoc(candidate)
        if doc:
            return doc
    return ""


def _model_name(label: str) -> str:
    return re.sub(r"\W", "_", label) or "tool"


def _reserved_by_pydantic(pname: str) -> bool:
    """Whether a pydantic model cannot have a field named `pname`: private (`_x`), or a name of
    `BaseModel` itself or its protected `model_` namespace."""
    return pname.startswith("_") or pname.startswith("model_") or hasattr(BaseModel, pname)


def _free_field_name(index: int, parameters: Mapping[str, Any]) -> str:
    field = f"argument_{index}"
    while field in parameters or hasattr(BaseModel, field):
        field += "_"
    return field


def validate_tool_set(tools: Iterable[FunctionTool], *, bridge_name: str) -> list[FunctionTool]:
    """Check one request's tools: no duplicate names, every name fits the API with the prefix."""
    result: list[FunctionTool] = []
    seen: set[str] = set()
    limit = API_NAME_LIMIT - len(f"mcp__{bridge_name}__")
    for tool in tools:
        if not isinstance(tool, FunctionTool):
            raise InvalidToolSchemaError(
                f"tools must be FunctionTool instances, got {type(tool).__name__}; "
                f"use FunctionTool(...) or FunctionTool.from_function(fn)"
            )
        if tool.name in seen:
            raise DuplicateToolNameError(
                f"two tools in one request are named {tool.name!r}; tool names must be unique"
            )
        if len(tool.name) > limit:
            raise InvalidToolNameError(
                f"tool name {tool.name!r} is {len(tool.name)} characters; with the bridge prefix "
                f"'mcp__{bridge_name}__' it must be at most {limit}"
            )
        seen.add(tool.name)
        result.append(tool)
    return result


# --------------------------------------------------------------------------- tool definitions

#: Tool fields ignored on every front door: a caching hint changes cost, never the answer (the
#: CLI places its own cache breakpoints).
IGNORED_TOOL_FIELDS = frozenset({"cache_control"})

#: The fields read from each shape of tool definition (`strict`: `FunctionTool.strict`).
_OPENAI_TOOL_FIELDS = frozenset({"type", "function", "strict"})
_FUNCTION_FIELDS = frozenset({"name", "description", "parameters", "strict"})
_ANTHROPIC_TOOL_FIELDS = frozenset({"type", "name", "description", "input_schema", "strict"})

#: A tool definition in any shape a front door receives; `tool_from_spec` reads each.
ToolSpec = FunctionTool | Mapping[str, Any]


def tool_from_spec(spec: ToolSpec, *, where: str = "") -> FunctionTool:
    """One tool definition, in any shape a front door receives, as a `FunctionTool`.

    The one place tool definitions are read and checked, for every door. Shapes:

    - a `FunctionTool`, returned as it is;
    - an OpenAI function tool, `{"type": "function", "function": {"name", "description",
      "parameters", "strict"}}`, or its bare function, `{"name", "description", "parameters"}`;
    - an Anthropic tool, `{"name", "description", "input_schema", "strict"}` (`type` absent or
      `"custom"`; a server tool such as `web_search_20250305` is refused);
    - a JSON Schema of the arguments with a `title` (the tool's name) and a `description`, as
      LangChain's `convert_to_json_schema` gives it.

    The rule for fields, the same on every door (nothing is dropped silently):
    `cache_control` is ignored (`IGNORED_TOOL_FIELDS`: a caching hint, never the answer);
    `strict` is `FunctionTool.strict` (held by checking each call against the schema, as the
    CLI cannot constrain the model's arguments); any other field is refused
    unless its value asks for nothing (`null`, `false`, an empty list or object):
    `defer_loading`, `input_examples`, `eager_input_streaming` and the like, as the CLI offers
    a tool by its name, description and schema only. `FunctionTool` checks the name and schema.

    Errors (`UnsupportedRequestError` for what cannot be honoured, `ToolDefinitionError` for a
    malformed definition, `InvalidToolNameError`/`InvalidToolSchemaError` from `FunctionTool`)
    name the tool and the field; `where` (e.g. `tools[2]`) is put before the field, so a gateway
    can say `tools[2].function.foo`. No executor: the client runs the tools these describe.
    """
    if isinstance(spec, FunctionTool):
        return spec
    prefix = f"{where}." if where else ""
    if not isinstance(spec, Mapping):
        raise ToolDefinitionError(
            f"{where or 'tool'}: a tool definition is an OpenAI function tool, an Anthropic "
            f"tool, a JSON Schema with a title or a FunctionTool, not {type(spec).__name__}"
        )
    kind = spec.get("type")
    function = spec.get("function")
    if kind == "function" or isinstance(function, Mapping):
        if kind != "function" or not isinstance(function, Mapping):
            raise ToolDefinitionError(
                f"{where or 'tool'}: an OpenAI function tool is {{'type': 'function', "
                f"'function': {{'name', 'description', 'parameters'}}}}"
            )
        name = _tool_name(function, f"{prefix}function.name")
        strict = _check_fields(spec, _OPENAI_TOOL_FIELDS, where, name)
        strict |= _check_fields(function, _FUNCTION_FIELDS, f"{prefix}function", name)
        return _built(
            name, function.get("description"), function.get("parameters"), where, strict=strict
        )
    if "input_schema" in spec:
        if kind not in (None, "custom"):
            raise _server_tool(spec, where)
        name = _tool_name(spec, f"{prefix}name")
        strict = _check_fields(spec, _ANTHROPIC_TOOL_FIELDS, where, name)
        return _built(name, spec.get("description"), spec["input_schema"], where, strict=strict)
    if "parameters" in spec and "name" in spec:
        name = _tool_name(spec, f"{prefix}name")
        strict = _check_fields(spec, _FUNCTION_FIELDS, where, name)
        return _built(name, spec.get("description"), spec["parameters"], where, strict=strict)
    if kind == "object" or (kind is None and "properties" in spec):
        # A JSON Schema is all schema: its title names the tool, its description describes it.
        title = spec.get("title")
        if not isinstance(title, str) or not title:
            raise ToolDefinitionError(
                f"{prefix}title: a JSON Schema offered as a tool needs a 'title', its name"
            )
        schema = {k: v for k, v in spec.items() if k not in ("title", "description")}
        return _built(title, spec.get("description"), schema, where)
    if isinstance(kind, str):
        raise _server_tool(spec, where)
    raise ToolDefinitionError(
        f"{where or 'tool'}: not a tool definition: an OpenAI function tool ({{'type': "
        f"'function', 'function': {{...}}}}), an Anthropic tool ({{'name', 'description', "
        f"'input_schema'}}) or a JSON Schema with a title"
    )


def tools_from_specs(specs: Iterable[ToolSpec], *, where: str = "tools") -> list[FunctionTool]:
    """`tool_from_spec` for each of a request's tools (`where[i]` in errors), with the set
    checked for duplicate names."""
    tools = [tool_from_spec(spec, where=f"{where}[{i}]") for i, spec in enumerate(specs)]
    seen: dict[str, int] = {}
    for i, tool in enumerate(tools):
        if tool.name in seen:
            raise DuplicateToolNameError(
                f"{where}[{i}]: two tools are named {tool.name!r} ({where}[{seen[tool.name]}] "
                f"too); tool names must be unique"
            )
        seen[tool.name] = i
    return tools


def _tool_name(fields: Mapping[str, Any], where: str) -> str:
    name = fields.get("name")
    if not isinstance(name, str) or not name:
        raise ToolDefinitionError(f"{where}: required, the tool's name (a string)")
    return name


def _check_fields(fields: Mapping[str, Any], known: frozenset[str], where: str, name: str) -> bool:
    """Refuse any field that is not read, ignored, or asking for nothing; whether `strict` is
    true."""
    prefix = f"{where}." if where else ""
    strict = fields.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise ToolDefinitionError(f"{prefix}strict (tool {name!r}): must be true or false")
    unsent = sorted(
        str(k)
        for k, v in fields.items()
        if k not in known and k not in IGNORED_TOOL_FIELDS and v not in (None, False, [], {})
    )
    if unsent:
        raise UnsupportedRequestError(
            f"{prefix}{unsent[0]} (tool {name!r}) cannot be honoured: the Claude Code CLI offers "
            f"a tool by its name, description and input schema only (cache_control is "
            f"ignored). Remove it from the tool"
        )
    return bool(strict)


def _built(
    name: str, description: Any, schema: Any, where: str, *, strict: bool = False
) -> FunctionTool:
    if description is not None and not isinstance(description, str):
        raise ToolDefinitionError(
            f"{where + ': ' if where else ''}tool {name!r}: its description must be a string"
        )
    try:
        # FunctionTool checks the name and the schema; no executor: the client runs the tool.
        return FunctionTool(
            name=name,
            description=description or "",
            input_schema={"type": "object", "properties": {}} if schema is None else schema,
            strict=strict,
        )
    except ToolDefinitionError as exc:
        if not where:
            raise
        raise type(exc)(f"{where}: {exc}") from None


def _server_tool(spec: Mapping[str, Any], where: str) -> UnsupportedRequestError:
    kind = spec.get("type")
    return UnsupportedRequestError(
        f"{where or 'tool'}: tool {spec.get('name', kind)!r} of type {kind!r} is a server or "
        f"built-in tool, which cannot be offered: the model would only see an empty client "
        f"tool. Offer function tools (name, description and input schema); their calls come "
        f"back to you"
    )
