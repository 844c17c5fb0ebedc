"""`ClaudeAgentProvider`: Claude through the Agent SDK and the Claude Code CLI, with your tools."""

from __future__ import annotations

import contextvars
import functools
import json
import math
import os
import shutil
import tempfile
import weakref
from collections import ChainMap, deque
from collections.abc import AsyncGenerator, Callable, Hashable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

import anyio
import anyio.to_thread
import claude_agent_sdk as sdk
from claude_agent_sdk.types import SystemPromptFile

from ._bridge import bridge_tool_name, build_bridge_server, unavailable_tools
from ._failures import ResultRules, exception_failure, process_died, result_failure
from ._history import write_transcript
from ._mapping import PartMapper, ResultCollector
from ._options import CallOptions
from ._options import call_options as _checked_options
from ._outcome import finish_part
from ._process import PROVIDER_CLOSED, CLISession, Served, WarmPool, stop_all, stopped
from ._tool_choice import NamedToolChoice, ToolChoice, exposed_tools
from ._tracing import TracedRequest, refused, start_query
from .capabilities import (
    CapabilityReport,
    check_capabilities,
    cloud_switches,
    credentials_path,
    refusal,
    version_known,
)
from .errors import (
    InvalidMessagesError,
    MissingExecutorError,
    PartialResultError,
    ProcessDiedError,
    ProviderCompatibilityError,
    ProviderError,
    QueryTimeoutError,
    ToolDefinitionError,
    UnsupportedRequestError,
)
from .registry import ToolRegistry
from .settings import Effort, ProviderSettings, Thinking
from .tools import FunctionTool, normalize_input_schema, validate_tool_set
from .types import (
    CallWarning,
    ErrorPart,
    GenerateResult,
    Mode,
    StreamPart,
    StreamStartPart,
)

if TYPE_CHECKING:
    # The messages are read by `_messages` (and its typed messages, `_request`), imported when
    # the first query is prepared: ten frozen dataclasses, most of what importing this module
    # would cost (tests/unit/test_import_cost.py).
    from ._messages import Conversation, MessagesInput

__all__ = ["CallOptions", "ClaudeAgentProvider", "NamedToolChoice", "QueryStream", "ToolChoice"]

_STDERR_TAIL_LINES = 40

#: Linux's limit on one command-line argument (MAX_ARG_STRLEN, 32 pages).
_ARGUMENT_LIMIT = 128 * 1024
#: A system prompt longer than this goes to the CLI as a file (`--system-prompt-file`).
_SYSTEM_PROMPT_FILE_BYTES = 16 * 1024


#: Per CLI and environment: the CLI's model names -> the model they run (see `_learn_models`).
_MODEL_NAMES: dict[str, dict[str, str]] = {}
#: Per CLI and environment: the CLI's model list (what each model takes; `thinking="least"`).
_MODEL_LISTS: dict[str, list[dict[str, Any]]] = {}

#: The smallest thinking budget the Messages API takes (and the CLI sends).
_MIN_THINKING_BUDGET = 1024


@dataclass(frozen=True)
class _Plan:
    """A request resolved once, before any process starts: everything downstream (the CLI's
    options, the process it runs on, how its result is judged) reads these values."""

    conversation: Conversation
    tools: list[FunctionTool]
    options: CallOptions
    mode: Mode
    warnings: list[CallWarning]
    #: The model asked for (None: the CLI's default).
    model: str | None
    #: System prompt parts: the settings' or the call's, system messages, the tool_choice rule.
    system: list[str]
    tool_timeout: float | None
    #: The model settings below: the call's, else the provider's (None: the CLI's default).
    max_tokens: int | None
    thinking: Thinking | None
    effort: Effort | None
    timeout: float | None
    rules: ResultRules
    #: What makes processes interchangeable (`ClaudeAgentProvider._setup_key`).
    key: Hashable
    #: What the CLI merges into every Messages API request body (`CLAUDE_CODE_EXTRA_BODY`).
    body: dict[str, Any]
    #: The capability check again, asking the CLI's version (None: nothing left to ask).
    recheck: Callable[[], CapabilityReport] | None = None

    @property
    def cli_max_turns(self) -> int:
        """The CLI's `max_turns`: one model turn in single-turn mode."""
        return 1 if self.mode == "single-turn" else self.rules.max_turns


