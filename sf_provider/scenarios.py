"""Data-driven contract scenarios: tools, scripted model replies and the expected outcome.

A scenario file (JSON, format in `contracts/README.md`, schema in
`contracts/schemas/Scenario.schema.json`) runs through the real CLI against `ScriptedMessagesAPI`
with `run_scenario`, which returns the findings; an empty list means the scenario holds. Adding a
scenario needs no Python: executors are described as data (return a value, echo the arguments,
fill a template, raise).

Example::

    for scenario in load_scenarios("contracts/scenarios"):
        problems = await run_scenario(scenario)
        assert not problems, problems
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ._bridge import bridge_tool_name
from .errors import ProviderError
from .provider import ClaudeAgentProvider
from .testing import FaultReply, HTTPErrorReply, Reply, ScriptedMessagesAPI
from .tools import FunctionTool
from .types import FinishReason, GenerateResult

__all__ = [
    "ExecutorSpec",
    "Expectations",
    "ExpectedCall",
    "ExpectedError",
    "Scenario",
    "ScenarioTool",
    "load_scenarios",
    "run_scenario",
]


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExecutorSpec(_Spec):
    """What a scenario tool's executor does, as data. Exactly one of the actions is set."""

    returns: Any = Field(default=None, description="Return this value (string as is, else JSON).")
    echo: bool = Field(default=False, description="Return the arguments as JSON.")
    template: str | None = Field(default=None, description="Return template.format(**arguments).")
    raises: str | None = Field(default=None, description="Raise RuntimeError(raises).")

    def build(self, calls: list[dict[str, Any]]) -> Callable[[dict[str, Any]], Any]:
        """An executor that records every call's arguments in `calls`, then acts."""

        def executor(arguments: dict[str, Any]) -> Any:
            calls.append(arguments)
            if self.raises is not None:
                raise RuntimeError(self.raises)
            if self.echo:
                return arguments
            if self.template is not None:
                return self.template.format(**arguments)
            return self.returns

        return executor


class ScenarioTool(_Spec):
    """A tool of a scenario: the `FunctionTool` fields plus an executor description."""

    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    read_only: bool = False
    executor: ExecutorSpec | None = None


class ExpectedCall(_Spec):
    """One expected tool call, in order."""

    tool_name: str
    input: dict[str, Any] | None = Field(default=None, description="Exact arguments, if given.")
    provider_executed: bool | None = None
    invalid: bool | None = None
    invalid_reason_contains: list[str] = Field(default_factory=list)
    is_error: bool | None = None
    output: str | None = Field(default=None, description="Exact result text, if given.")
    output_contains: list[str] = Field(default_factory=list)


class ExpectedError(_Spec):
    """The error the scenario must end with."""

    type: str = Field(description="Class name of the ProviderError subclass.")
    message_contains: list[str] = Field(default_factory=list)


class Expectations(_Spec):
    """The outcome a scenario must produce. Unset fields are not checked."""

    finish_reason: FinishReason | None = None
    text: str | None = Field(default=None, description="The final text, exactly.")
    text_contains: list[str] = Field(default_factory=list)
    reasoning: str | None = None
    tool_calls: list[ExpectedCall] | None = None
    executor_calls: dict[str, list[dict[str, Any]]] | None = Field(
        default=None, description="Per tool, the exact arguments each executor run received."
    )
    api_requests: int | None = Field(default=None, description="Messages API calls made.")
    warnings: list[str] | None = Field(default=None, description="Warning codes, in order.")
    mode: Literal["executor", "single-turn"] | None = None
    error: ExpectedError | None = None


class Scenario(_Spec):
    """One contract scenario."""

    name: str
    description: str = ""
    prompt: str | list[dict[str, Any]] = Field(description="A string or role/content messages.")
    tools: list[ScenarioTool] = Field(default_factory=list)
    replies: list[Reply | HTTPErrorReply | FaultReply] = Field(
        description="The scripted model turns."
    )
    options: dict[str, Any] = Field(default_factory=dict, description="Call options.")
    expect: Expectations = Field(default_factory=Expectations)


def load_scenarios(directory: str | Path) -> list[Scenario]:
    """Every `*.json` scenario in `directory`, sorted by file name."""
    paths = sorted(Path(directory).glob("*.json"))
    return [Scenario.model_validate(json.loads(p.read_text(encoding="utf-8"))) for p in paths]


def _build_tools(scenario: Scenario) -> tuple[list[FunctionTool], dict[str, list[dict[str, Any]]]]:
    calls: dict[str, list[dict[str, Any]]] = {}
    tools = []
    for spec in scenario.tools:
        if spec.executor is not None:
            calls[spec.name] = []
        tools.append(
            FunctionTool(
                name=spec.name,
                description=spec.description,
                input_schema=spec.input_schema,
                read_only=spec.read_only,
                executor=spec.executor.build(calls[spec.name]) if spec.executor else None,
            )
        )
    return tools, calls


