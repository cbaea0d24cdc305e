"""The operator's commands on a deployed stack (or ``awsworld dev``): start, list and inspect runs, resume or
fail their hooks, read their streams, cancel them.

Every read command takes ``--json`` (one document with stable keys; ``streams NAME --follow --json`` prints
one JSON line per chunk, as chunks arrive).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import inspect
import json
import sys
from collections.abc import Iterator
from datetime import UTC
from typing import TYPE_CHECKING, Any

from ..settings import SETTINGS, Settings
from .describe import describe_command, last_write, nothing_open
from .errors import CliError, check_run_listing, parse_json, parse_json_file, read_input_file, usage
from .output import compact, error_text, print_json, print_table, remote, shorten, when

if TYPE_CHECKING:
    from ..world.entities import HookRecord
    from ..world.events import Event
    from ..world.protocol import World

WEBHOOK_URL_ENV = Settings.webhook_url.env

START_HELP = """\
ARGS is the workflow's positional arguments as a JSON array: '["A-17", ["kettle"], 42.5]'. Any other JSON value
is the single positional argument: '{"id": 1}' passes one dict, '"A-17"' one string. Keyword arguments go in
--kwargs as a JSON object: --kwargs '{"express": true}'. A value too long to paste comes from a file instead:
--args-file order.json (the same JSON as ARGS; - reads standard input), --kwargs-file FILE."""


RERUN_HELP = """`awsworld rerun RUN`: a failed run is final (its log is what happened); once its cause is fixed (the
bug deployed, or reloaded by `awsworld dev`; the partner back up), this starts a new run of the same workflow
with the input RUN was recorded with, as stored, and prints its id. The new run starts from the beginning on the
newest code: every step runs again, the ones RUN completed too (docs/how-to/errors.md: a step whose effect must
not repeat needs a key of its own). RUN stays as it ended; `describe` of the new run names it (`rerun of`).
A run still pending or running is refused (exit 1): cancel it first."""


IDEMPOTENCY_HELP = ("a key of your own for this call (an order id, a message id): a repeat of the key records "
                    "nothing and is answered as the first was, also once the hook is disposed or its run ended, so a "
                    "sender may run the command again after any failure (a timeout, a crash of dev)")

def register(sub: Any, read: argparse.ArgumentParser) -> None:
    """Add the commands; ``read`` is the parent parser holding ``--json`` (every read command takes it)."""
    start = sub.add_parser("start", help="start a run: awsworld start WORKFLOW '[args as a JSON array]'",
                           description=START_HELP, parents=[read])
    start.add_argument("workflow", help="the workflow's registered name (its name=)")
    start.add_argument("args", nargs="?", default=None, help="positional arguments: a JSON array (see above; "
                       "default: none)")
    start.add_argument("--kwargs", default=None, help="keyword arguments: a JSON object")
    start.add_argument("--args-file", metavar="FILE", help="ARGS from a file (- : standard input), instead of ARGS")
    start.add_argument("--kwargs-file", metavar="FILE", help="--kwargs from a file, instead of --kwargs")
    start.add_argument("--run-id", help="an id of your choosing: starting again with it returns the same run")
    start.add_argument("--wait", type=float, default=0, metavar="SECONDS", help="wait this long for the result")
    start.add_argument("--priority", type=int, default=None,
                       help="a run waiting for its limit's slot starts before those of lower priority (default 0; "
                            "-1000000 to 1000000; client.options(priority=))")
    start.add_argument("--concurrency-key", default=None, metavar="KEY",
                       help="the key of the workflow's concurrency= limit for this run, instead of its key function's")
    start.set_defaults(handler=_start)

    rerun = sub.add_parser("rerun", help="start a run again: a new run of its workflow with its recorded input",
                           description=RERUN_HELP, parents=[read])
    rerun.add_argument("run_id", metavar="RUN", help="a run that ended (failed, cancelled or completed)")
    rerun.add_argument("--run-id", dest="new_run_id", metavar="NEW_RUN",
                       help="the new run's id, of your choosing: rerunning again with it returns the same run")
    rerun.add_argument("--wait", type=float, default=0, metavar="SECONDS", help="wait this long for the result")
    rerun.set_defaults(handler=_rerun)

    runs = sub.add_parser("runs", help="list recent runs", parents=[read])
    runs.add_argument("--workflow", help="only the runs of this workflow (its name, as `awsworld runs` shows it)")
    runs.add_argument("--status", action="append", help="pending, running, completed, failed, cancelled")
    runs.add_argument("--limit", type=int, default=20, help="at most this many runs a page (1 to 100; default 20)")
    runs.add_argument("--cursor", help="the next page: the cursor the listing before printed (`more runs: ...` on "
                      "stderr, when there are more)")
    runs.add_argument("--parked", action="store_true", help="only parked runs: running runs whose replay diverges "
                      "from their log, waiting for code that replays them (`awsworld describe RUN` says where)")
    runs.add_argument("--waiting", action="store_true",
                      help="what each run waits on (a step, a retry, a sleep, a hook, a child, a limit's slot, its "
                           "next delivery) and its last write: find the runs stuck waiting (default --status: "
                           "pending and running; reads each listed run's steps and log, as `describe` does)")
    runs.set_defaults(handler=_runs)

    events = sub.add_parser("events", help="a run's timeline: steps, hooks, waits, with inputs, outputs and errors",
                            parents=[read])
    events.add_argument("run_id", metavar="RUN")
    events.add_argument("--full", action="store_true", help="print values whole (default: one line each)")
    events.set_defaults(handler=_events)

    result = sub.add_parser("result", help="a run's return value (exit 1 with its error if it failed)",
                            parents=[read])
    result.add_argument("run_id", metavar="RUN")
    result.add_argument("--wait", type=float, default=0, metavar="SECONDS", help="wait this long for it to end")
    result.set_defaults(handler=_result)

    describe = sub.add_parser("describe", help="a run's status, times, attributes, parent and children, steps",
                              parents=[read])
    describe.add_argument("run_id", metavar="RUN")
    describe.add_argument("--all", action="store_true", dest="internal",
                          help="show awsworld's own attributes (awsworld.patched.*) and steps (awsworld.start_child) "
                               "too; --json always has them")
    describe.set_defaults(handler=describe_command)

    hooks = sub.add_parser("hooks", help="a run's hooks: tokens (whole), webhook URLs, payloads and heartbeats "
                                          "received", parents=[read])
    hooks.add_argument("run_id", metavar="RUN")
    hooks.add_argument("--all", action="store_true", dest="internal",
                       help="list awsworld's own hooks too: the one a parent run awaits each child's outcome on "
                            "(token awsworld.child:<child run id>), which only the child's end resumes; --json "
                            "always has them (childRunId)")
    hooks.set_defaults(handler=_hooks)

    streams = sub.add_parser("streams", help="a run's streams, or one stream's chunks (--follow: until it closes)",
                             parents=[read])
    streams.add_argument("run_id", metavar="RUN")
    streams.add_argument("name", nargs="?", help="print this stream's chunks (default: list the streams)")
    streams.add_argument("--follow", "-f", action="store_true", help="keep printing new chunks until it closes")
    streams.add_argument("--from", dest="start", type=int, default=0, metavar="INDEX",
                         help="first chunk index (negative: from the tail, -1 the last chunk)")
    streams.set_defaults(handler=_streams)

    resume = sub.add_parser("resume", help="resume a hook: awsworld resume TOKEN '<payload JSON>'")
    resume.add_argument("token")
    resume.add_argument("payload", nargs="?", default=None,
                        help="the payload as JSON (default: null); for a hook created with a codec "
                             "(create_hook(codec=...)), the codec's text, sent as it is (required)")
    resume.add_argument("--payload-file", metavar="FILE",
                        help="PAYLOAD from a file (- : standard input), instead of PAYLOAD, for one too long to paste")
    resume.add_argument("--wait", type=float, default=None, metavar="SECONDS",
                        help="wait this long for the hook to exist (its run may not have reached it yet)")
    resume.add_argument("--idempotency-key", metavar="KEY", default=None, help=IDEMPOTENCY_HELP)
    resume.set_defaults(handler=_resume)

    fail = sub.add_parser("fail-hook", help="fail a hook (the workflow awaiting it raises HookFailedError): "
                                            "awsworld fail-hook TOKEN 'why'")
    fail.add_argument("token")
    fail.add_argument("message", help="the error's message, as the workflow's HookFailedError carries it")
    fail.add_argument("--code", help="a code for the workflow to branch on (HookFailedError.code)")
    fail.add_argument("--wait", type=float, default=None, metavar="SECONDS",
                      help="wait this long for the hook to exist (its run may not have reached it yet)")
    fail.add_argument("--idempotency-key", metavar="KEY", default=None, help=IDEMPOTENCY_HELP)
    fail.set_defaults(handler=_fail_hook)

    beat = sub.add_parser("heartbeat-hook", help="tell a hook its sender is still working (create_hook("
                                                 "heartbeat_timeout=...)): awsworld heartbeat-hook TOKEN")
    beat.add_argument("token")
    beat.add_argument("--wait", type=float, default=None, metavar="SECONDS",
                      help="wait this long for the hook to exist (its run may not have reached it yet)")
    beat.set_defaults(handler=_heartbeat_hook)

    cancel = sub.add_parser("cancel", help="cancel a run")
    cancel.add_argument("run_id", metavar="RUN")
    cancel.add_argument("--reason", help="recorded on the run (up to 512 characters)")
    cancel.set_defaults(handler=_cancel)


def start_arguments(args_text: str | None, kwargs_text: str | None, *, args_file: str | None = None,
                    kwargs_file: str | None = None) -> tuple[list[Any], dict[str, Any]]:
    """The positional and keyword arguments ``start`` passes: an array is the positional arguments, any other
    JSON value is the single positional argument (a JSON object is one dict, never keyword names). Each comes
    from the command line or from a file (``--args-file``, ``--kwargs-file``: a 50 KB argument is not pasted),
    not both."""
    if args_file is not None and args_text is not None:
        raise usage("ARGS and --args-file both give the positional arguments", "give one of them")
    if kwargs_file is not None and kwargs_text is not None:
        raise usage("--kwargs and --kwargs-file both give the keyword arguments", "give one of them")
    if args_text is not None and args_text.startswith("@"):  # curl's form, which this CLI does not use
        raise usage(f"ARGS is not JSON: {shorten(args_text, 80)}", f"to read ARGS from a file: --args-file "
                    f"{args_text[1:] or 'FILE'}")
    value = parse_json_file(args_file, "--args-file") if args_file is not None else parse_json(args_text or "[]",
                                                                                                "ARGS")
    args = value if isinstance(value, list) else [value]
    kwargs: Any = (parse_json_file(kwargs_file, "--kwargs-file") if kwargs_file is not None
                   else {} if kwargs_text is None else parse_json(kwargs_text, "--kwargs"))
    if not isinstance(kwargs, dict):
        option = "--kwargs-file" if kwargs_file is not None else "--kwargs"
        raise usage(f"{option} must be a JSON object, got {shorten(kwargs, 80)}",
                    "e.g. --kwargs '{\"express\": true}'")
    return args, kwargs


def _start(args: argparse.Namespace) -> int:
    positional, keywords = start_arguments(args.args, args.kwargs, args_file=args.args_file,
                                           kwargs_file=args.kwargs_file)
    return asyncio.run(_start_run(args, positional, keywords))


async def _start_run(args: argparse.Namespace, positional: list[Any], keywords: dict[str, Any]) -> int:
    from ..authoring.errors import CodecError

    async with remote() as client:
        try:
            positional, keywords = _typed(client, args.workflow, positional, keywords)
            run = await client.options(run_id=args.run_id, priority=args.priority,
                                       concurrency_key=args.concurrency_key).start(args.workflow, *positional,
                                                                                   **keywords)
        except TypeError as error:  # the arguments do not fit the workflow (checked with AWSWORLD_MODULES set)
            raise usage(str(error), _signature_hint(client, args.workflow) + _keywords_meant(
                client, args.workflow, positional, keywords)) from None
        except CodecError as error:  # the workflow's args_codec refused them (pydantic's report spans lines)
            raise usage(" ".join(str(error).split()), _signature_hint(client, args.workflow)) from None
        return await _started(client, args, run, args.workflow)


async def _started(client: Any, args: argparse.Namespace, run: Any, workflow: str) -> int:
    """Print the run ``start`` or ``rerun`` started: its id; with ``--wait`` its outcome, and without it a start
    its key's busy holder skipped (``on_busy="skip"``: cancelled at once). Exit 1 if it failed or was cancelled."""
    output: dict[str, Any] = {"runId": run.run_id, "workflow": workflow}
    definition = client.registry.workflows.get(workflow) if client.registry is not None else None
    from ..client.waits import waits_text
    from ..world.entities import TERMINAL_RUN_STATUSES

    waits: str | None = None
    if args.wait:
        view = await client.world.runs.wait_for_terminal_status(run.run_id, timeout=args.wait)
        output.update(_outcome(view))
        if view.status not in TERMINAL_RUN_STATUSES:  # "still pending" alone once left a user guessing why
            waits = await waits_text(client.world, run.run_id, view)
    elif definition is not None and definition.limit is not None:
        # A start its key's busy holder skipped (on_busy="skip") is recorded cancelled at once: said now, as
        # --wait says it (a bare run id once read as a run started); one queued behind its key's slot says so.
        view = await client.world.runs.get(run.run_id, resolve_data="none")
        if view.status == "cancelled":
            output.update(_outcome(view))
        elif view.status == "pending":
            found = await waits_text(client.world, run.run_id, view)
            if "a slot of" in found:
                output["status"], waits = "pending", found
    if output.get("status") == "cancelled":
        output["cancelReason"] = await run._cancel_reason()
    if args.json:
        print_json(output)
    else:
        print(run.run_id)
        if "status" in output:
            _print_outcome(output, waits, run.run_id, still=bool(args.wait))
    return 1 if output.get("status") in ("failed", "cancelled") else 0


