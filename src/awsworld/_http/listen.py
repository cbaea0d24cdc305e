"""An ASGI app served by uvicorn on a local address for the length of a block: ``awsworld serve`` (``cli/serve.py``)
and the apps the tests and ``bench/push.py`` deliver to. Port 0 takes a free port; ``Listening.url`` says which.
uvicorn offers a ``started`` flag and no event, so the start is polled."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import uvicorn
from starlette.types import ASGIApp

WILDCARD_HOSTS = frozenset({"0.0.0.0", "::"})
"""Hosts that listen on every interface: no client can reach the server by such a name from another machine."""
GRACEFUL_SECONDS = 2
"""How long a server stopped by Ctrl-C (``awsworld serve``, ``awsworld ui``) lets the requests under way finish
before it cancels them: a request waiting on an endpoint that never answers otherwise held the stop for good
(uvicorn waits without end by default; tests/cli/test_ctrl_c_blocked.py)."""
CUT_OFF_SECONDS = 1.0
"""How long the end of a server waits for the requests its stop cancelled to end (they end at once)."""
UVICORN_LOGGER = "uvicorn.error"
"""The logger uvicorn says its stop and each request's unhandled exception on."""
GRACE_EXCEEDED = "Cancel %s running task(s), timeout graceful shutdown exceeded"
"""uvicorn's record (its message before the arguments) of a stop whose grace ran out (uvicorn's ``Server.shutdown``)."""


class CutOff(logging.Filter):
    """What uvicorn says of the requests it cancels when a stop's grace runs out, taken off its log and counted:
    its ``ERROR: Cancel 1 running task(s) ...`` line, and for each request an ``Exception in ASGI application``
    record whose exception is that ``CancelledError``, printed with a page of traceback through Starlette and the
    handler (a long poll, a live stream read, a request waiting on an endpoint that never answers). Nothing went
    wrong in the handler: the operator stopped the server. ``cut_off`` says it in one line instead."""

    def __init__(self) -> None:
        super().__init__()
        self.requests = 0
        """How many requests under way the stop cancelled when its grace ran out."""

    def filter(self, record: logging.LogRecord) -> bool:
        count = record.args[0] if isinstance(record.args, tuple) and record.args else None
        if record.msg == GRACE_EXCEEDED and isinstance(count, int):
            self.requests += count
            return False
        return not (record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError))

    def said(self, command: str, answer: str = "a 500") -> str | None:
        """The line ``command`` says at its stop if it cancelled requests, else None; ``answer``: what such a
        request's client got (``serve``'s a 503, ``_http/app.CutOffAnswer``)."""
        if not self.requests:
            return None
        return (f"{command}: stopped; {self.requests} request(s) still under way after {GRACEFUL_SECONDS} s "
                f"were cut off (their clients got {answer} or a closed connection)")


@contextlib.contextmanager
def cut_off_quietly() -> Iterator[CutOff]:
    """Within the block, uvicorn's records of the requests a stop cancels are counted, not printed (``CutOff``)."""
    logger = logging.getLogger(UVICORN_LOGGER)
    cut_off = CutOff()
    logger.addFilter(cut_off)
    try:
        yield cut_off
    finally:
        logger.removeFilter(cut_off)


def _sigterm_is_a_ctrl_c(signum: int, frame: object) -> None:
    signal.raise_signal(signal.SIGINT)


def sigterm_as_ctrl_c() -> None:
    """From now on SIGTERM (``kill``, a process manager's stop) stops this process as Ctrl-C does: for ``awsworld
    serve`` and ``awsworld ui``, whose uvicorn stops on either, then raises the signal it stopped on again under the
    handler it found (``uvicorn.Server.capture_signals``): Python's default for SIGTERM ended the process there, exit
    -15 and nothing said, where a Ctrl-C's way out says how many requests it cut off, if any, then ``stopped``, and
    exits 130 (``cli/exit_codes.STOPPED``). The handler sends SIGINT, so whatever answers a Ctrl-C at that moment
    (asyncio's ``Runner``, uvicorn's own handler, Python's ``KeyboardInterrupt``) answers it. The CLI's main thread
    only."""
    signal.signal(signal.SIGTERM, _sigterm_is_a_ctrl_c)


