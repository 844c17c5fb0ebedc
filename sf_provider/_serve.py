"""`sf-provider serve`: a tool registry over stdio, through the one invocation layer."""

from __future__ import annotations

import argparse


def run_serve(args: argparse.Namespace) -> int:
    """Serve `args.tools` over stdio until EOF or SIGTERM."""
    raise NotImplementedError("sf-provider serve is being written")
