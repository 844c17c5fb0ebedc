"""`sf-provider demo`: a small agent with three tools, through the real bundled CLI, streamed."""

from __future__ import annotations

import json
import sys
import time
from typing import Any, Literal, TextIO

from ._bridge import app_tool_name
from .provider import ClaudeAgentProvider
from .settings import ProviderSettings
from .testing import RecordedRequest, Reply, ScriptedMessagesAPI, reply, result_text, text, tool_use
from .tools import FunctionTool
from .types import (
    ErrorPart,
    FinishPart,
    ReasoningDeltaPart,
    StreamPart,
    StreamStartPart,
    TextDeltaPart,
    TextEndPart,
    ToolCallPart,
    ToolResultPart,
)

_BRIDGE = ProviderSettings().bridge_name

PROMPT = "What's the weather in Paris and Tokyo, in Fahrenheit, and which city is warmer?"

_WEATHER = {"paris": 18.0, "tokyo": 24.5, "london": 14.0}


def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city (temperature in Celsius)."""
    celsius = _WEATHER.get(city.lower())
    if celsius is None:
        raise ValueError(f"no weather station for {city!r}")
    return {"city": city, "celsius": celsius, "sky": "clear"}


def convert_temperature(celsius: float, to: Literal["fahrenheit", "kelvin"]) -> str:
    """Convert a Celsius temperature to Fahrenheit or Kelvin."""
    value = celsius * 9 / 5 + 32 if to == "fahrenheit" else celsius + 273.15
    return f"{value:.1f} {'°F' if to == 'fahrenheit' else 'K'}"


def compare(a_city: str, a_celsius: float, b_city: str, b_celsius: float) -> str:
    """Say which of two cities is warmer."""
    warmer = a_city if a_celsius >= b_celsius else b_city
    return f"{warmer} is warmer by {abs(a_celsius - b_celsius):.1f} °C"


def demo_tools() -> list[FunctionTool]:
    """The demo agent's tools."""
    return [
        FunctionTool.from_function(get_weather, read_only=True),
        FunctionTool.from_function(convert_temperature, read_only=True),
        FunctionTool.from_function(compare, read_only=True),
    ]


def scripted_model(request: RecordedRequest) -> Reply:
    """A scripted 'model' that reads the tool results it was sent, like a real one would.

    Results are matched to calls by id: read-only calls run concurrently, so results may come
    back in any order.
    """
    calls = {b["id"]: b for b in request.tool_uses()}
    results: dict[str, list[tuple[dict[str, Any], str]]] = {}
    for block in request.tool_results():
        call = calls[block["tool_use_id"]]
        name = app_tool_name(_BRIDGE, call["name"])
        results.setdefault(name, []).append((call["input"], result_text(block)))
    if "get_weather" not in results:
        return reply(
            text("I'll look up both cities at once."),
            tool_use("get_weather", {"city": "Paris"}),
            tool_use("get_weather", {"city": "Tokyo"}),
        )
    celsius = {args["city"]: json.loads(out)["celsius"] for args, out in results["get_weather"]}
    if "compare" not in results:
        return reply(
            text("Now converting and comparing."),
            tool_use("convert_temperature", {"celsius": celsius["Paris"], "to": "fahrenheit"}),
            tool_use("convert_temperature", {"celsius": celsius["Tokyo"], "to": "fahrenheit"}),
            tool_use(
                "compare",
                {
                    "a_city": "Paris",
                    "a_celsius": celsius["Paris"],
                    "b_city": "Tokyo",
                    "b_celsius": celsius["Tokyo"],
                },
            ),
        )
    fahrenheit = {args["celsius"]: out for args, out in results["convert_temperature"]}
    verdict = results["compare"][0][1]
    return reply(
        text(
            f"Paris is {fahrenheit[celsius['Paris']]} and Tokyo is "
            f"{fahrenheit[celsius['Tokyo']]}. {verdict}."
        )
    )


class _Printer:
    def __init__(self, out: TextIO, started: float) -> None:
        self.out = out
        self.started = started
        self.first_text: float | None = None

    def stamp(self) -> str:
        return f"[{(time.perf_counter() - self.started) * 1000:7.0f} ms]"

    def show(self, part: StreamPart) -> None:
        out = self.out
        match part:
            case StreamStartPart():
                print(f"{self.stamp()} stream started ({part.mode} mode)", file=out)
            case TextDeltaPart():
                if self.first_text is None:
                    self.first_text = time.perf_counter()
                    print(f"{self.stamp()} assistant: ", end="", file=out)
                out.write(part.delta)
                out.flush()
            case TextEndPart():
                self.first_text = None
                print(file=out)
            case ReasoningDeltaPart():
                out.write(part.delta)
            case ToolCallPart():
                args = json.dumps(part.input, ensure_ascii=False)
                print(f"{self.stamp()} tool call   {part.tool_name}({args})", file=out)
            case ToolResultPart():
                flag = "error" if part.is_error else "ok"
                print(
                    f"{self.stamp()} tool result {part.tool_name} [{flag}] {part.output}", file=out
                )
            case ErrorPart():
                print(f"{self.stamp()} error: {part.error_type}: {part.message}", file=out)
            case FinishPart():
                u = part.usage
                print(
                    f"{self.stamp()} finished: {part.finish_reason}, {part.api_calls} model calls",
                    file=out,
                )
                print(
                    f"  usage: {u.input_tokens} in / {u.output_tokens} out tokens "
                    f"(cache read {u.cache_read_input_tokens}, "
                    f"cache write {u.cache_creation_input_tokens})",
                    file=out,
                )
                cost = f"${part.cost_usd:.6f}" if part.cost_usd is not None else "n/a"
                print(f"  cost: {cost}   CLI-reported duration: {part.duration_ms} ms", file=out)
            case _:
                pass


async def run_demo(*, live: bool = False, out: TextIO = sys.stdout) -> int:
    """Run the demo; offline against the embedded scripted API unless `live`."""
    tools = demo_tools()
    started = time.perf_counter()
    printer = _Printer(out, started)
    print(f"prompt: {PROMPT}", file=out)
    if live:
        print("mode: live (your Claude credentials, real model)", file=out)
        provider = ClaudeAgentProvider(ProviderSettings())
        async for part in provider.stream(PROMPT, tools=tools):
            printer.show(part)
    else:
        print(
            "mode: offline (real bundled Claude Code CLI, scripted Messages API on 127.0.0.1)",
            file=out,
        )
        async with ScriptedMessagesAPI(scripted_model) as api:
            provider = ClaudeAgentProvider(api.settings())
            async for part in provider.stream(PROMPT, tools=tools):
                printer.show(part)
            print(f"  scripted API calls: {len(api.requests)}", file=out)
    print(f"  wall time: {(time.perf_counter() - started) * 1000:.0f} ms", file=out)
    return 0
