"""The rules every front door shares, written once in the core and proven here once.

- Tool definitions: `sf_provider.tools.tool_from_spec` reads the four shapes a door receives
  (OpenAI function tool, Anthropic tool, JSON Schema with a title, `FunctionTool`) by one rule;
  each door hands its tools to it, so a mistake reads the same on every door.
- `tool_choice`: each door maps its wire shape to the core's `ToolChoice`; what a choice means
  for the tools (`_tool_choice.offered_tools` / `exposed_tools`) is decided once.
- Usage: `Usage.input_total` is the one sum of cached and uncached input; each door renames.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from pydantic_ai.exceptions import UserError
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.tools import ToolDefinition

from sf_provider import (
    ClaudeAgentProvider,
    DuplicateToolNameError,
    FunctionTool,
    InvalidToolSchemaError,
    ToolDefinitionError,
    UnsupportedRequestError,
    Usage,
)
from sf_provider._anthropic_format import parse_request
from sf_provider._openai_format import chat_request
from sf_provider._openai_format import usage as openai_usage
from sf_provider._tool_choice import (
    REQUIRED_WITHOUT_TOOLS,
    NamedToolChoice,
    ToolChoice,
    exposed_tools,
    offered_tools,
)
from sf_provider._tracing import INPUT_TOKENS, finish_attributes
from sf_provider.adapters import langchain as lc
from sf_provider.adapters import pydantic_ai as pai
from sf_provider.tools import tool_from_spec, tools_from_specs
from sf_provider.types import FinishPart

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
BAD_SCHEMA = {"type": "object", "properties": {"city": {"type": 3}}}


def openai_tool(name: str = "get_weather", schema: Any = SCHEMA, **extra: Any) -> dict[str, Any]:
    function = {"name": name, "description": "Weather for a city.", "parameters": schema}
    return {"type": "function", "function": {**function, **extra.pop("function", {})}, **extra}


def anthropic_tool(name: str = "get_weather", schema: Any = SCHEMA, **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": "Weather for a city.", "input_schema": schema, **extra}


def json_schema_tool(name: str = "get_weather", schema: Any = SCHEMA) -> dict[str, Any]:
    return {"title": name, "description": "Weather for a city.", **schema}


def function_tool(name: str = "get_weather", schema: Any = SCHEMA) -> FunctionTool:
    return FunctionTool(name=name, description="Weather for a city.", input_schema=schema)


SHAPES: dict[str, Callable[..., Any]] = {
    "openai": openai_tool,
    "anthropic": anthropic_tool,
    "json-schema": json_schema_tool,
    "function-tool": function_tool,
}

# -- tool definitions: four shapes x the rules


@pytest.mark.parametrize("shape", SHAPES)
def test_every_shape_is_the_same_function_tool(shape: str) -> None:
    tool = tool_from_spec(SHAPES[shape]())
    assert isinstance(tool, FunctionTool)
    assert (tool.name, tool.description, tool.input_schema) == (
        "get_weather",
        "Weather for a city.",
        SCHEMA,
    )
    assert tool.executor is None


@pytest.mark.parametrize("shape", SHAPES)
def test_a_bad_schema_is_refused_naming_the_tool_and_where(shape: str) -> None:
    if shape == "function-tool":  # a FunctionTool checks its schema when it is built
        with pytest.raises(InvalidToolSchemaError, match=r"^tool 'get_weather': input_schema"):
            function_tool(schema=BAD_SCHEMA)
        return
    with pytest.raises(InvalidToolSchemaError, match=r"^tools\[2\]: tool 'get_weather'"):
        tool_from_spec(SHAPES[shape](schema=BAD_SCHEMA), where="tools[2]")
    with pytest.raises(InvalidToolSchemaError, match=r"^tool 'get_weather': input_schema"):
        tool_from_spec(SHAPES[shape](schema=BAD_SCHEMA))


@pytest.mark.parametrize("shape", SHAPES)
def test_two_tools_of_one_name_are_refused_naming_both(shape: str) -> None:
    specs = [SHAPES[shape](), SHAPES[shape](name="other"), SHAPES[shape]()]
    with pytest.raises(
        DuplicateToolNameError,
        match=re.escape("tools[2]: two tools are named 'get_weather' (tools[0] too)"),
    ):
        tools_from_specs(specs)


#: The fields of the two dict shapes that carry fields besides the schema, by where they sit.
FIELD_SHAPES = {
    "openai": lambda **f: openai_tool(**f),
    "openai-function": lambda **f: openai_tool(function=f),
    "anthropic": lambda **f: anthropic_tool(**f),
}
WHERE = {"openai": "tools[0].", "openai-function": "tools[0].function.", "anthropic": "tools[0]."}


@pytest.mark.parametrize("shape", FIELD_SHAPES)
def test_strict_is_the_tools_strict_flag_by_one_rule(shape: str) -> None:
    assert tool_from_spec(FIELD_SHAPES[shape](strict=True)).strict
    with pytest.raises(ToolDefinitionError) as refused:
        tool_from_spec(FIELD_SHAPES[shape](strict="yes"), where="tools[0]")
    assert str(refused.value) == f"{WHERE[shape]}strict (tool 'get_weather'): must be true or false"


@pytest.mark.parametrize("shape", FIELD_SHAPES)
@pytest.mark.parametrize(
    "fields",
    [
        {"strict": False},
        {"cache_control": {"type": "ephemeral"}},
        {"defer_loading": False, "input_examples": [], "eager_input_streaming": False},
    ],
    ids=["strict-false", "cache_control", "asking-for-nothing"],
)
def test_what_asks_for_nothing_or_is_a_hint_is_accepted(shape: str, fields: Any) -> None:
    assert tool_from_spec(FIELD_SHAPES[shape](**fields)).input_schema == SCHEMA


@pytest.mark.parametrize("shape", FIELD_SHAPES)
@pytest.mark.parametrize("field", ["defer_loading", "eager_input_streaming", "frobnicate"])
def test_an_unknown_field_is_refused_naming_it_and_the_tool(shape: str, field: str) -> None:
    with pytest.raises(UnsupportedRequestError) as refused:
        tool_from_spec(FIELD_SHAPES[shape](**{field: True}), where="tools[0]")
    assert str(refused.value).startswith(
        f"{WHERE[shape]}{field} (tool 'get_weather') cannot be honoured"
    )


@pytest.mark.parametrize(
    ("spec", "error", "message"),
    [
        ({"type": "web_search_20250305", "name": "web_search"}, UnsupportedRequestError,
         "tools[0]: tool 'web_search' of type 'web_search_20250305' is a server or built-in"),
        ({"type": "custom", "name": "x", "format": {}}, UnsupportedRequestError,
         "tools[0]: tool 'x' of type 'custom' is a server or built-in"),
        ({"type": "object", "properties": {}}, ToolDefinitionError, "tools[0].title: "),
        ({"type": "function", "function": {"parameters": {}}}, ToolDefinitionError,
         "tools[0].function.name: required"),
        ({"name": "x", "input_schema": {}, "description": 3}, ToolDefinitionError,
         "tools[0]: tool 'x': its description must be a string"),
        ("get_weather", ToolDefinitionError, "tools[0]: a tool definition is"),
    ],
    ids=["server-tool", "openai-custom", "schema-without-title", "no-name", "description",
         "not-a-dict"],
)  # fmt: skip
def test_what_is_no_function_tool_is_refused(spec: Any, error: type, message: str) -> None:
    with pytest.raises(error) as refused:
        tool_from_spec(spec, where="tools[0]")
    assert str(refused.value).startswith(message)


# -- tool definitions: every door reads them by the one rule


def _openai_door(spec: dict[str, Any]) -> list[FunctionTool]:
    return chat_request({"messages": [{"role": "user", "content": "hi"}], "tools": [spec]}).tools


def _anthropic_door(spec: dict[str, Any]) -> list[FunctionTool]:
    return parse_request(
        {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}],
         "tools": [spec]}
    ).tools  # fmt: skip


def _langchain_door(spec: dict[str, Any]) -> list[FunctionTool]:
    bound = lc.ChatClaudeAgent().bind_tools([spec])
    return [lc._function_tool(tool) for tool in bound.kwargs["tools"]]  # type: ignore[attr-defined]


def _pydantic_ai_door(spec: dict[str, Any]) -> list[FunctionTool]:
    tool = pai._function_tool(
        ToolDefinition(
            name=spec["name"],
            description=spec["description"],
            parameters_json_schema=spec["input_schema"],
            strict=spec.get("strict"),
        )
    )
    return [tool]


DOORS: dict[
    str, tuple[Callable[[dict[str, Any]], list[FunctionTool]], Callable[..., dict[str, Any]]]
] = {
    "openai": (_openai_door, openai_tool),
    "anthropic": (_anthropic_door, anthropic_tool),
    "langchain": (_langchain_door, anthropic_tool),
    "pydantic-ai": (_pydantic_ai_door, anthropic_tool),
}


@pytest.mark.parametrize("door", DOORS)
def test_every_door_reads_strict_into_the_tools_strict_flag(door: str) -> None:
    call, shape = DOORS[door]
    strict = call(shape(strict=True) if door != "openai" else shape(function={"strict": True}))
    assert [t.strict for t in strict] == [True]
    assert [t.strict for t in call(shape())] == [False]


@pytest.mark.parametrize("door", DOORS)
def test_every_door_refuses_a_bad_schema_naming_the_tool(door: str) -> None:
    call, shape = DOORS[door]
    with pytest.raises(InvalidToolSchemaError, match="tool 'get_weather': input_schema is not"):
        call(shape(schema=BAD_SCHEMA))


# -- tool_choice: the core's semantics

WEATHER, TIME = function_tool(), function_tool("get_time")


@pytest.mark.parametrize(
    ("choice", "allowed", "offered"),
    [
        ("auto", None, ["get_weather", "get_time"]),
        ("required", None, ["get_weather", "get_time"]),
        ("none", None, ["get_weather", "get_time"]),
        (NamedToolChoice(name="get_time"), None, ["get_weather", "get_time"]),
        ("auto", ["get_time"], ["get_time"]),
        ("required", ["get_time", "get_weather"], ["get_weather", "get_time"]),
    ],
)
def test_offered_tools_narrows_to_an_allowed_subset_only(
    choice: ToolChoice, allowed: list[str] | None, offered: list[str]
) -> None:
    assert [t.name for t in offered_tools([WEATHER, TIME], choice, allowed=allowed)] == offered


@pytest.mark.parametrize(
    ("choice", "history", "exposed", "forbid"),
    [
        ("auto", False, ["get_weather", "get_time"], False),
        ("none", False, [], False),
        # The Messages API refuses tool calls in a history without tool definitions.
        ("none", True, ["get_weather", "get_time"], True),
        (NamedToolChoice(name="get_time"), False, ["get_time"], False),
    ],
)
def test_exposed_tools_for_each_choice(
    choice: ToolChoice, history: bool, exposed: list[str], forbid: bool
) -> None:
    tools, forbidden = exposed_tools([WEATHER, TIME], choice, history_holds_calls=history)
    assert ([t.name for t in tools], forbidden) == (exposed, forbid)


NOT_OFFERED = (
    "tool_choice names 'nope', which is not among the request's tools (get_weather); name one "
    "of them or offer the tool"
)


@pytest.mark.parametrize(
    ("tools", "choice", "allowed", "message"),
    [
        ([WEATHER], NamedToolChoice(name="nope"), None, NOT_OFFERED),
        ([WEATHER], "auto", ["nope"], NOT_OFFERED),
        ([], "required", None, REQUIRED_WITHOUT_TOOLS),
        ([WEATHER], "auto", [], "tool_choice allows no tool"),
    ],
)
def test_a_choice_the_tools_cannot_meet_is_refused(
    tools: list[FunctionTool], choice: ToolChoice, allowed: list[str] | None, message: str
) -> None:
    with pytest.raises(UnsupportedRequestError) as refused:
        offered_tools(tools, choice, allowed=allowed)
    assert str(refused.value).startswith(message)


# -- tool_choice: each door's wire shape -> the same core outcome, the same error text


def _openai_choice(choice: Any, tools: list[str]) -> tuple[ToolChoice, list[str]]:
    wire = {"required": "required", "none": "none"}.get(choice) or {
        "type": "function",
        "function": {"name": choice},
    }
    request = chat_request(
        {"messages": [{"role": "user", "content": "hi"}],
         "tools": [openai_tool(name) for name in tools] or None, "tool_choice": wire}
    )  # fmt: skip
    return request.options["tool_choice"], [t.name for t in request.tools]


def _anthropic_choice(choice: Any, tools: list[str]) -> tuple[ToolChoice, list[str]]:
    wire = {"required": {"type": "any"}, "none": {"type": "none"}}.get(choice) or {
        "type": "tool",
        "name": choice,
    }
    call = parse_request(
        {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}],
         "tools": [anthropic_tool(name) for name in tools] or None, "tool_choice": wire}
    )  # fmt: skip
    return call.options["tool_choice"], [t.name for t in call.tools]


def _langchain_choice(choice: Any, tools: list[str]) -> tuple[ToolChoice, list[str]]:
    # ChatAnthropic's and ChatOpenAI's forms: "any"/"required", "none", a tool name.
    request, _ = lc._request(
        ClaudeAgentProvider(),
        [HumanMessage("hi")],
        None,
        {"tools": [anthropic_tool(name) for name in tools], "tool_choice": choice},
    )
    return request.options.tool_choice, [t.name for t in request.tools]


def _pydantic_ai_choice(choice: Any, tools: list[str]) -> tuple[ToolChoice, list[str]]:
    # pydantic-ai's forms: "required", "none", a list of names (one of several: named).
    setting = choice if choice in ("required", "none") else [choice]
    params = ModelRequestParameters(
        function_tools=[
            ToolDefinition(name=name, description="d", parameters_json_schema=SCHEMA)
            for name in [*tools, "other"]
        ]
        if tools
        else [],
        allow_text_output=True,
    )
    try:
        offered, chosen = pai._offered_tools({"tool_choice": setting}, params)
    except UserError as exc:  # pydantic-ai's convention for a bad setting; the same words
        raise UnsupportedRequestError(str(exc)) from None
    return chosen, [t.name for t in offered if t.name != "other"]


CHOICE_DOORS = {
    "openai": _openai_choice,
    "anthropic": _anthropic_choice,
    "langchain": _langchain_choice,
    "pydantic-ai": _pydantic_ai_choice,
}


@pytest.mark.parametrize("door", CHOICE_DOORS)
@pytest.mark.parametrize(
    ("choice", "expected"),
    [("required", "required"), ("none", "none"),
     ("get_weather", NamedToolChoice(name="get_weather"))],
    ids=["required", "none", "named"],
)  # fmt: skip
def test_each_doors_tool_choice_is_the_same_core_choice(
    door: str, choice: str, expected: ToolChoice
) -> None:
    chosen, offered = CHOICE_DOORS[door](choice, ["get_weather"])
    assert chosen == expected
    assert offered == ["get_weather"]


@pytest.mark.parametrize("door", CHOICE_DOORS)
@pytest.mark.parametrize(
    ("choice", "tools", "message"),
    [
        ("nope", ["get_weather"], "tool_choice names 'nope', which is not among the request's"),
        ("required", [], REQUIRED_WITHOUT_TOOLS),
    ],
    ids=["named-not-offered", "required-without-tools"],
)
def test_each_door_says_the_same_for_the_same_mistake(
    door: str, choice: str, tools: list[str], message: str
) -> None:
    with pytest.raises(UnsupportedRequestError) as refused:
        CHOICE_DOORS[door](choice, tools)
    # The gateway's OpenAI error adds its `parameter 'tool_choice': ` before the same words.
    assert message in str(refused.value)


# -- usage: the one sum


def test_usage_counts_cached_input_once_and_every_door_renames_it() -> None:
    usage = Usage(
        input_tokens=3, output_tokens=5, cache_creation_input_tokens=7, cache_read_input_tokens=11
    )
    assert usage.input_total == 21
    assert usage.total_tokens == 26
    assert openai_usage(usage) == {
        "prompt_tokens": 21,
        "completion_tokens": 5,
        "total_tokens": 26,
        "prompt_tokens_details": {"cached_tokens": 11, "cache_write_tokens": 7},
    }
    metadata = lc._usage_metadata(usage)
    assert (metadata["input_tokens"], metadata["total_tokens"]) == (21, 26)
    assert metadata["input_token_details"] == {"cache_read": 11, "cache_creation": 7}
    finish = FinishPart(finish_reason="stop", usage=usage)
    assert finish_attributes(finish)[INPUT_TOKENS] == 21


# -- layering: the rules' modules sit below every door


@pytest.mark.parametrize("module", ["tools", "_tool_choice"])
def test_the_rules_import_no_door_and_no_provider(module: str) -> None:
    import ast
    from pathlib import Path

    import sf_provider

    source = Path(sf_provider.__file__).parent / f"{module}.py"
    imported = {
        node.module or ""
        for node in ast.walk(ast.parse(source.read_text()))
        if isinstance(node, ast.ImportFrom)
    }
    doors = {"provider", "_openai_format", "_anthropic_format", "adapters", "gateway"}
    assert not {name.lstrip(".").split(".")[0] for name in imported} & doors
