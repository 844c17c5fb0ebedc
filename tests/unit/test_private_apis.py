"""Every private name of another library sf-provider uses, each where no public route exists,
inside the version range pyproject.toml pins. A release that moves one fails here first."""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: (module, attribute path, why no public route serves).
PRIVATE = [
    (
        "claude_agent_sdk._internal.transport.subprocess_cli",
        "SubprocessCLITransport",
        "the SDK's own subprocess transport, subclassed to stop an abandoned CLI at once",
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
    (
        "pydantic_ai._instrumentation",
        "get_instructions",
        "the instructions pydantic-ai would send, as its own models compute them",
    ),
    ("pydantic_ai._run_context", "RunContext", "the type of request_stream's run_context"),
]

#: The distribution each private name comes from, and the range pyproject.toml must pin.
PINS = {
    "anyio": ("anyio", "<5"),
    "claude_agent_sdk": ("claude-agent-sdk", "<0.3"),
    "pydantic_ai": ("pydantic-ai-slim", "<3"),
}


@pytest.mark.parametrize(("module", "path", "why"), PRIVATE, ids=[p[1] for p in PRIVATE])
def test_each_private_name_still_exists(module: str, path: str, why: str) -> None:
    target: object = importlib.import_module(module)
    head, _, attribute = path.rpartition(".")
    for name in [n for n in head.split(".") if n]:
        target = getattr(target, name)
    if hasattr(target, attribute):
        return
    # An instance attribute: set in the class's own code.
    assert isinstance(target, type) and f"self.{attribute}" in inspect.getsource(target), why


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
