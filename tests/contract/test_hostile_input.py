"""Hostile model output and tool schemas, through the real CLI (issue 13, items 3 and 4).

- A reply that starts with `{` is held while it may be a legacy envelope, at a cost linear in
  its length: each delta is looked at once, the whole reply parsed once.
- JSON nested deeper than the envelope parser's limit is the text it is, never a raw
  `RecursionError`.
- A tool schema with local `$ref`s works end to end: the model sees it and the arguments are
  validated against what the references point to. (Dangling, remote and too-deep schemas fail
  when the tool is built: tests/unit/test_tools.py.)
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import sf_provider._envelope as envelope_module
from sf_provider import ClaudeAgentProvider, FunctionTool, UnsupportedRequestError
from sf_provider._envelope import MAX_DEPTH
from sf_provider.testing import Reply, ScriptedMessagesAPI, reply, text, tool_use
from sf_provider.tools import ARGUMENT_DEPTH_LIMIT

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

WEATHER = FunctionTool(
    name="get_weather",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)


def nested_object(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


async def single_turn_text(answer: str, chunk_size: int = 8) -> tuple[Any, ScriptedMessagesAPI]:
    script = [Reply(content=[text(answer)], chunk_size=chunk_size)]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings())
        result = await provider.generate("Answer as JSON.", tools=[WEATHER])
    return result, api


# -- deep arguments in a native tool call


def nested_value(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize("mode", ["single-turn", "executor"])
async def test_a_tool_call_nested_deeper_than_the_limit_is_invalid_and_never_runs(
    mode: str,
) -> None:
    runs: list[Any] = []
    tool = WEATHER
    if mode == "executor":
        tool = WEATHER.model_copy(update={"executor": lambda arguments: runs.append(arguments)})
    arguments = {"city": nested_value(ARGUMENT_DEPTH_LIMIT + 50)}
    script = [reply(tool_use("get_weather", arguments)), reply(text("Sorry."))]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings())
        result = await provider.generate("Weather?", tools=[tool], mode=mode)

    (call,) = result.tool_calls
    assert (call.invalid, call.input) == (True, {})
    where = ("$.city" + ".a" * ARGUMENT_DEPTH_LIMIT)[:40]  # the path, cut to 40 characters
    assert call.invalid_reason == (
        f"{where}...: the arguments nest deeper than {ARGUMENT_DEPTH_LIMIT} levels"
    )
    json.loads(result.model_dump_json())  # whole, where the raw arguments could not be
    assert runs == []
    if mode == "executor":  # the model was told, and answered
        (sent,) = api.requests[1].results()
        assert sent.is_error and "nest deeper than" in sent.text
        assert result.text == "Sorry."


async def test_a_tool_call_nested_within_the_limit_is_a_valid_call() -> None:
    arguments = {"city": nested_value(ARGUMENT_DEPTH_LIMIT - 10)}
    async with ScriptedMessagesAPI([reply(tool_use("get_weather", arguments))]) as api:
        provider = ClaudeAgentProvider(api.settings())
        result = await provider.generate("Weather?", tools=[WEATHER])
    (call,) = result.tool_calls
    assert (call.invalid, call.input) == (True, arguments)  # a string was asked for
    assert call.invalid_reason.startswith("arguments violate the schema of 'get_weather'")
    json.loads(result.model_dump_json())


# -- deep JSON in a reply


@pytest.mark.parametrize(
    "answer",
    [
        nested_object(5000),
        '{"tool": "get_weather", "input": ' + nested_object(5000) + "}",
        "```json\n" + nested_object(5000) + "\n```",
        # Double-encoded: the arguments a JSON string holding the deep object (issue 31).
        json.dumps({"tool": "get_weather", "input": nested_object(5000)}),
    ],
    ids=["nested-object", "envelope-shaped", "fenced", "double-encoded"],
)
async def test_json_nested_5000_deep_is_text_in_single_turn(answer: str) -> None:
    result, api = await single_turn_text(answer, chunk_size=64)

    assert result.mode == "single-turn"
    assert (result.text, result.tool_calls, result.finish_reason) == (answer, [], "stop")
    assert len(api.requests) == 1 and not api.errors


async def test_an_envelope_nested_within_the_limit_is_still_a_call() -> None:
    arguments = {"city": "Paris", "extra": json.loads(nested_object(MAX_DEPTH - 3))}
    answer = json.dumps({"tool": "get_weather", "input": arguments})

    result, _ = await single_turn_text(answer, chunk_size=64)

    assert [(c.tool_name, c.input, c.invalid) for c in result.tool_calls] == [
        ("get_weather", arguments, False)
    ]
    assert (result.text, result.finish_reason) == ("", "tool-calls")


# -- holding a reply that starts with `{`


class Examined:
    """Counts the characters the envelope checks are handed, and how often the reply is parsed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.prefix_chars = 0
        self.prefix_checks = 0
        self.parsed_chars = 0
        self.parses = 0
        could_be, parse = envelope_module.could_be_envelope, envelope_module.parse_envelope

        def counted_could_be(prefix: str) -> bool:
            self.prefix_checks += 1
            self.prefix_chars += len(prefix)
            return could_be(prefix)

        def counted_parse(held: str) -> Any:
            self.parses += 1
            self.parsed_chars += len(held)
            return parse(held)

        monkeypatch.setattr(envelope_module, "could_be_envelope", counted_could_be)
        monkeypatch.setattr(envelope_module, "parse_envelope", counted_parse)  # read by _mapping


