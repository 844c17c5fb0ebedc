"""docs/errors.md, the page of errors and what to do about each, covers every public
`ProviderError` subclass and names none that does not exist, and each entry states its facts
(when, message, gateway, retryable, what to do), with the gateway status and `retryable` the code
gives.

Public: defined in a module of `sf_provider` no part of whose dotted name starts with `_`, and
not itself named with a leading `_`. Every public module is imported, so an error class added
anywhere in the package is found.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import sf_provider
from sf_provider import errors
from sf_provider.gateway._errors import error_info
from sf_provider.types import GenerateResult

PAGE = Path(__file__).resolve().parents[2] / "docs" / "errors.md"
LABELS = ("When", "Message", "Gateway", "Retryable", "What to do")


def _public_modules() -> list[str]:
    names = ["sf_provider"]
    for info in pkgutil.walk_packages(sf_provider.__path__, "sf_provider."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return names


def _subclasses(cls: type) -> Iterator[type]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _public_errors() -> dict[str, type[errors.ProviderError]]:
    for name in _public_modules():
        importlib.import_module(name)
    found: dict[str, type[errors.ProviderError]] = {"ProviderError": errors.ProviderError}
    for cls in _subclasses(errors.ProviderError):
        module = cls.__module__
        if module.split(".")[0] != "sf_provider" or cls.__name__.startswith("_"):
            continue
        if any(part.startswith("_") for part in module.split(".")):
            continue
        found[cls.__name__] = cls
    return found


def _sections() -> dict[str, str]:
    """The page's `## Heading` sections by heading (their text up to the next `## `)."""
    text = PAGE.read_text(encoding="utf-8")
    parts = re.split(r"^## (.+)$", text, flags=re.MULTILINE)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def _entry_field(section: str, label: str) -> str:
    """The text of the `- **<label>:** ...` bullet (its continuation lines joined)."""
    match = re.search(
        rf"^- \*\*{re.escape(label)}:\*\*(.*?)(?=^- \*\*|^###|\Z)", section, re.M | re.S
    )
    assert match, f"no '- **{label}:**' line"
    return " ".join(match.group(1).split())


PUBLIC = _public_errors()
SECTIONS = _sections()

#: How to build an instance of an error whose constructor takes more than a message, keyed by
#: the class whose `__init__` it matches (the nearest in the MRO wins). A new constructor needs
#: a line here: the test then checks the page against what the gateway answers.
_EMPTY = GenerateResult(text="")
#: The API status each `APIError` subclass stands for (the base: none, a failure unexplained).
_STATUS: dict[type[errors.APIError], int | None] = {
    errors.AuthenticationError: 401,
    errors.RateLimitError: 429,
    errors.OverloadedError: 529,
    errors.ContextWindowExceededError: 400,
    errors.UnsupportedSettingError: 400,
    errors.APIError: None,
}
_BUILD: dict[type[errors.ProviderError], Callable[[type[Any]], errors.ProviderError]] = {
    errors.ProviderCompatibilityError: lambda c: c(["a problem"]),
    errors.ToolsUnavailableError: lambda c: c("m", missing=["t"], status="failed"),
    errors.QueryTimeoutError: lambda c: c("m", kind="timeout", seconds=1.0),
    errors.UnsupportedSettingError: lambda c: c("m", setting="temperature", model=None, status=400),
    errors.APIError: lambda c: c("m", status=next(_STATUS[k] for k in c.__mro__ if k in _STATUS)),
    errors.PartialResultError: lambda c: c("m", partial=_EMPTY),
    errors.MaxTurnsError: lambda c: c("m", partial=_EMPTY, max_turns=3),
    errors.BudgetExceededError: lambda c: c("m", partial=_EMPTY, budget_usd=1.0, cost_usd=1.5),
}


def _instance(cls: type[errors.ProviderError]) -> errors.ProviderError:
    build = next((_BUILD[k] for k in cls.__mro__ if k in _BUILD), None)
    return build(cls) if build is not None else cls("m")


def test_every_public_error_class_is_found() -> None:
    # The walk reaches beyond sf_provider.errors: the scenario errors live in sf_provider.scenarios.
    assert {"ProviderError", "APIError", "ScenarioFileError", "ScenarioRecordingError"} <= set(
        PUBLIC
    )


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_the_page_has_an_entry_for_each_error(name: str) -> None:
    assert name in SECTIONS, f"docs/errors.md has no '## {name}' entry: add one (see its others)"


def test_the_page_has_no_entry_for_an_error_that_does_not_exist() -> None:
    headings = {h for h in SECTIONS if re.fullmatch(r"[A-Z]\w*Error", h)}
    assert headings - set(PUBLIC) == set(), "docs/errors.md names error classes the code lacks"


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_each_entry_says_when_what_gateway_retryable_and_what_to_do(name: str) -> None:
    section = SECTIONS[name]
    for label in LABELS:
        assert _entry_field(section, label), f"{name}: the '{label}' line is empty"


@pytest.mark.parametrize("name", sorted(set(PUBLIC) - {"ProviderError"}))
def test_each_entry_gives_the_gateway_status_and_type_the_code_answers(name: str) -> None:
    gateway = _entry_field(SECTIONS[name], "Gateway")
    if "not raised by the gateway" in gateway:
        return
    info = error_info(_instance(PUBLIC[name]))
    assert f"{info.status} `{info.type}`" in gateway, (
        f"{name}: the gateway answers {info.status} {info.type}; the entry says: {gateway}"
    )


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_each_entry_says_what_retryable_is(name: str) -> None:
    cls = PUBLIC[name]
    if isinstance(cls.__dict__.get("retryable"), property) or any(
        isinstance(k.__dict__.get("retryable"), property) for k in cls.__mro__
    ):
        return  # depends on the API's status: the entry says which statuses
    said = _entry_field(SECTIONS[name], "Retryable")
    expected = "yes" if cls.retryable else "no"
    first = said.split(".")[0].lower()
    assert first.startswith(expected) or f"`retryable` is {str(cls.retryable).lower()}" in said, (
        f"{name}: retryable is {cls.retryable}; the entry says: {said}"
    )