def _rerun(args: argparse.Namespace) -> int:
    async def go() -> int:
        async with remote() as client:
            try:
                run = await client.rerun(args.run_id, new_run_id=args.new_run_id)
            except TypeError as error:  # its recorded input does not fit the workflow's parameters now
                workflow = (await client.world.runs.get(args.run_id, resolve_data="none")).workflow_name
                raise CliError(f"run {args.run_id}'s recorded input does not fit {workflow}'s parameters now: "
                               f"{error}; nothing was started",
                               "the workflow changed since that run started: give a parameter added since a "
                               "default (and keep one removed), or start a new run with `awsworld start "
                               f"{workflow} ARGS` ({_signature_hint(client, workflow)})") from None
            return await _started(client, args, run, run.workflow_name or "")

    return asyncio.run(go())


def _typed(client: Any, name: str, positional: list[Any], keywords: dict[str, Any]
           ) -> tuple[list[Any], dict[str, Any]]:
    """The JSON arguments read through the workflow's annotations, when the CLI has its code (``AWSWORLD_MODULES``)
    and checks its types: an ISO string becomes the ``datetime`` a parameter declares, an array its ``tuple``, an
    object its dataclass (pydantic's strict JSON mode, ``authoring.arguments.from_json``), and the run stores those
    values. Arguments that do not bind are left to ``start``, which refuses them (or finishes a recorded start
    that needs none: ``--run-id``)."""
    from ..authoring.arguments import ArgumentTypeError, from_json

    definition = client.registry.workflows.get(name) if client.registry is not None else None
    if definition is None or not definition.validate_args or definition.args_codec is not None:
        return positional, keywords
    try:
        return from_json(definition.fn, definition.label, positional, keywords)
    except ArgumentTypeError:
        raise
    except TypeError:
        return positional, keywords


