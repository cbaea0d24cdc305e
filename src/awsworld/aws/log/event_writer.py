"""The AWS World's writes (the engine's ``store_value``, ``create_run``, ``write_event`` and ``write_batch`` under
``world/shared/storage.py``, which parses and checks them first): every write lands in one TransactWriteItems, which it
may share.

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

``EventWriter`` is one object composed of small collaborators, one module each, handed what they share when
made: this one takes the checked requests (S3 value offload, what a failed write leaves behind, the answer); its
``CommitLoop`` (``commit_loop``)
holds the run's turn (pacing, deadlines, ``expect_seq``, the 100-item split, back-off) and decodes a cancelled
transaction with its ``CancellationDecoder`` (``cancellations``); all three read and fill one ``WriterCaches``
(``write_caches``: what this process last committed).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime
from typing import Any

from ...world.entities import ResolveData
from ...world.errors import WorldError
from ...world.events import BatchEventOutcome, CreateEventRequest, Event, EventResult, RunFailedData
from ...world.rules.requests import VALUE_FIELD, carried_value
from ...world.shared.answers import wait_answer
from ..clients import AWSClients
from ..dynamodb.items import events_from_blocks
from ..dynamodb.reads import batch_get
from ..dynamodb.transactions import TransientStoreError, TxCancelled, TxOp, transact
from ..keys import WAIT_PREFIX, entity_key, run_key
from ..retention import retention_of
from ..values import ValueStore
from .cancellations import CancellationDecoder
from .commit_loop import CommitLoop
from .entity_reads import EntityReads
from .event_reader import EventReader
from .group_commit import Committed, Member, Unit, WriteStats
from .interrupted import discard_unless_recorded
from .item_states import wait_state
from .run_creation import RunCreator
from .transitions import NEEDS_ENTITY, step_from_head
from .write_caches import WriterCaches


class EventWriter:
    def __init__(self, clients: AWSClients, values: ValueStore, reader: EventReader, reads: EntityReads) -> None:
        self.clients = clients
        self.values = values
        self.reader = reader
        self.reads = reads
        self.creator = RunCreator(clients, values, reads)
        self.stats = WriteStats()
        self.caches = WriterCaches()
        self.loop = CommitLoop(clients, reader, self.caches, CancellationDecoder(self.caches), self.stats)

    # -- the engine's writes (``world/shared/storage.py``: the requests arrive parsed and checked)
    # -----------------------

    async def store_value(self, run_id: str, req: CreateEventRequest) -> Stored:
        """The event's payload, stored, and the expiry class its S3 object (if any) was tagged with."""
        carried, value = carried_value(req)  # the value as given (``requests.carried_value``)
        if not carried:
            return None, None
        if req.event_type == "run_started":  # a resilient start: it may create the run, with its data key
            context = getattr(req.data(), "execution_context", None)
            await self.clients.keys.create(run_id, retention_of(context, self.clients.retention.default_seconds))
        expiry = self.clients.retention.object_expiry(run_id)
        data = req.data()
        unsealed_if_key_lost = isinstance(data, RunFailedData) and bool(data.unsealed_if_key_lost)
        return await self.values.store(run_id, value, f"eventData.{VALUE_FIELD[req.event_type]}", expiry=expiry,
                                       unsealed_if_key_lost=unsealed_if_key_lost), expiry

    async def store_values(self, run_id: str, units: list[list[CreateEventRequest]]) -> list[Stored]:
        return list(await asyncio.gather(*(self.store_value(run_id, unit[0]) for unit in units)))

    async def create_run(self, run_id: str, req: CreateEventRequest, resolve: ResolveData) -> EventResult:
        result = await self.creator.create(run_id, req, resolve)
        if result.run is not None:
            self.caches.hint(result.run.run_id, result.run.seq)
        return result

    async def write_event(self, run_id: str, req: CreateEventRequest, value: Stored, *, event_count: int | None,
                          in_band: bool, expected_seq_in_band: int | None, resolve: ResolveData,
                          patient: bool) -> EventResult:
        """``event_count``: how many events the writer holds (the first guess of the run's seq)."""
        stored, expiry = value
        unit = Unit([req], stored, expiry=expiry)
        member = Member([unit], event_count, in_band, expected_seq_in_band, resolve, patient=patient, single=True)
        try:
            outcome = (await self._write(run_id, member))[0]
        except Exception as error:
            if not isinstance(error, WorldError):  # no answer: the commit may or may not have landed
                await discard_unless_recorded(self.reader, self.values, run_id, unit.stored, unit.sent_slots)
                raise
            await self.values.discard(unit.stored)  # refused: nothing references the value it stored
            raise
        assert outcome.result is not None
        if outcome.result.event is not None and outcome.result.event.event_type == "hook_conflict":
            await self.values.discard(unit.stored)  # the hook (and its metadata) was not created
        else:
            await self._settle_expiry(run_id, [unit])
        return outcome.result

    async def write_batch(self, run_id: str, units: list[list[CreateEventRequest]], values: list[Stored],
                          in_band: bool, expected_seq_in_band: int | None, resolve: ResolveData, atomic: bool,
                          stamp: datetime | None, expect_seq: int | None
                          ) -> tuple[list[BatchEventOutcome], dict[int, BatchEventOutcome], int | None]:
        writes = [Unit(group, stored, expiry=expiry) for group, (stored, expiry) in zip(units, values, strict=True)]
        member = Member(writes, None, in_band, expected_seq_in_band, resolve, atomic=atomic,
                        stamp=_iso(stamp) if stamp is not None else None, expect_seq=expect_seq)
        try:
            outcomes = await self._write(run_id, member)
        except Exception:
            await asyncio.gather(*(discard_unless_recorded(self.reader, self.values, run_id, u.stored, u.sent_slots)
                                   for u in writes))
            raise
        seq_in_band = None
        done = list(zip(writes, outcomes, strict=True))
        await asyncio.gather(*(self.values.discard(u.stored) for u, o in done if not o.ok))
        await self._settle_expiry(run_id, [u for u, o in done if o.ok])
        for outcome in outcomes:
            if outcome.result is not None and outcome.result.seq_in_band is not None:
                seq_in_band = outcome.result.seq_in_band
        return outcomes, member.paired, seq_in_band

    async def recorded_event(self, run_id: str, slot: int, resolve: ResolveData) -> Event | None:
        """The event a repeated resume id first recorded (one Query of its block)."""
        event = (await self.reader.events_at(run_id, [slot])).get(slot)
        return (await events_from_blocks(run_id, [event], self.values, resolve))[0] if event else None

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
        committed = await self.loop.submit(run_id, member)
        return await self._render(run_id, member, committed)

    async def _read_ahead(self, run_id: str, member: Member) -> None:
        """Read, before taking the run's turn, the entities the commit re-checks by version that this process
        has no copy of, with the run head (a step's end reports the open steps, and a step the head holds has
        no item yet): the one BatchGetItem the commit would otherwise make while holding the turn."""
        wanted = [u for u in member.units if u.req.event_type in NEEDS_ENTITY and u.entity_stale
                  and self.caches.entity(run_id, u.req) is None]
        if not wanted:
            return
        head_key = run_key(run_id)
        keys = [entity_key(run_id, u.req.event_type, u.req.correlation_id or "") for u in wanted]
        if run_id not in self.caches.heads or any(u.req.event_type.startswith("step_") for u in wanted):
            keys.append(head_key)
        found = {(i["pk"], i["sk"]): i for i in await batch_get(self.clients, keys)}
        head = found.get((head_key["pk"], head_key["sk"]))
        if head is not None:
            member.pre_head = head
            self.caches.hint(run_id, int(head["seq"]))
        for u, key in zip(wanted, keys, strict=False):
            item = found.get((key["pk"], key["sk"]))
            if item is None and u.req.event_type.startswith("step_") and head is not None:
                item = step_from_head(run_id, head, u.req.correlation_id or "")
            if item is not None or head is not None:  # absent, as of a read that also saw the head
                u.entity, u.entity_stale = item, False

    async def _render(self, run_id: str, member: Member, committed: Committed) -> list[BatchEventOutcome]:
        """A member's answer, after the run's turn: its events and the entities it changed (reading the values
        they point at that the commit did not write)."""
        resolve = member.resolve
        known = committed.known
        last_open = next((u.open_after for u in reversed(member.units) if u.open_after is not None), None)
        outcomes: list[BatchEventOutcome] = []
        for position, unit in enumerate(member.units):
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
                wait = plan.new_wait
                result.wait = wait_answer(run_id, wait_state(str(wait["sk"]).removeprefix(WAIT_PREFIX), wait))
            for ops in plan.after_commit:
                await self._best_effort(ops)
            outcomes.append(BatchEventOutcome(result=result))
            if len(unit.reqs) == 2:  # born running: one outcome per request, each with its own event
                member.paired[position] = BatchEventOutcome(result=result.model_copy(update={"event": events[0]}))
        return outcomes

    async def _best_effort(self, ops: list[TxOp]) -> None:
        # Another writer may have released them first; a failure here leaves a token held, never a log hole.
        with contextlib.suppress(TxCancelled, TransientStoreError):
            await transact(self.clients, ops)


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="microseconds")


Stored = tuple[Any, int | None]
"""A stored value (``ValueStore.store``'s inline value or S3 reference) and its S3 object's expiry class."""
