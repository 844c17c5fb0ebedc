"""The offline demo (the README's main job) runs through the real CLI and prints the stream."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from sf_provider._demo import run_demo

pytestmark = [pytest.mark.cli]


@pytest.mark.anyio
async def test_demo_streams_tool_calls_results_and_an_answer_built_from_them() -> None:
    out = io.StringIO()
    assert await run_demo(out=out) == 0
    printed = out.getvalue()
    assert 'tool call   get_weather({"city": "Paris"})' in printed
    assert "tool result get_weather [ok]" in printed
    assert "tool result convert_temperature [ok] 64.4 °F" in printed
    # The scripted model's answer is built from the results the executors really returned.
    assert "Paris is 64.4 °F and Tokyo is 76.1 °F. Tokyo is warmer by 6.5 °C." in printed
    assert "finished: stop" in printed and "cost: $" in printed
    # Model calls as the provider counts them are what the API saw (not the CLI's "turns").
    assert "finished: stop, 3 model calls" in printed
    assert "scripted API calls: 3" in printed


def test_demo_console_script_runs_offline() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sf_provider.cli", "demo"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Tokyo is warmer" in done.stdout
