"""`CallOptions`: the per-call options of `generate` / `stream`, as every front door checks them.

Apart from the message types of `sf_provider._request` (which re-exports these), so that importing
the provider builds only this model: the message types are imported when the first request's
messages are read.
"""

# No `from __future__ import annotations` here: pydantic would eval() the annotation strings of
# the model below at import (see sf_provider/types.py).

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    FiniteFloat,
    Strict,
    StrictInt,
    StringConstraints,
    ValidationError,
    field_validator,
)

from ._tool_choice import ToolChoice
from .errors import UnsupportedRequestError
from .settings import Effort, Thinking

__all__ = ["CallOptions", "call_options"]

#: A sampling number: any finite number, refused (by the API, not here) as the model decides.
_Sampling = Annotated[FiniteFloat, Strict()]


class CallOptions(BaseModel):
    """Per-call options of `generate` / `stream`; each overrides the provider's settings.

    - `mode`: `auto` runs executor mode when every exposed tool has an executor and single-turn
      mode otherwise; `executor` / `single-turn` force one.
    The options that shape the Messages API request go into it as written (through the CLI's
    `CLAUDE_CODE_EXTRA_BODY`; ADR 0009), so the model and API version decide what they take and
    their refusal comes back as `UnsupportedSettingError`:

    - `tool_choice` (see `ToolChoice`): `required` is sent as `{"type": "any"}`, a named tool as
      `{"type": "tool", "name": ...}`, with thinking turned off for that call (the API refuses
      forced tool use with thinking; `provider_details["thinking"]` says so, and an explicit
      thinking setting other than `disabled` is refused before any call). A forced choice runs
      single-turn only: in executor mode the CLI would send it on every turn and loop, so it is
      refused with `UnsupportedRequestError`. A reply without the call still raises
      `ToolChoiceViolationError`. `none` exposes no tool; when the messages hold tool calls or
      results (the API refuses those without tool definitions) the tools stay defined, the
      query runs single-turn with `{"type": "none"}`, and a reply with a call raises
      `ToolChoiceViolationError`.
    - `parallel_tool_calls=False`: `disable_parallel_tool_use` in the tool choice (at most one
      call per model turn).
    - `stop_sequences`: sent as `stop_sequences`; an answer that ends at one has the finish
      reason `stop` and names it in `provider_details["stop_sequence"]`. Not with
      `output_schema` (the answer is the whole object).
    - `temperature`, `top_p`, `top_k`: sent when set. Newer models and API versions refuse them
      (`UnsupportedSettingError` names the setting and the API's message).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    model: str | None = Field(default=None, min_length=1)
    system_prompt: str | None = None
    max_turns: int | None = Field(default=None, ge=1)
    max_budget_usd: float | None = Field(default=None, gt=0)
    tool_timeout: float | None = Field(default=None, gt=0)
    max_tokens: int | None = Field(default=None, ge=1, description="See ProviderSettings.")
    thinking: Thinking | None = Field(default=None, description="See ProviderSettings.")
    effort: Effort | None = Field(default=None, description="See ProviderSettings.")
    timeout: float | None = Field(default=None, gt=0, description="See ProviderSettings.")
    max_retries: int | None = Field(default=None, ge=0, description="See ProviderSettings.")
    mode: Literal["auto", "executor", "single-turn"] = "auto"
    tool_choice: ToolChoice = "auto"
    betas: list[Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9.-]*$")]] = Field(
        default_factory=list,
        description="API betas for this call, added to the request's anthropic-beta header "
        "(through the CLI's ANTHROPIC_BETAS) next to the ones the CLI sends itself.",
    )
    output_schema: dict[str, Any] | None = Field(
        default=None,
        description="JSON Schema of the object the answer must be (see structured_output).",
    )
    tool_names: list[str] | None = Field(
        default=None, description="Expose only these registry tools (one workflow step)."
    )
    groups: list[str] | None = Field(default=None, description="Expose only these registry groups.")
    require: list[str] = Field(
        default_factory=list, description="Tools the request needs; checked before dispatch."
    )
    stop_sequences: list[str] = Field(
        default_factory=list,
        description="The answer ends before the first of these the model writes (see above).",
    )
    parallel_tool_calls: bool = Field(
        default=True, description="Whether a model turn may call several tools (see above)."
    )
    temperature: _Sampling | None = Field(default=None, description="Sent as written.")
    top_p: _Sampling | None = Field(default=None, description="Sent as written.")
    top_k: StrictInt | None = Field(default=None, description="Sent as written.")
    partition: str | None = Field(
        default=None,
        min_length=1,
        description="Whose call this is (a tenant, a user): warm processes are shared, and "
        "conversations continued, only between calls of the same partition, so one tenant's "
        "conversation is never continued for another (whose speed would tell them it was "
        "held). The gateway sets it to a hash of the API key. Never sent to the model.",
    )

    @field_validator("stop_sequences")
    @classmethod
    def _distinct_stops(cls, stops: list[str]) -> list[str]:
        if not all(stops):
            raise ValueError("a stop sequence must not be empty")
        return list(dict.fromkeys(stops))


def call_options(options: Mapping[str, Any]) -> CallOptions:
    """`CallOptions` from keyword options; invalid ones raise `UnsupportedRequestError`."""
    try:
        return CallOptions(**options)
    except ValidationError as exc:
        raise UnsupportedRequestError(f"invalid call options: {exc}") from None
