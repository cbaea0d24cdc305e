"""``awsworld describe RUN``: what a run is and why (its status and why it ended, what it waits on, its pin,
attributes, parent, children, steps and streams), as one document (``describe_document``, ``--json``) and the text
printed from it (``_print_description``). The parser is registered with the other run commands (``cli/runs.py``).
"""

from __future__ import annotations

import argparse
import asyncio
from datetime import UTC, datetime
from typing import Any

from .output import error_text, print_json, remote, shorten, when


def describe_command(args: argparse.Namespace) -> int:
    """``awsworld describe RUN``: the document (``--json``) or its text."""
    async def go() -> None:
        async with remote() as client:
            document = await describe_document(client, args.run_id)
            if args.json:
                print_json(document)
            else:
                _print_description(document, internal=args.internal)

    asyncio.run(go())
    return 0


async def describe_document(client: Any, run_id: str) -> dict[str, Any]:
    """``describe --json``'s document of a run, read through ``client`` (a ``Client`` on any World: the CLI's on
    the stack, a test's on the memory World)."""
    from .._deployments.pins import LATEST, PIN_ATTRIBUTE
    from .._engine.parking import parked_run
    from .._timeline import as_told, failed_run_hint, read_events, read_steps
    from ..authoring.definitions import RETENTION_CONTEXT_KEY
    from ..client.client import cancel_reason, child_runs, run_views
    from ..client.limits import queued_runs
    from ..client.waits import display_names, run_waits
    from ..schedules.info import schedule_json
    from ..world.entities import TERMINAL_RUN_STATUSES
    from .error_view import error_part

    world = client.world
    view = await world.runs.get(run_id, resolve_data="none")
    pin = view.attributes.get(PIN_ATTRIBUTE)
    # In call order, without their inputs and results (describe shows neither): one read, children included.
    # The steps, the log and the streams at once, after the run (an unknown run's error is the run's): their
    # pages were read one after another, each waiting for the last.
    steps, events, streams = await asyncio.gather(read_steps(world, run_id, values=False),
                                                  read_events(world, run_id, values=False),
                                                  world.streams.list(run_id))
    steps = as_told(steps, view.status)  # a step open when the run ended reads cancelled, as Run.steps() says
    # Read together (client.client.run_views, as the run viewer reads them): one after another, 100 children
    # were 100 round trips in a row. One not found keeps the "starting" it always read as.
    views = await run_views(world, child_runs(run_id, steps))
    children = [{"runId": child, "workflow": found.workflow_name, "status": found.status} if found is not None
                else {"runId": child, "workflow": None, "status": "starting"} for child, found in views.items()]
    context = view.execution_context or {}
    counts: dict[str, int] = {}
    shown = display_names(events)
    for step in steps:
        counts[step.status] = counts.get(step.status, 0) + 1
    document = {
        "runId": view.run_id, "workflow": view.workflow_name, "status": view.status,
        # The deployment whose code runs it: its pin when the pin names one (beside a filled "deployment" it read
        # null: the record's own field is the deployment that created the run, which dev and a start from a
        # script leave empty), else the record's.
        "deploymentId": pin if pin is not None and pin != LATEST else view.deployment_id,
        "createdAt": when(view.created_at),
        "startedAt": when(view.started_at), "completedAt": when(view.completed_at),
        "updatedAt": when(view.updated_at), "attributes": dict(view.attributes),
        **error_part(view.error, view.error_code),
        "parentRunId": context.get("parentRunId"), "children": children,
        "schedule": schedule_json(context),
        "steps": {"total": len(steps), "byStatus": counts,
                  "list": [{"stepId": s.step_id, "name": s.step_name, "status": s.status,
                            "attempt": s.attempt, "error": error_text(s.error),
                            "displayName": shown.get(s.step_id)} for s in steps]},
        "streams": streams,
        # Added keys (the ones above keep their names): the end time whatever the status, the cancel
        # reason, and what a pending or running run waits on (client/waits.py's waiting_on).
        "endedAt": when(view.completed_at) if view.status in TERMINAL_RUN_STATUSES else None,
        "cancelReason": cancel_reason(events) if view.status == "cancelled" else None,
        "waitingOn": await run_waits(world, view.run_id, view.status, context, steps, events),
        # A running run awsworld keeps waiting for code that replays it (engine.parking), else None.
        "parked": parked.to_json() if (parked := parked_run(view.status, view.attributes)) else None,
        # The deployment whose code runs it (deployments.pins; "latest": the newest, unpinned), else None.
        "deployment": pin,
        # A pending run waiting for a slot of its workflow's limit: the limit, key, held/limit and its place
        # (client.limits.queued_runs), else None; "waitingOn" has the same wait as one of its entries.
        "queued": (await queued_runs(world, [view])).get(view.run_id),
        # The run `awsworld rerun` (Client.rerun) started this one again from, else None.
        "rerunOf": context.get("rerunOf"),
        # How long the run stays readable after its end: its workflow's retention, fixed when it started
        # (authoring.definitions.RETENTION_CONTEXT_KEY), else None (the stack's RunRetentionDays).
        "retentionSeconds": context.get(RETENTION_CONTEXT_KEY),
        # What a failed run's story ends with (its rerun, naming the steps it completed, which a rerun repeats; or
        # for a workflow no deployment registers what works, the schedule that started it read as it is now:
        # _timeline.failed_run_hint), else None.
        "rerunHint": await failed_run_hint(world, view, steps) if view.status == "failed" else None,
        # The run's final error in full (type, message, failing step, traceback) goes here, from a
        # function of its own (helper `ends`); "error" and "errorCode" above stay as they are.
    }
    return document


