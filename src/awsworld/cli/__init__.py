"""The ``awsworld`` command: try it (``demo``), develop with it (``dev``), operate runs on a deployed stack or on
``awsworld dev`` (``start``, ``rerun``, ``runs``, ``describe``, ``events``, ``result``, ``hooks``, ``streams``,
``resume``, ``fail-hook``, ``heartbeat-hook``, ``cancel``, ``fail``, ``wake``, ``skip``, ``dlq``,
``schedules``, ``limits``), delete ended runs' data on request (``delete``), move runs between the deployments
they are pinned to (``deployments``, ``upgrade``), see them in a browser (``ui``), serve a World over HTTP
(``serve``), check code changes against stored runs (``export``, ``replay``), and deploy (``init`` writes a SAM
app, ``template`` prints its template).

Commands against a stack read its resources from AWSWORLD_TABLE, AWSWORLD_BUCKET and AWSWORLD_QUEUE_URL (``dlq``
also AWSWORLD_DLQ_URL) and the usual AWS environment or profile; ``awsworld dev`` prints the ``export`` lines for
itself. Errors are one line with a hint (``--debug`` for a traceback); exit codes: 0 ok, 1 the command failed, 2 a
usage error, 130 stopped (Ctrl-C), 141 the reader of its output went away (``| head``: nothing is said).
"""

from __future__ import annotations

import sys

from . import early_sigterm
from .exit_codes import READER_GONE, STOPPED

early_sigterm.install()  # first: a SIGTERM to dev/serve/ui from here on says "stopped", exit 130 (not Python's -15)


def stopped() -> int:
    """A Ctrl-C ended the command: ``stopped`` on stderr, exit 130, no traceback.

    And no death by SIGINT after it: CPython notes a ``KeyboardInterrupt`` that leaves code run from a string
    (``exec(source)``: every ``@dataclass`` builds its methods so as it is imported, as do ``namedtuple`` and
    template engines) as unhandled, even when a caller catches it, and ``python -m awsworld.cli`` then ends its
    process by the signal once it has said "stopped" (-2 where 130 was said; seen 3 times in 60 Ctrl-Cs during the
    command's imports; 3.11 and 3.13). Running a string clears the note: CPython sets it afresh for each."""
    print("\nstopped", file=sys.stderr)
    exec("")  # (the note cleared; tests/cli/test_dev_ctrl_c_start.py)
    return STOPPED


try:  # (a Ctrl-C while the command loads, before ``main`` runs: ``python -m awsworld.cli`` and the console script
    # import this module first; tests/cli/test_dev_ctrl_c_start.py)
    import argparse
    import contextlib
    import importlib.util
    import logging
    import os
    import threading
    import traceback
    from collections.abc import Callable
    from typing import Any, NoReturn

    from .. import __version__
    from ..deploy import init as deploy_init
    from . import demo, deployments, dev, dlq, erase, limits, park, replay, runs, schedules, serve, skip, ui, wake
    from .errors import OPERATIONAL, SPLIT_HINT, USAGE, CliError, describe, split_json
except KeyboardInterrupt:
    raise SystemExit(stopped()) from None

__all__ = ["COMMAND_GROUPS", "READER_GONE", "STOPPED", "CliError", "main", "run"]

# Each group adds its subcommands (``register(sub)``, setting ``handler`` on its parsers); a new group is one
# line here. Every command builds the whole parser, so a group's module imports at its top only what its parsers
# need (the standard library, settings, ``errors``, ``output``): what a command works with (the World and its
# models, the client, the engine, boto3) is imported inside its handler, and ``awsworld --help`` or a usage error
# costs none of it (tests/cli/test_cli_start.py; bench/cli_start.py prints the time).
COMMAND_GROUPS: list[Callable[[Any], None]] = [demo.register, dev.register, replay.register,
                                                 deploy_init.register, ui.register, wake.register,
                                                 skip.register, dlq.register, schedules.register, limits.register,
                                                 park.register, erase.register, serve.register, deployments.register]


