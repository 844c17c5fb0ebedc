"""Warm and continued processes stay invisible when an application does what real ones do
between steps: rewrite history, start a new conversation after a chat with follow-ups, ...

Proven from the scripted API's request log, through the real CLI: each request of a warm or
continued query is the request a fresh process (`warm_processes=0`) sends for the same call.
"""

from __future__ import annotations

import base64
import json
import re
import struct
import zlib
from typing import Any

import pytest

from sf_provider import ClaudeAgentProvider, FunctionTool, GenerateResult
from sf_provider.testing import RecordedRequest, Reply, ScriptedMessagesAPI, reply, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
}
ROUTED = [FunctionTool(name="lookup", description="Look numbers up.", input_schema=SCHEMA)]


def body(request: RecordedRequest) -> str:
    """The request body as sent (key order kept), without `metadata` (it names the process
    and its session) and the CLI's own `role: system` entries in `messages` (its environment
    context, placed once per process: after the first user message of a live process, after
    the newest one on a resumed one; ADR 0004) with the `cache_control` marker it moves to the
    newest block then, and with the scripted API's running tool-call ids blanked."""
    sent = {k: v for k, v in request.body.items() if k != "metadata"}
    sent["messages"] = [m for m in request.messages if m.get("role") != "system"]
    text = re.sub(r"toolu_scripted_\d+", "toolu_ID", json.dumps(sent))
    return re.sub(r', "cache_control": \{"type": "ephemeral"(, "ttl": "[^"]*")?\}', "", text)


def process(result: GenerateResult) -> str:
    return str(result.provider_details["process"])


def _steps(request: RecordedRequest) -> Reply:
    """A call with two arguments first, then an answer naming the step."""
    step = sum(m.get("role") == "assistant" for m in request.messages)
    if step == 0:
        return reply(tool_use("lookup", {"a": 1, "b": 2}))
    return reply(text(f"answer {step}"))


@pytest.mark.parametrize(
    "edited",
    [{"b": 2, "a": 1}, {"a": True, "b": 2}],
    ids=["keys-reordered", "int-became-bool"],
)
async def test_a_history_edit_python_equality_cannot_see_takes_the_fresh_path(
    edited: dict[str, Any],
) -> None:
    """The app rewrote the call's input into a value Python finds equal (`{"b": 2, "a": 1}`,
    `True == 1`) but JSON does not: the model must be sent the app's history, as a fresh
    process sends it, not the conversation the live process holds."""
    sent: list[str] = []
    for warm in (1, 0):
        async with (
            ScriptedMessagesAPI(_steps) as api,
            ClaudeAgentProvider(api.settings(warm_processes=warm)) as provider,
        ):
            messages: list[dict[str, Any]] = [{"role": "user", "content": "Look them up."}]
            first = await provider.generate(messages, tools=ROUTED)
            turn = first.assistant_message()
            turn["content"][-1]["input"] = dict(edited)
            (call,) = first.tool_calls
            result = {"type": "tool-result", "tool_call_id": call.tool_call_id, "output": "3"}
            messages += [turn, {"role": "tool", "content": [result]}]
            second = await provider.generate(messages, tools=ROUTED)
        assert process(second) == "fresh"
        assert second.text == "answer 1"
        (use,) = api.requests[1].tool_uses()
        assert json.dumps(use["input"]) == json.dumps(edited)
        sent.append(body(api.requests[1]))
    assert sent[0] == sent[1]


async def test_a_new_conversation_after_a_chat_with_follow_ups_gets_the_warm_process() -> None:
    """A chat of three user turns on the one warm process, then a new conversation: it gets
    that process emptied (not a fresh start), and sends what a fresh process sends."""

    def model(request: RecordedRequest) -> Reply:
        turns = [m for m in request.messages if m.get("role") == "user"]
        return reply(text(f"reply to turn {len(turns)}"))

    async def chat(provider: ClaudeAgentProvider) -> list[GenerateResult]:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Hello."}]
        results = []
        for question in ("And then?", "Anything else?"):
            results.append(await provider.generate(messages))
            messages += [results[-1].assistant_message(), {"role": "user", "content": question}]
        results.append(await provider.generate(messages))
        results.append(await provider.generate("A new conversation."))
        return results

    async with (
        ScriptedMessagesAPI(model) as api,
        ClaudeAgentProvider(api.settings(warm_processes=1)) as provider,
    ):
        warm = await chat(provider)
    warm_requests = api.requests
    async with ScriptedMessagesAPI(model) as api:
        cold = await chat(ClaudeAgentProvider(api.settings(warm_processes=0)))
    assert [process(r) for r in warm] == ["fresh", "continued", "continued", "warm"]
    assert len({r.session_id for r in warm}) == 1
    assert [r.text for r in warm] == [r.text for r in cold]
    assert warm[-1].text == "reply to turn 1"  # it saw nothing of the chat
    assert body(warm_requests[-1]) == body(api.requests[-1])


def _png(width: int, height: int) -> str:
    """A black PNG of this size, base64."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    rows = (b"\x00" + bytes(3 * width)) * height
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
    return base64.b64encode(png + chunk(b"IEND", b"")).decode()


def _turn(request: RecordedRequest) -> Reply:
    return reply(text(f"turn {sum(m.get('role') == 'user' for m in request.messages)}"))


async def _chat_twice(first: Any, then: str) -> tuple[list[GenerateResult], ...]:
    """A two-step chat (`first`, the answer, `then`) on a warm process, then on fresh ones:
    the warm results, the fresh results, and the second API request of each as `body` reads
    it."""

    async def chat(provider: ClaudeAgentProvider) -> list[GenerateResult]:
        messages: list[dict[str, Any]] = [{"role": "user", "content": first}]
        answer = await provider.generate(messages)
        messages += [answer.assistant_message(), {"role": "user", "content": then}]
        return [answer, await provider.generate(messages)]

    async with (
        ScriptedMessagesAPI(_turn) as api,
        ClaudeAgentProvider(api.settings(warm_processes=1)) as provider,
    ):
        warm = await chat(provider)
    warm_request = body(api.requests[1])
    async with ScriptedMessagesAPI(_turn) as api:
        cold = await chat(ClaudeAgentProvider(api.settings(warm_processes=0)))
    assert warm_request == body(api.requests[1])
    return warm, cold


@pytest.mark.parametrize(("width", "height"), [(2400, 1800), (64, 48)], ids=["large", "small"])
async def test_an_image_the_cli_scales_down_is_never_continued(width: int, height: int) -> None:
    """The CLI scales a large image in a user message down (and adds a note of its original
    size) but replays a history's image as written: continuing would send the model the
    scaled image where the fresh path sends the original. Small images continue."""
    picture = {"type": "image", "data": _png(width, height), "media_type": "image/png"}
    warm, _ = await _chat_twice([{"type": "text", "text": "What is this?"}, picture], "Sure?")
    assert process(warm[1]) == ("fresh" if width > 2000 else "continued")


async def test_a_history_with_half_an_emoji_is_replayed_as_a_live_process_holds_it() -> None:
    """A client that cuts text by UTF-16 units (JavaScript's `slice`) sends half an emoji, a
    lone surrogate (`"\\ud83d"` in its JSON). The prompt reached the model, but a history
    holding it failed before its process started (`UnicodeEncodeError` writing the transcript):
    every step that took the fresh path. Now it is replayed as the live process holds it."""
    warm, cold = await _chat_twice("Cut short: \ud83d", "Go on.")
    assert [process(r) for r in warm] == ["fresh", "continued"]
    assert [process(r) for r in cold] == ["fresh", "fresh"]
    assert cold[1].text == "turn 2"
