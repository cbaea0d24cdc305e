"""A readable timeline of one run, from its event log: steps with attempts and durations, waits, hooks, and
the values that went in and came out (inputs, results, payloads, errors).

``timeline_rows`` builds the rows (the CLI's ``--json`` prints them as they are); ``print_timeline`` prints them
as a table. Values are cut to one line unless ``full``; hook tokens and ids never are, because an operator
pastes them into ``awsworld resume`` (a webhook token is 64 characters).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ._deployments.pins import PIN_ATTRIBUTE
from ._engine.divergence import call_order
from ._engine.ops import DISPLAY_NAME_FIELD, HOOK_ID_FIELD, HOOK_TIMEOUT, HOOK_WAIT_FIELD
from ._engine.parking import PARKED_ATTRIBUTE
from ._engine.time_scale import recorded_factor
from ._worker.error_shapes import caught_without_cause, error_details, error_summary, failed_in, let_through
from ._worker.run_limits import slot_text
from ._worker.step_runner import INLINE
from .authoring.durations import duration_text
from .authoring.errors import UNKNOWN_WORKFLOW
from .authoring.poll_spec import POLL_NOT_READY, STATE_FIELD
from .schedules.info import renamed_schedule_text, schedule_now, schedule_of
from .world.entities import TERMINAL_RUN_STATUSES, Step, StepStatus
from .world.entities import Run as RunView
from .world.events import Event
from .world.pages import MAX_ENTITIES_PAGE, collect_pages
from .world.protocol import World
from .world.rules.skips import DUE_FIELD, skipped
from .world.schedules import ScheduleState
from .world.sdk_values import readable_value

# Where each event type keeps the value worth showing, and what to call it.
VALUES: dict[str, tuple[str, str]] = {
    "run_created": ("input", "input"),
    "run_completed": ("output", "output"),
    "step_created": ("input", "input"),
    "step_completed": ("result", "result"),
    "hook_received": ("payload", "payload"),
    "hook_created": ("metadata", "metadata"),
}
ERRORS = ("run_failed", "step_failed", "step_retrying")


@dataclass
class Row:
    """One event of the timeline: milliseconds since the run's first event, the event type, what it concerns
    (a step's name, a hook's token, a wait), a short detail (attempt, duration), and its value or error."""

    at_ms: float
    event_type: str
    what: str
    detail: str
    value: Any = None
    has_value: bool = False
    error: str | None = None
    error_details: dict[str, Any] | None = None
    """The error as stored: ``type`` (qualified), ``message``, ``stack``; ``stepName``/``cause`` on a run's error."""
    event_id: str = ""
    correlation_id: str | None = None
    created_at: datetime | None = None
    display_name: str | None = None
    """The call's name for people (``with_name``, ``sleep(name=)``, a map item's label), on each of its events."""
    value_label: str | None = None
    """What the value is when its event type does not say (a rejected poll's ``state``)."""
    sdk: bool = False
    """A run of the Workflow SDK's TypeScript runtime: the text shows its value's bytes read
    (``world/sdk_values.py``); ``--json`` keeps them as stored."""

    @property
    def shown_value(self) -> Any:
        """The value as people read it (the text, the UI): a TypeScript runtime's bytes read."""
        return readable_value(self.value) if self.sdk else self.value

    def to_json(self) -> dict[str, Any]:
        """Stable keys for scripts (``awsworld events --json``)."""
        return {"eventId": self.event_id, "eventType": self.event_type, "correlationId": self.correlation_id,
                "createdAt": None if self.created_at is None else self.created_at.isoformat(),
                "atMs": round(self.at_ms, 3), "what": self.what, "displayName": self.display_name,
                "detail": self.detail,
                "value": self.value if self.has_value else None, "error": self.error,
                "errorDetails": self.error_details}


def _ms(a: datetime, b: datetime) -> float:
    return (b - a).total_seconds() * 1000


def when(moment: datetime | None) -> str | None:
    """A time as a JSON document shows it (ISO 8601), None kept: the viewers' and ``describe``'s waits'.
    (``cli/output.py`` keeps a copy of its own: the CLI's start imports nothing this module imports.)"""
    return None if moment is None else moment.isoformat()