async def test_a_long_reply_starting_with_a_brace_is_held_in_linear_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = [{"id": i, "note": "x" * 40} for i in range(2000)]
    answer = json.dumps({"rows": rows})  # ~110 K chars: a JSON answer, not an envelope
    examined = Examined(monkeypatch)

    result, _ = await single_turn_text(answer, chunk_size=8)

    deltas = -(-len(answer) // 8)
    assert (result.text, result.tool_calls) == (answer, [])
    assert examined.prefix_checks >= deltas, "every delta went through the hold"
    # Each delta hands at most the reply's first three non-blank characters to the check (the
    # quadratic hold handed it everything held so far: ~760 M characters here).
    assert examined.prefix_chars <= 3 * examined.prefix_checks
    assert (examined.parses, examined.parsed_chars) == (1, len(answer))


# -- a schema with local references, end to end


SHIPPING = FunctionTool(
    name="ship",
    description="Ship a parcel.",
    input_schema={
        "type": "object",
        "$defs": {
            "address": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "zip": {"$ref": "#/$defs/zip"}},
                "required": ["city", "zip"],
            },
            "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
        },
        "properties": {"to": {"$ref": "#/$defs/address"}},
        "required": ["to"],
    },
)


async def test_a_tool_with_local_refs_validates_through_them_in_executor_mode() -> None:
    shipped: list[dict[str, Any]] = []
    tool = SHIPPING.model_copy(update={"executor": lambda args: shipped.append(args) or "ok"})
    good = {"to": {"city": "Paris", "zip": "75001"}}
    bad = {"to": {"city": "Paris", "zip": "Paris"}}
    script = [
        reply(tool_use("ship", bad, id="toolu_bad")),
        reply(tool_use("ship", good, id="toolu_good")),
        reply(text("Shipped.")),
    ]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings())
        result = await provider.generate("Ship it to Paris.", tools=[tool])

    assert result.mode == "executor" and result.text == "Shipped."
    assert shipped == [good], "the executor ran only for arguments the schema accepts"
    offered = next(t for t in api.requests[0].tools if t["name"].endswith("__ship"))
    assert offered["input_schema"]["$defs"]["zip"]["pattern"] == "^[0-9]{5}$"
    bad_result, good_result = api.requests[2].tool_results()
    assert bad_result["is_error"] is True
    assert "$.to.zip" in json.dumps(bad_result["content"])
    assert not good_result.get("is_error")
    assert not api.errors


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        (
            {"type": "object", "properties": {"x": {"$ref": "#/$defs/missing"}}},
            "'#/$defs/missing' (at $.properties.x.$ref) that points to nothing",
        ),
        (
            {"type": "object", "properties": {"x": {"$ref": "http://127.0.0.1:9/s.json"}}},
            "refers outside the schema",
        ),
        ({"type": "object", "properties": {"x": json.loads(nested_object(200))}}, "deeper than"),
    ],
    ids=["dangling", "remote", "too-deep"],
)
async def test_an_output_schema_with_a_bad_ref_or_depth_fails_before_anything_starts(
    schema: dict[str, Any], says: str
) -> None:
    async with ScriptedMessagesAPI([reply(text("{}"))]) as api:
        provider = ClaudeAgentProvider(api.settings())
        with pytest.raises(UnsupportedRequestError) as info:
            await provider.generate("Weather?", output_schema=schema)
    assert "output_schema" in str(info.value) and says in str(info.value)
    assert api.all_requests == []


# -- user text that reads like Claude Code input


@pytest.mark.parametrize(
    "prompt",
    ["/help", "/init", "/model claude-haiku-5-5 hi", "/compact", "/clear", "/review my PR"],
)
async def test_a_prompt_that_reads_like_a_slash_command_reaches_the_model_as_written(
    prompt: str,
) -> None:
    """Measured on CLI 2.1.332: the CLI ran such a prompt as its own command (`/help`: no model
    call, an empty answer; `/init`: the model got Claude Code's CLAUDE.md prompt; `/model`:
    another model, asked "Hi"). The provider marks its messages as not typed by a person (the
    CLI's `text_not_typed`), which delivers the text as written."""
    async with ScriptedMessagesAPI(lambda _request: reply(text("ok"))) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0, model="claude-sonnet-5-5"))
        result = await provider.generate(prompt)

    assert result.text == "ok"
    [request] = api.requests
    assert request.body["model"] == "claude-sonnet-5-5"
    last = [m for m in request.body["messages"] if m["role"] == "user"][-1]
    assert [b["text"] for b in last["content"] if b["type"] == "text"] == [prompt]


async def test_a_slash_command_as_the_next_turn_of_a_continued_conversation_is_text() -> None:
    """The same on a live process that continues the conversation: `/clear` there would have
    wiped the history the next turn is answered from."""
    messages: list[Any] = [{"role": "user", "content": "Remember 42."}]
    async with (
        ScriptedMessagesAPI(lambda _request: reply(text("ok"))) as api,
        ClaudeAgentProvider(api.settings()) as provider,
    ):
        first = await provider.generate(messages)
        messages += [first.assistant_message(), {"role": "user", "content": "/clear"}]
        second = await provider.generate(messages)

    assert second.provider_details["process"] == "continued"
    sent = [
        b["text"] for m in api.requests[1].body["messages"] for b in m["content"] if "text" in b
    ]
    assert sent[0] == "Remember 42." and sent[-1] == "/clear"
