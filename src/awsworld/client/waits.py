"""What a pending or running run waits on, in the order its body called them: ``awsworld describe``'s
``waitingOn`` (``cli/describe.py``) and what the test environment's ``RunStalledError`` names (``testing/env.py``).

The run record says only ``running``; the steps and the event log say why. A step is ``running`` (an attempt is
executing), or ``pending`` with a ``retryAfter`` (a failed attempt waits for its retry) or without one (queued,
not started). A sleep is a ``wait_created`` without its ``wait_completed``; a hook one ``hook_created`` without
its ``hook_disposed`` (a child run's outcome arrives on such a hook, token ``awsworld.child:<child run id>``, so
it reads as the child). A hook's own waits (its timeout, its heartbeat deadline: ``_timeline.hook_waits``) are not
sleeps: they are shown on the hook's entry while it is open, and vanish with it. Nothing open means the run
waits for its next delivery (a wake already queued, or one a lost message owes it). A pending run whose
deliveries found no code for it (a workflow this deployment lacks) waits on code: what they found is in its log
(``_worker.delivery.DELIVERY_FINDING``) and is shown as its wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from .._engine.divergence import call_order
from .._engine.ops import DISPLAY_NAME_FIELD, HEARTBEAT_EVERY_FIELD, HOOK_HEARTBEAT, HOOK_TIMEOUT
from .._timeline import deadline_text, hook_waits, read_events, read_steps, when
from .._worker.delivery import DELIVERY_FINDING
from ..durable.child_calls import TOKEN_PREFIX as CHILD_TOKEN_PREFIX
from ..durable.hook_calls import RESUME_HOOK
from ..durable.hook_payloads import is_heartbeat_event
from ..world.clock import clock_of
from ..world.entities import TERMINAL_RUN_STATUSES, Run, Step
from ..world.events import Event
from ..world.protocol import World
from .limits import limit_wait_text, limit_waits


def waiting_on(status: str, steps: Sequence[Step], events: Sequence[Event]) -> list[dict[str, Any]]:
    """What the run waits on, in call order: one entry per open step, retry, sleep, hook or child (``kind``
    says which; the other keys are camelCase, for ``describe --json``). Empty for a run that has ended."""
    if status in TERMINAL_RUN_STATUSES:
        return []
    found: dict[str, dict[str, Any]] = {}
    shown = display_names(events)
    of_hooks = hook_waits(events)
    deadlines: dict[str, dict[str, str | None]] = {}  # hook id -> its open timeout and heartbeat deadline
    every: dict[str, float] = {}  # hook id -> its heartbeat_timeout, as its heartbeat wait records it
    attempt_started = {e.correlation_id: e.created_at for e in events if e.event_type == "step_started"}
    for step in steps:
        base = {"stepId": step.step_id, "name": step.step_name, "displayName": shown.get(step.step_id)}
        if step.status == "running":
            # its running attempt's start (the last step_started), not the step's first one (started_at): after
            # a crash, attempt 2 started well after attempt 1
            since = attempt_started.get(step.step_id) or step.started_at
            found[step.step_id] = {"kind": "step", **base, "status": "running", "attempt": step.attempt,
                                   "since": when(since)}
        elif step.status == "pending" and step.retry_after is not None:
            found[step.step_id] = {"kind": "retry", **base, "at": when(step.retry_after), "attempt": step.attempt + 1}
        elif step.status == "pending":
            found[step.step_id] = {"kind": "step", **base, "status": "pending", "attempt": step.attempt + 1,
                                   "since": when(step.created_at)}
    for event in events:
        data = event.event_data or {}
        key = event.correlation_id or ""
        kind = event.event_type
        if kind == "hook_created":
            token = str(data.get("token", ""))
            if token.startswith(CHILD_TOKEN_PREFIX):
                found[key] = {"kind": "child", "hookId": key, "runId": token.removeprefix(CHILD_TOKEN_PREFIX)}
            else:
                found[key] = {"kind": "hook", "hookId": key, "token": token,
                              "webhook": bool(data.get("isWebhook")), "received": 0, "heartbeats": 0,
                              "displayName": shown.get(key), "timeoutAt": None, "heartbeatDueAt": None}
        elif kind == "hook_received" and found.get(key, {}).get("kind") == "hook":
            found[key]["heartbeats" if is_heartbeat_event(data) else "received"] += 1
            if key in every and HOOK_HEARTBEAT in deadlines.get(key, {}):  # it moves the deadline now, while
                # the flow writes the next heartbeat wait only when it next runs (``_engine.hook_timeouts``)
                deadlines[key][HOOK_HEARTBEAT] = when(event.created_at + timedelta(seconds=every[key]))
        elif kind in ("hook_disposed", "wait_completed"):
            found.pop(key, None)
            if key in of_hooks:  # the hook's own wait passed: the hook is closing (timed out)
                deadlines.get(of_hooks[key][0], {}).pop(of_hooks[key][1], None)
        elif kind == "wait_created" and key in of_hooks:  # the latest heartbeat deadline replaces the one before
            hook, role = of_hooks[key]
            deadlines.setdefault(hook, {})[role] = _iso(data.get("resumeAt"))
            seconds = data.get(HEARTBEAT_EVERY_FIELD)
            if role == HOOK_HEARTBEAT and isinstance(seconds, int | float) and seconds > 0:
                every[hook] = float(seconds)
        elif kind == "wait_created":
            found[key] = {"kind": "sleep", "waitId": key, "until": _iso(data.get("resumeAt")),
                          "displayName": shown.get(key)}
        elif kind == "attr_set" and status == "pending":
            for change in data.get("changes") or ():
                if change.get("key") == DELIVERY_FINDING and change.get("value"):
                    found[DELIVERY_FINDING] = {"kind": "code", "found": change["value"], "at": when(event.created_at)}
    for hook, due in deadlines.items():
        if found.get(hook, {}).get("kind") == "hook":  # still open: a disposed hook's deadlines are void
            found[hook]["timeoutAt"] = due.get(HOOK_TIMEOUT)
            found[hook]["heartbeatDueAt"] = due.get(HOOK_HEARTBEAT)
    return [found[key] for key in sorted(found, key=call_order)]


async def run_waits(world: World, run_id: str, status: str, context: dict[str, Any] | None, steps: Sequence[Step],
                    events: Sequence[Event]) -> list[dict[str, Any]]:
    """Everything the run waits on, a limit's slot or token included: ``describe``'s ``waitingOn``, and what the
    test environment's ``RunStalledError`` names (``testing/env.py``)."""
    return with_limits(waiting_on(status, steps, events), await limit_waits(world, run_id, status, context, events))


