"""What this suite proves about requests holds for a CLI talking to Anthropic's own API.

The scripted Messages API is a custom `ANTHROPIC_BASE_URL`, and the CLI shapes its requests
differently for a custom endpoint than for `api.anthropic.com` (docs/adr/0006: betas, headers,
the billing header, a `diagnostics` field). Everything else in the suite sees the custom shape.
Here each query runs twice, once as is and once with the CLI told to treat the endpoint as
first-party (`_CLAUDE_CODE_ASSUME_FIRST_PARTY_BASE_URL`, an internal switch of the CLI, used
only in this test), and what the provider controls must come out the same: the model, the
tools and their schemas, the system prompt, the messages, the output limit and thinking.

Measured on CLI 2.1.330 against a true first-party run (api.anthropic.com mapped to 127.0.0.1,
a TLS terminator, `NODE_EXTRA_CA_CERTS`): the switch gives the first-party request but for one
beta and the CLI's remote policy requests; tools, system prompt and messages were identical.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from sf_provider import ClaudeAgentProvider, FunctionTool
from sf_provider.testing import RecordedRequest, ScriptedMessagesAPI, reply, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

FIRST_PARTY = {"_CLAUDE_CODE_ASSUME_FIRST_PARTY_BASE_URL": "1"}

WEATHER = FunctionTool(
    "get_weather",
    "Current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
CLOCK = FunctionTool(
    "get_time",
    "Current time in a time zone.",
    {"type": "object", "properties": {"zone": {"type": "string"}}},
)

#: The request body fields the provider decides (the rest is the CLI's own business).
CONTROLLED = ("model", "max_tokens", "thinking", "output_config", "tool_choice", "messages")


def controlled(request: RecordedRequest) -> dict[str, Any]:
    body = request.body
    system = body.get("system")
    blocks = system if isinstance(system, list) else [{"text": system}]
    return {
        **{key: body.get(key) for key in CONTROLLED},
        "tools": [(t["name"], t.get("description"), t.get("input_schema")) for t in body["tools"]],
        # The first block is the CLI's billing header: per request, and not the provider's.
        "system": [b.get("text") for b in blocks if "x-anthropic-billing-header" not in str(b)],
    }


async def run(mode: str, env: dict[str, str]) -> list[RecordedRequest]:
    if mode == "executor":
        tools = [
            t.model_copy(update={"executor": lambda arguments: "sunny"}) for t in (WEATHER, CLOCK)
        ]
        script = [reply(tool_use("get_weather", {"city": "Paris"})), reply(text("Sunny."))]
    else:
        tools = [WEATHER, CLOCK]
        script = [reply(tool_use("get_weather", {"city": "Paris"}))]
    async with ScriptedMessagesAPI(script) as api:
        settings = api.settings(
            model="claude-sonnet-5-5", max_tokens=777, effort="high", warm_processes=0, env=env
        )
        provider = ClaudeAgentProvider(settings)
        await provider.generate(
            "Weather in Paris?", tools=tools, mode=mode, system_prompt="Be brief."
        )
    assert not api.errors
    return api.requests


async def test_what_the_provider_controls_is_the_same_in_a_first_party_request() -> None:
    # Told it is first-party, the CLI first tries Anthropic's remote settings (unreachable here:
    # about 18 s of retries before it starts), so the runs go side by side.
    runs: dict[tuple[str, bool], list[RecordedRequest]] = {}

    async def one(mode: str, first_party: bool) -> None:
        runs[mode, first_party] = await run(mode, FIRST_PARTY if first_party else {})

    async with anyio.create_task_group() as group:
        for mode in ("single-turn", "executor"):
            for first_party in (False, True):
                group.start_soon(one, mode, first_party)

    for mode in ("single-turn", "executor"):
        custom, first_party = runs[mode, False], runs[mode, True]
        # The switch took effect: the CLI sent another set of betas.
        assert custom[0].headers["anthropic-beta"] != first_party[0].headers["anthropic-beta"]
        assert [controlled(r) for r in first_party] == [controlled(r) for r in custom]
        tools = controlled(first_party[0])["tools"]
        assert sorted(name for name, *_ in tools) == ["mcp__sf__get_time", "mcp__sf__get_weather"]
        assert first_party[0].body["max_tokens"] == 777
