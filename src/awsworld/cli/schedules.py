"""``awsworld schedules ...``: schedules at run time (``client.schedules``), for operators and scripts.

    awsworld schedules create eu-sync shop.sync --every 15m --offset 5m --args '["eu"]'
    awsworld schedules list
    awsworld schedules describe eu-sync            # its arguments, policies, counters, next fire times
    awsworld schedules pause eu-sync --note "supplier outage"
    awsworld schedules resume eu-sync              # the catch-up policy settles the ticks it missed
    awsworld schedules trigger eu-sync             # a run now, under the overlap policy
    awsworld schedules backfill eu-sync --start 2026-03-01T00:00Z --end 2026-03-02T00:00Z
    awsworld schedules delete eu-sync

Schedules declared in code (``@workflow(schedule=...)``) appear here once a tick of the deployment that declares
them has run; they can be paused, resumed, triggered and backfilled, and deleted only once no deployment
declares them any more.
"""

from __future__ import annotations

import argparse
import asyncio
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..schedules.policies import CATCHUPS, OVERLAPS
from .errors import parse_json, usage
from .output import print_json, print_table, remote, shorten

if TYPE_CHECKING:
    from ..world.schedules import ScheduleState


def register(sub: Any) -> None:
    group = sub.add_parser("schedules", help="workflows that start themselves: create, list, describe, pause, "
                           "resume, trigger, backfill, delete", description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = group.add_subparsers(dest="schedules_command", required=True, metavar="SUBCOMMAND")
    read = argparse.ArgumentParser(add_help=False)
    read.add_argument("--json", action="store_true", help="print JSON for scripts (stable keys)")

    create = commands.add_parser("create", parents=[read], help="a schedule of a workflow, by its registered name")
    create.add_argument("schedule_id", metavar="ID")
    create.add_argument("workflow", help="the workflow's registered name (its name=)")
    when = create.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", help="5 fields: minute hour day-of-month month day-of-week ('0 2 * * *')")
    when.add_argument("--every", type=duration_flag, help="a fixed interval of at least a minute ('15m', '1h')")
    create.add_argument("--timezone", default="UTC", help="the cron expression's IANA time zone (Europe/Berlin)")
    create.add_argument("--offset", type=duration_flag,
                        help="with --every: the ticks' offset from the interval ('5m', or seconds: 300; default 0)")
    create.add_argument("--args", default="[]", help="the runs' positional arguments, as a JSON array")
    create.add_argument("--kwargs", help="the runs' keyword arguments, as a JSON object")
    create.add_argument("--overlap", choices=OVERLAPS, default="skip", help="when the last run is still going")
    create.add_argument("--catchup", choices=CATCHUPS, default="latest", help="after downtime or a pause")
    create.add_argument("--catchup-window", type=duration_flag,
                        help="missed ticks older than this do not fire ('6h')")
    create.set_defaults(handler=_create)

    listing = commands.add_parser("list", parents=[read], help="every schedule, with its next fire time")
    listing.set_defaults(handler=_list)
    describe = commands.add_parser("describe", parents=[read],
                                   help="a schedule, its runs' arguments and its next fire times")
    describe.add_argument("schedule_id", metavar="ID")
    describe.add_argument("--upcoming", type=int, default=5, help="how many next fire times (default 5)")
    describe.set_defaults(handler=_describe)
    pause = commands.add_parser("pause", parents=[read], help="no tick fires until resume")
    pause.add_argument("schedule_id", metavar="ID")
    pause.add_argument("--note", help="why (shown by list and describe)")
    pause.set_defaults(handler=_pause)
    resume = commands.add_parser("resume", parents=[read], help="fire again (the catch-up policy settles the "
                                 "ticks missed meanwhile)")
    resume.add_argument("schedule_id", metavar="ID")
    resume.set_defaults(handler=_resume)
    trigger = commands.add_parser("trigger", parents=[read], help="a run now, under the overlap policy")
    trigger.add_argument("schedule_id", metavar="ID")
    trigger.add_argument("--overlap", choices=OVERLAPS, help="this time only (default: the schedule's)")
    trigger.set_defaults(handler=_trigger)
    backfill = commands.add_parser("backfill", parents=[read], help="a run for every tick in [START, END) that "
                                   "has none")
    backfill.add_argument("schedule_id", metavar="ID")
    backfill.add_argument("--start", required=True, help="ISO 8601 with a time zone (2026-03-01T00:00Z)")
    backfill.add_argument("--end", required=True, help="ISO 8601 with a time zone, in the past")
    backfill.set_defaults(handler=_backfill)
    delete = commands.add_parser("delete", parents=[read], help="remove a schedule (its runs stay)")
    delete.add_argument("schedule_id", metavar="ID")
    delete.set_defaults(handler=_delete)


def schedule_json(state: ScheduleState, upcoming: list[datetime] | None = None,
                  arguments: tuple[tuple[Any, ...], dict[str, Any]] | None = None) -> dict[str, Any]:
    """A schedule for scripts (stable camelCase keys); ``describe`` adds its runs' ``args`` and ``kwargs``."""
    from ..world.schedules import tick_text

    spec = state.spec
    document: dict[str, Any] = {
        "scheduleId": state.schedule_id, "workflow": state.workflow_name, "source": state.source,
        "module": state.module, "cron": spec.cron, "timezone": spec.timezone, "everySeconds": spec.every,
        "offsetSeconds": spec.offset if spec.every is not None else None, "overlap": state.overlap,
        "catchup": state.catchup, "catchupWindowSeconds": state.catchup_window, "paused": state.paused,
        # An orphaned schedule keeps its cursor (declared again, it goes on from there) but fires nothing: no next.
        "note": state.note, "orphaned": state.orphaned, "nextAt": None if state.orphaned else _text(state.next_at),
        "lastRunId": state.last_run_id, "lastTick": _text(state.last_tick),
        "buffered": state.buffered.run_id if state.buffered else None,
        "fired": state.fired, "skipped": state.skipped, "missed": state.missed,
        "createdAt": _text(state.created_at), "updatedAt": _text(state.updated_at),
    }
    if arguments is not None:
        document["args"], document["kwargs"] = list(arguments[0]), arguments[1]
    if upcoming is not None:
        document["upcoming"] = [tick_text(t) for t in upcoming]
    return document


def _text(moment: datetime | None) -> str | None:
    from ..world.schedules import tick_text

    return None if moment is None else tick_text(moment)


def _state_word(d: dict[str, Any]) -> str:
    if d["orphaned"]:
        return "orphaned"
    return "paused" if d["paused"] else "active"


SCHEDULES_HEADER = ("SCHEDULE", "STATE", "WORKFLOW", "WHEN", "NEXT")


def in_zone(tick: str | None, zone: str | None) -> str:
    """A fire time (stored as UTC text) for people, as ``describe`` writes a wait's (``_timeline.deadline_text``:
    the time of day in UTC, the date when it is not today, how far off it is), and first in the schedule's own
    time zone when it has one, so a cron written for Europe/Berlin reads as the Berlin time it means
    (``2027-01-01 12:00:00 Europe/Berlin, 2027-01-01 11:00:00.000 UTC (in 26 d 3 h)``). ``--json`` keeps the
    stored text."""
    from .._timeline import deadline_text
    from ..world.schedules import parse_tick

    if tick is None:
        return "-"
    try:
        due = parse_tick(tick)
    except ValueError:
        return tick
    utc = deadline_text(due)
    if not zone or zone == "UTC":
        return utc
    try:
        local = due.astimezone(ZoneInfo(zone))
    except ZoneInfoNotFoundError:
        return utc
    return f"{local:%Y-%m-%d %H:%M:%S} {zone}, {utc}"


def _row(d: dict[str, Any]) -> tuple[str, str, str, str, str]:
    from ..world.schedules import when_text

    when = when_text(d["cron"], d["timezone"], d["everySeconds"], d.get("offsetSeconds"))
    return d["scheduleId"], _state_word(d), d["workflow"], when, in_zone(d["nextAt"], d["timezone"])


def _print_schedule(d: dict[str, Any]) -> None:
    schedule_id, state, workflow, when, upcoming = _row(d)
    print(f"{schedule_id}  {state:<8} {workflow}  {when}  next {upcoming}")
    if "args" in d:  # describe's: what every run of it is started with
        keywords = f" {shorten(d['kwargs'], 200)}" if d["kwargs"] else ""
        print(f"  {'arguments':<21} {shorten(d['args'], 200)}{keywords}")
    from ..world.schedules import interval_text

    window = d.get("catchupWindowSeconds")
    lines = {"source": d.get("source"), "module": d.get("module"), "overlap": d.get("overlap"),
             "catchup": d.get("catchup"), "catchup window": None if window is None else interval_text(window),
             "note": d.get("note"), "last run": d.get("lastRunId"),
             "last tick": None if d.get("lastTick") is None else in_zone(d["lastTick"], d["timezone"]),
             "buffered run": d.get("buffered")}  # (for people: --json has the stable keys)
    for label, value in lines.items():
        if value is not None:
            print(f"  {label:<21} {value}")
    print(f"  {'runs':<21} {d['fired']} fired, {d['skipped']} skipped (overlap), {d['missed']} missed")
    for moment in d.get("upcoming", []):
        print(f"  {'fires at':<21} {in_zone(moment, d['timezone'])}")


def _run(args: argparse.Namespace, work: Any) -> int:
    async def go() -> Any:
        async with remote() as client:
            return await work(client.schedules)

    document = asyncio.run(go())
    if args.json:
        print_json({k: v for k, v in document.items() if k != "text"} if isinstance(document, dict) else document)
    elif isinstance(document, list):
        if document:
            print_table(SCHEDULES_HEADER, [_row(item) for item in document])
        else:
            print("no schedules")
    elif "text" in document:
        print(document.pop("text"))
    else:
        _print_schedule(document)
    return 0


def _create(args: argparse.Namespace) -> int:
    from ..schedules.model import Schedule, catchup_refusal, spec_of, window_of

    positional = parse_json(args.args, "--args")
    keywords = {} if args.kwargs is None else parse_json(args.kwargs, "--kwargs")
    if not isinstance(positional, list):
        raise usage("--args takes a JSON array", "e.g. --args '[\"eu\", 3]'")
    if not isinstance(keywords, dict):
        raise usage("--kwargs takes a JSON object", "e.g. --kwargs '{\"region\": \"eu\"}'")
    refused = catchup_refusal(args.catchup, args.overlap, flag)
    if refused is not None:  # (``Schedule`` refuses it too, in its own spelling: ``overlap='allow_all'``)
        raise usage(refused, "see `awsworld schedules create --help`")
    offset = 0 if args.offset is None else args.offset
    try:  # the rules ``Schedule`` checks, spelled in this command's flags (``--catchup-window``, not catchup_window)
        spec_of(args.cron, args.every, offset, args.timezone, flag)
        window_of(args.catchup_window, flag)
        schedule = Schedule(cron=args.cron, every=args.every, offset=offset,
                            timezone=args.timezone, args=positional, kwargs=keywords, overlap=args.overlap,
                            catchup=args.catchup, catchup_window=args.catchup_window)
    except (TypeError, ValueError) as error:
        raise usage(str(error), "see `awsworld schedules create --help`") from None

    async def work(schedules: Any) -> Any:
        try:
            created = await schedules.create(args.schedule_id, args.workflow, schedule)
            return schedule_json(created, None, (tuple(schedule.args), dict(schedule.kwargs)))  # what runs get
        except TypeError as error:  # the arguments do not fit the workflow (checked with AWSWORLD_MODULES set)
            raise usage(str(error), "--args and --kwargs are the workflow's parameters") from None

    return _run(args, work)


def duration_flag(text: str) -> str | int:
    """A duration flag's text as ``Schedule`` takes it: digits alone are that many seconds (the duration parser takes
    a number of seconds as a number, never as text, and a flag is always text: ``--offset 0``, the default its help
    names, was refused as an unreadable duration), anything else is the duration's text ('5m')."""
    return int(text) if text.isdigit() else text


def flag(name: str, value: str | None = None, /) -> str:
    """An option as ``schedules create`` takes it (``--catchup-window``, ``--overlap allow_all``): how the
    rules of schedules/model.py spell the options they name when this command calls them."""
    option = "--" + name.replace("_", "-")
    return option if value is None else f"{option} {value}"


def _list(args: argparse.Namespace) -> int:
    async def work(schedules: Any) -> Any:
        return [schedule_json(state) for state in await schedules.list()]

    return _run(args, work)


def _describe(args: argparse.Namespace) -> int:
    async def work(schedules: Any) -> Any:
        described = await schedules.describe(args.schedule_id, upcoming=max(0, args.upcoming))
        return schedule_json(described.state, described.upcoming, (described.args, described.kwargs))

    return _run(args, work)


def _pause(args: argparse.Namespace) -> int:
    async def work(schedules: Any) -> Any:
        return schedule_json(await schedules.pause(args.schedule_id, note=args.note))

    return _run(args, work)


def _resume(args: argparse.Namespace) -> int:
    async def work(schedules: Any) -> Any:
        return schedule_json(await schedules.resume(args.schedule_id))

    return _run(args, work)


def _trigger(args: argparse.Namespace) -> int:
    async def work(schedules: Any) -> Any:
        done = await schedules.trigger(args.schedule_id, overlap=args.overlap)
        if done.run_id:
            text = f"started {done.run_id}"
        else:  # nothing started: which run is in the way, and how to start one anyway
            state = await schedules.get(args.schedule_id)
            last = state.last_run_id or "the last run"
            text = (f"buffered: {state.buffered.run_id if state.buffered else 'a run'} starts at the first tick "
                    f"after {last} ends (overlap buffer_one)" if done.outcome == "buffered" else
                    f"skipped: {last} is still going and the overlap policy is {args.overlap or state.overlap}; "
                    "nothing started (--overlap allow_all starts one beside it, buffer_one once it ends)")
        return {"scheduleId": args.schedule_id, "outcome": done.outcome, "runId": done.run_id, "text": text}

    return _run(args, work)


def _backfill(args: argparse.Namespace) -> int:
    start, end = _moment(args.start, "--start"), _moment(args.end, "--end")

    async def work(schedules: Any) -> Any:
        from ..schedules.info import schedule_json as started_by

        began = datetime.now(UTC)
        run_ids = await schedules.backfill(args.schedule_id, start, end)
        # Which of them this backfill made, and which ticks had their run already (a tick's run is made once): a
        # second backfill of a range printed what the first did, and nothing said that it started nothing.
        runs = []
        for at in range(0, len(run_ids), 50):
            runs += await asyncio.gather(*(schedules.world.runs.get(r, resolve_data="none")
                                           for r in run_ids[at:at + 50]))
        new = [r.run_id for r in runs if r.created_at >= began]
        lines = [f"{len(run_ids)} tick(s) in the range: {len(new)} run(s) started, {len(run_ids) - len(new)} "
                 "had theirs already (a tick's run is made once)"]
        for run in runs:
            shown = started_by(run.execution_context) or {}
            how = "started" if run.run_id in new else f"had its run already ({shown.get('trigger', '?')}, " \
                                                      f"{run.status})"
            lines.append(f"{run.run_id}  tick {shown.get('tick', '?')}  {how}")
        if not run_ids:
            spec = (await schedules.get(args.schedule_id)).spec
            lines = [f"no tick in [{start.isoformat()}, {end.isoformat()}): nothing started (it fires "
                     f"{spec.describe()})"]
        return {"scheduleId": args.schedule_id, "runIds": run_ids, "started": new, "text": "\n".join(lines)}

    return _run(args, work)


def _delete(args: argparse.Namespace) -> int:
    async def work(schedules: Any) -> Any:
        await schedules.delete(args.schedule_id)
        return {"scheduleId": args.schedule_id, "deleted": True, "text": f"deleted {args.schedule_id}"}

    return _run(args, work)


def _moment(text: str, flag: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise usage(f"{flag} {text!r} is not an ISO 8601 time", "e.g. 2026-03-01T00:00Z") from None
    if moment.tzinfo is None:
        raise usage(f"{flag} {text!r} has no time zone", "add Z or an offset: 2026-03-01T00:00+01:00")
    return moment
