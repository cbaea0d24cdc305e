"""A World's limiter store (``world.limiters``): where flow control across runs keeps its pools and waiters, and
the starts reserved far ahead.

awsworld's extension, like the schedule store. Both stores keep the records of ``world.rules.limiters`` and decide
nothing: every write stores a pool whole, conditioned on the version its writer read, with the waiter records
the same decision adds or removes, all or nothing (``commit``). The service that decides (``_worker/limiter.py``)
reads, applies the rules, and commits; a commit that finds the pool moved answers False and the service decides
again. The DynamoDB store (``aws/limiter_store.py``) keeps them in the stack's table, the in-memory one
(``_memory/limiters.py``) in the World's storage.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from .rules.limiters import Pool, Waiter


class LimiterStore(Protocol):
    delay_step: float
    """The granularity of this World's queue delays in seconds (SQS: whole seconds; in memory: none, 0): a rate's
    reserved start times are rounded up to it (``rules.limiters.reserve``)."""

    async def read(self, limit: str, pool: str) -> Pool | None:
        """The pool, read strongly (None: never stored, or gone)."""
        ...

    async def waiters(self, limit: str, pool: str) -> list[Waiter]:
        """Every waiter of the pool, in no particular order (``rules.limiters.in_order`` sorts them)."""
        ...

    async def waiter(self, limit: str, pool: str, holder: str) -> Waiter | None:
        """``holder``'s waiter record in the pool, if it waits there."""
        ...

    async def commit(self, pool: Pool, *, expected_version: int, add: Sequence[Waiter] = (),
                     remove: Sequence[str] = (), unlogged_run: str | None = None) -> bool:
        """Store ``pool`` at version ``expected_version + 1`` if the stored one is at ``expected_version`` (0: none
        is stored), with the waiter records ``add`` put and those of the holders ``remove`` deleted, all or
        nothing. False when the pool moved (read again, decide again). ``unlogged_run``: the waiters of ``add``
        are steps of that run which are in no log yet (a flow asks before it declares a step to be born
        running): each is also noted under the run, in the same write, for ``unlogged_waiters``."""
        ...

    async def unlogged_waiters(self, limit: str, run_id: str) -> list[tuple[str, str]]:
        """The (pool, holder) of every waiter of ``limit`` noted under run ``run_id`` (``commit``'s
        ``unlogged_run``), whether it still waits or not: what a run's end tidies that its log cannot name (a
        flow that died between the waiter and the step's declaration)."""
        ...

    async def keep_reservation(self, limit: str, pool: str, holder: str, at: datetime) -> None:
        """Remember the start ``holder`` reserved in the pool, ``at``, for a while after it (an hour). Only a start
        reserved further ahead than a wake waits for a step's message is kept: that wake thinks the message lost
        and sends the step again, and the new message must find this start rather than reserve another
        (``_worker/step_limits.py``). A plain write: lost in a crash, the step reserves again (one token)."""
        ...

    async def reservation(self, limit: str, pool: str, holder: str) -> datetime | None:
        """The start ``holder`` reserved in the pool, if it is kept (``keep_reservation``)."""
        ...

    async def limits(self) -> list[str]:
        """The name of every limit with a stored pool."""
        ...

    async def pools(self, limit: str) -> list[Pool]:
        """Every stored pool of ``limit``, by pool key."""
        ...
