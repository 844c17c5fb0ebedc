"""`ToolRegistry`: groups and their switches, request scoping, guidance and `load`."""

from __future__ import annotations

from typing import Any

import pytest

from sf_provider import (
    GUIDANCE_TOOL_NAME,
    DuplicateToolNameError,
    FunctionTool,
    ProviderCompatibilityError,
    ToolDefinitionError,
    ToolRegistry,
    group_env_var,
)


def _tool(name: str, group: str | None = None, **options: Any) -> FunctionTool:
    return FunctionTool(
        name=name,
        description=f"{name} does things.\nMore detail.",
        group=group,
        executor=lambda _: name,
        **options,
    )


def _registry(**options: Any) -> ToolRegistry:
    options.setdefault("environ", {})
    return ToolRegistry(
        [
            _tool("search", "read"),
            _tool("fetch", "read"),
            _tool("write_note", "write", mutating=True),
            _tool("drop_table", "admin", mutating=True),
            _tool("ping"),
        ],
        **options,
    )


def _names(tools: list[FunctionTool]) -> list[str]:
    return [t.name for t in tools]


# -- groups


def test_groups_are_enabled_by_default() -> None:
    registry = _registry()

    assert registry.group_enabled("admin")
    assert _names(registry.enabled_tools()) == [
        "search",
        "fetch",
        "write_note",
        "drop_table",
        "ping",
    ]


def test_settings_disable_a_group_and_hide_its_tools() -> None:
    registry = _registry(groups={"admin": False})

    assert not registry.group_enabled("admin")
    assert "drop_table" not in _names(registry.enabled_tools())
    assert "drop_table" in registry.tools, "a disabled tool stays registered"


def test_tools_without_a_group_are_always_enabled() -> None:
    registry = _registry(groups={"admin": False, "read": False, "write": False})

    assert _names(registry.enabled_tools()) == ["ping"]


def test_environment_switch_on_wins_over_settings_off() -> None:
    registry = _registry(groups={"admin": False}, environ={"SF_PROVIDER_GROUP_ADMIN": "1"})

    assert registry.group_enabled("admin")
    assert "drop_table" in _names(registry.enabled_tools())


def test_environment_switch_off_wins_over_the_default() -> None:
    registry = _registry(environ={"SF_PROVIDER_GROUP_ADMIN": "0"})

    assert not registry.group_enabled("admin")
    assert "drop_table" not in _names(registry.enabled_tools())


@pytest.mark.parametrize(
    ("raw", "enabled"),
    [
        ("true", True),
        ("ON", True),
        ("yes", True),
        ("false", False),
        ("off", False),
        (" no ", False),
    ],
)
def test_environment_switch_accepts_the_usual_words(raw: str, enabled: bool) -> None:
    registry = _registry(groups={"admin": not enabled}, environ={"SF_PROVIDER_GROUP_ADMIN": raw})

    assert registry.group_enabled("admin") is enabled


@pytest.mark.parametrize("setting", [True, False])
def test_an_unreadable_environment_switch_is_an_error_not_the_settings(setting: bool) -> None:
    # An operator's "disabled" used to be ignored: the group stayed as the code set it.
    registry = _registry(groups={"admin": setting}, environ={"SF_PROVIDER_GROUP_ADMIN": "disabled"})

    with pytest.raises(ValueError, match=r"SF_PROVIDER_GROUP_ADMIN='disabled' is not a switch"):
        registry.group_enabled("admin")
    with pytest.raises(ValueError, match="SF_PROVIDER_GROUP_ADMIN"):
        registry.enabled_tools()


def test_an_empty_environment_switch_leaves_the_settings() -> None:
    registry = _registry(groups={"admin": False}, environ={"SF_PROVIDER_GROUP_ADMIN": " "})

    assert registry.group_enabled("admin") is False


@pytest.mark.parametrize("value", ["false", 0, None])
def test_a_group_setting_that_is_not_a_bool_is_refused(value: Any) -> None:
    # "false" is truthy: it would have left the group on.
    with pytest.raises(TypeError, match=r"groups\['admin'\] must be True or False"):
        ToolRegistry([_tool("wipe_db", group="admin")], groups={"admin": value})


def test_a_gate_that_is_not_callable_is_refused() -> None:
    with pytest.raises(TypeError, match="gate must be a callable"):
        ToolRegistry([_tool("wipe_db")], gate="yes")  # type: ignore[arg-type]


