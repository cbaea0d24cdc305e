"""``awsworld serve`` as a process for the tests (``tests/cli/test_serve_cli.py``, and the Client's tests over HTTP
in ``tests/runtime/conftest.py``): started on 127.0.0.1 port 0 with a ready file, stopped by SIGTERM (then killed)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tied import tied  # tests/tied.py (tests/ is on sys.path)

AWSWORLD = str(Path(sys.executable).with_name("awsworld"))


def start_serve(folder: Path, *args: str, cwd: Path | None = None, timeout: float = 60.0
                ) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``awsworld serve ARGS --port 0`` (its log and ready file in ``folder``); return it and its URL."""
    ready = folder / "ready"
    log_path = folder / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen([AWSWORLD, "serve", *args, "--port", "0", "--ready-file", str(ready)],
                                   cwd=cwd, stdout=log, stderr=subprocess.STDOUT, preexec_fn=tied())
    deadline = time.monotonic() + timeout
    while not ready.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            stop_serve(process)
            raise RuntimeError(f"awsworld serve did not start: {log_path.read_text(errors='replace')[-2000:]}")
        time.sleep(0.05)
    return process, ready.read_text().strip()


def stop_serve(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
