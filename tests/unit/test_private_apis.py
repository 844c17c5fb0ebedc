"""Every private name of another library sf-provider uses, each where no public route exists,
inside the version range pyproject.toml pins. A release that moves one fails here first, and a
new one in `sf_provider/` fails here until it is listed with its reason."""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import importlib.metadata
import inspect
import pkgutil
import re
import sys
import textwrap
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sf_provider"

#: (module, attribute path, why no public route serves), for the names `sf_provider/` uses.
PRIVATE = [
    (
        "claude_agent_sdk._internal.transport.subprocess_cli",
        "SubprocessCLITransport",
        "the SDK's own subprocess transport, subclassed to stop an abandoned CLI at once",
    ),
    (
        "claude_agent_sdk",
        "ClaudeSDKClient._query",
        "read (getattr) for the client's control-protocol session, which alone can send the "
        "CLI's rewind_conversation request (ADR 0003): the client has no method for it",
    ),
    (
        "claude_agent_sdk._internal.query",
        "Query._send_control_request",
        "the CLI's rewind_conversation control request empties a warm process (ADR 0003)",
    ),
    (
        "claude_agent_sdk._internal.transport.subprocess_cli",
        "SubprocessCLITransport._process",
        "read (getattr) for the CLI's pid and to close its pipes: the transport exposes neither",
    ),
    (
        "anyio._backends._asyncio",
        "Process._process",
        "the asyncio process under anyio's: its transport is closed when the CLI is stopped",
    ),
    (
        "asyncio.subprocess",
        "Process._transport",
        "the pipes of a stopped CLI, closed before its loop ends (else 'Event loop is closed')",
    ),
    # A StreamedResponse subclass's interface: pydantic-ai's docstring of `_get_event_iterator`
    # says to use `_parts_manager` and update `_usage`; there is no public one.
    (
        "pydantic_ai.models",
        "StreamedResponse._get_event_iterator",
        "overridden: the hook that yields a StreamedResponse's events",
    ),
    (
        "pydantic_ai.models",
        "StreamedResponse._parts_manager",
        "builds the response parts from text, thinking and tool-call deltas",
    ),
    ("pydantic_ai.models", "StreamedResponse._usage", "the response's usage, set at the finish"),
    (
        "pydantic_ai._context_size",
        "mark_context_input_tokens",
        "how a model whose usage sums several model calls states the context size (pydantic-ai's "
        "Google and Anthropic models use it): no public route in pydantic-ai 2.60-2.68",
    ),
    # A custom chat model's interface, as LangChain documents it: BaseChatModel's hooks.
    ("langchain_core.language_models", "BaseChatModel._llm_type", "overridden: tracing"),
    ("langchain_core.language_models", "BaseChatModel._identifying_params", "overridden: tracing"),
    (
        "langchain_core.language_models",
        "BaseChatModel._get_ls_params",
        "overridden: LangSmith's provider and model (LangChain says subclasses should)",
    ),
    ("langchain_core.language_models", "BaseChatModel._generate", "overridden: sync generation"),
    ("langchain_core.language_models", "BaseChatModel._agenerate", "overridden: async generation"),
    ("langchain_core.language_models", "BaseChatModel._stream", "overridden: sync streaming"),
    ("langchain_core.language_models", "BaseChatModel._astream", "overridden: async streaming"),
]

#: The same, for names only the tests read.
PRIVATE_IN_TESTS = [
    (
        "claude_agent_sdk._internal.transport.subprocess_cli",
        "SubprocessCLITransport._find_cli",
        "its source, read by tests/unit/test_capabilities.py so that find_cli keeps looking "
        "where the SDK looks: the SDK has no public CLI search",
    ),
]

#: The distribution each private name comes from, and the range pyproject.toml must pin.
PINS = {
    "anyio": ("anyio", "<5"),
    "claude_agent_sdk": ("claude-agent-sdk", "<0.3"),
    "langchain_core": ("langchain-core", "<2"),
    "pydantic_ai": ("pydantic-ai-slim", "<3"),
}


@pytest.mark.parametrize(
    ("module", "path", "why"),
    PRIVATE + PRIVATE_IN_TESTS,
    ids=[p[1] for p in PRIVATE + PRIVATE_IN_TESTS],
)
def test_each_private_name_still_exists(module: str, path: str, why: str) -> None:
    target: object = importlib.import_module(module)
    head, _, attribute = path.rpartition(".")
    for name in [n for n in head.split(".") if n]:
        target = getattr(target, name)
    if hasattr(target, attribute):
        return
    # An instance attribute: set in the class's own code.
    assert isinstance(target, type) and _defines(target, attribute), why


@pytest.mark.parametrize("package", sorted(PINS))
def test_each_library_with_private_names_is_pinned_below_its_next_major(package: str) -> None:
    distribution, upper = PINS[package]
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = [*dependencies["dependencies"]]
    for extra in dependencies["optional-dependencies"].values():
        specs += extra
    pinned = [s for s in specs if re.match(rf"{re.escape(distribution)}\b", s)]
    assert pinned and all(upper in s for s in pinned), pinned
    assert importlib.metadata.version(distribution)


