"""`sf-provider check`: the capability report as a table or JSON, and an optional probe.

The report says, before anything is dispatched, whether the CLI is there, how it would
authenticate, and how each tool of the `--tools` registry would be offered. `--probe` then runs
one real round trip through the CLI: offline against an embedded scripted Messages API (its
scripted model calls one harmless tool), or with `--live` against the real API with the user's
own credentials. `--offline` leaves credentials out of the verdict, so a machine without any
(a CI runner) can pass: with `--probe` it proves that the CLI starts, that the tools reach the
model through the bridge, run and return, and that the answer comes back, all against the
embedded scripted API; it proves nothing about an API key. Exit status: 0 when everything is in
place, 1 when something is missing or the probe failed, 2 when the command itself was used
wrongly (an unloadable `--tools`, `--live` without `--probe` or with `--offline`).

Example::

    sf-provider check --tools myapp.tools:registry --require search,fetch
    sf-provider check --tools myapp.tools:registry --json --probe
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio

from .capabilities import CapabilityReport, ToolCapability, check_capabilities
from .cli import load_tools_option
from .provider import ClaudeAgentProvider
from .registry import GUIDANCE_TOOL_NAME, ToolRegistry, group_env_var
from .settings import ProviderSettings
from .testing import (
    RecordedRequest,
    Reply,
    ScriptedMessagesAPI,
    arguments_for,
    reply,
    text,
    tool_use,
)
from .tools import FunctionTool
from .types import GenerateResult

__all__ = ["ProbeOutcome", "probe_tool", "render_report", "run_check", "sample_arguments"]

LIVE_PROMPT = "Reply with the word ok."
_OFFLINE_PROMPT = "sf-provider check: probe round trip."
_SHOWN_CHARS = 200


def run_check(args: argparse.Namespace) -> int:
    """Print the capability report (and the probe's outcome); 0 when the request could run.

    `args` carries `tools` (`module:attr` or None), `require` (comma-separated), `json`,
    `probe` and `live`, as `sf-provider check` parses them.
    """
    if args.live and not args.probe:
        print("sf-provider check: --live only applies together with --probe", file=sys.stderr)
        return 2
    offline = getattr(args, "offline", False)
    if args.live and offline:
        print("sf-provider check: --live and --offline exclude each other", file=sys.stderr)
        return 2
    registry: ToolRegistry | None = None
    if args.tools:
        registry = load_tools_option("check", args.tools)
        if registry is None:
            return 2
    require = [name.strip() for name in args.require.split(",") if name.strip()]
    settings = ProviderSettings()
    report = check_capabilities(settings, registry, require=require)
    if offline:  # credentials are not part of the verdict; the report still shows them
        kept = [p for p in report.problems if not p.startswith("authentication:")]
        report = report.model_copy(update={"problems": kept})
    outcome = None
    if args.probe:
        outcome = anyio.run(_probe, settings, registry, args.live)
    if args.json:
        data: dict[str, Any] = json.loads(report.model_dump_json())
        data["compatible"] = report.compatible
        if outcome is not None:
            data["probe"] = outcome.as_dict()
        shown = json.dumps(data, indent=2, ensure_ascii=False)
        if not _printable(shown):  # the same JSON, escaped
            shown = json.dumps(data, indent=2)
        print(shown)
    else:
        shown = render_report(report, offline=offline)
        if outcome is not None:
            shown += "\n\n" + outcome.render()
        if not _printable(shown):
            encoding = sys.stdout.encoding
            shown = shown.encode(encoding, "backslashreplace").decode(encoding)
        print(shown)
    ok = report.compatible and (outcome is None or outcome.ok)
    return 0 if ok else 1


def _printable(text: str) -> bool:
    """Whether stdout's encoding can show `text`: an ASCII or latin-1 locale, or a Windows
    console, cannot show every character a tool or a path may hold."""
    try:
        text.encode(sys.stdout.encoding or "utf-8")
    except UnicodeEncodeError:
        return False
    return True


# -- the table


def render_report(report: CapabilityReport, *, offline: bool = False) -> str:
    """The report as a readable table: CLI, auth, tools, mode, then each problem with its fix.

    `offline`: credentials are not part of the verdict (`sf-provider check --offline`)."""
    cli = report.cli
    auth = report.auth
    cli_line = (
        f"found  {cli.path}  (version {cli.version or 'unknown'})" if cli.found else "NOT FOUND"
    )
    auth_line = f"{auth.method}  ({auth.detail})" if auth.configured else "NOT CONFIGURED"
    if offline and not auth.configured:
        auth_line = "not configured (not part of the verdict: --offline)"
    lines = [f"CLI   {cli_line}", f"auth  {auth_line}", f"mode  {report.mode}", ""]
    if report.tools:
        lines.append(f"tools ({len(report.tools)}):")
        lines += _table(
            ["name", "group", "registered", "exposed", "executor", "schema", "gated"],
            [_tool_row(t) for t in report.tools],
        )
    else:
        lines.append("tools: none (pass --tools MODULE:ATTR to check a ToolRegistry)")
    if report.required:
        lines.append(f"required: {', '.join(report.required)}")
    lines.append("")
    if report.problems:
        lines.append(f"problems ({len(report.problems)}):")
        for problem in report.problems:
            lines.append(f"- {problem}")
            advice = _advice(problem, report)
            if advice:
                lines.append(f"  fix: {advice}")
        lines.append("")
        lines.append("compatible: no")
    else:
        lines.append("compatible: yes")
    return "\n".join(lines)


def _tool_row(tool: ToolCapability) -> list[str]:
    group = tool.group or "-"
    if tool.group is not None and not tool.group_enabled:
        group += " (disabled)"
    gated = "-" if not tool.mutating else ("yes" if tool.gated else "NO (mutating, no gate)")
    return [
        tool.name,
        group,
        _yes(tool.registered),
        _yes(tool.exposed),
        _yes(tool.has_executor),
        "valid" if tool.schema_valid else "INVALID",
        gated,
    ]


def _yes(value: bool) -> str:
    return "yes" if value else "no"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return [
        "  "
        + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]


def _advice(problem: str, report: CapabilityReport) -> str | None:
    """What to do about a problem whose message does not say it already."""
    for name in report.required:
        if problem == f"required tool {name!r} is not registered":
            return (
                f"register a FunctionTool named {name!r} in the ToolRegistry given with --tools, "
                f"or stop requiring it"
            )
        if problem == f"required tool {name!r} is registered but not exposed in this scope":
            tool = next((t for t in report.tools if t.name == name), None)
            if tool is not None and tool.group is not None and not tool.group_enabled:
                return (
                    f"its group {tool.group!r} is disabled: set {group_env_var(tool.group)}=1 "
                    f"or ToolRegistry(groups={{{tool.group!r}: True}})"
                )
            return "name it (or its group) in the request's tool_names / groups"
        if problem.startswith(f"required tool {name!r} has no executor"):
            return "give the FunctionTool an executor, or run the request in single-turn mode"
    return None


# -- the probe


@dataclass(frozen=True)
class ProbeOutcome:
    """How one round trip through the CLI went."""

    ok: bool
    live: bool
    duration_ms: float
    text: str = ""
    tool: str | None = None
    tool_arguments: Mapping[str, Any] | None = None
    tool_output: str | None = None
    tool_is_error: bool = False
    error_type: str | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The outcome as plain JSON data."""
        return {
            "ok": self.ok,
            "live": self.live,
            "duration_ms": round(self.duration_ms),
            "text": self.text,
            "tool": self.tool,
            "tool_arguments": dict(self.tool_arguments) if self.tool_arguments else None,
            "tool_output": self.tool_output,
            "tool_is_error": self.tool_is_error,
            "error_type": self.error_type,
            "error": self.error,
        }

    def render(self) -> str:
        """The outcome as a few readable lines."""
        where = (
            "live: the real Messages API with your credentials"
            if self.live
            else "offline: the real CLI against a scripted Messages API on 127.0.0.1"
        )
        lines = [f"probe ({where})"]
        if self.tool is not None:
            arguments = json.dumps(dict(self.tool_arguments or {}), ensure_ascii=False)
            flag = "error" if self.tool_is_error else "ok"
            lines.append(f"  tool call    {self.tool}({arguments})")
            lines.append(f"  tool result  [{flag}] {_shorten(self.tool_output or '')}")
        elif not self.live:
            lines.append(
                "  tool call    none: no tool the probe may call (one with an executor that is "
                "not mutating); the round trip went through the CLI without the bridge"
            )
        if self.ok:
            lines.append(f"  ok in {self.duration_ms:.0f} ms: {_shorten(self.text)!r}")
        else:
            lines.append(
                f"  FAILED after {self.duration_ms:.0f} ms: {self.error_type}: {self.error}"
            )
        return "\n".join(lines)


def _shorten(value: str) -> str:
    value = " ".join(value.split())
    return value if len(value) <= _SHOWN_CHARS else value[: _SHOWN_CHARS - 1] + "…"


async def _probe(
    settings: ProviderSettings, registry: ToolRegistry | None, live: bool
) -> ProbeOutcome:
    started = time.perf_counter()
    tool: FunctionTool | None = None
    arguments: dict[str, Any] | None = None
    try:
        if live:
            provider = ClaudeAgentProvider(settings, registry=registry)
            result = await provider.generate(LIVE_PROMPT)
        else:
            tool = probe_tool(registry)
            arguments = sample_arguments(tool) if tool is not None else None
            model = _ScriptedProbeModel(tool.name if tool else None, arguments or {})
            async with ScriptedMessagesAPI(model) as api:
                provider = ClaudeAgentProvider(api.settings(), registry=registry)
                # Only the probe tool is exposed, so the query runs in executor mode and the
                # tool really runs, even when other tools of the registry have no executor.
                scope: dict[str, Any] = (
                    {"tool_names": [tool.name] if tool else []} if registry else {}
                )
                result = await provider.generate(_OFFLINE_PROMPT, **scope)
    except Exception as exc:
        return ProbeOutcome(
            ok=False,
            live=live,
            duration_ms=(time.perf_counter() - started) * 1000,
            tool=tool.name if tool else None,
            tool_arguments=arguments,
            error_type=type(exc).__name__,
            error=str(exc),
        )
    duration = (time.perf_counter() - started) * 1000
    return _outcome(result, live, duration, tool, arguments)


def _outcome(
    result: GenerateResult,
    live: bool,
    duration_ms: float,
    tool: FunctionTool | None,
    arguments: dict[str, Any] | None,
) -> ProbeOutcome:
    call = next((c for c in result.tool_calls if tool and c.tool_name == tool.name), None)
    if tool is not None and (call is None or call.result is None):
        return ProbeOutcome(
            ok=False,
            live=live,
            duration_ms=duration_ms,
            text=result.text,
            tool=tool.name,
            tool_arguments=arguments,
            error_type="ProbeError",
            error=f"the scripted call of {tool.name!r} came back without a tool result",
        )
    return ProbeOutcome(
        ok=True,
        live=live,
        duration_ms=duration_ms,
        text=result.text,
        tool=tool.name if tool else None,
        tool_arguments=arguments,
        # A tool that fails on made-up arguments still proves the round trip works.
        tool_output=call.result.output if call and call.result else None,
        tool_is_error=bool(call and call.result and call.result.is_error),
    )


class _ScriptedProbeModel:
    """The offline probe's model: call the probe tool once, then answer `ok`."""

    def __init__(self, tool: str | None, arguments: dict[str, Any]) -> None:
        self.tool = tool
        self.arguments = arguments

    def __call__(self, request: RecordedRequest) -> Reply:
        if self.tool is None or request.tool_results():
            return reply(text("ok"))
        return reply(tool_use(self.tool, self.arguments))


def probe_tool(registry: ToolRegistry | None) -> FunctionTool | None:
    """The tool the offline probe calls: an exposed, non-mutating tool with an executor.

    Mutating tools are never called by a check, gate or no gate: the arguments are made up.
    Read-only tools come first, the built-in guidance tool last.
    """
    if registry is None:
        return None
    candidates = [t for t in registry.select() if t.executor is not None and not t.mutating]
    candidates.sort(key=lambda t: (t.name == GUIDANCE_TOOL_NAME, not t.read_only))
    return candidates[0] if candidates else None


def sample_arguments(tool: FunctionTool) -> dict[str, Any]:
    """Arguments for `tool` built from its schema: required properties with plausible values
    (`sf_provider.testing.arguments_for`)."""
    return arguments_for(tool.input_schema)
