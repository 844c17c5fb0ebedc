"""Data-driven contract scenarios: tools, scripted model replies and the expected outcome.

A scenario file (JSON, format in `contracts/README.md`, schema in
`contracts/schemas/Scenario.schema.json`) runs through the real CLI against `ScriptedMessagesAPI`
with `run_scenario`, which returns the findings; an empty list means the scenario holds. Adding a
scenario needs no Python: executors are described as data (return a value, echo the arguments,
fill a template, raise). Or the scenario names the application's own tools, and
`run_scenario(scenario, tools=...)` (or `registry=...`) runs those, checking the expectations
against their real results.

`record_scenario` writes a scenario from a real session (your own credentials), to be replayed
offline: `sf-provider scenarios record --live ...`, then `sf-provider scenarios run DIR`.

Example::

    for scenario in load_scenarios("contracts/scenarios"):
        problems = await run_scenario(scenario)
        assert not problems, problems

    problems = await run_scenario(load_scenario("weather.json"), tools=[get_weather])
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ._bridge import bridge_tool_name
from .errors import ProviderError
from .provider import ClaudeAgentProvider
from .registry import ToolRegistry
from .settings import ProviderSettings
from .testing import FaultReply, HTTPErrorReply, Reply, ScriptedMessagesAPI
from .tools import Executor, FunctionTool
from .types import FinishReason, GenerateResult

__all__ = [
    "ExecutorSpec",
    "Expectations",
    "ExpectedCall",
    "ExpectedError",
    "Scenario",
    "ScenarioFileError",
    "ScenarioRecordingError",
    "ScenarioTool",
    "load_scenario",
    "load_scenarios",
    "record_scenario",
    "run_scenario",
    "save_scenario",
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

    # Run with the application's tools (`run_scenario(..., tools=...)`), a tool named like one
    # of them is that tool (its description, schema and executor): only `name` counts then.

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


class ScenarioFileError(ProviderError, ValueError):
    """A scenario file cannot be read: not JSON, or not a valid scenario (the message names the
    file and what is wrong)."""


def load_scenario(path: str | Path) -> Scenario:
    """The scenario in the JSON file at `path`; `ScenarioFileError` names what is wrong."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioFileError(f"{path}: cannot be read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ScenarioFileError(f"{path}: not JSON: {exc}") from None
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioFileError(f"{path}: not a valid scenario: {exc}") from None


def load_scenarios(directory: str | Path) -> list[Scenario]:
    """Every `*.json` scenario in `directory`, sorted by file name."""
    return [load_scenario(p) for p in sorted(Path(directory).glob("*.json"))]


def save_scenario(scenario: Scenario, path: str | Path) -> Path:
    """Write `scenario` to `path` as JSON (indented, without default values); returns the path."""
    data = scenario.model_dump(mode="json", exclude_defaults=True)
    # A reply's kind is its only mark apart from its fields: keep it on the ones that are not
    # plain replies, so the file reads as what it is.
    data["replies"] = [
        {"kind": item.kind, **dumped} if item.kind != "reply" else dumped
        for item, dumped in zip(scenario.replies, data["replies"], strict=True)
    ]
    path = Path(path)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


#: Per tool name, the arguments each run of its executor received, in order.
ExecutorCalls = dict[str, list[dict[str, Any]]]


def _data_tool(spec: ScenarioTool, calls: ExecutorCalls) -> FunctionTool:
    if spec.executor is not None:
        calls[spec.name] = []
    return FunctionTool(
        name=spec.name,
        description=spec.description,
        input_schema=spec.input_schema,
        read_only=spec.read_only,
        executor=spec.executor.build(calls[spec.name]) if spec.executor else None,
    )


