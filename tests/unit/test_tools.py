"""The tool contract: schema normalisation, name rules, tool sets and `from_function`."""

from __future__ import annotations

import copy
import functools
import http.server
import json
import threading
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Literal

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from sf_provider.errors import (
    DuplicateToolNameError,
    InvalidToolNameError,
    InvalidToolSchemaError,
    ToolDefinitionError,
)
from sf_provider.tools import (
    ARGUMENT_DEPTH_LIMIT,
    SCHEMA_DEPTH_LIMIT,
    FunctionTool,
    ToolOutput,
    normalize_input_schema,
    validate_tool_set,
)

NESTED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "where": {
            "type": "object",
            "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
            "required": ["lat", "lon"],
        },
    },
    "required": ["city"],
}


# -- normalize_input_schema


def test_empty_schema_becomes_an_object_schema() -> None:
    assert normalize_input_schema({}) == {"type": "object"}


def test_plain_object_schema_is_kept_without_adding_properties() -> None:
    assert normalize_input_schema({"type": "object"}) == {"type": "object"}


def test_nested_required_and_enum_are_kept_intact() -> None:
    schema = copy.deepcopy(NESTED_SCHEMA)

    assert normalize_input_schema(schema) == NESTED_SCHEMA


def test_defs_and_refs_are_kept_intact() -> None:
    schema = {
        "type": "object",
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "integer"}}}},
        "properties": {"at": {"$ref": "#/$defs/Point"}},
        "required": ["at"],
    }

    assert normalize_input_schema(copy.deepcopy(schema)) == schema


def test_top_level_any_of_is_kept_and_typed_as_object() -> None:
    any_of = [
        {"properties": {"id": {"type": "integer"}}, "required": ["id"]},
        {"properties": {"name": {"type": "string"}}, "required": ["name"]},
    ]

    assert normalize_input_schema({"anyOf": copy.deepcopy(any_of)}) == {
        "anyOf": any_of,
        "type": "object",
    }


def test_properties_without_type_get_type_object() -> None:
    schema = {"properties": {"q": {"type": "string"}}}

    assert normalize_input_schema(schema) == {"type": "object", **schema}


def test_input_mapping_is_not_mutated() -> None:
    schema: dict[str, Any] = {}

    normalize_input_schema(schema)

    assert schema == {}


def test_non_object_type_is_rejected_with_a_hint_to_wrap_the_value() -> None:
    with pytest.raises(InvalidToolSchemaError) as info:
        normalize_input_schema({"type": "string"}, tool_name="echo")

    message = str(info.value)
    assert "'echo'" in message
    assert "'string'" in message
    assert "object" in message
    assert "Wrap the value in a property" in message


def test_type_list_including_object_is_rejected() -> None:
    with pytest.raises(InvalidToolSchemaError, match="exactly 'object'"):
        normalize_input_schema({"type": ["object", "null"]}, tool_name="t")


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        ({"type": 5}, "at type"),
        ({"properties": []}, "at properties"),
        ({"type": "object", "properties": {"a": {"type": "strin"}}}, "at properties/a/type"),
        ({"required": [1]}, "at required/0"),
    ],
)
def test_invalid_json_schema_is_rejected_naming_where(schema: dict[str, Any], where: str) -> None:
    with pytest.raises(InvalidToolSchemaError) as info:
        normalize_input_schema(schema, tool_name="calc")

    assert "'calc'" in str(info.value)
    assert "not a valid JSON Schema" in str(info.value)
    assert where in str(info.value)


def test_non_mapping_schema_is_rejected() -> None:
    with pytest.raises(InvalidToolSchemaError, match="got list"):
        normalize_input_schema([], tool_name="t")  # type: ignore[arg-type]


@pytest.mark.parametrize("meta", [5, [1], {}])
def test_non_string_dollar_schema_is_rejected_as_invalid_schema(meta: Any) -> None:
    with pytest.raises(InvalidToolSchemaError):
        normalize_input_schema({"$schema": meta})


@pytest.mark.parametrize("schema", [{"$schema": "http://["}, {"$id": "http://[", "type": "object"}])
def test_a_dollar_schema_or_id_that_is_no_uri_is_rejected_as_invalid_schema(
    schema: dict[str, Any],
) -> None:
    with pytest.raises(InvalidToolSchemaError, match="'t'"):
        normalize_input_schema(schema, tool_name="t")


