"""The package's layers, read from its source (`ast`): which module may import which.

Every import counts: module-level, deferred inside a function, and under `TYPE_CHECKING` (a
type is a dependency too), except in the cycle rule, which is about what Python imports.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

import sf_provider

PACKAGE = Path(sf_provider.__file__).parent
ROOT = "sf_provider"

#: The command-line modules: `cli` and the subcommands it imports on demand, which import its
#: option helpers back. They sit on top of everything; the core never imports them.
COMMANDS = frozenset({"cli", "_check_cli", "_scenarios_cli", "_serve", "_demo"})

#: The tool layer: what a tool call runs through, by every transport (the SDK bridge, the
#: stdio server, `ToolRegistry.call`). It knows nothing of queries.
TOOL_LAYER = ("tools", "_invoke", "_bridge", "registry", "gates")

#: Deferred imports allowed to close a cycle, each with its reason.
DEFERRED_CYCLE_EDGES = {
    ("tools", "_invoke"): "FunctionTool.call and sync executors run through the invocation "
    "layer, which is built on FunctionTool: imported when a tool is called",
}


def _module(path: Path) -> str:
    """`sf_provider.x` for sf_provider/x.py, `sf_provider.a.b` for sf_provider/a/b.py."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in PACKAGE.rglob("*.py")}


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(node: ast.AST, *, typing: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements in `node`; those under `if TYPE_CHECKING:` only when `typing`."""
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
        return
    children: Iterable[ast.AST] = ast.iter_child_nodes(node)
    if isinstance(node, ast.If) and _type_checking(node) and not typing:
        children = node.orelse
    for child in children:
        yield from _imports(child, typing=typing)


def imported(name: str, *, typing: bool = True, source: str | None = None) -> set[str]:
    """The package's modules `name` imports (`source`: as if its text were this). The root
    counts as imported when a name that is no module is taken from it (`from . import X`)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text() if source is None else source)
    found: set[str] = set()
    for node in _imports(tree, typing=typing):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in MODULES}
            continue
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            target = ".".join([*base, *([node.module] if node.module else [])])
        else:
            target = node.module or ""
        names = {f"{target}.{alias.name}" for alias in node.names}
        found |= names & MODULES.keys()
        if target in MODULES and (node.module is not None or names - MODULES.keys()):
            found.add(target)
    return found - {name}


def short(name: str) -> str:
    return name.removeprefix(f"{ROOT}.")


CORE = sorted(
    name
    for name, path in MODULES.items()
    if path.parent == PACKAGE and name != ROOT and short(name) not in COMMANDS
)
FORMATS = [name for name in CORE if short(name).startswith("_") and name.endswith("_format")]


def test_the_rules_see_the_modules_they_name() -> None:
    assert {f"{ROOT}._openai_format", f"{ROOT}._anthropic_format"} <= set(FORMATS)
    assert {f"{ROOT}.{m}" for m in TOOL_LAYER} <= set(CORE)
    # The reader finds imports at module level, deferred ones, and type-only ones.
    assert f"{ROOT}.provider" in imported(f"{ROOT}._check_cli")
    assert f"{ROOT}._process" in imported(f"{ROOT}._pytest_support")
    assert f"{ROOT}.types" in imported(f"{ROOT}.cli")  # `from . import types`
    typed = (
        "if TYPE_CHECKING:\n    from .provider import _Plan\nelse:\n    import sf_provider.types\n"
    )
    assert imported(f"{ROOT}._tracing", source=typed) == {f"{ROOT}.provider", f"{ROOT}.types"}
    assert imported(f"{ROOT}._tracing", source=typed, typing=False) == {f"{ROOT}.types"}
    bridge = f"{ROOT}._bridge"
    assert ROOT in imported(bridge, source="def version():\n    from . import __version__\n")
    assert ROOT not in imported(bridge, source="from ._version import __version__\n")


@pytest.mark.parametrize("name", FORMATS)
def test_no_wire_format_imports_the_provider(name: str) -> None:
    assert f"{ROOT}.provider" not in imported(name)


@pytest.mark.parametrize("name", FORMATS)
def test_no_wire_format_imports_another(name: str) -> None:
    assert not imported(name) & (set(FORMATS) - {name})


@pytest.mark.parametrize("name", [f"{ROOT}._tracing", *(f"{ROOT}.{m}" for m in TOOL_LAYER)])
def test_tracing_and_the_tool_layer_import_no_provider(name: str) -> None:
    assert f"{ROOT}.provider" not in imported(name)


@pytest.mark.parametrize("name", CORE)
def test_no_core_module_imports_the_package_root(name: str) -> None:
    """The root imports `provider` (lazily, by name): the version is `_version`'s."""
    assert ROOT not in imported(name)


def test_no_import_cycle_among_core_modules() -> None:
    modules = {ROOT, *CORE}
    graph = {name: imported(name, typing=False) & modules for name in CORE}
    # The root imports its public names on first use (`__getattr__`), the very modules its
    # `TYPE_CHECKING` block names: a module importing the root imports those.
    graph[ROOT] = imported(ROOT) & modules
    for (source, target), _reason in DEFERRED_CYCLE_EDGES.items():
        edge = (f"{ROOT}.{source}", f"{ROOT}.{target}")
        assert edge[1] in graph[edge[0]], f"{edge} is gone: take it off DEFERRED_CYCLE_EDGES"
        graph[edge[0]].discard(edge[1])
    assert _cycles(graph) == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(map(short, component)))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


#: The front doors: the framework adapters and the gateway.
DOORS = sorted(
    name for name in MODULES if name.startswith((f"{ROOT}.adapters.", f"{ROOT}.gateway."))
)
#: What a door may import of the package's private modules: the one internal interface and the
#: wire formats (a door's parse/render pair); everything else it takes from public modules.
DOOR_INTERFACE = {f"{ROOT}._door", *FORMATS}


def _private(name: str) -> bool:
    return any(part.startswith("_") for part in name.split(".")[1:])


@pytest.mark.parametrize("name", DOORS)
def test_doors_use_public_modules_and_the_one_internal_interface(name: str) -> None:
    own = f"{ROOT}.{short(name).split('.')[0]}."  # a door's own package (gateway._http)
    private = {m for m in imported(name) if _private(m) and not m.startswith(own)}
    assert private <= DOOR_INTERFACE, sorted(private - DOOR_INTERFACE)


def test_the_door_rule_sees_the_doors() -> None:
    assert {f"{ROOT}.adapters.langchain", f"{ROOT}.gateway._http"} <= set(DOORS)
    assert _private(f"{ROOT}._mapping") and not _private(f"{ROOT}.adapters.langchain")
