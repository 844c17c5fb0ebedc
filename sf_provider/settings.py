"""Provider settings."""

# No `from __future__ import annotations` here: pydantic would eval() the annotation strings of
# the model below at import (see sf_provider/types.py).

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["Effort", "ProviderSettings", "Thinking"]

#: How much effort the model spends (thinking depth, thoroughness), on models that take it;
#: the CLI's `--effort`, sent as `output_config.effort`.
Effort = Literal["low", "medium", "high", "xhigh", "max"]
#: The effort names frameworks use (OpenAI's `reasoning_effort`, LiteLLM's `max`, pydantic-ai's
#: `thinking` levels) -> the provider's `Effort`: `minimal` is below the CLI's lowest.
EFFORT_NAMES: dict[str, Effort] = {
    "minimal": "low",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "xhigh",
    "max": "max",
}

#: Extended thinking: `"adaptive"` (the model decides; current models), `"disabled"`, a token
#: budget of at least 1024 (models without adaptive thinking), or `"least"`: as little as the
#: model allows, by the CLI's model list: `"disabled"` where thinking can be turned off (and for
#: a model the CLI does not list), else the lowest effort level the model takes, else its
#: default. Sent as the request's `thinking` (and `output_config.effort` for `"least"`).
Thinking = Literal["adaptive", "disabled", "least"] | Annotated[int, Field(ge=1024)]


#: CLI flags `extra_args` may not set: those the provider or the SDK sets from typed settings
#: (an extra flag would silently win), and those that would give a query built-in tools,
#: permissions, settings, plugins, agents or MCP servers beyond the request's tools, and `bare`
#: (it sends the model only the first paragraph of each tool's description and skips the hook
#: single-turn mode stops on). (`no-session-persistence` only repeats what the provider sets;
#: `fallback-model` and `betas` are documented routes: tests/unit/test_options_coverage.py.)
_MANAGED_FLAGS = frozenset(
    {
        "bare",
        "model",
        "tools",
        "allowedTools",
        "allowed-tools",
        "disallowedTools",
        "disallowed-tools",
        "max-turns",
        "max-budget-usd",
        "system-prompt",
        "system-prompt-file",
        "mcp-config",
        "strict-mcp-config",
        "setting-sources",
        "settings",
        "permission-mode",
        "permission-prompt-tool",
        "dangerously-skip-permissions",
        "allow-dangerously-skip-permissions",
        "resume",
        "resume-session-at",
        "continue",
        "fork-session",
        "session-id",
        "output-format",
        "input-format",
        "json-schema",
        "print",
        "include-partial-messages",
        "plugin-dir",
        "agents",
        "max-thinking-tokens",
        "effort",
        "thinking",
    }
)


#: The CLI's environment variables a typed setting also sets: `env` may name one only when the
#: setting is left unset, since the two would otherwise silently disagree (the CLI's `--model`
#: flag wins over `ANTHROPIC_MODEL`, while `env`'s `CLAUDE_CODE_MAX_RETRIES` won over
#: `max_retries=`). A call's own option still overrides both.
_SETTING_VARIABLES: dict[str, tuple[str, ...]] = {
    "model": ("ANTHROPIC_MODEL",),
    "max_tokens": ("CLAUDE_CODE_MAX_OUTPUT_TOKENS",),
    "max_retries": ("CLAUDE_CODE_MAX_RETRIES",),
    "thinking": ("MAX_THINKING_TOKENS", "CLAUDE_CODE_DISABLE_THINKING"),
    "effort": ("CLAUDE_CODE_EFFORT_LEVEL",),
}


