"""Conversation continuation: an agent's next step runs on the CLI process that answered the last.

Proven from the scripted API's request log, through the real CLI: the same application code runs
once on a provider with warm processes (every step after the first continued on a live process)
and once without (every step a fresh process replaying the history), against the same scripted
model, and every request of the first run equals the request of the second. Anything that does
not match a live conversation takes the fresh path, and gives the same answer.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from conftest import cli_processes, kill_idle_warm_process, leftover_query_dirs, no_cli_left

from sf_provider import ClaudeAgentProvider, FunctionTool, GenerateResult
from sf_provider.testing import (
    RecordedRequest,
    Reply,
    ScriptedMessagesAPI,
    reply,
    text,
    thinking,
    tool_use,
)

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

_MARKER = re.compile(r"SECRET-(\d+)")
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
}
# A 1x1 PNG: an image the app sends next to its tool results.
PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
    )
).decode()


def _marker(request: RecordedRequest) -> int:
    """The conversation's number: every request carries exactly one (the history's)."""
    found = {int(m) for m in _MARKER.findall(json.dumps(request.messages))}
    assert len(found) == 1, f"a request mixes conversations: {sorted(found)}"
    return found.pop()


def _step(request: RecordedRequest) -> int:
    """Which step of its conversation a request is: the model turns before it."""
    return sum(m.get("role") == "assistant" for m in request.messages)


def planner(request: RecordedRequest) -> Reply:
    """Step 1: thinks, says something and makes two parallel calls; step 2: one more call;
    step 3: answers; step 4 (a follow-up question): answers again."""
    n = _marker(request)
    step = _step(request)
    if step == 0:
        return reply(
            thinking(f"planning SECRET-{n}", signature=f"sig-{n}"),
            text("Looking both up."),
            tool_use("lookup", {"n": n}),
            tool_use("fail", {"n": n}),
        )
    if step == 1:
        return reply(tool_use("lookup", {"n": n + 1000}))
    results = ", ".join(request.tool_result_texts())
    return reply(text(f"step {step} of SECRET-{n}; results: {results}"))


def comparable(request: RecordedRequest) -> dict[str, Any]:
    """What the model is given, volatile fields aside: `metadata` (names the process and its
    session), `cache_control` markers (placed by the CLI on the newest blocks) and the CLI's own
    `role: system` entries in `messages` (environment context it places once per process: after
    the first user message of a live process, after the newest one on a resumed one). The app's
    system prompt is the `system` field, compared in full."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "cache_control"}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    messages = [m for m in request.messages if m.get("role") != "system"]
    return strip(
        {
            "messages": messages,
            "tools": request.body.get("tools"),
            "system": request.body.get("system"),
            "model": request.body.get("model"),
            "max_tokens": request.body.get("max_tokens"),
        }
    )


ROUTED = [
    FunctionTool(name="lookup", description="Look a number up.", input_schema=SCHEMA),
    FunctionTool(name="fail", description="Always fails.", input_schema=SCHEMA),
]


def app_results(result: GenerateResult) -> list[dict[str, Any]]:
    """The app runs its own tools: `lookup` succeeds, `fail` fails."""
    return [
        {
            "type": "tool-result",
            "tool_call_id": call.tool_call_id,
            "output": f"found {call.input['n']}" if call.tool_name == "lookup" else "no luck",
            "is_error": call.tool_name == "fail",
        }
        for call in result.tool_calls
    ]


