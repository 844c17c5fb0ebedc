"""Safety gates, enforced in the one invocation layer (`invoke_tool` and `ToolRegistry.call`)."""

from __future__ import annotations

import logging
import threading
from typing import Any

import anyio
import anyio.to_thread
import pytest

from sf_provider import (
    CallContext,
    FunctionTool,
    GateDecision,
    GateRequest,
    ToolRegistry,
    UnsupportedRequestError,
    current_call,
)
from sf_provider._invoke import INTERRUPTS, invoke_tool

pytestmark = pytest.mark.anyio

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
}


class Executor:
    """A sync executor that counts its calls."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, arguments: dict[str, Any]) -> str:
        self.calls.append(arguments)
        return f"deleted {arguments['path']}"


class Gate:
    """A gate that records what it was asked and answers `answer` (or raises it)."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.requests: list[GateRequest] = []

    def __call__(self, request: GateRequest) -> Any:
        self.requests.append(request)
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


class AsyncGate(Gate):
    async def __call__(self, request: GateRequest) -> Any:  # type: ignore[override]
        return super().__call__(request)


def _tool(executor: Executor, *, mutating: bool = True, name: str = "delete_file") -> FunctionTool:
    return FunctionTool(name=name, input_schema=SCHEMA, executor=executor, mutating=mutating)


async def _invoke(tool: FunctionTool, gate: Any, arguments: dict[str, Any] | None = None) -> Any:
    return await invoke_tool(
        tool, arguments or {"path": "/etc/passwd"}, default_timeout=None, gate=gate
    )


# -- denial


async def test_a_sync_gate_denial_is_an_error_result_naming_the_tool_and_reason() -> None:
    executor = Executor()

    output = await _invoke(_tool(executor), Gate(GateDecision.deny("system files are off limits")))

    assert output.is_error
    assert output.text == (
        "Tool 'delete_file' was denied by the safety gate: system files are off limits"
    )


async def test_a_denied_call_never_runs_the_executor() -> None:
    executor = Executor()

    await _invoke(_tool(executor), Gate(GateDecision.deny("no")))

    assert executor.calls == []


async def test_an_async_gate_denial_is_enforced() -> None:
    executor = Executor()

    output = await _invoke(_tool(executor), AsyncGate(GateDecision.deny("async says no")))

    assert output.is_error
    assert output.text == "Tool 'delete_file' was denied by the safety gate: async says no"
    assert executor.calls == []


@pytest.mark.parametrize("answer", [False, GateDecision(False)], ids=["false", "empty-reason"])
async def test_a_denial_without_a_reason_says_no_reason_given(answer: Any) -> None:
    executor = Executor()

    output = await _invoke(_tool(executor), Gate(answer))

    assert output.text == "Tool 'delete_file' was denied by the safety gate: no reason given"
    assert executor.calls == []


async def test_a_gate_that_raises_denies_the_call_and_names_the_exception() -> None:
    executor = Executor()

    output = await _invoke(_tool(executor), Gate(RuntimeError("policy server down")))

    assert output.is_error
    assert output.text == (
        "Tool 'delete_file' was denied by the safety gate: "
        "the gate failed (RuntimeError: policy server down)"
    )
    assert executor.calls == []


async def test_an_async_gate_that_raises_denies_the_call() -> None:
    executor = Executor()

    output = await _invoke(_tool(executor), AsyncGate(KeyError("missing")))

    assert output.is_error and "the gate failed (KeyError" in output.text
    assert executor.calls == []


@pytest.mark.parametrize("junk", [None, "yes", 1, {"allowed": True}], ids=repr)
async def test_a_gate_answering_junk_denies_the_call_naming_what_it_got(junk: Any) -> None:
    executor = Executor()

    output = await _invoke(_tool(executor), Gate(junk))

    assert output.is_error
    assert output.text == (
        f"Tool 'delete_file' was denied by the safety gate: the gate answered "
        f"{type(junk).__name__}, not a GateDecision or bool"
    )
    assert executor.calls == []


async def test_a_denial_is_logged_on_the_tools_logger_with_the_transport(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="sf_provider.tools")

    await invoke_tool(
        _tool(Executor()),
        {"path": "/etc"},
        default_timeout=None,
        gate=Gate(GateDecision.deny("off limits")),
        context=CallContext(transport="stdio"),
    )

    records = [r for r in caplog.records if r.name == "sf_provider.tools"]
    assert [r.getMessage() for r in records] == [
        "Tool 'delete_file' was denied by the safety gate: off limits (transport: stdio)"
    ]
    assert records[0].levelno == logging.WARNING


