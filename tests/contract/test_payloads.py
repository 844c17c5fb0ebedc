"""Large payloads through the real CLI: big tool results, big tool arguments, and the limits.

Limits seen with the bundled CLI 2.1.330:
- by default the CLI does not pass a long MCP tool result on: above 50,000 characters it sends
  the model a ~2 KB `<persisted-output>` preview pointing at a file the model cannot open. A
  tool's `_meta["anthropic/maxResultSizeChars"]` lifts that to at most 500,000 characters; the
  bridge asks for `ProviderSettings.max_result_chars` (default and maximum 500,000) and
  truncates longer results itself, with a marker the model and the app both see;
- the SDK refuses any CLI stdout line longer than `max_buffer_size` (a whole assistant message
  with its tool arguments or text is one line): that is a `CLIOutputError` naming the setting.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from sf_provider import ClaudeAgentProvider, CLIOutputError, FunctionTool, GenerateResult
from sf_provider.testing import RecordedRequest, Reply, ScriptedMessagesAPI, reply, text, tool_use

pytestmark = [pytest.mark.anyio, pytest.mark.cli]

MiB = 1024 * 1024
# The CLI's own limits, measured: results above these are replaced by a preview.
CLI_RESULT_LIMIT = 50_000  # characters, by default
CLI_RESULT_CEILING = 500_000  # characters, as far as `anthropic/maxResultSizeChars` raises it


def _pattern(size: int) -> str:
    """`size` characters of a deterministic pattern with non-ASCII characters in it."""
    return ("données-" * (size // 8 + 1))[:size]


def _returning(value: str) -> FunctionTool:
    return FunctionTool(name="dump", description="Return a large text.", executor=lambda _: value)


def _text_of(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "".join(str(b.get("text", "")) for b in content or [] if b.get("type") == "text")


async def _run_large_result(
    size: int, **settings: Any
) -> tuple[str, GenerateResult, list[RecordedRequest]]:
    payload = _pattern(size)
    script = [reply(tool_use("dump")), reply(text("received"))]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(**settings))
        with anyio.fail_after(60):
            result = await provider.generate("dump it", tools=[_returning(payload)])
    return payload, result, api.requests


def _preview_marker(value: str) -> str:
    return value[:80].replace("\n", " ")


# --------------------------------------------------------------------------- large tool results


async def test_a_result_at_the_clis_limit_reaches_the_model_intact() -> None:
    payload, _, requests = await _run_large_result(CLI_RESULT_LIMIT)

    assert _text_of(requests[1].tool_results()[0]) == payload


async def test_a_result_at_the_clis_ceiling_reaches_the_model_intact() -> None:
    # The bridge asks the CLI for its largest result size (_meta anthropic/maxResultSizeChars).
    payload, result, requests = await _run_large_result(CLI_RESULT_CEILING)

    sent = _text_of(requests[1].tool_results()[0])
    assert sent == payload, f"the model got {len(sent)} characters: {_preview_marker(sent)!r}"
    assert result.tool_calls[0].result is not None
    assert result.tool_calls[0].result.output == payload


async def test_a_10_mib_result_is_truncated_with_a_marker_the_model_and_the_app_see() -> None:
    payload, result, requests = await _run_large_result(10 * MiB)

    sent = _text_of(requests[1].tool_results()[0])
    assert len(sent) == CLI_RESULT_CEILING
    marker = sent[sent.rindex("\n[truncated by sf-provider") :]
    assert f"has {10 * MiB} characters" in marker and "max_result_chars" in marker
    assert payload.startswith(sent[: -len(marker)])
    reported = result.tool_calls[0].result
    assert reported is not None and reported.output.replace("\n", "") == sent.replace("\n", "")


def _utf16_units(value: str) -> int:
    return len(value.encode("utf-16-le")) // 2


async def test_a_result_of_characters_outside_the_bmp_is_measured_as_the_cli_measures_it() -> None:
    """The CLI measures a result in UTF-16 code units (an emoji is 2): 300,000 emoji, 300,000
    characters to Python and under the ceiling, were replaced by the CLI's preview of a file
    the model cannot open, and the app's copy said the same."""
    payload = "\U0001f600" * 300_000
    script = [reply(tool_use("dump")), reply(text("received"))]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        with anyio.fail_after(60):
            result = await provider.generate("dump it", tools=[_returning(payload)])

    sent = _text_of(api.requests[1].tool_results()[0])
    assert "<persisted-output>" not in sent, _preview_marker(sent)
    assert _utf16_units(sent) == CLI_RESULT_CEILING
    marker = sent[sent.rindex("\n[truncated by sf-provider") :]
    assert payload.startswith(sent[: -len(marker)])
    reported = result.tool_calls[0].result
    assert reported is not None and reported.output.replace("\n", "") == sent.replace("\n", "")