def moment(value: Any) -> datetime | None:
    """A stored time (an ISO string, ``Z`` or an offset; or a datetime) as an aware datetime, or None."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    if not isinstance(value, datetime):
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def how_far(seconds: float) -> str:
    """A distance in time for people, to the minute past an hour: ``in 42 s``, ``in 23 h 59 min``, ``2 d 3 h
    ago`` (``authoring/durations.py``, ``duration_text``)."""
    text = duration_text(seconds)
    return f"in {text}" if seconds >= 0 else f"{text} ago"


def deadline_text(value: Any, now: datetime | None = None) -> str:
    """When a wait, a retry or a hook's timeout falls due, for people: the time of day (UTC) when that is today,
    the date too when it is not, and how far from ``now`` it is (``2026-12-06 01:17:18.352 UTC (in 23 h 59
    min)``), so a wait a day away never reads as seconds away. ``describe --json`` and ``events --json`` keep
    the stored ISO times."""
    due = moment(value)
    if due is None:
        return str(value)
    now = now or datetime.now(UTC)
    due = due.astimezone(UTC)
    clock = f"{due:%H:%M:%S}.{due.microsecond // 1000:03d} UTC"
    day = "" if due.date() == now.astimezone(UTC).date() else f"{due:%Y-%m-%d} "
    return f"{day}{clock} ({how_far((due - now).total_seconds())})"


def hook_waits(events: Sequence[Event]) -> dict[str, tuple[str, str]]:
    """A hook's own waits (its ``create_hook(timeout=...)`` and heartbeat deadlines, ``_engine.ops.HOOK_ID_FIELD``):
    wait id -> (hook id, ``"timeout"`` or ``"heartbeat"``). A log written before the mark has none."""
    found: dict[str, tuple[str, str]] = {}
    for event in events:
        data = event.event_data or {}
        if event.event_type == "wait_created" and isinstance(data.get(HOOK_ID_FIELD), str):
            found[event.correlation_id or ""] = (data[HOOK_ID_FIELD], str(data.get(HOOK_WAIT_FIELD)))
    return found


def hook_wait_label(role: str, hook: str) -> str:
    """What a hook's own wait is, for people: ``timeout of hook approve:7``."""
    return f"{'timeout' if role == HOOK_TIMEOUT else 'heartbeat deadline'} of hook {hook}"


def _error_text(error: Any) -> str:
    return error_summary(error) or ""


def error_lines(error: Any) -> list[str]:
    """What ``--full`` prints under an error's row: for a failed step (or child run) the workflow let through,
    the step (the child) and its own traceback (where the user's code raised), then the workflow's traceback; else
    the traceback."""
    if not isinstance(error, dict):
        return []
    lines: list[str] = []
    cause = error.get("cause")
    if isinstance(cause, dict):
        lines.append(f"{failed_in(error)} raised {cause.get('type') or cause.get('name')}: "
                     f"{cause.get('message', '')}")
        lines.extend(str(cause.get("stack") or "").rstrip("\n").splitlines())
        if error.get("stack"):
            lines.append(let_through(error))
    elif error.get("type") and error.get("type") != error.get("name"):
        lines.append(f"type {error['type']}")
    if (caught := caught_without_cause(error)) is not None:
        lines.append(caught)
    lines.extend(str(error.get("stack") or "").rstrip("\n").splitlines())
    return lines


def rerun_hint(run_id: str, workflow: str, code: str | None = None, schedule_id: str | None = None,
               schedule: ScheduleState | None = None) -> str:
    """What ends a failed run's story, as ``awsworld describe`` and the run viewer say it (``failed_run_hint``): a
    failed run is final (``awsworld wake`` refuses it), and the way on is a new run with its input
    (docs/how-to/errors.md).

    Not for a run that failed with ``UNKNOWN_WORKFLOW`` (its workflow renamed, or its module no longer deployed):
    a rerun starts the same name again and fails the same way, so the hint says what does work: code of that name
    back, else the new name, and for a run a schedule started (``schedule_id``; ``schedule``, that schedule now,
    None once deleted), what is true of the schedule: one created through the API still names the workflow and goes
    on starting runs of it; one declared in code follows the code (``schedules.info.renamed_schedule_text``)."""
    if code != UNKNOWN_WORKFLOW:
        return (f"once the cause is fixed, `awsworld rerun {run_id}` starts a new run of its workflow with this "
                "input, on the newest code (every step runs again)")
    back = (f"no deployment registered {workflow!r}, so a rerun fails the same way until code of that name is "
            f"deployed again (then `awsworld rerun {run_id}`); if the workflow was renamed, start the new name with "
            "the same arguments (`awsworld start NEW_NAME '[...]'`)")
    if schedule_id is None:
        return back
    told = renamed_schedule_text(schedule_id, workflow, schedule)
    if told is not None:
        return f"{back}; {told}"
    # (Not a backfill of the tick: a schedule's tick has one run id, this failed run's, so it would start nothing.)
    return (f"{back}, and create schedule {schedule_id} on it: it still names the old one "
            f"(`awsworld schedules delete {schedule_id}`, then `awsworld schedules create {schedule_id} NEW_NAME ...`)")


