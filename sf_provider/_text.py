"""Text for messages, logs and spans: never unbounded."""

from __future__ import annotations

__all__ = ["clip"]


def clip(text: str, limit: int = 500) -> str:
    """`text` cut to `limit` characters, saying how many were left out: a value echoed into an
    error message, a log record or a span (a 10 MB argument, an exception's message) must not
    carry its whole size along."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters]"