async def provider_loop(provider: ClaudeAgentProvider, n: int) -> list[GenerateResult]:
    """The README's single-turn loop, then a follow-up question: four steps."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"Plan SECRET-{n}."}]
    results = []
    while True:
        result = await provider.generate(messages, tools=ROUTED)
        results.append(result)
        if result.finish_reason != "tool-calls":
            break
        messages += [result.assistant_message(), {"role": "tool", "content": app_results(result)}]
        if len(results) == 1:  # user text and an image next to the first results
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Here is a picture too."},
                        {"type": "image", "data": PNG, "media_type": "image/png"},
                    ],
                }
            )
    messages += [result.assistant_message(), {"role": "user", "content": "And once more?"}]
    results.append(await provider.generate(messages, tools=ROUTED))
    return results


Run = Callable[[ClaudeAgentProvider], Awaitable[list[str]]]


async def run_twice(run: Run, **warm: Any) -> tuple[list[str], list[str], Any]:
    """`run` on a warm provider and on a fresh one, each against its own scripted API; returns
    both outputs and the two request logs."""
    settings: dict[str, Any] = {"model": "claude-opus-5-5", **warm}
    async with (
        ScriptedMessagesAPI(planner) as api,
        ClaudeAgentProvider(api.settings(warm_processes=2, **settings)) as provider,
    ):
        warm_out = await run(provider)
    warm_requests = api.requests
    async with ScriptedMessagesAPI(planner) as api:
        fresh_out = await run(ClaudeAgentProvider(api.settings(warm_processes=0, **settings)))
    assert not api.errors
    return warm_out, fresh_out, (warm_requests, api.requests)


def assert_same_requests(warm: list[RecordedRequest], fresh: list[RecordedRequest]) -> None:
    assert len(warm) == len(fresh)
    for index, (w, f) in enumerate(zip(warm, fresh, strict=True)):
        assert comparable(w) == comparable(f), f"request {index} differs"


def process_of(request: RecordedRequest) -> str:
    """The CLI session (one per process) a request came from."""
    return str(json.loads(request.body["metadata"]["user_id"])["session_id"])


async def test_a_provider_loop_continues_every_step_and_sends_what_the_fresh_path_sends() -> None:
    async def run(provider: ClaudeAgentProvider) -> list[str]:
        results = await provider_loop(provider, 7)
        return [
            f"{r.provider_details.get('process')}|{r.finish_reason}|{r.text}|"
            f"{[(c.tool_name, c.input) for c in r.tool_calls]}"
            for r in results
        ]

    warm, fresh, (warm_requests, fresh_requests) = await run_twice(run)
    # Same calls and answers; the warm run continued every step after the first.
    assert [w.split("|", 1)[1] for w in warm] == [f.split("|", 1)[1] for f in fresh]
    assert [w.split("|")[0] for w in warm] == ["fresh", "continued", "continued", "continued"]
    assert [f.split("|")[0] for f in fresh] == ["fresh"] * 4
    assert warm[-1].endswith("step 3 of SECRET-7; results: found 7, no luck, found 1007|[]")
    assert len({process_of(r) for r in warm_requests}) == 1
    assert len({process_of(r) for r in fresh_requests}) == 4
    # Every request the continued steps sent is the one the fresh path sent: parallel calls,
    # an error result, signed thinking, user text and an image next to results, a follow-up.
    assert_same_requests(warm_requests, fresh_requests)
    second = warm_requests[1]
    assert [b["signature"] for b in second.blocks("thinking")] == ["sig-7"]
    assert len(second.blocks("image")) == 1
    assert [bool(b.get("is_error")) for b in second.tool_results()] == [False, True]


async def test_a_pydantic_ai_agent_continues_every_step_and_sends_what_the_fresh_path_sends() -> (
    None
):
    from pydantic_ai import Agent, ModelRetry

    from sf_provider.adapters.pydantic_ai import ClaudeAgentModel

    async def run(provider: ClaudeAgentProvider) -> list[str]:
        agent = Agent(ClaudeAgentModel(provider), instructions="Plan carefully.")

        @agent.tool_plain
        def lookup(n: int) -> str:
            """Look a number up."""
            return f"found {n}"

        @agent.tool_plain
        def fail(n: int) -> str:
            """Always fails."""
            raise ModelRetry("no luck")

        first = await agent.run("Plan SECRET-3.")
        again = await agent.run("And once more?", message_history=first.all_messages())
        responses = [m for m in again.all_messages() if m.kind == "response"]
        return [first.output, again.output] + [
            str((m.provider_details or {}).get("process")) for m in responses
        ]

    warm, fresh, (warm_requests, fresh_requests) = await run_twice(run)
    assert warm[:2] == fresh[:2]
    assert warm[1] == "step 3 of SECRET-3; results: found 3, no luck, found 1003"
    assert warm[2:] == ["fresh", "continued", "continued", "continued"]
    assert fresh[2:] == ["fresh"] * 4
    assert len({process_of(r) for r in warm_requests}) == 1
    assert_same_requests(warm_requests, fresh_requests)
    assert [b["signature"] for b in warm_requests[1].blocks("thinking")] == ["sig-3"]


async def test_a_langchain_loop_continues_every_step_and_sends_what_the_fresh_path_sends() -> None:
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

    from sf_provider.adapters.langchain import ChatClaudeAgent

    async def run(provider: ClaudeAgentProvider) -> list[str]:
        model = ChatClaudeAgent(provider=provider).bind_tools(
            [{"name": t.name, "description": t.description, "parameters": SCHEMA} for t in ROUTED]
        )
        messages: list[BaseMessage] = [HumanMessage("Plan SECRET-5.")]
        outputs = []
        for _ in range(4):
            reply_message = await model.ainvoke(messages)
            assert isinstance(reply_message, AIMessage)
            outputs.append(str(reply_message.response_metadata.get("process")))
            messages.append(reply_message)
            if not reply_message.tool_calls:
                if len(outputs) == 4:
                    break
                messages.append(HumanMessage("And once more?"))
                continue
            for call in reply_message.tool_calls:
                failed = call["name"] == "fail"
                messages.append(
                    ToolMessage(
                        "no luck" if failed else f"found {call['args']['n']}",
                        tool_call_id=call["id"],
                        status="error" if failed else "success",
                    )
                )
        return [*outputs, str(messages[-1].content)]

    warm, fresh, (warm_requests, fresh_requests) = await run_twice(run)
    assert warm[-1] == fresh[-1] == "step 3 of SECRET-5; results: found 5, no luck, found 1005"
    assert warm[:4] == ["fresh", "continued", "continued", "continued"]
    assert fresh[:4] == ["fresh"] * 4
    assert_same_requests(warm_requests, fresh_requests)


def _executor_tools(runs: list[int]) -> list[FunctionTool]:
    def lookup(arguments: dict[str, Any]) -> str:
        runs.append(arguments["n"])
        return f"found {arguments['n']}"

    def fail(arguments: dict[str, Any]) -> str:
        raise ValueError("no luck")

    return [
        FunctionTool(name="lookup", description="Look up.", input_schema=SCHEMA, executor=lookup),
        FunctionTool(name="fail", description="Fails.", input_schema=SCHEMA, executor=fail),
    ]


async def test_executor_mode_continues_through_pydantic_ai_as_the_fresh_path_would() -> None:
    """Executor mode: the CLI ran the tools; pydantic-ai replays them as native calls with their
    results, which is exactly what the live process holds."""
    from pydantic_ai import Agent

    from sf_provider.adapters.pydantic_ai import ClaudeAgentModel

    runs: list[int] = []
    tools = _executor_tools(runs)

    async def run(provider: ClaudeAgentProvider) -> list[str]:
        agent = Agent(ClaudeAgentModel(provider, mode="executor", tools=tools))
        first = await agent.run("Plan SECRET-4.")
        again = await agent.run("And once more?", message_history=first.all_messages())
        responses = [m for m in again.all_messages() if m.kind == "response"]
        return [first.output, again.output] + [
            str((m.provider_details or {}).get("process")) for m in responses
        ]

    warm, fresh, (warm_requests, fresh_requests) = await run_twice(run)
    assert warm[:2] == fresh[:2]
    assert warm[2:] == ["fresh", "continued"]
    assert fresh[2:] == ["fresh", "fresh"]
    assert runs == [4, 1004] * 2  # the provider ran the tools in both runs, once each
    assert_same_requests(warm_requests, fresh_requests)


async def test_executor_mode_continues_a_provider_loop_through_response_messages() -> None:
    """The provider ran the tools inside the query; `response_messages` hands the app every
    turn and result, which is exactly what the live process holds."""
    runs: list[int] = []
    tools = _executor_tools(runs)

    async def run(provider: ClaudeAgentProvider) -> list[str]:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Plan SECRET-6."}]
        first = await provider.generate(messages, tools=tools)
        messages += [*first.response_messages, {"role": "user", "content": "And once more?"}]
        again = await provider.generate(messages, tools=tools)
        return [first.text, again.text, process(first), process(again)]

    warm, fresh, (warm_requests, fresh_requests) = await run_twice(run)
    assert warm[:2] == fresh[:2]
    failed = "Tool 'fail' failed: ValueError: no luck"
    assert warm[0] == f"step 2 of SECRET-6; results: found 6, {failed}, found 1006"
    assert warm[2:] == ["fresh", "continued"] and fresh[2:] == ["fresh", "fresh"]
    assert runs == [6, 1006] * 2
    assert_same_requests(warm_requests, fresh_requests)
    # The second request replays both tool rounds, signed thinking included.
    assert [b["signature"] for b in warm_requests[-1].blocks("thinking")] == ["sig-6"]
    assert len(warm_requests[-1].tool_results()) == 3


# --------------------------------------------------------------------------- falling back


def first_messages(n: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"Plan SECRET-{n}."}]


def next_messages(messages: list[dict[str, Any]], result: GenerateResult) -> list[dict[str, Any]]:
    """The history of the step after `result`: its turn and the app's results."""
    return [*messages, result.assistant_message(), {"role": "tool", "content": app_results(result)}]


