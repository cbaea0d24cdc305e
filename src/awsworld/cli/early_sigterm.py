"""SIGTERM as a Ctrl-C of ``awsworld dev``, ``serve`` and ``ui`` from the first line of ``cli/__init__``, before the
command's modules load (0.1 s and more: argparse, the deploy code, every command group's module), and not only from
their own handlers (``cli/dev.CtrlC``'s ``installed``, dev's first line; ``_http/listen.sigterm_as_ctrl_c`` once a
server starts): a SIGTERM in that first second ended them by Python's default, exit -15 and nothing said, where a
SIGTERM a moment later says ``stopped`` and exits 130 (docs/get-started/dev.md, docs/reference/cli.md).

Here the handler raises ``KeyboardInterrupt``, which ``cli/__init__`` answers as the Ctrl-C it is during its
imports and ``main`` after them (``stopped``, exit 130), and records the press: one that the interrupted frame
swallowed (a ``__del__`` or a weakref callback running at that moment prints it as "Exception ignored") is taken
up by ``CtrlC.installed``, which undoes dev's start as soon as it begins. Installed for the long-running commands
whose SIGTERM is a Ctrl-C (``STOPPED_BY_SIGTERM``); every other command keeps Python's default. It imports only
``signal`` and ``sys`` (built in: nothing to load before the handler is in place)."""

from __future__ import annotations

import signal
import sys

STOPPED_BY_SIGTERM = frozenset({"dev", "serve", "ui"})
"""The commands that run until stopped, and stop on SIGTERM (a process manager's, ``kill``) as on Ctrl-C."""

received = False
"""Whether a SIGTERM came before dev's own handler took over (``cli/dev.CtrlC.installed`` reads it)."""


def _press(signum: int, frame: object) -> None:
    global received
    received = True
    raise KeyboardInterrupt


def stops_on_sigterm(argv: list[str]) -> bool:
    """Whether this process is ``awsworld dev``, ``serve`` or ``ui`` (``STOPPED_BY_SIGTERM``): its console script,
    ``python -m awsworld.cli`` (whose ``argv[0]`` is ``-m`` while the package imports) or a program that set
    ``argv[0]`` to ``awsworld``, with one of them as the command (the first argument that is not an option:
    ``--debug dev`` too). An import of the CLI by another program (a test runner) installs nothing."""
    if not argv or (argv[0] != "-m" and argv[0].replace("\\", "/").rsplit("/", 1)[-1] != "awsworld"):
        return False
    return next((arg for arg in argv[1:] if not arg.startswith("-")), None) in STOPPED_BY_SIGTERM


def install() -> None:
    """SIGTERM raises ``KeyboardInterrupt`` from now on, if this process is ``awsworld dev``, ``serve`` or ``ui``
    (``stops_on_sigterm``) and this is its main thread (where a handler can be set), until the command's own handler
    replaces it."""
    if stops_on_sigterm(sys.argv):
        try:  # noqa: SIM105 (contextlib.suppress: one more module to load before the handler is set)
            signal.signal(signal.SIGTERM, _press)
        except ValueError:  # not the main thread: the CLI imported by a program's thread, not run
            pass