class ClaudeAgentProvider:
    """A model provider that runs Claude through the Claude Code CLI with the app's function tools.

    Each query gets its own in-process MCP server holding exactly that request's tools; built-in
    Claude tools are disabled and on-disk settings ignored. When every tool has an executor the
    CLI's loop runs them (**executor mode**).

    Example::

        provider = ClaudeAgentProvider(ProviderSettings(model="claude-sonnet-5-5"))
        result = await provider.generate("Weather in Paris?", tools=[weather])
        print(result.text, result.tool_calls, result.usage, result.cost_usd)
    """

    def __init__(
        self, settings: ProviderSettings | None = None, *, registry: ToolRegistry | None = None
    ) -> None:
        self.settings = settings or ProviderSettings()
        self.registry = registry
        self._pool: WarmPool | None = None
        #: Stops the pool's idle processes if the provider is collected; detached by aclose().
        self._pool_finalizer: weakref.finalize[[], ClaudeAgentProvider] | None = None
        #: Every process this provider started and not yet collected, for `aclose`.
        self._sessions: weakref.WeakSet[CLISession] = weakref.WeakSet()
        # The CLI's model names (`default`, aliases) -> the model they run, learnt from the
        # processes started with the same CLI and environment (shared by providers, so one made
        # per request learns them once): a replayed history's thinking needs the real name.
        cli = self.settings.model_dump_json(include={"cli_path", "env"})
        self._models = _MODEL_NAMES.setdefault(cli, {})
        self._model_list = _MODEL_LISTS.setdefault(cli, [])

    async def aclose(self) -> None:
        """Stop every CLI process of the provider: the warm ones
        (`ProviderSettings.warm_processes`) and those of queries still running, which fail
        saying the provider was closed. A closed provider can still run queries (and warms new
        processes if enabled). Also done by `async with provider:`.
        """
        if self._pool is not None:
            pool, self._pool = self._pool, None
            if self._pool_finalizer is not None:
                # Else it kept the closed pool alive for the provider's whole life.
                self._pool_finalizer.detach()
                self._pool_finalizer = None
            await pool.aclose()
        await stop_all(list(self._sessions), PROVIDER_CLOSED)

    async def warm_up(
        self,
        tools: Sequence[FunctionTool] | None = None,
        *,
        processes: int = 1,
        **call_options: Any,
    ) -> int:
        """Start warm processes now for queries with these tools and call options, so that even
        the first such query skips the CLI start-up (`ProviderSettings.warm_processes`).

        Starting a process makes no API call. Starts at most `processes`, and never more than
        `warm_processes` are kept; returns how many are now ready for this setup. System
        messages in a query's messages count as part of its setup: pass them as
        `system_prompt=` to both.
        """
        settings = self.settings
        if not settings.warm_processes:
            raise UnsupportedRequestError(
                "warm_up needs ProviderSettings(warm_processes=N) with N >= 1"
            )
        if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
            raise UnsupportedRequestError(
                f"processes must be a whole number of at least 1, not {processes!r}"
            )
        plan = self._prepare("warm-up", tools, _checked_options(call_options))
        if plan.rules.budget_usd:
            raise UnsupportedRequestError(
                "queries with max_budget_usd always start a fresh process (the CLI counts the "
                "budget per process): there is nothing to warm up"
            )
        started: list[CLISession] = []
        ready = False
        pool = self._warm_pool()
        try:
            for _ in range(min(processes, settings.warm_processes)):
                started.append((await pool.take(plan.key, [], lambda: self._spawn(plan)))[0])
            with anyio.fail_after(settings.idle_timeout):
                async with anyio.create_task_group() as group:
                    for proc in started:
                        group.start_soon(proc.connect)
            ready = True
        except TimeoutError:
            raise QueryTimeoutError(
                f"a warm process did not start within idle_timeout={settings.idle_timeout:g} s",
                kind="idle_timeout",
                seconds=float(settings.idle_timeout or 0),
            ) from None
        except (sdk.ClaudeSDKError, ExceptionGroup) as exc:
            tail = "\n".join(started[0].stderr) if started else ""
            raise ProcessDiedError(f"a warm process failed to start: {exc}", stderr=tail) from exc
        finally:
            for proc in started:
                await pool.give_back(proc, reusable=ready)
        return pool.idle_for(plan.key)

    async def __aenter__(self) -> ClaudeAgentProvider:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    def check_capabilities(
        self, tools: Sequence[FunctionTool] | None = None, **call_options: Any
    ) -> CapabilityReport:
        """What a request with these tools and options would need, and what is missing."""
        options = _checked_options(call_options)
        return check_capabilities(
            self.settings,
            self.registry,
            tools=tools,
            require=options.require,
            tool_names=options.tool_names,
            groups=options.groups,
            mode=options.mode,
        )

    async def generate(
        self,
        messages: MessagesInput,
        *,
        tools: Sequence[FunctionTool] | None = None,
        **call_options: Any,
    ) -> GenerateResult:
        """Run one query to the end and return its text, tool calls, usage and cost.

        Built on `stream`: the same parts, folded into a `GenerateResult`. Raises the same errors.
        """
        __tracebackhide__ = _ours  # read by pytest
        collector = ResultCollector()
        async with aclosing(self.stream(messages, tools=tools, **call_options)) as parts:
            async for part in parts:
                collector.add(part)
        return collector.result()

    def stream(
        self,
        messages: MessagesInput,
        *,
        tools: Sequence[FunctionTool] | None = None,
        **call_options: Any,
    ) -> QueryStream:
        """Run one query, yielding stream parts as they happen.

        Bad input (messages, tools, options) raises here, before any process starts. Errors during
        the query come as an `ErrorPart` (and a finish part) and are then raised. Use it as
        `async with provider.stream(...) as parts:` so that leaving the block (a `break`, an
        exception) stops the query's CLI at once; see `QueryStream`.
        """
        try:
            options = _checked_options(call_options)
        except Exception as exc:
            refused(exc, call_options.get("model", self.settings.model))
            raise
        return self._stream(messages, tools, options)

    def _stream(
        self, messages: MessagesInput, tools: Sequence[FunctionTool] | None, options: CallOptions
    ) -> QueryStream:
        """`stream` with its options already read (`_door.stream` comes in here)."""
        try:
            plan = self._prepare(messages, tools, options)
        except Exception as exc:  # refused before any process starts: a failed span still
            refused(exc, options.model or self.settings.model)
            raise
        return QueryStream(self._run(plan))

    # -- preparation (no process yet)

    def _prepare(
        self,
        messages: MessagesInput,
        tools: Sequence[FunctionTool] | None,
        options: CallOptions,
    ) -> _Plan:
        settings = self.settings
        thinking = options.thinking if options.thinking is not None else settings.thinking
        effort = options.effort or settings.effort
        if thinking == "least" and effort is not None:
            raise UnsupportedRequestError(
                f"thinking='least' chooses the effort itself (the model's lowest when it cannot "
                f"turn thinking off), so effort={effort!r} cannot be set as well; drop one"
            )
        max_tokens = options.max_tokens or settings.max_tokens
        if isinstance(thinking, int) and max_tokens is not None:
            # Measured on CLI 2.1.330: it sends max(min(budget, max_tokens - 1), 1024).
            sent = max(min(thinking, max_tokens - 1), _MIN_THINKING_BUDGET)
            if sent != thinking:
                raise UnsupportedRequestError(
                    f"thinking={thinking} needs max_tokens above it: the CLI lowers a thinking "
                    f"budget to max_tokens - 1 (with max_tokens={max_tokens} it would send "
                    f"{sent}); raise max_tokens to at least {thinking + 1} or lower the budget"
                )
        if options.output_schema is not None:
            try:
                normalize_input_schema(options.output_schema, tool_name="output_schema")
            except ToolDefinitionError as exc:
                raise UnsupportedRequestError(str(exc).replace("input_schema", "it")) from None
            size = len(json.dumps(options.output_schema).encode())
            if size > _ARGUMENT_LIMIT:
                raise UnsupportedRequestError(
                    f"output_schema is {size:,} bytes as JSON; the CLI takes it as one "
                    f"command-line argument, and Linux allows at most {_ARGUMENT_LIMIT:,} "
                    f"bytes per argument. Shorten the schema (e.g. move descriptions into the "
                    f"system prompt, which has no such limit)"
                )
        if options.stop_sequences and options.output_schema is not None:
            raise UnsupportedRequestError(_STOP_WITH_OUTPUT_SCHEMA)
        from ._messages import TOOLS_NEEDED, convert_messages  # see TYPE_CHECKING above

        conversation = convert_messages(messages)
        if conversation.history and not self.settings.isolate:
            raise UnsupportedRequestError(
                "replaying conversation history needs ProviderSettings(isolate=True): the "
                "history is written as a session into the per-query config dir"
            )
        scope_error: ProviderCompatibilityError | None = None
        if tools is None and self.registry is not None:
            try:
                tools = self.registry.select(options.tool_names, options.groups)
            except ProviderCompatibilityError as exc:
                scope_error = exc  # reported below with every other missing piece
        elif options.tool_names is not None or options.groups is not None:
            raise UnsupportedRequestError(
                "tool_names / groups scope the provider's ToolRegistry: create the provider with "
                "registry=..., and do not pass tools= as well"
            )
        checked = validate_tool_set(tools or (), bridge_name=self.settings.bridge_name)
        # With calls forbidden (tool_choice "none" over a history holding tool calls) the
        # query runs single-turn: nothing executes, and a call is refused.
        checked, forbid_calls = exposed_tools(
            checked, options.tool_choice, history_holds_calls=conversation.has_tool_blocks
        )
        if not checked and not scope_error and conversation.has_tool_blocks:
            raise InvalidMessagesError(TOOLS_NEEDED)  # else the API's 400, after CLI retries
        missing = [t.name for t in checked if t.executor is None]
        warnings = list(conversation.warnings)
        ignored = _ignored_environment(settings)
        if ignored:
            warnings.append(
                CallWarning(
                    code="environment-ignored",
                    message=f"{', '.join(ignored)} set in the environment would change the "
                    f"request (model, headers, body, limits, the cloud it goes to), but an "
                    f"isolated query does not pass it to the CLI; use the call options (model=, "
                    f"max_tokens=, betas=, ...) or name it in ProviderSettings.env to pass it on",
                )
            )
        cloud = cloud_switches(settings)
        if cloud and settings.isolate:
            warnings.append(
                CallWarning(
                    code="cloud-credentials",
                    message=f"{', '.join(cloud)} in ProviderSettings.env: the CLI authenticates "
                    f"with the cloud's own credential chain, which can run commands its files "
                    f"name (an AWS credential_process, a gcloud or az helper)",
                )
            )
        if options.mode == "executor" and missing:
            raise MissingExecutorError(
                [
                    f"mode='executor' runs every tool inside the query, but {', '.join(missing)} "
                    f"has no executor; give it one or use mode='single-turn'"
                ]
            )
        # `stream` may be called on an event loop: the check runs no process here. A CLI whose
        # version is not known yet (a `cli_path` without a version stamp) is asked in `_run`,
        # off the loop, before the query's process starts.
        check = functools.partial(
            check_capabilities,
            self.settings,
            self.registry,
            tools=None if scope_error else checked,
            tool_names=options.tool_names,
            groups=options.groups,
            require=options.require,
            mode=options.mode,
            check_schemas=False,  # checked when each FunctionTool was built
        )
        report = check(ask_version=False)
        if report.problems:
            raise refusal(report)
        recheck = None if version_known(report.cli.path) else check
        mode: Mode = "executor"
        if options.mode == "single-turn" or missing or forbid_calls:
            mode = "single-turn"
        if missing and len(missing) < len(checked) and not forbid_calls:
            warnings.append(
                CallWarning(
                    code="tool-executors-partial",
                    message=f"tools without an executor: {', '.join(missing)}; the query runs in "
                    f"single-turn mode and no tool is executed by the provider",
                )
            )
        choice = options.tool_choice
        # tool_choice "required" or a named tool: sent to the API, and the reply checked.
        required = choice.name if isinstance(choice, NamedToolChoice) else None
        if choice == "required":
            required = "a tool"
        if required is not None and mode == "executor":
            raise UnsupportedRequestError(_FORCED_CHOICE_IN_EXECUTOR_MODE.format(choice=choice))
        if required is not None and thinking not in (None, "disabled"):
            raise UnsupportedRequestError(
                f"tool_choice={choice!r} forces a tool call, which the Messages API refuses "
                f"with extended thinking, and thinking={thinking!r} asks for thinking; drop the "
                f"thinking setting (thinking is turned off for a forced call) or the tool choice"
            )
        body = _request_body(options, settings, tools=bool(checked), forbid=forbid_calls)
        # An explicit "" drops the settings' prompt for this call.
        own = options.system_prompt
        system = [settings.system_prompt if own is None else own, *conversation.system]
        sources = ["ProviderSettings.system_prompt" if own is None else "the system_prompt option"]
        sources += [f"system message {n}" for n in range(1, len(conversation.system) + 1)]
        for source, part in zip(sources, system, strict=True):
            _refuse_half_characters(source, part)
        rules = ResultRules(
            mode=mode,
            required_call=required,
            forbid_calls=forbid_calls,
            wants_object=options.output_schema is not None,
            budget_usd=options.max_budget_usd or settings.max_budget_usd,
            max_turns=options.max_turns or settings.max_turns,
            strict_tools=frozenset(t.name for t in checked if t.strict),
            sampling=frozenset(k for k in ("temperature", "top_p", "top_k") if k in body),
            model=options.model or settings.model,
        )
        return _Plan(
            conversation=conversation,
            tools=checked,
            options=options,
            mode=mode,
            warnings=warnings,
            model=options.model or settings.model,
            system=[s for s in system if s],
            tool_timeout=options.tool_timeout or settings.tool_timeout,
            max_tokens=max_tokens,
            thinking=thinking,
            effort=effort,
            timeout=options.timeout or settings.timeout,
            rules=rules,
            key=self._setup_key(mode, conversation.system, options, checked),
            body=body,
            recheck=recheck,
        )

    def _sdk_options(
        self,
        plan: _Plan,
        workdir: Path,
        stderr: deque[str],
        run_in: Callable[[], contextvars.Context | None] | None = None,
    ) -> sdk.ClaudeAgentOptions:
        settings = self.settings
        bridge = settings.bridge_name
        env = dict(settings.env)
        # Retries: the call's own, else the setting when set (or when no variable says), else
        # the variable of settings.env or of the environment (allow-listed), honoured as set.
        if plan.options.max_retries is not None:
            env["CLAUDE_CODE_MAX_RETRIES"] = str(plan.options.max_retries)
        elif "max_retries" in settings.model_fields_set or not (
            "CLAUDE_CODE_MAX_RETRIES" in env or os.environ.get("CLAUDE_CODE_MAX_RETRIES")
        ):
            env["CLAUDE_CODE_MAX_RETRIES"] = str(settings.max_retries)
        if plan.max_tokens is not None:
            env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] = str(plan.max_tokens)
        # A setting holds over the variables that set the same thing (from settings.env, or
        # the environment when not isolated); measured: the CLI takes these over its flags.
        if plan.effort is not None:
            env["CLAUDE_CODE_EFFORT_LEVEL"] = plan.effort
        if plan.thinking is not None:
            env.update(CLAUDE_CODE_DISABLE_THINKING="", MAX_THINKING_TOKENS="")  # "": unset
        if plan.body:
            env["CLAUDE_CODE_EXTRA_BODY"] = json.dumps(plan.body)
        if plan.options.betas:
            env["ANTHROPIC_BETAS"] = ",".join(
                b for b in (env.get("ANTHROPIC_BETAS", ""), *plan.options.betas) if b
            )
        # No compaction: a conversation too long for the context window would otherwise be
        # summarised by extra model calls and answered from the summary, without a word.
        env.setdefault("DISABLE_COMPACT", "1")
        if settings.isolate:
            env.update(_isolated_dirs(workdir, env))
        servers: dict[str, Any] = {}
        if plan.tools:
            gate = self.registry.gate if self.registry else None
            servers[bridge] = build_bridge_server(
                bridge,
                plan.tools,
                default_timeout=plan.tool_timeout,
                gate=gate,
                max_result_chars=settings.max_result_chars,
                run_in=run_in,
            )
        extra_args: dict[str, str | None] = {"no-session-persistence": None}
        resume: dict[str, Any] = {}
        cwd = os.path.abspath(settings.cwd or os.getcwd())  # a relative one: from here, now
        if plan.conversation.history:
            session_id, last_entry = write_transcript(
                Path(env["CLAUDE_CONFIG_DIR"]),
                cwd,
                plan.conversation.history,
                bridge=bridge,
                model=self._resolved_model(plan),
            )
            resume = {"resume": session_id, "resume_session_at": last_entry}
        hooks: dict[Any, list[sdk.HookMatcher]] | None = None
        if plan.mode == "single-turn":
            # One model turn, and every tool call deferred before it runs: the CLI stops and
            # hands the calls back. Bare mode would skip the hook.
            # Only the bridge tools are deferred: the CLI's own StructuredOutput tool must run.
            matcher = sdk.HookMatcher(matcher=f"mcp__{bridge}__.*", hooks=[_defer_tool_call])
            hooks = {"PreToolUse": [matcher]}
        # Never bare (`--bare`, a faster start by about 10 %): bare mode sends the model only
        # the first paragraph of each tool's description (measured on CLI 2.1.332: "A.\n\nB."
        # reaches the API as "A."), skips hooks and reads no Claude login.
        # ENABLE_TOOL_SEARCH=false drops the DeferredToolPlaceholder tool, so the API sees
        # exactly the bridge tools.
        env.setdefault("ENABLE_TOOL_SEARCH", "false")
        # The CLI cuts an MCP tool's description to its first 4096 characters plus
        # "… [truncated]", without a word, unless this variable allows more.
        env.setdefault("CLAUDE_CODE_MAX_MCP_DESCRIPTION_LENGTH", str(_MAX_DESCRIPTION_CHARS))
        if settings.isolate:
            env = {**_blocked_environment(env), **env}
        return sdk.ClaudeAgentOptions(
            tools=[],
            allowed_tools=[bridge_tool_name(bridge, t.name) for t in plan.tools],
            mcp_servers=servers,
            setting_sources=[],
            system_prompt=_system_prompt(plan.system, workdir),
            model=plan.model,
            max_turns=plan.cli_max_turns,
            max_budget_usd=plan.rules.budget_usd,
            output_format=(
                {"type": "json_schema", "schema": plan.options.output_schema}
                if plan.options.output_schema is not None
                else None
            ),
            include_partial_messages=True,
            hooks=hooks,
            env=env,
            cwd=cwd,
            **resume,
            cli_path=settings.cli_path,
            max_buffer_size=settings.max_buffer_size,
            thinking=_thinking_config(plan.thinking),
            effort=plan.effort,
            stderr=stderr.append,
            extra_args={**extra_args, **settings.extra_args},
        )

    # -- the query

    async def _run(self, plan: _Plan) -> AsyncGenerator[StreamPart, None]:
        __tracebackhide__ = _ours  # read by pytest
        # The query's span (a no-op unless tracing is configured): current only around awaits
        # of the CLI, where its process starts and its tools are called, never across a yield.
        query = start_query(_traced(plan))
        # The whole-query timeout counts from here: getting a process is part of the query.
        clock = _Deadlines(plan.timeout, self.settings.idle_timeout)
        served: tuple[WarmPool | None, CLISession, Served] | None = None
        try:
            with query.current(), clock.before_first_message():
                if plan.recheck is not None:  # `claude --version`, off the event loop
                    report = await anyio.to_thread.run_sync(plan.recheck, abandon_on_cancel=True)
                    if report.problems:
                        raise refusal(report)
                if plan.thinking == "least":
                    plan = await self._least_thinking(plan)
                served = await self._session(plan)
            if served is None:  # the timeout expired first; what started was stopped
                raise clock.expired()
        except BaseException as exc:
            query.end(exc)
            raise
        pool, session, process = served
        query.served_by(process)
        stderr = session.stderr
        clean = False  # a process is kept only after a clean result
        single_turn = plan.mode == "single-turn"
        mapper = PartMapper(
            self.settings.bridge_name,
            provider_executed=not single_turn,
            tools={t.name: t for t in plan.tools},
            hold_envelopes=single_turn,
        )
        collector = ResultCollector()
        notes = {"process": process, **_notes(plan)}
        bridge, tool_names = self.settings.bridge_name, [t.name for t in plan.tools]
        try:
            start = StreamStartPart(warnings=plan.warnings, mode=plan.mode, process=process)
            collector.add(start)
            yield start
            result: sdk.ResultMessage | None = None
            failure: ProviderError | None = None
            try:
                prompt = plan.conversation.prompt
                check = functools.partial(_model_problem, plan)
                async with aclosing(session.messages(prompt, check=check)) as messages:
                    while True:
                        try:
                            with query.current():
                                message = await clock.next(messages)
                        except StopAsyncIteration:
                            break
                        if message is None:
                            failure = clock.expired()
                            break
                        if isinstance(message, sdk.SystemMessage) and message.subtype == "init":
                            failure = unavailable_tools(message.data, bridge, tool_names)
                            if failure is not None:
                                break
                        if isinstance(message, sdk.ResultMessage):
                            result = session.own_result(message)
                            continue
                        for part in mapper.map(message):
                            collector.add(part)
                            yield part
            except sdk.ClaudeSDKError as exc:
                failure = exception_failure(exc, stderr, self.settings.max_buffer_size)
            except UnsupportedRequestError as exc:  # the CLI's model cannot do what was asked
                failure = exc
            if failure is None and result is None:
                failure = process_died(None, stderr)
            if failure is None and result is not None:
                for part in mapper.flush():
                    collector.add(part)
                    yield part
                outcome = mapper.outcome(result)
                failure = result_failure(outcome, plan.rules, collector)
                if failure is None:
                    finish = finish_part(outcome, notes=notes)
                    collector.add(finish)
                    query.finish(finish, collector)
                    clean = not result.is_error
                    yield finish
                    return
            assert failure is not None
            if isinstance(failure, ProcessDiedError) and session.stopped_by:
                failure = stopped(session.stopped_by, stderr)
            error = ErrorPart(error_type=type(failure).__name__, message=str(failure))
            collector.add(error)
            yield error
            if result is not None:
                # An error without a partial result: the finish reason says the query failed.
                failed = not isinstance(failure, PartialResultError)
                finish = finish_part(mapper.outcome(result), failed=failed, notes=notes)
                collector.add(finish)
                query.finish(finish, collector)
                yield finish
            if isinstance(failure, PartialResultError):
                failure.partial = collector.result()
            raise failure
        except BaseException as exc:  # the query's error, a cancellation, or the app left
            query.end(exc)
            raise
        finally:
            query.end()
            self._learnt(session)
            if pool is not None:
                await pool.give_back(session, reusable=clean)
            else:
                await session.close()

    def _warm_pool(self) -> WarmPool:
        if self._pool is None:
            self._pool = WarmPool(self.settings.warm_processes, self.settings.warm_idle_timeout)
            # A provider dropped without aclose() stops its idle processes when collected.
            self._pool_finalizer = weakref.finalize(self, self._pool.kill_idle)
        return self._pool

    async def _session(self, plan: _Plan) -> tuple[WarmPool | None, CLISession, Served]:
        """The process for this query, the pool it returns to (None: closed after it), and how
        it serves the query (fresh, warm or continued).

        Without `warm_processes`, and for queries with a budget (the CLI counts it per
        process), every query gets a new process. Otherwise the pool hands out one that holds
        exactly this request's history (continued), an emptied one, or a new one.
        """
        history = plan.conversation.history
        if history:
            await self._learn_models(plan)
        if not self.settings.warm_processes or plan.rules.budget_usd:
            return None, self._spawn(plan), "fresh"
        pool = self._warm_pool()
        session, served = await pool.take(
            plan.key, history, lambda: self._spawn(plan), renew=_renewer(self, plan)
        )
        return pool, session, served

    def _resolved_model(self, plan: _Plan) -> str | None:
        """The model a query runs, by its full name when known (None: the CLI's default, not
        yet learnt)."""
        return self._models.get(plan.model or "default", plan.model)

    async def _learn_models(self, plan: _Plan) -> None:
        """Learn which model the CLI runs when this query's history holds signed thinking and
        its model is the CLI's default or an alias: the CLI replays thinking only from turns of
        the model it runs, so the transcript must name it. Starts a process without history
        once per provider (no API call), kept warm when warm processes are on."""
        history = plan.conversation.history
        model = plan.model
        if (model or "default") in self._models or (model or "").startswith("claude-"):
            return  # known, or a full model name
        thinking = ("thinking", "redacted_thinking")
        if not any(b.get("type") in thinking for t in history for b in t["content"]):
            return
        await self._read_model_list(plan, pooled=True)

    async def _least_thinking(self, plan: _Plan) -> _Plan:
        """`thinking="least"` resolved by the CLI's model list (read once per CLI and
        environment, by a process started without history: no API call): thinking off where
        the model can turn it off, else its lowest effort level, else its default."""
        if not self._model_list:
            # Started with the model's defaults, so not kept: its options are not the query's.
            await self._read_model_list(replace(plan, thinking=None, effort=None), pooled=False)
        entry = _model_entry(self._model_list, plan.model)
        if entry is None or entry.get("supportsThinkingOff"):
            return replace(plan, thinking="disabled")
        takes = entry.get("supportedEffortLevels") or []
        levels = [e for e in get_args(Effort) if e in takes] if entry.get("supportsEffort") else []
        return replace(plan, thinking=None, effort=levels[0] if levels else None)

    async def _read_model_list(self, plan: _Plan, *, pooled: bool) -> None:
        """Start a process for `plan` without history, to learn the CLI's model list."""
        empty = replace(plan, conversation=replace(plan.conversation, history=[]))
        pool = self._warm_pool() if pooled and self.settings.warm_processes else None
        if pool is not None:
            session, _ = await pool.take(plan.key, [], lambda: self._spawn(empty))
        else:
            session = self._spawn(empty)
        ready = False
        try:
            await session.connect()
            ready = True
        except sdk.ClaudeSDKError:
            pass  # the query's own start reports it
        finally:
            self._learnt(session)
            if pool is not None:  # kept only when it started (not cancelled, not failed)
                await pool.give_back(session, reusable=ready)
            else:
                await session.close()

    def _learnt(self, session: CLISession) -> None:
        """Keep what a connected process said of the CLI's models."""
        self._models.update(session.models)
        if session.model_list:
            self._model_list[:] = session.model_list

    def _setup_key(
        self,
        mode: Mode,
        system: list[str],
        options: CallOptions,
        tools: list[FunctionTool],
    ) -> Hashable:
        """Everything the CLI's options are built from except the conversation: processes with
        the same key are interchangeable. Executors and the gate count by identity; a live
        process holds them, so an id cannot be reused while it lives."""
        registry = self.registry
        return (
            self.settings.model_dump_json(),
            _environment_key(self.settings.isolate),  # credentials, endpoint: read at start
            _login_key(self.settings),
            os.path.abspath(self.settings.cwd or os.getcwd()),  # named to the model
            id(registry),
            id(registry.gate) if registry is not None else None,
            mode,
            tuple(system),
            options.model_dump_json(exclude={"tool_names", "groups", "require", "timeout"}),
            tuple((t.model_dump_json(exclude={"executor"}), id(t.executor)) for t in tools),
        )

    def _spawn(self, plan: _Plan) -> CLISession:
        """A new process for this setup, holding this request's history (not started yet)."""
        # env's TMPDIR, when given, is where the query's temp files go: ours and the CLI's.
        where = self.settings.env.get("TMPDIR") or tempfile.gettempdir()
        try:
            workdir = Path(tempfile.mkdtemp(prefix="sf-provider-", dir=where))
        except OSError as exc:
            raise _no_room(where, exc) from exc
        stderr: deque[str] = deque(maxlen=_STDERR_TAIL_LINES)
        session = CLISession(
            plan.key,
            workdir,
            stderr,
            bridge=self.settings.bridge_name,
            history=plan.conversation.history,
        )
        self._sessions.add(session)
        try:
            session.start(self._sdk_options(plan, workdir, stderr, run_in=session.query_context))
        except OSError as exc:  # a full disk, a file size limit: its transcript or prompt file
            session.kill_now()  # removes its dir
            raise _no_room(where, exc) from exc
        except BaseException:
            session.kill_now()  # removes its dir
            raise
        return session


