"""The `sf-provider` command: `demo`, `check`, `serve`, `gateway`, `scenarios` and `schemas`."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import BaseModel, TypeAdapter

if TYPE_CHECKING:
    from .registry import ToolRegistry
    from .tools import FunctionTool

__all__ = ["main", "public_schemas"]


def load_tools_option(command: str, spec: str) -> ToolRegistry | None:
    """The registry `--tools MODULE:ATTR` names, or None after saying on stderr why not.

    Like `python -m`, the module is also looked for in the working directory: a console
    script's `sys.path` starts at its own bin directory instead.
    """
    from .registry import ToolRegistry

    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return ToolRegistry.load(spec)
    except Exception as exc:  # any import-time failure is the spec's problem, said plainly
        hint = ""
        if isinstance(exc, ModuleNotFoundError) and exc.name == spec.partition(":")[0]:
            hint = " (run from its directory, or put that directory on PYTHONPATH)"
        print(
            f"sf-provider {command}: cannot load --tools {spec!r}: "
            f"{type(exc).__name__}: {exc}{hint}",
            file=sys.stderr,
        )
        if not isinstance(exc, ValueError | ImportError):  # the module itself failed: show where
            traceback.print_exc(file=sys.stderr)
        return None


def enabled_tools_or_none(command: str, registry: ToolRegistry) -> list[FunctionTool] | None:
    """The registry's enabled tools, or None after saying on stderr, in one line, why not: an
    unreadable `SF_PROVIDER_GROUP_<NAME>` switch (its `ValueError` names the variable and the
    values it takes)."""
    try:
        return registry.enabled_tools()
    except ValueError as exc:
        print(f"sf-provider {command}: {exc}", file=sys.stderr)
        return None


# -- option values: refused as argparse refuses a bad one (exit status 2, one line naming it)


def _seconds(text: str) -> float:
    """A timeout: a number of seconds above 0; `inf` for no limit (`ProviderSettings` takes
    the same)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0:  # also NaN
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds above 0 (inf: no limit), got {text!r}"
        )
    return value


def _store_url(text: str) -> str:
    """A response store's URL (`GatewaySettings.response_store`); not repeated: it may hold a
    password."""
    if not text.startswith(("redis://", "rediss://", "unix://")):
        raise argparse.ArgumentTypeError("must be a redis://, rediss:// or unix:// URL")
    return text


