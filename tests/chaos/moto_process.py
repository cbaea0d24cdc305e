"""awsworld's moto server (``awsworld.local.MotoServer``: loopback, serialized DynamoDB, journaled
transactions) in a child process.

The crash suite is CPU-bound, and an in-process emulator shares the test process's GIL with the handlers it
serves: measured, moto takes more than half of a trial's CPU. In its own process it runs on the other core.
The object quacks like a started ``MotoServer`` for ``LocalAWS(moto=...)``: ``running`` and ``endpoint_url``.
"""

from __future__ import annotations

import contextlib
import multiprocessing
from multiprocessing.connection import Connection


def _serve(connection: Connection) -> None:
    from awsworld.local import MotoServer

    server = MotoServer().start()
    connection.send(server.endpoint_url)
    try:
        connection.recv()  # until the parent says stop, or goes away (EOFError)
    except EOFError:
        pass
    finally:
        server.stop()


class MotoProcess:
    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        self._connection, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child,), name="chaos-moto", daemon=True)
        self._endpoint_url: str | None = None

    def start(self) -> MotoProcess:
        self._process.start()
        if not self._connection.poll(60):
            self._process.kill()
            raise RuntimeError("the moto server process did not start within 60 s")
        self._endpoint_url = str(self._connection.recv())
        return self

    @property
    def running(self) -> bool:
        return self._endpoint_url is not None and self._process.is_alive()

    @property
    def endpoint_url(self) -> str:
        if self._endpoint_url is None:
            raise RuntimeError("the moto server process is not started")
        return self._endpoint_url

    def stop(self) -> None:
        if self._process.is_alive():
            with contextlib.suppress(OSError):
                self._connection.send("stop")
            self._process.join(10)
            if self._process.is_alive():
                self._process.kill()
        self._endpoint_url = None