_SCHEMA_KEYS = st.sampled_from(
    [
        "type",
        "properties",
        "required",
        "enum",
        "anyOf",
        "$defs",
        "$ref",
        "$schema",
        "items",
        "$id",
        "$anchor",
        "$dynamicRef",
    ]
)
_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(_SCHEMA_KEYS | st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None, database=None)
@example({"$schema": 5})
@given(st.dictionaries(_SCHEMA_KEYS | st.text(max_size=6), _JSONISH, max_size=5))
def test_any_jsonish_dict_normalises_to_an_object_schema_or_a_schema_error(
    schema: dict[str, Any],
) -> None:
    try:
        result = normalize_input_schema(schema)
    except InvalidToolSchemaError:
        return
    assert result["type"] == "object"


# -- FunctionTool names and flags


@pytest.mark.parametrize("name", ["bad name", "a.b", "ü", "a/b", "get_weather\n"])
def test_name_with_characters_the_api_rejects_raises_invalid_tool_name(name: str) -> None:
    with pytest.raises(InvalidToolNameError, match="letters, digits"):
        FunctionTool(name=name)


@pytest.mark.parametrize("name", ["", "a" * 65], ids=["empty", "65-chars"])
def test_name_of_wrong_length_raises_invalid_tool_name(name: str) -> None:
    with pytest.raises(InvalidToolNameError):
        FunctionTool(name=name)


def test_name_of_64_characters_is_accepted() -> None:
    assert FunctionTool(name="a" * 64).name == "a" * 64


def test_invalid_schema_raises_schema_error_itself_from_constructor() -> None:
    with pytest.raises(InvalidToolSchemaError, match="'t'"):
        FunctionTool(name="t", input_schema={"type": "string"})


def test_constructor_stores_the_normalised_schema() -> None:
    assert FunctionTool(name="t", input_schema={}).input_schema == {"type": "object"}


def test_mutating_and_read_only_together_are_rejected() -> None:
    with pytest.raises(InvalidToolSchemaError, match="both mutating and read_only"):
        FunctionTool(name="t", mutating=True, read_only=True)


# -- hostile schemas: depth and references


def _nested_properties(levels: int) -> dict[str, Any]:
    """An object schema whose property `a` holds one, `levels` times: 2 JSON levels each."""
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