INTERNAL_PREFIX = "awsworld."
"""The namespace of awsworld's own names: its attributes (``awsworld.patched.<change id>``, the engine's record of
a ``patched()`` answer) and built-in steps (``awsworld.start_child``, which starts a child run; ``describe``
lists the child itself). People reading ``describe`` see their own unless they ask (``--all``)."""


STATUS_ERROR_CHARS = 200
"""The error on ``describe``'s status line is cut to this many characters: the ``error`` line below has it whole
(a 32 KB message was printed twice)."""


def _status_error(error: str) -> str:
    return error if len(error) <= STATUS_ERROR_CHARS else f"{error[:STATUS_ERROR_CHARS]}… (whole below)"


def _print_description(d: dict[str, Any], *, internal: bool = False) -> None:
    from .._deployments.pins import LATEST, PIN_ATTRIBUTE
    from .._engine.parking import PARKED_ATTRIBUTE
    from .._timeline import deadline_text, how_far, moment
    from ..client.limits import queued_text
    from ..client.waits import describe_waits
    from .error_view import print_error_part

    shown_above = (PARKED_ATTRIBUTE, PIN_ATTRIBUTE)  # a parked mark and a pin have lines of their own

    print(f"run       {d['runId']}")
    print(f"workflow  {d['workflow']}")
    ended = d["endedAt"] and d["status"] in END_LABELS  # "failed at <time>": the end time, labelled by status
    status = f"{END_LABELS[d['status']]} {deadline_text(d['endedAt'])}" if ended \
        else "parked" if d["parked"] else d["status"]
    if d.get("queued"):  # "pending" alone reads as stuck: it is queued, and for which limit's slot
        status += f": queued for a slot of {queued_text(d['queued'])}"
    print(f"status    {status}" + (f"  ({_status_error(d['error'])})" if d["error"] else ""))
    if d["parked"]:
        pinned = d["deployment"] if d["deployment"] != LATEST else None
        print(parked_lines(d["runId"], d["parked"], pinned))
    if d["cancelReason"]:
        print(f"reason    {d['cancelReason']}")
    if d["deployment"]:  # a label of the column's width, as every line here (--json: "deployment")
        print("pinned to " + ("no deployment: each delivery runs the newest code" if d["deployment"] == LATEST
                              else d["deployment"]))
    kept = d.get("retentionSeconds")  # (without one: the stack's RunRetentionDays, which describe cannot see)
    if isinstance(kept, int):
        print(f"kept      {how_far(kept)[3:]} after its end (its workflow's retention)")
    for key in ("createdAt", "startedAt"):  # as describe writes every time: time of day UTC, how long ago
        if d[key]:
            print(f"{key[:-2]:<9} {deadline_text(d[key])}")
    for line in describe_waits(d["waitingOn"]):
        print(f"waits on  {line}")
    if not d["waitingOn"] and (idle := nothing_open(d["status"], parked=bool(d["parked"]))) is not None:
        print(f"waits on  {idle}" + (" (see parked above)" if d["parked"] else ""))
    if d["status"] in UNFINISHED and (written := moment(d["updatedAt"])) is not None:
        # Under what it waits on: how long nothing has moved (a stuck run's last write stays where it was). An
        # ended run's is its end, said above.
        ago = how_far((written - datetime.now(UTC)).total_seconds())
        print(f"          last write {last_write(written)} UTC ({ago})")
    attributes = {key: value for key, value in d["attributes"].items()  # a parked mark and a pin are shown above
                  if key not in shown_above and (internal or not key.startswith(INTERNAL_PREFIX))}
    for key, value in sorted(attributes.items()):
        print(f"attribute {key} = {value}")
    if d["parentRunId"]:
        print(f"parent    {d['parentRunId']}")
    if d["rerunOf"]:
        print(f"rerun of  {d['rerunOf']}")
    if d["schedule"]:
        shown = d["schedule"]
        print(f"schedule  {shown['id']}, tick {shown['tick']} ({shown['trigger']})")
    for child in d["children"]:
        print(f"child     {child['runId']}  {child['status']:<10} {child['workflow'] or ''}")
    listed = [step for step in d["steps"]["list"] if internal or not step["name"].startswith(INTERNAL_PREFIX)]
    counts: dict[str, int] = {}
    for step in listed:
        counts[step["status"]] = counts.get(step["status"], 0) + 1
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    print(f"steps     {len(listed)}" + (f" ({summary})" if summary else ""))
    if "cancelled" in counts:  # (no World write cancels a step: _timeline.step_status reads it so)
        print("          (cancelled: open when the run ended, stopped then; nothing of them is recorded after)")
    for step in listed:
        name = f"{step['displayName']} ({step['name']})" if step.get("displayName") else step["name"]
        line = f"  {name:<30} {step['status']:<10} attempt {step['attempt']}"
        # a completed step keeps its last failed attempt's error (a retry's, a poll's): say it is not the outcome
        earlier = "last failed attempt: " if step["status"] == "completed" else ""
        print(line + (f"  {earlier}{shorten(step['error'], 60)[1:-1]}" if step["error"] else ""))
    if d["streams"]:
        print(f"streams   {', '.join(d['streams'])}")
    own = len([key for key in d["attributes"] if key not in shown_above])
    hidden = [f"{n} awsworld {what}" for n, what in ((own - len(attributes), "attribute(s)"),
                                                     (len(d["steps"]["list"]) - len(listed), "step(s)")) if n]
    if hidden:
        print(f"hidden    {' and '.join(hidden)} (--all shows them)")
    print_error_part(d)