def _signature_hint(client: Any, name: str) -> str:
    """How the command's arguments map onto the workflow's parameters, with its signature when it is known."""
    where = "ARGS is a JSON array of the positional arguments, --kwargs a JSON object of the keyword ones"
    try:
        signature = inspect.signature(client.registry.workflow(name).fn)
    except (AttributeError, LookupError, TypeError, ValueError):
        return where
    bare = signature.replace(parameters=[p.replace(annotation=p.empty) for p in signature.parameters.values()],
                             return_annotation=signature.empty)  # names and defaults: what the command gives
    return f"the workflow takes {name}{bare}; {where}"


def _keywords_meant(client: Any, name: str, positional: list[Any], keywords: dict[str, Any]) -> str:
    """When ARGS was one JSON object whose keys are the workflow's parameters (``'{"order_id": "A", "items": []}'``)
    and the call did not fit: the object was one positional argument, and the refusal (``missing 1 required
    positional argument: 'items'``) did not say that its keys were read as nothing. Says the --kwargs form."""
    if keywords or len(positional) != 1 or not isinstance(positional[0], dict) or not positional[0]:
        return ""
    try:
        parameters = inspect.signature(client.registry.workflow(name).fn).parameters
    except (AttributeError, LookupError, TypeError, ValueError):
        return ""
    given: dict[str, Any] = positional[0]
    if not set(given) <= set(parameters):
        return ""
    return (f". ARGS {json.dumps(given)} is one dict, the first positional argument; its keys name parameters: to "
            f"pass them by name, give them to --kwargs: awsworld start {name} --kwargs '{json.dumps(given)}'")


