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


def _log_in(config: Path, token: str = TOKEN) -> None:
    """The credentials file `claude` writes when a subscriber logs in (a token valid an hour)."""
    login = {
        "accessToken": token,
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


async def test_a_warm_process_is_not_reused_after_the_user_logs_in_again(no_login: Path) -> None:
    """A warm process holds the copy of the login it started with: once the credentials file
    changes, the next query gets a new process, which sends the new token."""
    _log_in(no_login)
    async with ScriptedMessagesAPI(lambda _request: reply(text("ok"))) as api:
        env = {k: v for k, v in api.settings().env.items() if k != "ANTHROPIC_API_KEY"}
        async with ClaudeAgentProvider(ProviderSettings(env=env)) as provider:
            processes = [(await provider.generate("hi")).provider_details["process"]]
            processes.append((await provider.generate("hi")).provider_details["process"])
            _log_in(no_login, token="sk-ant-oat01-logged-in-again")
            processes.append((await provider.generate("hi")).provider_details["process"])
    assert processes == ["fresh", "warm", "fresh"]
    tokens = [r.headers.get("authorization") for r in api.requests]
    assert tokens == [f"Bearer {TOKEN}"] * 2 + ["Bearer sk-ant-oat01-logged-in-again"]
