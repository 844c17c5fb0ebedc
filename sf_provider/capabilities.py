"""Capability checks: can this provider reach what a request needs, before anything is spawned?

`check_capabilities` reports the CLI (found, version), the authentication configured, and for
each tool whether it is registered, exposed in the current scope, has an executor, has a valid
schema and is gated, plus the mode the request would run in. `ensure_capabilities` raises
`ProviderCompatibilityError` naming every missing piece at once. `generate` and `stream` run the
cheap part of the check (no subprocess) before starting the CLI.
"""

# No `from __future__ import annotations` here: pydantic would eval() the annotation strings of
# the models below at import (see sf_provider/types.py).

import functools
import os
import re
import shutil
import subprocess
from collections import ChainMap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import claude_agent_sdk
from pydantic import BaseModel, ConfigDict, Field

from .errors import CredentialsMissingError, ProviderCompatibilityError, ToolDefinitionError
from .registry import ToolRegistry, group_env_var
from .settings import ProviderSettings
from .tools import FunctionTool, normalize_input_schema
from .types import Mode

__all__ = [
    "AuthStatus",
    "CLIStatus",
    "CapabilityReport",
    "ToolCapability",
    "check_capabilities",
    "cloud_switches",
    "ensure_capabilities",
    "find_cli",
    "refusal",
]

_AUTH_VARS = (
    ("ANTHROPIC_API_KEY", "api-key"),
    ("ANTHROPIC_AUTH_TOKEN", "auth-token"),
    ("CLAUDE_CODE_OAUTH_TOKEN", "oauth-token"),
)
_CLOUD_VARS = ("CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY")
#: Where the SDK looks for the CLI (POSIX) after the bundled binary and PATH, in its order; a
#: relative location is under the home directory. tests/unit/test_capabilities.py keeps it equal
#: to the installed SDK's list.
_CLI_LOCATIONS = (
    ".npm-global/bin/claude",
    "/usr/local/bin/claude",
    ".local/bin/claude",
    "node_modules/.bin/claude",
    ".yarn/bin/claude",
    ".claude/local/claude",
)


class _Model(BaseModel):
    # Validators are built on first use, not when `import sf_provider` runs.
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class CLIStatus(_Model):
    """Where the Claude Code CLI is and which version it is."""

    found: bool
    path: str | None = None
    version: str | None = None
    problem: str | None = None


class AuthStatus(_Model):
    """How the CLI will authenticate (never the secret itself)."""

    configured: bool
    method: Literal["api-key", "auth-token", "oauth-token", "credentials-file", "cloud", "none"]
    detail: str = ""


class ToolCapability(_Model):
    """One tool as the request would see it."""

    name: str
    registered: bool
    exposed: bool = Field(description="Offered to the model in this request's scope.")
    has_executor: bool
    schema_valid: bool
    gated: bool = Field(description="Mutating, with a safety gate configured.")
    mutating: bool = False
    group: str | None = None
    group_enabled: bool = True
    problem: str | None = None


class CapabilityReport(_Model):
    """Whether a request can run here, and every reason it cannot."""

    cli: CLIStatus
    auth: AuthStatus
    tools: list[ToolCapability]
    required: list[str] = Field(default_factory=list)
    mode: Mode
    problems: list[str] = Field(default_factory=list)

    @property
    def compatible(self) -> bool:
        """True when nothing is missing."""
        return not self.problems


