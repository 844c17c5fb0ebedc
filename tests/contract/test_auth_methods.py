"""Every way of authenticating the capability check accepts runs both modes on the real CLI.

The CLI's bare mode (`--bare`, a faster start-up) reads no Claude login: with a subscription's
OAuth token (`CLAUDE_CODE_OAUTH_TOKEN`, or the credentials file `claude` writes at login) it
answers "Not logged in" without calling the API. Executor mode used to run bare always, so
subscription users could run single-turn queries but no tool loop.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from sf_provider import ClaudeAgentProvider, FunctionTool, ProviderSettings
from sf_provider.capabilities import check_auth
from sf_provider.testing import RecordedRequest, Reply, ScriptedMessagesAPI, reply, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

TOKEN = "sk-ant-oat01-scripted-offline"


def _log_in(config: Path) -> None:
    """The credentials file `claude` writes when a subscriber logs in (a token valid an hour)."""
    login = {
        "accessToken": TOKEN,
        "refreshToken": "sk-ant-ort01-scripted-offline",
        "expiresAt": int(time.time() * 1000) + 3_600_000,
        "scopes": ["user:inference", "user:profile"],
        "subscriptionType": "max",
    }
    (config / ".credentials.json").write_text(json.dumps({"claudeAiOauth": login}))


def weather_model(request: RecordedRequest) -> Reply:
    if not request.tool_results():
        return reply(tool_use("get_weather", {"city": "Paris"}))
    return reply(text(f"Paris: {request.results()[0].text}."))


async def _sunny(args: dict[str, Any]) -> str:
    return "sunny"


@pytest.mark.parametrize("method", ["api-key", "auth-token", "oauth-token", "credentials-file"])
@pytest.mark.parametrize("mode", ["executor", "single-turn"])
async def test_each_authentication_method_runs_each_mode(
    method: str, mode: str, no_login: Path
) -> None:
    executor = _sunny if mode == "executor" else None
    tool = FunctionTool(
        name="get_weather",
        description="Current weather for a city.",
        input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
        executor=executor,
    )
    async with ScriptedMessagesAPI(weather_model) as api:
        env = {k: v for k, v in api.settings().env.items() if k != "ANTHROPIC_API_KEY"}
        if method == "api-key":
            env["ANTHROPIC_API_KEY"] = TOKEN
        elif method == "auth-token":
            env["ANTHROPIC_AUTH_TOKEN"] = TOKEN
        elif method == "oauth-token":
            env["CLAUDE_CODE_OAUTH_TOKEN"] = TOKEN
        else:
            _log_in(no_login)
        settings = ProviderSettings(env=env, warm_processes=0)
        assert check_auth(settings).method == method
        result = await ClaudeAgentProvider(settings).generate("Weather?", tools=[tool])
    if mode == "executor":
        assert result.text == "Paris: sunny."
        assert len(api.requests) == 2
    else:
        assert [c.tool_name for c in result.tool_calls] == ["get_weather"]
        assert len(api.requests) == 1
    headers = api.requests[0].headers
    if method == "api-key":
        assert headers.get("x-api-key") == TOKEN
    else:
        assert headers.get("authorization") == f"Bearer {TOKEN}"