def _failed_hint(run_id: str, error_code: str | None) -> str:
    """Where ``result``'s failed run sends the reader: the tracebacks ``describe`` shows; for a run awsworld ended
    at the end of its lifetime (``world/rules/lifetime.py``), which has none (its code did not fail), what it was
    waiting on then (the message itself says how a longer workflow goes on)."""
    from ..authoring.errors import RUN_LIFETIME_EXCEEDED

    if error_code == RUN_LIFETIME_EXCEEDED:
        return (f"there is no traceback (awsworld ended the run; its code did not fail): `awsworld describe {run_id}` "
                "shows what it was waiting on then")
    return f"`awsworld describe {run_id}` shows where, with the tracebacks"


def _outcome(view: Any) -> dict[str, Any]:
    from .error_view import error_part

    out: dict[str, Any] = {"status": view.status}
    if view.status == "completed":
        out["output"] = view.output
    elif view.status == "failed":
        out["error"] = error_text(view.error)
        out["errorCode"] = view.error_code
        # The stored error whole, as describe --json has it: its type, the failed step, the cause, the tracebacks.
        out["errorDetails"] = error_part(view.error, view.error_code)["errorDetails"]
    return out


def _print_outcome(outcome: dict[str, Any], waits: str | None = None, run_id: str = "", *,
                   still: bool = True) -> None:
    """A started run's outcome on stdout (its result) or stderr; a run not ended yet with what it waits on
    (``waits``: ``waits_text``'s), as ``describe`` says it."""
    status = outcome["status"]
    if status == "completed":
        print(compact(outcome["output"]))
    elif status == "failed":
        print(f"failed: {outcome['error']}", file=sys.stderr)
    elif status == "cancelled":
        reason = outcome.get("cancelReason")
        print(f"cancelled: {reason}" if reason else "cancelled", file=sys.stderr)
    elif waits:
        print(f"{'still ' if still else ''}{status}: waits on {waits} (`awsworld describe {run_id}`)",
              file=sys.stderr)
    else:
        print(f"still {status}", file=sys.stderr)


RUNS_HEADER = ("RUN", "STATUS", "WORKFLOW", "CREATED (UTC)", "STARTED BY", "ERROR")
WAITING_HEADER = ("LAST WRITE (UTC)", "WAITS ON")
"""The columns ``runs --waiting`` adds (in place of ``ERROR``): the run's last write, and what it waits on."""
WAITS_READ_TOGETHER = 8
"""Runs whose steps and log ``runs --waiting`` reads at once."""
QUEUED_HEADER = "QUEUED FOR"
"""The column of ``runs`` that says which limit a pending run waits for a slot of (``client.limits.queued_text``),
before ``ERROR``: only on a page with such a run, as ``ERROR`` only on a page with a failed run."""
MIN_ERROR_WIDTH = 40
"""The ``ERROR`` column of ``runs`` is cut to the terminal's width, but never below this (``describe`` and
``--json`` have the error whole)."""


def _one_line(error: Any) -> str:
    """A failed run's error as one short line of the table (``error_brief``)."""
    from .._worker.error_shapes import error_brief

    return error_brief(error) or ""


def _fitted_errors(header: tuple[str, ...], rows: list[tuple[str, ...]], errors: list[str]
                   ) -> list[tuple[str, ...]]:
    """``rows`` with each failed run's one-line error as the last column, cut (``…``) to what the terminal leaves
    after the other columns (``header``'s): a page of failed runs says why each failed without ``describe`` on
    each."""
    import shutil

    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=False)]
    room = max(MIN_ERROR_WIDTH, shutil.get_terminal_size((120, 24)).columns - sum(widths) - 2 * len(widths))
    return [(*row, error if len(error) <= room else error[:room - 1] + "…") for row, error in zip(rows, errors,
                                                                                                   strict=True)]


async def _unknown_workflow(client: Any, name: str) -> str | None:
    from .._published.model import unknown_workflow_note

    return await unknown_workflow_note(client.world, client.registry, name)


