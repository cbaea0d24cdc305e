"""What one write will do, before it is turned into a transaction: the events to append, the change to the
run item, and the entity operations. Plans are built by ``transitions`` from state read just before."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ...world.entities import TERMINAL_RUN_STATUSES, ResolveData
from ...world.events import PAYLOAD_FIELDS, CreateEventRequest, EventResult
from ...world.rules import Decision
from ...world.rules.leases import LEASE_UNTIL_FIELD
from ...world.watch import commit_due, due_key, shard_of
from ..config import DEFAULT_MAX_RUN_SECONDS, DEFAULT_RETENTION_SECONDS
from ..dynamodb.items import Item
from ..dynamodb.transactions import TxOp
from ..keys import run_key
from ..resources import GSI_DUE_KEY, GSI_DUE_SHARD, WATCH_WAKES
from ..retention import RETENTION_ATTRIBUTE, running_ttl
from ..values import StoredValue
from .blocks import BlockEvent, event_record


@dataclass(frozen=True)
class SlotRef:
    """The slot of the plan's ``index``-th event, known only when the writer places the transaction: entity
    items point at the events that hold their values (``in``, ``out``, ``err``, the run's ``endSlot``)."""

    index: int


def fill_slots(value: Any, slots: list[int]) -> Any:
    """``value`` with every SlotRef replaced by its slot (dicts and lists are rebuilt, other values kept)."""
    if isinstance(value, SlotRef):
        return slots[value.index]
    if isinstance(value, dict):
        return {k: fill_slots(v, slots) for k, v in value.items()}
    if isinstance(value, list):
        return [fill_slots(v, slots) for v in value]
    return value


@dataclass
class PlannedEvent:
    event_type: str
    correlation_id: str | None
    data: dict[str, Any]  # eventData without its payload field
    val: StoredValue | None = None  # the payload field, stored
    payload: Any = None  # the payload's Python value (to answer without reading it back)
    spec_version: int | None = None

    def record(self) -> tuple[str, str | None]:
        """The event as a block stores it, and the S3 key of its value (if it has one)."""
        text = event_record(self.event_type, self.correlation_id, self.data, self.val, self.spec_version)
        return text, (self.val or {}).get("r")

    def as_block_event(self, run_id: str, slot: int, created_at: str) -> BlockEvent:
        # The value is answered as given, wherever it is stored (inline, sealed or in S3): nothing is read back
        # or opened, and an answer never holds a reference it would have to resolve (a written event whose
        # value is in S3 was once answered with that value missing: a child's large result reached its parent
        # as None).
        val = {"p": self.payload} if self.val is not None else None
        return BlockEvent(run_id, slot, self.event_type, self.correlation_id, self.data, val, created_at,
                          self.spec_version)


@dataclass
class RunChange:
    """How the run item changes beside the seq bump, and what its status must be for the write to land."""

    sets: dict[str, Any] = field(default_factory=dict)
    removes: list[str] = field(default_factory=list)
    require_alive: bool = False  # status pending or running
    require_status: str | None = None
    # Steps declared and not yet finished: the last finisher of a fan-out continues the workflow inline.
    open_steps_delta: int = 0
    # Hooks this write creates: each bumps the run's hookGen, which tells a run end whether its hook list is stale.
    hooks_created: int = 0
    create_item: Item | None = None  # resilient start: the run item does not exist yet
    # Step ids the head must not hold (step_created: a step held in the head has no item to collide with).
    not_inline: list[str] = field(default_factory=list)


@dataclass
class Plan:
    events: list[PlannedEvent]
    run: RunChange = field(default_factory=RunChange)
    ops: list[TxOp] = field(default_factory=list)
    # Entity items as they will be after the commit (for the result), by kind.
    new_run: Item | None = None
    new_step: Item | None = None
    new_hook: Item | None = None
    new_wait: Item | None = None
    # Work that did not fit in the transaction (hook cleanup beyond the item cap), done after the commit.
    after_commit: list[list[TxOp]] = field(default_factory=list)
    # Set when the write is an idempotent no-op: answer this, write nothing.
    noop: EventResult | None = None
    resolve: ResolveData = "all"
    decision: Decision | None = None
    """The rulebook's decision this plan commits: a cancelled commit asks it which error a failed condition is."""


def split_payload(event_type: str, data: dict[str, Any]) -> tuple[dict[str, Any], str | None, Any]:
    """Separate an event's payload field (stored inline or in S3) from the rest of its data."""
    fields = PAYLOAD_FIELDS.get(event_type, ())
    if not fields or fields[0] not in data:
        return data, None, None
    rest = dict(data)
    name = fields[0]
    return rest, name, rest.pop(name)


def merged_sets(plans: list[Plan]) -> dict[str, Any]:
    """The head attributes the plans of one commit set (None: remove). An update names a path once, so
    when two plans touch the same attribute a value wins over a removal (a step ending lets go of the head's
    inline step, the next one born running takes its place) and otherwise the later plan wins."""
    final: dict[str, Any] = {}
    for plan in plans:
        for name, value in plan.run.sets.items():
            if value is not None or final.get(name) is None:
                final[name] = value
    return final


def run_update_op(run_id: str, plans: list[Plan], seq: int, count: int, in_band: bool, expected: int | None,
                now: str) -> TxOp:
    op = TxOp("Update", "run", key=run_key(run_id))
    e = op.expr
    sets = [f"{e.n('seq')} = {e.v(seq + count)}", f"{e.n('updatedAt')} = {e.v(now)}"]
    removes: list[str] = []
    conds = [f"{e.n('seq')} = {e.v(seq)}"]
    if in_band:
        assert expected is not None
        sets.append(f"{e.n('seqInBand')} = {e.v(expected + count)}")
        conds.append(f"{e.n('seqInBand')} = {e.v(expected)}")
    for name, value in merged_sets(plans).items():
        if value is None:
            removes.append(e.n(name))
        else:
            sets.append(f"{e.n(name)} = {e.v(value)}")
    for plan in plans:
        change = plan.run
        if change.require_alive:
            conds.append(f"{e.n('status')} IN ({e.v('pending')}, {e.v('running')})")
        if change.require_status:
            conds.append(f"{e.n('status')} = {e.v(change.require_status)}")
        for step_id in change.not_inline:
            conds.append(f"(attribute_not_exists({e.n('inl')}) OR {e.n('inl')}.{e.n('id')} <> {e.v(step_id)})")
    watch = run_watch(run_id, plans_due(plans, now))
    for name in (GSI_DUE_SHARD, GSI_DUE_KEY):
        if name in watch:
            sets.append(f"{e.n(name)} = {e.v(watch[name])}")
        else:
            removes.append(e.n(name))
    removes.append(e.n(WATCH_WAKES))  # a write is activity: the watchdog's count of fruitless wakes restarts
    hooks = sum(p.run.hooks_created for p in plans)
    if hooks:
        sets.append(f"{e.n('hookGen')} = if_not_exists({e.n('hookGen')}, {e.v(0)}) + {e.v(hooks)}")
    delta = sum(p.run.open_steps_delta for p in plans)
    if delta:
        sets.append(f"{e.n('openSteps')} = if_not_exists({e.n('openSteps')}, {e.v(0)}) + {e.v(delta)}")
    op.update = "SET " + ", ".join(dict.fromkeys(sets)) + (" REMOVE " + ", ".join(removes) if removes else "")
    op.condition = " AND ".join(dict.fromkeys(conds))
    return op


def plans_due(plans: list[Plan], now: str) -> datetime | None:
    """The run's due after the commit of ``plans`` (``world.watch.commit_due``): none if it ends the run."""
    ends = any(p.run.sets.get("status") in TERMINAL_RUN_STATUSES for p in plans)
    leases = [datetime.fromisoformat(p.new_step[LEASE_UNTIL_FIELD]) for p in plans
              if p.new_step is not None and isinstance(p.new_step.get(LEASE_UNTIL_FIELD), str)
              and p.events and p.events[-1].event_type == "step_started"]
    return commit_due(datetime.fromisoformat(now), ends_run=ends, leases=leases)


def run_watch(run_id: str, due: datetime | None) -> dict[str, str]:
    """The run head's watch index keys for ``due`` (none: the run leaves the index)."""
    if due is None:
        return {}
    return {GSI_DUE_SHARD: shard_of(run_id), GSI_DUE_KEY: due_key(due)}


@dataclass
class State:
    run_id: str
    now: str
    stored: StoredValue | None  # the event's payload, already stored
    run: Item | None = None  # loaded when the plan needs the run item itself
    entity: Item | None = None
    hooks: list[Item] = field(default_factory=list)
    token_holder: str | None = None  # the run whose hook holds the write's hook token, as a commit found it
    deployment_id: str | None = None
    in_head: bool = False  # a born-running step may be held in the run head (see plan_born_running)
    # The stack's retention and longest run (aws/retention.py): a run's own retention is on its head.
    retention: int = DEFAULT_RETENTION_SECONDS
    max_run: int = DEFAULT_MAX_RUN_SECONDS

    def run_retention(self) -> int:
        return int((self.run or {}).get(RETENTION_ATTRIBUTE) or self.retention)

    def item_ttl(self) -> int:
        """The TTL of an item of the run written by this commit (``aws/retention.py``, ``running_ttl``)."""
        return running_ttl(self.now, self.run_retention(), self.max_run)


def payload_of(req: CreateEventRequest) -> Any:
    """The request's payload as the answer shows it (the stored value is what the writer stored)."""
    return split_payload(req.event_type, req.data().model_dump(mode="json", by_alias=True, exclude_none=True))[2]
