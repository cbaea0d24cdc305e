"""Flow control across runs, decided once for every World: concurrency slots, their waiters in fair order, and
rate tokens.

A *limit* (``LimitSpec``) has a name, a concurrency per key (how many holders one key may have at once), an
optional total across its keys, and an optional rate per key (a token bucket). Its state is kept in *pools*
(``Pool``), one small record each, rewritten whole and conditioned on the version its writer read, like a
schedule's: one pool per key (``pool_of``), or one pool for every key when the limit has a total (its keys
compete for the total, so they share a record: ``SHARED_POOL``). A pool holds who holds a slot (``holders``), how
many wait per key with their round (``keys``), the run-time overrides (a key's concurrency, rate and pause, the
total) and the rate's state (GCRA's theoretical arrival time per key). Each waiter is a record of its own
(``Waiter``: the message that wakes it, its priority, round and arrival), so a pool stays small however many
wait: a write that adds or grants waiters writes the pool and those waiter records in one transaction.

Who holds a slot, and when it frees, without a write:

- a **run** holds ``run_holder(run_id)`` from its admission until it ends; a holder whose run has ended holds
  nothing (``settle(ended=...)``), so the run's terminal write is what frees its slot even when the process dies
  before it tidies the pool (the tidy write that follows only hands the slot on);
- a **step attempt** holds ``step_holder(run_id, step_id)`` with the attempt's lease: once the lease has passed
  (the container died), the slot is free (``lease_until``), exactly as the step is anyone's to take over.

Who gets a freed slot: ``settle`` grants slots to waiters in ``Waiter.order``: higher ``priority`` first, then the
lower *round* (fair queueing between keys: a key's n-th waiter gets round ``max(its key's last round, the round
last served) + 1``, so keys take turns however many one of them queued: start-time fair queueing), then arrival.
A newcomer never overtakes a waiter that could be granted: every write settles first.

Rate (``reserve``): GCRA, the token bucket as one number per key (the theoretical arrival time ``tat``): a bucket
of ``burst`` tokens refilled at ``tokens`` per ``period``. A start that finds no token is not refused and does not
poll: it *reserves* the next start time the bucket allows, in the same write, and comes back then (a delayed
message). Starts at the reserved times conform to the bucket however late their messages come; a delivery comes
no earlier than the queue's delay allows, so reserved times are rounded up to the queue's granularity
(``step``: a whole second on SQS, none in memory) before they are counted.

Everything here is pure: a World's store reads a pool (and, when ``settle`` asks, its waiters), the service that
uses it (``_worker/limiter.py``) decides with these functions, and the store writes the result conditioned on the
version read; a writer that lost reads again and decides afresh.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any, Literal

from ..errors import InvalidInputError, NotFoundError
from .leases import DEFAULT_LEASE_SECONDS
from .state import evolve, frozen

SHARED_POOL = "*"
"""The pool of a limit with a total: every key's holders and waiters in one record."""
RUN_HOLDER = "r:"
STEP_HOLDER = "s:"
MAX_NAME = 120
MAX_KEY = 200
_NAME = re.compile(r"^[A-Za-z0-9_.:=+\-/]{1,120}$")
MAX_PRIORITY = 1_000_000
GRANT_LEASE = timedelta(seconds=DEFAULT_LEASE_SECONDS)
"""How long a step granted a slot while it waited holds it before its message brings it to start (the default
lease of a started step: a delivery that comes later finds the slot taken again, and asks again)."""
OnBusy = Literal["wait", "skip", "cancel"]
ON_BUSY: tuple[OnBusy, ...] = ("wait", "skip", "cancel")
_EMPTY: Mapping[str, Any] = MappingProxyType({})
_PERIODS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([smhd])\s*$")


class LimitInputError(InvalidInputError, ValueError):
    """A limit, key, rate or priority refused where it is given (a decorator, ``client.limits``, the CLI): an
    ``InvalidInputError`` naming the field, and a ``ValueError``. Nothing was written."""