def find_cli(
    cli_path: str | None = None,
    *,
    cwd: str | None = None,
    search_path: str | None = None,
    ask_version: bool = True,
) -> CLIStatus:
    """Find the CLI where the SDK looks for it, in its order: `cli_path`, the bundled binary,
    `claude` on PATH, then `~/.npm-global/bin/claude`, `/usr/local/bin/claude` and the other
    places the SDK knows (`_CLI_LOCATIONS`).

    `ask_version=False` runs nothing: a version not known yet (`version_known`) is left None,
    and a `cli_path` is not yet checked to answer `--version` as the CLI does.

    `cli_path` is found the way the SDK starts it: a bare name (`"claude"`) on `search_path`
    (the PATH the CLI gets; None: this process's), a relative path from `cwd` (the CLI's
    working directory; None: the current one).

    Example::

        status = find_cli()
        print(status.path, status.version)  # .../claude_agent_sdk/_bundled/claude 2.1.330
    """
    if cli_path is not None:
        return _given_cli(cli_path, cwd, search_path, ask_version)
    bundled = _bundled_cli()
    if bundled.is_file():
        return _found(bundled, ask_version)
    on_path = shutil.which("claude")
    if on_path:
        return CLIStatus(found=True, path=on_path, version=_version(on_path, ask_version))
    # The SDK resolves these against the home directory of this process, as here (none known:
    # only the absolute ones).
    home = _home()
    locations = [
        home / location if home is not None else Path(location)
        for location in _CLI_LOCATIONS
        if home is not None or location.startswith("/")
    ]
    for path in locations:
        if path.is_file():
            return _found(path, ask_version)
    return CLIStatus(
        found=False,
        problem=f"the Claude Code CLI was not found (looked at the bundled {bundled}, `claude` "
        f"on PATH, {', '.join(map(str, locations))}): reinstall claude-agent-sdk (it bundles "
        f"the CLI), put `claude` on PATH, or set ProviderSettings.cli_path",
    )


def _given_cli(
    cli_path: str, cwd: str | None, search_path: str | None, ask_version: bool
) -> CLIStatus:
    """`ProviderSettings.cli_path` where the SDK's exec finds it (see `find_cli`)."""
    where: str | None = cli_path
    hint = ""
    if os.sep not in cli_path:
        where = shutil.which(cli_path, path=search_path)
        hint = " (a bare name is looked up on the PATH the CLI gets): give a full path"
    elif cwd is not None and not os.path.isabs(cli_path):
        where = os.path.join(cwd, cli_path)
        hint = (
            f": {where!r} (a relative cli_path is started from the CLI's working directory); "
            f"give an absolute path"
        )
    if where is None or not os.path.isfile(where) or not os.access(where, os.X_OK):
        return CLIStatus(
            found=False,
            path=where or cli_path,
            problem=f"ProviderSettings.cli_path {cli_path!r} is not an executable file{hint}",
        )
    if not (ask_version or version_known(where)):
        return CLIStatus(found=True, path=where)
    version = _cli_version(where)
    if version is None:
        return CLIStatus(
            found=False,
            path=where,
            problem=f"ProviderSettings.cli_path {cli_path!r} did not answer --version as the "
            f"Claude Code CLI does (`2.1.332 (Claude Code)`): point it at the `claude` binary",
        )
    return CLIStatus(found=True, path=where, version=version)


def _found(path: Path, ask_version: bool) -> CLIStatus:
    """The CLI the SDK would run; it picks any file there, so one it cannot run is a problem."""
    if not os.access(path, os.X_OK):
        return CLIStatus(
            found=False,
            path=str(path),
            problem=f"the Claude Code CLI at {path} is not executable (the SDK would run it): "
            f"make it executable, remove it, or set ProviderSettings.cli_path",
        )
    return CLIStatus(found=True, path=str(path), version=_version(str(path), ask_version))


@functools.cache
def _bundled_cli() -> Path:
    """Where claude-agent-sdk bundles the CLI (it may not be there: checked on each use)."""
    return Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"


_VERSION = re.compile(r"^\d+\.\d+\.\d+")


#: The versions `claude --version` answered, by path (None: it answered, not as the CLI does).
#: Only definite answers: a `--version` that timed out or was killed is asked again next time.
_asked: dict[str, str | None] = {}

#: How long `claude --version` may take before the check gives up on it (this time).
_VERSION_TIMEOUT_SECONDS = 30.0


def version_known(path: str | None) -> bool:
    """Whether the version of the CLI at `path` is known without running it: a
    `claude.version` stamp beside it (the bundled CLI has one), or `--version` answered already.
    Otherwise the next capability check runs `claude --version` (up to 30 s)."""
    return path is None or path in _asked or Path(path).with_name("claude.version").is_file()


def _version(path: str, ask: bool) -> str | None:
    return _cli_version(path) if ask or version_known(path) else None


def _cli_version(path: str) -> str | None:
    if path not in _asked:
        version, definite = _ask_version(path)
        if not definite:
            return None  # not the CLI for now; a later check asks again
        _asked[path] = version
    return _asked[path]


