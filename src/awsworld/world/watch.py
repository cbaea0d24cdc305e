"""When a run must next show activity: the due time the watchdog finds stranded runs by.

Every message that moves a run can be lost (deleted, purged, redriven under a new id, a queue that was
recreated, an ``awsworld dev --state`` restart). So every run that is not finished carries a *due* time: the
moment by which, if its messages are alive, something will have written to it. A run whose due passes with no
write is woken by the watchdog (``_worker.watchdog``), and the wake's flow recovers whatever the lost message
stood for (it takes over steps whose lease ended, re-queues steps that never started, completes due waits).

The due lives on the run head, in the key of a sparse index the watchdog queries (never a scan): each World
keeps the same rule (``commit_due``), written once here.

- Every commit to a run that leaves it unfinished sets its due to ``now + HORIZON`` (5 minutes; later if a
  step started in it holds a longer lease): the longest a healthy delivery, queued or running, goes without
  a write. A finished run has none (it leaves the index).
- A flow that suspends knows better (a sleep of a day, a retry in an hour, only hooks to wait for: the end of
  the run's lifetime, ``world/rules/lifetime.py``); when the due its last write left differs from that, it
  corrects it with one small write (``_worker.inline_loop``). A run's due is therefore exact whenever it rests,
  and conservative while it moves.
- A timer further away than the World's queue carries one message (``WatchAPI.reach_seconds``: SQS's 900 s
  delay cap) gets no message at all: a message would have to hop (re-sent by a delivery every 15 minutes, 2,880
  times for a 30-day sleep). The flow leaves no message for it (``beyond_reach``) and the resting run's due is
  ``lead`` before the timer instead (``timer_due``): the watchdog's wake then comes when the timer is within one
  message's reach, and its flow sends the exact delayed message. A lost wake is the watchdog's as any other
  (it snoozed the run first: it comes back a horizon later), so the promise holds.
- A parked run (``_engine.parking``: its code diverged or is missing) comes back every ``AWSWORLD_PARK_SECONDS``,
  an hour: beyond one message's reach too, so the flow sends no message for it either, and its due is that hour
  itself (``park_due``): the watchdog's wake is its redelivery, one delivery an hour instead of four.
- The watchdog pushes the due of a run it wakes forward, doubling with each wake that finds the run still
  due (``snooze_due``), so a run that cannot progress (code missing, a message the dedup keys hold back) is
  woken ever more rarely rather than every tick; never past the end of the run's lifetime, so a run waiting
  for a concurrency slot is ended there like any other.

Dues are kept rounded up to ``BUCKET`` (a minute) so the index key of a busy run changes at most once a
bucket: on DynamoDB only a write that changes an index key is billed on the index (two writes: delete and
put), so a run's writes during one minute cost the index nothing. Runs are spread over ``SHARDS`` index
partitions (a hash of the run id): one hot partition would cap the whole table's write rate.
"""

from __future__ import annotations

import functools
import math
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from ..settings import SETTINGS, Settings

HORIZON_ENV = Settings.watch_horizon_seconds.env
DEFAULT_HORIZON_SECONDS = Settings.watch_horizon_seconds.default
BUCKET_ENV = Settings.watch_bucket_seconds.env
DEFAULT_BUCKET_SECONDS = Settings.watch_bucket_seconds.default
SHARDS = 8
MAX_SNOOZE_SECONDS = 24 * 3600.0
"""The longest the watchdog waits before waking a run that did not move after its last wake."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def horizon_seconds() -> float:
    return SETTINGS.watch_horizon_seconds


def horizon() -> timedelta:
    return timedelta(seconds=horizon_seconds())


def bucket_seconds() -> float:
    return SETTINGS.watch_bucket_seconds


def due_key(moment: datetime) -> str:
    """A due as the index stores it: rounded up to the bucket, fixed-width UTC text (sorts as it compares)."""
    size = bucket_seconds()
    return _bucket_key(math.ceil(round((moment - _EPOCH).total_seconds() / size, 6)), size)


@functools.lru_cache(maxsize=256)
def _bucket_key(buckets: int, size: float) -> str:
    """The key of the ``buckets``-th bucket since the epoch. Kept: every commit sets a due, a run's commits within
    one bucket round to the same key, and formatting a time cost more than the rest of an in-memory commit's
    bookkeeping."""
    return now_key(_EPOCH + timedelta(seconds=buckets * size))


def now_key(now: datetime) -> str:
    """``now`` as index text, not rounded: every due key at or below it is due."""
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def parse_key(key: str) -> datetime:
    return datetime.fromisoformat(key.replace("Z", "+00:00"))


def shard_of(run_id: str) -> str:
    """The index partition a run's due lives in."""
    return str(zlib.crc32(run_id.encode("utf-8")) % SHARDS)


def commit_due(now: datetime, *, ends_run: bool, leases: Iterable[datetime] = ()) -> datetime | None:
    """The due a commit leaves on its run: none once the run ends, else ``now + HORIZON`` or the longest
    lease of a step it started, whichever is later."""
    if ends_run:
        return None
    return max([now + horizon(), *leases])