class LimitNotFoundError(NotFoundError):
    """No pool of this limit and key is stored (nothing holds, waits or is overridden there)."""

    code = "limit-not-found"


@frozen
class Rate:
    """``tokens`` starts per ``period`` seconds, with bursts of up to ``burst`` at once (a full bucket)."""

    tokens: int
    period: float
    burst: int

    @property
    def interval(self) -> float:
        """Seconds between two tokens."""
        return self.period / self.tokens

    def text(self) -> str:
        unit = next((u for u, s in _PERIODS.items() if s == self.period), None)
        per = f"{unit}" if unit is not None else f"{self.period:g}s"
        return f"{self.tokens}/{per} burst {self.burst}"


def parse_rate(text: str, *, burst: int | None = None) -> Rate:
    """``"50/s"``, ``"10/m"``, ``"100/h"``, ``"5/10s"`` (5 per 10 seconds): the rate, with ``burst`` tokens at
    most at once (default: one period's worth, ``tokens``)."""
    match = _RATE.match(text) if isinstance(text, str) else None  # pyright: ignore[reportUnnecessaryIsInstance]
    if match is None:
        raise LimitInputError(f"a rate is N/s, N/m, N/h, N/d or N/<k><unit> (5/10s), got {text!r:.60}", field="rate")
    tokens, count, unit = int(match[1]), match[2], match[3]
    period = (int(count) if count else 1) * _PERIODS[unit]
    if tokens < 1 or period <= 0:
        raise LimitInputError(f"a rate needs at least 1 token per a positive period, got {text!r}", field="rate")
    return check_rate(Rate(tokens, period, tokens if burst is None else burst))


def check_rate(rate: Rate) -> Rate:
    if rate.tokens < 1 or rate.period <= 0 or not math.isfinite(rate.period):
        raise LimitInputError(f"a rate needs at least 1 token per a positive period, got {rate}", field="rate")
    if rate.burst < 1:
        raise LimitInputError(f"a rate's burst is at least 1, got {rate.burst}", field="burst")
    return rate


@frozen
class LimitSpec:
    """A limit as code declares it. ``concurrency``: holders per key at once (None: no concurrency limit);
    ``total``: holders across all keys at once (None: keys are independent, one pool each); ``rate``: starts per
    key (None: no rate limit)."""

    name: str
    concurrency: int | None = None
    total: int | None = None
    rate: Rate | None = None

    @property
    def shared(self) -> bool:
        return self.total is not None


def check_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise LimitInputError(f"a limit's name is 1-{MAX_NAME} characters of letters, digits and _.:=+-/ "
                              f"(got {name!r:.80})", field="name")
    return name


def check_spec(spec: LimitSpec) -> LimitSpec:
    check_name(spec.name)
    for what, value in (("concurrency", spec.concurrency), ("total", spec.total)):
        if value is not None and (not isinstance(value, int)  # pyright: ignore[reportUnnecessaryIsInstance]
                                  or isinstance(value, bool) or value < 0):
            raise LimitInputError(f"a limit's {what} is a whole number of at least 0, got {value!r}", field=what)
    if spec.concurrency is None and spec.total is None and spec.rate is None:
        raise LimitInputError(f"limit {spec.name!r} limits nothing: give a concurrency, a total or a rate",
                              field="concurrency")
    if spec.rate is not None:
        check_rate(spec.rate)
    return spec


def check_key(key: object, limit: str) -> str:
    """A key as a key function returned it: text (a number becomes its text) of at most ``MAX_KEY`` characters."""
    if isinstance(key, bool) or not isinstance(key, str | int):
        raise LimitInputError(f"the key of limit {limit!r} must be a str or an int, got {type(key).__name__}",
                              field="key")
    text = str(key)
    if len(text) > MAX_KEY:
        raise LimitInputError(f"the key of limit {limit!r} is at most {MAX_KEY} characters, got {len(text)}",
                              field="key")
    return text