class ProviderSettings(BaseModel):
    """How `ClaudeAgentProvider` runs the Claude Code CLI.

    Every field has a working default; `sf_provider.testing.ScriptedMessagesAPI.settings()` builds
    one that points the CLI at a local scripted API.
    """

    # Errors name the field, not the input: `env` holds credentials.
    model_config = ConfigDict(
        extra="forbid", frozen=True, defer_build=True, hide_input_in_errors=True
    )

    model: str | None = Field(
        default=None, min_length=1, description="Model name passed to the CLI; None = CLI default."
    )
    system_prompt: str | None = Field(default=None, description="System prompt for every query.")
    max_turns: int = Field(default=10, ge=1, description="Model turns allowed in executor mode.")
    max_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Output token limit of each model call (the request's max_tokens, set "
        "through the CLI's CLAUDE_CODE_MAX_OUTPUT_TOKENS); None = the CLI's default for the "
        "model. A reply cut by it finishes with reason 'length'.",
    )
    thinking: Thinking | None = Field(
        default=None, description="Extended thinking (see `Thinking`); None = the model's default."
    )
    effort: Effort | None = Field(
        default=None, description="Effort level (see `Effort`); None = the model's default."
    )
    tool_timeout: float | None = Field(
        default=60.0,
        gt=0,
        description="Seconds one tool call (its safety gate and executor together) may take "
        "before it fails.",
    )
    max_retries: int = Field(
        default=2,
        ge=0,
        description="HTTP retries the CLI makes (CLAUDE_CODE_MAX_RETRIES). Left unset, a "
        "CLAUDE_CODE_MAX_RETRIES in env or in the environment holds, else 2; the CLI's own "
        "default is 10 retries over about three minutes.",
    )
    max_budget_usd: float | None = Field(
        default=None, gt=0, description="Cost limit of one query in USD (BudgetExceededError)."
    )
    timeout: float | None = Field(
        default=None, gt=0, description="Seconds the whole query may take; None = no limit."
    )
    idle_timeout: float | None = Field(
        default=300.0,
        gt=0,
        description="Seconds without any message from the CLI before it is stopped; keep it "
        "above the longest tool run. None = no limit.",
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        repr=False,  # it holds credentials: never in a log line or a traceback
        description="Extra environment for the CLI. A variable a typed setting also sets "
        "(ANTHROPIC_MODEL, CLAUDE_CODE_MAX_OUTPUT_TOKENS, CLAUDE_CODE_MAX_RETRIES, "
        "MAX_THINKING_TOKENS, CLAUDE_CODE_DISABLE_THINKING, CLAUDE_CODE_EFFORT_LEVEL) only with "
        "that setting left unset; both is a validation error. TMPDIR is where each query's temp "
        "dir is made; with isolate=True, HOME and CLAUDE_CONFIG_DIR say where a Claude login is "
        "copied from.",
    )
    cli_path: str | None = Field(default=None, description="CLI binary; None = the bundled one.")
    cwd: str | None = Field(
        default=None,
        min_length=1,
        description="Working directory of the CLI (a relative one from the current directory at "
        "query time); None = the current directory.",
    )
    isolate: bool = Field(
        default=True,
        description="Per-query temp HOME, CLAUDE_CONFIG_DIR and TMPDIR, removed afterwards.",
    )
    bridge_name: str = Field(
        default="sf",
        pattern=r"^[a-z][a-z0-9_]{0,15}$",
        description="MCP server name of the bridge.",
    )
    max_result_chars: int = Field(
        default=500_000,
        ge=1000,
        le=500_000,
        description="Longest tool result (text characters) sent to the model; longer ones are "
        "truncated with a marker. 500,000 is the most the Claude Code CLI passes on.",
    )
    max_buffer_size: int = Field(
        default=32 * 1024 * 1024, ge=1024, description="Largest CLI stdout line the SDK accepts."
    )
    warm_processes: int = Field(
        default=1,
        ge=0,
        le=64,
        description="Keep up to this many Claude Code CLI processes warm between queries with "
        "the same tools and options: an agent's next step continues the conversation on the "
        "process that answered the last one, and a new conversation skips the CLI start-up. "
        "Idle ones stop after warm_idle_timeout, with the event loop, when the provider is "
        "closed (`await provider.aclose()` or `async with`) or collected, and at exit. "
        "0 = a fresh process for every query.",
    )
    warm_idle_timeout: float | None = Field(
        default=60.0,
        gt=0,
        description="Seconds a warm process may wait unused before it is stopped; None = until "
        "the provider is closed.",
    )
    extra_args: dict[str, str | None] = Field(
        default_factory=dict,
        description="Extra CLI flags (name without dashes -> value or None). Flags the provider "
        "sets itself or that would widen what a query may do (`model`, `tools`, `max-turns`, "
        "`permission-mode`, `mcp-config`, `settings`, ...) are refused: use the typed settings.",
    )

    @model_validator(mode="after")
    def _one_source_per_setting(self) -> "ProviderSettings":
        for field, variables in _SETTING_VARIABLES.items():
            if field not in self.model_fields_set or getattr(self, field) is None:
                continue
            for name in variables:
                if name in self.env:
                    raise ValueError(  # names only: `env` values stay out of errors
                        f"{field} and env[{name!r}] both set the same thing; keep one (the "
                        f"typed setting, or the variable with {field} left unset)"
                    )
        return self

    @field_validator("extra_args")
    @classmethod
    def _own_flags_only(cls, flags: dict[str, str | None]) -> dict[str, str | None]:
        for name in flags:
            if name.startswith("-"):
                raise ValueError(f"extra_args names flags without dashes: {name.lstrip('-')!r}")
            if name == "bare":
                raise ValueError(
                    "extra_args cannot set --bare: bare mode sends the model only the first "
                    "paragraph of each tool's description and skips the hook single-turn mode "
                    "stops on; the provider runs the CLI without it"
                )
            if name in _MANAGED_FLAGS:
                raise ValueError(
                    f"extra_args cannot set --{name}: the provider sets it (or it would let a "
                    f"query do more than its tools); use the typed setting instead (model=, "
                    f"max_turns=, system_prompt=, thinking=, effort=, a call's betas=, ...)"
                )
        return flags
