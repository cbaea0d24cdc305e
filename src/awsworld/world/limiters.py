"""A World's limiter store (``world.limiters``): where flow control across runs keeps its pools and waiters.

awsworld's extension, like the schedule store. Both stores keep the records of ``world.rules.limiters`` and decide
nothing: every write stores a pool whole, conditioned on the version its writer read, with the waiter records
the same decision adds or removes, all or nothing (``commit``). The service that decides (``_worker/limiter.py``)
reads, applies the rules, and commits; a commit that finds the pool moved answers False and the service decides
again. The DynamoDB store (``aws/limiter_store.py``) keeps them in the stack's table, the in-memory one
(``_memory/limiters.py``) in the World's storage.
"""

from __future__ import annotations

from collections.abc import Sequence
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
                     remove: Sequence[str] = ()) -> bool:
        """Store ``pool`` at version ``expected_version + 1`` if the stored one is at ``expected_version`` (0: none
        is stored), with the waiter records ``add`` put and those of the holders ``remove`` deleted, all or
        nothing. False when the pool moved (read again, decide again)."""
        ...

    async def limits(self) -> list[str]:
        """The name of every limit with a stored pool."""
        ...

    async def pools(self, limit: str) -> list[Pool]:
        """Every stored pool of ``limit``, by pool key."""
        ...
