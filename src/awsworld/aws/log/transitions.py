"""The AWS World's write plans: the rulebook's decision about a write -> its reads, conditions and items.

For each write, ``plan_event`` builds the rulebook's view (``item_states.view``) from the run and entity items
read just before it, asks the same rule the in-memory World asks (``world.rules.decide``), and turns its
verdict into a :class:`Plan`: a refusal is the rule's own error, an idempotent no-op writes nothing, and a
transition becomes the events, the run change and the TxOps. Each check the decision carries becomes the
DynamoDB condition that re-checks it at commit (``RUN_ALIVE``: the head's status is live; ``RUN_AS_READ``: it is
the one read; ``ABSENT``: the item does not exist; ``AS_READ``: the item's version is the one read), so a race
only makes the write retry, never land on a state the rules forbid; which error a failed condition means is
``decision.refusal``'s choice. Hook writes are in ``hook_plans``, the planning state and plan types in ``plan``.
What is left here is storage: item layouts, the run head's inline step, TTLs.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from ...world.events import CreateEventRequest, EventResult
from ...world.ids import IN_BAND_SEQ_AT_RUN_CREATION
from ...world.rules import RULES, Check, Decision, Failed, NewRun, View, decide, decide_unit, refusal
from ...world.rules.book import reads
from ...world.rules.leases import LEASE_UNTIL_FIELD
from ...world.rules.lifetime import lifetime_end
from ...world.watch import commit_due, due_key
from ..config import DEFAULT_MAX_RUN_SECONDS, DEFAULT_RETENTION_SECONDS
from ..dynamodb.items import Item
from ..dynamodb.transactions import TxOp, put
from ..keys import ATTRIBUTE_PREFIX, LAYOUT_VERSION, attrs_key, run_key, step_key, wait_key
from ..resources import GSI_RUN_KEY, GSI_STATUS_KEY, GSI_WORKFLOW_KEY, TTL_ATTRIBUTE, WATCH_END
from ..retention import RETENTION_ATTRIBUTE, end_ttl, retention_of, running_ttl
from .hook_plans import plan_hook, release_hooks
from .item_states import changes, iso, item_of, view_of
from .plan import Plan, PlannedEvent, RunChange, SlotRef, State, payload_of, run_watch


def plan_event(req: CreateEventRequest, state: State) -> Plan:
    """The plan of one write (the rulebook refuses what it must: a 400 for a type no caller writes)."""
    view = view_of(req, state, entity=reads(req.event_type, "entity"))
    return plan_decision(decide(req, view), req, state, view)


def plan_born_running(created: CreateEventRequest, started: CreateEventRequest, state: State) -> Plan:
    """step_created followed by step_started in one batch: the step is born running at attempt 1."""
    view = view_of(created, state, entity=False)
    return plan_decision(decide_unit([created, started], view), created, state, view)


def plan_decision(decision: Decision, req: CreateEventRequest, state: State, view: View) -> Plan:
    """A decision as the AWS World commits it."""
    if decision.noop:
        return Plan([], noop=EventResult(), decision=decision)
    payload = payload_of(req)
    events = [PlannedEvent(e.event_type, e.correlation_id, e.data, state.stored if e.carries_value else None,
                           payload if e.carries_value else None, e.spec_version) for e in decision.events]
    run = state.run
    checks = decision.checks
    change = RunChange(require_alive=Check.RUN_ALIVE in checks, open_steps_delta=decision.open_steps,
                       require_status=str(run["status"]) if Check.RUN_AS_READ in checks and run is not None else None)
    plan = Plan(events, change, decision=decision)
    _WRITERS[decision.kind](plan, decision, state, view)
    return plan


def run_head(made: NewRun, now: str, *, retention: int = DEFAULT_RETENTION_SECONDS,
             max_run: int = DEFAULT_MAX_RUN_SECONDS) -> Item:
    """The run head: only what fences, counters and listings need, rewritten by every event, so it stays a few
    hundred bytes whatever the workflow carries. The input and execution context stay in the run_created event
    (slot 1), the attributes in their own item, the output or error in the terminal event (``endSlot``). It
    keeps the run's retention (``ret``: the terminal write sets the TTL from it) and, while the run runs, the
    TTL every item of the run gets when written (``aws/retention.py``), and the end of its lifetime
    (``WATCH_END``), where the watchdog's snoozes stop (``world.watch.snooze_due``)."""
    ret = retention_of(made.execution_context, retention)
    return {
        **run_key(made.run_id),
        "lv": LAYOUT_VERSION,
        "status": made.status,
        "deploymentId": made.deployment_id,
        "specVersion": made.spec_version,
        "attrs": bool(made.attributes) or None,
        "seq": IN_BAND_SEQ_AT_RUN_CREATION,
        "seqInBand": IN_BAND_SEQ_AT_RUN_CREATION,
        "openSteps": 0,
        "createdAt": now,
        "updatedAt": now,
        "startedAt": iso(made.started_at) if made.started_at is not None else None,
        GSI_STATUS_KEY: made.status,
        GSI_WORKFLOW_KEY: made.workflow_name,
        GSI_RUN_KEY: made.run_id,
        **run_watch(made.run_id, commit_due(datetime.fromisoformat(now), ends_run=False)),
        WATCH_END: due_key(lifetime_end(datetime.fromisoformat(now), made.execution_context)),
        RETENTION_ATTRIBUTE: ret,
        TTL_ATTRIBUTE: running_ttl(now, ret, max_run),
    }


