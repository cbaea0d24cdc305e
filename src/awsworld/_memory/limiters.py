"""``world.limiters`` in memory: pools and waiters in the World's storage (``State.limiters``, shared by Worlds that
share storage, as processes share a table), written as ``world.limiters.LimiterStore`` says.

Each call reads or writes without an ``await`` in between, so a conditioned commit is atomic on the event loop.
Delays in memory are exact (the virtual clock), so reserved start times are not rounded (``delay_step`` 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..world.rules.limiters import Pool, Waiter
from ..world.rules.state import evolve


class MemoryLimiters:
    delay_step = 0.0

    def __init__(self, records: dict[str, Any]) -> None:
        """``records``: the storage's ``State.limiters`` (``pools`` by (limit, pool), ``waiters`` and ``reserved``
        by (limit, pool) then holder)."""
        self.pools_by_key: dict[tuple[str, str], Pool] = records.setdefault("pools", {})
        self.waiting: dict[tuple[str, str], dict[str, Waiter]] = records.setdefault("waiters", {})
        self.reserved: dict[tuple[str, str], dict[str, datetime]] = records.setdefault("reserved", {})
        self.unlogged: dict[tuple[str, str], set[tuple[str, str]]] = records.setdefault("unlogged", {})

    async def read(self, limit: str, pool: str) -> Pool | None:
        return self.pools_by_key.get((limit, pool))

    async def waiters(self, limit: str, pool: str) -> list[Waiter]:
        return list(self.waiting.get((limit, pool), {}).values())

    async def waiter(self, limit: str, pool: str, holder: str) -> Waiter | None:
        return self.waiting.get((limit, pool), {}).get(holder)

    async def commit(self, pool: Pool, *, expected_version: int, add: Sequence[Waiter] = (),
                     remove: Sequence[str] = (), unlogged_run: str | None = None) -> bool:
        key = (pool.limit, pool.pool)
        stored = self.pools_by_key.get(key)
        if (stored.version if stored is not None else 0) != expected_version:
            return False
        waiting = self.waiting.setdefault(key, {})
        if any(w.holder in waiting for w in add):
            return False
        self.pools_by_key[key] = evolve(pool, version=expected_version + 1)
        for holder in remove:
            waiting.pop(holder, None)
        for waiter in add:
            waiting[waiter.holder] = waiter
            if unlogged_run is not None:
                self.unlogged.setdefault((pool.limit, unlogged_run), set()).add((pool.pool, waiter.holder))
        return True

    async def unlogged_waiters(self, limit: str, run_id: str) -> list[tuple[str, str]]:
        return sorted(self.unlogged.get((limit, run_id), set()))

    async def keep_reservation(self, limit: str, pool: str, holder: str, at: datetime) -> None:
        self.reserved.setdefault((limit, pool), {})[holder] = at  # (never expires: memory lives as long as a test)

    async def reservation(self, limit: str, pool: str, holder: str) -> datetime | None:
        return self.reserved.get((limit, pool), {}).get(holder)

    async def limits(self) -> list[str]:
        return sorted({limit for limit, _ in self.pools_by_key})

    async def pools(self, limit: str) -> list[Pool]:
        return [self.pools_by_key[key] for key in sorted(self.pools_by_key) if key[0] == limit]
