"""``events.create`` and ``events.create_batch``: every write lands in one TransactWriteItems, which it may share.

The run item's ``seq`` is the slot allocator: each commit updates the run with the condition ``seq = :seen``
and puts its events at ``seen+1 ..`` in the same transaction, so slots are allocated at commit, densely, and
a lost race costs one retry whose new position comes back in the cancellation's ALL_OLD item (no extra read).
The in-band fence, the run-status rules and every entity condition ride in the same transaction.

Writes of one run inside this process are combined (``group_commit``): whoever finds the run idle commits
everything queued for it that may share one transaction, each write keeping its own conditions and its own
answer, and a writer that loses a race to another process backs off by what the loss told it. Nothing that can
be done without the run's turn is done while holding it: values are stored, and entities this process has no
copy of are read, before a write queues; its answer (which may read the values it points at) is rendered
after.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from ...world.entities import TERMINAL_RUN_STATUSES, ResolveData
from ...world.errors import (
    EntityConflictError,
    HookAlreadyReceivedError,
    HookNotFoundError,
    InBandSupersededError,
    InvalidInputError,
    LogMovedError,
    RunGoneError,
    RunNotFoundError,
    ThrottledError,
    WorldError,
)
from ...world.events import (
    PAYLOAD_FIELDS,
    BatchEventOutcome,
    CreateEventRequest,
    EventBatchResult,
    EventResult,
    parse_event_request,
)
from ...world.ids import event_id_to_slot, slot_to_event_id
from ...world.rules.requests import batch_requests, check_run_id, check_write_params, failed_outcome
from ..clients import AWSClients
from ..dynamodb.items import (
    Item,
    events_from_blocks,
    now_iso,
    wait_from_item,
)
from ..dynamodb.reads import batch_get, get_item
from ..dynamodb.transactions import TransientStoreError, TxCancelled, TxOp, transact
from ..keys import entity_key, run_key
from ..resources import TTL_ATTRIBUTE
from ..retention import retention_of
from ..values import ValueStore
from .blocks import build_blocks
from .entity_reads import EntityReads
from .event_reader import EventReader
from .group_commit import Committed, ContentionByRun, Member, RunTurns, Unit, WriteStats
from .interrupted import discard_unless_recorded
from .plan import Plan, fill_slots, merged_sets, run_update_op
from .run_creation import RunCreator
from .transitions import (
    INLINE_STEP,
    NEEDS_ENTITY,
    NEEDS_HOOKS,
    NEEDS_RUN,
    NEEDS_RUN_COUNTERS,
    RESUME_MARKER_ROLE,
    State,
    hook_conflict_plan,
    plan_born_running,
    plan_event,
    step_from_head,
)

# How long a write keeps retrying lost races and throttling before it reports ThrottledError. A step's
# result waits longer: losing it to a redelivery would run the step body again.
WRITE_SECONDS = 30.0
PATIENT_WRITE_SECONDS = 90.0
_HINTS_KEPT = 10_000


@dataclass
class _Attempt:
    """What one commit (a member alone, or a group) knows of the run head between its attempts."""

    seq: int | None = None
    run: Item | None = None
    run_stale: bool = True
    run_cached: bool = False  # ``run`` is the head as this process last committed it, not a read
    run_read: bool = False  # the cached head was refused once for this write: read from now on
    refresh: bool = False  # what we knew went stale while backing off: read the head before the next attempt
    hooks: list[Item] | None = None
    hooks_gen: int = 0  # the run's hookGen when ``hooks`` was listed
    losses: int = 0


class EventWriter:
    def __init__(self, clients: AWSClients, values: ValueStore, reader: EventReader, reads: EntityReads) -> None:
        self.clients = clients
        self.values = values
        self.reader = reader
        self.reads = reads
        self.creator = RunCreator(clients, values, reads)
        self.stats = WriteStats()
        self._hints: OrderedDict[str, int] = OrderedDict()
        # The run heads and entity items as this process last committed them. A write plans from them instead
        # of reading first: its commit is conditioned on the head's seq (and an entity's ver), so a stale copy
        # can only lose the race, and the cancellation brings the current head back.
        self._heads: OrderedDict[str, Item] = OrderedDict()
        self._entities: OrderedDict[tuple[str, str], Item] = OrderedDict()
        # Writers of one run inside this process do not race each other through DynamoDB: they queue for the
        # run, and whoever finds it idle commits what is queued (group_commit). Other processes race at the
        # commit, and each learns from the races it loses.
        self._turns = RunTurns(self._commit)
        self._contention = ContentionByRun(_HINTS_KEPT)

    # ------------------------------------------------------------------ public

    async def create(
        self,
        run_id: str | None,
        event: CreateEventRequest | Mapping[str, Any],
        *,
        event_count: int | None = None,
        in_band: bool = False,
        expected_seq_in_band: int | None = None,
        resolve_data: ResolveData = "all",
        after_step_body: bool = False,
    ) -> EventResult:
        req = parse_event_request(event)
        check_write_params(req, in_band, expected_seq_in_band, event_count)
        if req.event_type == "run_created":
            result = await self.creator.create(run_id, req, resolve_data)
            if result.run is not None:
                self._hint(result.run.run_id, result.run.seq)
            return result
        run_id = check_run_id(run_id)
        stored, expiry = await self._store(run_id, req)
        unit = Unit([req], stored, expiry=expiry)
        member = Member([unit], event_count, in_band, expected_seq_in_band, resolve_data,
                        patient=after_step_body or req.event_type in _AFTER_BODY, single=True)
        try:
            outcome = (await self._write(run_id, member))[0]
        except Exception as error:
            if not isinstance(error, WorldError):  # no answer: the commit may or may not have landed
                await discard_unless_recorded(self.reader, self.values, run_id, unit.stored, unit.sent_slots)
                raise
            await self.values.discard(unit.stored)  # refused: nothing references the value it stored
            if isinstance(error, HookAlreadyReceivedError):
                error.event = await self._recorded_event(run_id, error.event_id, resolve_data)
            raise
        assert outcome.result is not None
        if outcome.result.event is not None and outcome.result.event.event_type == "hook_conflict":
            await self.values.discard(unit.stored)  # the hook (and its metadata) was not created
        else:
            await self._settle_expiry(run_id, [unit])
        return outcome.result

    async def create_batch(
        self,
        run_id: str,
        events: Sequence[CreateEventRequest | Mapping[str, Any]],
        *,
        in_band: bool = False,
        expected_seq_in_band: int | None = None,
        resolve_data: ResolveData = "all",
        atomic: bool = False,
        stamp: datetime | None = None,
        expect_seq: int | None = None,
    ) -> EventBatchResult:
        """``atomic``: every event lands or none does (the first refusal is raised, as ``create`` would).
        ``stamp``: the time recorded on the batch's events, for an in-band writer that has already shown this
        time to the workflow (a step's result consumed before it is recorded with the next declarations); it
        may not be in the future, and only a fenced (in-band) writer may give it. ``expect_seq``: the batch lands
        right after that many events or not at all (``LogMovedError``): what the workflow was shown must be
        what the log holds at that position."""
        run_id = check_run_id(run_id)
        units = [Unit(group) for group in batch_requests(events, in_band=in_band,
                                                         expected_seq_in_band=expected_seq_in_band,
                                                         stamp=stamp, now=datetime.now(UTC))]
        stored = await asyncio.gather(*(self._store(run_id, u.req) for u in units))
        for unit, (value, expiry) in zip(units, stored, strict=True):
            unit.stored, unit.expiry = value, expiry
        member = Member(units, None, in_band, expected_seq_in_band, resolve_data, atomic=atomic,
                        stamp=_iso(stamp) if stamp is not None else None, expect_seq=expect_seq)
        try:
            outcomes = await self._write(run_id, member)
        except Exception:
            await asyncio.gather(*(discard_unless_recorded(self.reader, self.values, run_id, u.stored, u.sent_slots)
                                   for u in units))
            raise
        flat: list[BatchEventOutcome] = []
        seq_in_band = None
        await asyncio.gather(*(self.values.discard(u.stored) for u, o in zip(units, outcomes, strict=True) if not o.ok))
        await self._settle_expiry(run_id, [u for u, o in zip(units, outcomes, strict=True) if o.ok])
        for unit, outcome in zip(units, outcomes, strict=True):
            if len(unit.reqs) == 2:
                flat.append(member.paired.get(unit.index, outcome))
            flat.append(outcome)
            if outcome.result is not None and outcome.result.seq_in_band is not None:
                seq_in_band = outcome.result.seq_in_band
        return EventBatchResult(results=flat, seq_in_band=seq_in_band)

    async def _recorded_event(self, run_id: str, event_id: str | None, resolve: ResolveData) -> Any:
        """The event a repeated resume id first recorded (one GetItem), for callers that answer with it."""
        if event_id is None:
            return None
        slot = event_id_to_slot(event_id)
        event = (await self.reader.events_at(run_id, [slot])).get(slot)
        return (await events_from_blocks(run_id, [event], self.values, resolve))[0] if event else None

    def forget(self, run_id: str) -> None:
        self._hints.pop(run_id, None)
        self._heads.pop(run_id, None)

    # ------------------------------------------------------------------ around the run's turn

    async def _store(self, run_id: str, req: CreateEventRequest) -> tuple[Any, int | None]:
        """The event's payload, stored, and the expiry class its S3 object (if any) was tagged with."""
        fields = PAYLOAD_FIELDS.get(req.event_type, ())
        data = req.data()
        if not fields or (fields[0] not in data.model_fields_set and fields[0] not in (data.model_extra or {})):
            return None, None
        # The value as given, not pydantic's JSON rendering (which would quietly turn NaN into null).
        value = getattr(data, _snake(fields[0])) if _snake(fields[0]) in type(data).model_fields else \
            (data.model_extra or {})[fields[0]]
        if isinstance(value, BaseModel):
            value = value.model_dump(mode="json", by_alias=True, exclude_none=True)
        if req.event_type == "run_started":  # a resilient start: it may create the run, with its data key
            context = getattr(data, "execution_context", None)
            await self.clients.keys.create(run_id, retention_of(context, self.clients.retention.default_seconds))
        expiry = self.clients.retention.object_expiry(run_id)
        return await self.values.store(run_id, value, f"eventData.{fields[0]}", expiry=expiry), expiry

    async def _settle_expiry(self, run_id: str, units: list[Unit]) -> None:
        """Retag the S3 values of committed units stored under another expiry class than the run's: a value is
        stored before its commit, by a process that may not know the run's retention yet (a queued step's
        result on a fresh container: step messages carry none) and so tags it with the stack default's class,
        while the commit read the head and gave its items the run's. Nothing to do in the usual case."""
        expiry = self.clients.retention.object_expiry(run_id)
        await asyncio.gather(*(self.values.retag(u.stored, expiry) for u in units
                               if u.expiry is not None and u.expiry != expiry and u.stored and "r" in u.stored))

    async def _write(self, run_id: str, member: Member) -> list[BatchEventOutcome]:
        """Read ahead, wait for the run's turn and the commit (alone or in a group), render the answer."""
        await self._read_ahead(run_id, member)
        committed = await self._turns.submit(run_id, member)
        return await self._render(run_id, member, committed)

    async def _read_ahead(self, run_id: str, member: Member) -> None:
        """Read, before taking the run's turn, the entities the commit re-checks by version that this process
        has no copy of, with the run head (a step's end reports the open steps, and a step the head holds has
        no item yet): the one BatchGetItem the commit would otherwise make while holding the turn."""
        wanted = [u for u in member.units if u.req.event_type in NEEDS_ENTITY and u.entity_stale
                  and _entity_cache_key(run_id, u.req) not in self._entities]
        if not wanted:
            return
        head_key = run_key(run_id)
        keys = [entity_key(run_id, u.req.event_type, u.req.correlation_id or "") for u in wanted]
        if run_id not in self._heads or any(u.req.event_type.startswith("step_") for u in wanted):
            keys.append(head_key)
        found = {(i["pk"], i["sk"]): i for i in await batch_get(self.clients, keys)}
        head = found.get((head_key["pk"], head_key["sk"]))
        if head is not None:
            member.pre_head = head
            self._hint(run_id, int(head["seq"]))
        for u, key in zip(wanted, keys, strict=False):
            item = found.get((key["pk"], key["sk"]))
            if item is None and u.req.event_type.startswith("step_") and head is not None:
                item = step_from_head(run_id, head, u.req.correlation_id or "")
            if item is not None or head is not None:  # absent, as of a read that also saw the head
                u.entity, u.entity_stale = item, False

    async def _render(self, run_id: str, member: Member, committed: Committed) -> list[BatchEventOutcome]:
        """A member's answer, after the run's turn: its events, the entities it changed (reading the values
        they point at that the commit did not write), the report of events it skipped over."""
        resolve = member.resolve
        known = committed.known
        last_open = next((u.open_after for u in reversed(member.units) if u.open_after is not None), None)
        outcomes: list[BatchEventOutcome] = []
        for unit in member.units:
            decided = member.outcomes.get(unit.index)
            if decided is not None:
                outcomes.append(decided)
                continue
            plan = unit.plan
            assert plan is not None
            if plan.noop is not None:
                result = plan.noop
                if committed.noop_head is not None:
                    result.run = await self.reads.run(committed.noop_head, resolve)
                outcomes.append(BatchEventOutcome(result=result))
                continue
            slots = unit.sent_slots[-len(plan.events):] if plan.events else []
            events = await events_from_blocks(run_id, [known[s] for s in slots], self.values, resolve)
            result = EventResult(event=events[-1] if events else None, seq_in_band=committed.seq_in_band)
            if committed.head is not None:
                # The commit was conditioned on the head as known, so its counters after it are exact.
                result.open_steps = last_open
            if plan.new_run is not None:
                run_head = committed.head if committed.head is not None else {
                    **plan.new_run, "seq": committed.new_seq, "updatedAt": committed.now,
                    **({"seqInBand": committed.seq_in_band} if committed.seq_in_band else {})}
                result.run = await self.reads.run(run_head, resolve, known=known)
            if plan.new_step is not None:
                result.step = await self.reads.step(run_id, plan.new_step, resolve, known)
            if plan.new_hook is not None:
                result.hook = await self.reads.hook(run_id, plan.new_hook, resolve, known)
            if plan.new_wait is not None:
                result.wait = wait_from_item(plan.new_wait)
            for ops in plan.after_commit:
                await self._best_effort(ops)
            outcomes.append(BatchEventOutcome(result=result))
            if len(unit.reqs) == 2:  # born running: one outcome per request, each with its own event
                member.paired[unit.index] = BatchEventOutcome(result=result.model_copy(update={"event": events[0]}))
        only = outcomes[0].result if len(member.units) == 1 else None
        if member.event_count is not None and only is not None and only.event is not None:
            first = only.event.slot if len(member.units[0].reqs) == 1 else only.event.slot - 1
            if first - 1 > member.event_count:
                page = await self.reader.between(run_id, member.event_count, first, resolve)
                only.events, only.cursor, only.has_more = page.data, page.cursor, page.has_more
        return outcomes

    # ------------------------------------------------------------------ the run's turn

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
        att = _Attempt(seq=self._guess_seq(run_id, max(counts) if counts else None)
                       if lead.expect_seq is None else lead.expect_seq)
        contention = self._contention(run_id)
        pause = contention.pace()
        if pause > 0:  # a contended run: stand back, let others in, gather what queues meanwhile
            if pause > contention.rtt / 2:
                self._head_went_stale(att)
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
            if lead.expect_seq is not None and att.seq is not None and att.seq != lead.expect_seq:
                raise LogMovedError(f"run {run_id} holds {att.seq} events, not {lead.expect_seq}", seq=att.seq)
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
                self._on_cancel(run_id, cancelled, writers, writing, att)
                att.losses += 1
                self.stats.losses += 1
                await self._back_off(run_id, att, cancelled, sent_seq, sum(len(u.reqs) for u in writing))
                continue
            except TransientStoreError:
                att.losses += 1
                self.stats.losses += 1
                self._head_went_stale(att)
                await self._sleep(contention.conflicted())
                continue
            contention.took(time.monotonic() - began)
            contention.won(first_slot - 1 + sum(len(u.plan.events) for u in writing if u.plan))
            self._settle(run_id, writers, writing, att, first_slot, now)
            return

    async def _plan_all(self, run_id: str, live: list[Member], att: _Attempt, now: str) -> bool:
        """Plan every undecided unit; False when something was refused (or must be decided again from a read)."""
        in_head = self._in_head_unit(live[0].units, att) if live[0].expect_seq is not None else None
        ok = True
        for m in live:
            for u in m.units:
                if u.index in m.outcomes:
                    continue
                u.plan = None
                try:
                    u.plan = self._plan(run_id, u, att, now, in_head=u is in_head)
                except WorldError as error:
                    if self._uncache(att, u):
                        return False  # decided from cached state: read, then decide again
                    if m.in_band:
                        await self._check_fence(run_id, att, m.expected)
                    _refuse(m, u, error)
                    ok = False
                    if m.settled:
                        break
        if not ok:
            return False
        noop = [u for m in live for u in m.units if u.index not in m.outcomes and u.plan and u.plan.noop is not None]
        return not (noop and any([self._uncache(att, u) for u in noop]))

    def _settle(self, run_id: str, writers: list[Member], writing: list[Unit], att: _Attempt, first_slot: int,
                now: str) -> None:
        """The commit landed: what this process now knows of the run (head, entities, hints), and each member's
        answer to render."""
        lead = writers[0]
        count = sum(len(u.plan.events) for u in writing if u.plan)
        new_seq = first_slot - 1 + count
        self._hint(run_id, new_seq)
        seq_in_band = (lead.expected + count) if lead.in_band and lead.expected is not None else None
        created = any(u.plan and u.plan.run.create_item for u in writing)
        if lead.in_band and created:
            seq_in_band = count  # a resilient start created the run: _ops stored all its positions as in-band
        head = self._head_after(run_id, writing, att, first_slot, new_seq, now, seq_in_band, lead.in_band)
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
                    self._remember_entity(run_id, item)
            if unit.req.event_type == "hook_disposed":
                self._entities.pop((run_id, entity_key(run_id, "hook", unit.req.correlation_id or "")["sk"]), None)
        self.stats.commits += 1
        self.stats.events += count
        self.stats.group_sizes[len(writers)] += 1
        committed = Committed(head, known, seq_in_band, new_seq=new_seq, now=now)
        for m in writers:
            m.answer(committed)

    async def _back_off(self, run_id: str, att: _Attempt, cancelled: TxCancelled, sent_seq: int,
                        sent_events: int) -> None:
        """Wait by what a lost commit taught: nothing when the run had not moved (an entity condition failed:
        plan again at once); after a lost race, by how far the run moved and how our recent attempts fared; after
        a conflict or throttling, exponentially."""
        contention = self._contention(run_id)
        if cancelled.conflict:
            self._head_went_stale(att)
            await self._sleep(contention.conflicted())
            return
        if att.run_stale or att.seq is None or att.seq <= sent_seq:
            return
        calm = contention.level == 0
        wait = contention.lost(att.seq, att.seq - sent_seq, sent_events)
        if calm and att.losses == 1:
            return  # a first loss on a calm run is retried at once: the cancellation named the next free slot
        if wait > contention.rtt / 2:
            self._head_went_stale(att)  # others land while we wait: what the cancellation said will be stale
        await self._sleep(wait)

    def _head_went_stale(self, att: _Attempt) -> None:
        att.run_stale, att.run_cached, att.refresh = True, False, True

    async def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.stats.backoff_seconds += seconds
            await asyncio.sleep(seconds)

    async def _check_fence(self, run_id: str, att: _Attempt, expected: int | None) -> None:
        """The fence is decided before anything else: a stale in-band writer hears 412, not the 409 or no-op
        its write would otherwise get."""
        run = await get_item(self.clients, run_key(run_id))
        if run is None:
            raise RunNotFoundError(f"run {run_id} not found")
        att.run, att.run_stale, att.seq = run, False, int(run["seq"])
        if int(run["seqInBand"]) != expected:
            raise InBandSupersededError(
                f"run {run_id} moved on: in-band count is {run['seqInBand']}, not {expected}",
                seq=int(run["seq"]), seq_in_band=int(run["seqInBand"]))

    def _guess_seq(self, run_id: str, event_count: int | None) -> int | None:
        hint = self._hints.get(run_id)
        if event_count is None:
            return hint
        return max(event_count, hint or 0)

    def _hint(self, run_id: str, seq: int) -> None:
        self._hints[run_id] = max(seq, self._hints.get(run_id, 0))
        self._hints.move_to_end(run_id)
        while len(self._hints) > _HINTS_KEPT:
            self._hints.popitem(last=False)

    def _best_head(self, run_id: str, att: _Attempt, members: list[Member]) -> None:
        """Take the freshest head this process has without a read: one read ahead by a member (before the
        turn), or the head as this process last committed it."""
        read = max((m.pre_head for m in members if m.pre_head is not None), key=lambda h: int(h["seq"]),
                   default=None)
        for m in members:
            m.pre_head = None  # a read ahead is used once: after an attempt, the cancellation knows better
        cached = self._heads.get(run_id)
        if read is not None and (cached is None or int(read["seq"]) > int(cached["seq"])) and \
                (att.seq is None or int(read["seq"]) >= att.seq):
            att.run, att.run_stale, att.run_cached, att.seq = read, False, False, int(read["seq"])
        elif cached is not None and att.seq in (None, cached["seq"]):
            att.run, att.run_stale, att.run_cached, att.seq = cached, False, True, int(cached["seq"])

    async def _load(self, run_id: str, units: list[Unit], att: _Attempt, members: list[Member]) -> None:
        """Read what the plans need: one BatchGetItem for the run and entities, a Query for hooks."""
        types = {u.req.event_type for u in units}
        keys: list[dict[str, str]] = []
        if att.run_stale and not att.run_read and not att.refresh:
            self._best_head(run_id, att, members)
        for u in units:
            hit = self._entities.get(_entity_cache_key(run_id, u.req)) if u.req.event_type in NEEDS_ENTITY else None
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
                    raise RunNotFoundError(f"run {run_id} not found")
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

    def _plan(self, run_id: str, unit: Unit, att: _Attempt, now: str, in_head: bool = False) -> Plan:
        state = State(run_id, now, unit.stored, run=att.run, entity=unit.entity, hooks=att.hooks or [],
                      token_not_owned=unit.token_owner is not None,
                      deployment_id=self.clients.config.deployment_id, in_head=in_head,
                      retention=self.clients.retention.default_seconds, max_run=self.clients.retention.max_run_seconds)
        if len(unit.reqs) == 2:
            return plan_born_running(unit.reqs[0], unit.reqs[1], state)
        if unit.req.event_type == "hook_created" and unit.token_owner is not None:
            plan_event(unit.req, state)  # the same input checks as the hook itself
            return hook_conflict_plan(unit.req, state, unit.token_owner)
        return plan_event(unit.req, state)

    def _ops(self, run_id: str, units: list[Unit], att: _Attempt, in_band: bool, expected: int | None,
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
        if create is not None:
            item = {**create, "seq": count, "seqInBand": count if in_band else 1, "updatedAt": now}
            ops.append(TxOp("Put", "run", item=item, condition="attribute_not_exists(pk)"))
        else:
            ops.append(run_update_op(run_id, plans, seq, count, in_band, expected, now))
        ops.extend(TxOp("Put", "event", item={**block, TTL_ATTRIBUTE: ttl}, condition="attribute_not_exists(pk)")
                   for block in build_blocks(run_id, seq + 1, records, now))
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

    def _on_cancel(self, run_id: str, c: TxCancelled, writers: list[Member], writing: list[Unit],
                   att: _Attempt) -> None:
        """What a cancelled commit says: per unit (its entity's condition) and for the run (the head that won,
        from the ALL_OLD item). A member is refused whole only where its request is (a single event, an atomic
        batch) or where the run refuses it (not found, ended, the fence moved)."""
        owner = {u.index: m for m in writers for u in m.units}
        lead = writers[0]
        # A repeated resume id is decided first: the retry of a request already recorded is answered as such
        # even when the run has ended since (which would otherwise be the 410 of the run condition).
        for unit in writing:
            marker = c.failed(f"{RESUME_MARKER_ROLE}:{unit.index}")
            if marker is not None:
                slot = (marker.item or {}).get("slot")
                _refuse(owner[unit.index], unit, HookAlreadyReceivedError(
                    f"hook {unit.req.correlation_id} already received this resume id",
                    hook_id=unit.req.correlation_id or "",
                    event_id=slot_to_event_id(int(slot)) if slot is not None else None))
        run_reason = c.reason_for("run")
        if run_reason is not None and run_reason.code == "ConditionalCheckFailed":
            old = run_reason.item
            if old is None or int(old.get("hookGen", 0)) != att.hooks_gen:
                att.hooks = None  # hooks were created since they were listed
            creating = any(u.plan and u.plan.run.create_item for u in writing)
            if old is None and not creating:
                self.forget(run_id)
                raise RunNotFoundError(f"run {run_id} not found")
            if old is not None:
                att.run, att.run_stale, att.run_cached, att.seq = old, False, False, int(old["seq"])
                self._hint(run_id, att.seq)
                self._remember_head(run_id, old)
                if lead.in_band and lead.expected is not None and int(old["seqInBand"]) != lead.expected:
                    raise InBandSupersededError(
                        f"run {run_id} moved on: in-band count is {old['seqInBand']}, not {lead.expected}",
                        seq=int(old["seq"]), seq_in_band=int(old["seqInBand"]))
                if old["status"] in TERMINAL_RUN_STATUSES:
                    for m in writers:
                        if any(u.plan and u.plan.run.require_alive for u in m.units if u.index not in m.outcomes):
                            m.fail(RunGoneError(f"run {run_id} is {old['status']}"))
            else:
                att.run_stale = True
        for unit in writing:
            if not owner[unit.index].settled:
                self._on_unit_cancel(run_id, c, owner[unit.index], unit)
        # A taken slot means our seq was stale; the ALL_OLD run item (when the run condition failed too, as it
        # does on every lost race) already names the next free slot, so only re-read when it did not come back.
        fresh = run_reason is not None and run_reason.code == "ConditionalCheckFailed" and run_reason.item
        if c.failed("event") is not None and not fresh:
            att.run_stale = True
            att.seq = None

    def _on_unit_cancel(self, run_id: str, c: TxCancelled, member: Member, unit: Unit) -> None:
        i = unit.index
        kind = unit.req.event_type
        entity = c.failed(f"entity:{i}")
        error: WorldError | None = None
        if entity is not None:
            if kind == "hook_received":
                error = HookNotFoundError(f"hook {unit.req.correlation_id} not found in run {run_id}")
            elif kind.endswith("_created"):
                error = EntityConflictError(f"{kind.split('_')[0]} {unit.req.correlation_id} already exists")
            else:
                unit.entity_stale = True
                self._entities.pop(_entity_cache_key(run_id, unit.req), None)
        token = c.failed(f"token:{i}")
        if c.failed(f"hook-pointer:{i}") is not None and kind == "hook_created" and token is None:
            error = EntityConflictError(f"hook {unit.req.correlation_id} already exists")
        if token is not None:
            owner = token.item or {}
            if kind == "hook_disposed":
                unit.token_owner = owner.get("runId", "?")
            elif owner.get("runId") == run_id and owner.get("hookId") == unit.req.correlation_id:
                error = EntityConflictError(f"hook {unit.req.correlation_id} already exists")
            else:
                unit.token_owner = owner.get("runId")
        if c.failed(f"token-held:{i}") is not None:
            unit.token_owner = None
        if error is not None:
            _refuse(member, unit, error)

    def _head_after(self, run_id: str, writing: list[Unit], att: _Attempt, first_slot: int, new_seq: int,
                    now: str, seq_in_band: int | None, in_band: bool) -> Item | None:
        """The run head as the commit left it, when the commit was conditioned on the head as we knew it (so
        it is exact), remembered for the next write of this run from this process."""
        plans = [u.plan for u in writing if u.plan is not None]
        create = next((p.run.create_item for p in plans if p.run.create_item), None)
        if create is not None:
            head = {**create, "seq": new_seq, "seqInBand": new_seq if in_band else 1, "updatedAt": now}
        elif att.run is not None and int(att.run["seq"]) == first_slot - 1:
            head = dict(att.run)
            head.update(merged_sets(plans))
            head = {k: v for k, v in head.items() if v is not None}
            head["seq"], head["updatedAt"] = new_seq, now
            if seq_in_band is not None:
                head["seqInBand"] = seq_in_band
            head["openSteps"] = int(head.get("openSteps", 0)) + sum(p.run.open_steps_delta for p in plans)
            hooks = sum(p.run.hooks_created for p in plans)
            if hooks:
                head["hookGen"] = int(head.get("hookGen", 0)) + hooks
        else:
            self._heads.pop(run_id, None)
            return None
        self._remember_head(run_id, head)
        return head

    def _remember_head(self, run_id: str, head: Item) -> None:
        self._heads[run_id] = head
        self._heads.move_to_end(run_id)
        while len(self._heads) > _HINTS_KEPT:
            self._heads.popitem(last=False)

    def _remember_entity(self, run_id: str, item: Item) -> None:
        key = (run_id, item["sk"])
        self._entities[key] = item
        self._entities.move_to_end(key)
        while len(self._entities) > _HINTS_KEPT:
            self._entities.popitem(last=False)

    @staticmethod
    def _in_head_unit(units: list[Unit], att: _Attempt) -> Unit | None:
        """The born-running step of a batch that may live in the run head until it ends: only for a writer that
        has read the whole log (``expect_seq``: it declares ids the log does not hold, which is what makes
        skipping the step item's existence check sound), when the head is known (the commit is conditioned on
        it) and holds no other step, or holds one this same batch ends."""
        if att.run is None:
            return None
        born = next((u for u in units if len(u.reqs) == 2), None)
        if born is None:
            return None
        held = (att.run.get(INLINE_STEP) or {}).get("id")
        if held is None or any(u.req.correlation_id == held and u.req.event_type.startswith("step_") and
                               len(u.reqs) == 1 for u in units):
            return born
        return None

    def _uncache(self, att: _Attempt, unit: Unit) -> bool:
        """A refusal or no-op decided from cached copies must be confirmed by a read: drop them; True when
        there was something to drop (decide again after reading)."""
        dropped = False
        if att.run_cached:
            att.run_stale, att.run_cached, att.run_read, att.hooks = True, False, True, None
            dropped = True
        if unit.entity_cached:
            unit.entity_stale, unit.entity_cached, unit.entity_read = True, False, True
            dropped = True
        return dropped

    async def _best_effort(self, ops: list[TxOp]) -> None:
        # Another writer may have released them first; a failure here leaves a token held, never a log hole.
        with contextlib.suppress(TxCancelled, TransientStoreError):
            await transact(self.clients, ops)


def _refuse(member: Member, unit: Unit, error: WorldError) -> None:
    """A refused event: its whole request fails where the request is strict, else the event answers alone."""
    if member.strict:
        member.fail(error)
    else:
        member.outcomes[unit.index] = failed_outcome(error)


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


_AFTER_BODY = frozenset({"step_completed", "step_retrying"})


def _entity_cache_key(run_id: str, req: CreateEventRequest) -> tuple[str, str]:
    return run_id, entity_key(run_id, req.event_type, req.correlation_id or "")["sk"]


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