def attrs_put(run_id: str, attributes: dict[str, Any] | None) -> list[TxOp]:
    """The attributes item of a run created with attributes (none is written for a run without)."""
    if not attributes:
        return []
    return [put("attrs", {**attrs_key(run_id), **{ATTRIBUTE_PREFIX + k: v for k, v in attributes.items()}})]


# ---------------------------------------------------------------- the run head


def _run_write(plan: Plan, decision: Decision, state: State, view: View) -> None:
    made = decision.creates_run
    if made is not None:  # a resilient start
        item = run_head(made, state.now, retention=state.retention, max_run=state.max_run)
        plan.run.create_item = plan.new_run = item
        plan.ops = attrs_put(state.run_id, made.attributes)
        return
    change = decision.run
    run = state.run
    assert change is not None and run is not None
    sets: dict[str, Any] = {}
    if change.status is not None:
        sets.update({"status": change.status, GSI_STATUS_KEY: change.status})
    if change.started_at is not None:
        sets["startedAt"] = iso(change.started_at)
    if change.completed_at is not None:
        # The run's whole partition expires from here (aws/retention.py): the head R after the end, or when the
        # last token it keeps reserved frees, whichever is later.
        reserved = [iso(end.hook.retention_until) for end in decision.hook_ends
                    if end.fate == "retained" and end.hook.retention_until is not None]
        sets.update({"completedAt": iso(change.completed_at),
                     TTL_ATTRIBUTE: end_ttl(state.run_retention(), state.now, reserved)})
    if change.end_value is not None:
        sets["endSlot"] = SlotRef(change.end_value.index)  # the output or error stays in the event
    if change.error_code:
        sets["errorCode"] = change.error_code
    if change.attributes:
        op = _attrs_update(state, change.attributes)
        if op is not None:
            plan.ops.append(op)
        if any(value is not None for _key, value in _net(change.attributes).items()):
            sets["attrs"] = True
    plan.run.sets.update(sets)
    plan.new_run = {**run, **sets}
    if decision.ends_run:
        release_hooks(plan, state, decision.hook_ends, int(sets[TTL_ATTRIBUTE]))


def _net(attributes: tuple[tuple[str, str | None], ...]) -> dict[str, str | None]:
    """The attributes' final values after the changes in order (None: removed): an update names a path once."""
    final: dict[str, str | None] = {}
    for key, value in attributes:
        final.pop(key, None)
        final[key] = value
    return final


def _attrs_update(state: State, attributes: tuple[tuple[str, str | None], ...]) -> TxOp | None:
    op = TxOp("Update", "attrs", key=attrs_key(state.run_id))
    e = op.expr
    net = _net(attributes)
    sets = {k: v for k, v in net.items() if v is not None}
    removes = sorted(k for k, v in net.items() if v is None)

    def name(key: str) -> str:
        placeholder = f"#k{len(e.names)}"
        e.names[placeholder] = ATTRIBUTE_PREFIX + key
        return placeholder

    clauses: list[str] = []
    if sets:
        # The item may be born here (a run created without attributes): it carries the run's item TTL.
        ttl = state.item_ttl()
        clauses.append("SET " + ", ".join([*(f"{name(k)} = {e.v(v)}" for k, v in sets.items()),
                                           f"{e.n(TTL_ATTRIBUTE)} = if_not_exists({e.n(TTL_ATTRIBUTE)}, {e.v(ttl)})"]))
    if removes:
        clauses.append("REMOVE " + ", ".join(name(k) for k in removes))
    op.update = " ".join(clauses)
    return op if clauses else None


