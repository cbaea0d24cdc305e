"""The AWS World's write plans, one function per event type: the state read just before a write -> its items.

Each function looks at the run item and the entity item read just before the write and either raises the
contract's error, answers an idempotent no-op, or returns a :class:`Plan` (the events, the run change, the
TxOps). The DynamoDB conditions in the plan re-check the same facts at commit, so a race can only make the
write retry, never land on a state the rules forbid. Hook writes are in ``hook_plans`` (their token conditions
come from the rulebook, ``world/rules/hooks.py``), the planning state and the plan types in ``plan``. The
in-memory World decides through the rulebook (``world/rules/``) instead; moving these planners onto it too is
the rest of issue 22 item 1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ...world.entities import TERMINAL_RUN_STATUSES, TERMINAL_STEP_STATUSES
from ...world.errors import (
    EntityConflictError,
    EventNotFoundError,
    InvalidInputError,
    RunGoneError,
    RunNotFoundError,
    StepNotFoundError,
    TooEarlyError,
)
from ...world.events import (
    AttrSetData,
    CreateEventRequest,
    EventResult,
    RunFailedData,
    StepCreatedData,
    StepRetryingData,
    WaitCreatedData,
)
from ...world.ids import IN_BAND_SEQ_AT_RUN_CREATION, SPEC_VERSION_CURRENT
from ...world.rules.at_most_once import check_interrupted_end, check_start
from ...world.rules.leases import LEASE_SECONDS_FIELD, LEASE_UNTIL_FIELD, lease_end, requested_lease, start_verdict
from ...world.rules.requests import data_as
from ...world.watch import commit_due
from ..config import DEFAULT_MAX_RUN_SECONDS, DEFAULT_RETENTION_SECONDS
from ..dynamodb.items import Item
from ..dynamodb.transactions import TxOp, put
from ..keys import (
    ATTRIBUTE_PREFIX,
    LAYOUT_VERSION,
    attrs_key,
    run_key,
    step_key,
    wait_key,
)
from ..resources import GSI_RUN_KEY, GSI_STATUS_KEY, GSI_WORKFLOW_KEY, TTL_ATTRIBUTE
from ..retention import RETENTION_ATTRIBUTE, end_ttl, epoch, retention_of
from .hook_plans import (
    hook_retained,
    plan_hook_created,
    plan_hook_disposed,
    plan_hook_received,
    release_hooks,
)
from .plan import Plan, PlannedEvent, RunChange, SlotRef, State, planned_event, run_watch


def plan_event(req: CreateEventRequest, state: State) -> Plan:
    rule = STORAGE_RULES.get(req.event_type)
    if rule is None:
        raise InvalidInputError(f"{req.event_type} cannot be written by a caller", field="eventType")
    return rule.planner(req, state)


def _alive(status: str) -> bool:
    return status not in TERMINAL_RUN_STATUSES


def new_run_item(run_id: str, data: dict[str, Any], now: str, spec_version: int | None,
                 deployment_id: str | None, *, retention: int = DEFAULT_RETENTION_SECONDS,
                 max_run: int = DEFAULT_MAX_RUN_SECONDS) -> Item:
    """The run head: only what fences, counters and listings need, rewritten by every event, so it stays a few
    hundred bytes whatever the workflow carries. The input and execution context stay in the run_created event
    (slot 1), the attributes in their own item, the output or error in the terminal event (``endSlot``). It
    keeps the run's retention (``ret``: the terminal write sets the TTL from it) and, while the run runs, the
    TTL every item of the run gets when written (``aws/retention.py``)."""
    ret = retention_of(data.get("executionContext"), retention)
    return {
        **run_key(run_id),
        "lv": LAYOUT_VERSION,
        "status": "pending",
        "deploymentId": data.get("deploymentId") or deployment_id,
        "specVersion": spec_version or SPEC_VERSION_CURRENT,
        "attrs": bool(data.get("attributes")) or None,
        "seq": IN_BAND_SEQ_AT_RUN_CREATION,
        "seqInBand": IN_BAND_SEQ_AT_RUN_CREATION,
        "openSteps": 0,
        "createdAt": now,
        "updatedAt": now,
        GSI_STATUS_KEY: "pending",
        GSI_WORKFLOW_KEY: data["workflowName"],
        GSI_RUN_KEY: run_id,
        **run_watch(run_id, commit_due(datetime.fromisoformat(now), ends_run=False)),
        RETENTION_ATTRIBUTE: ret,
        TTL_ATTRIBUTE: epoch(now) + ret + max_run,
    }


def attrs_put(run_id: str, attributes: dict[str, Any] | None) -> list[TxOp]:
    """The attributes item of a run created with attributes (none is written for a run without)."""
    if not attributes:
        return []
    return [put("attrs", {**attrs_key(run_id), **{ATTRIBUTE_PREFIX + k: v for k, v in attributes.items()}})]


# ---------------------------------------------------------------- run events


def _run_started(req: CreateEventRequest, state: State) -> Plan:
    run = state.run
    if run is None:
        data = req.data().model_dump(mode="json", by_alias=True, exclude_none=True)
        if not data.get("workflowName") or "input" not in req.data().model_fields_set:
            raise RunNotFoundError(f"run {state.run_id} not found (run_started without workflowName and input "
                                   "cannot create it)")
        item = new_run_item(state.run_id, data, state.now, req.spec_version, state.deployment_id,
                            retention=state.retention, max_run=state.max_run)
        created = PlannedEvent("run_created", None, {k: v for k, v in data.items() if k != "input"},
                               state.stored, data.get("input"), req.spec_version)
        started = PlannedEvent("run_started", None, {}, None, None, req.spec_version)
        item.update(status="running", startedAt=state.now, **{GSI_STATUS_KEY: "running"})
        return Plan([created, started], RunChange(create_item=item), attrs_put(state.run_id, data.get("attributes")),
                    new_run=item)
    if run["status"] == "running":
        return Plan([], noop=EventResult())
    if run["status"] != "pending":
        raise RunGoneError(f"run {state.run_id} is {run['status']}: it cannot start")
    change = RunChange(sets={"status": "running", "startedAt": run.get("startedAt") or state.now,
                             GSI_STATUS_KEY: "running"}, require_status="pending")
    return Plan([PlannedEvent("run_started", None, {}, None, None, req.spec_version)], change,
                new_run={**run, **change.sets})


def _run_terminal(status: str, value_field: str | None):
    def planner(req: CreateEventRequest, state: State) -> Plan:
        run = state.run
        if run is None:
            raise RunNotFoundError(f"run {state.run_id} not found")
        if run["status"] in TERMINAL_RUN_STATUSES:
            if run["status"] == status == "cancelled":
                return Plan([], noop=EventResult())
            raise EntityConflictError(f"run {state.run_id} is already {run['status']}")
        # The run's whole partition expires from here (aws/retention.py): the head R after the end, or when the
        # last token it keeps reserved frees, whichever is later.
        reserved = [str(h["tokenRetentionUntil"]) for h in state.hooks if hook_retained(h, state.now)]
        sets: dict[str, Any] = {"status": status, "completedAt": state.now, GSI_STATUS_KEY: status,
                                TTL_ATTRIBUTE: end_ttl(state.run_retention(), state.now, reserved)}
        if value_field and state.stored is not None:
            sets["endSlot"] = SlotRef(0)  # the output or error stays in the event
        data = req.data()
        if isinstance(data, RunFailedData) and data.error_code:
            sets["errorCode"] = data.error_code
        change = RunChange(sets=sets, require_status=run["status"])
        plan = Plan([planned_event(req, state)], change, new_run={**run, **sets})
        release_hooks(plan, state, status, int(sets[TTL_ATTRIBUTE]))
        return plan

    return planner


def _attr_set(req: CreateEventRequest, state: State) -> Plan:
    run = state.run
    if run is None:
        raise RunNotFoundError(f"run {state.run_id} not found")
    if run["status"] in TERMINAL_RUN_STATUSES:
        raise EntityConflictError(f"run {state.run_id} is {run['status']}: its attributes are final")
    op = TxOp("Update", "attrs", key=attrs_key(state.run_id))
    e = op.expr
    sets: dict[str, str] = {}
    removes: set[str] = set()
    for c in data_as(req, AttrSetData).changes:
        if c.value is None:
            removes.add(c.key)
            sets.pop(c.key, None)
        else:
            sets[c.key] = c.value
            removes.discard(c.key)
    def name(key: str) -> str:
        placeholder = f"#k{len(e.names)}"
        e.names[placeholder] = ATTRIBUTE_PREFIX + key
        return placeholder

    clauses = []
    if sets:
        # The item may be born here (a run created without attributes): it carries the run's item TTL.
        ttl = epoch(state.now) + state.run_retention() + state.max_run
        clauses.append("SET " + ", ".join([*(f"{name(k)} = {e.v(v)}" for k, v in sets.items()),
                                           f"{e.n(TTL_ATTRIBUTE)} = if_not_exists({e.n(TTL_ATTRIBUTE)}, {e.v(ttl)})"]))
    if removes:
        clauses.append("REMOVE " + ", ".join(name(k) for k in sorted(removes)))
    ops = [op] if clauses else []
    op.update = " ".join(clauses)
    change = RunChange(sets={"attrs": True} if sets else {})
    return Plan([planned_event(req, state)], change, ops, new_run={**run, **change.sets})


# ---------------------------------------------------------------- steps


def _step_created(req: CreateEventRequest, state: State) -> Plan:
    step_id = req.correlation_id or ""
    if state.run is not None and (state.run.get(INLINE_STEP) or {}).get("id") == step_id:
        raise EntityConflictError(f"step {step_id} already exists")
    item = {
        **step_key(state.run_id, req.correlation_id or ""),
        "stepName": data_as(req, StepCreatedData).step_name,
        "status": "pending",
        "in": SlotRef(0) if state.stored is not None else None,  # the input stays in the event
        "attempt": 0,
        "createdAt": state.now,
        "updatedAt": state.now,
        "specVersion": req.spec_version,
        "ver": 1,
    }
    # The head must not hold a step of this id either (the step item's absence does not say so).
    change = RunChange(require_alive=True, open_steps_delta=1, not_inline=[step_id])
    return Plan([planned_event(req, state)], change, [put("entity", item, if_absent=True)], new_step=item)


def _existing_step(req: CreateEventRequest, state: State) -> Item:
    step = state.entity
    if step is None:
        raise StepNotFoundError(f"step {req.correlation_id} not found in run {state.run_id}")
    if step["status"] in TERMINAL_STEP_STATUSES:
        raise EntityConflictError(f"step {req.correlation_id} is already {step['status']}")
    return step


def _step_write(key: dict[str, str], old: Item, sets: dict[str, Any], removes: tuple[str, ...],
                change: RunChange) -> TxOp:
    """How a step's change is written: an update of its item, or for a step the run head holds, its first
    item (which nothing may have written before) and the head let go of it, in the same commit."""
    if old.get(IN_HEAD):
        change.sets[INLINE_STEP] = None
        return put("entity", _changed(old, sets, removes), if_absent=True)
    return _update_entity(key, old, sets, removes)


def _update_entity(key: dict[str, str], old: Item, sets: dict[str, Any], removes: tuple[str, ...] = ()) -> TxOp:
    op = TxOp("Update", "entity", key=key)
    e = op.expr
    clauses = [f"{e.n(k)} = {e.v(v)}" for k, v in sets.items() if v is not None]
    clauses.append(f"{e.n('ver')} = {e.v(old['ver'] + 1)}")
    gone = [e.n(k) for k in (*removes, *(k for k, v in sets.items() if v is None)) if k in old]
    op.update = "SET " + ", ".join(clauses) + (" REMOVE " + ", ".join(gone) if gone else "")
    op.condition = f"{e.n('ver')} = {e.v(old['ver'])}"
    return op


def _changed(old: Item, sets: dict[str, Any], removes: tuple[str, ...] = ()) -> Item:
    new = {k: v for k, v in old.items() if k not in removes and k != IN_HEAD}
    new.update(sets)
    new["ver"] = old["ver"] + 1
    return {k: v for k, v in new.items() if v is not None}


def _started_event(req: CreateEventRequest, state: State, attempt: int, lease: str) -> PlannedEvent:
    """step_started as the log keeps it: the attempt and the lease's end (not the seconds asked for)."""
    event = planned_event(req, state, attempt=attempt, **{LEASE_UNTIL_FIELD: lease})
    event.data.pop(LEASE_SECONDS_FIELD, None)
    return event


