"""The commit loop: one run's turn, from reading what the plans need to the transaction that lands.

Holding the run's turn (``group_commit``), the loop paces a contended run, gives up past the write's deadline
(``WRITE_SECONDS``, longer for a step's result), reads the run head, entities and hooks the plans need, plans
every write, checks ``expect_seq``, splits a group whose items exceed DynamoDB's 100 per transaction, commits,
and on a cancellation decodes it (``cancellations``) and backs off by what the loss taught. It owns the runs'
turns (``RunTurns``: the event writer submits each write to them) and what it learned of each run's contention;
it is handed the writer's caches, the decoder and the stats it counts into.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any

from ...world.errors import (
    InvalidInputError,
    ThrottledError,
    WorldError,
)
from ...world.rules.log import check_expected_seq, check_fence
from ...world.rules.runs import run_missing
from ..clients import AWSClients
from ..dynamodb.items import (
    Item,
    now_iso,
)
from ..dynamodb.reads import batch_get, get_item
from ..dynamodb.transactions import TransientStoreError, TxCancelled, TxOp, transact
from ..keys import entity_key, run_key
from ..resources import TTL_ATTRIBUTE
from .blocks import END_BLOCK, block_holding, build_blocks
from .cancellations import CancellationDecoder, refuse
from .event_reader import EventReader
from .group_commit import Committed, ContentionByRun, Member, RunTurns, Unit, WriteStats
from .hook_plans import RESUME_MARKER_ROLE
from .plan import Plan, State, fill_slots, run_update_op
from .transitions import (
    NEEDS_ENTITY,
    NEEDS_HOOKS,
    NEEDS_RUN,
    NEEDS_RUN_COUNTERS,
    plan_born_running,
    plan_event,
    step_from_head,
)
from .write_caches import HINTS_KEPT, Attempt, WriterCaches, in_head_unit, uncache

# How long a write keeps retrying lost races and throttling before it reports ThrottledError. A step's
# result waits longer: losing it to a redelivery would run the step body again.
WRITE_SECONDS = 30.0
PATIENT_WRITE_SECONDS = 90.0


class CommitLoop:
    def __init__(self, clients: AWSClients, reader: EventReader, caches: WriterCaches, decoder: CancellationDecoder,
                 stats: WriteStats) -> None:
        self.clients = clients
        self.reader = reader
        self.caches = caches
        self.decoder = decoder
        self.stats = stats
        # Writers of one run inside this process do not race each other through DynamoDB: they queue for the
        # run, and whoever finds it idle commits what is queued (group_commit). Other processes race at the
        # commit, and each learns from the races it loses.
        self._turns = RunTurns(self._commit)
        self._contention = ContentionByRun(HINTS_KEPT)

    async def submit(self, run_id: str, member: Member) -> Committed:
        """Wait for the run's turn and the commit that carries ``member`` (alone or in a group)."""
        return await self._turns.submit(run_id, member)

    async def _commit(self, run_id: str, members: list[Member]) -> None:
        """Commit ``members`` (one write alone, or a group) holding the run's turn; every member gets its answer
        (``Member.answer``, rendered by its caller) or its error."""
        group = list(members)
        try:
            await self._commit_group(run_id, group)
        except Exception as error:  # a refusal of the whole commit, or no answer: each member hears it
            for member in group:
                member.fail(error)
        finally:
            for member in group:
                self.stats.attempts[member.attempts] += 1

    async def _commit_group(self, run_id: str, group: list[Member]) -> None:
        lead = group[0]
        counts = [m.event_count for m in group if m.event_count is not None]
        att = Attempt(seq=self.caches.guess_seq(run_id, max(counts) if counts else None)
                       if lead.expect_seq is None else lead.expect_seq)
        contention = self._contention(run_id)
        pause = contention.pace()
        if pause > 0:  # a contended run: stand back, let others in, gather what queues meanwhile
            if pause > contention.rtt / 2:
                att.went_stale()
            await self._sleep(pause)
        while True:
            self._turns.absorb_for(run_id, group)
            moment = time.monotonic()
            for m in group:
                if not m.settled and m.out_of_time(moment, WRITE_SECONDS, PATIENT_WRITE_SECONDS):
                    m.fail(ThrottledError(f"gave up appending to run {run_id} after {m.attempts} lost races",
                                          retry_after=1.0))
            live = [m for m in group if not m.settled]
            if not live:
                return
            now = lead.stamp or now_iso()
            units = [u for m in live for u in m.units if u.index not in m.outcomes]
            await self._load(run_id, units, att, live)
            if att.seq is not None:
                check_expected_seq(run_id, att.seq, lead.expect_seq)
            if not await self._plan_all(run_id, live, att, now):
                continue  # decided from cached state, or a refusal: load and plan again
            writers: list[Member] = []
            for m in live:
                todo = [u for u in m.units if u.index not in m.outcomes]
                if m.single and todo and todo[0].plan and todo[0].plan.noop is not None:
                    if m.in_band:
                        await self._check_fence(run_id, att, m.expected)
                    m.answer(Committed(None, {}, noop_head=att.run))
                elif not todo:
                    m.answer(Committed(None, {}))  # every event of it was refused: its outcomes say why
                else:
                    writers.append(m)
            if not writers:
                continue
            writing = [u for m in writers for u in m.units if u.index not in m.outcomes]
            ops, first_slot = self._ops(run_id, writing, att, lead.in_band, lead.expected, now)
            if len(ops) > 100:
                if len(writers) == 1:
                    raise InvalidInputError("the write touches more than 100 items; split the batch", field="events")
                extra = writers[-1]  # the group is too large: the last member waits for the next one
                group.remove(extra)
                self._turns.requeue(run_id, extra)
                continue
            for m in writers:
                m.attempts += 1
            self.stats.transactions += 1
            began = time.monotonic()
            try:
                await transact(self.clients, ops)
            except TxCancelled as cancelled:
                contention.took(time.monotonic() - began)
                sent_seq = first_slot - 1
                self.decoder.decode(run_id, cancelled, writers, writing, att, datetime.fromisoformat(now))
                att.losses += 1
                self.stats.losses += 1
                await self._back_off(run_id, att, cancelled, sent_seq, sum(len(u.reqs) for u in writing))
                continue
            except TransientStoreError:
                att.losses += 1
                self.stats.losses += 1
                att.went_stale()
                await self._sleep(contention.conflicted())
                continue
            contention.took(time.monotonic() - began)
            contention.won(first_slot - 1 + sum(len(u.plan.events) for u in writing if u.plan))
            self._settle(run_id, writers, writing, att, first_slot, now)
            return

    async def _plan_all(self, run_id: str, live: list[Member], att: Attempt, now: str) -> bool:
        """Plan every undecided unit; False when something was refused (or must be decided again from a read)."""
        in_head = in_head_unit(live[0].units, att) if live[0].expect_seq is not None else None
        ok = True
        for m in live:
            for u in m.units:
                if u.index in m.outcomes:
                    continue
                u.plan = None
                try:
                    u.plan = self._plan(run_id, u, att, now, in_head=u is in_head)
                except WorldError as error:
                    if uncache(att, u):
                        return False  # decided from cached state: read, then decide again
                    if m.in_band:
                        await self._check_fence(run_id, att, m.expected)
                    refuse(m, u, error)
                    ok = False
                    if m.settled:
                        break
        if not ok:
            return False
        noop = [u for m in live for u in m.units if u.index not in m.outcomes and u.plan and u.plan.noop is not None]
        return not (noop and any([uncache(att, u) for u in noop]))

    def _settle(self, run_id: str, writers: list[Member], writing: list[Unit], att: Attempt, first_slot: int,
                now: str) -> None:
        """The commit landed: what this process now knows of the run (head, entities, hints), and each member's
        answer to render."""
        lead = writers[0]
        count = sum(len(u.plan.events) for u in writing if u.plan)
        new_seq = first_slot - 1 + count
        self.caches.hint(run_id, new_seq)
        seq_in_band = (lead.expected + count) if lead.in_band and lead.expected is not None else None
        created = any(u.plan and u.plan.run.create_item for u in writing)
        if lead.in_band and created:
            seq_in_band = count  # a resilient start created the run: _ops stored all its positions as in-band
        head = self.caches.head_after(run_id, writing, att, first_slot, new_seq, now, seq_in_band, lead.in_band)
        if head is not None:
            # Each unit reports the open steps as its own event left them (the last finisher sees 0).
            running = int(head.get("openSteps", 0)) - sum(u.plan.run.open_steps_delta for u in writing if u.plan)
            for unit in writing:
                assert unit.plan is not None
                running += unit.plan.run.open_steps_delta
                unit.open_after = running
        known = {}
        for unit in writing:
            plan = unit.plan
            assert plan is not None
            for planned, slot in zip(plan.events, unit.sent_slots[-len(plan.events):], strict=True):
                known[slot] = planned.as_block_event(run_id, slot, now)
            for item in (plan.new_step, plan.new_hook, plan.new_wait):
                if item is not None:
                    self.caches.remember_entity(run_id, item)
            if unit.req.event_type == "hook_disposed":
                self.caches.drop_entity(run_id, unit.req)
        self.stats.commits += 1
        self.stats.events += count
        self.stats.group_sizes[len(writers)] += 1
        committed = Committed(head, known, seq_in_band, new_seq=new_seq, now=now)
        for m in writers:
            m.answer(committed)

    async def _back_off(self, run_id: str, att: Attempt, cancelled: TxCancelled, sent_seq: int,
                        sent_events: int) -> None:
        """Wait by what a lost commit taught: nothing when the run had not moved (an entity condition failed:
        plan again at once); after a lost race, by how far the run moved and how our recent attempts fared; after
        a conflict or throttling, exponentially."""
        contention = self._contention(run_id)
        if cancelled.conflict:
            att.went_stale()
            await self._sleep(contention.conflicted())
            return
        if att.run_stale or att.seq is None or att.seq <= sent_seq:
            return
        calm = contention.level == 0
        wait = contention.lost(att.seq, att.seq - sent_seq, sent_events)
        if calm and att.losses == 1:
            return  # a first loss on a calm run is retried at once: the cancellation named the next free slot
        if wait > contention.rtt / 2:
            att.went_stale()  # others land while we wait: what the cancellation said will be stale
        await self._sleep(wait)

    async def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.stats.backoff_seconds += seconds
            await asyncio.sleep(seconds)

    async def _check_fence(self, run_id: str, att: Attempt, expected: int | None) -> None:
        """The fence is decided before anything else: a stale in-band writer hears 412, not the 409 or no-op
        its write would otherwise get."""
        run = await get_item(self.clients, run_key(run_id))
        if run is None:
            raise run_missing(run_id)
        att.run, att.run_stale, att.seq = run, False, int(run["seq"])
        check_fence(run_id, int(run["seq"]), int(run["seqInBand"]), expected)

    async def _load(self, run_id: str, units: list[Unit], att: Attempt, members: list[Member]) -> None:
        """Read what the plans need: one BatchGetItem for the run and entities, a Query for hooks."""
        types = {u.req.event_type for u in units}
        keys: list[dict[str, str]] = []
        if att.run_stale and not att.run_read and not att.refresh:
            self.caches.best_head(run_id, att, members)
        for u in units:
            hit = self.caches.entity(run_id, u.req) if u.req.event_type in NEEDS_ENTITY else None
            if u.entity_stale and not u.entity_read and hit is not None:
                u.entity, u.entity_stale, u.entity_cached = hit, False, True
        steps_read = any(u.req.event_type in NEEDS_ENTITY and u.req.event_type.startswith("step_") and u.entity_stale
                         for u in units)
        need_run = att.run_stale and (bool(types & (NEEDS_RUN | NEEDS_RUN_COUNTERS)) or att.seq is None or steps_read
                                      or att.refresh)
        if need_run:
            keys.append(run_key(run_id))
        entity_units = [u for u in units if u.req.event_type in NEEDS_ENTITY and u.entity_stale]
        keys.extend(entity_key(run_id, u.req.event_type, u.req.correlation_id or "") for u in entity_units)
        need_hooks = bool(types & NEEDS_HOOKS) and att.hooks is None
        refreshing = need_run and att.refresh
        results: list[Any] = []
        if keys:
            results.append(await batch_get(self.clients, keys))
        if need_hooks:
            # Listed only after the run item was read: a hook created before that read is in this list, and one
            # created after it moves seq (the commit fails) and hookGen (the list is read again).
            run_item = (found_run(results[0], run_id) if keys else None) or att.run
            att.hooks_gen = int((run_item or {}).get("hookGen", 0))
            results.append(await self.reader.live_hook_items(run_id))
        if not results:
            return
        if keys:
            found = {(i["pk"], i["sk"]): i for i in results[0]}
            if need_run:
                att.run = found.get((run_key(run_id)["pk"], "RUN"))
                att.run_stale = att.refresh = False
                if att.run is None and not types & {"run_started"}:
                    raise run_missing(run_id)
                if att.run is not None:
                    att.seq = int(att.run["seq"])
                    if refreshing:
                        self._contention(run_id).refreshed(att.seq)
            for u in entity_units:
                k = entity_key(run_id, u.req.event_type, u.req.correlation_id or "")
                u.entity = found.get((k["pk"], k["sk"]))
                if u.entity is None and u.req.event_type.startswith("step_"):
                    u.entity = step_from_head(run_id, att.run, u.req.correlation_id or "")
                u.entity_stale = False
        if need_hooks:
            att.hooks = results[-1]

    def _plan(self, run_id: str, unit: Unit, att: Attempt, now: str, in_head: bool = False) -> Plan:
        state = State(run_id, now, unit.stored, run=att.run, entity=unit.entity, hooks=att.hooks or [],
                      token_holder=unit.token_owner,
                      deployment_id=self.clients.config.deployment_id, in_head=in_head,
                      retention=self.clients.retention.default_seconds, max_run=self.clients.retention.max_run_seconds)
        if len(unit.reqs) == 2:
            return plan_born_running(unit.reqs[0], unit.reqs[1], state)
        return plan_event(unit.req, state)

    def _ops(self, run_id: str, units: list[Unit], att: Attempt, in_band: bool, expected: int | None,
             now: str) -> tuple[list[TxOp], int]:
        plans = [u.plan for u in units if u.plan is not None]
        count = sum(len(p.events) for p in plans)
        create = next((p.run.create_item for p in plans if p.run.create_item), None)
        seq = 0 if create is not None else att.seq or 0
        slot = seq + 1
        records: list[tuple[str, str | None]] = []
        for unit in units:
            assert unit.plan is not None
            slots = list(range(slot, slot + len(unit.plan.events)))
            fill_plan(unit.plan, slots)
            unit.sent_slots.extend(slots)
            records.extend(planned.record() for planned in unit.plan.events)
            slot += len(slots)
        ops: list[TxOp] = []
        head = create if create is not None else att.run
        self.clients.retention.remember(run_id, head)
        # Every item this commit puts carries its TTL from now on (aws/retention.py): nothing rewrites it later.
        ttl = self.clients.retention.item_ttl(run_id, now)
        blocks = build_blocks(run_id, seq + 1, records, now)
        for plan in plans:
            point_at_the_end_block(plan, blocks)
        if create is not None:
            item = {**create, "seq": count, "seqInBand": count if in_band else 1, "updatedAt": now}
            ops.append(TxOp("Put", "run", item=item, condition="attribute_not_exists(pk)"))
        else:
            ops.append(run_update_op(run_id, plans, seq, count, in_band, expected, now))
        ops.extend(TxOp("Put", "event", item={**block, TTL_ATTRIBUTE: ttl}, condition="attribute_not_exists(pk)")
                   for block in blocks)
        for unit in units:
            assert unit.plan is not None
            for op in unit.plan.ops:
                if op.item is not None:
                    op.item.setdefault(TTL_ATTRIBUTE, ttl)
                if op.role == RESUME_MARKER_ROLE and op.item is not None:
                    op.item["slot"] = unit.sent_slots[-1]  # the hook_received's own slot: a repeat answers with it
                op.role = f"{op.role}:{unit.index}"
                ops.append(op)
        return ops, seq + 1