def process(result: GenerateResult) -> str:
    return str(result.provider_details["process"])


async def test_a_changed_history_takes_the_fresh_path_and_the_model_sees_the_change() -> None:
    async with (
        ScriptedMessagesAPI(planner) as api,
        ClaudeAgentProvider(api.settings(warm_processes=2)) as provider,
    ):
        messages = first_messages(1)
        first = await provider.generate(messages, tools=ROUTED)
        step2 = next_messages(messages, first)
        edited = json.loads(json.dumps(step2))
        edited[1]["content"][1]["text"] = "I looked again."  # the app rewrote the model's text
        changed = await provider.generate(edited, tools=ROUTED)
        # The live process still holds the original: the original history continues on it.
        original = await provider.generate(step2, tools=ROUTED)
        # A shorter history than a live conversation (a retried step) is not continued either.
        retried = await provider.generate(step2, tools=ROUTED)
    assert [process(r) for r in (first, changed, original, retried)] == [
        "fresh",
        "fresh",
        "continued",
        "fresh",
    ]
    assert "I looked again." in json.dumps(api.requests[1].messages)
    assert "I looked again." not in json.dumps(api.requests[2].messages)
    assert changed.tool_calls[0].input == original.tool_calls[0].input == {"n": 1001}
    assert comparable(api.requests[2]) == comparable(api.requests[3])
    assert not api.errors