async def test_a_result_with_lone_surrogates_reads_the_same_to_the_model_and_the_app() -> None:
    """The API gets U+FFFD for a lone surrogate (bytes decoded with surrogateescape); the app's
    copy of the result used to keep the surrogate, so the two disagreed."""
    script = [reply(tool_use("dump")), reply(text("received"))]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        value = b"caf\xe9 \xf0\x9f\x98\x80".decode("utf-8", "surrogateescape")
        result = await provider.generate("dump it", tools=[_returning(value)])

    sent = _text_of(api.requests[1].tool_results()[0])
    assert sent == "caf\ufffd \U0001f600"
    reported = result.tool_calls[0].result
    assert reported is not None and reported.output == sent


async def test_a_smaller_configured_limit_truncates_sooner() -> None:
    payload, _, requests = await _run_large_result(200_000, max_result_chars=50_000)

    sent = _text_of(requests[1].tool_results()[0])
    assert len(sent) == 50_000 and "limit 50000" in sent
    assert payload.startswith(sent[: sent.rindex("\n[truncated")])


async def test_a_result_larger_than_max_buffer_size_ends_the_query_normally() -> None:
    # A tool result goes SDK -> CLI on stdin (not limited) and comes back on the CLI's stdout
    # only as the model received it (at most max_result_chars), so it cannot overflow.
    _, result, requests = await _run_large_result(2 * MiB, max_buffer_size=1 * MiB)

    assert result.text == "received"
    assert len(_text_of(requests[1].tool_results()[0])) == CLI_RESULT_CEILING


# ------------------------------------------------------------------------- large tool arguments


def _taking(seen: list[str]) -> FunctionTool:
    def take(arguments: dict[str, Any]) -> str:
        seen.append(arguments["blob"])
        return f"got {len(arguments['blob'])} characters"

    return FunctionTool(
        name="take",
        description="Accept a large text.",
        input_schema={
            "type": "object",
            "properties": {"blob": {"type": "string"}},
            "required": ["blob"],
        },
        executor=take,
    )


def _sending(blob: str) -> list[Reply]:
    # 4 KiB deltas: 256 input_json_delta events. With the scripted API's default 16-character
    # deltas (65,536 stream events) the same query takes ~9 s, all of it per-event overhead.
    call = Reply(content=[tool_use("take", {"blob": blob})], chunk_size=4096)
    return [call, reply(text("done"))]


async def test_1_mib_of_tool_arguments_reach_the_executor_intact() -> None:
    blob = _pattern(1 * MiB)
    seen: list[str] = []
    async with ScriptedMessagesAPI(_sending(blob)) as api:
        provider = ClaudeAgentProvider(api.settings())
        with anyio.fail_after(60):
            result = await provider.generate("take it", tools=[_taking(seen)])

    assert len(seen) == 1 and seen[0] == blob
    assert result.tool_calls[0].input == {"blob": blob}


async def test_tool_arguments_larger_than_max_buffer_size_raise_a_provider_error() -> None:
    seen: list[str] = []
    async with ScriptedMessagesAPI(_sending(_pattern(2 * MiB))) as api:
        provider = ClaudeAgentProvider(api.settings(max_buffer_size=1 * MiB))
        with anyio.fail_after(60), pytest.raises(CLIOutputError, match="max_buffer_size"):
            await provider.generate("take it", tools=[_taking(seen)])

    assert seen == []


async def test_a_text_answer_larger_than_max_buffer_size_raises_a_provider_error() -> None:
    script = [Reply(content=[text(_pattern(2 * MiB))], chunk_size=4096)]
    async with ScriptedMessagesAPI(script) as api:
        provider = ClaudeAgentProvider(api.settings(max_buffer_size=1 * MiB))
        with anyio.fail_after(60), pytest.raises(CLIOutputError, match="max_buffer_size"):
            await provider.generate("say a lot")


# --------------------------------------------------------------------------- images


SVG = "PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciLz4="  # <svg xmlns=".../svg"/>


@pytest.mark.parametrize(
    ("data", "mime", "problem"),
    [
        (SVG, "image/svg+xml", "mimeType 'image/svg+xml' is not an image type the model takes"),
        ("not base64!", "image/png", "data is not base64"),
    ],
    ids=["svg", "not-base64"],
)
async def test_an_image_the_model_cannot_receive_is_the_tools_named_failure(
    data: str, mime: str, problem: str
) -> None:
    """The CLI told the model, for an SVG (or a BMP), that the image was saved to a file in the
    query's temp dir, which it cannot open and which is removed; for data that is not base64,
    that the MCP server "returned a malformed result". Neither named the tool or the cause."""
    from mcp import types

    chart = FunctionTool(
        name="chart",
        description="Draw a chart.",
        executor=lambda _: types.ImageContent(data=data, mime_type=mime),
    )
    async with ScriptedMessagesAPI([reply(tool_use("chart")), reply(text("done"))]) as api:
        provider = ClaudeAgentProvider(api.settings(warm_processes=0))
        result = await provider.generate("draw it", tools=[chart])
    assert result.text == "done"
    [block] = api.requests[1].tool_results()
    assert block.get("is_error") is True
    shown = _text_of(block)
    assert shown.startswith("Tool 'chart' returned a value that cannot be sent: ")
    assert problem in shown
    assert "saved to" not in shown and "malformed" not in shown
