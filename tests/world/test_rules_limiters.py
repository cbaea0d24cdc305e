"""The rules of limits across runs (``world/rules/limiters.py``), decided on plain values: who gets a slot, in
which order waiters are granted (priority, fair rounds between keys, arrival), when a slot frees without a write
(an ended run, a passed lease), what a token bucket allows, and what run-time changes do."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from awsworld.world.rules.limiters import (
    Acquired,
    Adjustment,
    Ask,
    Busy,
    LimitInputError,
    LimitSpec,
    MustWait,
    Pool,
    Rate,
    Waiter,
    acquire,
    adjust,
    available_tokens,
    empty_pool,
    parse_rate,
    release,
    reservations_lost,
    reserve,
    run_holder,
    settle,
    step_holder,
    withdraw,
)

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def take(pool: Pool, holder: str, key: str = "k", **ask: object) -> tuple[Pool, Acquired | MustWait | Busy]:
    decision = acquire(pool, Ask(holder, key, **ask), T0)  # type: ignore[arg-type]
    return decision.pool, decision


class Queue:
    """A pool with its waiter records, as a store keeps them: every decision applied."""

    def __init__(self, spec: LimitSpec, key: str = "k") -> None:
        self.pool = empty_pool(spec, key)
        self.waiters: dict[str, Waiter] = {}
        self.granted: list[str] = []

    def ask(self, holder: str, key: str = "k", priority: int = 0, at: datetime = T0) -> str:
        decision = acquire(self.pool, Ask(holder, key, priority, at), at, waiting=self.waiters.get(holder))
        self.pool = decision.pool
        if isinstance(decision, MustWait):
            self.waiters[holder] = decision.waiter
            return "wait"
        return "go" if isinstance(decision, Acquired) else "busy"

    def free(self, holder: str, at: datetime = T0) -> None:
        freed = release(self.pool, holder, at)
        assert freed is not None
        self.settle(freed, at)

    def settle(self, pool: Pool, at: datetime = T0, ended: set[str] | None = None) -> None:
        settled = settle(pool, at, ended=ended or set(), waiters=list(self.waiters.values()))
        self.pool = settled.pool
        for waiter in settled.granted:
            del self.waiters[waiter.holder]
            self.granted.append(waiter.holder)


def test_slots_up_to_the_limit_then_waiters_in_priority_then_arrival_order() -> None:
    queue = Queue(LimitSpec("l", concurrency=2))
    assert [queue.ask(h) for h in ("a", "b")] == ["go", "go"]
    assert queue.ask("c", at=T0 + timedelta(seconds=1)) == "wait"
    assert queue.ask("d", priority=3, at=T0 + timedelta(seconds=2)) == "wait"
    assert queue.ask("e", at=T0 + timedelta(seconds=3)) == "wait"
    assert queue.ask("a") == "go"  # a holder asking again holds already
    assert queue.ask("c") == "wait"  # a waiter asking again keeps its place (no second record)
    assert queue.pool.waiting == 3
    for holder in ("a", "b", "d", "c"):
        queue.free(holder)
    assert queue.granted == ["d", "c", "e"]
    assert not queue.waiters and queue.pool.waiting == 0


def test_keys_of_a_total_take_turns_however_many_one_queued() -> None:
    """A total of 2 shared by 10 keys: one key queues 100, nine queue 5 each after it; rounds interleave them."""
    queue = Queue(LimitSpec("l", total=2), key="*")
    holders: list[str] = []
    for n in range(100):
        holders.append(f"big{n}")
        queue.ask(f"big{n}", key="big")
    for k in range(9):
        for n in range(5):
            holders.append(f"s{k}-{n}")
            queue.ask(f"s{k}-{n}", key=f"s{k}")
    running = [h for h in holders if h in queue.pool.holders]
    assert running == ["big0", "big1"]
    order = list(running)
    while queue.pool.holders:
        holder = next(iter(queue.pool.holders))
        before = len(queue.granted)
        queue.free(holder)
        order.extend(queue.granted[before:])
    small_done = max(i for i, h in enumerate(order) if h.startswith("s"))
    assert small_done < 60  # the 45 small ones are all through within the first 60 grants, not after 100
    assert [h for h in order if h.startswith("big")] == [f"big{n}" for n in range(100)]  # a key keeps its order


def test_a_key_at_its_own_limit_is_passed_over_not_skipped() -> None:
    queue = Queue(LimitSpec("l", concurrency=1, total=3), key="*")
    assert [queue.ask(h, key=k) for h, k in (("a1", "a"), ("a2", "a"), ("b1", "b"))] == ["go", "wait", "go"]
    assert queue.ask("c1", key="c") == "go"
    assert queue.ask("d1", key="d") == "wait"  # the total is full
    queue.free("b1")  # frees the total: a2 is first in order but its key is full; d1 goes
    assert queue.granted == ["d1"]
    queue.free("a1")
    assert queue.granted == ["d1", "a2"]


def test_a_slot_frees_without_a_write_when_its_run_ended_or_its_lease_passed() -> None:
    spec = LimitSpec("l", concurrency=2)
    pool, _ = take(empty_pool(spec, "k"), run_holder("r1"))
    pool, _ = take(pool, step_holder("r2", "step_1"), lease_until=T0 + timedelta(seconds=30))
    assert not pool.admissible("k")
    assert settle(pool, T0 + timedelta(seconds=10)).pool.holders.keys() == pool.holders.keys()
    later = settle(pool, T0 + timedelta(seconds=31))
    assert list(later.pool.holders) == [run_holder("r1")] and later.pool.admissible("k")
    assert not settle(pool, T0, ended={run_holder("r1")}).pool.holders.keys() & {run_holder("r1")}


def test_a_waiting_holder_withdrawn_takes_nothing_and_release_of_a_non_holder_is_none() -> None:
    queue = Queue(LimitSpec("l", concurrency=1))
    queue.ask("a")
    queue.ask("b")
    assert release(queue.pool, "b", T0) is None  # a run that never held a slot frees nothing
    queue.pool = withdraw(queue.pool, queue.waiters.pop("b"), T0)
    assert queue.pool.waiting == 0 and "k" not in queue.pool.keys


def test_skip_refuses_and_cancel_names_the_holders_to_cancel() -> None:
    pool, _ = take(empty_pool(LimitSpec("l", concurrency=1), "k"), "a")
    skipped = acquire(pool, Ask("b", "k", on_busy="skip"), T0)
    assert isinstance(skipped, Busy) and skipped.holders == ("a",) and skipped.pool == pool
    replacing = acquire(pool, Ask("b", "k", on_busy="cancel"), T0)
    assert isinstance(replacing, MustWait) and replacing.cancel == ("a",)


def test_raising_a_key_at_run_time_grants_its_waiters_and_pause_holds_them() -> None:
    queue = Queue(LimitSpec("l", concurrency=1))
    for holder in ("a", "b", "c", "d"):
        queue.ask(holder)
    queue.settle(adjust(queue.pool, Adjustment("set", "k", concurrency=3), T0))
    assert queue.granted == ["b", "c"]
    queue.settle(adjust(queue.pool, Adjustment("pause", "k"), T0))
    queue.free("a")
    assert queue.granted == ["b", "c"]  # paused: nothing more is granted
    queue.settle(adjust(queue.pool, Adjustment("resume", "k"), T0))
    assert queue.granted == ["b", "c", "d"]
    reset = adjust(queue.pool, Adjustment("reset", "k"), T0)
    assert reset.concurrency("k") == 1 and "k" not in reset.keys


def test_a_bucket_allows_its_burst_then_one_start_per_interval_reserved_in_order() -> None:
    spec = LimitSpec("l", rate=parse_rate("10/s", burst=5))
    pool = empty_pool(spec, "k")
    starts: list[datetime] = []
    for _ in range(25):
        reserved = reserve(pool, "k", T0)
        pool, at = reserved.pool, reserved.at
        starts.append(at)
    assert starts[:5] == [T0] * 5
    assert [(s - T0).total_seconds() for s in starts[5:8]] == pytest.approx([0.1, 0.2, 0.3])
    assert conforms(starts, 10, 5)
    assert available_tokens(pool, "k", T0) == 0.0


def test_reserved_times_rounded_to_the_queue_still_conform() -> None:
    pool = empty_pool(LimitSpec("l", rate=parse_rate("10/s")), "k")
    starts = []
    for n in range(200):
        at = T0 + timedelta(milliseconds=37 * n)
        reserved = reserve(pool, "k", at, step=1.0)
        pool = reserved.pool
        starts.append(reserved.at)
        assert reserved.at == at or (reserved.at - at).total_seconds() == int((reserved.at - at).total_seconds())
    assert conforms(starts, 10, 10)


def test_lost_reservations_leave_the_bucket_and_the_rate_still_holds() -> None:
    """A restart that lost the queue (``awsworld dev``): the starts reserved after ``now`` are forgotten, so the
    steps that reserve again start at most one interval late, and with the starts that happened the rate holds."""
    pool = empty_pool(LimitSpec("l", rate=parse_rate("10/s", burst=5)), "k")
    starts = []
    for _ in range(25):
        reserved = reserve(pool, "k", T0)
        pool = reserved.pool
        starts.append(reserved.at)
    now = T0 + timedelta(seconds=0.5)
    happened = [at for at in starts if at <= now]
    pool = reservations_lost(pool, now)
    again = []
    for _ in range(len(starts) - len(happened)):
        reserved = reserve(pool, "k", now)
        pool = reserved.pool
        again.append(reserved.at)
    assert again[0] <= now + timedelta(seconds=0.1), "at most one interval late"
    assert conforms(happened + again, 10, 5)
    assert again[-1] < starts[-1] + timedelta(seconds=0.6), "not behind the lost reservations (2.1 s more)"
    calm = reservations_lost(pool, again[-1] + timedelta(seconds=1))
    assert calm.keys == pool.keys, "a bucket with nothing reserved ahead is kept as it is"


def conforms(starts: list[datetime], per_second: int, burst: int) -> bool:
    """No window of any length holds more starts than burst + rate x its length (to a microsecond: the times are
    floats)."""
    times = sorted(s.timestamp() for s in starts)
    for i, first in enumerate(times):
        for j in range(i, len(times)):
            if j - i + 1 > burst + per_second * (times[j] - first) + 1e-6:
                return False
    return True


def test_bad_input_is_refused_where_it_is_given() -> None:
    for text in ("fast", "0/s", "5/0s", "5/w"):
        with pytest.raises(LimitInputError):
            parse_rate(text)
    assert parse_rate("5/10s") == Rate(5, 10.0, 5)
    with pytest.raises(LimitInputError):
        adjust(empty_pool(LimitSpec("l", concurrency=1), "k"), Adjustment("set", "k", total=3), T0)
    with pytest.raises(LimitInputError):
        adjust(empty_pool(LimitSpec("l", concurrency=1), "k"), Adjustment("set", "k"), T0)
