"""The servers a test starts as processes (``awsworld dev``, ``serve``, ``ui``, a ``--follow``) die with the process
that runs the test.

Each test stops its own in a ``finally``, but a pytest run killed outright (``kill -9``, a CI job's time limit, an
xdist worker that crashed) runs no ``finally``: an interrupted run left ``awsworld dev`` running for good, with its
emulator and its ports (reproduced: ``kill -9`` of pytest during ``tests/cli/test_deployments_cli.py``, and dev went
on under init). On Linux such a child asks the kernel for SIGKILL when its parent goes (``prctl(PR_SET_PDEATHSIG)``,
between fork and exec: ``preexec_fn=tied()``); dev's own children (DynamoDB Local, LocalStack) then end with it, by
their stdin pipe (``awsworld/local/emulator_process.py``). Elsewhere (macOS has no such call) nothing is set.

The kernel's parent is the *thread* that started the child: start them from the test's own thread, as every helper
here does, never from a thread that ends before the child should.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

PR_SET_PDEATHSIG = 1

_PRCTL = None
if sys.platform.startswith("linux"):
    try:
        _PRCTL = ctypes.CDLL(None, use_errno=True).prctl  # looked up here, not in the forked child
    except (OSError, AttributeError):
        _PRCTL = None


def tied() -> Callable[[], None] | None:
    """A ``preexec_fn`` that ties the child to this process (None where the platform has no way)."""
    prctl = _PRCTL
    if prctl is None:
        return None
    parent = os.getpid()

    def tie() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the call: nothing would signal the child
            os._exit(1)

    return tie


def running(pid: int) -> bool:
    """Whether any thread of process ``pid`` still runs (Linux's ``/proc``): a process whose main thread has ended
    (a zombie leader) may still serve from others, and a dead one, reaped or not, holds no port. What the tests
    that kill a parent ask of the child it started."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except (FileNotFoundError, ProcessLookupError):
        return False
    states = []
    for task in tasks:  # a thread that ends while they are read is gone, not the process: the others count
        try:
            states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return any(state not in ("Z", "X") for state in states)


__all__ = ["running", "tied"]