def _lease_until(data: dict[str, Any], now: str) -> str:
    """The end of the lease a step_started asks for (``world.rules.leases``), as stored."""
    return _iso(lease_end(datetime.fromisoformat(now), requested_lease(data)))


def _when(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) and value else None


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def _step_started(req: CreateEventRequest, state: State) -> Plan:
    step = _existing_step(req, state)
    retry_after = step.get("retryAfter")
    if retry_after and retry_after > state.now:
        wait = (datetime.fromisoformat(retry_after) - datetime.fromisoformat(state.now)).total_seconds()
        raise TooEarlyError(f"step {req.correlation_id} may not start before {retry_after}",
                            retry_after=max(1.0, float(int(wait + 0.999))))
    extra = req.data().model_extra or {}
    owner = extra.get("ownerMessageId")
    lease = _lease_until(extra, state.now)
    # A second delivery (a duplicate message) while the step runs under the first one's message id and lease:
    # only a redelivery of that message may start it again, so a step message needs no queue-side dedup marker;
    # once the lease has passed, the owner is gone and this delivery takes the step over (world.rules.leases).
    start_verdict(status=step["status"], holder=step.get("owner"), owner=owner if isinstance(owner, str) else None,
                  lease_until=_when(step.get(LEASE_UNTIL_FIELD)), started=_when(step.get("updatedAt")),
                  now=datetime.fromisoformat(state.now), step_id=req.correlation_id)
    check_start(extra, status=step["status"], attempt=int(step.get("attempt", 0)), step_id=req.correlation_id)
    attempt = int(step.get("attempt", 0)) + 1
    sets = {"status": "running", "attempt": attempt, "startedAt": step.get("startedAt") or state.now,
            "updatedAt": state.now, "owner": owner if isinstance(owner, str) else None, LEASE_UNTIL_FIELD: lease}
    key = step_key(state.run_id, req.correlation_id or "")
    event = _started_event(req, state, attempt, lease)
    change = RunChange(require_alive=True)
    return Plan([event], change, [_step_write(key, step, sets, ("retryAfter",), change)],
                new_step=_changed(step, sets, ("retryAfter",)))