class QueryStream:
    """The stream parts of one running query (`ClaudeAgentProvider.stream`).

    Iterate it with `async for`. A `break` out of a bare `async for` does not stop anything by
    itself: Python closes an abandoned iterator only when it is garbage-collected, and until
    then the CLI (and a running tool) would go on. So leave it through `async with`, which stops
    the query's CLI at once when the block is left, however it is left::

        async with provider.stream("Weather in Paris?", tools=tools) as parts:
            async for part in parts:
                if isinstance(part, ToolCallPart):
                    break  # the CLI is stopped here

    `await parts.aclose()` (or `contextlib.aclosing(provider.stream(...))`) does the same.
    """

    __slots__ = ("_parts",)

    def __init__(self, parts: AsyncGenerator[StreamPart, None]) -> None:
        self._parts = parts

    def __aiter__(self) -> QueryStream:
        return self

    async def __anext__(self) -> StreamPart:
        __tracebackhide__ = _ours  # read by pytest
        return await anext(self._parts)

    async def aclose(self) -> None:
        """Stop the query: its CLI is stopped and its temp dir removed (a no-op once done)."""
        await self._parts.aclose()

    async def __aenter__(self) -> QueryStream:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()


class _Deadlines:
    """The whole-query and idle timeouts of one query, the whole-query clock started when the
    query starts (`_run`), so every wait counts against it: the waits for a process to serve
    the query (`before_first_message`: its CLI's version check, reading the model list, a warm
    process's rewind, a starting replacement) and each wait for the CLI's next message (`next`,
    where the idle timeout applies too).

    Each wait gets its own cancel scope, entered and left inside one `await`, never across a
    `yield` of the stream.
    """

    def __init__(self, timeout: float | None, idle_timeout: float | None) -> None:
        self._timeout = timeout
        self._idle = idle_timeout
        self._deadline = math.inf if timeout is None else anyio.current_time() + timeout
        self._which: Literal["timeout", "idle_timeout"] = "idle_timeout"
        #: Whether the query got its process, so a timeout stops its CLI.
        self._served = False

    def before_first_message(self) -> anyio.CancelScope:
        """The scope of the waits before the query has a process: only the whole-query timeout
        applies (the idle timeout counts the CLI's silence once it serves the query). It
        swallows its own expiry: the caller, left without a process, raises `expired()`."""
        self._which = "timeout"
        return anyio.CancelScope(deadline=self._deadline)

    async def next(self, messages: AsyncGenerator[Any, None]) -> Any | None:
        """The next SDK message, or None when a timeout expired first."""
        self._served = True
        limit = self._idle
        self._which = "idle_timeout"
        left = max(self._deadline - anyio.current_time(), 0.0)
        if limit is None or left <= limit:
            limit, self._which = left, "timeout"
        with anyio.move_on_after(limit):
            return await anext(messages)
        return None  # only reached when the limit expired

    def expired(self) -> QueryTimeoutError:
        """The error for the timeout that expired."""
        if self._which == "timeout":
            what = (
                "the CLI was stopped"
                if self._served
                else "it was still waiting for a CLI process to serve it (nothing was sent)"
            )
            return QueryTimeoutError(
                f"the query did not finish within timeout={self._timeout:g} s; {what}. Raise "
                f"the timeout for long tasks (the call's timeout, which frameworks set from "
                f"their own timeout setting, else ProviderSettings.timeout)",
                kind="timeout",
                seconds=float(self._timeout or 0),
            )
        return QueryTimeoutError(
            f"the CLI sent nothing for idle_timeout={self._idle:g} s; it was stopped. A hung API "
            f"or a tool running longer than that; raise ProviderSettings.idle_timeout if needed",
            kind="idle_timeout",
            seconds=float(self._idle or 0),
        )