async def run_scenario(scenario: Scenario, **settings: Any) -> list[str]:
    """Run `scenario` through the real CLI against a scripted API; return what did not hold.

    Besides the scenario's own expectations, every run checks the invariants of the bridge: each
    request offers exactly the scenario's tools (bridge names, no built-in tool) with the
    declared schemas, every provider-executed result reaches the next request as a `tool_result`
    with the same id, and the script is used up exactly.
    """
    tools, calls = _build_tools(scenario)
    async with ScriptedMessagesAPI(list(scenario.replies)) as api:
        provider = ClaudeAgentProvider(api.settings(**settings))
        result: GenerateResult | None = None
        error: ProviderError | None = None
        try:
            result = await provider.generate(scenario.prompt, tools=tools, **scenario.options)
        except ProviderError as exc:
            error = exc
    problems = list(api.errors)
    bridge = provider.settings.bridge_name
    if api.remaining:
        problems.append(f"{api.remaining} scripted reply(ies) were never requested")
    declared = {bridge_tool_name(bridge, t.name): t.input_schema for t in tools}
    for request in api.requests:
        offered = {t.get("name"): t.get("input_schema") for t in request.tools}
        if offered != declared:
            problems.append(f"request {request.index} offered {offered}, expected {declared}")
    problems += _check_results_forwarded(api, result)
    problems += _check_expectations(scenario.expect, result, error, calls, len(api.requests))
    return problems


def _check_results_forwarded(api: ScriptedMessagesAPI, result: GenerateResult | None) -> list[str]:
    if result is None:
        return []
    sent: dict[str, dict[str, Any]] = {}
    for request in api.requests:
        for block in request.tool_results():
            sent[str(block.get("tool_use_id"))] = block
    problems = []
    for call in result.tool_calls:
        if call.provider_executed and call.result is not None:
            forwarded = sent.get(call.tool_call_id)
            if forwarded is None:
                problems.append(f"the result of {call.tool_call_id} never reached the model")
            elif bool(forwarded.get("is_error")) != call.result.is_error:
                problems.append(f"is_error of {call.tool_call_id} differs between app and model")
    return problems


def _check_expectations(
    expect: Expectations,
    result: GenerateResult | None,
    error: ProviderError | None,
    calls: dict[str, list[dict[str, Any]]],
    api_requests: int,
) -> list[str]:
    problems: list[str] = []

    def check(label: str, actual: Any, wanted: Any) -> None:
        if wanted is not None and actual != wanted:
            problems.append(f"{label}: expected {wanted!r}, got {actual!r}")

    if expect.error is not None:
        if error is None:
            return [f"expected {expect.error.type}, but the query succeeded"]
        check("error type", type(error).__name__, expect.error.type)
        problems += [
            f"error message lacks {piece!r}: {error}"
            for piece in expect.error.message_contains
            if piece not in str(error)
        ]
        partial = getattr(error, "partial", None)
        result = partial if isinstance(partial, GenerateResult) else None
    elif error is not None:
        return [f"unexpected {type(error).__name__}: {error}"]
    check("api requests", api_requests, expect.api_requests)
    check("executor calls", calls, expect.executor_calls)
    if result is None:
        return problems
    check("finish reason", result.finish_reason, expect.finish_reason)
    check("text", result.text, expect.text)
    check("reasoning", result.reasoning, expect.reasoning)
    check("warnings", [w.code for w in result.warnings], expect.warnings)
    check("mode", result.mode, expect.mode)
    problems += [
        f"text lacks {p!r}: {result.text!r}" for p in expect.text_contains if p not in result.text
    ]
    if expect.tool_calls is not None:
        check("tool call count", len(result.tool_calls), len(expect.tool_calls))
        for i, (got, want) in enumerate(zip(result.tool_calls, expect.tool_calls, strict=False)):
            check(f"call {i} tool", got.tool_name, want.tool_name)
            check(f"call {i} input", got.input, want.input)
            check(f"call {i} provider_executed", got.provider_executed, want.provider_executed)
            check(f"call {i} invalid", got.invalid, want.invalid)
            problems += [
                f"call {i} invalid_reason lacks {p!r}: {got.invalid_reason!r}"
                for p in want.invalid_reason_contains
                if p not in (got.invalid_reason or "")
            ]
            output = got.result.output if got.result else None
            check(f"call {i} is_error", got.result.is_error if got.result else None, want.is_error)
            check(f"call {i} output", output, want.output)
            problems += [
                f"call {i} output lacks {p!r}: {output!r}"
                for p in want.output_contains
                if p not in (output or "")
            ]
    return problems
