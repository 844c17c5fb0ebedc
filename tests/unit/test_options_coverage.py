"""Every option of `claude_agent_sdk.ClaudeAgentOptions` is decided, once: the provider sets it
(SET), a user reaches it through `ProviderSettings` (EXPOSED), or it is deliberately left out
(NOT_EXPOSED, with why). An SDK release that adds an option fails here until it is decided.

`ProviderSettings.extra_args` passes any CLI flag, so most options could be forced through it;
EXPOSED names the ones that are a supported way to tune a query, each with its route (proven
below to reach the SDK options). No CLI runs here: the options are built and read.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import claude_agent_sdk
import pytest

from sf_provider import ClaudeAgentProvider, FunctionTool, ProviderSettings, find_cli
from sf_provider.provider import CallOptions

#: Set by `ClaudeAgentProvider._sdk_options` (sf_provider/provider.py).
SET = frozenset(
    {
        "tools",  # [] : no built-in tool
        "allowed_tools",  # the bridge tools, auto-approved
        "mcp_servers",  # the per-query bridge
        "setting_sources",  # [] : no user or project settings, CLAUDE.md or hooks from disk
        "system_prompt",
        "model",
        "max_turns",
        "max_budget_usd",
        "output_format",  # CallOptions.output_schema
        "include_partial_messages",  # the stream's deltas
        "hooks",  # single-turn mode's PreToolUse defer
        "env",
        "cwd",
        "resume",  # a request's history, written as a transcript (ADR 0001)
        "resume_session_at",
        "cli_path",
        "max_buffer_size",
        "stderr",  # its tail goes into errors
        "extra_args",
        "thinking",
        "effort",
    }
)

#: Reached through ProviderSettings: {option: (route, an example value)}.
EXPOSED: dict[str, tuple[str, dict[str, str]]] = {
    "fallback_model": ("extra_args", {"fallback-model": "claude-haiku-4-5"}),
    "betas": ("extra_args", {"betas": "context-1m-2025-08-07"}),
    "task_budget": ("extra_args", {"task-budget": "20000"}),
    "client_app": ("env", {"CLAUDE_AGENT_SDK_CLIENT_APP": "my-app/1.0"}),
}

#: Deliberately not exposed: {option: why}.
NOT_EXPOSED = {
    "permission_mode": "bridge tools are auto-approved (allowed_tools) and no built-in tool runs: "
    "there is no permission to ask for; a mode could only widen what runs",
    "permission_prompt_tool_name": "no permission prompts (see permission_mode)",
    "can_use_tool": "bridge tools are auto-approved; ToolRegistry's gate decides, in the one "
    "invocation layer",
    "disallowed_tools": "tools=[] turns every built-in tool off; the model sees the bridge only",
    "strict_mcp_config": "setting_sources=[] already keeps every MCP config on disk out",
    "settings": "setting_sources=[] keeps settings files out so a query sees only its request; "
    "ProviderSettings.env sets the CLI's variables",
    "add_dirs": "no built-in file tool to give directories to",
    "sandbox": "sandboxes the CLI's Bash tool, which is off",
    "enable_file_checkpointing": "checkpoints edits by built-in file tools, which are off",
    "agents": "subagents would run the CLI's own tool loop beside the app's tools",
    "forward_subagent_text": "no subagents (see agents)",
    "skills": "skills come from disk and run built-in tools; both are off",
    "plugins": "plugins add commands, agents and MCP servers beyond the request's tools",
    "include_hook_events": "the only hook is the provider's own defer hook, not a stream part",
    "continue_conversation": "history comes from the request's messages, never the CLI's last "
    "session",
    "session_id": "sessions are per query and not persisted; a history's id is its transcript's",
    "fork_session": "each history is written afresh for its query: nothing is shared to fork",
    "resume_drops_turn": "resume_session_at points at the history's last entry: no turn is dropped",
    "session_store": "sessions are not persisted (no-session-persistence); history is replayed "
    "from the request (ADR 0001)",
    "session_store_flush": "only with session_store",
    "load_timeout_ms": "only with session_store",
    "verbatim_prompts": "with tools=[] the CLI (2.1.330, measured) sends an `@/path` in a prompt "
    "as text, reading no file; prompts already go out as written",
    "max_thinking_tokens": "deprecated by the SDK for thinking, which the provider sets",
    "debug_stderr": "deprecated by the SDK for stderr, which the provider sets",
    "user": "running the CLI as another OS user is the deployment's concern: run the app so",
}


def classification_problems(
    options: type,
    set_: frozenset[str] = SET,
    exposed: Mapping[str, object] = EXPOSED,
    not_exposed: Mapping[str, str] = NOT_EXPOSED,
) -> list[str]:
    """What is wrong with the classification of the dataclass `options`' fields."""
    fields = [f.name for f in dataclasses.fields(options)]
    listed = Counter([*set_, *exposed, *not_exposed])
    problems = [
        f"ClaudeAgentOptions.{name} is a new SDK option: decide it in "
        f"tests/unit/test_options_coverage.py (SET when ClaudeAgentProvider._sdk_options sets "
        f"it, EXPOSED with the route a user reaches it by, or NOT_EXPOSED with why not)"
        for name in fields
        if name not in listed
    ]
    problems += [
        f"{name} is in more than one of SET, EXPOSED and NOT_EXPOSED"
        for name, count in listed.items()
        if count > 1
    ]
    problems += [
        f"{name} is no longer a ClaudeAgentOptions field: unlist it, and drop what the provider "
        f"does with it"
        for name in sorted(listed)
        if name not in fields
    ]
    return problems


