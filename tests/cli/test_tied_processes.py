"""A test's ``awsworld dev`` ends with the process that runs the test, however that process ends (``tests/tied.py``).

A pytest run killed outright (``kill -9``, a CI job's time limit) runs no ``finally``: it left ``awsworld dev``
running for good, under init, with its emulator and its ports. Here a parent process starts dev through the
tests' own helper (``Dev``, as every CLI test does), is killed with SIGKILL, and dev must be gone soon after.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tied import running  # tests/tied.py (tests/ is on sys.path)

TESTS = Path(__file__).resolve().parents[1]
APP = """
from awsworld import step, workflow

@step
async def s(x: int) -> int:
    return x

@workflow
async def w(x: int) -> int:
    return await s(x)
"""




@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's (tests/tied.py)")
def test_a_tests_awsworld_dev_ends_when_the_process_that_started_it_is_killed(tmp_path: Path) -> None:
    (tmp_path / "tiedapp.py").write_text(APP)
    script = (f"import sys, time\nsys.path[:0] = [{str(TESTS)!r}]\nfrom pathlib import Path\n"
              "from cli.test_cli import Dev\n"
              f"dev = Dev(Path({str(tmp_path)!r}), Path({str(tmp_path / 'state')!r}), [], module='tiedapp')\n"
              "print(dev.process.pid, flush=True)\ntime.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        assert line.strip().isdigit(), "the parent did not start awsworld dev"
        dev = int(line)
        assert running(dev)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
    deadline = time.monotonic() + 10
    while running(dev) and time.monotonic() < deadline:
        time.sleep(0.1)
    if running(dev):  # clean up before failing: this test must not leave it running
        os.kill(dev, signal.SIGKILL)
        pytest.fail("awsworld dev outlived the process that started it")