def _recording(executor: Executor, calls: list[dict[str, Any]]) -> Executor:
    """`executor`, recording the arguments of every run in `calls`; sync stays sync (it runs in
    a thread of its own) and async stays async."""
    if inspect.iscoroutinefunction(executor):

        @functools.wraps(executor)
        async def run_async(arguments: dict[str, Any]) -> Any:
            calls.append(dict(arguments))
            return await executor(arguments)

        return run_async

    @functools.wraps(executor)
    def run(arguments: dict[str, Any]) -> Any:
        calls.append(dict(arguments))
        return executor(arguments)

    return run


def _bind_tools(
    scenario: Scenario, app_tools: dict[str, FunctionTool] | None
) -> tuple[list[FunctionTool], ExecutorCalls, list[str]]:
    """The tools a scenario runs with, the record of their executor runs, and what is wrong.

    Without application tools, every tool is built from its data. With them, a scenario tool
    of the same name is the application's tool (its executor recorded); one that is not, and
    carries no executor of its own, is a finding.
    """
    calls: ExecutorCalls = {}
    tools: list[FunctionTool] = []
    problems: list[str] = []
    for spec in scenario.tools:
        app_tool = (app_tools or {}).get(spec.name)
        if app_tool is None:
            if app_tools is not None and spec.executor is None:
                problems.append(
                    f"scenario tool {spec.name!r} is not one of the application's tools "
                    f"({', '.join(sorted(app_tools)) or 'none'}) and has no executor of its own"
                )
            tools.append(_data_tool(spec, calls))
        elif app_tool.executor is None:
            tools.append(app_tool)
        else:
            calls[spec.name] = []
            executor = _recording(app_tool.executor, calls[spec.name])
            tools.append(app_tool.model_copy(update={"executor": executor}))
    return tools, calls, problems


def _app_tools(
    tools: Sequence[FunctionTool] | None, registry: ToolRegistry | None, names: list[str]
) -> tuple[dict[str, FunctionTool] | None, list[str]]:
    if tools is not None and registry is not None:
        raise TypeError("run_scenario takes tools=... or registry=..., not both")
    if tools is not None:
        return {t.name: t for t in tools}, []
    if registry is None:
        return None, []
    enabled = {t.name: t for t in registry.enabled_tools()}
    disabled = [n for n in names if n not in enabled and n in registry.tools]
    if disabled:
        try:  # what the application would be told at dispatch
            registry.select(tools=disabled)
        except ProviderError as exc:
            return None, [f"the registry refuses the scenario's tools: {exc}"]
    return enabled, []


async def run_scenario(
    scenario: Scenario,
    *,
    tools: Sequence[FunctionTool] | None = None,
    registry: ToolRegistry | None = None,
    api: ScriptedMessagesAPI | None = None,
    **settings: Any,
) -> list[str]:
    """Run `scenario` through the real CLI against a scripted API; return what did not hold.

    With `tools` (or a `registry`, whose gate then applies too), the scenario's tools are the
    application's tools of the same names: their real executors run on the scripted calls, and
    the expectations (`tool_calls` outputs, `executor_calls`, the final text) are checked
    against what they really did. `api` is a running scripted API that has served nothing yet
    (the pytest fixture `scripted_api`: the test then runs without a marker and is checked for
    leftovers); by default the run starts one of its own. `settings` are `ProviderSettings`
    fields.

    Besides the scenario's own expectations, every run checks the invariants of the bridge: each
    request offers exactly the scenario's tools (bridge names, no built-in tool) with the
    declared schemas, every provider-executed result reaches the next request as a `tool_result`
    with the same id, and the script is used up exactly.
    """
    if api is not None and (api.all_requests or api.remaining or not api.base_url):
        raise ValueError(
            "run_scenario(api=...) takes a running scripted API with an empty script that has "
            "served nothing yet (a fresh `scripted_api` fixture)"
        )
    app_tools, problems = _app_tools(tools, registry, [t.name for t in scenario.tools])
    if problems:
        return problems
    bound, calls, problems = _bind_tools(scenario, app_tools)
    if problems:
        return problems
    if app_tools is None and scenario.expect.mode == "executor":
        unbound = [spec.name for spec in scenario.tools if spec.executor is None]
        if unbound:
            return [
                f"the scenario expects executor mode, but its tool(s) {', '.join(unbound)} have "
                f"no executor: run it with the application's tools (tools=..., registry=..., "
                f"or `sf-provider scenarios run --tools MODULE:ATTR`)"
            ]
    # A registry's gate applies to its tools on every transport: run them through one.
    scoped = ToolRegistry(bound, gate=registry.gate, environ={}) if registry else None
    async with contextlib.AsyncExitStack() as stack:
        if api is None:
            api = await stack.enter_async_context(ScriptedMessagesAPI([]))
        api.add(*scenario.replies)
        provider = ClaudeAgentProvider(api.settings(**settings), registry=scoped)
        result: GenerateResult | None = None
        error: ProviderError | None = None
        try:
            async with provider:
                result = await provider.generate(
                    scenario.prompt, tools=None if scoped else bound, **scenario.options
                )
        except ProviderError as exc:
            error = exc
    problems = list(api.errors)
    bridge = provider.settings.bridge_name
    if api.remaining:
        problems.append(f"{api.remaining} scripted reply(ies) were never requested")
    declared = {bridge_tool_name(bridge, t.name): t.input_schema for t in bound}
    for request in api.requests:
        offered = {t.get("name"): t.get("input_schema") for t in request.tools}
        if offered != declared:
            problems.append(f"request {request.index} offered {offered}, expected {declared}")
    problems += _check_results_forwarded(api, result)
    problems += _check_expectations(scenario.expect, result, error, calls, len(api.requests))
    return problems


