"""Who may call ``awsworld serve``: checked before any endpoint runs, so a refused request reads and writes nothing.

Three modes (``Auth``):

- ``loopback`` (the default): no credentials, and only requests addressed to a loopback name (``Host`` is
  checked, so a web page elsewhere cannot reach the server through DNS rebinding) that no web page of another site
  sent (``Origin``, which a browser adds to a cross-site request: a form's POST without a body cancelled a run
  through ``/v1/client/runs/{id}/cancel``); the rule is ``_http/loopback.py``'s. The server itself binds 127.0.0.1.
- ``token``: every request carries ``Authorization: Bearer <token>`` (compared in constant time); required
  whenever the server listens beyond loopback (``awsworld serve`` refuses to start otherwise).
- ``aws-iam``: the app runs behind a Lambda Function URL whose ``AuthType`` is ``AWS_IAM`` (``template.yaml``'s
  ``WorldServerFunction``): AWS has checked the caller's SigV4 signature and IAM permission before the request
  reaches it, so there is nothing left to check here.

A refusal is a 401 (missing or wrong token; with ``WWW-Authenticate: Bearer``), a 421 (a host that is not loopback)
or a 403 (another site's page), with the same ``{"error": ...}`` body as every other error (``_http/wire.py``). The
server's side hears of it too: a warning on the ``awsworld.serve`` logger (``awsworld serve`` prints it on stderr)
naming the request, its sender and why, at most one line a minute (with how many were refused unlogged since), so
whoever runs the server sees a client with a wrong token without a scanner flooding the log.
"""

from __future__ import annotations

import hmac
import logging
import time
from dataclasses import dataclass
from typing import Literal

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from .loopback import LOOPBACK_HOSTS, loopback_host, loopback_origin
from .wire import refusal_body

MIN_TOKEN_LENGTH = 16

AuthMode = Literal["loopback", "token", "aws-iam"]
REFUSAL_LOG_SECONDS = 60.0
"""At most one refusal line this often (the first at once); the ones between are counted in the next line."""

log = logging.getLogger("awsworld.serve")


@dataclass(frozen=True)
class Auth:
    mode: AuthMode
    token: str | None = None

    def __post_init__(self) -> None:
        if self.mode == "token" and (self.token is None or len(self.token) < MIN_TOKEN_LENGTH):
            raise ValueError(f"a bearer token must be at least {MIN_TOKEN_LENGTH} characters")

    @classmethod
    def for_host(cls, host: str, token: str | None) -> Auth:
        """What a server on ``host`` requires: the token when one is given, else loopback only (a host beyond
        loopback without a token is refused: ``ValueError``)."""
        if token:
            return cls("token", token)
        if host not in LOOPBACK_HOSTS:
            raise ValueError(f"serving on {host} needs authentication: give a bearer token (AWSWORLD_SERVE_TOKEN "
                             "or --token-file)")
        return cls("loopback")


def is_loopback(host: str) -> bool:
    return host in LOOPBACK_HOSTS


class Guard:
    """The ASGI middleware that applies an ``Auth`` to every HTTP request."""

    def __init__(self, app: ASGIApp, *, auth: Auth) -> None:
        self.app = app
        self.auth = auth
        self._expected = f"Bearer {auth.token}".encode() if auth.token else b""
        self._logged_at: float | None = None
        self._unlogged = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self._refusal(dict(scope["headers"]))
            if refusal is not None:
                response, why = refusal
                self._log(scope, response.status_code, why)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _refusal(self, headers: dict[bytes, bytes]) -> tuple[JSONResponse, str] | None:
        """The answer to a request this server does not take, and why in the server's words (None: take it)."""
        mode = self.auth.mode
        if mode == "aws-iam":
            return None
        if mode == "token":
            given = headers.get(b"authorization", b"")
            if hmac.compare_digest(given, self._expected):
                return None
            why = "a bearer token is required" if not given else "the bearer token is not the server's"
            return (_refused(401, "unauthenticated", f"{why} (Authorization: Bearer <token>)",
                             {"www-authenticate": 'Bearer realm="awsworld"'}),
                    f"{why} (the caller's token: world-awsworld's WORLD_SERVER_TOKEN, HttpClient's token)")
        host = headers.get(b"host", b"").decode("latin-1")
        if not loopback_host(host):
            return (_refused(421, "not-loopback", f"this awsworld server listens on loopback without a token and "
                             f"answers requests addressed to 127.0.0.1, localhost or [::1] only, not {host!r}: "
                             "use one of those in the URL, or start the server with --host and --token-file to "
                             "reach it by another name"),
                    f"addressed to {host!r}, not a loopback name")
        origin = headers.get(b"origin")
        if not loopback_origin(origin.decode("latin-1") if origin is not None else None):
            sent = origin.decode("latin-1") if origin is not None else ""
            return (_refused(403, "cross-origin", f"this awsworld server listens on loopback without a token and "
                             f"answers programs on this machine, not a web page of {sent!r}: a browser's request "
                             "to it needs a server started with --token-file"),
                    f"sent by a web page of {sent!r}")
        return None

    def _log(self, scope: Scope, status: int, why: str) -> None:
        now = time.monotonic()
        if self._logged_at is not None and now - self._logged_at < REFUSAL_LOG_SECONDS:
            self._unlogged += 1
            return
        client = scope.get("client")
        sender = client[0] if client else "an unknown sender"
        since = f" ({self._unlogged} more refused since the last such line)" if self._unlogged else ""
        log.warning("refused %s %s from %s with %d: %s%s", scope.get("method", "?"), _loggable(scope.get("path", "?")),
                    sender, status, why, since)
        self._logged_at, self._unlogged = now, 0


HOOK_TOKEN_PATH = "/v1/hooks/by-token/"


def _loggable(path: str) -> str:
    """A refused request's path as the log shows it: a hook's token in it (``GET /v1/hooks/by-token/{token}``) is
    left out, since a webhook's token is all it takes to resume it, and those who read the server's log need not
    hold it (a refused caller may still have it right)."""
    return HOOK_TOKEN_PATH + "..." if path.startswith(HOOK_TOKEN_PATH) else path


def _refused(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(refusal_body(status, code, message), status_code=status, headers=headers)