async def test_another_setup_or_a_budget_takes_the_fresh_path() -> None:
    async with (
        ScriptedMessagesAPI(planner) as api,
        ClaudeAgentProvider(api.settings(warm_processes=4)) as provider,
    ):
        messages = first_messages(2)
        first = await provider.generate(messages, tools=ROUTED)
        step2 = next_messages(messages, first)
        other_prompt = await provider.generate(step2, tools=ROUTED, system_prompt="Be brief.")
        other_tools = await provider.generate(step2, tools=[*ROUTED, ROUTED[0].model_copy(
            update={"name": "lookup_more"})])  # fmt: skip
        budget = await provider.generate(step2, tools=ROUTED, max_budget_usd=5.0)
        same = await provider.generate(step2, tools=ROUTED)
    assert [process(r) for r in (other_prompt, other_tools, budget, same)] == [
        "fresh",
        "fresh",
        "fresh",
        "continued",
    ]
    assert "Be brief." in json.dumps(api.requests[1].body["system"])
    assert "mcp__sf__lookup_more" in api.requests[2].tool_names
    assert not api.errors


async def test_a_busy_live_conversation_is_not_shared() -> None:
    """The same step sent twice at once (a retry racing the original): one continues the live
    conversation, the other replays the history on a fresh process; both get the right answer."""
    async with (
        ScriptedMessagesAPI(planner) as api,
        ClaudeAgentProvider(api.settings(warm_processes=2)) as provider,
    ):
        messages = first_messages(3)
        first = await provider.generate(messages, tools=ROUTED)
        step2 = next_messages(messages, first)
        results: list[GenerateResult] = []

        async def one() -> None:
            results.append(await provider.generate(step2, tools=ROUTED))

        async with anyio.create_task_group() as group:
            group.start_soon(one)
            group.start_soon(one)
    assert sorted(process(r) for r in results) == ["continued", "fresh"]
    assert [r.tool_calls[0].input for r in results] == [{"n": 1003}] * 2
    assert comparable(api.requests[1]) == comparable(api.requests[2])
    assert not api.errors