async def read_waits(world: World, view: Run) -> list[dict[str, Any]]:
    """``run_waits`` of a run as listed (``view``): its steps and its log read together, without values (``awsworld
    runs --waiting`` reads a page of runs this way; an ended run waits on nothing, and costs no read)."""
    if view.status in TERMINAL_RUN_STATUSES:
        return []
    steps, events = await asyncio.gather(read_steps(world, view.run_id, values=False),
                                         read_events(world, view.run_id, values=False))
    return await run_waits(world, view.run_id, view.status, view.execution_context, steps, events)


async def waits_text(world: World, run_id: str, view: Run | None = None) -> str:
    """What the run waits on, for people: each of ``run_waits``'s entries as ``describe_wait`` says it, "; "
    joined (``nothing it has recorded`` when none). Reads the run (unless its ``view`` is given), its steps and
    its log, without values: what a wait that timed out (``Run.result``) or stalled (the test environment's
    ``RunStalledError``) says."""
    if view is None:
        view = await world.runs.get(run_id, resolve_data="none")
    waits = await read_waits(world, view)
    now = clock_of(world).now()  # a test environment's virtual time: a due "in 1 h" of its clock, not the wall's
    return "; ".join(describe_waits(waits, now)) or "nothing it has recorded"


def display_names(events: Sequence[Event]) -> dict[str, str]:
    """Correlation id -> the call's display name (``with_name``, ``sleep(name=)``, a batch item's label), from
    the ``*_created`` events that record one."""
    found: dict[str, str] = {}
    for event in events:
        if event.event_type in ("step_created", "wait_created", "hook_created"):
            name = (event.event_data or {}).get(DISPLAY_NAME_FIELD)
            if isinstance(name, str):
                found[event.correlation_id or ""] = name
    return found


