"""docs/try-it.md works as written: its console command starts `sf-provider gateway --offline`,
and each of its Python examples runs against that gateway (a script of its own, with the page's
address `http://127.0.0.1:8080` replaced by the gateway's free port) and prints what the page
says it prints (its `# ...` comment lines after a print). A block the suite cannot run says why
in `<!-- not-run: reason -->` on the line before it."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from offline_gateway import OfflineGateway, offline_gateway

pytestmark = pytest.mark.cli

DOC = Path(__file__).parents[2] / "docs" / "try-it.md"
ADDRESS = "http://127.0.0.1:8080"
_BLOCK = re.compile(r"(<!-- not-run: [^>]+-->\n)?```(\w+)\n(.*?)```", re.DOTALL)


def blocks() -> list[tuple[str, str, bool]]:
    """(language, code, marked not-run) of every fenced block, in order."""
    text = DOC.read_text("utf-8")
    return [(m[2], m[3], bool(m[1])) for m in _BLOCK.finditer(text)]


PYTHON = [code for language, code, skipped in blocks() if language == "python" and not skipped]


def test_every_block_runs_or_says_why_not() -> None:
    kinds = [(language, skipped) for language, _, skipped in blocks()]
    assert kinds == [("console", False), *[("python", False)] * 3, ("js", True)]
    [command] = [code for language, code, _ in blocks() if language == "console"]
    assert shlex.split(command) == ["sf-provider", "gateway", "--offline"]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OfflineGateway]:
    [command] = [code for language, code, _ in blocks() if language == "console"]
    with offline_gateway(tmp_path_factory.mktemp("try-it"), shlex.split(command)) as running:
        yield running


@pytest.mark.parametrize("code", PYTHON, ids=["agents-sdk", "litellm", "openai"])
def test_the_pages_python_examples_run_against_gateway_offline(
    code: str, gateway: OfflineGateway, tmp_path: Path
) -> None:
    assert ADDRESS in code
    script = tmp_path / "example.py"
    script.write_text(code.replace(ADDRESS, gateway.url), encoding="utf-8")
    # LiteLLM fetches its model cost map from GitHub when imported: no network in tests.
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    printed = re.findall(r"^ *# (Offline model: .*)$", code, flags=re.MULTILINE)
    assert printed and done.stdout.splitlines() == printed, done.stdout
