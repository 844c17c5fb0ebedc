"""`sf-provider gateway --offline` as a user runs it: a process of its own, on a free port."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fresh_project import SOURCE


@dataclass
class OfflineGateway:
    """A running `sf-provider gateway --offline`: its URL, and its log once it stopped."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextmanager
def offline_gateway(
    where: Path, command: Sequence[str] = ("sf-provider", "gateway", "--offline")
) -> Iterator[OfflineGateway]:
    """Run `command` (an `sf-provider gateway --offline` line) on a free port until left; the
    gateway's temp dir is `where` (its queries' dirs go there), and its log `where/gateway.log`."""
    program, *args = command
    executable = Path(sys.executable).with_name(program)
    log_path = where / "gateway.log"
    env = {**os.environ, "TMPDIR": str(where), "PYTHONPATH": SOURCE}
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(executable), *args, "--port", "0"], stdout=log, stderr=log, env=env
        )
    try:
        deadline = time.monotonic() + 120  # a "no hang" bound only: start-up under load
        while "Uvicorn running on" not in log_path.read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the gateway did not start:\n{log_path.read_text()}")
            time.sleep(0.05)
        url = log_path.read_text().split("Uvicorn running on ")[1].split()[0]
        yield OfflineGateway(url, process, log_path)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