async def failed_run_hint(world: World, run: RunView) -> str:
    """``rerun_hint`` for a failed run, the schedule that started it read as it is now when that matters (a run of a
    workflow no deployment registers): ``awsworld describe`` (``cli/describe.py``) and the run viewer
    (``ui/app.py``) say the same."""
    info = schedule_of(run.execution_context)
    if info is None:
        return rerun_hint(run.run_id, run.workflow_name, run.error_code)
    state = await schedule_now(world, info.schedule_id) if run.error_code == UNKNOWN_WORKFLOW else None
    return rerun_hint(run.run_id, run.workflow_name, run.error_code, info.schedule_id, state)


def error_part(error: Any, code: str | None) -> dict[str, Any]:
    """A run's error for a document (``describe --json``, the UI's run): ``error`` (one line), ``errorCode``, and
    ``errorDetails``, the stored error whole (``name``, qualified ``type``, ``message``, ``stack``; for a failed
    step the workflow let through, ``stepName``, ``stepId``, ``attempt`` and ``cause``: the step's own error with
    its traceback; for a failed child run, ``childRunId``, ``childWorkflowName`` and the child's error as
    ``cause``)."""
    return {"error": error_summary(error), "errorCode": code, "errorDetails": error_details(error)}


def _skip_detail(data: dict[str, Any], what: str) -> str:
    """An operator's skip (``world.rules.skips``): who, and when the wait was due."""
    skip = skipped(data) or {}
    return f"{what} skipped by {skip.get('by', '?')} (was due {skip.get(DUE_FIELD) or '?'})"


def _scaled(data: dict[str, Any]) -> str:
    """Written under a time scale (``awsworld dev --time-scale``): say so beside the time it ends."""
    factor = recorded_factor(data)
    return f" (time scale {factor:g})" if factor != 1 else ""


ATTRIBUTE_VALUE_WIDTH = 60
"""An ``attr_set`` row's value is cut to this many characters (``--json`` has the event's data whole)."""


def _attributes(changes: Any) -> tuple[str, str]:
    """An ``attr_set`` row's what and detail: the keys it set, and the value (one key) or how many; awsworld's own
    marks in words (``deployment  pinned to v7``, ``parked  at step 1 (event 3): ...``). Every run's second event
    is one (its deployment's pin, ``$awsworld.deployment``), and it read as a blank row."""
    if not isinstance(changes, list) or not changes:
        return "", ""
    pairs = [(str(c.get("key", "?")), c.get("value")) for c in changes if isinstance(c, dict)]
    if len(pairs) != 1:
        return ", ".join(key for key, _ in pairs), f"{len(pairs)} attributes"
    key, value = pairs[0]
    if key == PIN_ATTRIBUTE:  # awsworld's own marks in words, as describe and the UI show them
        return "deployment", f"pinned to {value}" if value is not None else "unpinned"
    if key == PARKED_ATTRIBUTE:
        divergence = value.get("divergence") if isinstance(value, dict) else None
        return "parked", _cut(f"at {divergence}") if divergence else "no more: it replays again"
    if value is None:
        return key, "cleared"
    return key, "= " + _cut(value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), default=str))


def _cut(text: str) -> str:
    return text if len(text) <= ATTRIBUTE_VALUE_WIDTH else text[:ATTRIBUTE_VALUE_WIDTH - 1] + "…"


