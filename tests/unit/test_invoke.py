"""The one invocation layer: `invoke_tool`, `to_tool_output` and `FunctionTool.call`."""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest
from pydantic import AfterValidator, BaseModel

from sf_provider import CallContext, RunningCall, current_call
from sf_provider._invoke import INTERRUPTS, invoke_tool, to_tool_output
from sf_provider.tools import FunctionTool, ToolOutput

pytestmark = pytest.mark.anyio

ADD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}


class Recorder:
    """A sync executor that counts its calls."""

    def __init__(self, value: Any = "ok") -> None:
        self.calls: list[dict[str, Any]] = []
        self.value = value

    def __call__(self, args: dict[str, Any]) -> Any:
        self.calls.append(args)
        return self.value


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """An event a blocking sync executor waits on; set at teardown so no thread lingers."""
    event = threading.Event()
    yield event
    event.set()


# -- arguments


async def test_invalid_arguments_never_reach_the_executor() -> None:
    executor = Recorder()
    tool = FunctionTool(name="add", input_schema=ADD_SCHEMA, executor=executor)

    output = await invoke_tool(tool, {"a": "one"}, default_timeout=None)

    assert output.is_error
    assert executor.calls == []


async def test_invalid_arguments_error_names_the_tool_and_the_problems() -> None:
    tool = FunctionTool(name="add", input_schema=ADD_SCHEMA, executor=Recorder())

    output = await invoke_tool(tool, {"a": "one"}, default_timeout=None)

    assert "Invalid arguments for tool 'add'" in output.text
    assert "$.a: 'one' is not of type 'integer'" in output.text
    assert "'b' is a required property" in output.text


async def test_valid_arguments_reach_the_executor_as_a_dict() -> None:
    executor = Recorder()
    tool = FunctionTool(name="add", input_schema=ADD_SCHEMA, executor=executor)

    await invoke_tool(tool, {"a": 1, "b": 2}, default_timeout=None)

    assert executor.calls == [{"a": 1, "b": 2}]


async def test_none_arguments_are_an_empty_dict() -> None:
    executor = Recorder()
    tool = FunctionTool(name="now", executor=executor)

    await invoke_tool(tool, None, default_timeout=None)

    assert executor.calls == [{}]


async def test_call_validates_like_the_bridge() -> None:
    executor = Recorder()
    tool = FunctionTool(name="add", input_schema=ADD_SCHEMA, executor=executor)

    output = await tool.call({"a": 1})

    assert output.is_error
    assert "'b' is a required property" in output.text
    assert executor.calls == []


# -- executors


async def test_sync_executor_result_is_returned() -> None:
    tool = FunctionTool(
        name="add", input_schema=ADD_SCHEMA, executor=lambda args: args["a"] + args["b"]
    )

    output = await invoke_tool(tool, {"a": 2, "b": 3}, default_timeout=None)

    assert output == ToolOutput.from_text("5")


async def test_sync_executor_runs_off_the_event_loop_thread() -> None:
    threads: list[threading.Thread] = []
    tool = FunctionTool(
        name="where", executor=lambda args: threads.append(threading.current_thread())
    )

    await invoke_tool(tool, {}, default_timeout=None)

    assert threads
    assert threads[0] is not threading.current_thread()


async def test_async_executor_is_awaited() -> None:
    async def add(args: dict[str, Any]) -> int:
        await anyio.lowlevel.checkpoint()
        return int(args["a"] + args["b"])

    tool = FunctionTool(name="add", input_schema=ADD_SCHEMA, executor=add)

    output = await invoke_tool(tool, {"a": 2, "b": 3}, default_timeout=None)

    assert output == ToolOutput.from_text("5")


async def test_sync_callable_returning_an_awaitable_is_awaited() -> None:
    async def later() -> str:
        return "done"

    tool = FunctionTool(name="later", executor=lambda args: later())

    output = await invoke_tool(tool, {}, default_timeout=None)

    assert output == ToolOutput.from_text("done")


async def test_call_runs_the_executor() -> None:
    tool = FunctionTool(name="hello", executor=lambda args: "hi")

    assert await tool.call() == ToolOutput.from_text("hi")


async def test_tool_without_executor_is_an_error_result() -> None:
    tool = FunctionTool(name="app_side")

    output = await invoke_tool(tool, {}, default_timeout=None)

    assert output.is_error
    assert "'app_side' has no executor" in output.text


# -- failures


def _boom(args: dict[str, Any]) -> Any:
    raise ValueError("disk full")


