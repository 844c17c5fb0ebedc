"""A query's warnings shown to an adapter's user as Python warnings."""

from __future__ import annotations

import warnings
from collections.abc import Iterable

from .types import CallWarning

__all__ = ["warn_user"]


def warn_user(source: str, call_warnings: Iterable[CallWarning], *, stacklevel: int = 2) -> None:
    """A query's warnings as Python `UserWarning`s, `"<source>: <message> (<code>)"`, so an
    adapter's user sees them without looking for them (`stacklevel` counts from the caller)."""
    for w in call_warnings:
        warnings.warn(f"{source}: {w.message} ({w.code})", UserWarning, stacklevel=stacklevel + 1)