def _step_result(status: str | None, value_field: str):
    def planner(req: CreateEventRequest, state: State) -> Plan:
        step = _existing_step(req, state)
        check_interrupted_end(req.data().model_extra, status=step["status"], attempt=int(step.get("attempt", 0)),
                              step_id=req.correlation_id)
        # The value stays in the event; the step points at it.
        sets: dict[str, Any] = {value_field: SlotRef(0) if state.stored is not None else None,
                                "updatedAt": state.now}
        removes: tuple[str, ...] = ()
        if status is None:  # step_retrying: back to pending, with the error and when it may start again
            retry_after = data_as(req, StepRetryingData).retry_after
            sets["status"] = "pending"
            sets["retryAfter"] = retry_after.astimezone(UTC).isoformat(timespec="microseconds") if retry_after else None
            if retry_after is None:
                removes = ("retryAfter",)
        else:
            sets["status"] = status
            sets["completedAt"] = state.now
        key = step_key(state.run_id, req.correlation_id or "")
        change = RunChange(open_steps_delta=0 if status is None else -1)
        return Plan([planned_event(req, state)], change, [_step_write(key, step, sets, removes, change)],
                    new_step=_changed(step, sets, removes))

    return planner


# ---------------------------------------------------------------- hooks


def plan_born_running(created: CreateEventRequest, started: CreateEventRequest, state: State) -> Plan:
    """step_created followed by step_started in one batch: the step is born running at attempt 1."""
    plan = _step_created(created, state)
    assert plan.new_step is not None
    step = plan.new_step
    extra = started.data().model_extra or {}
    lease = _lease_until(extra, state.now)
    step.update(status="running", attempt=1, startedAt=state.now, **{LEASE_UNTIL_FIELD: lease})
    owner = extra.get("ownerMessageId")
    if isinstance(owner, str) and owner:
        step["owner"] = owner
    plan.events.append(_started_event(started, State(state.run_id, state.now, None), 1, lease))
    if state.in_head:
        # Held in the run head until it ends: the commit that records its end writes its item once, instead
        # of a put now and an update then. The head holds at most one such step (the writer checks).
        plan.ops = [op for op in plan.ops if op.role != "entity"]
        plan.run.sets[INLINE_STEP] = {"id": created.correlation_id, "n": step["stepName"], "at": state.now,
                                      "in": step.get("in"), "o": step.get("owner"), "s": step.get("specVersion"),
                                      "l": lease}
        step[IN_HEAD] = True
    return plan