def _runs(args: argparse.Namespace) -> int:
    from .._engine.parking import parked_run, shown_status
    from ..client.limits import queued_runs, queued_text
    from ..schedules.info import schedule_json, schedule_label

    if args.parked and args.status:
        raise usage("--parked lists running runs that are parked: it takes no --status", "awsworld runs --parked")
    if args.parked and args.cursor:
        raise usage("--parked reads every running run itself: it takes no --cursor", "raise --limit instead")
    check_run_listing(args.status, args.limit, "narrow the listing with --workflow or --status")
    statuses = args.status or (["pending", "running"] if args.waiting and not args.parked else None)

    async def go() -> None:
        async with remote() as client:
            more: str | None = None
            if args.parked:
                found = await _parked_runs(client, args.workflow, args.limit)
            else:
                page = await client.list_runs(workflow=args.workflow, status=statuses, limit=args.limit,
                                              cursor=args.cursor)
                found, more = page.data, page.cursor if page.has_more else None
            if more is not None:  # a page is not every run: say so, and how to read on (stderr: --json too)
                print(f"more runs: {_next_page(args, more)}", file=sys.stderr)
            unknown = await _unknown_workflow(client, args.workflow) if args.workflow and not found else None
            if unknown:  # a typo lists nothing, like a workflow with no runs: say which it is (stderr: --json too)
                print(unknown, file=sys.stderr)
            queued = await queued_runs(client.world, found)
            waits = await _waits(client.world, found) if args.waiting else {}
            if args.json:
                print_json([{"runId": r.run_id, "status": r.status, "workflow": r.workflow_name,
                             "createdAt": when(r.created_at), "startedAt": when(r.started_at),
                             "completedAt": when(r.completed_at), "error": error_text(r.error),
                             "errorCode": r.error_code,
                             "schedule": schedule_json(r.execution_context),
                             "parked": parked.to_json() if (parked := parked_run(r.status, r.attributes)) else None,
                             "queued": queued.get(r.run_id),
                             # --waiting only: describe's waitingOn, and the run's last write
                             **({"waitingOn": waits[r.run_id], "updatedAt": when(r.updated_at)} if args.waiting
                                else {})}
                            for r in found])
                return
            if not found:
                print("no parked runs" if args.parked else "no runs", file=sys.stderr)
                return
            rows: list[tuple[str, ...]] = [
                (run.run_id, shown_status(run.status, run.attributes), run.workflow_name,
                 f"{run.created_at.astimezone(UTC):%Y-%m-%d %H:%M:%S}", schedule_label(run.execution_context) or "")
                for run in found]
            header: tuple[str, ...] = RUNS_HEADER[:-1]
            if queued:  # a pending run queued behind a limit says for which (a plain "pending" may be stuck)
                header += (QUEUED_HEADER,)
                rows = [(*row, queued_text(queued[run.run_id]) if run.run_id in queued else "")
                        for row, run in zip(rows, found, strict=True)]
            if args.waiting:  # last: what each waits on is the widest cell, and is never cut
                rows = [(*row, last_write(run.updated_at), _waits_text(run, waits[run.run_id]))
                        for row, run in zip(rows, found, strict=True)]
                print_table((*header, *WAITING_HEADER), rows)
                return
            errors = [_one_line(run.error) if run.status == "failed" else "" for run in found]
            if any(errors):  # the ERROR column only on a page with a failed run (``_fitted_errors``)
                print_table((*header, RUNS_HEADER[-1]), _fitted_errors(header, rows, errors))
            else:
                print_table(header, rows)

    asyncio.run(go())
    return 0


async def _waits(world: World, runs: list[Any]) -> dict[str, list[dict[str, Any]]]:
    """What each run waits on (``client.waits.read_waits``), read a few runs at a time: a page of 100 unfinished
    runs is 200 reads, which one after another took as many round trips."""
    from ..client.waits import read_waits

    slots = asyncio.Semaphore(WAITS_READ_TOGETHER)

    async def one(run: Any) -> list[dict[str, Any]]:
        async with slots:
            return await read_waits(world, run)

    return dict(zip([run.run_id for run in runs], await asyncio.gather(*(one(run) for run in runs)), strict=True))


def _waits_text(run: Any, waits: list[dict[str, Any]]) -> str:
    """``runs --waiting``'s last column: ``describe``'s ``waits on`` lines of the run, "; " joined."""
    from .._engine.parking import parked_run
    from ..client.waits import describe_waits

    return "; ".join(describe_waits(waits)) or nothing_open(
        run.status, parked=parked_run(run.status, run.attributes) is not None) or ""


def _next_page(args: argparse.Namespace, cursor: str) -> str:
    """The command that lists the page after this one: the same filters and page size, and its cursor."""
    import shlex

    words = ["awsworld", "runs"] + (["--workflow", args.workflow] if args.workflow else [])
    for status in args.status or ():
        words += ["--status", status]
    words += (["--limit", str(args.limit)] if args.limit != 20 else []) + (["--json"] if args.json else [])
    return shlex.join([*words, "--cursor", cursor])


async def _parked_runs(client: Any, workflow: str | None, limit: int) -> list[Any]:
    """Up to ``limit`` parked runs, newest first. A parked run is a running run with a mark (``_engine.parking``),
    and run listings filter by status only, so this reads the running runs page by page (100 a page)."""
    from .._engine.parking import parked_run

    found: list[Any] = []
    cursor: str | None = None
    while len(found) < limit:
        page = await client.list_runs(workflow=workflow, status=["running"], limit=100, cursor=cursor)
        found += [r for r in page.data if parked_run(r.status, r.attributes) is not None]
        if not page.has_more:
            break
        cursor = page.cursor
    return found[:limit]


def _events(args: argparse.Namespace) -> int:
    from .._timeline import print_timeline, read_events, timeline_rows
    from ..world.errors import InvalidInputError, NotFoundError, WorldError

    async def go() -> None:
        async with remote() as client:
            await client.world.runs.get(args.run_id, resolve_data="none")  # an unknown run: one line, exit 1
            try:
                if args.json:
                    print_json([row.to_json() for row in timeline_rows(await read_events(client.world, args.run_id))])
                else:
                    await print_timeline(client.world, args.run_id, full=args.full)
            except (NotFoundError, InvalidInputError):
                raise
            except WorldError as unreadable:
                # Its values cannot be read (an encrypted run whose key KMS refuses): the timeline without them,
                # as describe and the run viewer show the run, then the refusal (exit 1).
                if args.json:
                    print_json([row.to_json() for row in timeline_rows(
                        await read_events(client.world, args.run_id, values=False))])
                else:
                    await print_timeline(client.world, args.run_id, values=False)
                raise CliError(str(unreadable), "the timeline above is without its values: they cannot be read") \
                    from unreadable

    asyncio.run(go())
    return 0


