"""`sf-provider check`: the capability report as a table or JSON."""

from __future__ import annotations

import argparse


def run_check(args: argparse.Namespace) -> int:
    """Print the report; exit 1 when the request could not run."""
    raise NotImplementedError("sf-provider check is being written")
