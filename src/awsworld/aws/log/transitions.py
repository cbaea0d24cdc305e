"""The contract's transition rules, one function per event type.

Each function looks at the state read just before the write (the run item, the entity item) and either
raises the exact contract error, answers an idempotent no-op, or returns a :class:`Plan`. The DynamoDB
conditions in the plan re-check the same facts at commit, so a race can only make the write retry, never
land on a state the rules forbid.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ...world.entities import TERMINAL_RUN_STATUSES, TERMINAL_STEP_STATUSES
from ...world.errors import (
    EntityConflictError,
    EventNotFoundError,
    HookNotFoundError,
    InvalidInputError,
    RunGoneError,
    RunNotFoundError,
    StepNotFoundError,
    TooEarlyError,
)
from ...world.events import CreateEventRequest, EventResult
from ...world.ids import IN_BAND_SEQ_AT_RUN_CREATION, SPEC_VERSION_CURRENT
from ...world.rules.hooks import HOOK_CLOSED, hook_fate
from ...world.rules.leases import LEASE_SECONDS_FIELD, LEASE_UNTIL_FIELD, lease_end, requested_lease, start_verdict
from ...world.rules.requests import check_hook_token
from ...world.watch import commit_due
from ..config import DEFAULT_MAX_RUN_SECONDS, DEFAULT_RETENTION_SECONDS
from ..dynamodb.items import Item
from ..dynamodb.transactions import TxOp, put
from ..keys import (
    ATTRIBUTE_PREFIX,
    HOOK_PREFIX,
    LAYOUT_VERSION,
    attrs_key,
    hook_key,
    hook_pointer_key,
    resume_marker_key,
    run_key,
    step_key,
    token_key,
    wait_key,
)
from ..resources import GSI_RUN_KEY, GSI_STATUS_KEY, GSI_WORKFLOW_KEY, TTL_ATTRIBUTE
from ..retention import RETENTION_ATTRIBUTE, end_ttl, epoch, retention_of
from ..values import StoredValue
from .plan import Plan, PlannedEvent, RunChange, SlotRef, run_watch, split_payload

# A transaction holds at most 100 items: the run, the event, and 3 per hook released in it.
HOOKS_RELEASED_IN_COMMIT = 30
# The token item's record of how its run ended, once the run released it (``world/rules/hooks.py``).
END_STATUS = "endStatus"
# The role of a hook_received's resume marker in its transaction (the writer stores the event's slot in it).
RESUME_MARKER_ROLE = "resume"


@dataclass
class State:
    run_id: str
    now: str
    stored: StoredValue | None  # the event's payload, already stored
    run: Item | None = None  # loaded when the plan needs the run item itself
    entity: Item | None = None
    hooks: list[Item] = field(default_factory=list)
    token_not_owned: bool = False
    deployment_id: str | None = None
    in_head: bool = False  # a born-running step may be held in the run head (see plan_born_running)
    # The stack's retention and longest run (aws/retention.py): a run's own retention is on its head.
    retention: int = DEFAULT_RETENTION_SECONDS
    max_run: int = DEFAULT_MAX_RUN_SECONDS

    def run_retention(self) -> int:
        return int((self.run or {}).get(RETENTION_ATTRIBUTE) or self.retention)


def plan_event(req: CreateEventRequest, state: State) -> Plan:
    rule = STORAGE_RULES.get(req.event_type)
    if rule is None:
        raise InvalidInputError(f"{req.event_type} cannot be written by a caller", field="eventType")
    return rule.planner(req, state)


def _event(req: CreateEventRequest, state: State, **extra: Any) -> PlannedEvent:
    raw = req.data().model_dump(mode="json", by_alias=True, exclude_none=True)
    raw.update(extra)
    rest, _name, payload = split_payload(req.event_type, raw)
    return PlannedEvent(req.event_type, req.correlation_id, rest, state.stored, payload, req.spec_version)


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
        reserved = [str(h["tokenRetentionUntil"]) for h in state.hooks if _retained(h, state.now)]
        sets: dict[str, Any] = {"status": status, "completedAt": state.now, GSI_STATUS_KEY: status,
                                TTL_ATTRIBUTE: end_ttl(state.run_retention(), state.now, reserved)}
        if value_field and state.stored is not None:
            sets["endSlot"] = SlotRef(0)  # the output or error stays in the event
        if status == "failed" and getattr(req.data(), "error_code", None):
            sets["errorCode"] = req.data().error_code  # type: ignore[attr-defined]
        change = RunChange(sets=sets, require_status=run["status"])
        plan = Plan([_event(req, state)], change, new_run={**run, **sets})
        _release_hooks(plan, state, status, int(sets[TTL_ATTRIBUTE]))
        return plan

    return planner


def _release_hooks(plan: Plan, state: State, status: str, ttl: int) -> None:
    """A run's end closes its hooks (``world/rules/hooks.py``): it removes the live ones and frees their tokens,
    except tokens still under retention; each token item stays as the memory that its run ended (``status``)."""
    batches: list[list[TxOp]] = [[]]
    for index, hook in enumerate(state.hooks):
        ops = _hook_release_ops(state.run_id, hook, state.now, status, ttl)
        if index < HOOKS_RELEASED_IN_COMMIT:
            plan.ops.extend(ops)
        else:
            if len(batches[-1]) + len(ops) > 99:
                batches.append([])
            batches[-1].extend(ops)
    plan.after_commit = [b for b in batches if b]


def _hook_release_ops(run_id: str, hook: Item, now: str, status: str, ttl: int) -> list[TxOp]:
    """The token item is kept, marked released with its run's end status (``endStatus``): a new hook may claim it
    at once (or once its retention passes), and until then a resume of it says the run ended. It expires with
    the run's partition (``ttl``, which already outlasts any retention). A retained hook stays, closed; any other
    is deleted with its pointer."""
    token_op = TxOp("Update", "hook-token", key=token_key(hook["token"]))
    e = token_op.expr
    token_op.condition = f"{e.n('hookId')} = {e.v(hook_id_of(hook))}"
    token_op.update = (f"SET {e.n('released')} = {e.v(True)}, {e.n(END_STATUS)} = {e.v(status)}, "
                       f"{e.n(TTL_ATTRIBUTE)} = {e.v(ttl)}")
    if _retained(hook, now):
        closed = TxOp("Update", "hook-release", key=hook_key(run_id, hook_id_of(hook)))
        closed.update = f"SET {closed.expr.n('status')} = {closed.expr.v(HOOK_CLOSED)}"
        closed.condition = "attribute_exists(pk)"
        return [token_op, closed]
    return [
        TxOp("Delete", "hook-release", key=hook_key(run_id, hook_id_of(hook))),
        TxOp("Delete", "hook-release", key=hook_pointer_key(hook_id_of(hook))),
        token_op,
    ]


def hook_id_of(hook: Item) -> str:
    return str(hook["sk"]).removeprefix(HOOK_PREFIX)


def _retained(hook: Item, now: str) -> bool:
    until = hook.get("tokenRetentionUntil")
    return hook_fate(datetime.fromisoformat(str(until)) if until else None, datetime.fromisoformat(now)) == "retained"


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
    for c in req.data().changes:  # type: ignore[attr-defined]
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
    return Plan([_event(req, state)], change, ops, new_run={**run, **change.sets})


# ---------------------------------------------------------------- steps


def _step_created(req: CreateEventRequest, state: State) -> Plan:
    step_id = req.correlation_id or ""
    if state.run is not None and (state.run.get(INLINE_STEP) or {}).get("id") == step_id:
        raise EntityConflictError(f"step {step_id} already exists")
    item = {
        **step_key(state.run_id, req.correlation_id or ""),
        "stepName": req.data().step_name,  # type: ignore[attr-defined]
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
    return Plan([_event(req, state)], change, [put("entity", item, if_absent=True)], new_step=item)


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
    event = _event(req, state, attempt=attempt, **{LEASE_UNTIL_FIELD: lease})
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
        # The value stays in the event; the step points at it.
        sets: dict[str, Any] = {value_field: SlotRef(0) if state.stored is not None else None,
                                "updatedAt": state.now}
        removes: tuple[str, ...] = ()
        if status is None:  # step_retrying: back to pending, with the error and when it may start again
            retry_after = req.data().retry_after  # type: ignore[attr-defined]
            sets["status"] = "pending"
            sets["retryAfter"] = retry_after.astimezone(UTC).isoformat(timespec="microseconds") if retry_after else None
            if retry_after is None:
                removes = ("retryAfter",)
        else:
            sets["status"] = status
            sets["completedAt"] = state.now
        key = step_key(state.run_id, req.correlation_id or "")
        change = RunChange(open_steps_delta=0 if status is None else -1)
        return Plan([_event(req, state)], change, [_step_write(key, step, sets, removes, change)],
                    new_step=_changed(step, sets, removes))

    return planner


# ---------------------------------------------------------------- hooks


def _hook_created(req: CreateEventRequest, state: State) -> Plan:
    data = req.data()
    hook_id = req.correlation_id or ""
    retention = data.token_retention_until  # type: ignore[attr-defined]
    retention_iso = retention.astimezone(UTC).isoformat(timespec="microseconds") if retention else None
    check_hook_token(data.token, retention, datetime.fromisoformat(state.now))  # type: ignore[attr-defined]
    hook = {
        **hook_key(state.run_id, hook_id),
        "token": data.token,  # type: ignore[attr-defined]
        "in": SlotRef(0) if state.stored is not None else None,  # the metadata stays in the event
        "isWebhook": bool(data.is_webhook),  # type: ignore[attr-defined]
        "tokenRetentionUntil": retention_iso,
        "createdAt": state.now,
        "updatedAt": state.now,
        "specVersion": req.spec_version,
        "ver": 1,
    }
    token = put("token", {**token_key(hook["token"]), "token": hook["token"], "runId": state.run_id,
                          "hookId": hook_id, "released": False, "retentionUntil": retention_iso})
    e = token.expr
    token.condition = (
        f"attribute_not_exists(pk) OR ({e.n('released')} = {e.v(True)} AND "
        f"(attribute_not_exists({e.n('retentionUntil')}) OR {e.n('retentionUntil')} < {e.v(state.now)}))"
    )
    ops = [
        put("entity", hook, if_absent=True),
        put("hook-pointer", {**hook_pointer_key(hook_id), "runId": state.run_id}, if_absent=True),
        token,
    ]
    return Plan([_event(req, state)], RunChange(require_alive=True, hooks_created=1), ops, new_hook=hook)


def hook_conflict_plan(req: CreateEventRequest, state: State, owner_run_id: str) -> Plan:
    """The token is held by another hook: record hook_conflict, in the same commit as a check that the
    token is still held (if it was freed meanwhile, the hook is created instead on the next attempt)."""
    token = req.data().token  # type: ignore[attr-defined]
    event = PlannedEvent("hook_conflict", req.correlation_id, {"token": token, "conflictingRunId": owner_run_id},
                         None, None, req.spec_version)
    held = TxOp("ConditionCheck", "token-held", key=token_key(token))
    e = held.expr
    held.condition = (
        f"{e.n('runId')} = {e.v(owner_run_id)} AND ({e.n('released')} = {e.v(False)} OR "
        f"{e.n('retentionUntil')} >= {e.v(state.now)})"
    )
    return Plan([event], RunChange(require_alive=True), [held])


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


def _hook_received(req: CreateEventRequest, state: State) -> Plan:
    hook_id = req.correlation_id or ""
    check = TxOp("ConditionCheck", "entity", key=hook_key(state.run_id, hook_id), condition="attribute_exists(pk)")
    ops = [check]
    resume_id = req.data().resume_id  # type: ignore[attr-defined]
    if resume_id is not None:
        # Keys and the event's slot only (the writer fills it in at commit): a repeat reads the slot back from
        # the cancellation's ALL_OLD item. About 150 bytes, so the marker adds 2 WRU to the transaction.
        ops.append(put(RESUME_MARKER_ROLE, resume_marker_key(state.run_id, hook_id, resume_id), if_absent=True))
    return Plan([_event(req, state)], RunChange(require_alive=True), ops)


def _hook_disposed(req: CreateEventRequest, state: State) -> Plan:
    hook = state.entity
    if hook is None:
        raise HookNotFoundError(f"hook {req.correlation_id} not found in run {state.run_id}")
    delete = TxOp("Delete", "entity", key=hook_key(state.run_id, hook_id_of(hook)))
    delete.condition = f"{delete.expr.n('ver')} = {delete.expr.v(hook['ver'])}"
    ops = [delete, TxOp("Delete", "hook-pointer", key=hook_pointer_key(hook_id_of(hook)))]
    if not state.token_not_owned:
        # Released, not deleted (the same write units): free at once, still naming this hook, so a repeat of a
        # resume it took is answered as the first was (``world/rules/hooks.py``), until a new hook claims the
        # token or the record expires (by then the run's own data has: a run ends within max_run).
        token = TxOp("Update", "token", key=token_key(hook["token"]))
        e = token.expr
        token.condition = f"{e.n('hookId')} = {e.v(hook_id_of(hook))}"
        token.update = (f"SET {e.n('released')} = {e.v(True)}, "
                        f"{e.n(TTL_ATTRIBUTE)} = {e.v(epoch(state.now) + state.run_retention() + state.max_run)} "
                        f"REMOVE {e.n('retentionUntil')}, {e.n(END_STATUS)}")
        ops.append(token)
    return Plan([_event(req, state, token=hook["token"])], RunChange(), ops)


# ---------------------------------------------------------------- waits


def _wait_created(req: CreateEventRequest, state: State) -> Plan:
    resume_at = req.data().resume_at  # type: ignore[attr-defined]
    item = {
        **wait_key(state.run_id, req.correlation_id or ""),
        "status": "waiting",
        "resumeAt": resume_at.astimezone(UTC).isoformat(timespec="microseconds"),
        "createdAt": state.now,
        "updatedAt": state.now,
        "specVersion": req.spec_version,
        "ver": 1,
    }
    return Plan([_event(req, state)], RunChange(require_alive=True), [put("entity", item, if_absent=True)],
                new_wait=item)


def _wait_completed(req: CreateEventRequest, state: State) -> Plan:
    wait = state.entity
    if wait is None:
        raise EventNotFoundError(f"wait {req.correlation_id} not found in run {state.run_id}")
    if wait["status"] == "completed":
        raise EntityConflictError(f"wait {req.correlation_id} is already completed")
    sets = {"status": "completed", "completedAt": state.now, "updatedAt": state.now}
    key = wait_key(state.run_id, req.correlation_id or "")
    return Plan([_event(req, state)], RunChange(require_alive=True), [_update_entity(key, wait, sets)],
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
    "hook_created": StorageRule(_hook_created),
    "hook_received": StorageRule(_hook_received),
    "hook_disposed": StorageRule(_hook_disposed, frozenset({_ENTITY})),
    "wait_created": StorageRule(_wait_created),
    "wait_completed": StorageRule(_wait_completed, frozenset({_ENTITY})),
}

# What a plan needs read first, as the writer asks it.
NEEDS_RUN = frozenset(t for t, r in STORAGE_RULES.items() if _RUN in r.reads and t.startswith(("run_", "attr_")))
NEEDS_ENTITY = frozenset(t for t, r in STORAGE_RULES.items() if _ENTITY in r.reads)
NEEDS_HOOKS = frozenset(t for t, r in STORAGE_RULES.items() if _HOOKS in r.reads)
NEEDS_RUN_COUNTERS = frozenset(t for t, r in STORAGE_RULES.items() if _RUN in r.reads) - NEEDS_RUN