def _no_room(where: str, exc: OSError) -> ProviderCompatibilityError:
    """The error for a query whose temp files could not be written (nothing was started)."""
    return ProviderCompatibilityError(
        [
            f"could not prepare the query's temp files under {where!r} ({exc}): free space "
            f"there, raise the file size limit, or set ProviderSettings.env['TMPDIR'] to a "
            f"writable directory with room"
        ]
    )


_STOP_WITH_OUTPUT_SCHEMA = (
    "stop_sequences cannot be honoured with output_schema: the answer is the whole object, "
    "which a stop sequence would cut; leave one of them out"
)

_FORCED_CHOICE_IN_EXECUTOR_MODE = (
    "tool_choice={choice!r} forces a tool call in every model turn, and in executor mode the "
    "CLI sends it on each turn of its loop, so the model could never answer; use "
    "mode='single-turn' (the calls come back for you to run) or tool_choice='auto'"
)

#: Keys of the Messages API request the CLI writes itself, each from its own option: a value
#: in `ProviderSettings.env["CLAUDE_CODE_EXTRA_BODY"]` would silently replace it.
_CLI_BODY_KEYS = {
    "max_tokens": "max_tokens=",
    "thinking": "thinking=",
    "output_config": "effort= / output_schema=",
    "tools": "tools=",
    "system": "system_prompt=",
    "messages": "the messages",
    "model": "model=",
    "metadata": "nothing: the CLI sends its own user_id",
    "context_management": "nothing: the CLI manages the context",
    "stream": "nothing: the CLI always streams",
}