def check_priority(priority: object) -> int:
    if isinstance(priority, bool) or not isinstance(priority, int) or abs(priority) > MAX_PRIORITY:
        raise LimitInputError(f"a priority is a whole number from -{MAX_PRIORITY} to {MAX_PRIORITY} (higher goes "
                              f"first), got {priority!r}", field="priority")
    return priority


def run_holder(run_id: str) -> str:
    return RUN_HOLDER + run_id


def step_holder(run_id: str, step_id: str) -> str:
    return f"{STEP_HOLDER}{run_id}:{step_id}"


def holder_run(holder: str) -> str | None:
    """The run a run holder is (None for a step attempt's holder)."""
    return holder[len(RUN_HOLDER):] if holder.startswith(RUN_HOLDER) else None


def pool_of(spec: LimitSpec, key: str) -> str:
    return SHARED_POOL if spec.shared else key


@frozen
class Holding:
    """A slot held: for ``key``, since ``since``; a step attempt's until its ``lease_until`` at the latest.
    ``wake``: a waiter's message while it is granted and has not come for its slot yet (its holder asking again
    clears it): a party that repeats a write whose wakes may have been lost with a crash sends them again
    (``unclaimed``)."""

    key: str
    since: datetime
    lease_until: datetime | None = None
    wake: Mapping[str, Any] | None = None


@frozen
class KeyState:
    """What a pool keeps about one key: its waiters (how many, and the round its last one got), its run-time
    overrides (``concurrency``, ``rate``, ``paused``) and its bucket (``tat``)."""

    waiting: int = 0
    round: int = 0
    concurrency: int | None = None
    rate: Rate | None = None
    paused: bool = False
    tat: datetime | None = None

    def idle(self, now: datetime) -> bool:
        """Nothing worth keeping: no waiter, no override, a bucket that has refilled."""
        return (self.waiting == 0 and self.concurrency is None and self.rate is None and not self.paused
                and (self.tat is None or self.tat <= now))


_IDLE_KEY = KeyState()


@frozen
class Pool:
    """One record of a limit: a key's (or, for a limit with a total, every key's: ``SHARED_POOL``).
    ``version``: 0 for a pool never stored. ``spec``: the limit as the last code that used it declared it (so a
    party without that code, the CLI or a run whose deploy dropped the limit, decides by the same numbers).
    ``served``: the round of the last waiter granted. ``total``: a run-time override of the spec's."""

    limit: str
    pool: str
    spec: LimitSpec
    version: int = 0
    holders: Mapping[str, Holding] = field(default_factory=lambda: _EMPTY)
    keys: Mapping[str, KeyState] = field(default_factory=lambda: _EMPTY)
    served: int = 0
    total: int | None = None

    def key(self, key: str) -> KeyState:
        return self.keys.get(key, _IDLE_KEY)

    def held(self, key: str) -> int:
        return sum(1 for h in self.holders.values() if h.key == key)

    @property
    def waiting(self) -> int:
        return sum(k.waiting for k in self.keys.values())

    def concurrency(self, key: str) -> int | None:
        override = self.key(key).concurrency
        return override if override is not None else self.spec.concurrency

    def total_limit(self) -> int | None:
        return self.total if self.total is not None else self.spec.total

    def rate(self, key: str) -> Rate | None:
        override = self.key(key).rate
        return override if override is not None else self.spec.rate

    def admissible(self, key: str) -> bool:
        """Whether one more holder of ``key`` fits now."""
        if self.key(key).paused:
            return False
        limit = self.concurrency(key)
        if limit is not None and self.held(key) >= limit:
            return False
        total = self.total_limit()
        return total is None or len(self.holders) < total

    def idle(self, now: datetime) -> bool:
        """Nothing held, waiting, overridden or refilling: the record may go."""
        return not self.holders and self.total is None and all(k.idle(now) for k in self.keys.values())


