"""`ClaudeAgentProvider`: Claude through the Agent SDK and the Claude Code CLI, with your tools."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import deque
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import claude_agent_sdk as sdk
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ._bridge import bridge_tool_name, build_bridge_server
from ._mapping import PartMapper, ResultCollector
from ._messages import Conversation, MessagesInput, convert_messages
from .errors import (
    APIError,
    AuthenticationError,
    CLINotFoundError,
    MaxTurnsError,
    OverloadedError,
    ProcessDiedError,
    ProviderError,
    RateLimitError,
    UnsupportedRequestError,
)
from .settings import ProviderSettings
from .tools import FunctionTool, validate_tool_set
from .types import ErrorPart, GenerateResult, Mode, StreamPart, StreamStartPart

__all__ = ["CallOptions", "ClaudeAgentProvider"]

_STDERR_TAIL_LINES = 40


class CallOptions(BaseModel):
    """Per-call options of `generate` / `stream`; each overrides the provider's settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = None
    system_prompt: str | None = None
    max_turns: int | None = Field(default=None, ge=1)
    tool_timeout: float | None = Field(default=None, gt=0)


@dataclass(frozen=True)
class _Prepared:
    conversation: Conversation
    tools: list[FunctionTool]
    options: CallOptions
    mode: Mode


class ClaudeAgentProvider:
    """A model provider that runs Claude through the Claude Code CLI with the app's function tools.

    Each query gets its own in-process MCP server holding exactly that request's tools; built-in
    Claude tools are disabled and on-disk settings ignored. When every tool has an executor the
    CLI's loop runs them (**executor mode**).

    Example::

        provider = ClaudeAgentProvider(ProviderSettings(model="claude-sonnet-4-5"))
        result = await provider.generate("Weather in Paris?", tools=[weather])
        print(result.text, result.tool_calls, result.usage, result.cost_usd)
    """

    def __init__(self, settings: ProviderSettings | None = None) -> None:
        self.settings = settings or ProviderSettings()

    async def generate(
        self,
        messages: MessagesInput,
        *,
        tools: Sequence[FunctionTool] = (),
        **call_options: Any,
    ) -> GenerateResult:
        """Run one query to the end and return its text, tool calls, usage and cost.

        Built on `stream`: the same parts, folded into a `GenerateResult`. Raises the same errors.
        """
        collector = ResultCollector()
        async with aclosing(self.stream(messages, tools=tools, **call_options)) as parts:
            async for part in parts:
                collector.add(part)
        return collector.result()

    def stream(
        self,
        messages: MessagesInput,
        *,
        tools: Sequence[FunctionTool] = (),
        **call_options: Any,
    ) -> AsyncGenerator[StreamPart, None]:
        """Run one query, yielding stream parts as they happen.

        Bad input (messages, tools, options) raises here, before any process starts. Errors during
        the query come as an `ErrorPart` (and a finish part) and are then raised.
        """
        prepared = self._prepare(messages, tools, call_options)
        return self._run(prepared)

    # -- preparation (no process yet)

    def _prepare(
        self, messages: MessagesInput, tools: Sequence[FunctionTool], call_options: dict[str, Any]
    ) -> _Prepared:
        try:
            options = CallOptions(**call_options)
        except ValidationError as exc:
            raise UnsupportedRequestError(f"invalid call options: {exc}") from None
        conversation = convert_messages(messages)
        checked = validate_tool_set(tools, bridge_name=self.settings.bridge_name)
        missing = [t.name for t in checked if t.executor is None]
        if missing:
            raise UnsupportedRequestError(
                f"tools without an executor ({', '.join(missing)}) need single-turn mode, which "
                f"this version does not provide yet; give every tool an executor"
            )
        return _Prepared(conversation=conversation, tools=checked, options=options, mode="executor")

    def _sdk_options(
        self, prepared: _Prepared, workdir: Path, stderr: deque[str]
    ) -> sdk.ClaudeAgentOptions:
        settings = self.settings
        bridge = settings.bridge_name
        env = {"CLAUDE_CODE_MAX_RETRIES": str(settings.max_retries), **settings.env}
        if settings.isolate:
            env.update(_isolated_dirs(workdir, env))
        system = [
            s
            for s in (
                prepared.options.system_prompt or settings.system_prompt,
                *prepared.conversation.system,
            )
            if s
        ]
        timeout = prepared.options.tool_timeout or settings.tool_timeout
        servers: dict[str, Any] = {}
        if prepared.tools:
            servers[bridge] = build_bridge_server(bridge, prepared.tools, default_timeout=timeout)
        return sdk.ClaudeAgentOptions(
            tools=[],
            allowed_tools=[bridge_tool_name(bridge, t.name) for t in prepared.tools],
            mcp_servers=servers,
            setting_sources=[],
            system_prompt="\n\n".join(system) if system else None,
            model=prepared.options.model or settings.model,
            max_turns=prepared.options.max_turns or settings.max_turns,
            include_partial_messages=True,
            env=env,
            cwd=settings.cwd,
            cli_path=settings.cli_path,
            max_buffer_size=settings.max_buffer_size,
            stderr=stderr.append,
            # bare: the API sees exactly the bridge tools (no DeferredToolPlaceholder); executor
            # mode needs no hooks, which bare mode disables.
            extra_args={"no-session-persistence": None, "bare": None, **settings.extra_args},
        )

    # -- the query

    async def _run(self, prepared: _Prepared) -> AsyncGenerator[StreamPart, None]:
        workdir = Path(tempfile.mkdtemp(prefix="sf-provider-"))
        stderr: deque[str] = deque(maxlen=_STDERR_TAIL_LINES)
        mapper = PartMapper(
            self.settings.bridge_name, provider_executed=prepared.mode == "executor"
        )
        collector = ResultCollector()
        max_turns = prepared.options.max_turns or self.settings.max_turns
        try:
            start = StreamStartPart(warnings=prepared.conversation.warnings, mode=prepared.mode)
            collector.add(start)
            yield start
            options = self._sdk_options(prepared, workdir, stderr)
            result: sdk.ResultMessage | None = None
            failure: ProviderError | None = None
            try:
                query = sdk.query(prompt=prepared.conversation.prompt, options=options)
                async with aclosing(cast(AsyncGenerator[Any, None], query)) as messages:
                    async for message in messages:
                        if isinstance(message, sdk.ResultMessage):
                            result = message
                            continue
                        for part in mapper.map(message):
                            collector.add(part)
                            yield part
            except sdk.ResultError:
                pass  # the ResultMessage before it says everything; handled below
            except sdk.CLINotFoundError as exc:
                failure = CLINotFoundError(
                    f"the Claude Code CLI was not found ({exc}); reinstall claude-agent-sdk, which "
                    f"bundles it, or set ProviderSettings.cli_path"
                )
            except sdk.ProcessError as exc:
                failure = _process_died(exc.exit_code, stderr)
            except sdk.CLIConnectionError as exc:
                failure = ProcessDiedError(
                    f"lost the connection to the Claude Code CLI: {exc}",
                    stderr="\n".join(stderr),
                )
            if failure is None and result is None:
                failure = _process_died(None, stderr)
            if failure is None and result is not None:
                finish = mapper.finish(result)
                failure = _result_failure(result, mapper, prepared.mode, max_turns, collector)
                if failure is None:
                    collector.add(finish)
                    yield finish
                    return
            assert failure is not None
            error = ErrorPart(error_type=type(failure).__name__, message=str(failure))
            collector.add(error)
            yield error
            if result is not None:
                finish = mapper.finish(result)
                if isinstance(failure, MaxTurnsError):
                    failure.partial = collector.result().model_copy(
                        update={
                            "finish_reason": finish.finish_reason,
                            "usage": finish.usage,
                            "cost_usd": finish.cost_usd,
                            "num_turns": finish.num_turns,
                            "session_id": finish.session_id,
                        }
                    )
                else:
                    finish = finish.model_copy(update={"finish_reason": "error"})
                yield finish
            raise failure
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