def test_a_group_name_with_dashes_maps_to_underscores_in_its_variable() -> None:
    registry = ToolRegistry(
        [_tool("peek", "read-only.v2")], environ={"SF_PROVIDER_GROUP_READ_ONLY_V2": "0"}
    )

    assert group_env_var("read-only.v2") == "SF_PROVIDER_GROUP_READ_ONLY_V2"
    assert not registry.group_enabled("read-only.v2")


@pytest.mark.parametrize(("first", "second"), [("admin", "Admin"), ("read-only", "read_only")])
def test_two_groups_sharing_one_switch_are_refused(first: str, second: str) -> None:
    """`SF_PROVIDER_GROUP_ADMIN=1`, meant for one group, turned on the other too (a group the
    registry disables, say)."""
    registry = ToolRegistry([_tool("peek", first)], groups={second: False}, environ={})

    with pytest.raises(ToolDefinitionError) as info:
        registry.register(_tool("drop", second, mutating=True))
    variable = group_env_var(first)
    assert str(info.value) == (
        f"tool 'drop': its group {second!r} and the group {first!r} would share the switch "
        f"{variable}, which could not turn one on or off without the other; rename one of them"
    )
    assert list(registry.tools) == ["peek"], "nothing registered"


def test_the_registry_reads_os_environ_when_no_environ_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SF_PROVIDER_GROUP_ADMIN", "0")
    registry = ToolRegistry([_tool("drop_table", "admin")])

    assert not registry.group_enabled("admin")


def test_all_groups_lists_each_group_once_sorted() -> None:
    assert _registry().all_groups() == ["admin", "read", "write"]


# -- select (one request's scope)


def test_select_without_names_exposes_every_enabled_tool() -> None:
    registry = _registry(groups={"admin": False})

    assert _names(registry.select()) == ["search", "fetch", "write_note", "ping"]


def test_select_by_tool_names_exposes_only_those() -> None:
    assert _names(_registry().select(tools=["fetch", "ping"])) == ["fetch", "ping"]


def test_select_by_group_exposes_only_that_groups_tools() -> None:
    assert _names(_registry().select(groups=["read"])) == ["search", "fetch"]


def test_select_by_tools_and_groups_exposes_their_union() -> None:
    selected = _registry().select(tools=["ping"], groups=["write"])

    assert _names(selected) == ["write_note", "ping"]


def test_select_with_empty_names_exposes_nothing() -> None:
    assert _registry().select(tools=[]) == []


def test_select_lists_every_unknown_or_disabled_name_at_once() -> None:
    registry = _registry(groups={"admin": False})

    with pytest.raises(ProviderCompatibilityError) as info:
        registry.select(tools=["nope", "drop_table"], groups=["ghosts", "admin"])

    problems = info.value.problems
    assert len(problems) == 4
    assert any("'nope' is not registered" in p and "search" in p for p in problems), problems
    assert any("group 'ghosts' does not exist" in p and "admin, read, write" in p for p in problems)
    assert any(
        "group 'admin' is disabled" in p and "SF_PROVIDER_GROUP_ADMIN=1" in p for p in problems
    )
    assert any(
        "'drop_table' is in the disabled group 'admin'" in p and "SF_PROVIDER_GROUP_ADMIN=1" in p
        for p in problems
    )


def test_select_error_message_lists_each_problem_as_a_bullet() -> None:
    with pytest.raises(ProviderCompatibilityError) as info:
        _registry().select(tools=["nope"], groups=["ghosts"])

    message = str(info.value)
    assert "- tool 'nope' is not registered" in message
    assert "- group 'ghosts' does not exist" in message


# -- registration


def test_registering_a_second_tool_with_the_same_name_is_an_error() -> None:
    registry = ToolRegistry([_tool("search")])

    with pytest.raises(DuplicateToolNameError, match="'search' is already registered"):
        registry.register(_tool("search", "other"))
    assert registry.tools["search"].group is None, "the first tool is kept"


def test_a_tool_may_not_take_the_guidance_name_while_guidance_is_on() -> None:
    with pytest.raises(DuplicateToolNameError):
        ToolRegistry([_tool(GUIDANCE_TOOL_NAME)], guidance=True)


def test_register_refuses_anything_but_a_function_tool() -> None:
    with pytest.raises(TypeError, match="takes a FunctionTool, not dict"):
        ToolRegistry().register({"name": "x"})  # type: ignore[arg-type]


# -- guidance


def test_guidance_is_off_by_default() -> None:
    assert GUIDANCE_TOOL_NAME not in _names(_registry().enabled_tools())


