"""Whether an HTTP request to a server on loopback came from this machine's own programs, read off its ``Host`` and
``Origin`` headers: one rule for every server awsworld runs on 127.0.0.1 without credentials (``awsworld serve``'s
default, ``_http/auth.py``; ``awsworld ui``, ``ui/app.py``; the embedded emulator under ``awsworld dev`` and
``serve --world emulator``, ``local/moto_server.py``; LocalStack, ``local/localstack_launch.py``; DynamoDB Local,
``local/java/LoopbackDynamoDBLocal.java``).

It imports only the standard library: LocalStack's launcher loads this file by its path in LocalStack's own
interpreter, where awsworld is not installed. DynamoDB Local's launcher is Java: it is given ``LOOPBACK_HOSTS`` and
``LOOPBACK_SUFFIX`` (``local/dynamodb_local.py``) and applies ``from_this_machine`` to them, and
``tests/local/test_emulator_guards.py`` holds both to one table of cases.

Binding 127.0.0.1 keeps other machines out, not the web pages open in this machine's browser, which reach a
loopback port in two ways:

- **DNS rebinding**: a page of ``evil.example`` whose name then resolves to 127.0.0.1 reads the server as its own
  origin, so the browser lets it read every answer. Its requests say ``Host: evil.example:PORT``: a server that
  answers only requests addressed to a loopback name (``loopback_host``) gives it nothing.
- **Cross-site requests**: a page elsewhere sends a request to ``http://127.0.0.1:PORT`` (a form's POST needs no
  permission). The browser says where the request comes from: ``Origin`` on every cross-origin request and every
  POST (``loopback_origin``). Programs (boto3, the AWS CLI, ``HttpClient``, Node's fetch) send none, and a page
  served from loopback itself (the run viewer) sends its own loopback origin.
"""

from __future__ import annotations

from urllib.parse import urlsplit

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
LOOPBACK_SUFFIX = ".localhost"

EMULATOR_REFUSAL = ("this emulator answers programs on this machine only (a request addressed to 127.0.0.1 or "
                    "localhost, without a browser's Origin of another site)")
"""The body of the 403 each emulator awsworld starts gives a request ``from_this_machine`` refuses."""

SHUTDOWN_POLL_SECONDS = 0.05
"""How often a server thread on loopback (``socketserver``'s ``serve_forever``: the embedded emulator,
``local/moto_server.py``, and ``awsworld dev``'s webhook route, ``cli/dev.py``) looks for its ``shutdown()``. The
default, 0.5 s, made each stop wait a quarter of a second on average (up to half) for each of them: ``awsworld
dev``'s every stop, every test's emulator. Twenty idle wake-ups a second cost nothing measurable."""


def host_name(host: str) -> str:
    """The name of a ``Host`` header without its port (``[::1]:8787`` is ``[::1]``, ``localhost:80`` is
    ``localhost``)."""
    return host if host.endswith("]") else host.rsplit(":", 1)[0]


def loopback_name(name: str) -> bool:
    """A name that reaches only this machine: 127.0.0.1, ``localhost`` and its subdomains (RFC 6761 keeps them on
    loopback: a bucket's virtual host ``b.localhost``), ``::1``."""
    name = name.lower()
    return name in LOOPBACK_HOSTS or name.endswith(LOOPBACK_SUFFIX)


def loopback_host(host: str) -> bool:
    """Whether a request's ``Host`` header addresses a loopback name (an absent one does not)."""
    return bool(host) and loopback_name(host_name(host))


def loopback_origin(origin: str | None) -> bool:
    """Whether a request's ``Origin`` header is absent (not a browser's cross-origin request) or a page served from
    loopback. ``null`` (a sandboxed frame, a file) is not."""
    if origin is None:
        return True
    try:
        name = urlsplit(origin).hostname
    except ValueError:
        return False
    return name is not None and loopback_name(name)


def from_this_machine(host: str, origin: str | None) -> bool:
    """Whether an emulator (which checks no credentials) answers a request with these ``Host`` and ``Origin``
    headers: addressed to a loopback name, and not sent by a page of another site."""
    return loopback_host(host) and loopback_origin(origin)