def empty_pool(spec: LimitSpec, key: str) -> Pool:
    return Pool(spec.name, pool_of(spec, key), spec)


@frozen
class Waiter:
    """A holder waiting for a slot of ``key``: ``wake`` is the queue message that resumes it once granted (its
    queue name, payload and idempotency key), ``since`` when it began to wait."""

    holder: str
    key: str
    priority: int
    round: int
    arrival: datetime
    since: datetime
    wake: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    @property
    def order(self) -> tuple[int, int, datetime, str]:
        """Granted in this order: priority (higher first), round (fair between keys), arrival, holder."""
        return (-self.priority, self.round, self.arrival, self.holder)


def in_order(waiters: Sequence[Waiter]) -> list[Waiter]:
    return sorted(waiters, key=lambda w: w.order)


# ---------------------------------------------------------------- decisions


def with_spec(pool: Pool, spec: LimitSpec, now: datetime) -> Pool:
    """The pool under the numbers code declares now (a deploy that changed them: no migration, the next write
    records them; a key's bucket is counted again at the new rate, ``rebucketed``)."""
    if pool.spec == spec:
        return pool
    changed = evolve(pool, spec=spec)
    keys = {key: rebucketed(state, pool.rate(key), changed.rate(key), now) for key, state in pool.keys.items()}
    return evolve(changed, keys=keys)


def rebucketed(state: KeyState, before: Rate | None, after: Rate | None, now: datetime) -> KeyState:
    """``state``'s bucket when its rate changes from ``before`` to ``after``: the starts it has promised ahead of
    now (``tat`` past now, in ``before``'s intervals) counted in ``after``'s. Kept as a time instead, a backlog
    reserved at a low rate (minutes at ``2/m``) would hold every new start at a raised one (``50/s``) behind it for
    those minutes, the raise giving no token at all. The starts already reserved keep their times (their messages
    are queued with them); a wake of their run re-asks at the new rate (``docs/how-to/flow-control.md``)."""
    if before is None or after is None or before == after or state.tat is None or state.tat <= now:
        return state
    ahead = (state.tat - now).total_seconds() / before.interval
    return evolve(state, tat=now + timedelta(seconds=ahead * after.interval))


def gone_holders(pool: Pool, now: datetime, ended: Collection[str] = ()) -> list[str]:
    """Holders that hold nothing any more: a step attempt whose lease passed, a run in ``ended``."""
    return [h for h, held in pool.holders.items()
            if h in ended or (held.lease_until is not None and held.lease_until <= now)]


def could_grant(pool: Pool) -> bool:
    """Whether some waiter would be granted now (by the counts alone: which one needs the waiters)."""
    return any(state.waiting > 0 and pool.admissible(key) for key, state in pool.keys.items())


@dataclass(frozen=True)
class Settled:
    """A pool without its gone holders and with free slots granted (``granted``: wake them once written).
    ``needs_waiters``: some waiter could be granted and the waiters were not given: read them, settle again."""

    pool: Pool
    granted: tuple[Waiter, ...] = ()
    needs_waiters: bool = False


def settle(pool: Pool, now: datetime, *, ended: Collection[str] = (),
           waiters: Sequence[Waiter] | None = None) -> Settled:
    """Drop the holders that hold nothing (``gone_holders``) and grant the free slots to waiters in order (a
    waiter of a key at its limit, or paused, is passed over, not skipped for good)."""
    gone = gone_holders(pool, now, ended)
    if gone:
        pool = evolve(pool, holders={h: v for h, v in pool.holders.items() if h not in gone})
    if not could_grant(pool):
        return Settled(pool)
    if waiters is None:
        return Settled(pool, needs_waiters=True)
    granted: list[Waiter] = []
    for waiter in in_order(waiters):
        if waiter.holder in pool.holders or not pool.admissible(waiter.key):
            continue
        pool = _grant(pool, waiter, now)
        granted.append(waiter)
    return Settled(pool, tuple(granted))