@pytest.mark.parametrize("levels", [2500, SCHEMA_DEPTH_LIMIT // 2])
def test_a_schema_nested_too_deep_is_refused_naming_the_limit_and_where(levels: int) -> None:
    with pytest.raises(InvalidToolSchemaError) as info:
        FunctionTool(name="deep", input_schema=_nested_properties(levels))

    message = str(info.value)
    assert "'deep'" in message and f"deeper than {SCHEMA_DEPTH_LIMIT} levels" in message
    assert "(at $.properties.a.properties.a" in message


def test_a_schema_nested_to_the_limit_is_accepted() -> None:
    schema = _nested_properties(SCHEMA_DEPTH_LIMIT // 2 - 1)  # the innermost dict is level 99
    schema["$defs"] = {"leaf": {"type": "string"}}
    assert FunctionTool(name="deep", input_schema=schema).input_schema == schema


def test_a_schema_that_contains_itself_is_refused_not_walked_forever() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    schema["properties"]["me"] = schema

    with pytest.raises(InvalidToolSchemaError, match="deeper than"):
        FunctionTool(name="loop", input_schema=schema)


@pytest.mark.parametrize(
    ("schema", "ref", "where"),
    [
        (
            {"type": "object", "properties": {"x": {"$ref": "#/$defs/missing"}}},
            "#/$defs/missing",
            "$.properties.x.$ref",
        ),
        (
            {"type": "object", "$defs": {"a": {"type": "array", "items": {"$ref": "#nowhere"}}}},
            "#nowhere",
            "$.$defs.a.items.$ref",
        ),
        (
            {"type": "object", "properties": {"x": {"anyOf": [{"$dynamicRef": "#meta"}]}}},
            "#meta",
            "$.properties.x.anyOf[0].$dynamicRef",
        ),
        (
            {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
             "properties": {"x": {"$ref": "#/definitions/x"}}},
            "#/definitions/x",
            "$.properties.x.$ref",
        ),
    ],
    ids=["defs", "anchor", "dynamic", "draft-07"],
)  # fmt: skip
def test_a_ref_pointing_to_nothing_is_refused_when_the_tool_is_built(
    schema: dict[str, Any], ref: str, where: str
) -> None:
    with pytest.raises(InvalidToolSchemaError) as info:
        FunctionTool(name="refs", input_schema=schema)

    message = str(info.value)
    assert f"{ref!r} (at {where})" in message and "points to nothing" in message


@pytest.fixture
def http_requests() -> Iterator[tuple[str, list[str]]]:
    """A local HTTP server serving a valid schema; the paths it was asked for."""
    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            body = json.dumps({"type": "string"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


REMOTE_REFS = [
    "{base}/s.json",
    "{base}/s.json#/type",
    "file:///etc/passwd",
    "other.json",
    "https://json-schema.org/draft/2020-12/schema",
]


@pytest.mark.parametrize("ref", REMOTE_REFS)
def test_a_remote_ref_is_refused_and_never_fetched(
    http_requests: tuple[str, list[str]], ref: str
) -> None:
    base, asked = http_requests
    ref = ref.format(base=base)
    schema = {"type": "object", "properties": {"x": {"$ref": ref}}}

    with pytest.raises(InvalidToolSchemaError) as info:
        FunctionTool(name="remote", input_schema=schema)

    assert f"{ref!r} (at $.properties.x.$ref)" in str(info.value)
    assert "refers outside the schema" in str(info.value)
    assert asked == [], "nothing was fetched"


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "$defs": {"p": {"type": "string"}},
         "properties": {"x": {"$ref": "#/$defs/p"}}},
        {"type": "object", "$defs": {"p": {"$anchor": "point", "type": "string"}},
         "properties": {"x": {"$ref": "#point"}}},
        {"$id": "https://example.com/order", "type": "object",
         "$defs": {"p": {"type": "string"}},
         "properties": {"x": {"$ref": "https://example.com/order#/$defs/p"}}},
        {"type": "object", "$defs": {"p": {"$id": "https://example.com/p", "type": "string"}},
         "properties": {"x": {"$ref": "https://example.com/p"}}},
        {"type": "object", "properties": {"child": {"$ref": "#"}}},
        {"type": "object", "properties": {"$ref": {"type": "string"}}},
        {"type": "object", "properties": {"x": {"enum": [{"$ref": "#/nope"}],
                                                "default": {"$ref": "http://example.com"}}}},
    ],
    ids=["defs", "anchor", "own-id", "embedded-id", "recursive", "property-named-ref",
         "ref-as-data"],
)  # fmt: skip
def test_refs_that_resolve_within_the_schema_are_accepted(schema: dict[str, Any]) -> None:
    assert FunctionTool(name="refs", input_schema=copy.deepcopy(schema)).input_schema == schema


def test_arguments_are_validated_through_local_refs() -> None:
    tool = FunctionTool(
        name="ship",
        input_schema={
            "type": "object",
            "$defs": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
            "properties": {"zip": {"$ref": "#/$defs/zip"}},
        },
    )

    assert tool.argument_errors({"zip": "75001"}) == []
    assert tool.argument_errors({"zip": "Paris"}) == ["$.zip: 'Paris' does not match '^[0-9]{5}$'"]


def _tree(levels: int) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    for _ in range(levels - 1):
        arguments = {"child": arguments}
    return arguments


TREE = FunctionTool(
    name="tree", input_schema={"type": "object", "properties": {"child": {"$ref": "#"}}}
)


def test_arguments_nested_deeper_than_the_limit_are_one_error_not_a_crash() -> None:
    where = ("$" + ".child" * 200)[:40]
    message = f"{where}...: the arguments nest deeper than {ARGUMENT_DEPTH_LIMIT} levels"

    assert TREE.argument_errors(_tree(5000)) == [message]
    assert TREE.argument_errors(_tree(ARGUMENT_DEPTH_LIMIT + 1)) == [message]


def test_arguments_at_the_limit_are_checked_against_a_recursive_schema() -> None:
    assert TREE.argument_errors(_tree(ARGUMENT_DEPTH_LIMIT)) == []
    deep_wrong = _tree(ARGUMENT_DEPTH_LIMIT - 1)
    deep_wrong["child"] = 7
    assert TREE.argument_errors(deep_wrong) == ["$.child: 7 is not of type 'object'"]


@pytest.mark.anyio
async def test_a_direct_call_with_arguments_nested_too_deeply_is_an_error_result() -> None:
    runs: list[Any] = []
    tool = TREE.model_copy(update={"executor": runs.append})

    output = await tool.call(_tree(ARGUMENT_DEPTH_LIMIT + 1))

    assert output.is_error and runs == []
    assert f"nest deeper than {ARGUMENT_DEPTH_LIMIT} levels" in output.text


# -- validate_tool_set


def test_tool_set_keeps_the_tools_in_order() -> None:
    tools = [FunctionTool(name="a"), FunctionTool(name="b")]

    assert validate_tool_set(tools, bridge_name="sf") == tools


def test_duplicate_tool_names_are_rejected() -> None:
    with pytest.raises(DuplicateToolNameError, match="'a'"):
        validate_tool_set([FunctionTool(name="a"), FunctionTool(name="a")], bridge_name="sf")


def test_name_too_long_once_prefixed_is_rejected() -> None:
    # 64 - len("mcp__sf__") = 55 characters fit.
    fits, too_long = FunctionTool(name="a" * 55), FunctionTool(name="b" * 56)

    assert validate_tool_set([fits], bridge_name="sf") == [fits]
    with pytest.raises(InvalidToolNameError, match="mcp__sf__"):
        validate_tool_set([too_long], bridge_name="sf")


def test_longer_bridge_name_leaves_less_room() -> None:
    with pytest.raises(InvalidToolNameError, match="at most 51"):
        validate_tool_set([FunctionTool(name="a" * 52)], bridge_name="bridge")


def test_non_function_tool_is_rejected_naming_its_type() -> None:
    with pytest.raises(InvalidToolSchemaError, match="FunctionTool instances, got dict"):
        validate_tool_set([{"name": "a"}], bridge_name="sf")  # type: ignore[list-item]


# -- FunctionTool.from_function


class Point(BaseModel):
    x: int
    y: int = 0


def test_schema_from_hints_with_defaults() -> None:
    def add(a: int, b: int = 2) -> int:
        """Add two integers."""
        return a + b

    tool = FunctionTool.from_function(add)

    assert tool.name == "add"
    assert tool.input_schema == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "default": 2}},
        "required": ["a"],
        "additionalProperties": False,
    }