def _result(args: argparse.Namespace) -> int:
    from .._http.push import sdk_run
    from ..aws.encryption.run_keys import EncryptionKeyError
    from ..client.limits import queued_runs, queued_text
    from ..world.sdk_values import readable_value

    async def go() -> int:
        async with remote() as client:
            try:
                if args.wait:
                    view = await client.world.runs.wait_for_terminal_status(args.run_id, timeout=args.wait)
                else:
                    view = await client.world.runs.get(args.run_id)
            except EncryptionKeyError:
                # Its values cannot be read (a run whose KMS key is lost): a failed run's error is shown all the
                # same, read without them (the operator's error of ``awsworld fail``, stored unsealed, or what
                # says why the run's own cannot be read); any other run has no result to show.
                view = await client.world.runs.get(args.run_id, resolve_data="none")
                if view.status != "failed":
                    raise
            outcome = {"runId": view.run_id, **_outcome(view)}
            if view.status == "cancelled":
                outcome["reason"] = await client.get_run(view.run_id)._cancel_reason()
            if args.json:
                print_json(outcome)
                return 0 if view.status == "completed" else 1
            if view.status == "completed":  # a TypeScript runtime's run: its bytes read (world/sdk_values.py)
                print(compact(readable_value(view.output) if sdk_run(view) is not None else view.output))
                return 0
            if view.status == "failed":
                raise CliError(f"run {view.run_id} ({view.workflow_name}) failed: {outcome['error']}",
                               _failed_hint(view.run_id, view.error_code))
            if view.status == "cancelled":
                reason = outcome.get("reason")
                raise CliError(f"run {view.run_id} was cancelled" + (f": {reason}" if reason else ""))
            queued = (await queued_runs(client.world, [view])).get(view.run_id)
            # a run queued behind its limit says so, as runs and describe do (a plain "pending" reads as stuck)
            status = view.status + (f", queued for a slot of {queued_text(queued)}" if queued else "")
            if args.wait:
                raise CliError(f"run {view.run_id} is still {status} after {args.wait:g} s: no result yet",
                               f"`awsworld describe {view.run_id}` says what it waits on")
            raise CliError(f"run {view.run_id} is still {status}: no result yet",
                           "--wait SECONDS waits for it")

    return asyncio.run(go())


def _hooks(args: argparse.Namespace) -> int:
    from .._timeline import read_events
    from ..authoring.calls import webhook_address
    from ..durable.child_calls import TOKEN_PREFIX as CHILD_TOKEN_PREFIX
    from ..durable.hook_payloads import is_heartbeat_event
    from ..world.rules.hooks import hook_state

    async def go() -> None:
        async with remote() as client:
            view = await client.world.runs.get(args.run_id, resolve_data="none")
            events = await read_events(client.world, args.run_id, values=False)
            base = SETTINGS.webhook_url or ""
            hooks: dict[str, dict[str, Any]] = {}
            for event in events:
                data = event.event_data or {}
                corr = event.correlation_id or ""
                if event.event_type == "hook_created":
                    webhook = bool(data.get("isWebhook"))
                    token = str(data.get("token", ""))
                    # a hook the engine made to await a child's end, not the code: a resume by hand would forge it
                    child = token.removeprefix(CHILD_TOKEN_PREFIX) if token.startswith(CHILD_TOKEN_PREFIX) else None
                    hooks[corr] = {"hookId": corr, "token": token, "webhook": webhook, "received": 0,
                                   "heartbeats": 0, "lastHeartbeatAt": None,
                                   "disposed": False, "createdAt": when(event.created_at),
                                   "url": webhook_address(base, token) if webhook and base else None,
                                   "childRunId": child}
                elif event.event_type == "hook_received" and corr in hooks and is_heartbeat_event(data):
                    hooks[corr]["heartbeats"] += 1  # a heartbeat is not a payload (``hook_timeouts``)
                    hooks[corr]["lastHeartbeatAt"] = when(event.created_at)
                elif event.event_type == "hook_received" and corr in hooks:
                    hooks[corr]["received"] += 1
                elif event.event_type == "hook_disposed" and corr in hooks:
                    hooks[corr]["disposed"] = True
            for hook in hooks.values():  # closed by the run's end, when it ended with the hook open
                hook["state"] = hook_state(hook["disposed"], view.status)
            if args.json:  # every hook, as describe --json has awsworld's own too: childRunId tells them
                print_json(list(hooks.values()))
                return
            shown = [hook for hook in hooks.values() if args.internal or hook["childRunId"] is None]
            if not shown:
                print(f"run {args.run_id} has no hooks" + (" of its own" if hooks else ""), file=sys.stderr)
            for hook in shown:
                state = hook["state"] + (f" (run {view.status})" if hook["state"] == "closed" else "")
                kind = "webhook" if hook["webhook"] else "child" if hook["childRunId"] else "hook"
                beats = (f"  heartbeats {hook['heartbeats']} (last {hook['lastHeartbeatAt']})"
                         if hook["heartbeats"] else "")
                print(f"{hook['token']}  {kind:<7} received {hook['received']}{beats}  {state}")
                if hook["url"] and hook["state"] == "open":
                    print(f"  {hook['url']}")
            if len(shown) < len(hooks):  # as describe's "hidden" line: why the log has more hooks than listed
                print(f"hidden: {len(hooks) - len(shown)} awsworld hook(s) awaiting a child run's outcome "
                      f"(`awsworld describe {args.run_id}` lists the children; --all shows the hooks)")
            if any(h["webhook"] for h in hooks.values()) and not base:
                print(f"(set {WEBHOOK_URL_ENV} to the webhook route's address to see the URLs)", file=sys.stderr)

    asyncio.run(go())
    return 0


