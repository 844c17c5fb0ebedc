"""`sf-provider serve`: the tool registry as an MCP server over stdio.

Four levels: the server in memory (the official `mcp` client), the real `sf-provider serve`
subprocess over stdio, the real Claude Code CLI using it as an external stdio MCP server, and
the safety gate on every transport. The tools are `tests/fixtures/serve_tools.py`; subprocesses
find it through `PYTHONPATH`, this process through `sys.path` (set below, so any import mode and
pytest-xdist work).
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.abc
import claude_agent_sdk as sdk
import mcp
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent

from sf_provider import ClaudeAgentProvider, ToolRegistry
from sf_provider._bridge import build_mcp_server
from sf_provider.cli import main
from sf_provider.testing import ScriptedMessagesAPI, offline_env, reply, text, tool_use

pytestmark = pytest.mark.anyio

TESTS_DIR = Path(__file__).resolve().parents[1]
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))
serve_tools: Any = importlib.import_module("fixtures.serve_tools")

SPEC = "fixtures.serve_tools:registry"
MiB = 1 << 20
DENIED = "Tool 'delete_file' was denied by the safety gate: system files are off limits"
BOOM = "Tool 'boom' failed: RuntimeError: the boom tool always fails"

T = TypeVar("T")


@pytest.fixture
def registry() -> ToolRegistry:
    serve_tools.CALLS.clear()
    loaded: ToolRegistry = ToolRegistry.load(SPEC)
    return loaded


def result_text(result: CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


def tool_result_view(block: Mapping[str, Any]) -> tuple[str, bool]:
    """(text, is_error) of a Messages API tool_result block, whatever shape its content has."""
    content = block.get("content")
    if isinstance(content, str):
        body = content
    else:
        body = "".join(str(b.get("text", "")) for b in content or [] if b.get("type") == "text")
    return body, bool(block.get("is_error"))


def tool_results_by_tool(request: Any) -> list[tuple[str, tuple[str, bool]]]:
    """(app tool name, (text, is_error)) for each tool_use of a recorded request, in order."""
    results = {r["tool_use_id"]: tool_result_view(r) for r in request.tool_results()}
    return [(use["name"].rsplit("__", 1)[-1], results[use["id"]]) for use in request.tool_uses()]


async def concurrently(*runs: Callable[[], Awaitable[T]]) -> list[T]:
    """The results of `runs`, run at the same time (the CLI and subprocess starts overlap)."""
    results: dict[int, T] = {}

    async def run_one(index: int, run: Callable[[], Awaitable[T]]) -> None:
        results[index] = await run()

    async with anyio.create_task_group() as group:
        for index, run in enumerate(runs):
            group.start_soon(run_one, index, run)
    return [results[index] for index in range(len(runs))]


# --------------------------------------------------------------------------- subprocess helpers


def isolated_env(tmp_path: Path) -> dict[str, str]:
    """HOME / CLAUDE_CONFIG_DIR / TMPDIR under tmp_path."""
    dirs = {"HOME": "home", "CLAUDE_CONFIG_DIR": "config", "TMPDIR": "tmp"}
    for name in dirs.values():
        (tmp_path / name).mkdir(exist_ok=True)
    return {key: str(tmp_path / name) for key, name in dirs.items()}


def server_env(tmp_path: Path, call_log: Path | None = None) -> dict[str, str]:
    """What a `sf-provider serve` subprocess needs on top of its inherited environment."""
    env = isolated_env(tmp_path) | {"PYTHONPATH": str(TESTS_DIR)}
    if call_log is not None:
        env[serve_tools.CALL_LOG_ENV] = str(call_log)
    return env


def serve_args(name: str = "ext") -> list[str]:
    return ["-m", "sf_provider.cli", "serve", "--tools", SPEC, "--name", name]


def processes_running(marker: str) -> list[str]:
    """Command lines of live processes that contain `marker`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue  # gone meanwhile
        if marker.encode() in args:
            found.append(b" ".join(args).decode(errors="replace"))
    return found