def _request_body(
    options: CallOptions, settings: ProviderSettings, *, tools: bool, forbid: bool
) -> dict[str, Any]:
    """What the CLI merges into every Messages API request of the query
    (`CLAUDE_CODE_EXTRA_BODY`): the request options the CLI has no switch for, as written, over
    whatever `settings.env` puts there (which must not name a key the CLI writes itself)."""
    own = settings.env.get("CLAUDE_CODE_EXTRA_BODY") or ""
    try:
        body = json.loads(own) if own else {}
    except ValueError as exc:
        raise UnsupportedRequestError(
            f"ProviderSettings.env['CLAUDE_CODE_EXTRA_BODY'] is not JSON ({exc})"
        ) from None
    if not isinstance(body, dict):
        raise UnsupportedRequestError(
            "ProviderSettings.env['CLAUDE_CODE_EXTRA_BODY'] must be a JSON object"
        )
    written = sorted(body.keys() & _CLI_BODY_KEYS.keys())
    if written:
        raise UnsupportedRequestError(
            f"ProviderSettings.env['CLAUDE_CODE_EXTRA_BODY'] sets {written[0]!r}, which the CLI "
            f"writes itself; use {_CLI_BODY_KEYS[written[0]]} instead"
        )
    sent: dict[str, Any] = {}
    for key in ("temperature", "top_p", "top_k"):
        if getattr(options, key) is not None:
            sent[key] = getattr(options, key)
    if options.stop_sequences:
        sent["stop_sequences"] = list(options.stop_sequences)
    choice: dict[str, Any] = {}
    if forbid:
        choice = {"type": "none"}
    elif isinstance(options.tool_choice, NamedToolChoice):
        name = bridge_tool_name(settings.bridge_name, options.tool_choice.name)
        choice = {"type": "tool", "name": name}
    elif options.tool_choice == "required":
        choice = {"type": "any"}
    if not options.parallel_tool_calls and not forbid:
        choice = {"type": "auto", **choice, "disable_parallel_tool_use": True}
    if choice and tools:  # the API takes no tool_choice without tools
        sent["tool_choice"] = choice
    if choice.get("type") in ("any", "tool"):
        sent["thinking"] = {"type": "disabled"}  # the API refuses forced tool use with thinking
    clash = sorted(k for k in body.keys() & sent.keys() if body[k] != sent[k])
    if clash:
        raise UnsupportedRequestError(
            f"ProviderSettings.env['CLAUDE_CODE_EXTRA_BODY'] sets {clash[0]!r} to "
            f"{body[clash[0]]!r}, and the call asks for {sent[clash[0]]!r}; set it in one place"
        )
    return {**body, **sent}


