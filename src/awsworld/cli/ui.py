"""``awsworld ui``: the web view of runs (``awsworld.ui``) on the stack the environment names, or on
``awsworld dev`` (paste its export lines first); served on 127.0.0.1 only, read-only unless ``--allow-writes``."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING, Any

from .errors import usage
from .output import check_config

if TYPE_CHECKING:
    from ..world.protocol import World

UI_HINT = "pip install 'awsworld[ui]'"


def register(sub: Any) -> None:
    ui = sub.add_parser("ui", help="browse runs in a web page on 127.0.0.1 (timeline, events, hooks, streams)",
                        description=__doc__)
    add_options(ui, port_flag="--port")
    ui.set_defaults(handler=_main)


def add_options(parser: argparse.ArgumentParser, *, port_flag: str) -> None:
    """``ui``'s options (``dev --ui`` takes them too, its port as ``--ui-port``)."""
    parser.add_argument(port_flag, dest="ui_port", type=int, default=8765, help="the UI's port (default 8765)")
    parser.add_argument("--ui-host", default="127.0.0.1", help="a loopback address (anything else is refused)")
    parser.add_argument("--allow-writes", action="store_true", help="show cancel and resume buttons")


def build_server(args: argparse.Namespace, *, world: World | None = None) -> Any:
    """The UI's uvicorn server for ``args``: on ``world`` (``dev --ui``'s own, Ctrl-C left to ``dev``), or on
    the ``AWSWorld`` the environment names."""
    try:
        from ..ui import check_loopback, create_app, serve
    except ImportError as error:
        raise usage(f"the UI needs Starlette and uvicorn ({error})", UI_HINT) from None
    try:
        check_loopback(args.ui_host)
    except ValueError as error:
        raise usage(str(error), "the UI has no login: reach it from elsewhere through an SSH tunnel") from None
    if world is None:
        from ..aws import AWSWorld

        app = create_app(open_world=AWSWorld, allow_writes=args.allow_writes)
    else:
        app = create_app(world, allow_writes=args.allow_writes)
    return serve(app, host=args.ui_host, port=args.ui_port, signals=world is None)


def url(args: argparse.Namespace) -> str:
    host = args.ui_host if ":" not in args.ui_host else f"[{args.ui_host.strip('[]')}]"
    return f"http://{host}:{args.ui_port}/"


def _main(args: argparse.Namespace) -> int:
    check_config()
    server = build_server(args)
    mode = "read-write (cancel, resume)" if args.allow_writes else "read-only"
    print(f"awsworld ui: {url(args)}  ({mode}; Ctrl-C stops)", file=sys.stderr)
    from .._http.listen import cut_off_quietly, sigterm_as_ctrl_c

    sigterm_as_ctrl_c()
    with cut_off_quietly() as cut_off:  # (a request still under way 2 s after Ctrl-C: one line, no traceback)
        try:
            asyncio.run(server.serve())
        finally:
            if said := cut_off.said("awsworld ui"):
                print(said, file=sys.stderr)
    return 0