def _streams(args: argparse.Namespace) -> int:
    from ..world.rules.streams import missing_stream, run_over, streams_so_far

    async def go() -> None:
        async with remote() as client:
            world = client.world
            view = await world.runs.get(args.run_id, resolve_data="none")
            if args.name is None:
                names = await world.streams.list(args.run_id)
                infos = [(name, await world.streams.get_info(args.run_id, name)) for name in names]
                if args.json:
                    print_json([{"name": name, "chunks": info.tail_index + 1, "closed": info.done}
                                for name, info in infos])
                    return
                if not infos:
                    print(f"run {args.run_id} has no streams", file=sys.stderr)
                for name, info in infos:
                    print(f"{name}  {info.tail_index + 1} chunk(s)  {'closed' if info.done else 'open'}")
                return
            names = await world.streams.list(args.run_id)
            if args.name in names:
                await _print_chunks(world, args)
                return
            ended = run_over(view.status)
            if not args.follow or ended:
                raise CliError(f"run {args.run_id} has no stream {args.name!r}{'' if ended else ' yet'}",
                               f"`awsworld streams {args.run_id}` lists its streams"
                               + ("" if ended else "; --follow waits for its first chunk"))
            # A follow started with the run, before its step's first write, waits for the stream as it waits for
            # the next chunk (it was refused with "no stream"), and says so: a mistyped name waits too, until the
            # run ends, and is refused then.
            print(f"(run {args.run_id} has no stream {args.name!r} yet (its streams so far: "
                  f"{streams_so_far(names)}): following it from its first chunk, until it closes or the run ends)",
                  file=sys.stderr, flush=True)
            if not await _print_chunks(world, args) and args.name not in (names := await world.streams.list(
                    args.run_id)):
                raise CliError(str(missing_stream(args.run_id, args.name, names)),
                               f"`awsworld streams {args.run_id}` lists its streams")

    asyncio.run(go())
    return 0


QUIET_SECONDS = 5.0
"""``streams NAME --follow`` says once, on stderr, why it waits after this long without a chunk."""


async def _print_chunks(world: World, args: argparse.Namespace) -> int:
    """Chunks as written (bytes to stdout), or one JSON line each: ``{"index", "text"}`` for UTF-8 chunks,
    ``{"index", "base64"}`` for others. Without ``--follow``, what is stored now; with it, new chunks as they
    come, until the stream is closed. ``--from`` a negative index starts that many chunks before the tail as it
    is when the command starts (``-1``: the last chunk, then, following, the new ones), and each chunk keeps its
    index from the head: before, a follow printed ``-2``, ``-1``, ... and a read without ``--follow`` took a
    negative index as 0 and printed the whole stream. Returns how many chunks it printed."""
    from ..world.pages import MAX_CHUNKS_PAGE
    from ..world.streams import page_cursor, start_position

    out = sys.stdout
    printed = 0
    index = args.start
    if index < 0:  # from the tail as it is now, the index each chunk is printed with counted from the head
        index = start_position(index, (await world.streams.get_info(args.run_id, args.name)).tail_index + 1)
    if args.follow:
        chunks = aiter(world.streams.get(args.run_id, args.name, start_index=index))
        said = False
        while True:
            following = asyncio.ensure_future(anext(chunks))
            if not said:  # a quiet follow said nothing: it looked hung while the run slept for an hour, say
                done, _ = await asyncio.wait({following}, timeout=QUIET_SECONDS)
                if not done:
                    said = True
                    print(f"(no new chunk for {QUIET_SECONDS:g} s: stream {args.name!r} stays open until a step "
                          f"closes it or run {args.run_id} ends; `awsworld describe {args.run_id}` says what the "
                          f"run waits on; Ctrl-C stops following)", file=sys.stderr, flush=True)
            try:
                chunk = await following
            except StopAsyncIteration:
                return printed
            _emit(out, index, chunk, args.json)
            index += 1
            printed += 1
    # Pages from INDEX (the chunks before it are not read), of the most chunks a page holds (the World bounds a
    # page's bytes too): the default 100 took 100 pages, 300 requests and ten times as long for 10,000 chunks.
    cursor = page_cursor(index) if index else None
    while True:
        page = await world.streams.get_chunks(args.run_id, args.name, cursor=cursor, limit=MAX_CHUNKS_PAGE)
        for chunk in page.data:
            _emit(out, chunk.index, chunk.data, args.json)
        printed += len(page.data)
        if not page.has_more:
            return printed
        cursor = page.cursor


def _emit(out: Any, index: int, data: bytes, as_json: bool) -> None:
    if as_json:
        try:
            line = compact({"index": index, "text": data.decode("utf-8")})
        except UnicodeDecodeError:
            line = compact({"index": index, "base64": base64.b64encode(data).decode()})
        out.write(line + "\n")
    else:
        out.flush()
        out.buffer.write(data)
        out.buffer.flush()
    out.flush()


def _resume(args: argparse.Namespace) -> int:
    """A plain hook's PAYLOAD is JSON; a codec hook's (``HookRecord.payload_codec``) is the codec's text, sent as it is:
    parsed, a JSON object would reach the codec as a dict, which ``resume_hook`` refuses (``CodecPayloadError``).
    Which one it is costs one read of the hook before the resume. A PAYLOAD that is not JSON for a token no hook
    holds is the usage error it always was."""
    from .._engine.parking import parked_run
    from .._worker.run_control import find_hook
    from ..world.errors import HookNotFoundError, RunNotFoundError

    if args.payload_file is not None:  # read (and a missing file refused) before anything is asked of the World
        if args.payload is not None:
            raise usage("PAYLOAD and --payload-file both give the payload", "give one of them")
        args.payload = read_input_file(args.payload_file, "--payload-file")

    async def go() -> None:
        async with remote() as client:
            hook: HookRecord | None = None
            try:
                with _waited_for_hook(args.wait):
                    hook = await find_hook(client.world, args.token, args.wait)
            except (HookNotFoundError, CliError) as missing:
                # With a key, a hook that is gone (disposed, or closed by its run's end) may have taken this very
                # resume (a command run again after a timeout, a crash): the World answers the repeat as the first
                # was, and refuses anything else with the look-up's error. Without one, the look-up decides.
                if args.idempotency_key is None or getattr(missing, "disposed_hook", None) is None:
                    parse_json("null" if args.payload is None else args.payload, "PAYLOAD")
                    raise
            payload = _payload_for(hook, args.payload) if hook is not None else _payload_as_given(args.payload)
            outcome = await client.resume_hook_outcome(args.token, payload, idempotency_key=args.idempotency_key)
            event = outcome.event
            if not outcome.recorded:  # a repeat of the key: nothing recorded, the run is not told twice
                print(await repeated_text(client.world, event))
                return
            try:  # (one read more, to say whether the payload goes on now)
                view = await client.world.runs.get(event.run_id, resolve_data="none")
                parked = parked_run(view.status, view.attributes) is not None
            except RunNotFoundError:  # gone since (retention): the payload was delivered all the same
                parked = False
            print(resumed_text(event.event_id, event.run_id, parked=parked))

    asyncio.run(go())
    return 0


