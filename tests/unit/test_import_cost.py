"""`import sf_provider` costs little on top of `import claude_agent_sdk`.

Deterministic checks, no timing: what the import loads and what it builds. A fresh interpreter
runs each check, since this test process has imported everything already.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys

import pytest

_PROBE = """
import json, sys
import claude_agent_sdk
before = set(sys.modules)
import pydantic
import sf_provider
from sf_provider import capabilities, provider, settings, tools, types
added = sorted(set(sys.modules) - before)
built = sorted(
    f"{module.__name__}.{name}"
    for module in (types, capabilities, tools, provider, settings)
    for name, obj in vars(module).items()
    if isinstance(obj, type)
    and issubclass(obj, pydantic.BaseModel)
    and obj.__module__ == module.__name__
    and obj.__pydantic_complete__
)
print(json.dumps({"added": added, "built": built}))
"""

#: Modules of the package that `import sf_provider` must not load: tests, CLI, adapters.
_OPTIONAL = (
    "sf_provider.testing",
    "sf_provider.scenarios",
    "sf_provider.adapters",
    "sf_provider.cli",
    "sf_provider._serve",
    "sf_provider._demo",
    "sf_provider._check_cli",
    "sf_provider.gateway",
    "sf_provider._openai_format",
    "sf_provider._anthropic_format",
    "sf_provider.gateway._errors",
    "sf_provider._sync",
    "sf_provider._pytest_support",
    "sf_provider._recording",
    "sf_provider._scenarios_cli",
)

#: Modules the provider imports when it prepares its first query, not before: reading the
#: messages (`_messages`) and their ten frozen dataclasses (`_request`) were a fifth of what
#: importing it cost.
_FIRST_QUERY = ("sf_provider._messages", "sf_provider._request")


def _python(code: str) -> str:
    """What `code` prints, run in a fresh interpreter."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout


@functools.cache
def _probe() -> dict[str, list[str]]:
    out = _python(_PROBE)
    result: dict[str, list[str]] = json.loads(out.strip().splitlines()[-1])
    return result


def test_import_loads_no_third_party_module_beyond_the_sdk_and_no_optional_part() -> None:
    probe = _probe()
    added = probe["added"]
    assert "sf_provider" in added
    third_party = [
        name
        for name in added
        if name.split(".")[0] not in sys.stdlib_module_names and name.split(".")[0] != "sf_provider"
    ]
    # jsonschema, mcp, pydantic and anyio come with claude_agent_sdk; langchain, pydantic_ai, an
    # HTTP stack or anything else new would be paid by every application at startup.
    assert third_party == []
    assert [name for name in added if name.startswith(_OPTIONAL)] == []


def test_the_message_types_are_imported_when_the_first_query_is_prepared() -> None:
    assert [name for name in _probe()["added"] if name in _FIRST_QUERY] == []
    probe = (
        "import sys\n"
        "from sf_provider import ClaudeAgentProvider, InvalidMessagesError\n"
        f"first = {_FIRST_QUERY!r}\n"
        "provider = ClaudeAgentProvider()\n"
        "print('BEFORE', [m for m in first if m in sys.modules])\n"
        "try:\n"
        "    provider.stream([{'role': 'robot', 'content': 'hi'}])\n"
        "except InvalidMessagesError as exc:\n"
        "    print('REFUSED', exc)\n"
        "print('AFTER', [m for m in first if m in sys.modules])\n"
    )
    out = _python(probe)
    assert "BEFORE []" in out
    # The deferred import works: the messages are read, and bad ones refused, as before.
    assert "REFUSED message 0: unknown role 'robot'" in out
    assert f"AFTER {list(_FIRST_QUERY)!r}" in out


def test_the_envelope_parser_is_imported_by_single_turn_mode_only() -> None:
    # Executor mode (tools with executors, no tools) streams text as it comes; only single-turn
    # mode holds text back as a possible legacy JSON envelope.
    assert "sf_provider._envelope" not in _probe()["added"]
    probe = (
        "import sys\n"
        "from sf_provider._mapping import _EnvelopeHold\n"
        "executor = _EnvelopeHold(False)\n"
        "print('EXECUTOR', executor.hold('t0'), 'sf_provider._envelope' in sys.modules)\n"
        "single = _EnvelopeHold(True)\n"
        "single.hold('t0')\n"
        "print('HELD', single.add('t0', '{\"tool\": \"get_time\", \"input\": {}}'))\n"
        "print('END', single.end('t0'))\n"
        "text, envelope = single.take()\n"
        "print('CALLS', [(c.tool_name, c.input) for c in envelope.calls])\n"
    )
    out = _python(probe)
    assert "EXECUTOR False False" in out
    assert "HELD None" in out  # still held: it may be an envelope
    assert "END None" in out  # it is one: kept for the end of the reply
    assert "CALLS [('get_time', {})]" in out


def test_public_models_build_their_validators_on_first_use() -> None:
    # defer_build: building ~25 pydantic validators at import was most of its cost.
    assert _probe()["built"] == []


_HEAVY = ("claude_agent_sdk", "mcp", "litellm", "starlette", "uvicorn", "pydantic_ai")


@pytest.mark.parametrize(
    ("argv", "code"),
    [(["--help"], 0), (["gateway", "--help"], 0), (["check", "--bogus"], 2), ([], 2)],
    ids=["help", "gateway-help", "bad-option", "no-command"],
)
def test_the_command_answers_help_and_argument_errors_without_importing_the_sdk(
    argv: list[str], code: int
) -> None:
    probe = (
        "import sys\n"
        "from sf_provider.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit as exc:\n"
        "    print('EXIT', exc.code)\n"
        f"print('LOADED', sorted(m for m in sys.modules if m.split('.')[0] in {_HEAVY!r}))\n"
    )
    out = _python(probe)
    assert f"EXIT {code}" in out
    assert "LOADED []" in out