def test_pins_name_exactly_the_libraries_whose_private_names_are_used() -> None:
    roots = {module.split(".")[0] for module, _, _ in PRIVATE + PRIVATE_IN_TESTS}
    assert set(PINS) == roots - set(sys.stdlib_module_names)


# -- the scan of sf_provider/
#
# Two passes. The source pass reads each file: private modules and names imported from another
# library, and private attributes read (`obj._name`, `getattr(obj, "_name")`) that sf_provider
# does not define itself. The class pass imports each module: private names a class of
# sf_provider defines, reads or assigns on `self` that a base class of another library defines
# (an overridden hook, an inherited field).


@dataclass(frozen=True)
class Use:
    """A private name of another library: `pkg._mod.Name` (imported) or `._name` (an
    attribute read, assigned or overridden, or a string given to getattr and the like)."""

    name: str
    where: str


_ATTRIBUTE_FUNCTIONS = frozenset({"getattr", "hasattr", "setattr", "delattr"})


def _private(name: str) -> bool:
    return (
        name.startswith("_") and name != "_" and not (name.startswith("__") and name.endswith("__"))
    )


def own_names(trees: Iterable[ast.Module]) -> frozenset[str]:
    """The private names the scanned code defines itself (functions, classes, module and class
    variables, attributes it assigns): reading one is not a use of another library. A name of
    another library that the code also defines is not told apart here (the class pass finds
    those on base classes)."""
    names: set[str] = set()
    for tree in trees:
        scopes: list[ast.Module | ast.ClassDef] = [tree]
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            if isinstance(node, ast.ClassDef):
                scopes.append(node)
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
        for scope in scopes:
            names.update(_body_names(scope))
    return frozenset(n for n in names if _private(n))


def _body_names(scope: ast.Module | ast.ClassDef) -> dict[str, int]:
    """Names a module or class body binds (defs and assignments), with their lines."""
    names: dict[str, int] = {}
    for statement in scope.body:
        targets: list[ast.expr] = []
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.setdefault(statement.name, statement.lineno)
        elif isinstance(statement, ast.Assign):
            targets = statement.targets
        elif isinstance(statement, ast.AnnAssign | ast.AugAssign):
            targets = [statement.target]
        for target in targets:
            for node in ast.walk(target):
                if isinstance(node, ast.Name):
                    names.setdefault(node.id, statement.lineno)
    return names


def _in_own_package(node: ast.expr) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id == "sf_provider"


def private_uses(tree: ast.Module, filename: str, own: frozenset[str]) -> list[Use]:
    """The source pass over one file."""
    uses: list[Use] = []

    def use(name: str, node: ast.stmt | ast.expr) -> None:
        uses.append(Use(name, f"{filename}:{node.lineno}"))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] != "sf_provider" and any(_private(p) for p in parts):
                    use(alias.name, node)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                parts = [*node.module.split("."), alias.name]
                if parts[0] != "sf_provider" and any(_private(p) for p in parts):
                    use(".".join(parts), node)
        elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Store):
            if _private(node.attr) and node.attr not in own and not _in_own_package(node):
                use(f".{node.attr}", node)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _ATTRIBUTE_FUNCTIONS
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            name = node.args[1].value
            if _private(name) and name not in own:
                use(f".{name}", node)
    return uses


def inherited_uses(cls: type) -> list[Use]:
    """The class pass over one class: its private names (body definitions, `self._x`) that a
    base class from another library defines (as a class attribute, a dataclass field or
    `self._x` in its source)."""
    foreign = [
        base
        for base in cls.__mro__[1:]
        if base.__module__.split(".")[0] not in {"sf_provider", "builtins"}
    ]
    if not foreign:
        return []
    lines, first = inspect.getsourcelines(cls)
    node = ast.parse(textwrap.dedent("".join(lines))).body[0]
    assert isinstance(node, ast.ClassDef)
    names = _body_names(node)
    for attribute in ast.walk(node):
        if (
            isinstance(attribute, ast.Attribute)
            and isinstance(attribute.value, ast.Name)
            and attribute.value.id in {"self", "cls"}
        ):
            names.setdefault(attribute.attr, attribute.lineno)
    where = inspect.getsourcefile(cls) or cls.__module__
    if Path(where).is_relative_to(ROOT):
        where = str(Path(where).relative_to(ROOT))
    return [
        Use(f".{name}", f"{where}:{first + line - 1}")
        for name, line in names.items()
        if _private(name) and any(_defines(base, name) for base in foreign)
    ]