def test_every_sdk_option_is_decided_exactly_once() -> None:
    problems = classification_problems(claude_agent_sdk.ClaudeAgentOptions)

    assert not problems, "\n".join(problems)


def test_a_new_sdk_option_is_reported() -> None:
    newer = dataclasses.make_dataclass(
        "ClaudeAgentOptions",
        [("auto_compact_threshold", int, dataclasses.field(default=0))],
        bases=(claude_agent_sdk.ClaudeAgentOptions,),
    )

    assert classification_problems(newer) == [
        "ClaudeAgentOptions.auto_compact_threshold is a new SDK option: decide it in "
        "tests/unit/test_options_coverage.py (SET when ClaudeAgentProvider._sdk_options sets it, "
        "EXPOSED with the route a user reaches it by, or NOT_EXPOSED with why not)"
    ]


def test_a_removed_or_twice_decided_sdk_option_is_reported() -> None:
    older = dataclasses.make_dataclass(
        "ClaudeAgentOptions",
        [
            (f.name, Any, dataclasses.field(default=None))
            for f in dataclasses.fields(claude_agent_sdk.ClaudeAgentOptions)
            if f.name != "fork_session"
        ],
    )

    assert classification_problems(older, not_exposed={**NOT_EXPOSED, "model": "twice"}) == [
        "model is in more than one of SET, EXPOSED and NOT_EXPOSED",
        "fork_session is no longer a ClaudeAgentOptions field: unlist it, and drop what the "
        "provider does with it",
    ]


# -- the options the provider really builds (no CLI starts)

_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def _settings(**extra: Any) -> ProviderSettings:
    cli = find_cli()
    assert cli.path is not None
    values = {
        "model": "claude-sonnet-4-5",
        "system_prompt": "Be brief.",
        "max_budget_usd": 0.5,
        "cli_path": cli.path,
        "cwd": str(Path.cwd()),
        "env": {"ANTHROPIC_API_KEY": "test-key"},
        "thinking": "adaptive",
        "effort": "high",
        **extra,
    }
    return ProviderSettings(**values)


def _built(
    provider: ClaudeAgentProvider,
    workdir: Path,
    messages: Any,
    tools: list[FunctionTool],
    **call_options: Any,
) -> claude_agent_sdk.ClaudeAgentOptions:
    plan = provider._prepare(messages, tools, CallOptions(**call_options))
    workdir.mkdir()
    return provider._sdk_options(plan, workdir, deque())


def _plans(tmp_path: Path) -> Iterator[tuple[str, claude_agent_sdk.ClaudeAgentOptions]]:
    """An executor query, a single-turn one asking for an object, one with history."""
    provider = ClaudeAgentProvider(_settings())
    counted = FunctionTool(name="count", input_schema=_SCHEMA, executor=lambda _: "1")
    asked = FunctionTool(name="ask", input_schema=_SCHEMA)
    history = [
        {"role": "user", "content": "Count."},
        {"role": "assistant", "content": "One."},
        {"role": "user", "content": "Again."},
    ]
    yield "executor", _built(provider, tmp_path / "executor", "Count.", [counted])
    yield (
        "single-turn",
        _built(provider, tmp_path / "single", "Ask.", [asked], output_schema=_SCHEMA),
    )
    yield "history", _built(provider, tmp_path / "history", history, [counted])


def _default(field: dataclasses.Field[Any]) -> Any:
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def test_sdk_options_passes_exactly_the_set_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    passed: set[str] = set()
    real: Callable[..., claude_agent_sdk.ClaudeAgentOptions] = claude_agent_sdk.ClaudeAgentOptions

    def recording(**options: Any) -> claude_agent_sdk.ClaudeAgentOptions:
        passed.update(options)
        return real(**options)

    monkeypatch.setattr(claude_agent_sdk, "ClaudeAgentOptions", recording)
    list(_plans(tmp_path))

    assert sorted(passed - SET) == [], "set by _sdk_options but not listed in SET"
    assert sorted(SET - passed) == [], "listed in SET but not set by _sdk_options"