@pytest.mark.anyio
async def test_an_argument_the_function_does_not_take_is_an_invalid_call_not_dropped() -> None:
    def add(a: int, b: int = 2) -> int:
        """Add two integers."""
        return a + b

    output = await FunctionTool.from_function(add).call({"a": 1, "c": 5})

    assert output.is_error
    assert output.text.startswith("Invalid arguments for tool 'add'")
    assert "'c'" in output.text


def test_literal_becomes_enum() -> None:
    def convert(unit: Literal["c", "f"]) -> str:
        """Name a temperature unit."""
        return unit

    schema = FunctionTool.from_function(convert).input_schema

    assert schema["properties"]["unit"] == {"type": "string", "enum": ["c", "f"]}


def test_nested_model_parameter_becomes_defs_and_ref() -> None:
    def move(to: Point) -> str:
        """Move to a point."""
        return str(to)

    schema = FunctionTool.from_function(move).input_schema

    assert schema["properties"]["to"] == {"$ref": "#/$defs/Point"}
    assert schema["$defs"]["Point"]["properties"]["x"]["type"] == "integer"
    assert schema["$defs"]["Point"]["required"] == ["x"]


def test_optional_parameter_is_not_required() -> None:
    def search(query: str, limit: int | None = None) -> str:
        """Search for a query."""
        return query

    schema = FunctionTool.from_function(search).input_schema

    assert schema["required"] == ["query"]
    assert "limit" in schema["properties"]


def test_docstring_becomes_description() -> None:
    def ping() -> str:
        """Check the service is up.

        Returns "pong".
        """
        return "pong"

    assert (
        FunctionTool.from_function(ping).description
        == 'Check the service is up.\n\nReturns "pong".'
    )


def test_explicit_name_description_and_options_win() -> None:
    def ping() -> str:
        """Docstring."""
        return "pong"

    tool = FunctionTool.from_function(ping, name="health", description="Health.", read_only=True)

    assert (tool.name, tool.description, tool.read_only) == ("health", "Health.", True)


def test_var_args_are_rejected() -> None:
    def total(*values: int) -> int:
        """Add up the values."""
        return sum(values)

    with pytest.raises(InvalidToolSchemaError, match=r"parameter \*values .*\*args"):
        FunctionTool.from_function(total)


