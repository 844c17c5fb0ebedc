"""The tool contract: schema normalisation, name rules, tool sets and `from_function`."""

from __future__ import annotations

import copy
from typing import Any, Literal

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from sf_provider.errors import DuplicateToolNameError, InvalidToolNameError, InvalidToolSchemaError
from sf_provider.tools import FunctionTool, normalize_input_schema, validate_tool_set

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


_SCHEMA_KEYS = st.sampled_from(
    ["type", "properties", "required", "enum", "anyOf", "$defs", "$ref", "$schema", "items"]
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


@pytest.mark.parametrize("name", ["bad name", "a.b", "ü", "a/b"])
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
        return a + b

    tool = FunctionTool.from_function(add)

    assert tool.name == "add"
    assert tool.input_schema == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "default": 2}},
        "required": ["a"],
    }


def test_literal_becomes_enum() -> None:
    def convert(unit: Literal["c", "f"]) -> str:
        return unit

    schema = FunctionTool.from_function(convert).input_schema

    assert schema["properties"]["unit"] == {"type": "string", "enum": ["c", "f"]}


def test_nested_model_parameter_becomes_defs_and_ref() -> None:
    def move(to: Point) -> str:
        return str(to)

    schema = FunctionTool.from_function(move).input_schema

    assert schema["properties"]["to"] == {"$ref": "#/$defs/Point"}
    assert schema["$defs"]["Point"]["properties"]["x"]["type"] == "integer"
    assert schema["$defs"]["Point"]["required"] == ["x"]


def test_optional_parameter_is_not_required() -> None:
    def search(query: str, limit: int | None = None) -> str:
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
        return sum(values)

    with pytest.raises(InvalidToolSchemaError, match=r"\*args"):
        FunctionTool.from_function(total)


def test_var_kwargs_are_rejected() -> None:
    def anything(**options: int) -> int:
        return len(options)

    with pytest.raises(InvalidToolSchemaError, match=r"\*\*kwargs"):
        FunctionTool.from_function(anything)


@pytest.mark.anyio
async def test_sync_function_is_called_with_its_arguments() -> None:
    def add(a: int, b: int = 2) -> int:
        return a + b

    output = await FunctionTool.from_function(add).call({"a": 40})

    assert (output.text, output.is_error) == ("42", False)


@pytest.mark.anyio
async def test_async_function_is_awaited() -> None:
    async def shout(word: str) -> str:
        return word.upper()

    output = await FunctionTool.from_function(shout).call({"word": "hi"})

    assert (output.text, output.is_error) == ("HI", False)


@pytest.mark.anyio
async def test_nested_model_argument_arrives_as_a_model_instance() -> None:
    received: list[Any] = []

    def move(to: Point) -> str:
        received.append(to)
        return "ok"

    await FunctionTool.from_function(move).call({"to": {"x": 3}})

    assert received == [Point(x=3, y=0)]


@pytest.mark.anyio
async def test_literal_argument_outside_the_enum_is_an_error_result() -> None:
    def convert(unit: Literal["c", "f"]) -> str:
        return unit

    output = await FunctionTool.from_function(convert).call({"unit": "k"})

    assert output.is_error
    assert "'k' is not one of ['c', 'f']" in output.text