def test_guidance_on_adds_a_read_only_tool_with_an_executor() -> None:
    tools = _registry(guidance=True).enabled_tools()

    guidance = tools[-1]
    assert guidance.name == GUIDANCE_TOOL_NAME
    assert guidance.read_only and guidance.executor is not None
    assert GUIDANCE_TOOL_NAME not in _registry(guidance=True).tools


@pytest.mark.anyio
async def test_guidance_lists_enabled_groups_their_tools_and_the_disabled_groups() -> None:
    registry = _registry(guidance=True, groups={"admin": False})

    output = await registry.call(GUIDANCE_TOOL_NAME, {})

    assert not output.is_error
    assert output.text == (
        "read:\n"
        "- search: search does things.\n"
        "- fetch: fetch does things.\n"
        "write:\n"
        "- write_note: write_note does things.\n"
        "(no group):\n"
        "- ping: ping does things.\n"
        "disabled groups: admin"
    )


@pytest.mark.anyio
async def test_guidance_is_one_tool_that_describes_the_live_registry() -> None:
    # The same tool (and executor) on every query, so a warm process serving it is reused.
    registry = _registry(guidance=True)
    first = registry.select()[-1]
    assert registry.select()[-1] is first
    registry.register(_tool("late", group="read"))

    output = await registry.call(GUIDANCE_TOOL_NAME, {})

    assert "- late: late does things." in output.text


def test_guidance_says_so_when_no_tool_is_enabled() -> None:
    assert ToolRegistry(guidance=True).describe() == "no tools are enabled"


# -- call


@pytest.mark.anyio
async def test_call_runs_an_enabled_tool() -> None:
    output = await _registry().call("search", {})

    assert output.text == "search" and not output.is_error


@pytest.mark.anyio
async def test_call_of_a_disabled_tool_is_an_error_result_listing_the_enabled_ones() -> None:
    output = await _registry(groups={"admin": False}).call("drop_table", {})

    assert output.is_error
    assert output.text.startswith("Unknown tool 'drop_table'; tools: ")
    assert "drop_table" not in output.text.split("tools: ")[1]


# -- load("module:attr")

REGISTRY = ToolRegistry([_tool("loaded")])
TOOL_LIST = [_tool("first"), _tool("second")]
MIXED_LIST = [_tool("first"), "not a tool"]
NOT_A_REGISTRY = 42


def make_registry() -> ToolRegistry:
    return ToolRegistry([_tool("made")])


def make_list() -> list[FunctionTool]:
    return [_tool("made_in_a_list")]


def test_load_returns_a_registry_attribute_as_is() -> None:
    assert ToolRegistry.load(f"{__name__}:REGISTRY") is REGISTRY


def test_load_wraps_a_list_of_tools_in_a_registry() -> None:
    assert list(ToolRegistry.load(f"{__name__}:TOOL_LIST").tools) == ["first", "second"]


def test_load_calls_a_callable_returning_a_registry() -> None:
    assert list(ToolRegistry.load(f"{__name__}:make_registry").tools) == ["made"]


def test_load_calls_a_callable_returning_a_list() -> None:
    assert list(ToolRegistry.load(f"{__name__}:make_list").tools) == ["made_in_a_list"]


@pytest.mark.parametrize("spec", ["no_colon_here", ":REGISTRY", f"{__name__}:"])
def test_load_rejects_a_spec_that_is_not_module_colon_attr(spec: str) -> None:
    with pytest.raises(ValueError, match="takes 'module:attr'") as info:
        ToolRegistry.load(spec)
    assert repr(spec) in str(info.value)


def test_load_names_the_module_and_the_missing_attribute() -> None:
    with pytest.raises(ValueError, match=rf"module '{__name__}' has no attribute 'nope'"):
        ToolRegistry.load(f"{__name__}:nope")


@pytest.mark.parametrize(("attr", "found"), [("NOT_A_REGISTRY", "int"), ("MIXED_LIST", "list")])
def test_load_rejects_an_attribute_of_the_wrong_type_naming_what_it_found(
    attr: str, found: str
) -> None:
    with pytest.raises(ValueError) as info:
        ToolRegistry.load(f"{__name__}:{attr}")
    message = str(info.value)
    assert "must be a ToolRegistry, a list of FunctionTool, or a callable" in message
    assert message.endswith(f"got {found}")


def test_load_of_a_missing_module_raises_an_import_error_naming_it() -> None:
    with pytest.raises(ImportError, match="no_such_module_for_sf_provider"):
        ToolRegistry.load("no_such_module_for_sf_provider:registry")