def test_var_kwargs_are_rejected() -> None:
    def anything(**options: int) -> int:
        """Take any options."""
        return len(options)

    with pytest.raises(InvalidToolSchemaError, match=r"parameter \*\*options .*\*\*kwargs"):
        FunctionTool.from_function(anything)


@pytest.mark.anyio
async def test_sync_function_is_called_with_its_arguments() -> None:
    def add(a: int, b: int = 2) -> int:
        """Add two integers."""
        return a + b

    output = await FunctionTool.from_function(add).call({"a": 40})

    assert (output.text, output.is_error) == ("42", False)


@pytest.mark.anyio
async def test_async_function_is_awaited() -> None:
    async def shout(word: str) -> str:
        """Shout a word."""
        return word.upper()

    output = await FunctionTool.from_function(shout).call({"word": "hi"})

    assert (output.text, output.is_error) == ("HI", False)


@pytest.mark.anyio
async def test_nested_model_argument_arrives_as_a_model_instance() -> None:
    received: list[Any] = []

    def move(to: Point) -> str:
        """Move to a point."""
        received.append(to)
        return "ok"

    await FunctionTool.from_function(move).call({"to": {"x": 3}})

    assert received == [Point(x=3, y=0)]


@pytest.mark.anyio
async def test_literal_argument_outside_the_enum_is_an_error_result() -> None:
    def convert(unit: Literal["c", "f"]) -> str:
        """Name a temperature unit."""
        return unit

    output = await FunctionTool.from_function(convert).call({"unit": "k"})

    assert output.is_error
    assert "'k' is not one of ['c', 'f']" in output.text


def test_from_function_warns_naming_the_function_without_description_or_types() -> None:
    def bare(city, days: int):  # type: ignore[no-untyped-def]
        return city

    with pytest.warns(UserWarning, match=r"from_function\('.*bare'\): untyped parameters city "
                      r"and no docstring"):  # fmt: skip
        FunctionTool.from_function(bare)

    def typed(city: str) -> str:
        """Weather for a city."""
        return city

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        FunctionTool.from_function(typed)
        FunctionTool.from_function(lambda: "x", name="lam", description="Says x.")


@pytest.mark.anyio
async def test_positional_only_parameters_are_passed_by_position() -> None:
    def subtract(a: int, b: int, /, *, scale: int = 1) -> int:
        """Subtract b from a, scaled."""
        return (a - b) * scale

    tool = FunctionTool.from_function(subtract)
    output = await tool.call({"a": 5, "b": 2, "scale": 10})

    assert tool.input_schema["required"] == ["a", "b"]
    assert (output.text, output.is_error) == ("30", False)


@pytest.mark.anyio
async def test_underscored_and_pydantic_reserved_parameter_names_reach_the_model_as_written() -> (
    None
):
    def lookup(_id: int, model_config: str, json: bool = False) -> str:
        """Look a record up."""
        return f"{_id}:{model_config}:{json}"

    tool = FunctionTool.from_function(lookup)
    output = await tool.call({"_id": 7, "model_config": "m", "json": True})

    assert tool.input_schema == {
        "type": "object",
        "properties": {
            "_id": {"type": "integer"},
            "model_config": {"type": "string"},
            "json": {"type": "boolean", "default": False},
        },
        "required": ["_id", "model_config"],
        "additionalProperties": False,
    }
    assert (output.text, output.is_error) == ("7:m:True", False)
    invalid = await tool.call({"_id": "seven", "model_config": "m"})
    assert invalid.is_error and "_id" in invalid.text


async def _numbers(n: int) -> AsyncIterator[int]:
    """Count to n."""
    yield n


def _sync_numbers(n: int) -> Iterator[int]:
    """Count to n."""
    yield n


@pytest.mark.parametrize(
    ("fn", "kind"), [(_numbers, "an async generator"), (_sync_numbers, "a generator")]
)
def test_generator_functions_are_refused_naming_the_function(fn: Any, kind: str) -> None:
    with pytest.raises(ToolDefinitionError, match=rf"numbers is {kind} function.*return"):
        FunctionTool.from_function(fn)


async def _double(x: int) -> int:
    return x * 2


@pytest.mark.anyio
async def test_an_awaitable_a_sync_function_returns_is_awaited() -> None:
    def double(x: int) -> Awaitable[int]:
        """Double a number (a sync wrapper of an async function)."""
        return _double(x)

    output = await FunctionTool.from_function(double).call({"x": 21})

    assert (output.text, output.is_error) == ("42", False)


