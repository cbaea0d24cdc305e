"""``world.schedules`` in memory: the records in the World's storage (``State.schedules``, shared by Worlds that
share storage, as processes share a table), with the DynamoDB store's rules (``world.rules.schedules``).

Each call reads or writes without an ``await`` in between, so a conditioned write is atomic on the event loop.
``next_due`` tells the test environment's driver when a tick must next look at the schedules, so its skipping
clock stops there: a daily schedule over 30 simulated days is 30 ticks, not 43,200.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from ..world.rules.schedules import ScheduleNotFoundError, ScheduleState, check_input, may_write
from .declared import Declaration

BUFFER_POLL = timedelta(minutes=1)
"""How often a buffered start looks whether the run before it ended (the stack's tick: every minute)."""


class MemorySchedules:
    def __init__(self, state: Any, clock: Any) -> None:
        """``state``: the storage's ``State`` (its ``schedules`` dict holds the records)."""
        self.records: dict[str, ScheduleState] = state.schedules
        self.clock = clock
        self.declared: tuple[Declaration, ...] = ()
        self.listed_at: datetime | None = None  # the last tick's listing: a buffered start looks a minute on

    async def list(self) -> list[ScheduleState]:
        self.listed_at = self.clock.now()
        return [self.records[key] for key in sorted(self.records)]

    async def get(self, schedule_id: str) -> ScheduleState:
        try:
            return self.records[schedule_id]
        except KeyError:
            raise ScheduleNotFoundError(f"no schedule {schedule_id!r}") from None

    async def input(self, state: ScheduleState) -> str:
        if state.input is not None:
            return state.input
        return (await self.get(state.schedule_id)).input or ""

    async def write(self, state: ScheduleState, *, expected_version: int | None) -> bool:
        stored = self.records.get(state.schedule_id)
        if not may_write(stored, expected_version):
            return False
        text = state.input if state.input is not None else (stored.input if stored is not None else None)
        if text is None:
            raise ValueError(f"schedule {state.schedule_id!r} has no arguments to store")
        self.records[state.schedule_id] = state if state.input is not None else replace(state, input=check_input(text))
        return True

    async def delete(self, schedule_id: str, *, expected_version: int) -> bool:
        stored = self.records.get(schedule_id)
        if stored is None or not may_write(stored, expected_version):
            return False
        del self.records[schedule_id]
        return True

    def next_due(self) -> datetime | None:
        """When a tick must next look (the test driver's clock stops there): now for a pending effect or a
        declaration not stored yet, a minute after the last tick for a buffered start (the stack's pace: it
        cannot know when the run before it ends), else the soonest ``next_at``."""
        now = self.clock.now()
        times: list[datetime] = []
        stored = {d.schedule_id: d for d in self.declared}
        for state in self.records.values():
            stored.pop(state.schedule_id, None)
            if state.pending:
                times.append(now)
            elif state.paused or state.orphaned:
                continue
            elif state.buffered is not None:
                times.append(now if self.listed_at is None else self.listed_at + BUFFER_POLL)
            elif state.next_at is not None:
                times.append(state.next_at)
        if stored or self._changed():
            times.append(now)
        return min(times, default=None)

    def _changed(self) -> bool:
        """A declaration whose stored record differs (its code changed) or a stored code record no
        declaration names (orphaned by the next tick)."""
        declared = {d.schedule_id: d.spec_hash for d in self.declared}
        for state in self.records.values():
            if state.source != "code":
                continue
            expected = declared.get(state.schedule_id)
            if (expected is None and not state.orphaned) or (expected is not None and expected != state.spec_hash):
                return True
        return False