class ScenarioRecordingError(ProviderError):
    """A session could not be recorded: the upstream API never answered, the query failed
    before any model turn, or an upstream that no credential was sent to wants one (the message
    says which, and why)."""


async def record_scenario(
    prompt: str | list[dict[str, Any]],
    *,
    name: str,
    tools: Sequence[FunctionTool] | None = None,
    registry: ToolRegistry | None = None,
    upstream: str | None = None,
    settings: ProviderSettings | None = None,
    description: str | None = None,
    **call_options: Any,
) -> Scenario:
    """Run one real query and return it as a scenario that replays it offline.

    The CLI talks to a local recorder that sends every model turn on to `upstream` (by default
    the `ANTHROPIC_BASE_URL` of `settings` or of the environment, else the Anthropic API) with
    the CLI's own credentials (your API key or login, as for any live query), and keeps the
    answers; your tools run for real. An upstream other than the Anthropic API (a gateway, a
    proxy) needs no credential configured: without one the CLI runs on a placeholder key that
    is never forwarded, so the upstream gets none; if it then answers 401 or 403, this raises
    `ScenarioRecordingError` saying to set `ANTHROPIC_API_KEY` or `ANTHROPIC_AUTH_TOKEN` (in
    `settings.env` or the environment) to the credential it expects.

    The scenario holds the tools offered (by name, schema and description: replay it with the
    same tools, `run_scenario(scenario, tools=...)`), the model's turns as scripted replies,
    the call options, and what came out as expectations: the final text, finish reason, mode,
    tool calls (name, input, error flag) and the number of API requests; or the error the
    query ended with. No header (no credential) is kept.

    Example::

        scenario = await record_scenario("Weather in Paris?", name="paris", tools=[weather])
        save_scenario(scenario, "scenarios/paris.json")
        assert await run_scenario(load_scenario("scenarios/paris.json"), tools=[weather]) == []
    """
    from ._recording import DEFAULT_UPSTREAM, PLACEHOLDER_KEY, UpstreamRecorder
    from .capabilities import check_auth

    base = settings or ProviderSettings()
    target = (
        upstream
        or base.env.get("ANTHROPIC_BASE_URL")
        or os.environ.get("ANTHROPIC_BASE_URL")
        or DEFAULT_UPSTREAM
    )
    # The Anthropic API needs your credentials (checked before the query, as for any query);
    # another upstream may need none.
    placeholder = target.rstrip("/") != DEFAULT_UPSTREAM and not check_auth(base).configured
    recorder = UpstreamRecorder(
        target, bridge=base.bridge_name, withhold=PLACEHOLDER_KEY if placeholder else None
    )
    result: GenerateResult | None = None
    error: ProviderError | None = None
    async with ScriptedMessagesAPI(recorder) as api:
        env = {**base.env, "ANTHROPIC_BASE_URL": api.base_url}
        if placeholder:
            env["ANTHROPIC_API_KEY"] = PLACEHOLDER_KEY
        # No title request or other extra traffic: it would be recorded as a model turn.
        env.update(CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_TELEMETRY="1")
        live = base.model_copy(update={"env": env, "warm_processes": 0})
        try:
            async with ClaudeAgentProvider(live, registry=registry) as provider:
                result = await provider.generate(prompt, tools=tools, **call_options)
        except ProviderError as exc:
            error = exc
    if recorder.failures:
        raise ScenarioRecordingError(
            f"the upstream API did not answer: {'; '.join(recorder.failures)}"
        ) from error
    if not api.requests:
        raise ScenarioRecordingError(
            f"the query failed before any model turn, so there is nothing to record: {error}"
        ) from error
    refused = [
        item
        for item in recorder.items
        if isinstance(item, HTTPErrorReply) and item.status in (401, 403)
    ]
    if placeholder and refused:
        raise ScenarioRecordingError(
            f"{target} answered HTTP {refused[0].status} ({refused[0].message}): it wants a "
            f"credential, and no credential is configured, so none was sent. To record from "
            f"it, set ANTHROPIC_API_KEY (sent as x-api-key) or ANTHROPIC_AUTH_TOKEN (sent as "
            f"Authorization: Bearer) to the credential it expects"
        ) from error
    offered = _offered_tools(api.requests[0].tool_names, base.bridge_name, tools, registry)
    # Errors followed by another request were retried past by the CLI: the replay must too.
    retried = sum(not isinstance(item, Reply) for item in recorder.items[:-1])
    options = dict(call_options)
    if retried:
        options["max_retries"] = max(retried, int(options.get("max_retries") or 0))
    return Scenario(
        name=name,
        description=description
        if description is not None
        else f"Recorded from {target} with `sf-provider scenarios record`.",
        prompt=prompt,
        tools=offered,
        replies=recorder.items,
        options=options,
        expect=_expectations(result, error, len(api.requests)),
    )