@asynccontextmanager
async def stdio_session(tmp_path: Path, call_log: Path | None = None) -> AsyncIterator[mcp.Client]:
    """The official mcp client over stdio to a real `sf-provider serve` subprocess."""
    params = StdioServerParameters(
        command=sys.executable,
        args=serve_args(),
        env=server_env(tmp_path, call_log),
        cwd=tmp_path,
    )
    # stdio_client waits for, then kills, the process tree when the block ends.
    with (tmp_path / "serve-stderr.log").open("w") as errlog:
        async with mcp.Client(stdio_client(params, errlog=errlog)) as client:
            yield client


INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "raw-test", "version": "0"},
}


class RawServer:
    """A `sf-provider serve` subprocess driven with plain JSON-RPC lines."""

    def __init__(self, process: anyio.abc.Process, stderr: Path) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.stdin = process.stdin
        self.stderr = stderr
        self.stdout_lines: list[bytes] = []
        self._stdout = BufferedByteReceiveStream(process.stdout)

    async def send(self, message: dict[str, Any]) -> None:
        await self.stdin.send((json.dumps(message) + "\n").encode())

    async def receive(self) -> dict[str, Any]:
        # A "no hang" bound only: the first answer waits for the server process to start, which
        # takes seconds on a loaded machine.
        with anyio.fail_after(60):
            line = await self._stdout.receive_until(b"\n", 64 * MiB)
        self.stdout_lines.append(line)
        message: dict[str, Any] = json.loads(line)
        return message

    async def request(self, id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        await self.send({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        return await self.receive()

    async def initialize(self) -> None:
        answer = await self.request(0, "initialize", INITIALIZE)
        assert answer["result"]["serverInfo"]["name"] == "ext"
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def call(self, id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        answer = await self.request(id, "tools/call", {"name": name, "arguments": arguments})
        result: dict[str, Any] = answer["result"]
        return result

    async def rest_of_stdout(self) -> bytes:
        rest = bytearray()
        with anyio.fail_after(60):
            while True:
                try:
                    rest += await self._stdout.receive()
                except (anyio.EndOfStream, anyio.ClosedResourceError):
                    return bytes(rest)

    async def exit_code_within(self, seconds: float) -> int:
        with anyio.fail_after(seconds):
            return await self.process.wait()


@asynccontextmanager
async def raw_server(tmp_path: Path, **env: str) -> AsyncIterator[RawServer]:
    stderr = tmp_path / "serve-stderr.log"
    with stderr.open("w") as errlog:
        process = await anyio.open_process(
            [sys.executable, *serve_args()],
            env={**os.environ, **server_env(tmp_path), **env},
            stderr=errlog,
            cwd=tmp_path,
        )
        try:
            yield RawServer(process, stderr)
        finally:
            with anyio.CancelScope(shield=True):
                if process.returncode is None:
                    process.kill()
                await process.aclose()


# --------------------------------------------------------------------------- 1. in memory

MODES = pytest.mark.parametrize("mode", ["auto", "legacy"])


@asynccontextmanager
async def in_memory_client(registry: ToolRegistry, mode: str) -> AsyncIterator[mcp.Client]:
    server = build_mcp_server(
        "ext", registry.enabled_tools(), default_timeout=5, gate=registry.gate, transport="stdio"
    )
    async with mcp.Client(server, mode=mode) as client:
        yield client


@MODES
async def test_listed_schemas_are_the_function_tool_schemas_intact(
    registry: ToolRegistry, mode: str
) -> None:
    async with in_memory_client(registry, mode) as client:
        listed = await client.list_tools()
    schemas = {tool.name: tool.input_schema for tool in listed.tools}
    assert schemas == {t.name: t.input_schema for t in registry.enabled_tools()}
    book = schemas["book"]
    assert book["required"] == ["party", "time"]
    assert book["properties"]["time"]["enum"] == ["18:00", "19:30", "21:00"]
    assert book["properties"]["party"]["required"] == ["name", "size"]


@MODES
async def test_arguments_violating_the_schema_give_an_error_result(
    registry: ToolRegistry, mode: str
) -> None:
    async with in_memory_client(registry, mode) as client:
        bad = await client.call_tool("book", {"party": {"name": "Ada"}, "time": "noon"})
        good = await client.call_tool(
            "book", {"party": {"name": "Ada", "size": 2}, "time": "21:00"}
        )
    assert bad.is_error
    assert "Invalid arguments for tool 'book'" in result_text(bad)
    assert "'size' is a required property" in result_text(bad)
    assert "'noon' is not one of" in result_text(bad)
    assert not good.is_error
    assert json.loads(result_text(good)) == {"booked": "Ada", "size": 2, "time": "21:00"}


@MODES
async def test_a_raising_executor_gives_an_error_result_and_the_next_call_works(
    registry: ToolRegistry, mode: str
) -> None:
    async with in_memory_client(registry, mode) as client:
        boom = await client.call_tool("boom", {})
        add = await client.call_tool("add", {"a": 2, "b": 3})
    assert boom.is_error and result_text(boom) == BOOM
    assert not add.is_error and result_text(add) == "5"


@MODES
async def test_a_timed_out_executor_gives_an_error_result(
    registry: ToolRegistry, mode: str
) -> None:
    serve_tools.SLOW_FINISHED.clear()
    async with in_memory_client(registry, mode) as client:
        slow = await client.call_tool("slow", {})
        finished_before_the_answer = serve_tools.SLOW_FINISHED.is_set()
        echo = await client.call_tool("echo", {"text": "still here"})
    assert slow.is_error and result_text(slow) == "Tool 'slow' timed out after 0.3 s"
    assert not finished_before_the_answer, "the timed-out answer waited for the executor"
    assert result_text(echo) == "still here"


@MODES
async def test_an_unknown_tool_gives_an_error_result_naming_the_known_tools(
    registry: ToolRegistry, mode: str
) -> None:
    async with in_memory_client(registry, mode) as client:
        result = await client.call_tool("nope", {})
    assert result.is_error
    assert result_text(result) == (
        "Unknown tool 'nope'; tools: add, big, book, boom, delete_file, echo, slow, wait"
    )


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("no_colon", "--tools takes 'module:attr'"),
        ("no_such_module_xyz:tools", "No module named 'no_such_module_xyz'"),
        ("fixtures.serve_tools:missing", "has no attribute 'missing'"),
        ("fixtures.serve_tools:DENIAL_REASON", "must be a ToolRegistry"),
    ],
)
def test_an_unloadable_tools_spec_exits_2_with_a_clear_error(
    spec: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--tools", spec]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"sf-provider serve: cannot load --tools {spec!r}" in captured.err
    assert problem in captured.err


@pytest.mark.parametrize("value", ["0", "-1", "-0.5", "nan", "-inf"])
def test_a_timeout_that_is_not_a_positive_number_is_refused_at_startup(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Accepted before, every call then failed (`timed out after -1 s`, `deadline must not be
    NaN`); refused now as argparse refuses a bad value, as `ProviderSettings(tool_timeout=...)`
    refuses it."""
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--tools", SPEC, f"--timeout={value}"])  # "-inf" would read as a flag

    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert (
        f"sf-provider serve: error: argument --timeout: must be a number of seconds above 0 "
        f"(inf: no limit), got {value!r}"
    ) in err


def test_an_infinite_timeout_is_accepted_as_no_limit(capsys: pytest.CaptureFixture[str]) -> None:
    # Refused for its --tools, so the --timeout was read and accepted.
    assert main(["serve", "--tools", "no_colon", "--timeout", "inf"]) == 2
    assert "cannot load --tools 'no_colon'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--port", "-1"], "argument --port: must be a TCP port from 0 to 65535, got '-1'"),
        (["--port", "70000"], "argument --port: must be a TCP port from 0 to 65535, got '70000'"),
        (["--max-concurrency", "0"], "argument --max-concurrency: must be 1 or more, got '0'"),
        (["--warm-processes", "-1"], "argument --warm-processes: must be 0 to 64, got '-1'"),
        (["--warm-processes", "65"], "argument --warm-processes: must be 0 to 64, got '65'"),
        (["--model", ""], "argument --model: must not be empty"),
        (
            ["--response-store", "http://127.0.0.1:6379"],
            "argument --response-store: must be a redis://, rediss:// or unix:// URL",
        ),
        (["--response-store-size", "-1"], "argument --response-store-size: must be 0 or more"),
        (
            ["--response-store-ttl", "0"],
            "argument --response-store-ttl: must be a number of seconds above 0",
        ),
    ],
)
def test_gateway_values_it_cannot_use_are_refused_at_startup(
    args: list[str], problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """They gave a pydantic traceback (`--model ""` was dropped: the default model served)."""
    with pytest.raises(SystemExit) as exit_:
        main(["gateway", *args])

    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"sf-provider gateway: error: {problem}" in err
    assert "Traceback" not in err


def test_serve_refuses_an_empty_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--tools", SPEC, "--name", ""])

    assert exit_.value.code == 2
    assert "sf-provider serve: error: argument --name: must not be empty" in capsys.readouterr().err


def test_the_help_states_the_exit_statuses_and_the_timeout_range(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--help"])

    assert exit_.value.code == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "per-tool timeout in seconds, above 0; inf: no limit" in help_text
    assert "Exit status: 0 at the end of stdin or on SIGTERM / SIGINT; 2, before" in help_text


def test_an_unreadable_group_switch_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """It was an 18-line traceback and exit status 1."""
    monkeypatch.setenv("SF_PROVIDER_GROUP_ADMIN", "maybe")

    assert main(["serve", "--tools", "fixtures.check_tools:registry"]) == 2

    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(
        "sf-provider serve: SF_PROVIDER_GROUP_ADMIN='maybe' is not a switch this registry reads: "
        "set it to 1, true, on or yes"
    )
    assert len(captured.err.splitlines()) == 1, captured.err


# --------------------------------------------------------------------------- 2. stdio subprocess


async def test_the_console_script_loads_tools_from_the_working_directory(tmp_path: Path) -> None:
    """`sf-provider serve --tools mod:attr` run where `mod.py` is, as `check` does (a console
    script's sys.path starts at its bin directory, not the working directory)."""
    (tmp_path / "cwd_tools.py").write_text(
        "from sf_provider import FunctionTool\n"
        "tools = [FunctionTool(name='here', description='d', executor=lambda a: 'ok')]\n"
    )
    script = Path(sys.executable).with_name("sf-provider")
    params = StdioServerParameters(
        command=str(script),
        args=["serve", "--tools", "cwd_tools:tools"],
        env={**isolated_env(tmp_path), "PATH": os.environ["PATH"]},
        cwd=tmp_path,
    )
    with (tmp_path / "serve-stderr.log").open("w") as errlog:
        async with mcp.Client(stdio_client(params, errlog=errlog)) as client:
            listed = await client.list_tools()
    assert [t.name for t in listed.tools] == ["here"]


async def test_names_too_long_for_a_claude_code_client_are_named_at_startup(
    tmp_path: Path,
) -> None:
    """Served without a word, a 57-character name reached the Messages API as a 67-character
    `mcp__<server>__<name>` (the API takes 64): it would refuse every request of that client."""
    fits, too_long = "f" * 56, "t" * 57
    (tmp_path / "long_tools.py").write_text(
        "from sf_provider import FunctionTool\n"
        f"tools = [FunctionTool(name=n, executor=lambda a: 'ok') for n in {[fits, too_long]!r}]\n"
    )
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "sf_provider.cli", "serve", "--tools", "long_tools:tools"],
        env=isolated_env(tmp_path),
        cwd=tmp_path,
    )
    stderr = tmp_path / "serve-stderr.log"
    with stderr.open("w") as errlog:
        async with mcp.Client(stdio_client(params, errlog=errlog)) as client:
            listed = await client.list_tools()
    assert [t.name for t in listed.tools] == [fits, too_long]  # still served, for other clients
    warning = next(line for line in stderr.read_text().splitlines() if "WARNING" in line)
    assert "1 tool name(s) longer than 56 characters, which a Claude Code client cannot" in warning
    assert warning.endswith(f"at most 64 characters): {too_long}. Shorten them.")


async def test_the_stdio_server_lists_the_registry_and_calls_tools(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    async with stdio_session(tmp_path) as client:
        listed = await client.list_tools()
        echo = await client.call_tool("echo", {"text": "hello ✓"})
        add = await client.call_tool("add", {"a": 2, "b": 3})
    assert [(t.name, t.input_schema) for t in listed.tools] == [
        (t.name, t.input_schema) for t in registry.enabled_tools()
    ]
    assert (result_text(echo), echo.is_error) == ("hello ✓", False)
    assert (result_text(add), add.is_error) == ("5", False)


def utf8_text(pattern: str, size: int) -> str:
    """`pattern` repeated, padded with 'x' to exactly `size` UTF-8 bytes."""
    repeated = pattern * (size // len(pattern.encode()))
    return repeated + "x" * (size - len(repeated.encode()))


async def test_payloads_of_up_to_10_mib_pass_intact_both_ways(tmp_path: Path) -> None:
    # Newlines, quotes and backslashes inside strings must not break line framing. The 10 MiB
    # text keeps to Latin-1, as the mcp client's line splitting is slow on wider strings.
    sent = {
        1 * MiB: utf8_text('ünïcødé ✓ 🙂 中文 "quoted" \\ line\nbreak\t', 1 * MiB),
        10 * MiB: utf8_text('Grüße, café "naïve" \\ line\nbreak\t', 10 * MiB),
    }
    async with stdio_session(tmp_path) as client:
        big = await client.call_tool("big", {"size": 10 * MiB})
        echoed = {
            size: await client.call_tool("echo", {"text": text}) for size, text in sent.items()
        }
    assert not big.is_error
    assert result_text(big) == serve_tools.big_text(10 * MiB)
    for size, result in echoed.items():
        assert not result.is_error
        assert result_text(result) == sent[size], f"{size} bytes of arguments came back changed"


async def test_stdout_carries_only_json_rpc_and_logs_go_to_stderr(tmp_path: Path) -> None:
    async with raw_server(tmp_path) as server:
        await server.initialize()
        boom = await server.call(1, "boom", {})
        echo = await server.call(2, "echo", {"text": "after the boom"})
        await server.stdin.aclose()
        rest = await server.rest_of_stdout()
        code = await server.exit_code_within(30)  # a "no hang" bound
    assert boom == {"content": [{"type": "text", "text": BOOM}], "isError": True}
    assert echo["content"][0]["text"] == "after the boom" and not echo.get("isError")
    assert rest == b""
    for line in server.stdout_lines:
        assert json.loads(line)["jsonrpc"] == "2.0"
    stderr = server.stderr.read_text()
    assert f"WARNING sf_provider.tools: {BOOM}" in stderr
    assert "Traceback" in stderr
    assert code == 0


async def test_end_of_stdin_exits_0_without_waiting_for_a_timed_out_tool_thread(
    tmp_path: Path,
) -> None:
    finished = tmp_path / "slow-finished"
    # The executor sleeps 60 s: a shutdown that waited for it runs past the 30 s bound; one that
    # did not has all that time to exit, however loaded the machine.
    env = {"SERVE_TOOLS_SLOW_FINISHED": str(finished), "SERVE_TOOLS_SLOW_SECONDS": "60"}
    async with raw_server(tmp_path, **env) as server:
        await server.initialize()
        slow = await server.call(1, "slow", {})
        assert slow["isError"]
        await server.stdin.aclose()
        code = await server.exit_code_within(30)
    assert code == 0
    # The executor's thread writes the file when its sleep ends: shutdown did not wait for it.
    assert not finished.exists(), "shutdown waited for the sleeping executor"


async def test_a_line_that_is_not_json_rpc_is_answered_and_serving_goes_on(tmp_path: Path) -> None:
    """Such a line was dropped without a word: a client waited for ever for its answer. Blank
    lines are no messages: not answered."""
    async with raw_server(tmp_path) as server:
        await server.initialize()
        await server.stdin.send(b"\n   \r\n")
        ping = await server.request(4, "ping", {})
        await server.stdin.send(b"this is not json\n")
        not_json = await server.receive()
        await server.send({"id": 5, "method": "tools/call", "params": {"name": "echo"}})
        no_jsonrpc = await server.receive()
        echo = await server.call(6, "echo", {"text": "still serving"})
    assert ping == {"jsonrpc": "2.0", "id": 4, "result": {}}
    assert not_json["id"] is None
    assert not_json["error"]["code"] == -32700
    assert not_json["error"]["message"] == "Parse error"
    assert no_jsonrpc["id"] == 5
    assert no_jsonrpc["error"]["code"] == -32600
    assert no_jsonrpc["error"]["message"] == "Invalid Request"
    assert echo["content"][0]["text"] == "still serving"
    stderr = server.stderr.read_text()
    assert "unreadable message on stdin (Parse error)" in stderr
    assert "'this is not json'" in stderr
    assert "unreadable message on stdin (Invalid Request)" in stderr


async def test_a_client_gone_during_a_call_ends_serve_with_0_and_no_traceback(
    tmp_path: Path,
) -> None:
    """A client killed while a call runs: serve's answer met a broken pipe, which ended it with
    exit status 1 and a 60-line traceback on stderr."""
    call_log = tmp_path / "calls.jsonl"
    stderr = tmp_path / "serve-stderr.log"
    # A pipe of our own for stdout: the test closes its read end, as a dying client does.
    stdout_read, stdout_write = os.pipe()
    with stderr.open("w") as errlog:
        process = await anyio.open_process(
            [sys.executable, *serve_args()],
            env={**os.environ, **server_env(tmp_path, call_log)},
            stdout=stdout_write,
            stderr=errlog,
            cwd=tmp_path,
        )
    os.close(stdout_write)
    try:
        assert process.stdin is not None
        for message in [
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INITIALIZE},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "wait"}},
        ]:
            await process.stdin.send((json.dumps(message) + "\n").encode())
        for _ in range(3000):  # until the call runs (the process started): at most 60 s
            if call_log.exists():
                break
            await anyio.sleep(0.02)
        assert call_log.exists(), "the call did not start"
        os.close(stdout_read)  # what a killed client leaves: no reader...
        await process.stdin.aclose()  # ...and the end of stdin
        with anyio.fail_after(30):  # a "no hang" bound
            code = await process.wait()
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.aclose()
    errors = stderr.read_text()
    assert code == 0, errors
    assert "Traceback" not in errors
    assert "the client closed its end of stdout: shutting down" in errors


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_termination_signal_exits_0_at_once(tmp_path: Path, signum: signal.Signals) -> None:
    async with raw_server(tmp_path) as server:
        await server.initialize()  # answered: the signal handler is in place
        await server.call(1, "add", {"a": 1, "b": 1})
        server.process.send_signal(signum)
        # stdin stays open: without the signal handled, the process never exits. 30 s, not 2:
        # a loaded machine's interpreter shutdown can take seconds.
        code = await server.exit_code_within(30)
    assert code == 0
    assert f"{signum.name} received: shutting down" in server.stderr.read_text()


# --------------------------------------------------------------------------- 3. the Claude CLI


def add_and_boom_script() -> list[Any]:
    return [reply(tool_use("add", {"a": 2, "b": 3}), tool_use("boom")), reply(text("done"))]


@pytest.mark.cli
async def test_the_claude_cli_gets_the_same_tool_results_from_serve_as_from_the_bridge(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    (tmp_path / "server").mkdir()
    server_name = f"ext-{uuid.uuid4().hex}"

    async def through_serve() -> list[tuple[str, tuple[str, bool]]]:
        async with ScriptedMessagesAPI(add_and_boom_script()) as api:
            options = sdk.ClaudeAgentOptions(
                tools=[],
                allowed_tools=["mcp__ext__add", "mcp__ext__boom"],
                mcp_servers={
                    "ext": {
                        "type": "stdio",
                        "command": sys.executable,
                        "args": serve_args(name=server_name),
                        "env": server_env(tmp_path / "server"),
                    }
                },
                setting_sources=[],
                env=offline_env(api.base_url) | isolated_env(tmp_path),
                cwd=str(tmp_path),
                extra_args={"no-session-persistence": None, "bare": None},
            )
            messages = [m async for m in sdk.query(prompt="2+3, then boom", options=options)]
        result = messages[-1]
        assert isinstance(result, sdk.ResultMessage) and not result.is_error, result
        assert api.errors == []
        assert "mcp__ext__add" in api.requests[0].tool_names
        for _ in range(200):  # the CLI stops its stdio servers (with SIGINT): allow 10 s
            if not processes_running(server_name):
                break
            await anyio.sleep(0.05)
        assert not processes_running(server_name), "the serve process outlived the CLI"
        return tool_results_by_tool(api.requests[1])

    async def through_the_bridge() -> list[tuple[str, tuple[str, bool]]]:
        async with ScriptedMessagesAPI(add_and_boom_script()) as api:
            provider = ClaudeAgentProvider(api.settings())
            await provider.generate("2+3, then boom", tools=registry.enabled_tools())
        return tool_results_by_tool(api.requests[1])

    # One after the other: two CLIs and a server starting at once only contend for 2 cores.
    external = await through_serve()
    bridge = await through_the_bridge()
    assert external == bridge == [("add", ("5", False)), ("boom", (BOOM, True))]


# --------------------------------------------------------------------------- 4. the safety gate


async def delete_through_every_transport(
    registry: ToolRegistry, tmp_path: Path, path: str
) -> tuple[list[tuple[str, bool]], Path]:
    """(text, is_error) of one `delete_file(path)` call per transport, and the stdio call log."""
    call_log = tmp_path / "stdio-calls.jsonl"

    async def direct() -> tuple[str, bool]:
        output = await registry.call("delete_file", {"path": path})
        return output.text, output.is_error

    async def sdk_bridge() -> tuple[str, bool]:
        script = [reply(tool_use("delete_file", {"path": path})), reply(text("ok"))]
        async with ScriptedMessagesAPI(script) as api:
            await ClaudeAgentProvider(api.settings(), registry=registry).generate("delete it")
        [result] = api.requests[1].tool_results()
        return tool_result_view(result)

    async def stdio() -> tuple[str, bool]:
        async with stdio_session(tmp_path, call_log=call_log) as client:
            result = await client.call_tool("delete_file", {"path": path})
        return result_text(result), bool(result.is_error)

    return await concurrently(direct, sdk_bridge, stdio), call_log


@pytest.mark.cli
async def test_the_safety_gate_denies_identically_on_all_three_transports(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    outcomes, call_log = await delete_through_every_transport(registry, tmp_path, "/etc/passwd")
    assert outcomes == [(DENIED, True)] * 3  # direct, SDK bridge, stdio server
    assert serve_tools.CALLS == [], "the executor ran in this process"
    assert not call_log.exists(), "the executor ran in the stdio server"


@pytest.mark.cli
async def test_an_allowed_mutating_call_runs_on_all_three_transports(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    path = str(tmp_path / "scratch.txt")
    outcomes, call_log = await delete_through_every_transport(registry, tmp_path, path)
    assert outcomes == [(f"deleted {path}", False)] * 3
    in_process_calls = serve_tools.CALLS
    assert in_process_calls == [("delete_file", {"path": path})] * 2  # direct, SDK bridge
    logged = [json.loads(line) for line in call_log.read_text().splitlines()]
    assert logged == [{"tool": "delete_file", "arguments": {"path": path}}]