def point_at_the_end_block(plan: Plan, blocks: list[dict[str, Any]]) -> None:
    """A plan that ends its run with a value (its slots filled: a failed run's error, a completed run's output; a
    cancel has none, ``transitions.py``'s ``endSlot``) keeps on the run's item the block that value's event lands in
    (``blocks.END_BLOCK``), in the write that ends the run: a listing then reads the error, or with values the
    output, without a Query of its own."""
    end = plan.run.sets.get("endSlot")
    if plan.run.sets.get("status") not in ("failed", "completed") or not isinstance(end, int):
        return
    first = block_holding(blocks, end)
    if first is not None:
        plan.run.sets[END_BLOCK] = first
        if plan.new_run is not None:
            plan.new_run = {**plan.new_run, END_BLOCK: first}


def fill_plan(plan: Plan, slots: list[int]) -> None:
    """Put the slots the writer placed the plan's events at into everything that points at them."""
    for op in plan.ops:
        if op.item is not None:
            op.item = fill_slots(op.item, slots)
        op.expr.values = fill_slots(op.expr.values, slots)
    plan.run.sets = fill_slots(plan.run.sets, slots)
    plan.new_run = fill_slots(plan.new_run, slots)
    plan.new_step = fill_slots(plan.new_step, slots)
    plan.new_hook = fill_slots(plan.new_hook, slots)


def found_run(items: list[Item], run_id: str) -> Item | None:
    key = run_key(run_id)
    return next((i for i in items if i["pk"] == key["pk"] and i["sk"] == key["sk"]), None)
