"""The lowest versions pyproject.toml allows, as pip constraints (`make test-lowest`).

    python tests/lowest_versions.py pydantic-ai langchain > floors.txt

prints `name==floor` for each runtime dependency and each dependency of the extras named, the
floor being the version its `>=` names. A name given twice (an extra raising a runtime floor, as
`litellm` raises anyio's to what LiteLLM's floor needs) gets the highest of its floors: the floor a
user installing those extras really has. Installing with these constraints either gets exactly
the floors or fails naming the dependency that rules a floor out (a floor lower than what another
dependency needs is a floor no user can have, and is raised in pyproject.toml).
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path
from typing import Any

_PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(.*)$")
_FLOOR = re.compile(r">=\s*([0-9][0-9A-Za-z.]*)")


def floors(extras: list[str], project: dict[str, Any] | None = None) -> list[str]:
    """`name==floor` for the runtime dependencies and those of `extras`, in pyproject's order, a
    name given more than once at the highest of its floors. `project` is pyproject.toml's
    `[project]` table (default: this repository's). A dependency without a `>=` floor, or an extra
    pyproject.toml does not have, is an error."""
    if project is None:
        project = tomllib.loads(_PYPROJECT.read_text())["project"]
    optional: dict[str, list[str]] = project["optional-dependencies"]
    unknown = [extra for extra in extras if extra not in optional]
    if unknown:
        raise SystemExit(f"pyproject.toml has no extra {unknown}; it has {sorted(optional)}")
    requirements = list(project["dependencies"])
    for extra in extras:
        requirements += optional[extra]
    highest: dict[str, str] = {}
    for requirement in requirements:
        match = _REQUIREMENT.match(requirement)
        floor = _FLOOR.search(match.group(2)) if match else None
        if match is None or floor is None:
            raise SystemExit(f"{requirement!r} in pyproject.toml names no `>=` floor to test")
        name, version = re.sub(r"[-_.]+", "-", match.group(1)).lower(), floor.group(1)
        if name not in highest or _release(version) > _release(highest[name]):
            highest[name] = version
    return [f"{name}=={version}" for name, version in highest.items()]


def _release(version: str) -> tuple[int, ...]:
    """The numeric release of a floor (`1.10` > `1.9`); a floor with letters is an error."""
    if not re.fullmatch(r"[0-9]+(?:\.[0-9]+)*", version):
        raise SystemExit(f"the floor {version!r} is not a plain release (digits and dots)")
    return tuple(int(part) for part in version.split("."))


if __name__ == "__main__":
    print("\n".join(floors(sys.argv[1:])))
