"""The lowest versions pyproject.toml allows, as pip constraints (`make test-lowest`).

    python tests/lowest_versions.py pydantic-ai langchain > floors.txt

prints `name==floor` for each runtime dependency and each dependency of the extras named, the
floor being the version its `>=` names. Installing with these constraints either gets exactly the
floors or fails naming the dependency that rules a floor out (a floor lower than what another
dependency needs is a floor no user can have, and is raised in pyproject.toml).
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

_PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(.*)$")
_FLOOR = re.compile(r">=\s*([0-9][0-9A-Za-z.]*)")


def floors(extras: list[str]) -> list[str]:
    """`name==floor` for the runtime dependencies and those of `extras`, in pyproject's order.
    A dependency without a `>=` floor, or an extra pyproject.toml does not have, is an error."""
    project = tomllib.loads(_PYPROJECT.read_text())["project"]
    optional: dict[str, list[str]] = project["optional-dependencies"]
    unknown = [extra for extra in extras if extra not in optional]
    if unknown:
        raise SystemExit(f"pyproject.toml has no extra {unknown}; it has {sorted(optional)}")
    requirements = list(project["dependencies"])
    for extra in extras:
        requirements += optional[extra]
    lines = []
    for requirement in requirements:
        match = _REQUIREMENT.match(requirement)
        floor = _FLOOR.search(match.group(2)) if match else None
        if match is None or floor is None:
            raise SystemExit(f"{requirement!r} in pyproject.toml names no `>=` floor to test")
        lines.append(f"{match.group(1)}=={floor.group(1)}")
    return lines


if __name__ == "__main__":
    print("\n".join(floors(sys.argv[1:])))