def _ours(info: Any) -> bool:
    """Whether pytest hides the provider's frames from a failure's traceback (its
    `__tracebackhide__`): for the provider's own documented errors, whose messages say what
    happened, yes; for anything else (a bug) every frame stays. `--fulltrace` shows them all."""
    return bool(info.errisinstance(ProviderError))


def _login_to_copy(env: Mapping[str, str]) -> Path | None:
    """The Claude login's credentials file an isolated query copies in: when no API key or
    token is configured (`env` over the application's environment, as `check_auth` reads it: a
    blank value in `env` hides the environment's)."""
    merged: ChainMap[str, str] = ChainMap(dict(env), os.environ)
    if any(merged.get(k) for k in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")):
        return None
    return credentials_path(merged)


def _login_key(settings: ProviderSettings) -> tuple[int, int] | None:
    """The copied login's version (modified time, size), for the warm-process key: after the
    user logs in again, a process holding the old copy must not answer."""
    source = _login_to_copy(settings.env) if settings.isolate else None
    try:
        info = source.stat() if source is not None else None
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size) if info is not None else None


def _isolated_dirs(workdir: Path, env: dict[str, str]) -> dict[str, str]:
    """Per-query HOME, CLAUDE_CONFIG_DIR and TMPDIR, so nothing on disk leaks in or out.

    A logged-in user's credentials file is copied in when no API key or token is configured, so
    `--live` use with a Claude subscription keeps working.
    """
    dirs = {name: workdir / name for name in ("home", "config", "tmp")}
    for path in dirs.values():
        path.mkdir()
    source = _login_to_copy(env)
    if source is not None and source.is_file():
        shutil.copy2(source, dirs["config"] / ".credentials.json")
    return {
        "HOME": str(dirs["home"]),
        "CLAUDE_CONFIG_DIR": str(dirs["config"]),
        "TMPDIR": str(dirs["tmp"]),
    }


