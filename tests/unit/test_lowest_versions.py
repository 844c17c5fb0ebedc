"""The floors `make test-lowest` installs (tests/lowest_versions.py): one per name, the highest
where an extra raises a runtime dependency's floor, so that the floors can be installed together."""

from __future__ import annotations

from typing import Any

import pytest
from lowest_versions import floors


def project(dependencies: list[str], **extras: list[str]) -> dict[str, Any]:
    return {"dependencies": dependencies, "optional-dependencies": extras}


def test_each_dependency_is_pinned_at_its_floor_in_order() -> None:
    table = project(["anyio>=4.11,<5", "mcp>=2.3"], gateway=["starlette[full]>=1.10,<2"])
    assert floors(["gateway"], table) == ["anyio==4.11", "mcp==2.3", "starlette==1.10"]
    assert floors([], table) == ["anyio==4.11", "mcp==2.3"]


def test_an_extra_that_raises_a_floor_gets_the_higher_one_once() -> None:
    table = project(["anyio>=4.11,<5"], litellm=["litellm>=1.109,<2", "anyio>=4.14,<5"])
    assert floors(["litellm"], table) == ["anyio==4.14", "litellm==1.109"]
    assert floors([], table) == ["anyio==4.11"]


def test_floors_compare_as_releases_not_as_text() -> None:
    table = project(["Some_Package>=1.9"], more=["some-package>=1.10"], less=["some.package>=1.8"])
    assert floors(["more"], table) == ["some-package==1.10"]
    assert floors(["less"], table) == ["some-package==1.9"]


def test_pyprojects_floors_name_each_dependency_once() -> None:
    # The litellm extra raises anyio's floor (LiteLLM 1.109 needs anyio 4.14): two pins of one
    # name would be constraints no install can meet.
    everything = floors(["pydantic-ai", "langchain", "gateway", "litellm", "redis", "otel"])
    names = [pin.split("==")[0] for pin in everything]
    assert len(names) == len(set(names))
    assert "anyio==4.14" in everything


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (project(["anyio"]), "names no `>=` floor"),
        (project(["anyio<5"]), "names no `>=` floor"),
        (project(["anyio>=4.11"], extra=["anyio>=4.14rc1"]), "not a plain release"),
    ],
)
def test_a_floor_it_cannot_read_is_an_error_naming_it(table: dict[str, Any], message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        floors(list(table["optional-dependencies"]), table)


def test_an_unknown_extra_is_an_error_naming_the_ones_there_are() -> None:
    with pytest.raises(SystemExit, match=r"no extra \['litelm'\]; it has \['litellm'\]"):
        floors(["litelm"], project([], litellm=["litellm>=1.109"]))