def test_each_set_option_leaves_its_default_in_one_of_the_plans(tmp_path: Path) -> None:
    built = list(_plans(tmp_path))
    fields = {f.name: f for f in dataclasses.fields(claude_agent_sdk.ClaudeAgentOptions)}

    left = [
        name
        for name in sorted(SET)
        if all(getattr(options, name) == _default(fields[name]) for _, options in built)
    ]
    changed = [
        f"{name} in the {plan} plan"
        for plan, options in built
        for name in sorted(set(fields) - SET)
        if getattr(options, name) != _default(fields[name])
    ]

    assert left == [], "SET options at their SDK default in every plan"
    assert changed == [], "options not in SET that _sdk_options changed"


@pytest.mark.parametrize("option", sorted(EXPOSED))
def test_each_exposed_option_reaches_the_sdk_through_provider_settings(
    option: str, tmp_path: Path
) -> None:
    route, example = EXPOSED[option]  # extra_args or env
    settings = _settings(**{route: {**getattr(_settings(), route), **example}})

    options = _built(ClaudeAgentProvider(settings), tmp_path / "w", "Hi.", [])

    assert example.items() <= getattr(options, route).items()


@pytest.mark.parametrize(
    "flags",
    [
        {"model": "claude-haiku-5-5"},  # would silently win over ProviderSettings.model
        {"tools": "Bash"},  # would give the model a built-in shell
        {"allowedTools": "Bash"},
        {"permission-mode": "bypassPermissions"},
        {"mcp-config": "{}"},
        {"settings": "{}"},
        {"max-turns": "5"},
        {"--debug": None},  # names go without dashes
        {"bare": None},  # would cut tool descriptions to their first paragraph, skip hooks
    ],
    ids=lambda flags: next(iter(flags)),
)
def test_extra_args_cannot_set_what_the_provider_sets_or_widen_a_query(
    flags: dict[str, str | None],
) -> None:
    with pytest.raises(ValueError, match="extra_args"):
        ProviderSettings(extra_args=flags)


@pytest.mark.parametrize(
    ("setting", "variable"),
    [
        ({"model": "claude-haiku-5-5"}, "ANTHROPIC_MODEL"),
        ({"max_tokens": 50}, "CLAUDE_CODE_MAX_OUTPUT_TOKENS"),
        ({"max_retries": 3}, "CLAUDE_CODE_MAX_RETRIES"),
        ({"max_retries": 2}, "CLAUDE_CODE_MAX_RETRIES"),  # the default's value, said explicitly
        ({"thinking": "adaptive"}, "MAX_THINKING_TOKENS"),
        ({"thinking": "adaptive"}, "CLAUDE_CODE_DISABLE_THINKING"),
        ({"effort": "low"}, "CLAUDE_CODE_EFFORT_LEVEL"),
    ],
    ids=lambda value: value if isinstance(value, str) else next(iter(value)),
)
def test_a_setting_and_the_env_variable_that_sets_the_same_thing_are_refused_together(
    setting: dict[str, Any], variable: str
) -> None:
    """One would silently win (measured: the CLI's --model over ANTHROPIC_MODEL, env's
    CLAUDE_CODE_MAX_RETRIES over max_retries=), so both is an error naming both."""
    (field,) = setting
    with pytest.raises(ValueError, match=rf"{field} and env\['{variable}'\]") as info:
        ProviderSettings(**setting, env={variable: "SEEN-1"})
    assert "SEEN" not in str(info.value), "names only: env values stay out of errors"
    # Either alone is fine; an explicit None is the same as unset.
    assert ProviderSettings(**setting).env == {}
    assert ProviderSettings(env={variable: "1"}).env == {variable: "1"}
    if field != "max_retries":
        assert ProviderSettings(**{field: None}, env={variable: "1"}).env == {variable: "1"}


def test_settings_never_show_their_environment_in_a_repr_or_an_error() -> None:
    """`env` holds credentials: `repr()` printed them, and a validation error quoted the input
    (its last characters: the end of a key)."""
    secret = "sk-ant-api03-SECRET-TAIL"
    settings = ProviderSettings(env={"ANTHROPIC_API_KEY": secret})
    assert secret not in repr(settings) and secret not in str(settings)
    from sf_provider.gateway import GatewaySettings

    assert secret not in repr(GatewaySettings(provider=settings))
    for bad in ({"model": "m", "env": {"ANTHROPIC_MODEL": "x", "KEY": secret}},
                {"max_turns": 0, "env": {"KEY": secret}}):  # fmt: skip
        with pytest.raises(ValueError) as info:
            ProviderSettings(**bad)
        assert "TAIL" not in str(info.value)