# ---------------------------------------------------------------- steps and waits


def _step_write(plan: Plan, decision: Decision, state: State, view: View) -> None:
    step = decision.step
    assert step is not None
    key = step_key(state.run_id, step.step_id)
    if decision.event_type != "step_created":
        old = state.entity
        assert old is not None and view.step is not None
        sets = changes(view.step, step)
        plan.ops = [_entity_write(key, old, sets, plan.run)]
        plan.new_step = _changed(old, sets)
        return
    # The head must not hold a step of this id either (the step item's absence does not say so).
    # (``Check.ABSENT`` already fails on what was read: the rulebook says which error that is).
    if state.run is not None and (state.run.get(INLINE_STEP) or {}).get("id") == step.step_id:
        error = refusal(decision, state.run_id, Failed(frozenset({Check.ABSENT})))
        assert error is not None
        raise error
    item = {**key, **item_of(step), "ver": 1}
    plan.run.not_inline = [step.step_id]
    plan.new_step = item
    if step.status == "running" and state.in_head:
        # Born running and held in the run head until it ends: the commit that records its end writes its item
        # once, instead of a put now and an update then. The head holds at most one such step (the writer checks).
        plan.run.sets[INLINE_STEP] = {"id": step.step_id, "n": item["stepName"], "at": state.now,
                                      "in": item.get("in"), "o": item.get("owner"), "s": item.get("specVersion"),
                                      "l": item.get(LEASE_UNTIL_FIELD)}
        item[IN_HEAD] = True
        return
    plan.ops = [put("entity", item, if_absent=True)]


def _wait_write(plan: Plan, decision: Decision, state: State, view: View) -> None:
    wait = decision.wait
    assert wait is not None
    key = wait_key(state.run_id, wait.wait_id)
    if view.wait is None:
        item = {**key, **item_of(wait), "ver": 1}
        plan.ops, plan.new_wait = [put("entity", item, if_absent=True)], item
        return
    old = state.entity
    assert old is not None
    sets = changes(view.wait, wait)
    plan.ops, plan.new_wait = [_update_entity(key, old, sets)], _changed(old, sets)


def _entity_write(key: dict[str, str], old: Item, sets: dict[str, Any], change: RunChange) -> TxOp:
    """How a step's change is written: an update of its item, or for a step the run head holds, its first
    item (which nothing may have written before) and the head let go of it, in the same commit."""
    if old.get(IN_HEAD):
        change.sets[INLINE_STEP] = None
        return put("entity", _changed(old, sets), if_absent=True)
    return _update_entity(key, old, sets)


def _update_entity(key: dict[str, str], old: Item, sets: dict[str, Any]) -> TxOp:
    """``Check.AS_READ``: the update lands on the version read. A None in ``sets`` removes the attribute."""
    op = TxOp("Update", "entity", key=key)
    e = op.expr
    clauses = [f"{e.n(k)} = {e.v(v)}" for k, v in sets.items() if v is not None]
    clauses.append(f"{e.n('ver')} = {e.v(old['ver'] + 1)}")
    gone = [e.n(k) for k, v in sets.items() if v is None and k in old]
    op.update = "SET " + ", ".join(clauses) + (" REMOVE " + ", ".join(gone) if gone else "")
    op.condition = f"{e.n('ver')} = {e.v(old['ver'])}"
    return op


def _changed(old: Item, sets: dict[str, Any]) -> Item:
    new = {k: v for k, v in old.items() if k != IN_HEAD}
    new.update(sets)
    new["ver"] = old["ver"] + 1
    return {k: v for k, v in new.items() if v is not None}


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



_WRITERS: dict[str, Callable[[Plan, Decision, State, View], None]] = {
    "run": _run_write, "attr": _run_write, "step": _step_write, "wait": _wait_write, "hook": plan_hook,
}

# What a plan needs read first, as the writer asks it: what the rule reads (``world.rules.book``), and the head
# for a step's end, which reports how many of the run's steps are still open.
NEEDS_RUN = frozenset(t for t in RULES if reads(t, "run"))
NEEDS_ENTITY = frozenset(t for t in RULES if reads(t, "entity"))
NEEDS_HOOKS = frozenset(t for t in RULES if reads(t, "hooks"))
NEEDS_RUN_COUNTERS = frozenset({"step_completed", "step_failed"})
