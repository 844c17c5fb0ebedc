"""The code blocks of README.md and docs/, and what the suite does with each.

A fenced block is one of:
- **python**: run by tests/contract/test_docs_blocks.py (a page's blocks in order, in one
  namespace, top-level `await` allowed);
- **shell** (`sh`, `bash`, `console`): its `sf-provider` commands run (`pip install` lines are
  what the suite's environment already did and are passed over); a shell block with no
  `sf-provider` command, or with any other command, does not run and must be marked;
- **data** (`json`, `text`, `nginx`): shown, not run: no program to run;
- anything else (another language, no language): must be marked.

A marker is an HTML comment on the lines right before the fence (invisible on the site):
`<!-- not-run: REASON -->` says why a block cannot run; in docs/testing.md,
`<!-- file: NAME -->` and `<!-- command -->` mark the blocks tests/contract/test_testing_docs.py
writes into a fresh project and runs.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parents[1]
PYTHON = {"python", "py"}
SHELL = {"sh", "bash", "console", "shell"}
DATA = {"json", "text", "nginx"}
TESTING_DOC = "docs/testing.md"

_FENCE = re.compile(
    r"^(?P<indent> *)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```\s*$",
    re.MULTILINE | re.DOTALL,
)


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is, its language, its code and the marker before it."""

    path: str  # relative to the repository
    line: int  # the fence's line, 1-based
    lang: str
    code: str
    marker: str | None

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def not_run_reason(self) -> str | None:
        if self.marker is not None and self.marker.startswith("not-run:"):
            return self.marker.removeprefix("not-run:").strip()
        return None


def doc_files() -> list[str]:
    """README.md and every markdown file under docs/, relative to the repository."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [str(f.relative_to(ROOT)) for f in files]


def blocks(path: str, text: str | None = None) -> list[Block]:
    """The fenced blocks of one markdown file, in order."""
    if text is None:
        text = (ROOT / path).read_text("utf-8")
    found = []
    for match in _FENCE.finditer(text):
        marker = _marker(text[: match.start()])
        indent = match["indent"]
        code = "\n".join(line.removeprefix(indent) for line in match["body"].split("\n"))
        found.append(
            Block(
                path=path,
                line=text.count("\n", 0, match.start()) + 1,
                lang=match["lang"],
                code=code,
                marker=marker,
            )
        )
    return found


def _marker(before: str) -> str | None:
    """The HTML comment that ends right before a fence (blank lines between allowed), its
    whitespace folded; None when the fence follows anything else."""
    before = before.rstrip()
    if not before.endswith("-->") or "<!--" not in before:
        return None
    return " ".join(before[before.rindex("<!--") + 4 : -3].split())


def shell_commands(block: Block) -> list[list[str]]:
    """The `sf-provider` commands of a shell block (`$ ` prompts, comments and `pip install`
    lines left out)."""
    commands = []
    for line in block.code.replace("\\\n", " ").splitlines():
        words = shlex.split(line.strip().removeprefix("$ "), comments=True)
        if not words or words[:2] == ["pip", "install"]:
            continue
        commands.append(words)
    return commands


def runs_here(block: Block) -> bool:
    """Whether tests/contract/test_docs_blocks.py runs this block (a Python or shell block
    without a not-run, file or command marker)."""
    marker = block.marker or ""
    if marker.startswith(("not-run", "file:")) or marker == "command":
        return False
    return block.lang in PYTHON or block.lang in SHELL


def problem(block: Block) -> str | None:
    """Why the suite would neither run nor accept this block, or None when all is well."""
    marker, lang = block.marker, block.lang
    if marker is not None and marker.startswith("not-run"):
        if not block.not_run_reason:
            return f"{block.where}: a not-run marker must say why the block cannot run"
        return None
    if marker is not None and (marker.startswith("file:") or marker == "command"):
        if block.path != TESTING_DOC:
            return f"{block.where}: `{marker}` is read only in {TESTING_DOC}"
        return None
    if lang in PYTHON or lang in DATA:
        return None
    if lang in SHELL:
        commands = shell_commands(block)
        if not commands:
            return f"{block.where}: a shell block that runs no sf-provider command needs a marker"
        others = [c for c in commands if c[0] != "sf-provider"]
        if others:
            return (
                f"{block.where}: the suite runs only sf-provider commands, not "
                f"{shlex.join(others[0])!r}: mark the block <!-- not-run: why -->"
            )
        return None
    what = f"language {lang!r}" if lang else "no language"
    return f"{block.where}: a block with {what} cannot run here: mark it <!-- not-run: why -->"