async def test_raising_executor_is_an_error_result_naming_tool_type_and_message() -> None:
    tool = FunctionTool(name="save", executor=_boom)

    output = await invoke_tool(tool, {}, default_timeout=None)

    assert output.is_error
    assert output.text == "Tool 'save' failed: ValueError: disk full"


async def test_raising_async_executor_is_an_error_result() -> None:
    async def boom(args: dict[str, Any]) -> Any:
        raise KeyError("id")

    tool = FunctionTool(name="lookup", executor=boom)

    output = await invoke_tool(tool, {}, default_timeout=None)

    assert output.is_error
    assert output.text == "Tool 'lookup' failed: KeyError: 'id'"


async def test_raising_executor_is_logged_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tool = FunctionTool(name="save", executor=_boom)

    with caplog.at_level(logging.WARNING, logger="sf_provider.tools"):
        await invoke_tool(tool, {}, default_timeout=None)

    [record] = [r for r in caplog.records if r.name == "sf_provider.tools"]
    assert "Tool 'save' failed: ValueError: disk full" in record.getMessage()
    assert record.exc_info is not None
    assert record.exc_info[0] is ValueError


async def test_hanging_async_executor_times_out() -> None:
    async def hang(args: dict[str, Any]) -> Any:
        await anyio.sleep(30)

    tool = FunctionTool(name="slow", executor=hang)

    with anyio.fail_after(2):
        output = await invoke_tool(tool, {}, default_timeout=0.05)

    assert output.is_error
    assert output.text == "Tool 'slow' timed out after 0.05 s"


async def test_hanging_sync_executor_times_out(release: threading.Event) -> None:
    tool = FunctionTool(name="slow", executor=lambda args: release.wait(30))

    with anyio.fail_after(2):
        output = await invoke_tool(tool, {}, default_timeout=0.05)

    assert output.is_error
    assert "'slow' timed out" in output.text


async def test_tool_timeout_wins_over_default_timeout() -> None:
    async def hang(args: dict[str, Any]) -> Any:
        await anyio.sleep(30)

    tool = FunctionTool(name="slow", executor=hang, timeout=0.05)

    with anyio.fail_after(2):
        output = await invoke_tool(tool, {}, default_timeout=60)

    assert output.text == "Tool 'slow' timed out after 0.05 s"


async def test_timeout_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    async def hang(args: dict[str, Any]) -> Any:
        await anyio.sleep(30)

    tool = FunctionTool(name="slow", executor=hang, timeout=0.05)

    with caplog.at_level(logging.WARNING, logger="sf_provider.tools"):
        await invoke_tool(tool, {}, default_timeout=None)

    assert any("timed out" in r.getMessage() for r in caplog.records)


async def test_executor_raising_timeout_error_without_a_timeout_is_an_error_result() -> None:
    def connect(args: dict[str, Any]) -> Any:
        raise TimeoutError("connect timed out")

    tool = FunctionTool(name="fetch", executor=connect)

    output = await invoke_tool(tool, {}, default_timeout=None)

    assert output.is_error
    assert "TimeoutError: connect timed out" in output.text


# -- what an executor raises besides an Exception


def _raise(exc: BaseException) -> Any:
    def executor(args: dict[str, Any]) -> Any:
        raise exc

    return executor


def _raise_async(exc: BaseException) -> Any:
    async def executor(args: dict[str, Any]) -> Any:
        raise exc

    return executor


@pytest.mark.parametrize("wrap", [_raise, _raise_async], ids=["sync", "async"])
@pytest.mark.parametrize(
    ("code", "shown"), [(2, "2"), ("usage: report --year N", "'usage: report --year N'")]
)
async def test_sys_exit_in_an_executor_is_an_error_result_naming_the_exit_code(
    wrap: Any, code: Any, shown: str
) -> None:
    tool = FunctionTool(name="report", executor=wrap(SystemExit(code)))

    output = await invoke_tool(tool, {}, default_timeout=None)

    assert (output.text, output.is_error) == (
        f"Tool 'report' failed: SystemExit: exit code {shown}",
        True,
    )


async def test_sys_exit_in_a_from_function_tool_is_an_error_result() -> None:
    def report(year: int) -> str:
        """Report a year."""
        raise SystemExit(2)

    output = await FunctionTool.from_function(report).call({"year": 2026})

    assert output.text == "Tool 'report' failed: SystemExit: exit code 2"


@pytest.mark.parametrize("wrap", [_raise, _raise_async], ids=["sync", "async"])
@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, GeneratorExit])
async def test_an_interrupt_reaches_a_direct_caller_as_itself(
    wrap: Any, exc_type: type[BaseException]
) -> None:
    raised = exc_type()
    tool = FunctionTool(name="stop", executor=wrap(raised))

    with pytest.raises(exc_type) as info:
        await invoke_tool(tool, {}, default_timeout=None)

    assert info.value is raised


