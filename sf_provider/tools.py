"""The tool contract: `FunctionTool`, schema normalisation and name rules."""

from __future__ import annotations

import functools
import inspect
import math
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, get_type_hints

import jsonschema
from jsonschema.exceptions import SchemaError
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from .errors import DuplicateToolNameError, InvalidToolNameError, InvalidToolSchemaError

__all__ = ["Executor", "FunctionTool", "ToolOutput", "normalize_input_schema", "validate_tool_set"]

#: What an executor is: a sync or async callable taking the validated arguments as a dict.
Executor = Callable[[dict[str, Any]], Any] | Callable[[dict[str, Any]], Awaitable[Any]]

# The Messages API accepts tool names matching ^[a-zA-Z0-9_-]{1,64}$ and the model sees
# `mcp__<bridge>__<name>`, so the app's name must fit in what the prefix leaves.
API_NAME_LIMIT = 64
_NAME_RE = re.compile(rf"^[a-zA-Z0-9_-]{{1,{API_NAME_LIMIT}}}$")


class ToolOutput(BaseModel):
    """A tool's result as the model receives it: MCP content blocks plus an error flag.

    An executor may return one to control the content exactly (for example an image block);
    anything else it returns is converted (a string as is, other values as JSON).
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    content: list[dict[str, Any]] = Field(description="MCP content blocks (text, image).")
    is_error: bool = False

    @property
    def text(self) -> str:
        """The text blocks joined, as the app usually wants to read the result."""
        return "\n".join(str(b.get("text", "")) for b in self.content if b.get("type") == "text")

    @classmethod
    def from_text(cls, text: str, *, is_error: bool = False) -> ToolOutput:
        """A result made of one text block."""
        return cls(content=[{"type": "text", "text": text}], is_error=is_error)


def normalize_input_schema(schema: Mapping[str, Any], *, tool_name: str = "?") -> dict[str, Any]:
    """Check `schema` as a JSON Schema and return it as an object schema, losing nothing.

    `{}` becomes `{"type": "object"}`; a schema with `properties` or a top-level `anyOf`/`oneOf`/
    `allOf` but no `type` gets `"type": "object"`; everything else (`$defs`, `$ref`, `enum`,
    `required`, nested objects, `anyOf`) is kept exactly. A schema that is not valid JSON Schema,
    or that describes something other than an object, raises `InvalidToolSchemaError`.
    """
    if not isinstance(schema, Mapping):
        raise InvalidToolSchemaError(
            f"tool {tool_name!r}: input_schema must be a JSON Schema object (a dict), "
            f"got {type(schema).__name__}"
        )
    bad = _first_non_json(schema, "$")
    if bad is not None:
        where, value = bad
        raise InvalidToolSchemaError(
            f"tool {tool_name!r}: input_schema is not plain JSON at {where}: {_describe(value)} "
            f"cannot be sent to the model. Write the schema in JSON Schema terms, e.g. "
            f"{{'type': 'object', 'properties': {{'x': {{'type': 'string'}}}}}}, or build the tool "
            f"with FunctionTool.from_function(fn) from a typed function."
        )
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


def _first_non_json(value: Any, where: str) -> tuple[str, Any] | None:
    """The JSON path and value of the first part of `value` that JSON cannot hold, if any.

    Iterative, so a deeply nested schema costs no recursion."""
    stack: list[tuple[str, Any]] = [(where, value)]
    while stack:
        path, item = stack.pop()
        if item is None or isinstance(item, str | bool | int):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                return path, item
        elif isinstance(item, Mapping):
            for key in item:
                if not isinstance(key, str):
                    return f"{path} (a key)", key
            stack.extend((f"{path}.{k}", v) for k, v in reversed(list(item.items())))
        elif isinstance(item, list | tuple):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(item))))
        else:
            return path, item
    return None


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

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not _NAME_RE.match(value):
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
        cls = jsonschema.validators.validator_for(
            self.input_schema, default=jsonschema.Draft202012Validator
        )
        validator: jsonschema.protocols.Validator = cls(
            self.input_schema, format_checker=cls.FORMAT_CHECKER
        )
        return validator

    def argument_errors(self, arguments: Mapping[str, Any]) -> list[str]:
        """Where `arguments` violate the input schema (the first five), as `$.path: message`."""
        errors = sorted(self.args_validator.iter_errors(arguments), key=lambda e: list(e.path))
        return [f"{e.json_path}: {e.message}" for e in errors[:5]]

    async def call(self, arguments: Mapping[str, Any] | None = None) -> ToolOutput:
        """Invoke the tool directly, through the same layer the bridge uses."""
        from ._invoke import invoke_tool

        return await invoke_tool(self, arguments, default_timeout=None)

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
        with them as keyword arguments; `fn` may be sync or async.
        """
        signature = inspect.signature(fn)
        hints = get_type_hints(fn, include_extras=True)
        fields: dict[str, Any] = {}
        for pname, param in signature.parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise InvalidToolSchemaError(
                    f"from_function({fn.__name__}): *args/**kwargs cannot be described as a schema"
                )
            annotation = hints.get(pname, Any)
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[pname] = (annotation, default)
        args_model = create_model(f"{fn.__name__}_arguments", **fields)
        schema = args_model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            if isinstance(prop, dict):
                prop.pop("title", None)

        async def executor(arguments: dict[str, Any]) -> Any:
            parsed = args_model.model_validate(arguments)
            kwargs = {field: getattr(parsed, field) for field in fields}
            if inspect.iscoroutinefunction(fn):
                return await fn(**kwargs)
            import anyio.to_thread

            return await anyio.to_thread.run_sync(lambda: fn(**kwargs), abandon_on_cancel=True)

        return cls(
            name=name or fn.__name__,
            description=description if description is not None else inspect.getdoc(fn) or "",
            input_schema=schema,
            executor=executor,
            **options,
        )


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
