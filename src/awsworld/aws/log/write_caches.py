"""What the event writer remembers between writes, so most writes plan without a read.

A write plans from the run head and the entity items as this process last committed them (``heads``,
``entities``) and from the last seq it saw of each run (``hints``), instead of reading first: its commit is
conditioned on the head's seq (and an entity's ver), so a stale copy can only lose the race, and the
cancellation brings the current head back. A refusal or no-op decided from a cached copy is confirmed by a read
(``uncache``). ``Attempt`` is what one commit knows of the run head between its attempts. The caches are
bounded (``HINTS_KEPT`` runs each, least recently used first out). One ``WriterCaches`` is shared by the event
writer's parts (``event_writer.py``, ``commit_loop.py``, ``cancellations.py``), each handed it when made.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from ...world.events import (
    CreateEventRequest,
)
from ..dynamodb.items import Item
from ..keys import entity_key
from .group_commit import Member, Unit
from .plan import merged_sets
from .transitions import INLINE_STEP

HINTS_KEPT = 10_000


@dataclass
class Attempt:
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

    def went_stale(self) -> None:
        """What we knew of the head went stale while backing off: read it before the next attempt."""
        self.run_stale, self.run_cached, self.refresh = True, False, True


class WriterCaches:
    """The run heads, entity items and seq hints this process last committed or saw, by run."""

    def __init__(self) -> None:
        self.hints: OrderedDict[str, int] = OrderedDict()
        self.heads: OrderedDict[str, Item] = OrderedDict()
        self.entities: OrderedDict[tuple[str, str], Item] = OrderedDict()

    def forget(self, run_id: str) -> None:
        self.hints.pop(run_id, None)
        self.heads.pop(run_id, None)

    def hint(self, run_id: str, seq: int) -> None:
        self.hints[run_id] = max(seq, self.hints.get(run_id, 0))
        self.hints.move_to_end(run_id)
        while len(self.hints) > HINTS_KEPT:
            self.hints.popitem(last=False)

    def guess_seq(self, run_id: str, event_count: int | None) -> int | None:
        hint = self.hints.get(run_id)
        if event_count is None:
            return hint
        return max(event_count, hint or 0)

    def best_head(self, run_id: str, att: Attempt, members: list[Member]) -> None:
        """Take the freshest head this process has without a read: one read ahead by a member (before the
        turn), or the head as this process last committed it."""
        read = max((m.pre_head for m in members if m.pre_head is not None), key=lambda h: int(h["seq"]),
                   default=None)
        for m in members:
            m.pre_head = None  # a read ahead is used once: after an attempt, the cancellation knows better
        cached = self.heads.get(run_id)
        if read is not None and (cached is None or int(read["seq"]) > int(cached["seq"])) and \
                (att.seq is None or int(read["seq"]) >= att.seq):
            att.run, att.run_stale, att.run_cached, att.seq = read, False, False, int(read["seq"])
        elif cached is not None and att.seq in (None, cached["seq"]):
            att.run, att.run_stale, att.run_cached, att.seq = cached, False, True, int(cached["seq"])

    def remember_head(self, run_id: str, head: Item) -> None:
        self.heads[run_id] = head
        self.heads.move_to_end(run_id)
        while len(self.heads) > HINTS_KEPT:
            self.heads.popitem(last=False)

    def remember_entity(self, run_id: str, item: Item) -> None:
        key = (run_id, item["sk"])
        self.entities[key] = item
        self.entities.move_to_end(key)
        while len(self.entities) > HINTS_KEPT:
            self.entities.popitem(last=False)

    def entity(self, run_id: str, req: CreateEventRequest) -> Item | None:
        """The entity item ``req`` writes, as this process last committed it."""
        return self.entities.get(entity_cache_key(run_id, req))

    def drop_entity(self, run_id: str, req: CreateEventRequest) -> None:
        self.entities.pop(entity_cache_key(run_id, req), None)

    def head_after(self, run_id: str, writing: list[Unit], att: Attempt, first_slot: int, new_seq: int,
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
            self.heads.pop(run_id, None)
            return None
        self.remember_head(run_id, head)
        return head


def in_head_unit(units: list[Unit], att: Attempt) -> Unit | None:
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


def uncache(att: Attempt, unit: Unit) -> bool:
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


def entity_cache_key(run_id: str, req: CreateEventRequest) -> tuple[str, str]:
    return run_id, entity_key(run_id, req.event_type, req.correlation_id or "")["sk"]
