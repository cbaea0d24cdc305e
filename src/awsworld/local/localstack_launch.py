"""Runs LocalStack in the interpreter of its own venv and ends it when the parent's pipe to stdin closes.

Started by ``localstack_server.LocalStack`` as ``<venv>/bin/python localstack_launch.py``: a plain script in
another interpreter, so it imports no awsworld package (it loads the one module it needs, ``_http/loopback.py``, by
its path). A watcher thread reads stdin (never written); at end of file (the parent is gone, however it ended) it
sends this process SIGTERM, LocalStack's own clean shutdown, and exits hard if that has not finished within ten
seconds.

LocalStack checks no credentials, and binding 127.0.0.1 does not keep out a web page open on this machine: through
DNS rebinding (``Host: evil.example:PORT``) a page read the bucket's payloads and the queue's messages and sent
messages of its own (LocalStack's CORS also lets ``https://app.localstack.cloud`` read every answer). So the first
handler of LocalStack's gateway (``guard_gateway``) answers a 403, before any other handler reads the request,
unless the rule every awsworld server on loopback keeps allows it (``from_this_machine`` in
``_http/loopback.py``, loaded by its path: that module imports only the standard library).

Once LocalStack's shutdown is done (its ``main`` raises ``SystemExit``), the launcher runs the ``atexit`` handlers,
flushes its output and ends the process with ``os._exit``, skipping the interpreter's finalization: that
garbage-collected LocalStack's millions of objects (the services' botocore models) for 3 to over 10 s of CPU after
every service had stopped, so a stop often outlasted ``emulator_process.STOP_GRACE_SECONDS`` and was killed (a
thread dump during that time showed only "Garbage-collecting"). Its data lives in a temporary root its parent
removes, so nothing is lost by not collecting it.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import runpy
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

LOOPBACK_RULE = Path(__file__).resolve().parent.parent / "_http" / "loopback.py"


def _watch_parent() -> None:
    sys.stdin.read()
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(10)
    os._exit(1)


def _load_loopback_rule() -> Any:
    spec = importlib.util.spec_from_file_location("awsworld_loopback_rule", LOOPBACK_RULE)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {LOOPBACK_RULE}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def guard_gateway() -> None:
    """Every ``LocalstackAwsGateway`` made from now on runs ``refuse_foreign`` before its own handlers: before
    LocalStack parses the request, serves ``/_localstack``, loads a service or adds its CORS headers. The
    response handlers are skipped too (``chain.terminate``): they would parse a response of a service never
    called and add CORS headers to the refusal."""
    # (installed in LocalStack's venv only, not in the one pyright reads)
    from localstack.aws.app import LocalstackAwsGateway  # pyright: ignore[reportMissingImports]

    rule = _load_loopback_rule()
    refusal = rule.EMULATOR_REFUSAL.encode()
    make = LocalstackAwsGateway.__init__

    def refuse_foreign(chain: Any, context: Any, response: Any) -> None:
        headers = context.request.headers
        if not rule.from_this_machine(headers.get("Host", ""), headers.get("Origin")):
            chain.respond(403, refusal, {"Content-Type": "text/plain"})
            chain.terminate()

    def guarded_init(self: Any, *args: Any, **kwargs: Any) -> None:
        make(self, *args, **kwargs)
        self.request_handlers.insert(0, refuse_foreign)

    LocalstackAwsGateway.__init__ = guarded_init


if __name__ == "__main__":
    sys.path.pop(0)  # this file's directory: nothing in it may shadow LocalStack's modules
    guard_gateway()
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
