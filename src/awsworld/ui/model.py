"""A run's picture, from its event log alone: the lanes of the waterfall (one per step, wait and hook, and the
run's wait for a slot of its workflow's limit: ``QUEUED``), their attempts and retries, the hooks with their
payloads, the child runs. Pure functions of the events, so the page, the live refresh and the tests all build the
same thing, and no read beyond the log is needed."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .._engine.ops import DISPLAY_NAME_FIELD, PAYLOAD_CODEC_FIELD
from .._timeline import (  # pyright: ignore[reportPrivateUsage]
    _error_text,
    hook_wait_label,
    hook_waits,
    moment,
    step_status,
)
from .._worker.run_limits import slot_text
from .._worker.step_runner import INLINE
from ..durable.child_calls import START_CHILD, child_run_id
from ..durable.hook_payloads import is_heartbeat_event
from ..world.entities import Run, StepStatus
from ..world.events import RUN_END_EVENT_TYPES, Event
from ..world.rules.hooks import hook_state
from ..world.rules.skips import skipped

QUEUED = "queued"
"""The kind (and key in ``picture``'s lanes) of the run's own first lane when its workflow has a concurrency limit:
from its ``run_created`` to its ``run_started``, the wait for its slot (``_worker.run_limits``)."""


@dataclass
class Attempt:
    """One attempt of a step: from its ``step_started`` to the event that ended it (None: still running).
    ``inline``: the flow ran it in its replay loop; otherwise a step message of its own ran it (queued)."""

    number: int
    start: datetime
    end: datetime | None = None
    outcome: str = "running"  # running, completed, failed, retrying
    error: str | None = None
    retry_after: datetime | None = None
    inline: bool = False


@dataclass
class Lane:
    """One row of the waterfall: a step, a wait (where the run slept) or a hook (where it waited for a payload),
    from its creation to its end."""

    kind: str  # step, wait, hook; queued: the run's start waiting for a slot of its workflow's limit
    key: str  # the correlation id
    label: str
    created: datetime
    ended: datetime | None = None
    status: str = "running"
    attempts: list[Attempt] = field(default_factory=list[Attempt])
    detail: str = ""
    child_run_id: str | None = None

    @property
    def path(self) -> str:
        """How the step's attempts ran: ``inline``, ``queued`` (each from a step message of its own), ``mixed``
        (an inline attempt retried from a message, say), or ``""`` before any started."""
        kinds = {attempt.inline for attempt in self.attempts}
        return "" if not kinds else "mixed" if len(kinds) > 1 else "inline" if True in kinds else "queued"


@dataclass
class HookInfo:
    hook_id: str
    token: str
    webhook: bool
    created: datetime
    metadata: Any = None
    payloads: list[tuple[str, datetime, Any]] = field(default_factory=list[tuple[str, datetime, Any]])
    heartbeats: int = 0  # ``Client.heartbeat_hook``'s, counted apart: a heartbeat is not a payload
    last_heartbeat: datetime | None = None
    disposed: bool = False
    state: str = "open"
    """open, disposed (by its workflow) or closed (its run ended with it open): ``world.rules.hooks.hook_state``."""
    codec: bool = False  # its payloads are a codec's text (``PAYLOAD_CODEC_FIELD``): the page sends the text as is


@dataclass
class Picture:
    start: datetime | None
    end: datetime | None
    lanes: list[Lane]
    hooks: list[HookInfo]
    children: list[str]


def parent_of(run: Run) -> str | None:
    """The run that started ``run`` as its child (its ``executionContext`` says), if any."""
    parent = (run.execution_context or {}).get("parentRunId")
    return parent if isinstance(parent, str) else None


def _skip_note(detail: str, data: dict[str, Any]) -> str:
    """A lane's detail with an operator's skip said (``world.rules.skips``)."""
    note = f"skipped by {(skipped(data) or {}).get('by', '?')}"
    return f"{detail}; {note}" if detail else note


def picture(run_id: str, events: list[Event]) -> Picture:
    """The waterfall's lanes in creation order, the hooks, and the child runs (from the steps named
    ``awsworld.start_child``, as ``Run.children()`` finds them)."""
    lanes: dict[str, Lane] = {}
    hooks: dict[str, HookInfo] = {}
    children: list[str] = []
    of_hooks = hook_waits(events)  # a hook's timeout and heartbeat deadline: shown as such, ended with the hook
    tokens = {e.correlation_id or "": str((e.event_data or {}).get("token", "")) for e in events
              if e.event_type == "hook_created"}
    for event in events:
        data = event.event_data or {}
        corr = event.correlation_id or ""
        kind, at = event.event_type, event.created_at
        display = data.get(DISPLAY_NAME_FIELD) if kind.endswith("_created") else None
        shown = display if isinstance(display, str) else None  # the call's name for people, when it has one
        if kind == "run_created" and (limit := slot_text(data.get("executionContext"))) is not None:
            # A run of a workflow with a concurrency limit: its start waits for a slot between its creation and its
            # run_started, a stretch no other lane covers (it read as a blank head of the timeline).
            lanes[QUEUED] = Lane(QUEUED, run_id, f"queued for {limit}", at, status="waiting", detail=limit)
        elif kind == "run_started" and QUEUED in lanes and lanes[QUEUED].ended is None:
            lanes[QUEUED].ended, lanes[QUEUED].status = at, "started"
        elif kind == "step_created":
            name = str(data.get("stepName", corr))
            lane = lanes[corr] = Lane("step", corr, shown or name, at, status="pending",
                                      detail=name if shown else "")
            if name == START_CHILD:
                lane.child_run_id = child_run_id(run_id, corr)
                lane.label = shown or "child run"
        elif kind.startswith("step_") and corr in lanes:
            lane = lanes[corr]
            if kind == "step_retrying" and skipped(data) is not None:
                # An operator's skip of the back-off: the last attempt's retry comes now, no attempt of its own.
                if lane.attempts:
                    lane.attempts[-1].retry_after = at
                lane.detail = _skip_note(lane.detail, data)
                continue
            if kind == "step_started":
                lane.status = "running"
                lane.attempts.append(Attempt(int(data.get("attempt") or len(lane.attempts) + 1), at,
                                             inline=data.get(INLINE) is True))
                continue
            attempt = lane.attempts[-1] if lane.attempts and lane.attempts[-1].end is None else None
            if attempt is None:  # ended without a recorded start (an inline step, or a cancelled one)
                attempt = Attempt(len(lane.attempts) + 1, at)
                lane.attempts.append(attempt)
            attempt.end = at
            attempt.outcome = kind.removeprefix("step_")
            if "error" in data:
                attempt.error = _error_text(data["error"])
            if kind == "step_retrying":
                attempt.retry_after = moment(data.get("retryAfter"))
                lane.status = "retrying"
            else:
                lane.status, lane.ended = attempt.outcome, at
                if kind == "step_completed" and lane.child_run_id:
                    children.append(lane.child_run_id)
        elif kind == "wait_created":
            resume = moment(data.get("resumeAt"))
            hook = of_hooks.get(corr)
            label = shown or (hook_wait_label(hook[1], tokens.get(hook[0], hook[0])) if hook else "sleep")
            lanes[corr] = Lane("wait", corr, label, at, status="waiting",
                               detail=f"until {resume.isoformat()}" if resume else "")
        elif kind == "wait_completed" and corr in lanes:
            lanes[corr].ended, lanes[corr].status = at, "completed"
            if skipped(data) is not None:
                lanes[corr].detail = _skip_note(lanes[corr].detail, data)
        elif kind == "hook_created":
            token = str(data.get("token", ""))
            hooks[corr] = HookInfo(corr, token, bool(data.get("isWebhook")), at, data.get("metadata"),
                                   codec=data.get(PAYLOAD_CODEC_FIELD) is True)
            lanes[corr] = Lane("hook", corr, shown or token, at, status="waiting",
                               detail="webhook" if data.get("isWebhook") else "hook")
        elif kind == "hook_received" and corr in hooks and is_heartbeat_event(data):
            hooks[corr].heartbeats += 1
            hooks[corr].last_heartbeat = at
        elif kind == "hook_received" and corr in hooks:
            hooks[corr].payloads.append((event.event_id, at, data.get("payload")))
            if lanes[corr].status == "waiting":
                lanes[corr].status, lanes[corr].ended = "received", at
        elif kind == "hook_disposed" and corr in hooks:
            hooks[corr].disposed = True
            for key in [corr, *(wait for wait, (hook, _) in of_hooks.items() if hook == corr)]:
                if key in lanes and lanes[key].ended is None:  # the hook and its deadlines, which go with it
                    lanes[key].ended, lanes[key].status = at, "disposed"
    ending = next((e for e in reversed(events) if e.event_type in RUN_END_EVENT_TYPES), None)
    if ending is not None and QUEUED in lanes and lanes[QUEUED].ended is None:  # it ended waiting (cancelled)
        lanes[QUEUED].ended, lanes[QUEUED].status = ending.created_at, ending.event_type.removeprefix("run_")
    if ending is not None:  # a step open when its run ended was stopped by that end: as describe and steps() say
        run_status = ending.event_type.removeprefix("run_")
        for lane in lanes.values():
            if lane.kind == "step" and lane.ended is None:  # (pending, running, or retrying: pending in the World)
                stored: StepStatus = "running" if lane.status == "running" else "pending"
                if step_status(stored, run_status) == "cancelled":
                    lane.ended, lane.status = ending.created_at, "cancelled"
    for hook in hooks.values():  # a hook open when its run ended was closed by that end
        hook.state = hook_state(hook.disposed, ending.event_type.removeprefix("run_") if ending else None)
        lane = lanes[hook.hook_id]
        if hook.state == "closed" and ending is not None and lane.ended is None:
            lane.ended, lane.status = ending.created_at, "closed"
    start = events[0].created_at if events else None
    end = events[-1].created_at if events else None
    return Picture(start, end, sorted(lanes.values(), key=lambda lane: lane.created), list(hooks.values()),
                   children)
