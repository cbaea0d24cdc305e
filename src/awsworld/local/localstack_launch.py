"""Runs LocalStack in the interpreter of its own venv and ends it when the parent's pipe to stdin closes.

Started by ``localstack_server.LocalStack`` as ``<venv>/bin/python localstack_launch.py``: a plain script in
another interpreter, so it imports nothing of awsworld. A watcher thread reads stdin (never written); at end of
file (the parent is gone, however it ended) it sends this process SIGTERM, LocalStack's own clean shutdown, and
exits hard if that has not finished within ten seconds.

Once LocalStack's shutdown is done (its ``main`` raises ``SystemExit``), the launcher runs the ``atexit`` handlers,
flushes its output and ends the process with ``os._exit``, skipping the interpreter's finalization: that
garbage-collected LocalStack's millions of objects (the services' botocore models) for 3 to over 10 s of CPU after
every service had stopped, so a stop often outlasted ``emulator_process.STOP_GRACE_SECONDS`` and was killed (a
thread dump during that time showed only "Garbage-collecting"). Its data lives in a temporary root its parent
removes, so nothing is lost by not collecting it.
"""

from __future__ import annotations

import atexit
import os
import runpy
import signal
import sys
import threading
import time


def _watch_parent() -> None:
    sys.stdin.read()
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(10)
    os._exit(1)


if __name__ == "__main__":
    sys.path.pop(0)  # this file's directory: nothing in it may shadow LocalStack's modules
    threading.Thread(target=_watch_parent, name="parent-watch", daemon=True).start()
    code: object = 0
    try:
        runpy.run_module("localstack.runtime.main", run_name="__main__", alter_sys=True)
    except SystemExit as exit:
        code = exit.code
    atexit._run_exitfuncs()  # (what finalization would run first; the collection it would then do is skipped)
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)