async def test_a_process_that_died_between_steps_is_replaced_by_the_fresh_path() -> None:
    async with (
        ScriptedMessagesAPI(planner) as api,
        ClaudeAgentProvider(api.settings(warm_processes=1)) as provider,
    ):
        messages = first_messages(4)
        first = await provider.generate(messages, tools=ROUTED)
        await kill_idle_warm_process(provider)
        second = await provider.generate(next_messages(messages, first), tools=ROUTED)
    assert process(second) == "fresh"
    assert second.tool_calls[0].input == {"n": 1004}
    assert second.session_id != first.session_id


async def test_an_evicted_or_expired_conversation_takes_the_fresh_path() -> None:
    async with ScriptedMessagesAPI(planner) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=1, warm_idle_timeout=0.5))
        a1 = await provider.generate(first_messages(5), tools=ROUTED)
        # The pool is full: a new conversation takes the least recently used process, emptied.
        b1 = await provider.generate(first_messages(6), tools=ROUTED)
        a2 = await provider.generate(next_messages(first_messages(5), a1), tools=ROUTED)
        await no_cli_left()
        assert not cli_processes(), "the idle process outlived warm_idle_timeout"
        a3 = await provider.generate(
            next_messages(next_messages(first_messages(5), a1), a2), tools=ROUTED
        )
        await provider.aclose()
    assert [process(r) for r in (a1, b1, a2, a3)] == ["fresh", "warm", "fresh", "fresh"]
    assert b1.session_id == a1.session_id
    assert a3.text == "step 2 of SECRET-5; results: found 5, no luck, found 1005"
    assert [_step(r) for r in api.requests] == [0, 0, 1, 2]  # b1 saw nothing of a1
    assert not api.errors
    assert not leftover_query_dirs()


# --------------------------------------------------------------------------- many conversations


async def test_two_interleaved_conversations_each_continue_on_their_own_process() -> None:
    async with (
        ScriptedMessagesAPI(planner) as api,
        ClaudeAgentProvider(api.settings(warm_processes=2)) as provider,
    ):
        history = {n: first_messages(n) for n in (8, 9)}
        results: dict[int, list[GenerateResult]] = {8: [], 9: []}
        for _ in range(3):
            for n in (8, 9):
                result = await provider.generate(history[n], tools=ROUTED)
                results[n].append(result)
                if result.tool_calls:
                    history[n] = next_messages(history[n], result)
    for n in (8, 9):
        assert [process(r) for r in results[n]] == ["fresh", "continued", "continued"]
        assert (
            results[n][-1].text
            == f"step 2 of SECRET-{n}; results: found {n}, no luck, found {n + 1000}"
        )
    assert results[8][0].session_id != results[9][0].session_id
    assert not api.errors  # every request carried exactly one conversation's marker


async def test_eight_concurrent_conversations_never_see_each_other() -> None:
    async with (
        ScriptedMessagesAPI(planner) as api,
        ClaudeAgentProvider(api.settings(warm_processes=8)) as provider,
    ):
        results: dict[int, list[GenerateResult]] = {}

        async def conversation(n: int) -> None:
            results[n] = await provider_loop(provider, n)

        async with anyio.create_task_group() as group:
            for n in range(8):
                group.start_soon(conversation, n)
        assert len(cli_processes()) == 8
    assert not api.errors  # every request carried exactly one conversation's marker
    for n, steps in results.items():
        assert [process(r) for r in steps] == ["fresh", "continued", "continued", "continued"]
        assert (
            steps[2].text == f"step 2 of SECRET-{n}; results: found {n}, no luck, found {n + 1000}"
        )
        assert len({r.session_id for r in steps}) == 1
    assert len({steps[0].session_id for steps in results.values()}) == 8