class CommandParser(argparse.ArgumentParser):
    """The parser of ``awsworld`` and of every command (subparsers are made of their parent's class). A command's
    description is its module's docstring, written with the docs' double-backtick code spans: in a terminal a code
    span reads as one backtick each side (`awsworld dev`), as in Markdown, where the CLI reference shows it too."""

    def __init__(self, *args: Any, description: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, description=description.replace("``", "`") if description else description,
                         **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="awsworld", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--debug", action="store_true", help="print the traceback of an error")
    parser.add_argument("--version", action="version", version=f"awsworld {__version__}")
    read = argparse.ArgumentParser(add_help=False)
    read.add_argument("--json", action="store_true", help="print JSON for scripts (stable keys)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in COMMAND_GROUPS[:2]:
        register(sub)
    runs.register(sub, read)
    for register in COMMAND_GROUPS[2:]:
        register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; return its exit code. Errors become one line on stderr (see ``errors``)."""
    try:  # (building the parser takes a moment too: a Ctrl-C in it is a Ctrl-C like any other)
        parser = build_parser()
        given = sys.argv[1:] if argv is None else argv
        # --debug anywhere (an operator adds it to the command that just failed, at its end).
        args, extra = parser.parse_known_args([a for a in given if a != "--debug"])
    except KeyboardInterrupt:
        return stopped()
    if extra:  # argparse's own error, and for the pieces of a JSON value the shell split (unquoted), how to quote it
        message = f"unrecognized arguments: {' '.join(extra)}"
        parser.error(f"{message} ({SPLIT_HINT})" if split_json(extra) else message)
    args.debug = "--debug" in given
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:  # (the emulator's import is in it: a second or two in which a Ctrl-C is as welcome as later)
        if getattr(args, "needs_emulator", False) and not _emulator_installed():
            print(f"awsworld {args.command}: needs the embedded emulator (hint: pip install 'awsworld[local]')",
                  file=sys.stderr)
            return USAGE
        code = handler(args)
        sys.stdout.flush()  # here, where a reader that stopped reading is handled, not at the interpreter's exit
        return code
    except BrokenPipeError:
        return _reader_gone()
    except KeyboardInterrupt:
        return stopped()
    except Exception as error:
        if args.debug:
            traceback.print_exc()
        failure = describe(error)
        print(f"awsworld {args.command}: {failure}", file=sys.stderr)
        return failure.code if failure.code in (OPERATIONAL, USAGE) else OPERATIONAL


def run() -> NoReturn:
    """The ``awsworld`` process (its console script, and ``python -m awsworld.cli``): ``main``'s exit code as the
    process's exit status, the process ended without waiting for a thread still in a request (``_end_now``). A
    Ctrl-C (or dev/serve/ui's SIGTERM) that lands while ``main`` describes a failure, after its own ``except
    KeyboardInterrupt``, is a stop too: it printed a traceback, then ended the process by SIGINT."""
    try:
        code = main()
    except KeyboardInterrupt:
        code = stopped()
    _end_now(code)
    sys.exit(code)


def _end_now(code: int) -> None:
    """End the process now with ``code`` if what the interpreter's exit would wait for is a thread that no longer
    matters: after a Ctrl-C (``STOPPED``) any thread at all, else the World's request threads only.

    Those are the World's AWS requests (``aws/clients.py``: botocore calls run on a thread pool's workers, not daemon
    threads). Ctrl-C ends the command's task, not the request a worker is in, and the World's ``close`` lets its
    workers go without waiting for them, but at its exit the interpreter joins every worker
    (``concurrent.futures``'s exit handler): a request to an endpoint that took the connection and never answered
    held ``awsworld runs`` there after it had said "stopped" (botocore's 60 s read timeout times its retries: 464 s
    once, until killed), and ``serve`` and ``ui`` after a Ctrl-C during such a request
    (tests/cli/test_ctrl_c_blocked.py).

    Nothing the command wrote is lost by not waiting: the command has run its ``finally`` blocks and closed what it
    opened (the World, an emulator it started), and a request still out is the server's to commit or not (a
    DynamoDB write is applied whole or not at all); the command stopped before it heard which, as it would have
    had it waited. So, with such a thread left, what is buffered is written out (stdout, stderr, logging's
    handlers) and the process ends (``os._exit``). With none, the interpreter's ordinary exit runs, its exit
    handlers with it; and a thread of the user's own (``dev``'s, ``serve``'s modules) is waited for as Python
    waits for it, unless the user stopped the command."""
    main_thread = threading.main_thread()
    left = [thread for thread in threading.enumerate() if thread is not main_thread and not thread.daemon]
    if not left:
        return
    if code != STOPPED:
        from ..aws.clients import WORKER_THREAD_PREFIX

        if not all(thread.name.startswith(WORKER_THREAD_PREFIX) for thread in left):
            return
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # (a reader gone, a stream closed: nothing to write to)
            stream.flush()
    os._exit(code)


def _emulator_installed() -> bool:
    """Whether the embedded emulator (moto, ``awsworld[local]``) is there: found, not imported. Importing it took
    0.3 to 0.9 s before the command's first line, where ``dev`` makes SIGTERM a Ctrl-C (``cli/dev.py``'s
    ``CtrlC``): a SIGTERM then ended it by Python's default, exit -15 and nothing said; the command imports it."""
    return importlib.util.find_spec("moto") is not None


def _reader_gone() -> int:
    """The reader of stdout went away (``| head`` took what it wanted): nothing is wrong and nothing is said.
    stdout is pointed at /dev/null, so the interpreter's last flush of what is still buffered cannot fail too
    (Python's own advice for SIGPIPE, in the ``signal`` module's documentation)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is not a file descriptor (a test's capture): nothing to redirect
        pass
    return READER_GONE

