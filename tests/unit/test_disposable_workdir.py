"""Which CLI may be killed without a graceful shutdown: one whose every file is in its temp dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from sf_provider._process import _inside

WORKDIR = Path("/tmp/sf-provider-abc")
ISOLATED = {name: str(WORKDIR / name.lower()) for name in ("HOME", "CLAUDE_CONFIG_DIR", "TMPDIR")}


def test_a_cli_with_home_config_and_tmpdir_in_its_temp_dir_is_disposable() -> None:
    assert _inside(WORKDIR, {**ISOLATED, "PATH": "/usr/bin"})


@pytest.mark.parametrize("name", ["HOME", "CLAUDE_CONFIG_DIR", "TMPDIR"])
def test_one_dir_elsewhere_or_unset_makes_it_not_disposable(name: str) -> None:
    assert not _inside(WORKDIR, {**ISOLATED, name: "/root"})
    assert not _inside(WORKDIR, {k: v for k, v in ISOLATED.items() if k != name})
    # A sibling whose name starts with the temp dir's is not inside it.
    assert not _inside(WORKDIR, {**ISOLATED, name: "/tmp/sf-provider-abcd/home"})
