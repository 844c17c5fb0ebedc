"""`ToolRegistry`: the application's tools with groups, scoping, a safety gate and guidance.

Groups: a tool may carry a `group`. Whether a group is enabled is decided, first match wins, by
1. the environment: `SF_PROVIDER_GROUP_<NAME>=1|0` (also `true`/`false`, `on`/`off`; `<NAME>` is
   the group name upper-cased with every other character than A-Z and 0-9 turned into `_`);
2. the registry's settings: `ToolRegistry(groups={"admin": False})`;
3. the default: enabled.
A disabled group's tools are never exposed to the model. A request may then name the tools
and/or groups it needs (one workflow step); only those are exposed. Naming something that does
not exist, or that is disabled, raises `ProviderCompatibilityError` at dispatch.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ._invoke import invoke_tool
from .errors import DuplicateToolNameError, ProviderCompatibilityError, ToolDefinitionError
from .gates import CallContext, Gate
from .tools import FunctionTool, ToolOutput

__all__ = ["GUIDANCE_TOOL_NAME", "ToolRegistry", "group_env_var"]

#: Name of the optional built-in tool that lists the enabled groups and their tools.
GUIDANCE_TOOL_NAME = "guidance"

_TRUE = {"1", "true", "on", "yes"}
_FALSE = {"0", "false", "off", "no"}


def group_env_var(group: str) -> str:
    """The environment variable that switches `group` on or off."""
    return "SF_PROVIDER_GROUP_" + re.sub(r"[^A-Z0-9]", "_", group.upper())


class ToolRegistry:
    """The tools an application offers, shared by the provider, `sf-provider serve` and checks.

    Example::

        registry = ToolRegistry(
            [FunctionTool.from_function(search, group="read"),
             FunctionTool.from_function(delete_file, group="admin", mutating=True)],
            gate=my_gate,
            groups={"admin": False},   # SF_PROVIDER_GROUP_ADMIN=1 turns it back on
        )
        provider = ClaudeAgentProvider(settings, registry=registry)
        await provider.generate("...", groups=["read"])
    """

    def __init__(
        self,
        tools: Iterable[FunctionTool] = (),
        *,
        gate: Gate | None = None,
        groups: Mapping[str, bool] | None = None,
        guidance: bool = False,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        if gate is not None and not callable(gate):
            raise TypeError(f"gate must be a callable (a Gate), not {type(gate).__name__}")
        # A switch that is not a bool ("false" is truthy) would leave a group on: refused.
        for group, enabled in (groups or {}).items():
            if not isinstance(enabled, bool):
                raise TypeError(
                    f"groups[{group!r}] must be True or False, not {enabled!r} "
                    f"({type(enabled).__name__})"
                )
        self.gate = gate
        self.groups: dict[str, bool] = dict(groups or {})
        self.guidance = guidance
        self._environ = environ
        self._tools: dict[str, FunctionTool] = {}
        self._guidance: FunctionTool | None = None
        for tool in tools:
            self.register(tool)

    @classmethod
    def load(cls, spec: str) -> ToolRegistry:
        """The registry named by `module:attr` (as the `--tools` option of the CLI takes it).

        `attr` may be a `ToolRegistry`, a list of `FunctionTool`, or a callable returning either.
        """
        module_name, _, attr = spec.partition(":")
        if not module_name or not attr:
            raise ValueError(f"--tools takes 'module:attr', got {spec!r}")
        module = importlib.import_module(module_name)
        try:
            value: Any = getattr(module, attr)
        except AttributeError:
            raise ValueError(f"module {module_name!r} has no attribute {attr!r}") from None
        if inspect.isclass(value):
            raise ValueError(f"{spec} is a class; name a ToolRegistry, a list or a factory")
        if callable(value) and not isinstance(value, ToolRegistry | FunctionTool):
            value = value()
        if isinstance(value, ToolRegistry):
            return value
        if isinstance(value, Iterable) and not isinstance(value, str | bytes | Mapping):
            items = list(value)
            if all(isinstance(t, FunctionTool) for t in items):
                return cls(items)
        raise ValueError(
            f"{spec} must be a ToolRegistry, a list of FunctionTool, or a callable returning one; "
            f"got {type(value).__name__}"
        )

    def register(self, tool: FunctionTool) -> FunctionTool:
        """Add `tool`; a second tool with the same name is an error, never an overwrite."""
        if not isinstance(tool, FunctionTool):
            raise TypeError(f"register() takes a FunctionTool, not {type(tool).__name__}")
        if tool.name in self._tools or (self.guidance and tool.name == GUIDANCE_TOOL_NAME):
            raise DuplicateToolNameError(f"a tool named {tool.name!r} is already registered")
        if tool.group is not None:
            switch = group_env_var(tool.group)
            for other in self.all_groups():
                if other != tool.group and group_env_var(other) == switch:
                    raise ToolDefinitionError(
                        f"tool {tool.name!r}: its group {tool.group!r} and the group {other!r} "
                        f"would share the switch {switch}, which could not turn one on or off "
                        f"without the other; rename one of them"
                    )
        self._tools[tool.name] = tool
        return tool

    @property
    def tools(self) -> dict[str, FunctionTool]:
        """Every registered tool by name, enabled or not (the guidance tool excluded)."""
        return dict(self._tools)

    def group_enabled(self, group: str | None) -> bool:
        """Whether tools of `group` may be exposed (tools without a group always may)."""
        if group is None:
            return True
        environ = os.environ if self._environ is None else self._environ
        name = group_env_var(group)
        raw = (environ.get(name) or "").strip().lower()
        if raw in _TRUE | _FALSE:
            return raw in _TRUE
        if raw:  # an operator's switch that cannot be read must not leave the group as it was
            raise ValueError(
                f"{name}={environ.get(name)!r} is not a switch this registry reads: set it to "
                f"1, true, on or yes to enable the group {group!r}, or 0, false, off or no to "
                f"disable it (empty: the registry's own setting)"
            )
        return self.groups.get(group, True)

    def all_groups(self) -> list[str]:
        """Every group some registered tool carries, sorted."""
        return sorted({t.group for t in self._tools.values() if t.group is not None})

    def enabled_tools(self) -> list[FunctionTool]:
        """The tools that may be exposed: enabled groups, plus guidance when it is on."""
        tools = [t for t in self._tools.values() if self.group_enabled(t.group)]
        if self.guidance:
            tools.append(self._guidance_tool())
        return tools

    def select(
        self, tools: Sequence[str] | None = None, groups: Sequence[str] | None = None
    ) -> list[FunctionTool]:
        """The tools one request exposes: all enabled ones, or only those it names.

        `tools` names tools, `groups` names groups; a request naming both gets the union.
        Anything unknown or disabled raises `ProviderCompatibilityError`, naming all of them.
        """
        enabled = self.enabled_tools()
        if tools is None and groups is None:
            return enabled
        problems: list[str] = []
        known_groups = set(self.all_groups())
        for group in groups or ():
            if group not in known_groups:
                problems.append(f"group {group!r} does not exist (groups: {_names(known_groups)})")
            elif not self.group_enabled(group):
                problems.append(
                    f"group {group!r} is disabled; enable it with {group_env_var(group)}=1 or "
                    f"ToolRegistry(groups={{{group!r}: True}})"
                )
        by_name = {t.name: t for t in enabled}
        for name in tools or ():
            if name in by_name:
                continue
            registered = self._tools.get(name)
            if registered is None:
                problems.append(f"tool {name!r} is not registered (tools: {_names(self._tools)})")
            else:
                problems.append(
                    f"tool {name!r} is in the disabled group {registered.group!r}; enable it "
                    f"with {group_env_var(str(registered.group))}=1"
                )
        if problems:
            raise ProviderCompatibilityError(problems)
        wanted_groups = set(groups or ())
        wanted_tools = set(tools or ())
        return [t for t in enabled if t.name in wanted_tools or t.group in wanted_groups]

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        context: CallContext | None = None,
        default_timeout: float | None = None,
    ) -> ToolOutput:
        """Call an enabled tool directly, through the same layer and gate as every transport."""
        tool = next((t for t in self.enabled_tools() if t.name == name), None)
        if tool is None:
            return ToolOutput.from_text(
                f"Unknown tool {name!r}; tools: {_names(t.name for t in self.enabled_tools())}",
                is_error=True,
            )
        return await invoke_tool(
            tool,
            arguments,
            default_timeout=default_timeout,
            gate=self.gate,
            context=context or CallContext(transport="direct"),
        )

    def describe(self) -> str:
        """The enabled groups and their tools, as the guidance tool answers."""
        lines = []
        enabled = [t for t in self._tools.values() if self.group_enabled(t.group)]
        for group in [*self.all_groups(), None]:
            members = [t for t in enabled if t.group == group]
            if not members:
                continue
            lines.append(f"{group or '(no group)'}:")
            lines += [f"- {t.name}: {t.description.splitlines()[0] if t.description else ''}"
                      for t in members]  # fmt: skip
        disabled = [g for g in self.all_groups() if not self.group_enabled(g)]
        if disabled:
            lines.append(f"disabled groups: {', '.join(disabled)}")
        return "\n".join(lines) or "no tools are enabled"

    def _guidance_tool(self) -> FunctionTool:
        # Built once (~0.6 ms: the schema check), and the same executor on every query, so a
        # warm process serving this registry's tools is reused. It describes the live registry.
        if self._guidance is None:
            self._guidance = FunctionTool(
                name=GUIDANCE_TOOL_NAME,
                description="Lists the enabled tool groups and the tools in each. Call it first "
                "when you are unsure which tool fits.",
                input_schema={"type": "object", "properties": {}},
                executor=lambda _arguments: self.describe(),
                read_only=True,
            )
        return self._guidance


def _names(names: Iterable[str]) -> str:
    listed = sorted(names)
    return ", ".join(listed) if listed else "none"
