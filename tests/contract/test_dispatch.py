"""Dispatch through a `ToolRegistry`: what the model is offered, and failing before the CLI starts.

A request the provider cannot serve (an unknown tool or group, a disabled group, a required tool
that is missing, no authentication) raises `ProviderCompatibilityError` from `stream` /
`generate` itself, before any process is spawned or any HTTP request is made.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from sf_provider import (
    GUIDANCE_TOOL_NAME,
    ClaudeAgentProvider,
    CredentialsMissingError,
    FunctionTool,
    GateDecision,
    GateRequest,
    ProviderCompatibilityError,
    ProviderSettings,
    ToolRegistry,
    find_cli,
)
from sf_provider.testing import RecordedRequest, Reply, ScriptedMessagesAPI, reply, text, tool_use

pytestmark = pytest.mark.anyio


def _tool(name: str, group: str | None, **options: Any) -> FunctionTool:
    return FunctionTool(
        name=name,
        description=f"The {name} tool.",
        group=group,
        executor=lambda _arguments: f"{name} done",
        **options,
    )


def _registry(**options: Any) -> ToolRegistry:
    options.setdefault("environ", {})
    options.setdefault("groups", {"admin": False})
    return ToolRegistry(
        [
            _tool("search", "read", read_only=True),
            _tool("fetch", "read", read_only=True),
            _tool("write_note", "write", mutating=True),
            _tool("drop_table", "admin", mutating=True),
        ],
        **options,
    )


def _logging_cli(tmp_path: Path) -> tuple[str, Path]:
    """A `cli_path` running the bundled CLI that first logs each start to the returned file."""
    bundled = Path(find_cli().path or "claude")
    starts = tmp_path / "cli-starts.log"
    cli = tmp_path / "claude"
    cli.write_text(f'#!/bin/sh\necho "$@" >> "{starts}"\nexec "{bundled}" "$@"\n')
    cli.chmod(0o755)
    # The bundled CLI's version stamp, so finding this one does not run it either.
    shutil.copy(bundled.with_name("claude.version"), tmp_path)
    return str(cli), starts


def _bridged(*names: str) -> set[str]:
    return {f"mcp__sf__{n}" for n in names}


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return str(content or "")


# -- refused at dispatch


REFUSED: dict[str, tuple[dict[str, Any], str]] = {
    "requires-an-unregistered-tool": (
        {"require": ["translate"]},
        "required tool 'translate' is not registered",
    ),
    "names-an-unknown-tool": ({"tool_names": ["translate"]}, "tool 'translate' is not registered"),
    "names-an-unknown-group": ({"groups": ["ghosts"]}, "group 'ghosts' does not exist"),
    "needs-a-disabled-group": ({"groups": ["admin"]}, "group 'admin' is disabled"),
    "names-a-tool-of-a-disabled-group": (
        {"tool_names": ["drop_table"]},
        "'drop_table' is in the disabled group 'admin'",
    ),
    "requires-a-tool-outside-its-scope": (
        {"groups": ["read"], "require": ["write_note"]},
        "required tool 'write_note' is registered but not exposed in this scope",
    ),
}


@pytest.mark.parametrize(("options", "problem"), REFUSED.values(), ids=REFUSED.keys())
async def test_stream_refuses_before_anything_is_spawned(
    options: dict[str, Any], problem: str, tmp_path: Path
) -> None:
    cli, starts = _logging_cli(tmp_path)
    async with ScriptedMessagesAPI([reply(text("never sent"))]) as api:
        provider = ClaudeAgentProvider(api.settings(cli_path=cli), registry=_registry())
        with pytest.raises(ProviderCompatibilityError) as info:
            provider.stream("go", **options)

    assert any(problem in p for p in info.value.problems), info.value.problems
    assert api.all_requests == []
    assert not starts.exists(), "the CLI was started"


@pytest.mark.parametrize(("options", "problem"), REFUSED.values(), ids=REFUSED.keys())
async def test_generate_refuses_before_anything_is_spawned(
    options: dict[str, Any], problem: str, tmp_path: Path
) -> None:
    cli, starts = _logging_cli(tmp_path)
    async with ScriptedMessagesAPI([reply(text("never sent"))]) as api:
        provider = ClaudeAgentProvider(api.settings(cli_path=cli), registry=_registry())
        with pytest.raises(ProviderCompatibilityError) as info:
            await provider.generate("go", **options)

    assert any(problem in p for p in info.value.problems), info.value.problems
    assert api.all_requests == []
    assert not starts.exists(), "the CLI was started"


@pytest.mark.cli
async def test_a_servable_request_starts_the_cli_the_refusal_tests_watch(tmp_path: Path) -> None:
    cli, starts = _logging_cli(tmp_path)
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        provider = ClaudeAgentProvider(api.settings(cli_path=cli), registry=_registry())
        assert (await provider.generate("go", groups=["read"])).text == "ok"

    assert starts.exists()


@pytest.mark.usefixtures("no_login")
async def test_missing_authentication_is_refused_before_anything_is_spawned(
    tmp_path: Path,
) -> None:
    cli, starts = _logging_cli(tmp_path)
    async with ScriptedMessagesAPI([reply(text("never sent"))]) as api:
        env = {k: v for k, v in api.settings().env.items() if k != "ANTHROPIC_API_KEY"}
        settings = ProviderSettings(env=env, cli_path=cli)
        provider = ClaudeAgentProvider(settings, registry=_registry())
        with pytest.raises(CredentialsMissingError, match="authentication") as info:
            provider.stream("go")

    # A compatibility problem, and an authentication error, not retryable, on every door.
    assert isinstance(info.value, ProviderCompatibilityError)
    assert info.value.retryable is False
    assert [p for p in info.value.problems if p.startswith("authentication: ")]
    assert info.value.report is not None and not info.value.report.auth.configured
    assert api.all_requests == []
    assert not starts.exists(), "the CLI was started"


@pytest.mark.usefixtures("no_login")
async def test_a_request_missing_several_pieces_names_them_all_at_once() -> None:
    async with ScriptedMessagesAPI([]) as api:
        env = {k: v for k, v in api.settings().env.items() if k != "ANTHROPIC_API_KEY"}
        provider = ClaudeAgentProvider(ProviderSettings(env=env), registry=_registry())
        with pytest.raises(ProviderCompatibilityError) as info:
            provider.stream("go", groups=["ghosts"], require=["translate"])

    problems = info.value.problems
    assert any("group 'ghosts' does not exist" in p for p in problems), problems
    assert "required tool 'translate' is not registered" in problems
    assert any(p.startswith("authentication: ") for p in problems)


async def test_check_capabilities_reports_without_raising() -> None:
    async with ScriptedMessagesAPI([]) as api:
        provider = ClaudeAgentProvider(api.settings(), registry=_registry())
        report = provider.check_capabilities(require=["translate", "search"], groups=["read"])

    assert report.problems == ["required tool 'translate' is not registered"]
    assert report.auth.method == "api-key"
    assert {t.name for t in report.tools if t.exposed} == {"search", "fetch"}
    assert api.all_requests == []


async def test_check_capabilities_of_a_servable_request_is_compatible() -> None:
    async with ScriptedMessagesAPI([]) as api:
        provider = ClaudeAgentProvider(api.settings(), registry=_registry())
        report = provider.check_capabilities(require=["search"])

    assert report.compatible and report.mode == "executor"


# -- what the model is offered (through the real CLI)


@pytest.mark.cli
async def test_a_disabled_groups_tools_are_not_offered_and_enabled_ones_are() -> None:
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        provider = ClaudeAgentProvider(api.settings(), registry=_registry())
        await provider.generate("hi")

    assert set(api.requests[0].tool_names) == _bridged("search", "fetch", "write_note")


@pytest.mark.cli
async def test_an_environment_switch_offers_a_group_the_settings_disable() -> None:
    registry = _registry(environ={"SF_PROVIDER_GROUP_ADMIN": "1"})
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        provider = ClaudeAgentProvider(api.settings(), registry=registry)
        await provider.generate("hi")

    assert "mcp__sf__drop_table" in api.requests[0].tool_names


@pytest.mark.cli
async def test_scoping_by_group_offers_only_that_groups_tools() -> None:
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        provider = ClaudeAgentProvider(api.settings(), registry=_registry())
        await provider.generate("hi", groups=["read"])

    assert set(api.requests[0].tool_names) == _bridged("search", "fetch")


@pytest.mark.cli
async def test_scoping_by_tool_name_offers_only_that_tool() -> None:
    async with ScriptedMessagesAPI([reply(text("ok"))]) as api:
        provider = ClaudeAgentProvider(api.settings(), registry=_registry())
        await provider.generate("hi", tool_names=["write_note"])

    assert api.requests[0].tool_names == ["mcp__sf__write_note"]


def _calls_guidance_then_answers(request: RecordedRequest) -> Reply:
    if not request.tool_results():
        return reply(tool_use(GUIDANCE_TOOL_NAME))
    return reply(text("I know the tools now."))


@pytest.mark.cli
async def test_the_guidance_tool_is_offered_and_lists_the_groups() -> None:
    registry = _registry(guidance=True)
    async with ScriptedMessagesAPI(_calls_guidance_then_answers) as api:
        provider = ClaudeAgentProvider(api.settings(), registry=registry)
        result = await provider.generate("which tools?")

    assert "mcp__sf__guidance" in api.requests[0].tool_names
    (answer,) = api.requests[1].tool_results()
    listing = _result_text(answer)
    assert not answer.get("is_error")
    assert "read:\n- search: The search tool.\n- fetch: The fetch tool." in listing
    assert "write:\n- write_note: The write_note tool." in listing
    assert "disabled groups: admin" in listing
    assert result.text == "I know the tools now."


@pytest.mark.cli
async def test_the_registry_gate_denies_a_call_that_comes_through_the_cli() -> None:
    seen: list[GateRequest] = []
    ran: list[dict[str, Any]] = []

    def gate(request: GateRequest) -> GateDecision:
        seen.append(request)
        return GateDecision.deny("notes are frozen")

    def write(arguments: dict[str, Any]) -> str:
        ran.append(arguments)
        return "written"

    tool = FunctionTool(name="write_note", group="write", mutating=True, executor=write)
    registry = ToolRegistry([tool], gate=gate, environ={})
    script = [reply(tool_use("write_note")), reply(text("ok"))]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(), registry=registry)
        await provider.generate("write it")

    (answer,) = api.requests[1].tool_results()
    assert answer.get("is_error") is True
    assert _result_text(answer) == (
        "Tool 'write_note' was denied by the safety gate: notes are frozen"
    )
    assert ran == []
    assert [r.context.transport for r in seen] == ["sdk-bridge"]