def _offered_tools(
    names: list[str],
    bridge: str,
    tools: Sequence[FunctionTool] | None,
    registry: ToolRegistry | None,
) -> list[ScenarioTool]:
    """The application's tools the model was offered, as scenario tools (no executor: the
    replay binds the real ones by name)."""
    known = {t.name: t for t in (tools if tools is not None else [])}
    if registry is not None:
        known.update({t.name: t for t in registry.enabled_tools()})
    prefix = f"mcp__{bridge}__"
    offered = []
    for name in names:
        tool = known.get(name.removeprefix(prefix)) if name.startswith(prefix) else None
        if tool is not None:
            offered.append(
                ScenarioTool(
                    name=tool.name,
                    description=tool.description,
                    input_schema=tool.input_schema,
                    read_only=tool.read_only,
                )
            )
    return offered


def _expectations(
    result: GenerateResult | None, error: ProviderError | None, api_requests: int
) -> Expectations:
    if error is not None or result is None:
        return Expectations(
            error=ExpectedError(type=type(error).__name__), api_requests=api_requests
        )
    return Expectations(
        finish_reason=result.finish_reason,
        text=result.text,
        mode=result.mode,
        api_requests=api_requests,
        tool_calls=[
            ExpectedCall(
                tool_name=call.tool_name,
                input=call.input,
                provider_executed=call.provider_executed,
                is_error=call.result.is_error if call.result is not None else None,
            )
            for call in result.tool_calls
        ],
    )


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
