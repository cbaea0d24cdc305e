"""``awsworld serve [MODULE...]``: a World over HTTP/JSON, for the Workflow SDK's TypeScript
runtime (``packages/world-awsworld``) and for ``HttpClient`` or any service that speaks HTTP.

Which World (``--world``): ``aws`` (default) the stack the environment names (``AWSWORLD_TABLE`` ...: a deployed
stack, or ``awsworld dev``'s export lines), whose flow function runs the deliveries; ``emulator`` a fresh
stack on the embedded emulator (moto on 127.0.0.1), with its own poller running the deliveries; ``memory`` the
in-memory World, deliveries run in this process. MODULEs are imported first, so runs of their Python workflows
run here too (``emulator``, ``memory``); there the server publishes the workflow names it runs before it takes a
request, so a ``Client`` (``HttpClient`` too: ``GET /v1/published``) refuses at start a name
none of them has.

It listens on 127.0.0.1 unless ``--host`` says otherwise, and beyond loopback only with a bearer token
(``--token-file`` or ``AWSWORLD_SERVE_TOKEN``). ``--ready-file`` receives the server's URL once it accepts
requests (with ``--port 0``, the port it was given): a script starts it in the background and waits for the file.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shlex
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..settings import SETTINGS, Settings
from .errors import CONFIG_HINT, CliError, usage
from .output import check_config, import_modules

if TYPE_CHECKING:
    from ..authoring.definitions import Registry
    from ..client.client import Client
    from ..world.protocol import World

SERVE_HINT = "pip install 'awsworld[serve]' (Starlette, uvicorn, httpx and Mangum)"
DEFAULT_PORT = 8787
PLAIN_HTTP_WARNING = ("awsworld serve: warning: this is plain HTTP: beyond this machine the bearer token and every "
                      "value (inputs, results, hook payloads, stream chunks) cross the network readable by anyone on "
                      "the path; serve it behind a TLS proxy, or reach it through an SSH tunnel")
"""Said once at start when the server listens beyond loopback: the token keeps callers out, not eavesdroppers."""
MAKE_TOKEN = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
"""The command a hint gives for a token: a reader on a fresh machine has a file to write before ``--token-file``."""
PUBLICATION_KEY = "serve"
"""The key of the names ``awsworld serve`` publishes into the World it runs deliveries for (its World is its own)."""


def register(sub: Any) -> None:
    serve = sub.add_parser("serve", help="serve a World over HTTP/JSON (the TypeScript Workflow SDK, HttpClient)",
                           description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    serve.add_argument("modules", nargs="*", metavar="MODULE", help="modules defining Python workflows to run here "
                       "(imported from the current directory, or its src/)")
    serve.add_argument("--world", choices=["aws", "emulator", "memory"], default="aws",
                       help="aws: the stack the environment names (default); emulator: a fresh one on the embedded "
                       "emulator; memory: the in-memory World")
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1; another "
                       f"needs a token: --token-file or {Settings.serve_token.env})")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"the port (default {DEFAULT_PORT}; 0: a "
                       "free one, written to --ready-file)")
    serve.add_argument("--token-file", type=Path, metavar="FILE", help="a file holding the bearer token every "
                       "request must carry")
    serve.add_argument("--ready-file", type=Path, metavar="FILE", help="write the server's URL here once it "
                       "accepts requests")
    serve.set_defaults(handler=_main)


def _main(args: argparse.Namespace) -> int:
    try:
        from .._http.auth import Auth
        from .._http.listen import sigterm_as_ctrl_c
    except ImportError as error:
        raise usage(f"awsworld serve needs Starlette and uvicorn ({error})", SERVE_HINT) from None
    token = _token(args)
    try:
        auth = Auth.for_host(args.host, token)
    except ValueError as error:  # (a token too short: make a longer one; none beyond loopback: stay on it, or give one)
        hint = (f"make a longer one: {MAKE_TOKEN}" if token else
                "keep the default --host 127.0.0.1, or give a token of at least 16 characters")
        raise usage(str(error), hint) from None
    if args.world == "aws":
        check_config("--world emulator serves a World of its own, on the embedded emulator; --world aws (the "
                     f"default) serves a stack: {CONFIG_HINT}")
    elif args.world == "emulator":
        try:
            import moto  # noqa: F401
        except ImportError:
            raise usage("--world emulator needs the embedded emulator", "pip install 'awsworld[local]'") from None
    args.modules = import_modules(args.modules)  # (a file's path given for a module: its module's name)
    _log_refusals()
    sigterm_as_ctrl_c()
    asyncio.run(_serve(args, auth))
    # Serving ends only when Ctrl-C or SIGTERM stops it (a port it cannot have is a CliError out of _serve). uvicorn
    # took the signal, so the stop is answered here as the CLI answers every command's Ctrl-C: "stopped", exit 130
    # (``cli.main``; ``ui`` ends so too), after _serve's line for the requests cut off, if any. It exited 0 when
    # none was, so a script could not tell a stopped server from one that finished (tests/cli/test_server_stop.py).
    raise KeyboardInterrupt


def _log_refusals() -> None:
    """The requests the server refuses (a wrong or missing token, a host that is not loopback: ``_http/auth.py``)
    as one line each on stderr, beside the server's own lines, so its operator sees what the client was told."""
    import logging

    refusals = logging.getLogger("awsworld.serve")
    if not refusals.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("awsworld serve: %(message)s"))
        refusals.addHandler(handler)
        refusals.setLevel(logging.WARNING)
        refusals.propagate = False