def _grant(pool: Pool, waiter: Waiter, now: datetime) -> Pool:
    """``waiter`` holds a slot from now: a run until it ends; a step until ``GRANT_LEASE`` from now, renewed when
    its message brings it to start (a lost message frees the slot when that lease passes)."""
    lease_until = now + GRANT_LEASE if waiter.holder.startswith(STEP_HOLDER) else None
    state = pool.key(waiter.key)
    keys = dict(pool.keys)
    keys[waiter.key] = evolve(state, waiting=max(0, state.waiting - 1))
    holders = {**pool.holders, waiter.holder: Holding(waiter.key, now, lease_until, waiter.wake or None)}
    return _tidy(evolve(pool, holders=holders, keys=keys, served=max(pool.served, waiter.round)), now)


def _tidy(pool: Pool, now: datetime) -> Pool:
    """Keys with nothing to keep leave the record (a key's round goes with its last waiter: its next one starts
    at the round served, as a newcomer does)."""
    if all(not k.idle(now) for k in pool.keys.values()):
        return pool
    return evolve(pool, keys={key: state for key, state in pool.keys.items() if not state.idle(now)})


@frozen
class Ask:
    """Who asks for a slot of ``key``: ``holder`` (``run_holder``/``step_holder``), its ``priority`` and
    ``arrival`` (a run's creation: a late asker still queues in its place), the lease a step attempt holds the
    slot under (None for a run), the message that wakes it if it must wait, and what to do when the key is busy
    (``on_busy``: wait; skip, refused; cancel, wait after the holders of its key are cancelled)."""

    holder: str
    key: str
    priority: int = 0
    arrival: datetime | None = None
    lease_until: datetime | None = None
    wake: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    on_busy: OnBusy = "wait"


@dataclass(frozen=True)
class Acquired:
    """The asker holds a slot (``already``: it did before this ask)."""

    pool: Pool
    already: bool = False


@dataclass(frozen=True)
class MustWait:
    """The asker waits: ``waiter`` is its record (new: write it with the pool; ``already``: it was waiting).
    ``cancel``: the holders of its key to cancel (``on_busy="cancel"``)."""

    pool: Pool
    waiter: Waiter
    already: bool = False
    cancel: tuple[str, ...] = ()


@dataclass(frozen=True)
class Busy:
    """``on_busy="skip"``: the key is busy (``holders`` hold it); nothing is written."""

    pool: Pool
    holders: tuple[str, ...]


def acquire(pool: Pool, ask: Ask, now: datetime, *, waiting: Waiter | None = None) -> Acquired | MustWait | Busy:
    """A slot for ``ask`` in a settled pool (``settle`` first: no waiter it could grant is left, so a newcomer
    never overtakes one). ``waiting``: the asker's own waiter record, if it has one (a repeated ask)."""
    held = pool.holders.get(ask.holder)
    if held is not None:
        lease = ask.lease_until if ask.lease_until is not None else held.lease_until  # a new attempt renews it
        if lease != held.lease_until or held.wake is not None:  # (and a granted waiter has come: no more wake)
            pool = evolve(pool, holders={**pool.holders, ask.holder: evolve(held, lease_until=lease, wake=None)})
        return Acquired(pool, already=True)
    if waiting is not None:
        return MustWait(pool, waiting, already=True)
    if pool.admissible(ask.key):
        holders = {**pool.holders, ask.holder: Holding(ask.key, now, ask.lease_until)}
        return Acquired(evolve(pool, holders=holders))
    busy = tuple(sorted(h for h, v in pool.holders.items() if v.key == ask.key))
    if ask.on_busy == "skip":
        return Busy(pool, busy)
    state = pool.key(ask.key)
    round_ = max(state.round, pool.served) + 1
    waiter = Waiter(ask.holder, ask.key, ask.priority, round_, ask.arrival or now, now, ask.wake)
    keys = {**pool.keys, ask.key: evolve(state, waiting=state.waiting + 1, round=round_)}
    return MustWait(evolve(pool, keys=keys), waiter, cancel=busy if ask.on_busy == "cancel" else ())