@pytest.mark.parametrize("wrap", [_raise, _raise_async], ids=["sync", "async"])
async def test_an_interrupt_goes_to_the_interrupt_handler_of_the_calls_context(wrap: Any) -> None:
    raised = KeyboardInterrupt()
    handled: list[BaseException] = []
    tool = FunctionTool(name="stop", executor=wrap(raised))

    token = INTERRUPTS.set(handled.append)
    try:
        output = await invoke_tool(tool, {}, default_timeout=None)
    finally:
        INTERRUPTS.reset(token)

    assert handled == [raised]
    assert (output.text, output.is_error) == ("Tool 'stop' failed: KeyboardInterrupt", True)


async def test_cancelling_the_caller_stays_a_cancellation_even_with_an_interrupt_handler() -> None:
    handled: list[BaseException] = []
    started = anyio.Event()

    async def hang(args: dict[str, Any]) -> Any:
        started.set()
        await anyio.sleep(30)

    tool = FunctionTool(name="slow", executor=hang)
    outputs: list[ToolOutput] = []
    token = INTERRUPTS.set(handled.append)
    try:
        async with anyio.create_task_group() as group:

            async def call() -> None:
                outputs.append(await invoke_tool(tool, {}, default_timeout=None))

            group.start_soon(call)
            await started.wait()
            group.cancel_scope.cancel()
    finally:
        INTERRUPTS.reset(token)

    assert outputs == []
    assert handled == []


# -- sync executors: daemon threads and the cancellation signal


async def test_a_sync_executor_runs_in_a_daemon_thread() -> None:
    threads: list[threading.Thread] = []
    tool = FunctionTool(name="where", executor=lambda a: threads.append(threading.current_thread()))

    await invoke_tool(tool, {}, default_timeout=None)

    assert threads[0] is not threading.current_thread()
    assert threads[0].daemon


async def test_a_from_function_sync_tool_runs_in_a_daemon_thread() -> None:
    threads: list[threading.Thread] = []

    def where() -> str:
        """Name the thread it runs on."""
        threads.append(threading.current_thread())
        return "here"

    await FunctionTool.from_function(where).call()

    assert threads[0] is not threading.current_thread()
    assert threads[0].daemon


REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")


async def test_a_sync_executor_sees_the_callers_contextvars() -> None:
    tool = FunctionTool(name="which", executor=lambda a: REQUEST_ID.get())

    token = REQUEST_ID.set("req-42")
    try:
        output = await invoke_tool(tool, {}, default_timeout=None)
    finally:
        REQUEST_ID.reset(token)

    assert output.text == "req-42"


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_current_call_names_the_tool_and_the_context(kind: str) -> None:
    seen: list[RunningCall | None] = []

    async def async_executor(args: dict[str, Any]) -> str:
        seen.append(current_call())
        return "ok"

    def sync_executor(args: dict[str, Any]) -> str:
        seen.append(current_call())
        return "ok"

    tool = FunctionTool(name="probe", executor=sync_executor if kind == "sync" else async_executor)
    context = CallContext(transport="stdio", tool_call_id="call-1")

    await invoke_tool(tool, {}, default_timeout=None, context=context)

    [call] = seen
    assert call is not None
    assert call.tool is tool
    assert call.context is context
    assert not call.cancelled.is_set()


async def test_current_call_is_none_outside_an_executor() -> None:
    await invoke_tool(FunctionTool(name="t", executor=lambda a: "ok"), {}, default_timeout=None)

    assert current_call() is None


async def test_a_timed_out_sync_executor_sees_its_call_cancelled(release: threading.Event) -> None:
    observed = threading.Event()

    def hang(args: dict[str, Any]) -> str:
        call = current_call()
        assert call is not None
        if call.cancelled.wait(30):
            observed.set()
        release.wait(30)
        return "too late"

    tool = FunctionTool(name="slow", executor=hang, timeout=0.05)

    output = await invoke_tool(tool, {}, default_timeout=None)

    assert output.text == "Tool 'slow' timed out after 0.05 s"
    assert observed.wait(10)


async def test_a_cancelled_sync_executor_sees_its_call_cancelled(release: threading.Event) -> None:
    started = threading.Event()
    observed = threading.Event()

    def hang(args: dict[str, Any]) -> str:
        started.set()
        call = current_call()
        assert call is not None
        if call.cancelled.wait(30):
            observed.set()
        release.wait(30)
        return "too late"

    tool = FunctionTool(name="slow", executor=hang)
    outputs: list[ToolOutput] = []

    async def call() -> None:
        outputs.append(await invoke_tool(tool, {}, default_timeout=None))

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        await anyio.to_thread.run_sync(started.wait, 10)
        group.cancel_scope.cancel()

    assert outputs == []

    assert observed.wait(10)