def _token(args: argparse.Namespace) -> str | None:
    if args.token_file is not None:
        try:
            return args.token_file.read_text(encoding="utf-8").strip() or None
        except OSError as error:
            raise usage(f"cannot read --token-file: {error}",
                        f"give a file holding the token; make one (yours only): (umask 077; {MAKE_TOKEN} > "
                        f"{shlex.quote(str(args.token_file))})") from None
    return SETTINGS.serve_token


@dataclass
class ServedWorld:
    world: World
    client: Client
    project: str
    runs_here: Registry | None = None
    """The registry of the workflows whose deliveries this process runs (``memory``, ``emulator``); None for
    ``aws``, whose flow function runs them and publishes its own names."""


@asynccontextmanager
async def _world(kind: str) -> AsyncIterator[ServedWorld]:
    """The World to serve, with what runs its deliveries (nothing for ``aws``: the stack's flow function does)."""
    from ..client.client import Client

    if kind == "memory":
        from ..testing import WorkflowTestEnv

        async with WorkflowTestEnv(time_skipping=False) as env:
            yield ServedWorld(env.world, Client(env.world, registry=env.worker.registry), "memory",
                              env.worker.registry)
    elif kind == "emulator":
        from ..local import LocalAWS

        async with LocalAWS() as local:
            assert local.poller is not None and local.client is not None
            yield ServedWorld(local.world, local.client, local.config.table_name, local.poller.worker.registry)
    else:
        from ..aws import AWSWorld

        world = AWSWorld()
        try:
            yield ServedWorld(world, Client(world), world.config.table_name)
        finally:
            await world.close()


async def _serve(args: argparse.Namespace, auth: Any) -> None:
    """Serve until Ctrl-C (or SIGTERM), then say in one line how many requests under way were cut off after their
    grace, if any (the caller says ``stopped``: ``_main``)."""
    from .._http.app import create_app
    from .._http.listen import GRACEFUL_SECONDS, listening
    from .._http.loopback import LOOPBACK_HOSTS
    from .._published.model import publish

    async with _world(args.world) as served:
        if served.runs_here is not None:  # before any request: nothing was delivered here unpublished ("ahead")
            await publish(served.world, served.runs_here, host="awsworld serve", ahead=True, key=PUBLICATION_KEY)
        app = create_app(served.world, auth=auth, client=served.client, project=served.project,
                         deployment_id=await served.world.get_deployment_id())
        async with contextlib.AsyncExitStack() as stack:
            try:
                running = await stack.enter_async_context(
                    listening(app, host=args.host, port=args.port, graceful_seconds=GRACEFUL_SECONDS))
            except OSError as error:
                raise CliError(f"cannot listen on {args.host}:{args.port}: {error.strerror or error}",
                               "choose another --port (0: a free one)") from None
            if args.ready_file is not None:
                partial = args.ready_file.with_name(args.ready_file.name + ".partial")
                partial.write_text(running.url + "\n", encoding="utf-8")
                os.replace(partial, args.ready_file)
            print(f"awsworld serve: {running.where()} ({args.world} World; {auth.mode}; Ctrl-C stops)",
                  file=sys.stderr, flush=True)
            if args.host not in LOOPBACK_HOSTS:
                print(PLAIN_HTTP_WARNING, file=sys.stderr, flush=True)
            await running.wait()
    if said := running.cut_off.said("awsworld serve", "a 503"):
        print(said, file=sys.stderr, flush=True)