def quiet_due(timers: Iterable[datetime]) -> datetime | None:
    """The due of a run that rests with nothing in flight: its soonest timer (a wait's end, a retry's or a
    poll's time) plus the horizon its wake-up's delivery may take; none when it waits on hooks alone."""
    soonest = min(timers, default=None)
    return None if soonest is None else soonest + horizon()


def beyond_reach(watch: WatchAPI | None, delay_seconds: float) -> bool:
    """Whether a flow leaves the message for a timer ``delay_seconds`` away unsent: its World's queue cannot carry
    it in one message (``WatchAPI.reach_seconds``) and the watchdog wakes the run before it instead."""
    reach = None if watch is None else watch.reach_seconds
    return reach is not None and delay_seconds > reach


def park_due(now: datetime, period_seconds: float, watch: WatchAPI | None) -> datetime:
    """The due of a parked run (``_engine.parking``) that rests until it comes back ``period_seconds`` from ``now``
    (``AWSWORLD_PARK_SECONDS``: an hour). Beyond one message's reach (``beyond_reach``) no message brings it: the
    due is that moment itself, and the watchdog's wake then is the redelivery (a parked run's redelivery only
    replays it, so a wake does all a message would). Within reach its message does, and the due is a horizon past
    it (``quiet_due``): the watchdog wakes the run only if that message is lost."""
    back = now + timedelta(seconds=period_seconds)
    return back if beyond_reach(watch, period_seconds) else back + horizon()


def lead_seconds(reach: float) -> float:
    """How long before a timer beyond reach the watchdog wakes its run: two thirds of the reach (10 minutes of
    SQS's 15), so the tick's period (1 minute; ``WatchdogRate`` up to 5) and the due's bucket (1 minute) still land
    the wake within one message's reach of the timer."""
    return reach * 2 / 3


def timer_due(timers: Iterable[datetime], now: datetime, reach: float | None, *,
              checks: Iterable[datetime] = ()) -> datetime | None:
    """The due of a resting run whose timers (waits, retries, polls: each brought by a message the flow sent, or
    left unsent as ``beyond_reach``) and ``checks`` (times to look at it that no message brings: a child's report)
    are these: a check or a timer within reach, plus the horizon (``quiet_due``); a timer beyond reach, ``lead``
    before it (its wake sends the message). The soonest of them; none for a run on hooks alone."""
    dues: list[datetime] = []
    for timer in timers:
        # (a fifteenth of the reach, a minute of SQS's 15, is the slack for the moment between the flow's send and
        # its rest: a timer left without a message then still counts as far a moment later)
        far = reach is not None and (timer - now).total_seconds() > reach * 14 / 15
        dues.append(timer - timedelta(seconds=lead_seconds(reach)) if far and reach is not None
                    else timer + horizon())
    dues += [check + horizon() for check in checks]
    return min(dues, default=None)


def snooze_due(now: datetime, wakes: int, lifetime_end: datetime | None = None) -> datetime:
    """The due the watchdog gives a run it wakes for the ``wakes + 1``-th time in a row: the doubling backoff, but
    never past the end of the run's lifetime (``world/rules/lifetime.py``) while that end is still ahead. A run
    that cannot rest (a pending run waiting for a concurrency slot, a step waiting for one) has no exact due of its
    own (``_worker/recovery.py``), only these snoozes: uncapped, a day's snooze would end it up to a day late. Once
    the end has passed the backoff applies alone (the wake at the end ends the run; one that could not is not woken
    every tick)."""
    backoff = now + timedelta(seconds=min(MAX_SNOOZE_SECONDS, horizon_seconds() * 2 ** min(wakes, 20)))
    if lifetime_end is not None and now < lifetime_end < backoff:
        return lifetime_end
    return backoff


@dataclass(frozen=True)
class DueRun:
    """A run the index says is due: the watchdog wakes it (and snoozes it first, on ``due``)."""

    run_id: str
    workflow_name: str
    due: str  # the index key found (a snooze is conditioned on it: a run that moved since is left alone)
    wakes: int = 0  # watchdog wakes in a row that found it still due


class WatchAPI(Protocol):
    """A World's watch index (``world.watch``): awsworld's extension; a World without it has no watchdog."""

    @property
    def reach_seconds(self) -> float | None:
        """The longest delay the World's queue carries in one message (None: any): a flow sends no message for a
        timer further away (``beyond_reach``), and the run's due brings the watchdog's wake before it."""
        ...

    async def due(self, now: datetime, *, limit: int = 1000) -> list[DueRun]:
        """Runs whose due is at or before ``now``, soonest first, at most ``limit``."""
        ...

    async def snooze(self, run: DueRun, now: datetime) -> datetime | None:
        """Push a due run's due forward (``snooze_due``) if it is still ``run.due``: the new due, or None when
        the run moved since it was found (a write set another due, or it ended)."""
        ...

    async def correct(self, run_id: str, due: datetime | None, *, seq: int) -> bool:
        """Set a resting run's due (None: take it out of the index) if its log still holds ``seq`` events and
        it has not ended; False when it moved on (the newer write's due stands)."""
        ...

