"""The one service every party uses to take, free and adjust slots and tokens of limits across runs.

Each operation reads a pool (``world.limiters``), decides with the rulebook (``world.rules.limiters``: settle
first, so gone holders free their slots and waiters that fit are granted before a newcomer is considered), and
commits the result conditioned on the version read; a commit that lost reads again and decides again. After a
commit, the waiters it granted are woken (their messages queued). A granted holder keeps its wake until it comes
for its slot, so a party that repeats a release (the redelivery of a delivery that died after its commit, before
its wakes were sent) sends them again; and a run's due, or a step's grant lease, is the last resort.

Who uses it: a start (``Client.start``: a run's slot, ``run_limits.admit``), a flow (a run's first delivery, a
run's end: ``run_limits``; a step's start and end: ``step_limits``), ``client.limits`` and ``awsworld limits``
(adjust, pause, reset, list).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import random
import time
import weakref
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..world.clock import clock_of
from ..world.entities import TERMINAL_RUN_STATUSES
from ..world.errors import RunNotFoundError
from ..world.limiters import LimiterStore
from ..world.protocol import World
from ..world.rules.limiters import (
    Acquired,
    Adjustment,
    Ask,
    Busy,
    LimitNotFoundError,
    LimitSpec,
    MustWait,
    Pool,
    Settled,
    Waiter,
    acquire,
    adjust,
    empty_pool,
    holder_run,
    paused_bucket,
    pool_of,
    release,
    reserve,
    settle,
    unclaimed,
    with_spec,
    withdraw,
)

log = logging.getLogger("awsworld.limits")

GIVE_UP_SECONDS = 60.0
"""How long an operation keeps losing races before it gives up (each lost race means another writer moved the
pool: the limit makes progress; this writer waits its turn, backing off up to ``MAX_BACKOFF`` with jitter)."""
MAX_BACKOFF = 1.0
REWAKE_AFTER = timedelta(seconds=10)
"""A holder granted this long ago that has not come for its slot has its wake sent again by the next party that
reads the pool (the writer that granted it may have died before sending it)."""
REAP_AFTER = timedelta(seconds=60)
"""A run holder older than this is looked up (its run may have ended without tidying: a crash) before an asker
is made to wait or a listing shows it."""


_OLDER_CODE: contextvars.ContextVar[bool] = contextvars.ContextVar("awsworld_limits_older_code", default=False)


@contextlib.contextmanager
def older_code() -> Iterator[None]:
    """The limits used in this block are declared by code older than the newest deployment: a delivery another
    deployment handed over (``_worker/delivery.py``: only the runs pinned to an older version are handed to it).
    Such code decides by the numbers a pool records and writes its own only into a pool not stored yet. Why: the
    numbers a pool keeps are the last code's to use it, and the runs pinned to the code before a deploy (a
    backlog waiting for its slots, say) would otherwise write the old numbers back at every use, so a limit
    raised in code held only until the next of them came."""
    token = _OLDER_CODE.set(True)
    try:
        yield
    finally:
        _OLDER_CODE.reset(token)


@dataclass
class _Turns:
    lock: asyncio.Lock
    users: int = 0


_TURNS: weakref.WeakKeyDictionary[LimiterStore, dict[tuple[int, str, str], _Turns]] = weakref.WeakKeyDictionary()


@contextlib.asynccontextmanager
async def _turn(store: LimiterStore, limit: str, pool_key: str) -> AsyncIterator[None]:
    """This process's turn at the pool ``pool_key`` of ``limit`` in ``store``: one writer of a pool at a time per
    process and event loop (an ``asyncio.Lock`` serves one loop). Dropped once nobody holds or waits for it, so a
    process that saw many keys keeps none of them."""
    turns = _TURNS.setdefault(store, {})
    key = (id(asyncio.get_running_loop()), limit, pool_key)
    turn = turns.get(key)
    if turn is None:
        turn = turns[key] = _Turns(asyncio.Lock())
    turn.users += 1
    try:
        async with turn.lock:
            yield
    finally:
        turn.users -= 1
        if turn.users == 0 and turns.get(key) is turn:
            del turns[key]


class NoLimiterStoreError(TypeError):
    """A limited workflow or step on a World without a limiter store (``world.limiters``)."""


def limiters_of(world: World) -> LimiterStore | None:
    return world.limiters


def require_store(world: World) -> LimiterStore:
    store = limiters_of(world)
    if store is None:
        raise NoLimiterStoreError(f"{type(world).__name__} keeps no limits (world.limiters): limited workflows and "
                                  "steps need the in-memory World or the AWS World")
    return store


@dataclass(frozen=True)
class Decided:
    """What an operation decided on a settled pool: the pool to store, the waiters to add and to remove (by
    holder), and what to answer."""

    pool: Pool
    answer: Any
    add: Sequence[Waiter] = ()
    remove: Sequence[str] = ()
    unlogged_run: str | None = None  # ``add``'s steps are of this run and in no log yet (``LimiterStore.commit``)


class Limiter:
    def __init__(self, world: World) -> None:
        self.world = world
        self.store = require_store(world)

    def now(self) -> datetime:
        return clock_of(self.world).now()

    # ------------------------------------------------------------------ slots

    async def acquire(self, spec: LimitSpec, ask: Ask, *,
                      unlogged_run: str | None = None) -> Acquired | MustWait | Busy:
        """A slot for ``ask`` (``rules.limiters.acquire``), or its place among the waiters: written before this
        returns. A key that is full of run holders older than ``REAP_AFTER`` has them looked up first: one whose
        run ended (and whose end did not free the slot: a crash) holds nothing. ``unlogged_run``: the asker is a
        step of that run not declared yet; its waiter, if it waits, is noted under the run in the same write
        (``LimiterStore.unlogged_waiters``: the end's tidy finds it even if the declaration never lands)."""
        pool_key = pool_of(spec, ask.key)
        own: list[Waiter | None] = []

        def decide(pool: Pool) -> Decided:
            decision = acquire(pool, ask, self.now(), waiting=own[0] if own else None)
            if isinstance(decision, MustWait) and not decision.already:
                return Decided(decision.pool, decision, add=(decision.waiter,), unlogged_run=unlogged_run)
            return Decided(decision.pool, decision)

        async def prepare(pool: Pool) -> None:
            if ask.holder not in pool.holders and not pool.admissible(ask.key) and not own:
                own.append(await self.store.waiter(spec.name, pool_key, ask.holder))

        return await self._update(spec.name, pool_key, spec, decide, prepare=prepare, reap_for=ask.key)

    async def release(self, limit: str, pool_key: str, holder: str) -> bool:
        """Free ``holder``'s slot, or take it out of the waiters if it waits (a run that ended waiting): False when
        it neither holds nor waits. Freed slots go to the waiters in order."""
        found: list[Waiter | None] = []
        again: list[Waiter] = []

        async def prepare(pool: Pool) -> None:
            if holder not in pool.holders and not found:
                found.append(await self.store.waiter(limit, pool_key, holder))

        def decide(pool: Pool) -> Decided:
            # Granted earlier and not come yet: woken again, whether this release is a repeat or the redelivery of
            # a delivery whose first release died before its grants' wakes were sent (they were not: it ends here
            # as a release of a slot taken again, or of none). A wake still queued is not sent twice (its key).
            again[:] = [w for w in unclaimed(pool) if w.holder != holder]
            freed = release(pool, holder, self.now())
            if freed is not None:
                return Decided(freed, True)
            waiter = found[0] if found else None
            if waiter is None:
                return Decided(pool, False)
            return Decided(withdraw(pool, waiter, self.now()), True, remove=(waiter.holder,))

        answer = await self._update(limit, pool_key, None, decide, prepare=prepare)
        await self._wake(again)
        return bool(answer)

    async def release_all(self, limit: str, pool_key: str, holders: Collection[str], *,
                          waiting: Collection[str] = ()) -> list[str]:
        """Free every slot of ``holders`` still held (a run's step attempts, once the run has ended: an attempt
        cut off by a crash holds its slot until its lease passes, after its run is over), and take those of
        ``waiting`` that wait out of the waiters (a step still waiting for a slot when its run ended: left, it
        would show as a waiter and be granted a slot no delivery uses). One read, a read of each of ``waiting``
        not holding a slot when the pool has waiters, and a write only when one of them holds or waits: the
        holders freed or withdrawn."""
        freed: list[str] = []
        found: dict[str, Waiter] = {}

        async def prepare(pool: Pool) -> None:
            found.clear()  # (read again after a lost race: what was read may have been granted or taken out)
            if not pool.waiting:
                return
            for holder in waiting:
                if holder not in pool.holders:
                    waiter = await self.store.waiter(limit, pool_key, holder)
                    if waiter is not None:
                        found[holder] = waiter

        def decide(pool: Pool) -> Decided:
            freed.clear()
            # (One granted since it was read holds a slot now: freed below, its waiter record gone with its grant.)
            withdrawn = [h for h in found if h not in pool.holders]
            for holder in holders:
                after = release(pool, holder, self.now())
                if after is not None:
                    pool = after
                    freed.append(holder)
            for holder in withdrawn:
                pool = withdraw(pool, found[holder], self.now())
            freed.extend(withdrawn)
            return Decided(pool, list(freed), remove=withdrawn)

        await self._update(limit, pool_key, None, decide, prepare=prepare)
        return freed

    async def settle(self, limit: str, pool_key: str) -> Pool:
        """Free the slots of holders that hold nothing any more (a run that ended, a step lease that passed), and
        grant what is free to the waiters: what a waiting run's wake does, and ``awsworld limits`` before it
        shows a pool."""
        found: list[Pool] = []

        def decide(pool: Pool) -> Decided:
            found.append(pool)
            return Decided(pool, pool)

        await self._update(limit, pool_key, None, decide, reap_all=True)
        if not found:
            raise LimitNotFoundError(f"limit {limit!r} has no pool {pool_key!r}")
        await self._wake(unclaimed(found[-1]))  # granted, and not come yet: their wakes may have been lost
        return found[-1]

    async def adjust(self, limit: str, pool_key: str, adjustment: Adjustment, *, spec: LimitSpec | None = None) -> Pool:
        """Change a key at run time (``rules.limiters.adjust``); a raised limit or a resume grants the waiters
        that now fit in the same write. ``spec``: the limit's numbers when no pool is stored yet (its code's)."""
        found: list[Pool] = []

        def decide(pool: Pool) -> Decided:
            changed = adjust(pool, adjustment, self.now())
            found.append(changed)
            return Decided(changed, changed)

        await self._update(limit, pool_key, spec, decide)
        if not found:
            raise LimitNotFoundError(f"limit {limit!r} has no pool {pool_key!r} (nothing holds, waits or was set "
                                     "there yet; name the limit's code numbers to create it)")
        return found[-1]

    # ------------------------------------------------------------------ tokens

    async def reserve(self, spec: LimitSpec, key: str) -> datetime | None:
        """The start time ``key``'s bucket gives this asker (now, or when it must come back), counted; None while
        the key is paused (``rules.limiters.paused_bucket``: nothing counted, the asker waits for the resume)."""
        def decide(pool: Pool) -> Decided:
            if paused_bucket(pool, key):
                return Decided(pool, None)
            reserved = reserve(pool, key, self.now(), step=self.store.delay_step)
            return Decided(reserved.pool, reserved.at)

        return await self._update(spec.name, pool_of(spec, key), spec, decide)

    # ------------------------------------------------------------------ the loop

    async def _update(self, limit: str, pool_key: str, spec: LimitSpec | None, decide: Callable[[Pool], Decided], *,
                      prepare: Callable[[Pool], Any] | None = None, reap_for: str | None = None,
                      reap_all: bool = False) -> Any:
        """Read, settle, decide, settle what the decision freed, commit; again from the read when the commit
        lost. Answers None when there is no pool and no ``spec`` to make one from.

        The writers of one pool in this process take turns (``_turn``), and the woken are sent after the turn:
        only writers in other processes race for the version. Without turns, the deliveries of one process (``awsworld
        dev``'s poller runs 32 at once) raced each other: a 200-step fan-out under ``concurrency=10`` lost 82% of
        its commits on the emulator (which serves DynamoDB one request at a time), each loss three more requests
        for the store the others waited on, and took 11 minutes with deliveries giving up after 60 s of lost
        races."""
        async with _turn(self.store, limit, pool_key):
            answer, woken = await self._commit_loop(limit, pool_key, spec, decide, prepare=prepare,
                                                    reap_for=reap_for, reap_all=reap_all)
        await self._wake(woken)
        return answer

    async def _commit_loop(self, limit: str, pool_key: str, spec: LimitSpec | None,
                           decide: Callable[[Pool], Decided], *, prepare: Callable[[Pool], Any] | None,
                           reap_for: str | None, reap_all: bool) -> tuple[Any, list[Waiter]]:
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            stored = await self.store.read(limit, pool_key)
            if stored is None and spec is None:
                return None, []
            pool = stored if stored is not None else empty_pool(spec, pool_key)  # type: ignore[arg-type]
            now = self.now()
            if spec is not None and (stored is None or not _OLDER_CODE.get()):  # (the newest code's numbers)
                pool = with_spec(pool, spec, now)
            ended: set[str] = set()
            if reap_all or (reap_for is not None and not settle(pool, now).pool.admissible(reap_for)):
                ended = await self._ended_holders(pool, now, everyone=reap_all)
            settled = await self._settle(pool, now, ended)
            if prepare is not None:
                await prepare(settled.pool)
            decided = decide(settled.pool)
            after = await self._settle(decided.pool, now, set())  # what the decision freed goes to the waiters
            result, granted = after.pool, [*settled.granted, *after.granted]
            remove = [*(w.holder for w in granted), *decided.remove]
            # Granted a while ago and not come yet: the wake of a writer that died after its commit (sent again;
            # a wake still queued is not sent twice, its key holds it back).
            stale = [w for w in unclaimed(stored) if now - w.since >= REWAKE_AFTER] if stored is not None else []
            if stored is not None and result == stored and not decided.add and not remove:
                return decided.answer, stale  # nothing changed: no write
            if await self.store.commit(result, expected_version=stored.version if stored is not None else 0,
                                       add=decided.add, remove=remove, unlogged_run=decided.unlogged_run):
                return decided.answer, [*granted, *(w for w in stale if w.holder in result.holders)]
            if time.monotonic() - started > GIVE_UP_SECONDS:
                raise RuntimeError(f"limit {limit!r} pool {pool_key!r}: gave up after {attempt} lost races in "
                                   f"{GIVE_UP_SECONDS:g} s")
            await asyncio.sleep(min(MAX_BACKOFF, 0.005 * 2 ** min(attempt, 8)) * random.random())

    async def _settle(self, pool: Pool, now: datetime, ended: set[str]) -> Settled:
        settled = settle(pool, now, ended=ended)
        if settled.needs_waiters:
            settled = settle(pool, now, ended=ended, waiters=await self.store.waiters(pool.limit, pool.pool))
        return settled

    async def _ended_holders(self, pool: Pool, now: datetime, *, everyone: bool) -> set[str]:
        """The run holders whose run has ended (or is gone): those older than ``REAP_AFTER`` (all with
        ``everyone``). One metadata-only read each."""
        ended: set[str] = set()
        for holder, held in pool.holders.items():
            run_id = holder_run(holder)
            if run_id is None or (not everyone and now - held.since < REAP_AFTER):
                continue
            try:
                run = await self.world.runs.get(run_id, resolve_data="none")
            except RunNotFoundError:
                ended.add(holder)
                continue
            if run.status in TERMINAL_RUN_STATUSES:
                ended.add(holder)
        return ended

    async def _wake(self, granted: Sequence[Waiter]) -> None:
        """Send the wakes of ``granted``; the first failure is raised once all were tried, so the delivery that
        granted them is retried, and its repeat sends them again (``release``'s repeat, ``REWAKE_AFTER``)."""
        failed: Exception | None = None
        for waiter in granted:
            wake = waiter.wake
            if not wake:
                continue
            try:
                await self.world.queue(str(wake["queue"]), dict(wake["payload"]),
                                       idempotency_key=wake.get("key"))
            except Exception as error:
                log.warning("limit: waking %s after its grant failed (%s)", waiter.holder, type(error).__name__)
                failed = failed or error
        if failed is not None:
            raise failed

    async def pools(self, limit: str) -> list[Pool]:
        return await self.store.pools(limit)

    async def waiters(self, limit: str, pool_key: str) -> list[Waiter]:
        return await self.store.waiters(limit, pool_key)
