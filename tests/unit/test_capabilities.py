"""Capability checks: the CLI, authentication, and each tool as one request would see it."""

from __future__ import annotations

import ast
import inspect
import os
import pwd
import re
import stat
import textwrap
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk._internal.transport.subprocess_cli import SubprocessCLITransport

from sf_provider import (
    GUIDANCE_TOOL_NAME,
    CapabilityReport,
    ClaudeAgentProvider,
    FunctionTool,
    GateDecision,
    ProviderCompatibilityError,
    ProviderSettings,
    ToolCapability,
    ToolRegistry,
    capabilities,
    check_capabilities,
    ensure_capabilities,
    find_cli,
)
from sf_provider.capabilities import _CLI_LOCATIONS, check_auth, version_known

SECRET = "sk-ant-very-secret-value-0123456789"
#: An environment in which the CLI is authenticated, so auth adds no problem.
AUTHED = {"ANTHROPIC_API_KEY": SECRET}


def _tool(
    name: str, group: str | None = None, *, executor: bool = True, **options: Any
) -> FunctionTool:
    return FunctionTool(
        name=name, group=group, executor=(lambda _: name) if executor else None, **options
    )


def _registry(**options: Any) -> ToolRegistry:
    options.setdefault("environ", {})
    return ToolRegistry(
        [
            _tool("search", "read"),
            _tool("manual", "read", executor=False),
            _tool("write_note", "write", mutating=True),
            _tool("drop_table", "admin", mutating=True),
        ],
        **options,
    )


def _check(registry: ToolRegistry | None = None, **options: Any) -> CapabilityReport:
    options.setdefault("environ", AUTHED)
    return check_capabilities(ProviderSettings(), registry, **options)


def _by_name(report: CapabilityReport) -> dict[str, ToolCapability]:
    return {t.name: t for t in report.tools}