@pytest.mark.anyio
async def test_a_partial_is_described_by_the_function_it_wraps() -> None:
    def power(base: int, exponent: int) -> int:
        """Raise base to exponent."""
        return int(base**exponent)

    tool = FunctionTool.from_function(functools.partial(power, exponent=2))
    output = await tool.call({"base": 9})

    assert (tool.name, tool.description) == ("power", "Raise base to exponent.")
    assert tool.input_schema["required"] == ["base"]
    assert output.text == "81"


def test_nested_partials_leave_every_keyword_they_bind_out_of_the_schema() -> None:
    def transfer(account: str, currency: str, amount: int) -> str:
        """Transfer money."""
        return f"{amount} {currency} from {account}"

    bound = functools.partial(functools.partial(transfer, account="acme"), currency="EUR")
    tool = FunctionTool.from_function(bound)

    assert tool.input_schema["properties"] == {"amount": {"type": "integer"}}
    assert tool.input_schema["required"] == ["amount"]


class _Client:
    """A connection the application holds."""


@pytest.mark.parametrize(
    ("annotation", "reason"),
    [(_Client, "Unable to generate pydantic-core schema"), (Callable[[int], int], "Callable")],
    ids=["arbitrary-class", "callable"],
)
def test_a_parameter_without_a_json_schema_is_refused_naming_it_and_how_to_bind_it(
    annotation: Any, reason: str
) -> None:
    def lookup(query: str, client: Any) -> str:
        """Look something up."""
        return query

    lookup.__annotations__["client"] = annotation
    with pytest.raises(InvalidToolSchemaError) as caught:
        FunctionTool.from_function(lookup)
    message = str(caught.value)
    assert "the parameter 'client' cannot be described to the model as JSON Schema" in message
    assert reason in message
    assert "functools.partial(fn, client=...)" in message
    # What the message advises works: bound, the parameter is the app's, not the schema's.
    tool = FunctionTool.from_function(functools.partial(lookup, client=_Client()))
    assert list(tool.input_schema["properties"]) == ["query"]


class _Greeter:
    """Greet someone."""

    def __call__(self, who: str) -> str:
        return f"hello {who}"


class _AsyncGreeter:
    async def __call__(self, who: str) -> str:
        """Greet someone, asynchronously."""
        return f"hi {who}"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("instance", "name", "description", "text"),
    [
        (_Greeter(), "_Greeter", "Greet someone.", "hello Ada"),
        (_AsyncGreeter(), "_AsyncGreeter", "Greet someone, asynchronously.", "hi Ada"),
    ],
)
async def test_a_callable_instance_is_described_by_its_call_method(
    instance: Any, name: str, description: str, text: str
) -> None:
    tool = FunctionTool.from_function(instance)
    output = await tool.call({"who": "Ada"})

    assert (tool.name, tool.description) == (name, description)
    assert tool.input_schema["required"] == ["who"]
    assert (output.text, output.is_error) == (text, False)


def test_something_not_callable_is_refused_saying_what_is_accepted() -> None:
    with pytest.raises(ToolDefinitionError, match=r"needs a callable .*functools\.partial"):
        FunctionTool.from_function(42)  # type: ignore[arg-type]


# -- ToolOutput


def test_tool_output_accepts_text_and_mcp_image_blocks() -> None:
    blocks = [
        {"type": "text", "text": "a"},
        {"type": "image", "data": "AAAA", "mimeType": "image/png"},
    ]
    assert ToolOutput(content=blocks).content == blocks


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        ({"type": "bogus"}, "unknown block type 'bogus'"),
        ({"text": "no type"}, "unknown block type None"),
        ({"type": "text"}, "a text block needs a string 'text'"),
        ({"type": "text", "text": 5}, "a text block needs a string 'text'"),
        ({"type": "image", "data": "AAAA"}, "an image block needs 'mimeType'"),
        ({"type": "image", "data": "AAAA", "media_type": "image/png"}, "needs 'mimeType'"),
        ({"type": "image", "mimeType": "image/png"}, "an image block needs 'data'"),
        ({"type": "image", "data": "AAAA", "mimeType": "image/svg+xml"}, "not an image type"),
        ({"type": "image", "data": "AAAA", "mimeType": "image/bmp"}, "(image/jpeg, image/png"),
        ({"type": "image", "data": "A A!", "mimeType": "image/png"}, "data is not base64"),
        ({"type": "image", "data": "", "mimeType": "image/png"}, "data is empty"),
        ({"type": "text", "text": "a", "annotations": {}}, "has 'annotations', which would not"),
    ],
)
def test_a_tool_output_block_the_model_cannot_receive_is_refused_naming_it(
    block: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ValueError, match=r"content\[1\]: ") as info:
        ToolOutput(content=[{"type": "text", "text": "fine"}, block])
    assert problem in str(info.value)


