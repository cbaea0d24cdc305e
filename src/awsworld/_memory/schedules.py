"""``world.schedules`` in memory: the records in the World's storage (``State.schedules``, shared by Worlds that
share storage, as processes share a table), under the rulebook's write condition (``rules.schedules.may_write``).

Each call reads or writes without an ``await`` in between, so a conditioned write is atomic on the event loop.
``next_due`` tells the test environment's driver when a tick must next look (``rules.schedules.next_look``).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from ..world.clock import Clock
from ..world.rules.schedules import may_write, next_look
from ..world.schedules import DeclaredSchedule, ScheduleNotFoundError, ScheduleState, check_input


class MemorySchedules:
    def __init__(self, records: dict[str, ScheduleState], clock: Clock) -> None:
        """``records``: the storage's schedules, by id."""
        self.records = records
        self.clock = clock
        self.declared: tuple[DeclaredSchedule, ...] = ()
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
        """When a tick must next look (the test driver's clock stops there)."""
        return next_look(self.records.values(), self.declared, self.clock.now(), self.listed_at)