async def test_a_gate_that_raises_is_logged_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="sf_provider.tools")

    await _invoke(_tool(Executor()), Gate(RuntimeError("boom")))

    failure = next(r for r in caplog.records if "safety gate raised" in r.getMessage())
    assert failure.name == "sf_provider.tools"
    assert failure.exc_info is not None and isinstance(failure.exc_info[1], RuntimeError)


# -- what reaches the gate


async def test_a_tool_that_is_not_mutating_never_reaches_the_gate() -> None:
    executor = Executor()
    gate = Gate(GateDecision.deny("would deny"))

    output = await _invoke(_tool(executor, mutating=False), gate)

    assert not output.is_error
    assert gate.requests == []
    assert executor.calls == [{"path": "/etc/passwd"}]


@pytest.mark.parametrize(
    "answer", [True, GateDecision.allow(), GateDecision.allow("fine")], ids=repr
)
async def test_an_allowed_call_runs_the_executor(answer: Any) -> None:
    executor = Executor()

    output = await _invoke(_tool(executor), Gate(answer), {"path": "/tmp/x"})

    assert not output.is_error and output.text == "deleted /tmp/x"
    assert executor.calls == [{"path": "/tmp/x"}]


async def test_an_async_gate_allowing_the_call_lets_it_run() -> None:
    executor = Executor()

    output = await _invoke(_tool(executor), AsyncGate(GateDecision.allow()))

    assert not output.is_error
    assert len(executor.calls) == 1


async def test_without_a_gate_a_mutating_tool_runs() -> None:
    executor = Executor()

    output = await _invoke(_tool(executor), None)

    assert not output.is_error and len(executor.calls) == 1


async def test_the_gate_is_asked_once_per_call() -> None:
    gate = Gate(True)
    tool = _tool(Executor())

    await _invoke(tool, gate)
    await _invoke(tool, gate)

    assert len(gate.requests) == 2


async def test_invalid_arguments_are_rejected_before_the_gate_is_asked() -> None:
    executor = Executor()
    gate = Gate(True)

    output = await _invoke(_tool(executor), gate, {"path": 5})

    assert output.is_error and output.text.startswith("Invalid arguments for tool 'delete_file'")
    assert gate.requests == []
    assert executor.calls == []


async def test_the_gate_sees_the_tool_the_arguments_and_the_context() -> None:
    gate = Gate(True)
    tool = _tool(Executor())
    context = CallContext(transport="sdk-bridge", tool_call_id="toolu_1", metadata={"k": "v"})

    await invoke_tool(tool, {"path": "/tmp/x"}, default_timeout=None, gate=gate, context=context)

    (request,) = gate.requests
    assert request.tool is tool
    assert request.arguments == {"path": "/tmp/x"}
    assert request.context is context


# -- the arguments: the executor gets exactly the validated ones


NESTED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}},
    },
    "required": ["path"],
}


class RewritingGate(Gate):
    """A gate that changes the arguments it is asked about, then allows the call."""

    def __init__(self, rewrite: Any) -> None:
        super().__init__(True)
        self.rewrite = rewrite

    def __call__(self, request: GateRequest) -> Any:
        self.rewrite(request.arguments)
        return super().__call__(request)


REWRITES = {
    "set": lambda args: args.__setitem__("path", "/etc/passwd"),
    "add": lambda args: args.__setitem__("force", True),  # a key the schema does not allow
    "delete": lambda args: args.pop("path"),
    "nested": lambda args: args["tags"].append("UNCHECKED"),
}


@pytest.mark.parametrize("rewrite", list(REWRITES), ids=list(REWRITES))
@pytest.mark.parametrize("gate_kind", [RewritingGate, AsyncGate], ids=["sync", "async"])
async def test_a_gate_that_changes_the_arguments_denies_the_call(
    rewrite: str, gate_kind: Any
) -> None:
    # It was the dict the executor got: validated arguments changed, never validated again.
    executor = Executor()
    tool = FunctionTool(name="delete_file", input_schema=NESTED, executor=executor, mutating=True)
    gate = RewritingGate(REWRITES[rewrite])
    if gate_kind is AsyncGate:

        async def gate_fn(request: GateRequest) -> Any:
            return gate(request)

        answer: Any = gate_fn
    else:
        answer = gate
    arguments = {"path": "/srv/a", "tags": ["x"]}

    output = await _invoke(tool, answer, arguments)

    assert (output.text, output.is_error) == (
        "Tool 'delete_file' was denied by the safety gate: the gate changed the arguments it was "
        "asked about; a gate decides on the validated arguments and cannot rewrite them",
        True,
    )
    assert executor.calls == []
    assert arguments == {"path": "/srv/a", "tags": ["x"]}  # the caller's arguments untouched