def unclaimed(pool: Pool) -> list[Waiter]:
    """The holders granted from the waiters that have not come for their slot yet, as waiters to wake again."""
    return [Waiter(h, held.key, 0, 0, held.since, held.since, held.wake)
            for h, held in pool.holders.items() if held.wake]


def release(pool: Pool, holder: str, now: datetime) -> Pool | None:
    """The pool without ``holder`` (settle it next: the slot may go to a waiter); None when it holds nothing."""
    if holder not in pool.holders:
        return None
    return evolve(pool, holders={h: v for h, v in pool.holders.items() if h != holder})


def withdraw(pool: Pool, waiter: Waiter, now: datetime) -> Pool:
    """The pool without ``waiter`` (its run ended while it waited): its key counts one waiter less."""
    state = pool.key(waiter.key)
    return _tidy(evolve(pool, keys={**pool.keys, waiter.key: evolve(state, waiting=max(0, state.waiting - 1))}),
                 now)


# ---------------------------------------------------------------- rate


@dataclass(frozen=True)
class Reserved:
    """A start the bucket allows at ``at`` (now, or a later time the asker comes back at), counted in ``pool``."""

    pool: Pool
    at: datetime


def reserve(pool: Pool, key: str, now: datetime, *, step: float = 0.0) -> Reserved:
    """Take the next start time ``key``'s bucket allows (GCRA: a start at ``t`` conforms when ``t >= tat - (burst -
    1) * interval``; it moves ``tat`` to ``max(tat, t) + interval``). A time later than now is rounded up to
    ``step`` seconds from now (the queue's delay granularity) before it is counted, so the starts its message
    brings conform too. Without a rate the start is now and nothing changes."""
    rate = pool.rate(key)
    if rate is None:
        return Reserved(pool, now)
    state = pool.key(key)
    interval = timedelta(seconds=rate.interval)
    tat = state.tat if state.tat is not None and state.tat > now else now
    at = max(now, tat - interval * (rate.burst - 1))
    if at > now and step > 0:
        at = now + timedelta(seconds=math.ceil(round((at - now).total_seconds() / step, 9)) * step)
    keys = {**pool.keys, key: evolve(state, tat=max(tat, at) + interval)}
    return Reserved(evolve(pool, keys=keys), at)


def paused_bucket(pool: Pool, key: str) -> bool:
    """Whether ``key`` is paused and has no slots to hold its askers back: a limit with a rate only, whose steps
    ask for no slot, so its pause holds back their tokens (``reserve`` is not asked then: the asker waits for the
    resume as a slot's waiter does, ``_worker/step_limits.py``). A limit with slots is paused at its slots."""
    return pool.key(key).paused and pool.concurrency(key) is None and pool.total_limit() is None


def available_tokens(pool: Pool, key: str, now: datetime) -> float | None:
    """How many starts the bucket of ``key`` would allow at once now (None without a rate)."""
    rate = pool.rate(key)
    if rate is None:
        return None
    tat = pool.key(key).tat
    if tat is None or tat <= now:
        return float(rate.burst)
    return max(0.0, rate.burst - (tat - now).total_seconds() / rate.interval)


def next_start(pool: Pool, key: str, now: datetime) -> datetime | None:
    """When ``key``'s bucket next allows a start to a newcomer (now when it has a token; None without a rate).
    Every start reserved before comes earlier: the last one reserved is one interval before it."""
    rate = pool.rate(key)
    if rate is None:
        return None
    tat = pool.key(key).tat
    if tat is None or tat <= now:
        return now
    return max(now, tat - timedelta(seconds=rate.interval * (rate.burst - 1)))