# --------------------------------------------------------------------------- linear-time patterns
# ADR 0010: `pattern` and `patternProperties` are matched by RE2. With Python's `re`, each case
# below backtracks for days (29 characters took 37 s; each one more doubles it), so a
# regression hangs the test until pytest's timeout fails it.

_EVIL = "^(a+)+$"
_EVIL_TEXT = "a" * 40 + "!"


def test_a_backtracking_pattern_is_matched_in_linear_time() -> None:
    tool = FunctionTool(
        name="t",
        input_schema={"type": "object", "properties": {"s": {"type": "string", "pattern": _EVIL}}},
    )
    assert tool.argument_errors({"s": _EVIL_TEXT}) == [
        f"$.s: {_EVIL_TEXT!r} does not match {_EVIL!r}"
    ]
    assert tool.argument_errors({"s": "aaa"}) == []


def test_pattern_properties_are_matched_in_linear_time_as_jsonschema_words_them() -> None:
    tool = FunctionTool(
        name="t",
        input_schema={
            "type": "object",
            "patternProperties": {_EVIL: {"type": "integer"}},
            "additionalProperties": False,
        },
    )
    assert tool.argument_errors({"aa": 1}) == []
    assert tool.argument_errors({"aa": "x"}) == ["$.aa: 'x' is not of type 'integer'"]
    assert tool.argument_errors({_EVIL_TEXT: 1}) == [
        f"$: {_EVIL_TEXT!r} does not match any of the regexes: {_EVIL!r}"
    ]
    plain = FunctionTool(
        name="t", input_schema={"type": "object", "properties": {}, "additionalProperties": False}
    )
    assert plain.argument_errors({"b": 1, "a": 2}) == [
        "$: Additional properties are not allowed ('a', 'b' were unexpected)"
    ]


@pytest.mark.parametrize(
    ("schema", "named"),
    [
        ({"properties": {"s": {"type": "string", "pattern": "^(?=a)a$"}}}, "(?="),
        ({"patternProperties": {"^(a)\\1$": {}}}, "\\1"),
        ({"$defs": {"x": {"type": "string", "pattern": "(?<!a)b"}}}, "(?<"),
    ],
    ids=["lookahead", "backreference", "lookbehind-in-defs"],
)
def test_a_pattern_the_linear_engine_cannot_match_is_refused_when_the_tool_is_defined(
    schema: dict[str, Any], named: str
) -> None:
    with pytest.raises(InvalidToolSchemaError, match="linear-time engine") as caught:
        FunctionTool(name="t", input_schema=schema)
    assert named in str(caught.value)


def test_a_property_named_pattern_is_a_property_not_a_regex() -> None:
    tool = FunctionTool(
        name="t", input_schema={"type": "object", "properties": {"pattern": {"type": "string"}}}
    )
    assert tool.argument_errors({"pattern": "(?=x)"}) == []


def test_unevaluated_properties_beside_pattern_properties_is_refused_by_name() -> None:
    schema = {
        "type": "object",
        "allOf": [{"patternProperties": {"^a": {}}}],
        "unevaluatedProperties": False,
    }
    with pytest.raises(InvalidToolSchemaError, match="'additionalProperties' instead"):
        FunctionTool(name="t", input_schema=schema)


def test_a_schema_past_the_size_limits_is_refused_before_it_is_checked() -> None:
    from sf_provider.tools import SCHEMA_PROPERTY_LIMIT, SCHEMA_VALUE_LIMIT

    many = {f"p{i}": {"type": "string"} for i in range(SCHEMA_PROPERTY_LIMIT + 1)}
    with pytest.raises(InvalidToolSchemaError, match=r"properties at \$\.properties"):
        FunctionTool(name="t", input_schema={"type": "object", "properties": many})
    big = {"type": "object", "properties": {"x": {"enum": list(range(SCHEMA_VALUE_LIMIT))}}}
    with pytest.raises(InvalidToolSchemaError, match="more than 10,000 JSON values"):
        FunctionTool(name="t", input_schema=big)