def _executable(path: Path, body: str) -> Path:
    path.write_text(body, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


# -- find_cli


def test_find_cli_finds_the_bundled_cli_and_its_version() -> None:
    status = find_cli()

    assert status.found and status.problem is None
    assert status.path is not None and Path(status.path).is_file()
    assert Path(status.path).parent.name == "_bundled"
    assert status.version and re.match(r"\d+\.\d+\.\d+", status.version)


def test_find_cli_reports_a_cli_path_that_does_not_exist(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-claude")

    status = find_cli(missing)

    assert not status.found
    assert status.path == missing
    assert status.problem == f"ProviderSettings.cli_path {missing!r} is not an executable file"


def test_find_cli_reports_a_cli_path_that_is_not_executable(tmp_path: Path) -> None:
    plain = tmp_path / "claude"
    plain.write_text("#!/bin/sh\n", encoding="utf-8")

    status = find_cli(str(plain))

    assert not status.found and status.problem and "not an executable file" in status.problem


def test_find_cli_asks_a_cli_path_for_its_version(tmp_path: Path) -> None:
    cli = _executable(tmp_path / "claude", '#!/bin/sh\necho "9.8.7 (Claude Code)"\n')

    status = find_cli(str(cli))

    assert status.found and status.path == str(cli)
    assert status.version == "9.8.7"


def test_find_cli_reports_a_cli_path_that_is_not_claude_code(tmp_path: Path) -> None:
    # It was reported found (version 'hi'), and every query died with "lost the connection".
    other = _executable(tmp_path / "other", '#!/bin/sh\necho "hi"\n')

    status = find_cli(str(other))

    assert not status.found
    assert status.problem
    assert "did not answer --version as the Claude Code CLI does" in status.problem


def test_a_version_that_timed_out_is_asked_again_at_the_next_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # It was remembered: a `--version` slow once (a loaded machine) refused the CLI for good.
    hang = tmp_path / "hang"
    cli = _executable(
        tmp_path / "claude",
        f'#!/bin/sh\nif [ -e {hang} ]; then exec sleep 600; fi\necho "9.8.7 (Claude Code)"\n',
    )
    hang.touch()
    monkeypatch.setattr(capabilities, "_VERSION_TIMEOUT_SECONDS", 0.2)
    timed_out = find_cli(str(cli))
    remembered = version_known(str(cli))
    hang.unlink()
    monkeypatch.setattr(capabilities, "_VERSION_TIMEOUT_SECONDS", 600)

    answered = find_cli(str(cli))

    assert not timed_out.found and not remembered
    assert answered.found and answered.version == "9.8.7"
    assert version_known(str(cli))


@pytest.mark.parametrize("answer", ["echo hi", "echo hi; exit 3"])
def test_a_program_that_answers_not_as_the_cli_does_is_asked_once(
    tmp_path: Path, answer: str
) -> None:
    asked = tmp_path / "asked"
    other = _executable(tmp_path / "other", f"#!/bin/sh\necho x >> {asked}\n{answer}\n")

    first, second = find_cli(str(other)), find_cli(str(other))

    assert not first.found and not second.found and first.problem == second.problem
    assert asked.read_text() == "x\n"


def test_find_cli_reports_one_version_for_one_binary_however_it_is_found(tmp_path: Path) -> None:
    bundled = find_cli()
    assert bundled.path is not None
    link = tmp_path / "claude"
    link.symlink_to(bundled.path)

    assert find_cli(str(link)).version == bundled.version


def test_a_missing_cli_path_is_a_problem_of_the_report(tmp_path: Path) -> None:
    settings = ProviderSettings(cli_path=str(tmp_path / "nope"))

    report = check_capabilities(settings, environ=AUTHED)

    assert not report.cli.found
    assert report.problems == [report.cli.problem]


@pytest.mark.parametrize("setting", ["cwd", "TMPDIR"])
def test_a_working_or_temp_directory_that_does_not_exist_is_a_problem(
    tmp_path: Path, setting: str
) -> None:
    missing = str(tmp_path / "nope")
    settings = (
        ProviderSettings(cwd=missing)
        if setting == "cwd"
        else ProviderSettings(env={"TMPDIR": missing})
    )

    problems = check_capabilities(settings, environ=AUTHED).problems

    assert len(problems) == 1
    assert setting in problems[0]
    assert f"{missing!r} is not a directory" in problems[0]
    (tmp_path / "nope").mkdir()
    assert check_capabilities(settings, environ=AUTHED).problems == []


def _sdk_cli_search() -> tuple[str, list[list[str]]]:
    """The SDK's own CLI search (`SubprocessCLITransport._find_cli`, listed in
    tests/unit/test_private_apis.py): its source and each `locations = [...]` list in it."""
    source = textwrap.dedent(inspect.getsource(SubprocessCLITransport._find_cli))
    lists: list[list[str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "locations":
            assert isinstance(node.value, ast.List), ast.unparse(node)
            lists.append([_location(element) for element in node.value.elts])
    return source, lists


def _location(node: ast.expr) -> str:
    """`Path.home() / "x"` -> "x" (under the home directory); `Path("/x")` -> "/x"."""
    if isinstance(node, ast.BinOp):
        node = node.right
    elif isinstance(node, ast.Call):
        node = node.args[0]
    value = ast.literal_eval(node)
    assert isinstance(value, str), ast.unparse(node)
    return value


def test_find_cli_looks_in_the_places_the_sdk_looks_in_its_order() -> None:
    source, lists = _sdk_cli_search()
    posix = [found for found in lists if not any(p.endswith(".exe") for p in found)]

    assert posix == [list(_CLI_LOCATIONS)], "update _CLI_LOCATIONS in sf_provider/capabilities.py"
    # The bundled binary first, then `claude` on PATH, then those locations.
    steps = ["_find_bundled_cli()", 'which("claude")', f'"{_CLI_LOCATIONS[0]}"']
    where = [source.index(step) for step in steps]
    assert where == sorted(where), steps


@pytest.fixture
def no_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No bundled CLI, nothing on PATH and an empty home directory (returned)."""
    monkeypatch.setattr(
        "sf_provider.capabilities._bundled_cli", lambda: tmp_path / "no-sdk" / "claude"
    )
    monkeypatch.setenv("PATH", "")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def _skip_when_the_machine_has_a_cli_before(location: str) -> None:
    system = Path("/usr/local/bin/claude")
    if _CLI_LOCATIONS.index(location) > _CLI_LOCATIONS.index(str(system)) and system.exists():
        pytest.skip(f"{system} exists on this machine and comes first")


@pytest.mark.parametrize("location", [p for p in _CLI_LOCATIONS if not p.startswith("/")])
def test_find_cli_finds_a_cli_in_a_home_location_when_there_is_no_bundled_one(
    no_cli: Path, location: str
) -> None:
    _skip_when_the_machine_has_a_cli_before(location)
    cli = no_cli / location
    cli.parent.mkdir(parents=True)
    _executable(cli, '#!/bin/sh\necho "1.2.3 (Claude Code)"\n')

    status = find_cli()

    assert status.found and status.path == str(cli) and status.version == "1.2.3"


def test_find_cli_takes_the_first_home_location_in_the_sdks_order(no_cli: Path) -> None:
    first, last = (no_cli / _CLI_LOCATIONS[0], no_cli / _CLI_LOCATIONS[-1])
    for cli in (last, first):
        cli.parent.mkdir(parents=True)
        _executable(cli, '#!/bin/sh\necho "1.2.3 (Claude Code)"\n')

    assert find_cli().path == str(first)


def test_find_cli_prefers_claude_on_path_to_a_home_location(
    no_cli: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home_cli = no_cli / _CLI_LOCATIONS[0]
    home_cli.parent.mkdir(parents=True)
    _executable(home_cli, "#!/bin/sh\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    on_path = _executable(bin_dir / "claude", '#!/bin/sh\necho "4.5.6 (Claude Code)"\n')
    monkeypatch.setenv("PATH", str(bin_dir))

    assert find_cli().path == str(on_path)


def test_find_cli_reports_a_file_the_sdk_would_run_but_cannot(no_cli: Path) -> None:
    cli = no_cli / _CLI_LOCATIONS[0]
    cli.parent.mkdir(parents=True)
    cli.write_text("#!/bin/sh\n", encoding="utf-8")

    status = find_cli()

    assert not status.found and status.path == str(cli)
    assert status.problem == (
        f"the Claude Code CLI at {cli} is not executable (the SDK would run it): make it "
        f"executable, remove it, or set ProviderSettings.cli_path"
    )


def test_find_cli_names_every_place_it_looked_when_there_is_no_cli(no_cli: Path) -> None:
    _skip_when_the_machine_has_a_cli_before(_CLI_LOCATIONS[-1])

    status = find_cli()

    assert not status.found and status.problem is not None
    places = [str(no_cli.parent / "no-sdk" / "claude"), "`claude` on PATH"]
    places += [str(no_cli / p) for p in _CLI_LOCATIONS]
    assert all(place in status.problem for place in places), status.problem
    assert "ProviderSettings.cli_path" in status.problem


# -- check_auth


@pytest.mark.parametrize(
    ("var", "method"),
    [
        ("ANTHROPIC_API_KEY", "api-key"),
        ("ANTHROPIC_AUTH_TOKEN", "auth-token"),
        ("CLAUDE_CODE_OAUTH_TOKEN", "oauth-token"),
    ],
)
def test_check_auth_recognises_a_key_or_token_in_the_environment(var: str, method: str) -> None:
    status = check_auth(ProviderSettings(), {var: SECRET})

    assert status.configured
    assert status.method == method
    assert status.detail == f"{var} is set"


@pytest.mark.parametrize(
    "var", ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"]
)
def test_the_report_never_contains_the_secret(var: str) -> None:
    report = check_capabilities(ProviderSettings(env={var: SECRET}), environ={var: SECRET})

    assert report.auth.configured
    assert SECRET not in report.model_dump_json()
    assert SECRET not in repr(report)


def test_check_auth_reads_the_settings_env_too() -> None:
    status = check_auth(ProviderSettings(env={"ANTHROPIC_AUTH_TOKEN": SECRET}), {})

    assert status.method == "auth-token"


def test_check_auth_ignores_an_empty_key() -> None:
    status = check_auth(ProviderSettings(), {"ANTHROPIC_API_KEY": "", "HOME": "/nonexistent"})

    assert not status.configured


@pytest.mark.parametrize(
    "var", ["CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY"]
)
def test_check_auth_recognises_a_cloud_provider_switch_the_app_asked_for(
    var: str, tmp_path: Path
) -> None:
    asked = check_auth(ProviderSettings(env={var: "1"}), {"HOME": str(tmp_path)})
    not_isolated = check_auth(ProviderSettings(isolate=False), {var: "1"})
    # An isolated query does not pass the environment's switch on: not the CLI's method.
    environment = check_auth(ProviderSettings(), {var: "1", "HOME": str(tmp_path)})

    assert asked.configured and asked.method == "cloud" and var in asked.detail
    assert not_isolated.method == "cloud"
    assert not environment.configured
    assert f"{var} is set in the environment" in environment.detail


def test_a_cloud_switch_with_an_explicit_base_url_is_a_problem_not_a_silent_override(
    tmp_path: Path,
) -> None:
    env = {"CLAUDE_CODE_USE_BEDROCK": "1", "ANTHROPIC_BASE_URL": "https://proxy.example"}
    report = check_capabilities(ProviderSettings(env=env), environ={"HOME": str(tmp_path)})

    [problem] = [p for p in report.problems if "ANTHROPIC_BASE_URL" in p]
    assert "CLAUDE_CODE_USE_BEDROCK" in problem and "https://proxy.example" in problem


def test_check_auth_ignores_a_cloud_switch_that_is_off(tmp_path: Path) -> None:
    status = check_auth(ProviderSettings(), {"CLAUDE_CODE_USE_BEDROCK": "0", "HOME": str(tmp_path)})

    assert not status.configured


def test_check_auth_finds_a_credentials_file_in_claude_config_dir(tmp_path: Path) -> None:
    credentials = tmp_path / ".credentials.json"
    credentials.write_text(f'{{"claudeAiOauth": {{"accessToken": "{SECRET}"}}}}', "utf-8")

    status = check_auth(ProviderSettings(), {"CLAUDE_CONFIG_DIR": str(tmp_path)})

    assert status.configured and status.method == "credentials-file"
    assert str(credentials) in status.detail
    assert SECRET not in status.model_dump_json()


def test_check_auth_finds_a_credentials_file_under_home(tmp_path: Path) -> None:
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / ".credentials.json").write_text("{}", "utf-8")

    status = check_auth(ProviderSettings(), {"HOME": str(tmp_path)})

    assert status.method == "credentials-file"


def test_a_login_found_in_the_settings_config_dir_reaches_the_isolated_query(
    tmp_path: Path,
) -> None:
    from sf_provider.provider import _isolated_dirs

    login = tmp_path / "login"
    login.mkdir()
    (login / ".credentials.json").write_text("{}", "utf-8")
    settings = ProviderSettings(env={"CLAUDE_CONFIG_DIR": str(login)})
    assert check_auth(settings, {}).method == "credentials-file"
    workdir = tmp_path / "query"
    workdir.mkdir()

    dirs = _isolated_dirs(workdir, dict(settings.env))

    assert (Path(dirs["CLAUDE_CONFIG_DIR"]) / ".credentials.json").is_file()


def test_a_blank_key_in_the_settings_hides_the_environment_s_and_the_login_is_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `env={"ANTHROPIC_API_KEY": ""}` keeps the machine's key from the CLI: the login answers.
    # The copy read the environment's key past the blank, so the CLI got neither.
    from sf_provider.provider import _isolated_dirs

    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    login = tmp_path / "login"
    login.mkdir()
    (login / ".credentials.json").write_text("{}", "utf-8")
    settings = ProviderSettings(env={"ANTHROPIC_API_KEY": "", "CLAUDE_CONFIG_DIR": str(login)})
    assert check_auth(settings).method == "credentials-file"
    workdir = tmp_path / "query"
    workdir.mkdir()

    dirs = _isolated_dirs(workdir, dict(settings.env))

    assert (Path(dirs["CLAUDE_CONFIG_DIR"]) / ".credentials.json").is_file()


def test_check_auth_without_anything_says_how_to_authenticate(tmp_path: Path) -> None:
    status = check_auth(ProviderSettings(), {"HOME": str(tmp_path)})

    assert not status.configured and status.method == "none"
    assert "ANTHROPIC_API_KEY" in status.detail and "log in" in status.detail


def test_missing_authentication_is_a_problem_of_the_report(tmp_path: Path) -> None:
    report = check_capabilities(ProviderSettings(), environ={"HOME": str(tmp_path)})

    assert report.problems == [f"authentication: {report.auth.detail}"]
    assert not report.compatible


@pytest.fixture
def no_home(monkeypatch: pytest.MonkeyPatch) -> None:
    """No HOME and no passwd entry for this user: a container running as an arbitrary uid."""
    monkeypatch.delenv("HOME", raising=False)

    def no_entry(uid: int) -> pwd.struct_passwd:
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.setattr(pwd, "getpwuid", no_entry)


@pytest.mark.usefixtures("no_home")
def test_check_auth_without_a_home_directory_says_how_to_authenticate() -> None:
    # It raised "RuntimeError: Could not determine home directory."
    status = check_auth(ProviderSettings(), {})

    assert not status.configured and status.method == "none"
    assert "ANTHROPIC_API_KEY" in status.detail


@pytest.mark.usefixtures("no_home")
def test_check_auth_without_a_home_directory_reads_the_login_in_claude_config_dir(
    tmp_path: Path,
) -> None:
    (tmp_path / ".credentials.json").write_text("{}", "utf-8")

    status = check_auth(ProviderSettings(), {"CLAUDE_CONFIG_DIR": str(tmp_path)})

    assert status.method == "credentials-file"


@pytest.mark.usefixtures("no_home")
def test_isolate_false_without_a_home_directory_is_a_problem() -> None:
    # The CLI exits at start ("ENOENT: no such file or directory, uv_os_homedir"), and the
    # query failed with a page of its minified source as the error message.
    report = check_capabilities(ProviderSettings(isolate=False), environ=AUTHED)

    [problem] = report.problems
    assert "isolate=False" in problem and "no passwd entry" in problem
    assert "Set HOME" in problem and "isolate=True" in problem
    assert check_capabilities(ProviderSettings(isolate=True), environ=AUTHED).problems == []
    with_home = ProviderSettings(isolate=False, env={"HOME": "/home/app"})
    assert check_capabilities(with_home, environ=AUTHED).problems == []


def test_the_environment_key_outranks_a_login(tmp_path: Path) -> None:
    (tmp_path / ".credentials.json").write_text("{}", "utf-8")

    status = check_auth(
        ProviderSettings(), {"CLAUDE_CONFIG_DIR": str(tmp_path), "ANTHROPIC_API_KEY": SECRET}
    )

    assert status.method == "api-key"


# -- per-tool fields


def test_each_registered_tool_is_reported_with_its_facts() -> None:
    gate = lambda _request: GateDecision.allow()  # noqa: E731
    report = _check(_registry(gate=gate, groups={"admin": False}))

    assert _by_name(report) == {
        "search": ToolCapability(
            name="search", registered=True, exposed=True, has_executor=True, schema_valid=True,
            gated=False, group="read",
        ),
        "manual": ToolCapability(
            name="manual", registered=True, exposed=True, has_executor=False, schema_valid=True,
            gated=False, group="read",
        ),
        "write_note": ToolCapability(
            name="write_note", registered=True, exposed=True, has_executor=True,
            schema_valid=True, gated=True, mutating=True, group="write",
        ),
        "drop_table": ToolCapability(
            name="drop_table", registered=True, exposed=False, has_executor=True,
            schema_valid=True, gated=True, mutating=True, group="admin", group_enabled=False,
        ),
    }  # fmt: skip


def test_a_mutating_tool_without_a_gate_is_not_gated() -> None:
    tool = _by_name(_check(_registry()))["write_note"]

    assert tool.mutating and not tool.gated


def test_a_scope_exposes_only_the_named_tools() -> None:
    report = _check(_registry(), tool_names=["search"], groups=["write"])

    assert {t.name for t in report.tools if t.exposed} == {"search", "write_note"}
    assert all(t.registered for t in report.tools)


def test_the_request_tools_are_exposed_and_the_registry_tools_stay_registered() -> None:
    own = _tool("own")

    report = _check(_registry(), tools=[own])

    tools = _by_name(report)
    assert tools["own"].exposed and tools["own"].registered
    assert not tools["search"].exposed and tools["search"].registered


def test_the_guidance_tool_is_reported_when_it_is_on() -> None:
    guidance = _by_name(_check(_registry(guidance=True)))[GUIDANCE_TOOL_NAME]

    assert guidance.exposed and guidance.has_executor and guidance.group is None


def test_an_invalid_schema_is_reported_on_the_tool_and_as_a_problem() -> None:
    # Built without validation: the only way to hold a tool whose schema is broken.
    broken = FunctionTool.model_construct(
        name="broken", input_schema={"type": "string"}, executor=None, group=None
    )

    report = _check(tools=[broken])

    tool = _by_name(report)["broken"]
    assert not tool.schema_valid
    assert tool.problem is not None and "must describe an object" in tool.problem
    assert report.problems == [tool.problem]


def test_schema_checks_can_be_skipped() -> None:
    broken = FunctionTool.model_construct(
        name="broken", input_schema={"type": "string"}, executor=None, group=None
    )

    report = _check(tools=[broken], check_schemas=False)

    assert _by_name(report)["broken"].schema_valid and report.compatible


# -- require


def test_a_required_tool_that_is_not_registered_is_a_problem() -> None:
    report = _check(_registry(), require=["translate"])

    assert report.problems == ["required tool 'translate' is not registered"]
    assert report.required == ["translate"]


def test_a_required_tool_outside_the_scope_is_a_problem() -> None:
    report = _check(_registry(), require=["write_note"], groups=["read"])

    assert report.problems == [
        "required tool 'write_note' is registered but not exposed in this scope"
    ]


def test_a_required_tool_in_a_disabled_group_is_not_exposed() -> None:
    report = _check(_registry(groups={"admin": False}), require=["drop_table"])

    assert report.problems == [
        "required tool 'drop_table' is registered but not exposed in this scope"
    ]


def test_a_required_tool_without_an_executor_is_a_problem_in_executor_mode() -> None:
    report = _check(_registry(), require=["manual"], tool_names=["manual"], mode="executor")

    assert "required tool 'manual' has no executor, which executor mode needs" in report.problems


def test_a_required_tool_without_an_executor_is_fine_in_auto_mode() -> None:
    report = _check(_registry(), require=["manual"])

    assert report.compatible


def test_required_tools_that_are_exposed_raise_no_problem() -> None:
    report = _check(_registry(), require=["search", "write_note"])

    assert report.problems == [] and report.compatible


def test_executor_mode_names_every_exposed_tool_without_an_executor() -> None:
    registry = ToolRegistry([_tool("a", executor=False), _tool("b", executor=False)], environ={})

    report = _check(registry, mode="executor")

    assert report.problems == [
        "executor mode needs an executor on every exposed tool; missing: a, b"
    ]


def test_scope_problems_of_the_registry_are_problems_of_the_report() -> None:
    report = _check(_registry(), tool_names=["nope"], groups=["ghosts"])

    assert len(report.problems) == 2
    assert any("'nope' is not registered" in p for p in report.problems)
    assert any("'ghosts' does not exist" in p for p in report.problems)


def test_naming_tools_without_a_registry_is_a_problem() -> None:
    report = _check(None, tool_names=["search"])

    assert report.problems == [
        "the request names tools or groups, but no ToolRegistry is configured"
    ]


# -- mode


def test_mode_is_executor_when_every_exposed_tool_has_an_executor() -> None:
    assert _check(_registry(), groups=["write"]).mode == "executor"


def test_mode_is_single_turn_when_an_exposed_tool_has_no_executor() -> None:
    assert _check(_registry()).mode == "single-turn"


def test_mode_is_single_turn_when_forced() -> None:
    assert _check(_registry(), groups=["write"], mode="single-turn").mode == "single-turn"


def test_mode_ignores_unexposed_tools_without_an_executor() -> None:
    assert _check(_registry(groups={"read": False})).mode == "executor"


# -- ensure_capabilities


def test_ensure_capabilities_raises_listing_every_problem_at_once(tmp_path: Path) -> None:
    settings = ProviderSettings(cli_path=str(tmp_path / "nope"))

    with pytest.raises(ProviderCompatibilityError) as info:
        ensure_capabilities(
            settings,
            _registry(),
            require=["translate"],
            groups=["ghosts"],
            environ={"HOME": str(tmp_path)},
        )

    problems = info.value.problems
    assert len(problems) == 4
    assert problems[0].startswith("ProviderSettings.cli_path")
    assert problems[1].startswith("authentication: ")
    assert any("'ghosts' does not exist" in p for p in problems)
    assert "required tool 'translate' is not registered" in problems
    assert all(f"- {p}" in str(info.value) for p in problems)
    assert isinstance(info.value.report, CapabilityReport)
    assert info.value.report.problems == problems


def test_ensure_capabilities_returns_the_report_when_nothing_is_missing() -> None:
    report = ensure_capabilities(ProviderSettings(), _registry(), environ=AUTHED)

    assert report.compatible and len(report.tools) == 4


# -- the report as data


def test_the_report_survives_a_json_round_trip() -> None:
    report = _check(_registry(groups={"admin": False}), require=["translate"])

    again = CapabilityReport.model_validate_json(report.model_dump_json())

    assert again == report
    assert not again.compatible


def test_the_report_reads_the_process_environment_when_no_environ_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", SECRET)

    report = check_capabilities(ProviderSettings())

    assert report.auth.method == "auth-token"
    assert os.environ["ANTHROPIC_AUTH_TOKEN"] not in report.model_dump_json()


def test_an_unreadable_group_switch_is_a_problem_of_the_report_not_a_crash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `sf-provider check` printed a ValueError traceback; a query raised it as itself.
    monkeypatch.setenv("SF_PROVIDER_GROUP_ADMIN", "maybe")
    wipe = FunctionTool(name="wipe", executor=lambda arguments: "wiped", group="admin")
    settings = ProviderSettings(env={"ANTHROPIC_API_KEY": "sk-ant-test"})
    problem = "SF_PROVIDER_GROUP_ADMIN='maybe' is not a switch"

    for report in (
        check_capabilities(settings, ToolRegistry([wipe])),
        check_capabilities(settings, None, tools=[wipe]),
    ):
        assert [p for p in report.problems if problem in p], report.problems
        assert report.tools[0].group_enabled is False
    with pytest.raises(ProviderCompatibilityError, match=problem):
        ClaudeAgentProvider(settings).stream("hi", tools=[wipe])
