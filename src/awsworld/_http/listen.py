"""An ASGI app served by uvicorn on a local address for the length of a block: ``awsworld serve`` (``cli/serve.py``)
and the apps the tests and ``bench/push.py`` deliver to. Port 0 takes a free port; ``Listening.url`` says which.
uvicorn offers a ``started`` flag and no event, so the start is polled."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
from starlette.types import ASGIApp

WILDCARD_HOSTS = frozenset({"0.0.0.0", "::"})
"""Hosts that listen on every interface: no client can reach the server by such a name from another machine."""
GRACEFUL_SECONDS = 2
"""How long a server stopped by Ctrl-C (``awsworld serve``, ``awsworld ui``) lets the requests under way finish
before it cancels them: a request waiting on an endpoint that never answers otherwise held the stop for good
(uvicorn waits without end by default; tests/cli/test_ctrl_c_blocked.py)."""


class Listening:
    """A running server: its base ``url`` (``http://host:port``, an IPv6 host in brackets; a wildcard host's is
    the loopback address, the one name that surely reaches it from this machine) and ``wait`` for its end (uvicorn
    ends on SIGINT or SIGTERM)."""

    def __init__(self, server: uvicorn.Server, task: asyncio.Task[None], host: str) -> None:
        self.server = server
        self.task = task
        self.host = host
        self.port: int = server.servers[0].sockets[0].getsockname()[1]
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
    connections). The socket is bound here, so an address that cannot be had (a port taken) is this ``OSError``,
    not uvicorn's exit from inside its task."""
    listener = _tcp(socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET))
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                                           lifespan="off", timeout_graceful_shutdown=graceful_seconds))
    task = asyncio.create_task(server.serve(sockets=[listener]))
    while not server.started and not task.done():  # noqa: ASYNC110 (uvicorn offers a flag, no event)
        await asyncio.sleep(0.01)
    if task.done():
        await task
        raise OSError(f"could not listen on {host}:{port}")
    try:
        yield Listening(server, task, host)
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await task