async def test_a_gate_that_changes_the_arguments_and_denies_gives_its_own_reason() -> None:
    executor = Executor()

    def gate(request: GateRequest) -> GateDecision:
        request.arguments["path"] = "/redacted"
        return GateDecision.deny("system files are off limits")

    output = await _invoke(_tool(executor), gate)

    assert output.text == (
        "Tool 'delete_file' was denied by the safety gate: system files are off limits"
    )
    assert executor.calls == []


async def test_the_executor_gets_the_validated_arguments_not_the_gates_object() -> None:
    executor = Executor()
    gate = Gate(True)
    tool = FunctionTool(name="delete_file", input_schema=NESTED, executor=executor, mutating=True)

    await _invoke(tool, gate, {"path": "/srv/a", "tags": ["x"]})

    [asked] = gate.requests
    [ran] = executor.calls
    assert ran == asked.arguments == {"path": "/srv/a", "tags": ["x"]}
    assert ran is not asked.arguments and ran["tags"] is not asked.arguments["tags"]


# -- the gate runs off the event loop, under the call's timeout


async def test_a_sync_gate_runs_off_the_event_loop() -> None:
    # It ran on the loop's thread: a gate waiting on a policy service stalled every task.
    release = threading.Event()
    released: list[bool] = []

    def gate(request: GateRequest) -> bool:
        released.append(release.wait(30))  # a "no hang" bound: True once the loop set it
        return True

    async def the_loop_runs_meanwhile() -> None:  # only while the call awaits something
        release.set()

    executor = Executor()
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(the_loop_runs_meanwhile)
        output = await _invoke(_tool(executor), gate)

    assert released == [True]
    assert not output.is_error and len(executor.calls) == 1


@pytest.mark.parametrize("timeout_of", ["tool", "call"])
async def test_a_gate_that_never_answers_times_out_with_the_calls_timeout(timeout_of: str) -> None:
    async def gate(request: GateRequest) -> bool:
        await anyio.sleep_forever()
        return True

    executor = Executor()
    tool = _tool(executor)
    if timeout_of == "tool":
        tool = FunctionTool(name="delete_file", input_schema=SCHEMA, executor=executor,
                            mutating=True, timeout=0.2)  # fmt: skip
    default = 0.2 if timeout_of == "call" else 60

    output = await invoke_tool(tool, {"path": "/srv/a"}, default_timeout=default, gate=gate)

    assert (output.text, output.is_error) == (
        "Tool 'delete_file' timed out after 0.2 s waiting for the safety gate to decide; it did "
        "not run",
        True,
    )
    assert executor.calls == []


async def test_a_sync_gate_that_times_out_sees_its_call_cancelled() -> None:
    seen: list[bool] = []
    done = threading.Event()

    def gate(request: GateRequest) -> bool:
        call = current_call()
        assert call is not None and call.tool.name == "delete_file"
        seen.append(call.cancelled.wait(30))  # what a gate waiting on a service can check
        done.set()
        return True  # too late: the call was given up

    executor = Executor()
    output = await invoke_tool(_tool(executor), {"path": "/a"}, default_timeout=0.2, gate=gate)

    assert output.text.endswith("waiting for the safety gate to decide; it did not run")
    assert await anyio.to_thread.run_sync(done.wait, 30)
    assert seen == [True]
    assert executor.calls == []


async def test_a_gate_that_decides_in_time_lets_the_executor_run_under_the_same_deadline() -> None:
    executor = Executor()

    output = await invoke_tool(_tool(executor), {"path": "/a"}, default_timeout=30, gate=Gate(True))

    assert (output.text, output.is_error) == ("deleted /a", False)


# -- through ToolRegistry.call


async def test_registry_call_enforces_the_registry_gate() -> None:
    executor = Executor()
    gate = Gate(GateDecision.deny("read-only day"))
    registry = ToolRegistry([_tool(executor)], gate=gate, environ={})

    output = await registry.call("delete_file", {"path": "/tmp/x"})

    assert output.is_error
    assert output.text == "Tool 'delete_file' was denied by the safety gate: read-only day"
    assert executor.calls == []