def _isolated_dirs(workdir: Path, env: dict[str, str]) -> dict[str, str]:
    """Per-query HOME, CLAUDE_CONFIG_DIR and TMPDIR, so nothing on disk leaks in or out.

    A logged-in user's credentials file is copied in when no API key or token is configured, so
    `--live` use with a Claude subscription keeps working.
    """
    dirs = {name: workdir / name for name in ("home", "config", "tmp")}
    for path in dirs.values():
        path.mkdir()
    has_key = any(
        env.get(k) or os.environ.get(k) for k in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
    )
    if not has_key:
        source = (
            Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")
            / ".credentials.json"
        )
        if source.is_file():
            shutil.copy2(source, dirs["config"] / ".credentials.json")
    return {
        "HOME": str(dirs["home"]),
        "CLAUDE_CONFIG_DIR": str(dirs["config"]),
        "TMPDIR": str(dirs["tmp"]),
    }


def _process_died(exit_code: int | None, stderr: deque[str]) -> ProcessDiedError:
    tail = "\n".join(stderr)
    return ProcessDiedError(
        f"the Claude Code CLI exited (exit code {exit_code}) before finishing the query"
        + (f"; its last output:\n{tail}" if tail else "; it printed nothing on stderr"),
        exit_code=exit_code,
        stderr=tail,
    )


def _result_failure(
    result: sdk.ResultMessage,
    mapper: PartMapper,
    mode: Mode,
    max_turns: int,
    collector: ResultCollector,
) -> ProviderError | None:
    """The error a finished query's result stands for, or None for a good result."""
    if result.subtype == "error_max_turns":
        if mode == "single-turn":
            return None
        return MaxTurnsError(
            f"the query used its {max_turns} model turn(s) without finishing; raise max_turns or "
            f"read the partial result on this error (.partial)",
            partial=collector.result(),
            max_turns=max_turns,
        )
    if not result.is_error:
        return None
    status = result.api_error_status
    detail = mapper.api_error_text or "; ".join(result.errors or []) or result.result or ""
    message = f"the Messages API failed (HTTP {status}): {detail}".strip()
    kind = mapper.api_error
    if status in (401, 403) or kind == "authentication_failed":
        return AuthenticationError(
            message + "; check ANTHROPIC_API_KEY / your Claude login",
            status=status,
            error_kind=kind,
            session_id=result.session_id,
        )
    if status == 429 or kind == "rate_limit":
        return RateLimitError(message, status=status, error_kind=kind, session_id=result.session_id)
    if status == 529:
        return OverloadedError(
            message, status=status, error_kind=kind, session_id=result.session_id
        )
    if status is None and not detail:
        detail = f"result subtype {result.subtype!r}"
        message = f"the query failed: {detail}"
    return APIError(message, status=status, error_kind=kind, session_id=result.session_id)
