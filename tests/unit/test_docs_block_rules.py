"""How the docs' code-block runner (tests/contract/test_docs_blocks.py) reads a page: which
blocks it runs, which it accepts as marked, and that it refuses an unmarked block it cannot run."""

from __future__ import annotations

import re

from docs_blocks import ROOT, blocks, problem, runs_here, shell_commands

import sf_provider

PAGE = """# A page

```python
print("runs")
```

<!-- not-run: needs a real Claude
credential -->
```python
print("marked")
```

```sh
pip install 'sf-provider[gateway]'
sf-provider gateway --port 8080  # a comment
```

```json
{"shown": true}
```
"""


def test_python_and_sf_provider_commands_run_marked_blocks_and_data_do_not() -> None:
    first, marked, shell, data = blocks("docs/page.md", PAGE)
    assert [b.line for b in (first, marked, shell, data)] == [3, 9, 13, 18]
    assert (runs_here(first), runs_here(marked), runs_here(shell), runs_here(data)) == (
        True,
        False,
        True,
        False,
    )
    assert marked.not_run_reason == "needs a real Claude credential"
    assert shell_commands(shell) == [["sf-provider", "gateway", "--port", "8080"]]
    assert [problem(b) for b in (first, marked, shell, data)] == [None] * 4


def test_an_unmarked_block_the_runner_cannot_run_is_a_problem_naming_its_line() -> None:
    page = "```ts\nconst a = 1;\n```\n\n```\nno language\n```\n\n```sh\nmake demo\n```\n"
    ts, bare, make = blocks("docs/page.md", page)
    assert problem(ts) == (
        "docs/page.md:1: a block with language 'ts' cannot run here: mark it <!-- not-run: why -->"
    )
    assert "docs/page.md:5: a block with no language" in str(problem(bare))
    assert "not 'make demo'" in str(problem(make))


def test_a_marker_must_say_why_and_file_markers_belong_to_the_testing_page() -> None:
    [reasonless] = blocks("docs/page.md", "<!-- not-run: -->\n```python\nx = 1\n```\n")
    assert "must say why" in str(problem(reasonless))
    page = "<!-- file: test_x.py -->\n```python\nx = 1\n```\n"
    [elsewhere] = blocks("docs/page.md", page)
    [testing] = blocks("docs/testing.md", page)
    assert "read only in docs/testing.md" in str(problem(elsewhere))
    assert problem(testing) is None and not runs_here(testing)


def test_a_comment_further_up_is_no_marker() -> None:
    page = "<!-- not-run: far away -->\n\nSome text.\n\n```python\nx = 1\n```\n"
    [block] = blocks("docs/page.md", page)
    assert block.marker is None and runs_here(block)


def test_the_package_reference_page_lists_every_exported_name() -> None:
    """docs/reference/sf_provider.md's table names each of `sf_provider.__all__` once."""
    page = (ROOT / "docs" / "reference" / "sf_provider.md").read_text("utf-8")
    rows = [line for line in page.splitlines() if line.startswith("| [`sf_provider.")]
    listed = [name for row in rows for name in re.findall(r"`(\w+)`", row.split("|")[2])]
    exported = [name for name in sf_provider.__all__ if name != "__version__"]
    assert sorted(listed) == sorted(exported)