def timeline_rows(events: list[Event]) -> list[Row]:
    if not events:
        return []
    t0 = events[0].created_at
    context = (events[0].event_data or {}).get("executionContext") if events[0].event_type == "run_created" else None
    sdk = isinstance(context, dict) and bool(context.get("workflowCoreVersion"))  # as _http.push.sdk_run reads it
    tokens = {e.correlation_id or "": str((e.event_data or {}).get("token") or e.correlation_id)
              for e in events if e.event_type == "hook_created"}  # a timeout's wait may come before its hook
    of_hooks = hook_waits(events)
    names: dict[str, str] = {}
    shown: dict[str, str] = {}  # correlation id -> display name, from its *_created event
    started: dict[str, datetime] = {}
    limit: str | None = None  # the slot its start waited for (``run_limits.slot_text``), from its run_created
    rows: list[Row] = []
    for event in events:
        data = event.event_data or {}
        corr = event.correlation_id or ""
        kind = event.event_type
        if kind in ("step_created", "wait_created", "hook_created") and isinstance(data.get(DISPLAY_NAME_FIELD), str):
            shown[corr] = data[DISPLAY_NAME_FIELD]
        display = shown.get(corr)
        what, detail = display or corr, ""
        if kind == "step_created":
            step_name = str(data.get("stepName", corr))
            names[corr] = step_name if display is None else f"{display} ({step_name})"
            what = names[corr]
        elif kind.startswith("step_"):
            what = names.get(corr, corr)
            if kind == "step_started":
                started[corr] = event.created_at
                detail = f"attempt {data.get('attempt')}" + (", inline" if data.get(INLINE) is True else "")
            elif kind == "step_retrying" and skipped(data) is not None:
                detail = _skip_detail(data, "back-off")
            elif kind in ("step_completed", "step_failed", "step_retrying") and corr in started:
                detail = f"took {_ms(started[corr], event.created_at):.0f} ms"
                if kind == "step_retrying" and data.get("retryAfter") is not None:  # (the TypeScript runtime's
                    # retries carry none: its delayed message is the back-off, and "retry at ?" said nothing)
                    detail += f"; retry at {deadline_text(data['retryAfter'])}" + _scaled(data)
        elif kind == "wait_completed" and skipped(data) is not None:
            detail = _skip_detail(data, "wait")
            if corr in of_hooks:
                hook, role = of_hooks[corr]
                what = f"{display or corr} ({hook_wait_label(role, tokens.get(hook, hook))})"
        elif kind.startswith("wait_") and corr in of_hooks:
            hook, role = of_hooks[corr]
            what = f"{display or corr} ({hook_wait_label(role, tokens.get(hook, hook))})"
            if kind == "wait_created":
                detail = f"until {deadline_text(data.get('resumeAt'))}" + _scaled(data)
        elif kind == "wait_created":
            detail = f"until {deadline_text(data.get('resumeAt'))}" + _scaled(data)
        elif kind.startswith("hook_"):
            token = str(data.get("token") or corr)
            names.setdefault(corr, token if display is None else f"{display} ({token})")
            what = names[corr]
            if kind == "hook_created" and data.get("isWebhook"):
                detail = "webhook"
        elif kind == "run_created":
            what = str(data.get("workflowName", ""))
            limit = slot_text(data.get("executionContext"))
        elif kind == "run_started" and limit is not None:  # the run's start waited for a slot of its limit
            waited = _ms(t0, event.created_at)
            detail = f"queued {f'{waited:.0f} ms' if waited < 10_000 else how_far(waited / 1000)[3:]} for {limit}"
        elif kind == "run_cancelled" and data.get("cancelReason"):
            detail = f"reason: {data['cancelReason']}"
        elif kind == "attr_set":
            what, detail = _attributes(data.get("changes"))
        row = Row(_ms(t0, event.created_at), kind, what, detail, event_id=event.event_id, correlation_id=
                  event.correlation_id, created_at=event.created_at, display_name=display, sdk=sdk)
        field = VALUES.get(kind)
        if field is not None and field[0] in data and not (kind == "hook_created" and data[field[0]] is None):
            row.value, row.has_value = data[field[0]], True
        error = data.get("error")
        if kind == "step_retrying" and isinstance(error, dict) and error.get("name") == POLL_NOT_READY:
            detail += f"; {error.get('message', 'not ready')}"  # a rejected poll: not an error
            if STATE_FIELD in error:  # a poll with state: its result, the next poll's state
                row.value, row.has_value, row.value_label = error[STATE_FIELD], True, "state"
            row.detail = detail
        elif kind in ERRORS and "error" in data and skipped(data) is None:  # (a skip repeats the attempt's error)
            row.error = _error_text(error)
            row.error_details = error_details(error) if isinstance(error, dict) else None
        rows.append(row)
    return rows