#: How ``describe`` labels a run's end time, by its status.
END_LABELS = {"completed": "completed at", "failed": "failed at", "cancelled": "cancelled at"}


def parked_lines(run_id: str, parked: dict[str, Any], pinned: str | None = None) -> str:
    """``describe``'s lines for a parked run (``_engine.parking``, its ``to_json``): since when (as describe writes
    every time), where and why, and the ways out (``pinned``: the deployment the run is pinned to, whose own code
    it diverged on: ``_engine.parking.ways_out``). The divergence is outlined, without argument values; ``awsworld
    replay`` shows them (a run parked for missing code has none)."""
    from .._engine.parking import MISSING, ways_out, why
    from .._timeline import deadline_text

    change = parked.get("change")
    since = deadline_text(parked["since"]) if parked.get("since") else "?"
    shows = "" if change == MISSING else f"; `awsworld replay {run_id} -m MODULE` shows the arguments"
    return (f"parked    since {since}: {why(change)}{parked['divergence']}\n"
            f"          {ways_out(run_id, change, pinned)}{shows}")


UNFINISHED = ("pending", "running")
"""The statuses of a run that has not ended: what it waits on, and its last write, say something of it."""


def last_write(updated_at: datetime) -> str:
    """When a run last wrote (its record's ``updatedAt``: every event of its log moves it), in UTC to the second:
    ``runs --waiting``'s ``LAST WRITE (UTC)`` column and ``describe``'s ``last write`` line, one text for both."""
    return f"{updated_at.astimezone(UTC):%Y-%m-%d %H:%M:%S}"


def nothing_open(status: str, *, parked: bool) -> str | None:
    """What an unfinished run with nothing open in its log waits on (``describe``'s ``waits on`` line, ``runs
    --waiting``'s column), or None for an ended run: a parked run, code that replays it (a delivery would replay it
    and park it again); any other, its next delivery (a wake queued, or one a lost message owes it: ``awsworld
    wake RUN`` sends it now)."""
    if parked:
        return "code that replays its log"
    if status in UNFINISHED:
        return f"its {'first' if status == 'pending' else 'next'} delivery (nothing open in its log)"
    return None