def reservations_lost(pool: Pool, now: datetime) -> Pool:
    """The pool once every start reserved for later than ``now`` has lost its message, as on an ``awsworld dev``
    restart (the queue is not saved: ``cli/dev_state.py``). The wake of each run sends its steps again, and each
    reserves anew; left as it was, a bucket would count the lost starts as well, and the new ones would queue
    behind a backlog that no message holds any more. A bucket keeps only what starts up to now may have taken: at
    most a full burst, so its ``tat`` moves back to ``now`` plus ``burst`` intervals when it was later. The rate
    still holds; at worst one start waits one interval longer than it had to."""
    keys: dict[str, KeyState] = {}
    for key, state in pool.keys.items():
        rate = pool.rate(key)
        if rate is not None and state.tat is not None:
            kept = now + timedelta(seconds=rate.interval * rate.burst)
            if state.tat > kept:
                state = evolve(state, tat=kept)
        keys[key] = state
    return evolve(pool, keys=keys)


# ---------------------------------------------------------------- run-time changes


Change = Literal["set", "pause", "resume", "reset"]


@frozen
class Adjustment:
    """A run-time change of one key (``SHARED_POOL``'s total: ``total``): ``set`` overrides the concurrency, the
    rate or the total; ``pause`` stops new grants for the key (holders keep their slots; askers wait); ``resume``
    ends a pause; ``reset`` drops every override of the key (code's numbers apply again) and its bucket."""

    change: Change
    key: str
    concurrency: int | None = None
    rate: Rate | None = None
    total: int | None = None


def adjust(pool: Pool, adjustment: Adjustment, now: datetime) -> Pool:
    """The pool after ``adjustment`` (settle it next: a raised limit or a resume grants waiters at once)."""
    state = pool.key(adjustment.key)
    total = pool.total
    if adjustment.change == "set":
        for what, value in (("concurrency", adjustment.concurrency), ("total", adjustment.total)):
            if value is not None and value < 0:
                raise LimitInputError(f"a limit's {what} is at least 0, got {value}", field=what)
        if adjustment.total is not None and not pool.spec.shared:
            raise LimitInputError(f"limit {pool.limit!r} has no total (its keys are independent): set a key's "
                                  "concurrency instead", field="total")
        if adjustment.concurrency is None and adjustment.rate is None and adjustment.total is None:
            raise LimitInputError("set what? give a concurrency, a rate or a total", field="concurrency")
        # What the code does not declare, its askers do not take (a step without concurrency= asks for no slot,
        # one without rate= for no token): set, it would show in `awsworld limits` and change nothing.
        if adjustment.concurrency is not None and pool.spec.concurrency is None and pool.spec.total is None:
            raise LimitInputError(f"limit {pool.limit!r} has no concurrency in its code (a rate only): its steps take "
                                  "no slot, so a concurrency set at run time would limit nothing; give the step "
                                  "concurrency= in code, or pace it with --rate", field="concurrency")
        if adjustment.rate is not None and pool.spec.rate is None:
            raise LimitInputError(f"limit {pool.limit!r} has no rate in its code: its steps take no token, so a rate "
                                  "set at run time would pace nothing; give the step rate= in code, or set its "
                                  "--concurrency", field="rate")
        if adjustment.rate is not None:
            check_rate(adjustment.rate)
        before = pool.rate(adjustment.key)
        state = evolve(state, concurrency=adjustment.concurrency if adjustment.concurrency is not None
                       else state.concurrency, rate=adjustment.rate or state.rate)
        state = rebucketed(state, before, state.rate or pool.spec.rate, now)
        total = adjustment.total if adjustment.total is not None else total
    elif adjustment.change == "pause":
        state = evolve(state, paused=True)
    elif adjustment.change == "resume":
        state = evolve(state, paused=False)
    else:  # reset
        state = evolve(state, concurrency=None, rate=None, paused=False, tat=None)
        total = None if adjustment.key == SHARED_POOL else total
    return _tidy(evolve(pool, keys={**pool.keys, adjustment.key: state}, total=total), now)


def epoch(moment: datetime) -> float:
    return moment.timestamp()


def from_epoch(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)
