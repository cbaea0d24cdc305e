"""Runs LocalStack in the interpreter of its own venv and ends it when the parent's pipe to stdin closes.

Started by ``localstack_server.LocalStack`` as ``<venv>/bin/python localstack_launch.py``: a plain script in
another interpreter, so it imports nothing of awsworld. A watcher thread reads stdin (never written); at end of
file (the parent is gone, however it ended) it sends this process SIGTERM, LocalStack's own clean shutdown, and
exits hard if that has not finished within ten seconds.
"""

from __future__ import annotations

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
    runpy.run_module("localstack.runtime.main", run_name="__main__", alter_sys=True)