def resumed_text(event_id: str, run_id: str, *, parked: bool) -> str:
    """What ``resume`` did: the payload's event, and, for a parked run (its replay diverges from its log), that it
    does not go on yet: the payload is recorded and waits for code that replays the run. It said "delivered" alone,
    as for a run that goes on."""
    from .skip import parked_then

    said = f"delivered as {event_id} to run {run_id}"
    return f"{said}; {parked_then(run_id)}" if parked else said


@contextlib.contextmanager
def _waited_for_hook(wait: float | None) -> Iterator[None]:
    """A token no hook held within ``--wait``: the one-line error said to add ``--wait``, which had been given;
    it says how long it waited and where to look instead. A hook that was disposed or closed keeps its own error."""
    from ..world.errors import HookClosedError, HookNotFoundError

    try:
        yield
    except HookNotFoundError as missing:
        if wait is None or isinstance(missing, HookClosedError) or missing.disposed_hook is not None:
            raise
        reason = missing.details.get("reason") or "no run has reached create_hook with it yet"
        raise CliError(f"no hook holds this token: {reason} (looked for {wait:g} s)",
                       "check it against the tokens `awsworld hooks RUN` lists, whole; `awsworld describe RUN` "
                       "says what the run waits on") from None


def _payload_for(hook: HookRecord, text: str | None) -> object:
    """What ``awsworld resume`` sends ``hook`` for its PAYLOAD ``text`` (None: not given)."""
    if not hook.payload_codec:
        return parse_json("null" if text is None else text, "PAYLOAD")
    if text is None:
        raise usage("this hook decodes its payloads with a codec (create_hook(codec=...)): give PAYLOAD, the "
                    "codec's text", "e.g. awsworld resume TOKEN '{\"sku\": \"tea\", \"quantity\": 1}'")
    return text


def _payload_as_given(text: str | None) -> object:
    """PAYLOAD for a keyed repeat on a hook that is gone (its codec unknown): the World answers the repeat by its
    key alone and records nothing, so JSON when it parses, else the text as typed."""
    try:
        return parse_json("null" if text is None else text, "PAYLOAD")
    except CliError:
        return text


async def repeated_text(world: World, event: Event) -> str:
    """What ``resume`` and ``fail-hook`` say for a repeat of an idempotency key: the event the key's first use
    recorded, and what that was, a payload or a failure (read back with its payload from the hook's own events, by
    its correlation id, not the run's whole log; for a repeat only). ``fail-hook`` reusing a key a ``resume`` had
    recorded said "failed as evnt_…" of the payload's event, though nothing failed the hook."""
    from ..durable.hook_payloads import hook_failure
    from ..world.errors import RunNotFoundError
    from ..world.pages import MAX_ENTITIES_PAGE, collect_pages

    first = "an earlier resume or fail-hook"
    with contextlib.suppress(RunNotFoundError):  # gone since (retention): what it held is gone with it
        hook_events = await collect_pages(lambda cursor: world.events.list_by_correlation_id(
            event.run_id, event.correlation_id or "", cursor=cursor, limit=MAX_ENTITIES_PAGE))
        found = [e for e in hook_events if e.event_id == event.event_id]
        if found:
            payload = (found[0].event_data or {}).get("payload")
            failure = hook_failure("", payload)
            if failure is None:
                first = f"a resume, with the payload {shorten(payload, 60)}"
            else:
                error = failure()
                first = f"a fail-hook: {error.message!r}" + (f" [{error.code}]" if error.code else "")
    return (f"already delivered as {event.event_id} to run {event.run_id}: this idempotency key was used before, by "
            f"{first}; nothing was recorded again")


def _fail_hook(args: argparse.Namespace) -> int:
    async def go() -> None:
        async with remote() as client:
            with _waited_for_hook(args.wait):
                outcome = await client.fail_hook_outcome(args.token, args.message, code=args.code, wait=args.wait,
                                                         idempotency_key=args.idempotency_key)
            event = outcome.event
            if not outcome.recorded:  # a repeat of the key: its first use may have been a resume
                print(await repeated_text(client.world, event))
                return
            print(f"failed as {event.event_id} in run {event.run_id}")

    asyncio.run(go())
    return 0


def _heartbeat_hook(args: argparse.Namespace) -> int:
    async def go() -> None:
        async with remote() as client:
            with _waited_for_hook(args.wait):
                event = await client.heartbeat_hook(args.token, wait=args.wait)
            print(f"heartbeat {event.event_id} in run {event.run_id}")

    asyncio.run(go())
    return 0


def _cancel(args: argparse.Namespace) -> int:
    from ..world.entities import TERMINAL_RUN_STATUSES

    async def go() -> None:
        async with remote() as client:
            view = await client.world.runs.get(args.run_id, resolve_data="none")
            if view.status in TERMINAL_RUN_STATUSES:
                raise CliError(f"run {args.run_id} is already {view.status}", "only a pending or running run "
                               "can be cancelled")
            await client.cancel(args.run_id, reason=args.reason)
            print(f"cancelled {args.run_id}")

    asyncio.run(go())
    return 0
