"""Adapters stay optional: importing sf_provider never imports a framework, and a missing extra
raises an ImportError that names the extra to install."""

from __future__ import annotations

import subprocess
import sys

import pytest

BLOCK_AND_IMPORT = """
import sys
sys.modules[{framework!r}] = None  # as if the extra were not installed
try:
    import sf_provider.adapters.{adapter}
except ImportError as exc:
    print(exc)
"""


@pytest.mark.parametrize(
    ("adapter", "framework", "extra"),
    [("pydantic_ai", "pydantic_ai", "pydantic-ai"), ("langchain", "langchain_core", "langchain")],
)
def test_a_missing_extra_names_what_to_install(adapter: str, framework: str, extra: str) -> None:
    code = BLOCK_AND_IMPORT.format(framework=framework, adapter=adapter)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert f"pip install 'sf-provider[{extra}]'" in done.stdout


def test_importing_sf_provider_imports_no_framework() -> None:
    code = (
        "import sys, sf_provider, sf_provider.testing\n"
        "print(sorted(m for m in ('pydantic_ai', 'langchain_core') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