def _value_text(row: Row, width: int, full: bool) -> str:
    if row.error is not None:
        text = f"error {row.error}"
    elif row.has_value:
        label = row.value_label or VALUES[row.event_type][1]
        text = f"{label} {json.dumps(row.shown_value, ensure_ascii=False, separators=(',', ':'), default=str)}"
    else:
        return ""
    if not full and len(text) > width:
        text = text[: max(1, width - 1)] + "…"
    return text


async def read_events(world: World, run_id: str, *, values: bool = True) -> list[Event]:
    return await collect_pages(lambda cursor: world.events.list(run_id, cursor=cursor,
                                                                resolve_data="all" if values else "none"))


def step_status(status: StepStatus, run_status: str) -> StepStatus:
    """A step's status as its readers are told it: ``cancelled`` for a step still ``pending`` or ``running`` in the
    World when its run ended (cancelled, or failed while it was open: a poll waiting for its next check, a running
    attempt). The run's end stopped it and nothing of it is recorded after (``step_runner``'s run-ended check), but
    no World write marks it, so read as stored it looked as if it would still run. The one rule ``awsworld
    describe`` (``cli/describe.py``) and ``Run.steps()`` (``client/client.py``) apply, through ``as_told``, and the
    run viewer's step lanes (``ui/model.py``, ``picture``)."""
    open_at_end = run_status in TERMINAL_RUN_STATUSES and status in ("pending", "running")
    return "cancelled" if open_at_end else status


async def read_steps(world: World, run_id: str, *, values: bool = True) -> list[Step]:
    """The run's steps in call order (a World lists them by id, where ``step_10`` sorts before ``step_2``), in
    pages of the most a World gives (``MAX_ENTITIES_PAGE``): at ``steps.list``'s default of 100, ``describe`` of
    a 3,000-step run under ``awsworld dev`` made 30 Queries, each of which moto answers by sorting the run's whole
    partition (16 s). As stored: ``as_told`` gives them as readers are told them."""
    steps = await collect_pages(lambda cursor: world.steps.list(run_id, cursor=cursor, limit=MAX_ENTITIES_PAGE,
                                                                resolve_data="all" if values else "none"))
    return sorted(steps, key=lambda step: call_order(step.step_id))


def as_told(steps: Sequence[Step], run_status: str) -> list[Step]:
    """``steps`` of a run whose status is ``run_status``, each with its status as ``step_status`` tells it."""
    return [step if (status := step_status(step.status, run_status)) == step.status
            else step.model_copy(update={"status": status}) for step in steps]


async def print_timeline(world: World, run_id: str, *, values: bool = True, full: bool = False) -> None:
    """Print the run's timeline; with ``values``, each event's input, result, payload or error too (one line
    each, cut to the terminal's width unless ``full``; with ``full``, an error's traceback under it)."""
    rows = timeline_rows(await read_events(world, run_id, values=values))
    if not rows:
        print(f"run {run_id}: no events")
        return
    print(f"timeline of {run_id} ({len(rows)} events)")
    what_width = max(12, *(len(r.what) for r in rows))  # tokens are never cut: the column grows instead
    detail_width = max(6, *(len(r.detail) for r in rows))
    print(f"  {'at':>11}  {'event':<15} {'what':<{what_width}} {'detail':<{detail_width}}  value")
    columns = shutil.get_terminal_size((120, 24)).columns
    for row in rows:
        line = f"  {row.at_ms:8.0f} ms  {row.event_type:<15} {row.what:<{what_width}} {row.detail:<{detail_width}}"
        room = columns - len(line) - 2
        if room >= 40 or full:
            print(f"{line}  {_value_text(row, room, full)}".rstrip())
            if full:  # the traceback, whole (bounded when stored), under its row
                for text in error_lines(row.error_details):
                    print(f"{'':>15}{text}")
            continue
        print(line.rstrip())  # long tokens leave no room: the value goes on a line of its own
        text = _value_text(row, columns - 16, full)
        if text:
            print(f"{'':>15}{text}")
    print(f"  total {rows[-1].at_ms:.0f} ms")