def _ask_version(path: str) -> tuple[str | None, bool]:
    """The version `path --version` answers (None: not the CLI's answer), and whether that is
    definite: a program that exited by itself answered; one that could not start, timed out or
    was killed by a signal (a loaded or waking machine) may answer next time."""
    stamp = Path(path).with_name("claude.version")
    if stamp.is_file():
        return stamp.read_text(encoding="utf-8").strip().split(" ")[0] or None, True
    try:
        done = subprocess.run(
            [path, "--version"],
            capture_output=True,
            text=True,
            timeout=_VERSION_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None, False
    version = done.stdout.strip().split(" ")[0]
    # Claude Code answers `2.1.332 (Claude Code)`; anything else is not the CLI.
    if _VERSION.match(version):
        return version, True
    return None, done.returncode >= 0


def _home() -> Path | None:
    """This process's home directory; None without HOME and without a passwd entry for this
    user (a container running as an arbitrary uid)."""
    try:
        return Path.home()
    except (RuntimeError, KeyError):
        return None


def credentials_path(env: Mapping[str, str]) -> Path | None:
    """Where a Claude login is stored for the environment `env` (the CLI's own rule); None when
    neither CLAUDE_CONFIG_DIR nor a home directory is known."""
    config = env.get("CLAUDE_CONFIG_DIR")
    if config:
        return Path(config) / ".credentials.json"
    home = Path(env["HOME"]).expanduser() if env.get("HOME") else _home()
    return home / ".claude" / ".credentials.json" if home is not None else None


def cloud_switches(
    settings: ProviderSettings, environ: Mapping[str, str] | None = None
) -> list[str]:
    """The cloud-provider switches (`CLAUDE_CODE_USE_BEDROCK`, `_VERTEX`, `_FOUNDRY`) that are
    on for the CLI: an isolated query takes them from `settings.env` only, since the cloud's
    credential chain can run commands its own files name (an AWS `credential_process`)."""
    env: Mapping[str, str] = settings.env
    if not settings.isolate:
        env = ChainMap(settings.env, os.environ if environ is None else dict(environ))
    return [var for var in _CLOUD_VARS if env.get(var, "").strip().lower() in {"1", "true"}]


def check_auth(settings: ProviderSettings, environ: Mapping[str, str] | None = None) -> AuthStatus:
    """The authentication the CLI would use with `settings` (environment, then a login)."""
    # A view of os.environ, not a copy: copying it decodes every variable (~50 us per query).
    env = ChainMap(settings.env, os.environ if environ is None else dict(environ))
    for var, method in _AUTH_VARS:
        if env.get(var):
            return AuthStatus(configured=True, method=method, detail=f"{var} is set")  # type: ignore[arg-type]
    for var in cloud_switches(settings, environ):
        return AuthStatus(configured=True, method="cloud", detail=f"{var} is set")
    credentials = credentials_path(env)
    if credentials is not None and credentials.is_file():
        if not os.access(credentials, os.R_OK):  # a secret mounted for another uid
            return AuthStatus(
                configured=False,
                method="credentials-file",
                detail=f"the Claude login {credentials} cannot be read by this user (uid "
                f"{os.getuid()}): make it readable, or set ANTHROPIC_API_KEY, "
                f"ANTHROPIC_AUTH_TOKEN or CLAUDE_CODE_OAUTH_TOKEN",
            )
        return AuthStatus(
            configured=True, method="credentials-file", detail=f"logged in ({credentials})"
        )
    return AuthStatus(
        configured=False,
        method="none",
        detail="no ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN or CLAUDE_CODE_OAUTH_TOKEN, and no "
        "Claude login: set one of them or run `claude` once and log in"
        + "".join(
            f" ({var} is set in the environment, but an isolated query takes a cloud switch "
            f"from ProviderSettings.env only)"
            for var in _CLOUD_VARS
            if env.get(var, "").strip().lower() in {"1", "true"} and var not in settings.env
        ),
    )


def _cli_workdir(settings: ProviderSettings) -> tuple[str | None, str | None]:
    """The working directory the CLI is started in (the provider's rule: `cwd`, a relative one
    from the current directory, else the current directory), or why it cannot be."""
    cwd = settings.cwd
    try:
        workdir = os.path.abspath(cwd or os.getcwd())
    except FileNotFoundError:
        if cwd is None:
            return None, (
                "the current directory of this process was removed, and the CLI runs in it "
                "(ProviderSettings.cwd is not set): os.chdir() to an existing directory, or set "
                "ProviderSettings.cwd"
            )
        return None, (
            f"ProviderSettings.cwd {cwd!r} is relative to the current directory of this "
            f"process, which was removed: os.chdir() to an existing directory, or give an "
            f"absolute path"
        )
    where = "the current directory" if cwd is None else f"ProviderSettings.cwd {cwd!r}"
    if not os.path.isdir(workdir):
        return None, f"{where} is not a directory: create it, or change the setting"
    if not os.access(workdir, os.X_OK):
        return None, (
            f"{where} cannot be entered by this user (no search permission on {workdir!r}), "
            f"and the CLI runs there: grant it, or change the setting"
        )
    return workdir, None


def _umask() -> int | None:
    """This process's umask, read without setting it (which no other thread could undo);
    None where /proc does not say (not Linux)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return None


def _temp_dir_problem(directory: str | None, workdir: str | None) -> str | None:
    """What keeps `ProviderSettings.env['TMPDIR']` from holding the queries' temp dirs."""
    if not directory:
        return None
    setting = f"ProviderSettings.env['TMPDIR'] {directory!r}"
    if not os.path.isdir(directory):
        return f"{setting} is not a directory: create it, or change the setting"
    if not os.access(directory, os.W_OK | os.X_OK):
        return (
            f"{setting} is not writable by this user, and each query makes its temp dir "
            f"there: make it writable, or change the setting"
        )
    if not os.path.isabs(directory) and workdir and not os.path.samefile(workdir, os.curdir):
        # The per-query HOME, config and temp dirs are then relative paths the CLI resolves
        # from its own working directory: made there, and never removed.
        return (
            f"{setting} is relative, and the CLI runs in {workdir!r}, not in the current "
            f"directory, so it would resolve its per-query dirs there and leave them behind: "
            f"give an absolute path"
        )
    return None


def _schema_problem(tool: FunctionTool) -> str | None:
    try:
        normalize_input_schema(tool.input_schema, tool_name=tool.name)
    except ToolDefinitionError as exc:
        return str(exc)
    return None


def check_capabilities(
    settings: ProviderSettings | None = None,
    registry: ToolRegistry | None = None,
    *,
    tools: Sequence[FunctionTool] | None = None,
    require: Sequence[str] = (),
    tool_names: Sequence[str] | None = None,
    groups: Sequence[str] | None = None,
    mode: Literal["auto", "executor", "single-turn"] = "auto",
    environ: Mapping[str, str] | None = None,
    check_schemas: bool = True,
    ask_version: bool = True,
) -> CapabilityReport:
    """Report whether a request with this scope can run, and every reason it cannot.

    `tools` are the request's own tools (as passed to `generate`); otherwise the registry's
    tools in the scope named by `tool_names` / `groups`. `require` names tools the request
    needs; each must be exposed (and have an executor when `mode="executor"`).
    `ask_version=False`: as `find_cli`'s, so that the check runs no process.
    """
    settings = settings or ProviderSettings()
    problems: list[str] = []
    env = ChainMap(settings.env, os.environ if environ is None else dict(environ))
    workdir, problem = _cli_workdir(settings)
    if problem:
        problems.append(problem)
    cli = find_cli(
        settings.cli_path, cwd=workdir, search_path=env.get("PATH"), ask_version=ask_version
    )
    if cli.problem:
        problems.append(cli.problem)
    auth = check_auth(settings, environ)
    if not auth.configured:
        problems.append(f"authentication: {auth.detail}")
    for switch in cloud_switches(settings, environ):
        if env.get("ANTHROPIC_BASE_URL"):
            problems.append(
                f"{switch} sends every request to the cloud provider, and the CLI would ignore "
                f"ANTHROPIC_BASE_URL ({env['ANTHROPIC_BASE_URL']}): unset one of them (a "
                f"cloud endpoint goes in ANTHROPIC_BEDROCK_BASE_URL, _VERTEX_ or _FOUNDRY_)"
            )
    problem = _temp_dir_problem(settings.env.get("TMPDIR"), workdir)
    if problem:
        problems.append(problem)
    # Root writes into its own directories whatever their mode.
    umask = _umask() if settings.isolate and os.geteuid() != 0 else None
    if umask is not None and umask & 0o700:
        problems.append(
            f"the umask {umask:04o} takes the owner's own permissions off new directories, "
            f"so each query's temp dirs could not be filled or removed: use a umask that "
            f"keeps them (0022 or 0077)"
        )
    if not settings.isolate and not env.get("HOME") and _home() is None:
        problems.append(
            f"isolate=False runs the CLI in this user's home directory, but HOME is not set "
            f"and user id {os.getuid()} has no passwd entry (a container running as an "
            f"arbitrary uid): the CLI would exit at start. Set HOME (in the environment or "
            f"ProviderSettings.env), or use isolate=True"
        )
    registered: dict[str, FunctionTool] = dict(registry.tools) if registry else {}
    if tools is not None:
        exposed = list(tools)
        registered.update({t.name: t for t in tools})
    elif registry is not None:
        try:
            exposed = registry.select(tool_names, groups)
        except ProviderCompatibilityError as exc:
            problems += exc.problems
            exposed = []
        except ValueError as exc:  # an unreadable SF_PROVIDER_GROUP_ switch
            problems.append(str(exc))
            exposed = []
    else:
        exposed = []
        if tool_names or groups:
            problems.append("the request names tools or groups, but no ToolRegistry is configured")
    exposed_names = {t.name: t for t in exposed}
    # Group switches hold on every path: without a registry, the environment's alone.
    switches = registry if registry is not None else ToolRegistry(environ=environ)
    gate = registry.gate if registry else None
    report_tools: list[ToolCapability] = []
    for name in [*registered, *(n for n in exposed_names if n not in registered)]:
        tool = exposed_names.get(name) or registered[name]
        problem = _schema_problem(tool) if check_schemas else None
        try:
            enabled = switches.group_enabled(tool.group)
        except ValueError as exc:  # an unreadable switch: reported, and the group held off
            enabled = False
            if str(exc) not in problems:
                problems.append(str(exc))
        if not enabled and tools is not None and name in exposed_names:
            var = group_env_var(str(tool.group))
            problems.append(
                f"tool {name!r} is in the disabled group {tool.group!r} (by {var} or the "
                f"registry's groups): the switch holds for tools passed directly too; enable "
                f"the group ({var}=1) or leave the tool out of the request"
            )
        report_tools.append(
            ToolCapability(
                name=name,
                registered=name in registered or name in exposed_names,
                exposed=name in exposed_names,
                has_executor=tool.executor is not None,
                schema_valid=problem is None,
                gated=tool.mutating and gate is not None,
                mutating=tool.mutating,
                group=tool.group,
                group_enabled=enabled,
                problem=problem,
            )
        )
        if problem:
            problems.append(problem)
    for name in require:
        needed = exposed_names.get(name)
        if name not in registered and needed is None:
            problems.append(f"required tool {name!r} is not registered")
        elif needed is None:
            problems.append(f"required tool {name!r} is registered but not exposed in this scope")
        elif mode == "executor" and needed.executor is None:
            problems.append(f"required tool {name!r} has no executor, which executor mode needs")
    missing = [t for t in exposed if t.executor is None]
    if mode == "executor" and missing:
        problems.append(
            f"executor mode needs an executor on every exposed tool; missing: "
            f"{', '.join(t.name for t in missing)}"
        )
    run_mode: Mode = "single-turn" if mode == "single-turn" or missing else "executor"
    return CapabilityReport(
        cli=cli,
        auth=auth,
        tools=report_tools,
        required=list(require),
        mode=run_mode,
        problems=problems,
    )


def ensure_capabilities(*args: Any, **kwargs: Any) -> CapabilityReport:
    """`check_capabilities`, raising `ProviderCompatibilityError` when anything is missing
    (`CredentialsMissingError` when the Claude credentials are)."""
    report = check_capabilities(*args, **kwargs)
    if report.problems:
        raise refusal(report)
    return report


def refusal(report: CapabilityReport) -> ProviderCompatibilityError:
    """The error of a report with problems: `CredentialsMissingError` (an authentication
    error on every door) when no Claude credential is configured, else
    `ProviderCompatibilityError`. Both list every problem."""
    kind = ProviderCompatibilityError if report.auth.configured else CredentialsMissingError
    return kind(report.problems, report=report)