class Listening:
    """A running server: its base ``url`` (``http://host:port``, an IPv6 host in brackets; a wildcard host's is
    the loopback address, the one name that surely reaches it from this machine) and ``wait`` for its end (uvicorn
    ends on SIGINT or SIGTERM: ``sigterm_as_ctrl_c``)."""

    def __init__(self, server: uvicorn.Server, task: asyncio.Task[None], host: str, port: int,
                 cut_off: CutOff) -> None:
        self.server = server
        self.cut_off = cut_off
        """The requests under way that the stop cancelled once its grace ran out (counted by the block's end)."""
        self.task = task
        self.host = host
        self.port = port
        """The port of the socket ``listening`` bound (not read back from uvicorn's servers: a Ctrl-C in the moment
        uvicorn starts has closed them by the time they are read, which failed ``awsworld serve`` with an
        ``IndexError``, exit 1, where a stop is exit 130: tests/cli/test_server_stop.py)."""
        reached = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
        self.url = f"http://{reached if ':' not in reached else f'[{reached}]'}:{self.port}"

    def where(self) -> str:
        """Where clients reach it, for people: the URL, or for a wildcard host the port on every interface, by
        this machine's name from elsewhere and by ``url`` here."""
        if self.host not in WILDCARD_HOSTS:
            return self.url
        return (f"every interface, port {self.port}: http://{socket.gethostname()}:{self.port} (or this machine's "
                f"address) from other machines, {self.url} here")

    async def wait(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


def _tcp(listener: socket.socket) -> socket.socket:
    """``listener`` as a socket whose ``proto`` says TCP. ``socket.create_server`` leaves it 0, and asyncio sets
    ``TCP_NODELAY`` only on the connections of a socket whose ``proto`` is ``IPPROTO_TCP`` (what uvicorn's own bind
    gives): without it, a response written in two parts (its headers, then its body) waited for the client's delayed
    ACK on every request but a connection's first, 40 ms each (``bench/http_keepalive.py``: a TypeScript World
    reusing its connection made 40 requests a second, one at a time, where a new connection per request made 300)."""
    return socket.socket(listener.family, socket.SOCK_STREAM, socket.IPPROTO_TCP, fileno=listener.detach())


@asynccontextmanager
async def listening(app: ASGIApp, *, host: str = "127.0.0.1", port: int = 0,
                    graceful_seconds: int | None = None) -> AsyncIterator[Listening]:
    """Serve ``app`` on ``host:port`` until the block ends (then stop it, ``graceful_seconds`` at most for open
    connections; those it then cancels are counted in ``Listening.cut_off``, not printed with a traceback each).
    The socket is bound here, so an address that cannot be had (a port taken) is this ``OSError``, not uvicorn's
    exit from inside its task."""
    listener = _tcp(socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET))
    bound: int = listener.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                                           lifespan="off", timeout_graceful_shutdown=graceful_seconds))
    with cut_off_quietly() as cut_off:
        task = asyncio.create_task(server.serve(sockets=[listener]))
        while not server.started and not task.done():  # noqa: ASYNC110 (uvicorn offers a flag, no event)
            await asyncio.sleep(0.01)
        if task.done():
            await task
            raise OSError(f"could not listen on {host}:{port}")
        try:
            yield Listening(server, task, host, bound, cut_off)
        finally:
            server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await _cancelled_requests_ended(server)


async def _cancelled_requests_ended(server: uvicorn.Server) -> None:
    """Let the requests the stop cancelled end (a turn of the loop each, ``CUT_OFF_SECONDS`` at most for one that
    holds on to its cancellation) while their records are still ``CutOff``'s: uvicorn's serving ends as soon as it
    has cancelled them, and each says its ``CancelledError`` when it next runs."""
    if requests := list(server.server_state.tasks):
        await asyncio.wait(requests, timeout=CUT_OFF_SECONDS)