INLINE_STEP = "inl"
"""The run head's attribute holding the step a fenced writer declared born running, until it ends."""
IN_HEAD = "inHead"
"""Marks a step item made from the head's record (never stored)."""


def step_from_head(run_id: str, head: Item | None, step_id: str) -> Item | None:
    """The step the run head holds, as a step item (marked IN_HEAD), if it holds ``step_id``."""
    record = (head or {}).get(INLINE_STEP) or {}
    if record.get("id") != step_id:
        return None
    item = {**step_key(run_id, step_id), "stepName": record["n"], "status": "running", "attempt": 1,
            "createdAt": record["at"], "updatedAt": record["at"], "startedAt": record["at"], "ver": 1,
            "in": record.get("in"), "owner": record.get("o"), "specVersion": record.get("s"),
            LEASE_UNTIL_FIELD: record.get("l"), IN_HEAD: True}
    return {k: v for k, v in item.items() if v is not None}


# ---------------------------------------------------------------- waits


def _wait_created(req: CreateEventRequest, state: State) -> Plan:
    resume_at = data_as(req, WaitCreatedData).resume_at
    item = {
        **wait_key(state.run_id, req.correlation_id or ""),
        "status": "waiting",
        "resumeAt": resume_at.astimezone(UTC).isoformat(timespec="microseconds"),
        "createdAt": state.now,
        "updatedAt": state.now,
        "specVersion": req.spec_version,
        "ver": 1,
    }
    return Plan([planned_event(req, state)], RunChange(require_alive=True), [put("entity", item, if_absent=True)],
                new_wait=item)