async def test_registry_call_passes_a_direct_context_and_the_validated_arguments() -> None:
    gate = Gate(True)
    registry = ToolRegistry([_tool(Executor())], gate=gate, environ={})

    await registry.call("delete_file", {"path": "/tmp/x"})

    (request,) = gate.requests
    assert request.context.transport == "direct"
    assert request.arguments == {"path": "/tmp/x"}
    assert request.tool.name == "delete_file"


async def test_registry_call_passes_the_callers_context_through() -> None:
    gate = Gate(True)
    registry = ToolRegistry([_tool(Executor())], gate=gate, environ={})
    context = CallContext(transport="stdio", tool_call_id="call-7")

    await registry.call("delete_file", {"path": "/tmp/x"}, context=context)

    assert gate.requests[0].context is context


async def test_registry_call_of_a_read_only_tool_skips_the_gate() -> None:
    gate = Gate(GateDecision.deny("no"))
    executor = Executor()
    registry = ToolRegistry([_tool(executor, mutating=False)], gate=gate, environ={})

    output = await registry.call("delete_file", {"path": "/tmp/x"})

    assert not output.is_error
    assert gate.requests == []
    assert len(executor.calls) == 1


# -- what a gate raises besides an Exception


async def test_a_gate_calling_sys_exit_denies_the_call_naming_the_exit_code() -> None:
    executor = Executor()

    output = await _invoke(_tool(executor), Gate(SystemExit(2)))

    assert output.is_error
    assert output.text == (
        "Tool 'delete_file' was denied by the safety gate: the gate failed "
        "(SystemExit: exit code 2)"
    )
    assert executor.calls == []


async def test_a_keyboard_interrupt_in_a_gate_reaches_a_direct_caller_as_itself() -> None:
    interrupt = KeyboardInterrupt()
    executor = Executor()

    with pytest.raises(KeyboardInterrupt) as info:
        await _invoke(_tool(executor), Gate(interrupt))

    assert info.value is interrupt
    assert executor.calls == []


async def test_a_keyboard_interrupt_in_a_gate_goes_to_the_interrupt_handler() -> None:
    interrupt = KeyboardInterrupt()
    handled: list[BaseException] = []
    executor = Executor()

    token = INTERRUPTS.set(handled.append)
    try:
        output = await _invoke(_tool(executor), AsyncGate(interrupt))
    finally:
        INTERRUPTS.reset(token)

    assert handled == [interrupt]
    assert (output.text, output.is_error) == ("Tool 'delete_file' failed: KeyboardInterrupt", True)
    assert executor.calls == []


# -- FunctionTool.call: the same gate, or a refusal


async def test_function_tool_call_refuses_a_mutating_tool_without_a_gate() -> None:
    executor = Executor()
    registry = ToolRegistry([_tool(executor)], gate=Gate(GateDecision.deny("no")), environ={})

    with pytest.raises(UnsupportedRequestError, match=r"ToolRegistry\.call\('delete_file'"):
        await registry.tools["delete_file"].call({"path": "/etc/passwd"})

    assert executor.calls == []


async def test_function_tool_call_applies_the_gate_it_is_given() -> None:
    executor = Executor()
    gate = Gate(GateDecision.deny("system files are off limits"))

    output = await _tool(executor).call({"path": "/etc/passwd"}, gate=gate)

    assert output.text == (
        "Tool 'delete_file' was denied by the safety gate: system files are off limits"
    )
    assert executor.calls == []
    assert gate.requests[0].context.transport == "direct"


async def test_function_tool_call_passes_its_context_to_the_gate() -> None:
    gate = Gate(True)
    context = CallContext(tool_call_id="call-9")

    await _tool(Executor()).call({"path": "/tmp/x"}, gate=gate, context=context)

    assert gate.requests[0].context is context


async def test_function_tool_call_runs_a_mutating_tool_ungated_only_when_asked() -> None:
    executor = Executor()

    output = await _tool(executor).call({"path": "/tmp/x"}, ungated=True)

    assert (output.text, output.is_error) == ("deleted /tmp/x", False)
    assert executor.calls == [{"path": "/tmp/x"}]


async def test_function_tool_call_runs_a_tool_that_is_not_mutating_without_a_gate() -> None:
    executor = Executor()

    output = await _tool(executor, mutating=False).call({"path": "/tmp/x"})

    assert not output.is_error
    assert executor.calls == [{"path": "/tmp/x"}]