#: What the CLI may take from the application's environment in isolated mode: how to reach and
#: authenticate to the API (direct, and the Bedrock, Vertex and Foundry credentials, used only
#: when settings.env turns a cloud on: `capabilities.cloud_switches`), proxies and
#: certificates, the locale, switches that only turn things off, and what the SDK itself sets.
#: Everything else is blanked (`_blocked_environment`); ProviderSettings.env passes whatever it
#: names.
_ENV_ALLOWED = frozenset(
    {
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "ANTHROPIC_BEDROCK_BASE_URL",
        "ANTHROPIC_VERTEX_BASE_URL",
        "ANTHROPIC_VERTEX_PROJECT_ID",
        "ANTHROPIC_FOUNDRY_API_KEY",
        "ANTHROPIC_FOUNDRY_BASE_URL",
        "ANTHROPIC_FOUNDRY_RESOURCE",
        "CLAUDE_CODE_SKIP_BEDROCK_AUTH",
        "CLAUDE_CODE_SKIP_VERTEX_AUTH",
        "CLAUDE_CODE_SKIP_FOUNDRY_AUTH",
        "CLOUD_ML_REGION",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "GOOGLE_CLOUD_PROJECT",
        "GCLOUD_PROJECT",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "all_proxy",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "NODE_EXTRA_CA_CERTS",
        "CLAUDE_CODE_CLIENT_CERT",
        "CLAUDE_CODE_CLIENT_KEY",
        "CLAUDE_CODE_CLIENT_KEY_PASSPHRASE",
        "PATH",
        "LANG",
        "LANGUAGE",
        "TZ",
        "USER",
        "LOGNAME",
        "DISABLE_TELEMETRY",
        "DISABLE_ERROR_REPORTING",
        "DISABLE_AUTOUPDATER",
        "DISABLE_BUG_COMMAND",
        "DISABLE_COST_WARNINGS",
        "DISABLE_NON_ESSENTIAL_MODEL_CALLS",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        "CLAUDE_CODE_MAX_RETRIES",
        "CLAUDE_CODE_ENTRYPOINT",
        "TRACEPARENT",
        "TRACESTATE",
    }
)
_ENV_ALLOWED_PREFIXES = ("AWS_", "VERTEX_REGION_", "AZURE_", "LC_")

#: What the CLI may pass on of a tool's description (`CLAUDE_CODE_MAX_MCP_DESCRIPTION_LENGTH`;
#: its default, 4096, cuts longer ones): more than any description a request could carry.
_MAX_DESCRIPTION_CHARS = 100_000_000


#: Variables the CLI reads that reshape every request (the model, headers, betas, the body, the
#: output and thinking limits, caching): blanked in isolated mode like any variable off the
#: allow-list, and, unlike the rest, reported (`environment-ignored`) when the application's
#: environment sets them, since a user who set one expects its effect.
_REQUEST_SHAPING_ENV = frozenset(
    {
        # Where the request goes: passed on only when settings.env names it (then with a
        # `cloud-credentials` warning), as the cloud's credential chain can run commands.
        "CLAUDE_CODE_USE_BEDROCK",
        "CLAUDE_CODE_USE_VERTEX",
        "CLAUDE_CODE_USE_FOUNDRY",
        "ANTHROPIC_MODEL",
        "ANTHROPIC_DEFAULT_OPUS_MODEL",
        "ANTHROPIC_DEFAULT_SONNET_MODEL",
        "ANTHROPIC_DEFAULT_HAIKU_MODEL",
        "ANTHROPIC_SMALL_FAST_MODEL",
        "ANTHROPIC_CUSTOM_HEADERS",
        "ANTHROPIC_BETAS",
        "CLAUDE_CODE_EXTRA_BODY",
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
        "MAX_THINKING_TOKENS",
        "CLAUDE_CODE_EFFORT_LEVEL",
        "CLAUDE_CODE_DISABLE_THINKING",
        "DISABLE_PROMPT_CACHING",
    }
)