def _wait_completed(req: CreateEventRequest, state: State) -> Plan:
    wait = state.entity
    if wait is None:
        raise EventNotFoundError(f"wait {req.correlation_id} not found in run {state.run_id}")
    if wait["status"] == "completed":
        raise EntityConflictError(f"wait {req.correlation_id} is already completed")
    sets = {"status": "completed", "completedAt": state.now, "updatedAt": state.now}
    key = wait_key(state.run_id, req.correlation_id or "")
    return Plan([planned_event(req, state)], RunChange(require_alive=True), [_update_entity(key, wait, sets)],
                new_wait=_changed(wait, sets))


@dataclass(frozen=True)
class StorageRule:
    """How the AWS World writes one event type: the planner that turns it into a commit, and what that planner
    needs read first (the run head, the entity item, the run's live hooks). The contract's side of each type
    (data model, payload field, entity kind, batching) is ``world.events.EVENT_TYPES``; the errors a failed
    condition maps to are decided where the commit's cancellation is read (``EventWriter._on_unit_cancel``)."""

    planner: Callable[[CreateEventRequest, State], Plan]
    reads: frozenset[str] = frozenset()  # of "run", "entity", "hooks"


_RUN, _ENTITY, _HOOKS = "run", "entity", "hooks"

STORAGE_RULES: dict[str, StorageRule] = {
    "run_started": StorageRule(_run_started, frozenset({_RUN})),
    "run_completed": StorageRule(_run_terminal("completed", "output"), frozenset({_RUN, _HOOKS})),
    "run_failed": StorageRule(_run_terminal("failed", "error"), frozenset({_RUN, _HOOKS})),
    "run_cancelled": StorageRule(_run_terminal("cancelled", None), frozenset({_RUN, _HOOKS})),
    "attr_set": StorageRule(_attr_set, frozenset({_RUN})),
    "step_created": StorageRule(_step_created),
    "step_started": StorageRule(_step_started, frozenset({_ENTITY})),
    "step_retrying": StorageRule(_step_result(None, "err"), frozenset({_ENTITY})),
    # A step's end reports how many of the run's steps are still open: the head is read with the step.
    "step_completed": StorageRule(_step_result("completed", "out"), frozenset({_ENTITY, _RUN})),
    "step_failed": StorageRule(_step_result("failed", "err"), frozenset({_ENTITY, _RUN})),
    "hook_created": StorageRule(plan_hook_created),
    "hook_received": StorageRule(plan_hook_received),
    "hook_disposed": StorageRule(plan_hook_disposed, frozenset({_ENTITY})),
    "wait_created": StorageRule(_wait_created),
    "wait_completed": StorageRule(_wait_completed, frozenset({_ENTITY})),
}

# What a plan needs read first, as the writer asks it.
NEEDS_RUN = frozenset(t for t, r in STORAGE_RULES.items() if _RUN in r.reads and t.startswith(("run_", "attr_")))
NEEDS_ENTITY = frozenset(t for t, r in STORAGE_RULES.items() if _ENTITY in r.reads)
NEEDS_HOOKS = frozenset(t for t, r in STORAGE_RULES.items() if _HOOKS in r.reads)
NEEDS_RUN_COUNTERS = frozenset(t for t, r in STORAGE_RULES.items() if _RUN in r.reads) - NEEDS_RUN
