"""``HttpClient``: the ``Client`` of a World served over HTTP (``awsworld serve``), for a process that has the
server's URL and not the stack's AWS resources: start runs, read them, wait for their end, resume hooks, cancel,
read streams live. It is a ``Client`` (every method, its checks and its errors are ``Client``'s own) on an
``HttpWorld`` (``client/http_world.py``), so nothing about a call differs but where the World is::

    async with HttpClient("http://127.0.0.1:8787") as client:          # a loopback server
        run = await client.start(checkout, "order-17")
        print(await run.result())

    HttpClient(url, token="...")                  # a server started with a bearer token
    HttpClient(url, aws_region="eu-west-1")       # the stack's Function URL (AuthType AWS_IAM): SigV4-signed
"""

from __future__ import annotations

from types import TracebackType

from ..authoring.definitions import Registry
from .client import Client, Waiting
from .http_world import BearerToken, HttpWorld, SigV4


class HttpClient(Client):
    def __init__(self, url: str, *, token: str | None = None, aws_region: str | None = None,
                 registry: Registry | None = None, waiting: Waiting | None = None) -> None:
        """``url``: the server's base URL. ``token``: its bearer token; ``aws_region``: sign every request with
        SigV4 for that region (the stack's Function URL; credentials as botocore finds them). ``registry`` and
        ``waiting``: as for ``Client``."""
        if token and aws_region:
            raise ValueError("give a token or an AWS region to sign with, not both")
        auth = BearerToken(token) if token else SigV4(aws_region) if aws_region else None
        self.http_world = HttpWorld(url, auth=auth)
        super().__init__(self.http_world, registry=registry, waiting=waiting)

    async def aclose(self) -> None:
        await self.http_world.close()

    async def __aenter__(self) -> HttpClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()
