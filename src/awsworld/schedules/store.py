"""A World's schedule store (``world.schedules``): awsworld's extension, like the watch index.

Both stores keep ``ScheduleState`` records and apply the rules of ``world.rules.schedules``: every write is
conditioned on the version its writer read (``may_write``), and answers whether it won. The DynamoDB store
(``aws.schedule_store``) keeps them in the stack's table, the in-memory one (``memory_store``) in the World's
storage; a World without ``schedules`` has no schedules (its ticks skip the job).
"""

from __future__ import annotations

from typing import Protocol

from ..world.rules.schedules import ScheduleState
from .declared import Declaration


class ScheduleStore(Protocol):
    declared: tuple[Declaration, ...]
    """The schedules declared in code that this World's host deploys (its ticks create and update them)."""

    async def list(self) -> list[ScheduleState]:
        """Every schedule, by id (``input`` may be None: read it with ``input``)."""
        ...

    async def get(self, schedule_id: str) -> ScheduleState:
        """One schedule, read strongly; ``ScheduleNotFoundError`` when there is none."""
        ...

    async def input(self, state: ScheduleState) -> str:
        """The serialized arguments of ``state``'s runs."""
        ...

    async def write(self, state: ScheduleState, *, expected_version: int | None) -> bool:
        """Store ``state`` if the stored record is at ``expected_version`` (None: if there is none); False when
        another writer moved it first (read it again and decide afresh)."""
        ...

    async def delete(self, schedule_id: str, *, expected_version: int) -> bool:
        """Remove the schedule if it is at ``expected_version``; False when it moved (or is gone)."""
        ...


def schedules_of(world: object) -> ScheduleStore | None:
    return getattr(world, "schedules", None)


def require_store(world: object) -> ScheduleStore:
    store = schedules_of(world)
    if store is None:
        raise TypeError(f"{type(world).__name__} has no schedule store (world.schedules)")
    return store