def _int_in(low: int, high: int | None, what: str) -> Callable[[str], int]:
    """An integer from `low` to `high` (None: no upper bound), `what` saying which."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return value

    return parse


def _not_empty(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def public_schemas() -> dict[str, dict[str, Any]]:
    """The JSON Schemas of the public models, by file stem (what `contracts/schemas/` holds)."""
    from . import types
    from .capabilities import CapabilityReport
    from .gateway import GatewaySettings
    from .provider import CallOptions
    from .scenarios import Scenario
    from .settings import ProviderSettings
    from .testing import FaultReply, HTTPErrorReply, Reply
    from .tools import FunctionTool, ToolOutput

    models: list[type[BaseModel]] = [
        FunctionTool,
        ToolOutput,
        ProviderSettings,
        CallOptions,
        types.Usage,
        types.CallWarning,
        types.GenerateResult,
        Scenario,
        Reply,
        HTTPErrorReply,
        FaultReply,
        CapabilityReport,
        GatewaySettings,
    ]
    schemas = {m.__name__: m.model_json_schema(mode="serialization") for m in models}
    schemas["StreamPart"] = TypeAdapter(types.StreamPart).json_schema(mode="serialization")
    return schemas


def _schemas(args: argparse.Namespace) -> int:
    directory = Path(args.dir)
    schemas = public_schemas()
    rendered = {
        f"{name}.schema.json": json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False)
        + "\n"
        for name, schema in schemas.items()
    }
    if args.check:
        stale = [
            name
            for name, body in rendered.items()
            if not (directory / name).is_file() or (directory / name).read_text("utf-8") != body
        ]
        extra = sorted({p.name for p in directory.glob("*.schema.json")} - set(rendered))
        if stale or extra:
            print(
                f"schemas out of date: {stale + extra}; "
                f"run `sf-provider schemas --write {directory}`"
            )
            return 1
        print(f"{len(rendered)} schemas up to date in {directory}")
        return 0
    directory.mkdir(parents=True, exist_ok=True)
    for name, body in rendered.items():
        (directory / name).write_text(body, encoding="utf-8")
    print(f"wrote {len(rendered)} schemas to {directory}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from ._demo import run_demo

    return anyio.run(lambda: run_demo(live=args.live))


def _serve(args: argparse.Namespace) -> int:
    from ._serve import run_serve

    return run_serve(args)


def _gateway(args: argparse.Namespace) -> int:
    try:
        from .gateway.app import run_gateway
    except ImportError as exc:  # the extra is not installed: say which
        print(f"sf-provider gateway: {exc}", file=sys.stderr)
        return 2
    return run_gateway(args)


def _check(args: argparse.Namespace) -> int:
    from ._check_cli import run_check

    return run_check(args)


def _scenarios(args: argparse.Namespace) -> int:
    from ._scenarios_cli import run_record, run_scenarios

    return run_scenarios(args) if args.action == "run" else run_record(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `sf-provider` console script."""
    parser = argparse.ArgumentParser(prog="sf-provider", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run a small agent through the real CLI, offline")
    demo.add_argument("--live", action="store_true", help="use your own Claude credentials")
    demo.set_defaults(run=_demo)
    schemas = commands.add_parser("schemas", help="write or check the public JSON Schemas")
    group = schemas.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", dest="dir", metavar="DIR", help="write the schemas to DIR")
    group.add_argument("--check", dest="check_dir", metavar="DIR", help="fail if DIR is stale")
    schemas.set_defaults(run=_schemas)
    serve = commands.add_parser(
        "serve",
        help="serve a tool registry over stdio (MCP)",
        description="Serve the enabled tools of a tool registry as an MCP server over stdio, "
        "through the same invocation layer and safety gate as a query's own tools.",
        epilog="Exit status: 0 at the end of stdin or on SIGTERM / SIGINT; 2, before anything "
        "is served, when --tools cannot be loaded, an SF_PROVIDER_GROUP_<NAME> switch cannot "
        "be read, or an option value is unusable.",
    )
    serve.add_argument("--tools", required=True, metavar="MODULE:ATTR", help="the tools to serve")
    serve.add_argument("--name", type=_not_empty, default="sf-provider", help="the MCP server name")
    serve.add_argument(
        "--timeout",
        type=_seconds,
        default=60.0,
        help="per-tool timeout in seconds, above 0; inf: no limit (default: 60; a tool's own "
        "timeout wins; it bounds the safety gate and the executor together)",
    )
    serve.set_defaults(run=_serve)
    gateway = commands.add_parser(
        "gateway", help="serve the OpenAI and Anthropic HTTP APIs, with tool calling"
    )
    gateway.add_argument("--host", default="127.0.0.1", help="interface (default: 127.0.0.1)")
    gateway.add_argument(
        "--port",
        type=_int_in(0, 65535, "a TCP port from 0 to 65535"),
        default=8080,
        help="TCP port; 0: any free one (default: 8080)",
    )
    gateway.add_argument(
        "--api-key",
        dest="api_keys",
        action="append",
        metavar="KEY",
        help="a key clients must send (repeatable; also SF_PROVIDER_GATEWAY_KEYS, comma-separated)",
    )
    gateway.add_argument("--model", type=_not_empty, help="the model when a request names none")
    gateway.add_argument(
        "--max-concurrency",
        type=_int_in(1, None, "1 or more"),
        default=8,
        help="model requests at once, 1 or more (default: 8)",
    )
    gateway.add_argument(
        "--warm-processes",
        type=_int_in(0, 64, "0 to 64"),
        default=None,
        help="warm CLI processes kept, 0 to 64 (default: 1)",
    )
    gateway.add_argument(
        "--drop-params",
        action="store_true",
        help="leave out temperature, top_p, top_k and values that cannot be honoured, with a "
        "warning, instead of sending or refusing them (for frameworks that always send one)",
    )
    gateway.add_argument(
        "--response-store",
        type=_store_url,
        metavar="URL",
        help="where /v1/responses keeps responses: redis://host:port/db, a Redis server every "
        "replica shares (pip install 'sf-provider[redis]'); default: this process's memory",
    )
    gateway.add_argument(
        "--response-store-size",
        type=_int_in(0, None, "0 or more"),
        default=1000,
        metavar="N",
        help="responses kept, the oldest going first; 0: none (default: 1000)",
    )
    gateway.add_argument(
        "--response-store-ttl",
        type=_seconds,
        default=86400.0,
        metavar="SECONDS",
        help="seconds a response is kept, above 0; inf: no limit (default: 86400)",
    )
    gateway.add_argument(
        "--allow-no-auth",
        action="store_true",
        help="serve a non-loopback --host without API keys",
    )
    gateway.add_argument(
        "--allow-origin",
        dest="allow_origins",
        action="append",
        metavar="ORIGIN",
        help="a web page origin whose browser requests are served, with CORS, e.g. "
        "https://app.example (repeatable; exact scheme://host[:port]; '*': any origin, only "
        "with API keys); requests with any other Origin header are refused",
    )
    gateway.add_argument(
        "--allow-host",
        dest="allow_hosts",
        action="append",
        metavar="NAME",
        help="a Host name served without API keys besides localhost and loopback addresses "
        "(repeatable; a proxy's name for the gateway; '*': any)",
    )
    gateway.add_argument(
        "--body-timeout",
        type=_seconds,
        default=30.0,
        metavar="SECONDS",
        help="seconds a client has to send a request body, above 0; 408 after (default: 30)",
    )
    gateway.add_argument(
        "--offline",
        action="store_true",
        help="no credential, no network: the real Claude Code CLI answers from a built-in "
        "scripted model on 127.0.0.1, which calls each offered tool once with arguments made "
        "from its schema, then answers in text quoting the results (to try a client against "
        "the gateway)",
    )
    gateway.set_defaults(run=_gateway)
    check = commands.add_parser("check", help="check what a request needs before dispatch")
    check.add_argument("--tools", metavar="MODULE:ATTR", help="the tool registry to check")
    check.add_argument("--require", default="", help="comma-separated tools the request needs")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.add_argument("--probe", action="store_true", help="also run one real round trip")
    check.add_argument("--live", action="store_true", help="probe the real API, not a script")
    check.add_argument(
        "--offline",
        action="store_true",
        help="check everything but credentials (for CI); with --probe, a round trip through the "
        "real CLI against the embedded scripted API",
    )
    check.set_defaults(run=_check)
    scenarios = commands.add_parser("scenarios", help="run or record scenario files")
    actions = scenarios.add_subparsers(dest="action", required=True)
    run = actions.add_parser(
        "run",
        help="run scenario files offline, with a report for CI",
        description="Run scenario files (or every *.json in a directory) through the real "
        "Claude Code CLI against a scripted Messages API, with your tools when --tools names "
        "them; one PASS or FAIL line per scenario, then a summary.",
        epilog="Exit status: 0 when every scenario holds, 1 when one does not, 2 when the "
        "command cannot run (no scenario file, one that cannot be read, a --tools that cannot "
        "be loaded, an unreadable SF_PROVIDER_GROUP_<NAME> switch). Every file is read before "
        "the first scenario runs: with exit status 2, no scenario ran and no JUnit file was "
        "written.",
    )
    run.add_argument("paths", nargs="+", metavar="PATH", help="scenario files or directories")
    run.add_argument("--tools", metavar="MODULE:ATTR", help="the app's tools the scenarios name")
    run.add_argument(
        "--junit-xml",
        metavar="FILE",
        help="also write a JUnit XML report (its directory is created)",
    )
    record = actions.add_parser(
        "record",
        help="record a real session as a scenario file",
        description="Run one real query with your tools and write it as a scenario file that "
        "`sf-provider scenarios run` replays offline. No credential is written to the file.",
        epilog="--live uses your own credentials (ANTHROPIC_API_KEY, or your Claude login). "
        "--upstream URL needs none: without one the upstream gets no credential; set "
        "ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN to the one it expects and it is forwarded. "
        "Exit status: 0 when FILE is written (a session that ends with an error is recorded "
        "too), 1 when the session could not be recorded (nothing is written), 2 when the "
        "command cannot run (FILE exists without --force, a --tools that "
        "cannot be loaded, an unreadable SF_PROVIDER_GROUP_<NAME> switch, an unusable option "
        "value).",
    )
    where = record.add_mutually_exclusive_group(required=True)
    where.add_argument("--live", action="store_true", help="the real API, your own credentials")
    where.add_argument("--upstream", metavar="URL", help="another Messages API to record from")
    record.add_argument("--prompt", required=True, help="the user message")
    record.add_argument("--out", required=True, metavar="FILE", help="the scenario file to write")
    record.add_argument("--tools", metavar="MODULE:ATTR", help="the tools to offer (and run)")
    record.add_argument(
        "--name", type=_not_empty, help="the scenario name (default: the file name)"
    )
    record.add_argument("--model", type=_not_empty, help="the model to ask")
    record.add_argument(
        "--max-turns", type=_int_in(1, None, "1 or more"), help="model turns allowed, 1 or more"
    )
    record.add_argument("--force", action="store_true", help="replace an existing FILE")
    scenarios.set_defaults(run=_scenarios)
    args = parser.parse_args(argv)
    if getattr(args, "check_dir", None):
        args.dir, args.check = args.check_dir, True
    elif args.command == "schemas":
        args.check = False
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