async def test_a_from_function_sync_tool_sees_its_call_cancelled_on_timeout(
    release: threading.Event,
) -> None:
    observed = threading.Event()

    def hang() -> str:
        """Never return."""
        call = current_call()
        assert call is not None and call.tool.name == "hang"
        if call.cancelled.wait(30):
            observed.set()
        release.wait(30)
        return "too late"

    tool = FunctionTool.from_function(hang, timeout=0.05)

    output = await tool.call()

    assert output.text == "Tool 'hang' timed out after 0.05 s"
    assert observed.wait(10)


# -- return conversion


def test_string_is_sent_as_is() -> None:
    assert to_tool_output('plain "text"') == ToolOutput.from_text('plain "text"')


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"a": 1, "b": [True, None]}, '{"a": 1, "b": [true, null]}'),
        ([1, "x"], '[1, "x"]'),
        (42, "42"),
        (None, "null"),
    ],
)
def test_other_values_are_sent_as_json(value: Any, text: str) -> None:
    assert to_tool_output(value) == ToolOutput.from_text(text)


def test_pydantic_model_is_sent_as_json() -> None:
    class Weather(BaseModel):
        city: str
        celsius: int

    assert to_tool_output(Weather(city="Oslo", celsius=-3)).text == '{"city":"Oslo","celsius":-3}'


def test_non_ascii_is_kept() -> None:
    assert to_tool_output({"city": "Zürich", "sky": "☀"}).text == '{"city": "Zürich", "sky": "☀"}'


def test_tool_output_is_passed_through_unchanged() -> None:
    image = ToolOutput(content=[{"type": "image", "data": "AAAA", "mimeType": "image/png"}])

    assert to_tool_output(image) is image


def test_unserialisable_value_falls_back_to_repr() -> None:
    class Opaque:
        def __repr__(self) -> str:
            return "<Opaque 7>"

    assert to_tool_output({"handle": Opaque()}).text == '{"handle": "<Opaque 7>"}'


async def test_executor_returning_tool_output_controls_the_error_flag() -> None:
    tool = FunctionTool(
        name="check", executor=lambda args: ToolOutput.from_text("no", is_error=True)
    )

    output = await invoke_tool(tool, {}, default_timeout=None)

    assert output == ToolOutput.from_text("no", is_error=True)


async def test_an_async_generator_returned_is_an_error_result_not_its_repr() -> None:
    async def items() -> AsyncIterator[int]:
        yield 1

    tool = FunctionTool(name="items", executor=lambda args: items())

    output = await invoke_tool(tool, {}, default_timeout=None)

    assert output.is_error
    assert "'items' returned a value that cannot be sent: it is an async generator" in output.text


async def test_arguments_a_from_function_tools_types_reject_are_an_invalid_arguments_result(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ran: list[int] = []

    def pick(index: Annotated[int, AfterValidator(_even)]) -> int:
        """Pick an even index."""
        ran.append(index)
        return index

    output = await FunctionTool.from_function(pick).call({"index": 3})

    assert output.is_error
    assert output.text == "Invalid arguments for tool 'pick': $.index: Value error, 3 is odd"
    assert ran == []
    assert [r.getMessage().split(" (arguments")[0] for r in caplog.records] == [output.text]


def _even(value: int) -> int:
    if value % 2:
        raise ValueError(f"{value} is odd")
    return value


async def test_unencodable_return_value_is_an_error_result() -> None:
    loop: list[Any] = []
    loop.append(loop)
    tool = FunctionTool(name="cyclic", executor=lambda args: loop)

    output = await invoke_tool(tool, {}, default_timeout=None)

    assert output.is_error
    assert "'cyclic' returned a value that cannot be sent" in output.text


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("a\ud800b", "a\ufffdb"),  # a lone surrogate, as bytes decoded with surrogateescape give
        ("\ud83d\ude00", "\U0001f600"),  # a pair: the character it encodes
        (["x\udfff"], '["x\ufffd"]'),  # in a value sent as JSON
        (ToolOutput(content=[{"type": "text", "text": "\udc80"}]), "\ufffd"),
        ("données 😀", "données 😀"),  # well-formed text as it is
    ],
    ids=["lone", "pair", "json", "tool-output", "well-formed"],
)
async def test_a_result_that_is_not_well_formed_unicode_is_what_the_model_gets(
    value: Any, expected: str
) -> None:
    """Measured through the CLI: the API gets U+FFFD for a lone surrogate (and a pair as its
    character); the result returned to the app says the same (tests/contract/test_payloads.py)."""
    tool = FunctionTool(name="t", description="d", executor=lambda _: value)

    output = await invoke_tool(tool, {}, default_timeout=None)

    assert output.text == expected
    output.text.encode("utf-8")  # sendable as it is


