"""Node clients of the gateway: the Vercel AI SDK's default OpenAI provider, `openai(model)`,
which speaks the Responses API, with one tool and `stopWhen`. The real `ai` and `@ai-sdk/openai`
packages (pinned in tests/fixtures/node, installed by `make test` with `npm ci`) run
tests/fixtures/node/vercel_ai.mjs against the gateway on a loopback port, the real CLI behind it.
The script prints what it got and every request body it sent."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from conftest import serving
from test_gateway_responses import MODEL, process_of, weather_model

from sf_provider.gateway import GatewaySettings, create_app
from sf_provider.testing import RecordedRequest, Reply, ScriptedMessagesAPI, reply, text, tool_use

NODE = shutil.which("node")
PROJECT = Path(__file__).parents[1] / "fixtures" / "node"

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.cli,
    pytest.mark.skipif(
        NODE is None, reason="node is not installed: the Vercel AI SDK tests need Node 20 or later"
    ),
]


def checking_model(request: RecordedRequest) -> Reply:
    """Says it is checking as it calls get_weather, then answers from the result: the first
    answer has a message item, which the AI SDK sends back by reference."""
    if request.tool_results():
        return weather_model(request)
    return reply(text("Checking."), tool_use("get_weather", {"city": "Paris"}))


async def run_script(base_url: str, *, stream: bool, store: bool = True) -> dict[str, Any]:
    """Run vercel_ai.mjs against the gateway at `base_url`; what it printed."""
    assert NODE is not None
    if not (PROJECT / "node_modules").is_dir():
        pytest.fail(
            f"{PROJECT}/node_modules is missing: run `npm ci --prefix {PROJECT}` (`make test` "
            f"does it where npm is installed)"
        )
    env = {
        **os.environ,
        "SF_BASE_URL": f"{base_url}/v1",
        "SF_API_KEY": "sk-test",
        "SF_MODEL": MODEL,
        **({"SF_STREAM": "1"} if stream else {}),
        **({} if store else {"SF_NO_STORE": "1"}),
    }
    done = await anyio.run_process([NODE, "vercel_ai.mjs"], cwd=PROJECT, env=env, check=False)
    assert done.returncode == 0, done.stderr.decode()[-4000:]
    printed: dict[str, Any] = json.loads(done.stdout)
    return printed


@pytest.mark.parametrize("stream", [False, True], ids=["generateText", "streamText"])
async def test_the_vercel_ai_sdk_default_provider_runs_a_tool_until_the_answer(
    stream: bool,
) -> None:
    """`openai(model)` stores its responses (store is on) and sends the first answer's message
    back as an `item_reference`: the gateway resolves it to the stored item, so the model gets
    the whole conversation, and the warm process that answered continues it."""
    async with (
        ScriptedMessagesAPI(checking_model) as api,
        serving(create_app(GatewaySettings(provider=api.settings()))) as base_url,
    ):
        got = await run_script(base_url, stream=stream)
        async with httpx.AsyncClient(timeout=60) as http:
            first = await http.get(
                f"{base_url}/v1/responses/{got['responseIds'][0]}",
                headers={"authorization": "Bearer sk-test"},
            )
    assert got["text"] == "Paris: sunny."
    assert got["runs"] == ["Paris"]
    assert got["finishReasons"] == ["tool-calls", "stop"]
    assert [s["url"].rsplit("/v1", 1)[1] for s in got["sent"]] == ["/responses"] * 2
    message = first.json()["output"][0]
    assert (message["type"], message["content"][0]["text"]) == ("message", "Checking.")
    references = [i for i in got["sent"][1]["body"]["input"] if i.get("type") == "item_reference"]
    assert references == [{"type": "item_reference", "id": message["id"]}]
    # The reference reached the model as the message it names, before the call and its result.
    asked, answered = api.requests
    assert [m["content"][0].get("text") for m in answered.messages if m["role"] == "assistant"] == [
        "Checking."
    ]
    assert answered.tool_result_texts() == ["sunny"]
    assert "You answer weather questions." in json.dumps(asked.body["system"])
    assert process_of(asked) == process_of(answered), "the second step continued the first"


async def test_the_vercel_ai_sdk_with_store_off_sends_every_item_whole() -> None:
    """`providerOptions: { openai: { store: false } }`: nothing is stored, no item is sent by
    reference, and the model gets the same conversation."""
    async with (
        ScriptedMessagesAPI(checking_model) as api,
        serving(create_app(GatewaySettings(provider=api.settings()))) as base_url,
    ):
        got = await run_script(base_url, stream=False, store=False)
        async with httpx.AsyncClient(timeout=60) as http:
            first = await http.get(
                f"{base_url}/v1/responses/{got['responseIds'][0]}",
                headers={"authorization": "Bearer sk-test"},
            )
    assert got["text"] == "Paris: sunny."
    assert [s["body"]["store"] for s in got["sent"]] == [False, False]
    kinds = [i.get("type", "message") for i in got["sent"][1]["body"]["input"]]
    assert "item_reference" not in kinds
    assert first.status_code == 404
    asked, answered = api.requests
    assert [m["content"][0].get("text") for m in answered.messages if m["role"] == "assistant"] == [
        "Checking."
    ]
    assert process_of(asked) == process_of(answered)