def with_limits(waits: list[dict[str, Any]], limited: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``waiting_on``'s entries with what waits for a limit (``client.limits.limit_waits``): the run's own slot
    first, and a step's slot or token in place of its plain "queued" entry."""
    by_step = {w["stepId"]: w for w in limited if w.get("stepId")}
    run_level = [w for w in limited if not w.get("stepId")]
    return run_level + [by_step.get(w.get("stepId", ""), w) if w["kind"] == "step" else w for w in waits]


def describe_waits(waits: Sequence[dict[str, Any]], now: datetime | None = None) -> list[str]:
    """``describe_wait`` of each entry, but the steps of one name waiting for one limit's slot or token said once,
    where the first of them is: ``190 steps app.render, not started: they wait for a slot of step:app.render
    (places 1 to 190 of 190; held by ...)``. A 200-step fan-out under ``concurrency=10`` once printed 190 lines
    that differed only in their place."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    order: list[tuple[str, ...] | dict[str, Any]] = []
    for wait in waits:
        if wait["kind"] in ("slot", "token") and wait.get("stepId"):
            group = (wait["kind"], str(wait.get("name")), str(wait["limit"]), str(wait.get("key", "")))
            if group not in groups:
                groups[group] = []
                order.append(group)
            groups[group].append(wait)
        else:
            order.append(wait)
    lines: list[str] = []
    for item in order:
        if isinstance(item, dict):
            lines.append(describe_wait(item, now))
            continue
        members = groups[item]
        if len(members) == 1:
            lines.append(describe_wait(members[0], now))
            continue
        first = members[0]
        if first["kind"] == "slot":
            places = sorted(int(w["place"]) for w in members)
            of = max(int(w["of"]) for w in members)
            where = limit_wait_text({**first, "place": f"{places[0]} to {places[-1]}", "of": of}, now)
            where = where.replace(f"place {places[0]} to", f"places {places[0]} to", 1)
        else:
            where = limit_wait_text(max(members, key=lambda w: str(w["nextTokenAt"])), now)
            where = "tokens" + where[len("a token"):]
        lines.append(f"{len(members)} steps {first['name']}, not started: they wait for {where}")
    counts: dict[str, int] = {}
    for line in lines:  # the same words for many steps (170 queued of a fan-out): said once, with how many
        counts[line] = counts.get(line, 0) + 1
    return [line if n == 1 else f"{line} (x {n})" for line, n in counts.items()]


def describe_wait(wait: dict[str, Any], now: datetime | None = None) -> str:
    """One entry of :func:`waiting_on` for people: ``hook approve:7 (no payload yet)``. ``now``: the World's time,
    which how far a due time is counts from (default: the system clock's)."""
    kind = wait["kind"]
    if kind in ("slot", "token"):
        step = f"step {wait['name']}, not started: it waits for " if wait.get("stepId") else "its start: "
        return step + limit_wait_text(wait, now)
    shown = f"{wait['displayName']!r} " if wait.get("displayName") else ""
    if kind == "step" and wait["status"] == "running":
        since = deadline_text(wait["since"], now)
        return f"step {shown}{wait['name']}, running (attempt {wait['attempt']}, started {since})"
    if kind == "step":
        return f"step {shown}{wait['name']}, queued (attempt {wait['attempt']} not started yet)"
    if kind == "retry" and wait["name"] == RESUME_HOOK:  # (its polls: a workflow's resume_hook(..., wait=...))
        # (Read without values, the log says neither the token nor whether the last try failed: events does.)
        return (f"resume_hook {shown}tries again at {deadline_text(wait['at'], now)} (attempt {wait['attempt']}): the "
                "hook it resumes was not there yet, or the last try failed (awsworld events RUN says which, and the "
                "token)")
    if kind == "retry":
        return f"a retry of step {shown}{wait['name']} at {deadline_text(wait['at'], now)} (attempt {wait['attempt']})"
    if kind == "sleep":
        return f"a sleep {shown}until {deadline_text(wait['until'], now)}"
    if kind == "child":
        return f"child run {wait['runId']}"
    if kind == "code":
        return f"code this deployment lacks (its delivery at {wait['at']}: {wait['found']})"
    received, beats = wait["received"], wait.get("heartbeats", 0)
    heard = f", {beats} heartbeat(s)" if beats else ""
    due = "".join(f", {what} {deadline_text(wait[key], now)}" for key, what in (
        ("timeoutAt", "times out"), ("heartbeatDueAt", "next heartbeat due by")) if wait.get(key))
    return (f"{'webhook' if wait['webhook'] else 'hook'} {shown}{wait['token']} "
            f"({'no payload yet' if not received else f'{received} payload(s) received'}{heard}){due}")


def _iso(value: Any) -> str | None:
    return None if value is None else str(value)