async def test_what_an_invalid_or_failing_call_echoes_is_clipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A 10 MB argument or exception message was repeated whole: to the model (whose next
    request then overflowed its context) and in the log record."""
    huge = "x" * 10**7
    with caplog.at_level(logging.WARNING, logger="sf_provider.tools"):
        invalid = await invoke_tool(
            FunctionTool(name="add", input_schema=ADD_SCHEMA, executor=Recorder()),
            {"a": huge, "b": 1},
            default_timeout=None,
        )

        def boom(_arguments: dict[str, Any]) -> str:
            raise ValueError(huge)

        failed = await invoke_tool(
            FunctionTool(name="boom", executor=boom), {}, default_timeout=None
        )
    assert invalid.is_error and failed.is_error
    assert len(invalid.text) < 2000 and "more characters]" in invalid.text
    assert len(failed.text) < 3000 and "more characters]" in failed.text
    assert len(caplog.text) < 20_000, "records and tracebacks bounded"
    assert "Traceback (most recent call last)" in caplog.text


# -- results a tool written for an MCP server returns


async def test_an_mcp_call_tool_result_keeps_its_error_flag_and_blocks() -> None:
    """An executor returning `mcp.types.CallToolResult(is_error=True)` was a success holding
    the object's JSON; an `ImageContent` was JSON text instead of an image."""
    from mcp import types

    failed = types.CallToolResult(content=[types.TextContent(text="bad")], is_error=True)
    tool = FunctionTool(name="t", executor=lambda _args: failed)
    result = await invoke_tool(tool, {}, default_timeout=None)
    assert result.is_error
    assert result.content == [{"type": "text", "text": "bad"}]
    image = types.ImageContent(data="aGk=", mime_type="image/png")
    shown = to_tool_output([types.TextContent(text="a chart"), image])
    assert not shown.is_error
    assert [b["type"] for b in shown.content] == ["text", "image"]
    assert shown.content[1]["data"] == "aGk=" and shown.content[1]["mimeType"] == "image/png"


def test_structured_content_without_text_reaches_the_model_as_text() -> None:
    from mcp import types

    result = types.CallToolResult(content=[], structured_content={"celsius": 21})
    assert to_tool_output(result).content == [{"type": "text", "text": '{"celsius": 21}'}]


class _Unprintable(Exception):
    """An exception whose `__str__` fails (its `__init__` never set what it names)."""

    detail: str  # never set

    def __str__(self) -> str:
        return self.detail


@pytest.mark.parametrize("where", ["sync", "async", "gate"])
async def test_an_exception_whose_message_cannot_be_read_is_described_not_raised(
    where: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Reading the message raised AttributeError out of `invoke_tool` (to a direct caller; in
    a query, as an interrupt that stopped it)."""

    def sync(_arguments: dict[str, Any]) -> str:
        raise _Unprintable

    async def async_(_arguments: dict[str, Any]) -> str:
        raise _Unprintable

    def gate(_request: Any) -> bool:
        raise _Unprintable

    executor = async_ if where == "async" else sync
    tool = FunctionTool(name="t", executor=executor, mutating=where == "gate")
    with caplog.at_level(logging.WARNING, logger="sf_provider.tools"):
        output = await invoke_tool(tool, {}, default_timeout=None, gate=gate)
    unreadable = "_Unprintable (its message cannot be shown: str() raised AttributeError)"
    expected = (
        f"Tool 't' was denied by the safety gate: the gate failed ({unreadable})"
        if where == "gate"
        else f"Tool 't' failed: {unreadable}"
    )
    assert (output.text, output.is_error) == (expected, True)
    assert unreadable in caplog.text


async def test_a_long_sys_exit_message_is_clipped_like_an_exceptions() -> None:
    """`sys.exit(message)` (a tool's usage error, say) was repeated whole to the model."""

    def exits(_arguments: dict[str, Any]) -> str:
        raise SystemExit("usage: " + "x" * 10**6)

    output = await invoke_tool(FunctionTool(name="t", executor=exits), {}, default_timeout=None)

    assert output.is_error and output.text.startswith("Tool 't' failed: SystemExit: exit code ")
    assert len(output.text) < 3000 and "more characters]" in output.text