def _ignored_environment(settings: ProviderSettings) -> list[str]:
    """The request-shaping variables the application's environment sets and an isolated query
    blanks (`_REQUEST_SHAPING_ENV`); none without isolation, or when `settings.env` names them."""
    if not settings.isolate:
        return []
    return sorted(n for n in _REQUEST_SHAPING_ENV if os.environ.get(n) and n not in settings.env)


def _environment_key(isolate: bool) -> tuple[tuple[str, str], ...]:
    """The application's environment as the CLI reads it at start (isolated: the allow-list
    only), for the warm-process key: a rotated API key or a new endpoint in `os.environ` must
    not be answered by a process started with the old one."""
    return tuple(
        sorted(
            (name, value)
            for name, value in os.environ.items()
            if not isolate or name in _ENV_ALLOWED or name.startswith(_ENV_ALLOWED_PREFIXES)
        )
    )


def _blocked_environment(env: dict[str, str]) -> dict[str, str]:
    """The application's environment variables the CLI must not see, each set to "" (the SDK
    passes the whole environment on and cannot unset one; the CLI reads "" as unset).

    The CLI reads over a thousand variables; some load code or settings
    (`CLAUDE_CODE_PLUGIN_DIRS` runs a plugin's hooks and MCP servers, `NODE_OPTIONS`) and some
    reshape every request (`ANTHROPIC_MODEL`, `ANTHROPIC_CUSTOM_HEADERS`, `ANTHROPIC_BETAS`,
    `CLAUDE_CODE_EXTRA_BODY`). So it is an allow-list (`_ENV_ALLOWED`), not a deny-list.
    """
    return {
        name: ""
        for name in os.environ
        if name not in env
        and name not in _ENV_ALLOWED
        and not name.startswith(_ENV_ALLOWED_PREFIXES)
    }


def _refuse_half_characters(source: str, text: str | None) -> None:
    """`InvalidMessagesError` when `text`, a part of the system prompt, holds a surrogate: the
    CLI takes a system prompt as an argument or a file, UTF-8 either way, which cannot carry
    one (a short prompt failed the CLI's start, a long one raised `UnicodeEncodeError`). In a
    user message or the history the same text is sent as escaped JSON, and works."""
    if not text:
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidMessagesError(
            f"the system prompt cannot be sent: {source} holds U+{ord(text[exc.start]):04X} at "
            f"character {exc.start}, half of a character such as an emoji (a UTF-16 surrogate: "
            f"text cut by UTF-16 units, or bytes decoded with 'surrogateescape'); the CLI takes "
            f"a system prompt as UTF-8, which has no half characters. Send the whole character, "
            f"or remove the half"
        ) from None


def _system_prompt(parts: list[str], workdir: Path) -> str | SystemPromptFile | None:
    """The system prompt for the CLI: a long one as a file, since one command-line argument
    holds at most 128 KiB on Linux."""
    if not parts:
        return None
    prompt = "\n\n".join(parts)
    if len(prompt) * 4 < _SYSTEM_PROMPT_FILE_BYTES:  # at most 4 bytes per character
        return prompt
    path = workdir / "system-prompt.md"
    path.write_text(prompt, encoding="utf-8")
    return {"type": "file", "path": str(path)}


def _renewer(provider: ClaudeAgentProvider, plan: _Plan) -> Callable[[], CLISession | None]:
    """What starts a process for `plan`'s setup without history (a retired process's
    replacement): None once the provider is gone (the pool must not keep it alive)."""
    empty = replace(plan, conversation=replace(plan.conversation, history=[]))
    ref = weakref.ref(provider)

    def renew() -> CLISession | None:
        alive = ref()
        return None if alive is None else alive._spawn(empty)

    return renew


def _traced(plan: _Plan) -> TracedRequest:
    """What the query's span says of its request."""
    return TracedRequest(
        mode=plan.mode,
        model=plan.model,
        max_tokens=plan.max_tokens,
        structured=plan.options.output_schema is not None,
        system=plan.system,
        history=plan.conversation.history,
        prompt=plan.conversation.prompt,
    )


def _notes(plan: _Plan) -> dict[str, str]:
    """What the finish part's `provider_details` says of how the request was sent."""
    if plan.thinking is None and plan.body.get("thinking") == {"type": "disabled"}:
        return {"thinking": "disabled: the API refuses a forced tool_choice with thinking"}
    return {}


def _thinking_config(thinking: Thinking | None) -> sdk.ThinkingConfig | None:
    if thinking is None:
        return None
    if thinking == "least":
        raise AssertionError("thinking='least' is resolved before a process starts")
    if thinking == "adaptive":
        return {"type": "adaptive"}
    if thinking == "disabled":
        return {"type": "disabled"}
    return {"type": "enabled", "budget_tokens": thinking}


def _model_entry(models: list[dict[str, Any]], model: str | None) -> dict[str, Any] | None:
    """The CLI's model-list entry of `model` (None: the CLI's default), by name or alias."""
    name = model or "default"
    return next((m for m in models if name in (m.get("value"), m.get("resolvedModel"))), None)


def _model_problem(plan: _Plan, models: list[dict[str, Any]]) -> None:
    """Refuse `thinking` / `effort` values the query's model cannot take, by the CLI's own model
    list (its `initialize` answer), before the prompt is sent: the CLI would quietly send
    something else (measured on 2.1.330: `effort` dropped, `thinking` left adaptive). A model
    the CLI does not list is passed on unchecked."""
    if plan.thinking is None and plan.effort is None:
        return
    entry = _model_entry(models, plan.model)
    if entry is None:
        return
    problems = []
    if plan.effort is not None:
        levels = entry.get("supportedEffortLevels") or []
        if not entry.get("supportsEffort") or plan.effort not in levels:
            problems.append(f"effort={plan.effort!r} (it takes: {', '.join(levels) or 'none'})")
    if plan.thinking == "disabled" and not entry.get("supportsThinkingOff"):
        problems.append("thinking='disabled' (it always thinks; a lower effort= thinks less)")
    elif plan.thinking == "adaptive" and not entry.get("supportsAdaptiveThinking"):
        problems.append("thinking='adaptive' (give it a token budget, thinking=N, instead)")
    elif isinstance(plan.thinking, int) and entry.get("supportsAdaptiveThinking"):
        problems.append(
            f"thinking={plan.thinking} (it thinks adaptively and takes no token budget; use "
            f"effort= instead)"
        )
    if problems:
        model = entry.get("resolvedModel") or plan.model or "default"
        raise UnsupportedRequestError(
            f"the model {model!r} cannot take {' and '.join(problems)}; the query was not sent"
        )


async def _defer_tool_call(
    _input: sdk.HookInput, _tool_use_id: str | None, _context: sdk.HookContext
) -> sdk.HookJSONOutput:
    """PreToolUse hook of single-turn mode: stop before any tool runs and hand the call back."""
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "defer"}}
