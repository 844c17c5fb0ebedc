"""The one invocation layer: `invoke_tool`, `to_tool_output` and `FunctionTool.call`."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from pydantic import BaseModel

from sf_provider._invoke import invoke_tool, to_tool_output
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


async def test_unencodable_return_value_is_an_error_result() -> None:
    loop: list[Any] = []
    loop.append(loop)
    tool = FunctionTool(name="cyclic", executor=lambda args: loop)

    output = await invoke_tool(tool, {}, default_timeout=None)

    assert output.is_error
    assert "'cyclic' returned a value that cannot be sent" in output.text