def _defines(base: type, name: str) -> bool:
    if name in vars(base):
        return True
    if dataclasses.is_dataclass(base) and name in {f.name for f in dataclasses.fields(base)}:
        return True
    try:
        source = inspect.getsource(base)
    except (OSError, TypeError):
        return False
    return re.search(rf"\bself\.{re.escape(name)}\b", source) is not None


def _keys(entry: tuple[str, str, str]) -> set[str]:
    """What a listed name allows: importing its module or any part of its path from it, and
    reading, assigning or overriding its last attribute when that is private."""
    module, path, _ = entry
    parts = path.split(".")
    keys = {module} | {".".join([module, *parts[: i + 1]]) for i in range(len(parts))}
    return keys | ({f".{parts[-1]}"} if _private(parts[-1]) else set())


def scan(sources: Mapping[str, str]) -> list[Use]:
    """The source pass over `sources` ({filename: source})."""
    trees = {name: ast.parse(text, name) for name, text in sources.items()}
    own = own_names(trees.values())
    return [use for name, tree in trees.items() for use in private_uses(tree, name, own)]


def unlisted(uses: Iterable[Use], listed: Iterable[tuple[str, str, str]] = PRIVATE) -> list[str]:
    """A failure message for each use that `listed` does not name."""
    allowed = set().union(*(_keys(entry) for entry in listed))
    return [
        f"{u.where}: {u.name!r} is a private name of another library. Use a public route, or "
        f"list it in PRIVATE in tests/unit/test_private_apis.py with the reason no public route "
        f"serves (and pin its library below the next major in pyproject.toml)"
        for u in uses
        if u.name not in allowed
    ]


#: Names spelt like private ones that their library documents as public.
DOCUMENTED = {"._exit": "os._exit, documented: sf-provider serve exits without joining threads"}


@functools.cache
def package_uses() -> tuple[Use, ...]:
    """Both passes over sf_provider/."""
    sources = {
        str(path.relative_to(ROOT)): path.read_text(encoding="utf-8")
        for path in sorted(PACKAGE.rglob("*.py"))
    }
    uses = scan(sources)
    for info in pkgutil.walk_packages([str(PACKAGE)], "sf_provider."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == info.name:
                uses += inherited_uses(value)
    return tuple(u for u in uses if u.name not in DOCUMENTED)


def test_sf_provider_uses_no_private_name_of_another_library_that_is_not_listed() -> None:
    problems = unlisted(package_uses())

    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(("module", "path", "why"), PRIVATE, ids=[p[1] for p in PRIVATE])
def test_each_listed_private_name_is_still_used(module: str, path: str, why: str) -> None:
    used = {u.name for u in package_uses()}

    assert used & _keys((module, path, why)), f"{module}.{path} is no longer used: unlist it"


SYNTHETIC = """
import claude_agent_sdk._internal.message_parser
import pydantic_ai.messages
from anyio._core._eventloop import get_async_backend
from langchain_core import _api
from mcp.server import _helpers
from pydantic_ai import Agent
from pydantic_ai._agent_graph import GraphAgentState
from sf_provider._process import CLISession

from . import _history


class Mine:
    def __init__(self) -> None:
        self._mine = 1

    def _helper(self) -> int:
        return self._mine


def run(client, model):
    client._session.send()
    getattr(model, "_hidden_state", None)
    hasattr(model, "public")
    return model.__class__, Mine()._helper(), sf_provider._process
"""


def test_the_source_pass_finds_each_kind_of_new_private_name() -> None:
    uses = scan({"synthetic.py": SYNTHETIC})

    assert sorted(u.name for u in uses) == [
        "._hidden_state",
        "._session",
        "anyio._core._eventloop.get_async_backend",
        "claude_agent_sdk._internal.message_parser",
        "langchain_core._api",
        "mcp.server._helpers",
        "pydantic_ai._agent_graph.GraphAgentState",
    ]
    problems = unlisted(uses)
    assert len(problems) == len(uses)
    assert problems[0].startswith("synthetic.py:2: 'claude_agent_sdk._internal.message_parser' ")
    assert "Use a public route, or list it in PRIVATE" in problems[0]


def test_the_source_pass_accepts_a_listed_private_name() -> None:
    source = (
        "from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport\n"
        "async def rewind(query):\n"
        "    return await query._send_control_request({})\n"
    )

    assert unlisted(scan({"listed.py": source})) == []


class _Library:
    """Stands for a class of another library (this module is not sf_provider)."""

    _hook_default = None

    def __init__(self) -> None:
        self._state = 0

    def _hook(self) -> None: ...


class _Subclass(_Library):
    _own = 1

    def _hook(self) -> None:
        self._state += 1

    def public(self) -> int:
        return self._own


def test_the_class_pass_finds_an_overridden_hook_and_an_inherited_attribute() -> None:
    uses = inherited_uses(_Subclass)

    assert [u.name for u in uses] == ["._hook", "._state"]
    assert uses[0].where.startswith("tests/unit/test_private_apis.py:")
    assert len(unlisted(uses)) == 2
