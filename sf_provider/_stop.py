"""Kept until the doors import `STOP_SEQUENCE_DETAIL` from `_door` (removed in this change)."""

from ._outcome import STOP_SEQUENCE_DETAIL

__all__ = ["STOP_SEQUENCE_DETAIL"]
