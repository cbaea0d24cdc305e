"""What one flow delivery holds, in two collaborators the loop (``inline_loop.Flow``) and its helpers share:
the run's log as the delivery reads and writes it (``FlowLog``: every write in-band, fenced with the run's in-band
count) and which open steps are this delivery's to run (``StepClaims``); and the small records around them.
"""

from __future__ import annotations

import gc
import logging
import os
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .._engine.execution import LogGapError, WorkflowExecution
from .._engine.ops import StepOp
from ..world.clock import clock_of
from ..world.events import BatchEventOutcome, Event
from ..world.messages import FlowMessage
from ..world.pages import collect_pages
from ..world.protocol import World
from .recovery import taken_over
from .step_runner import StepEnd

MAX_DIVERGENT_RECOVERIES = 3

log = logging.getLogger("awsworld.flow")
BATCH = 39  # declarations per create_batch: with a born-running pair that is the World's cap of 40 events


@dataclass
class FlowStats:
    iterations: int = 0
    inline_steps: int = 0
    queued_steps: int = 0
    replays: int = 0
    ends_with_next: int = 0  # inline step outcomes shown to the workflow first, then written by the flow's next write
    fallbacks: int = 0  # such writes that failed: the outcome was recorded the old way
    resumed: bool = False  # went on from a replay an earlier delivery kept (``KeptReplays``), not the whole log
    handed_wakes: int = 0  # wakes of step deliveries this flow settled for them (``HandedWakes``)


KEPT_EVENTS = 20_000
"""Events the replays a worker keeps between deliveries may hold in all (``KeptReplays``): a bound on memory."""
KEPT_MEMORY_SHARE = 0.5
"""Of the Lambda function's memory (``AWS_LAMBDA_FUNCTION_MEMORY_SIZE``, MB), the most the process may hold in
resident memory while a worker keeps replays (``KeptReplays``). A kept replay holds its log with every value in
it, and the event cap alone does not bound bytes: 200 items of 100 KB kept 69 KB an event (5 such runs held
207 MB), so 20,000 kept events could pass the flow function's 1,024 MB and kill it. Above the share, the worker
drops what it kept and keeps nothing: its deliveries replay from the log, as they did before replays were kept."""


def resident_bytes() -> int | None:
    """The process's resident memory now (Linux's ``/proc/self/statm``, as on Lambda); None where it cannot be
    read (macOS): a peak (``getrusage``) never comes down, so it would stop keeping for good after one."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def lambda_memory_budget() -> int | None:
    """``KEPT_MEMORY_SHARE`` of the Lambda function's memory in bytes; None off Lambda (``dev``, the local poller,
    the test environment), where only ``KEPT_EVENTS`` bounds what is kept."""
    configured = os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "")
    return int(int(configured) * 1024 * 1024 * KEPT_MEMORY_SHARE) if configured.isdigit() else None


class KeptReplays:
    """Replays of suspended runs, kept by the worker between deliveries (``FlowSettings.kept``), so the next
    delivery for the run in this process goes on from where the last one stopped: it reads the events past the
    kept cursor and replays those, not the whole log again. A bounded map is the case it is for: every item's end
    wakes the workflow (``authoring/batch.py``, ``_wakes_on``), so a run of N items is N deliveries that each
    replayed the whole log, O(N^2) events read and applied; kept, each reads and applies what is new.

    Sound because a log only grows (nothing rewrites or drops an event of a live run) and a replay is a function
    of the log: an execution that has applied the first ``k`` events is what a fresh replay of those ``k`` events
    is, the state one delivery already carries from write to write (``_engine/execution.py``). Only a replay at
    rest is kept (the flow suspended: nothing held to write, no failure, nothing refused), and a delivery takes it
    out while it works on it (``take``), so two deliveries never share one. Evicted oldest first past
    ``max_events`` in all, and all dropped while the process's resident memory (``resident``) is above
    ``memory_budget`` bytes (``KEPT_MEMORY_SHARE``)."""

    def __init__(self, max_events: int = KEPT_EVENTS, *, memory_budget: int | None = None,
                 resident: Callable[[], int | None] = resident_bytes) -> None:
        self.max_events = max_events
        self.memory_budget = lambda_memory_budget() if memory_budget is None else memory_budget
        self.resident = resident
        self._kept: OrderedDict[str, tuple[WorkflowExecution, str | None]] = OrderedDict()
        self._events = 0
        self.resumed = 0  # deliveries that went on from a kept replay (a figure for tests and benchmarks)
        self.refused_for_memory = 0  # replays not kept because the process held too much (a figure for tests)

    def take(self, run_id: str) -> tuple[WorkflowExecution, str | None] | None:
        kept = self._kept.pop(run_id, None)
        if kept is not None:
            self._events -= len(kept[0].log)
        return kept

    def keep(self, run_id: str, execution: WorkflowExecution, cursor: str | None) -> None:
        """Keep ``execution`` (read up to ``cursor``) for the run's next delivery. Of two (deliveries of the run
        that worked at once), the one that has read further is kept."""
        earlier = self.take(run_id)
        if earlier is not None:
            if len(earlier[0].log) > len(execution.log):
                earlier, (execution, cursor) = (execution, cursor), earlier
            earlier[0].close()
        if len(execution.log) > self.max_events or self._over_memory():
            execution.close()
            return
        self._kept[run_id] = (execution, cursor)
        self._events += len(execution.log)
        while self._events > self.max_events:
            _, (oldest, _) = self._kept.popitem(last=False)
            self._events -= len(oldest.log)
            oldest.close()

    def __len__(self) -> int:
        return len(self._kept)

    def _over_memory(self) -> bool:
        """Whether the process holds more than the budget; when it does, what was kept is dropped (and collected:
        a replay's tasks and futures refer to each other) so that the delivery in hand has the room."""
        if self.memory_budget is None:
            return False
        resident = self.resident()
        if resident is None or resident <= self.memory_budget:
            return False
        self.refused_for_memory += 1
        if self._kept:
            log.info("dropping %d kept replay(s): the process holds %d MB, over its budget of %d MB",
                     len(self._kept), resident >> 20, self.memory_budget >> 20)
            while self._kept:
                _, (oldest, _) = self._kept.popitem(last=False)
                oldest.close()
            self._events = 0
            gc.collect()
        return True


class HandedWakes:
    """Wakes a step delivery hands to a flow of the same run already working in this worker, rather than
    replaying the run itself (``dispatch.Worker._step``). A bounded map's every item end wakes the workflow; run
    side by side, each of those flows read the whole log and all but one had their first write superseded by
    another's, for one follow-up flow more. Handed over, one flow settles them all with one read of the log's
    tail.

    A flow is open to wakes (``open``) while every wake handed to it is sure to be seen: it reads the log's tail
    and advances the workflow once more before it suspends or runs a step inline (``handed``, which closes it
    when nothing was handed, in the same synchronous call: no wake lands in between). It closes before any other
    way out (a superseded flow before it queues its follow-up; an error before its message is redelivered), each
    of which leaves a later replay to come, and a step's end is recorded before it is handed. While a flow runs a
    step inline it is closed, so a wake never waits for another step's body. One flow per run at a time."""

    def __init__(self) -> None:
        self._open: dict[str, bool] = {}  # run id -> a wake was handed since the flow last looked

    def open(self, run_id: str) -> bool:
        """Open the run to wakes for the calling flow; False when another flow of the run holds it."""
        if run_id in self._open:
            return False
        self._open[run_id] = False
        return True

    def hand(self, run_id: str) -> bool:
        """Hand a wake to the run's open flow: False when none is open (the caller continues the run itself)."""
        if run_id not in self._open:
            return False
        self._open[run_id] = True
        return True

    def handed(self, run_id: str) -> bool:
        """Whether a wake was handed since the last look (the flag is cleared, the run stays open); when not,
        the run is closed to wakes."""
        if self._open.get(run_id):
            self._open[run_id] = False
            return True
        self._open.pop(run_id, None)
        return False

    def close(self, run_id: str) -> None:
        self._open.pop(run_id, None)


@dataclass
class FlowSettings:
    max_events: int = 10_000
    deployment: str | None = None  # the deployment this worker's code is (``_deployments.pins``); None: no pinning
    kept: KeptReplays = field(default_factory=KeptReplays)  # one per worker: its flows share it
    wakes: HandedWakes = field(default_factory=HandedWakes)  # one per worker too


@dataclass
class PendingOutcome:
    """An inline step's outcome the workflow has consumed (a provisional event at slot ``seq + 1``, stamped
    ``at``) and the log does not hold yet: the flow's next write carries it, landing right after ``seq``
    events."""

    step: StepOp
    end: StepEnd
    seq: int
    at: datetime


class FlowLog:
    """The run's log as one delivery holds it: read in pages from its cursor, replayed by ``execution`` (None
    until the delivery has read it), and written in-band (every write expects the in-band count the delivery last
    saw, so a write another flow superseded is refused with ``InBandSupersededError``)."""

    def __init__(self, world: World, run_id: str) -> None:
        self.world = world
        self.run_id = run_id
        self.cursor: str | None = None
        self.seq_in_band = 0
        self.seen: int | None = None  # the log's length as the last read's first page found it (its snapshot)
        self.execution: WorkflowExecution | None = None
        self.held = 0
        """Events the replay held before this delivery read on (``resume``): none of them ends the run (an ended
        run's replay is never kept), so what a delivery checks of the log it checks past them only."""

    def replay(self) -> WorkflowExecution:
        """The execution replaying the log (only once the delivery has read it)."""
        assert self.execution is not None
        return self.execution

    def forget(self) -> None:
        """Drop the replay, the cursor and the in-band count: the next read loads the log afresh."""
        if self.execution is not None:
            self.execution.close()
        self.execution, self.cursor, self.seq_in_band = None, None, 0

    async def load_all(self) -> list[Event]:
        """Every event past the cursor (the whole log the first time, with its in-band count)."""
        return await self._load(counters=self.cursor is None)

    async def resume(self, execution: WorkflowExecution, cursor: str | None) -> bool:
        """Go on with a replay an earlier delivery kept (``KeptReplays``): read the events past its cursor, with
        the log's in-band count as a first read takes it, and append them. False (nothing held, the replay
        closed) when they do not follow on from it; the caller then reads the log afresh."""
        self.execution, self.cursor = execution, cursor
        held = self.held = len(execution.log)
        try:
            events = await self._load(counters=True)
            execution.append(events)
        except LogGapError:
            self.forget()
            return False
        if self.seen is not None and self.seen < held:  # (a log never shrinks: not this run's replay)
            self.forget()
            return False
        return True

    async def read_without_values(self) -> list[Event]:
        """The whole log with no value read (``resolve_data="none"``), this log's cursor and counts left alone: what
        the flow of an ended run whose values cannot be read does its end's work from (``Flow._run``)."""
        return await collect_pages(lambda cursor: self.world.events.list(self.run_id, cursor=cursor,
                                                                        resolve_data="none"))

    async def _load(self, *, counters: bool) -> list[Event]:
        """The events past the cursor; ``counters``: take the in-band count from the first page's snapshot
        (read before its events: every in-band write it counts is among them)."""
        events: list[Event] = []
        cursor = self.cursor
        first = True
        self.seen = None
        while True:
            page = await self.world.events.list(self.run_id, cursor=cursor, resolve_data="skip-step-inputs")
            if first and page.snapshot is not None:
                self.seen = page.snapshot.seq
                if counters:
                    self.seq_in_band = page.snapshot.seq_in_band
            first = False
            events.extend(page.data)
            cursor = page.cursor or cursor
            if not page.has_more:
                break
        self.cursor = cursor
        return events

    async def reload_tail(self) -> None:
        events = await self.load_all()
        assert self.execution is not None
        self.execution.append(events)

    async def append(self, events: list[Event]) -> None:
        assert self.execution is not None  # (an attribute, not ``replay()``: this runs on every write)
        try:
            self.execution.append(sorted(events, key=lambda e: e.slot))
        except LogGapError:
            await self.reload_tail()

    async def write(self, event: dict[str, Any]) -> None:
        """One event, in-band; what landed is appended to the replay."""
        assert self.execution is not None
        result = await self.world.events.create(self.run_id, event, event_count=len(self.execution.log),
                                                in_band=True, expected_seq_in_band=self.seq_in_band,
                                                resolve_data="skip-step-inputs")
        if result.seq_in_band is not None:
            self.seq_in_band = result.seq_in_band
        await self.append([*result.events, *([result.event] if result.event else [])])

    async def write_batch(self, requests: list[dict[str, Any]], *, atomic: bool = False, stamp: datetime | None = None,
                          expect_seq: int | None = None) -> list[BatchEventOutcome]:
        """Several events in one in-band ``create_batch`` (``atomic``, ``stamp``, ``expect_seq``: its all-or-nothing,
        stamped form); their outcomes. Appending what landed is the caller's: it knows which op each outcome is."""
        result = await self.world.events.create_batch(self.run_id, requests, in_band=True,
                                                      expected_seq_in_band=self.seq_in_band,
                                                      resolve_data="skip-step-inputs", atomic=atomic, stamp=stamp,
                                                      expect_seq=expect_seq)
        if result.seq_in_band is not None:
            self.seq_in_band = result.seq_in_band
        return result.results

    def set_in_band(self, count: int) -> None:
        self.seq_in_band = count


class StepClaims:
    """Which open steps are this delivery's to run: those it declared (``owned``), those it declared born
    running (``claimed``: started, to run here), those an earlier delivery of the same message started (its
    ``message_id``), and those whose lease passed elsewhere (``recovery.taken_over``), less the take-overs the World
    refused (``refused``: still leased)."""

    def __init__(self, world: World, message: FlowMessage, message_id: str | None,
                 sent_at: datetime | None = None) -> None:
        self.world = world
        self.message = message
        self.message_id = message_id
        self.sent_at = sent_at  # when the delivery's message was sent (a restart's wake: ``recovery.taken_over``)
        self.owned: set[str] = set()
        self.claimed: dict[str, Any] = {}
        self.taken: dict[str, Any] = {}  # a claimed step's slot and token of its limit (``step_limits.Taken``)
        self.refused: set[str] = set()
        self.handed: set[str] = set()  # ``<step id>:<attempt>`` of take-overs queued to a message of their own

    def holds_steps(self, execution: WorkflowExecution | None) -> bool:
        """Steps this delivery started (or an earlier delivery of this message did) and has not finished."""
        if self.claimed:
            return True
        return execution is not None and any(self.mine(s) for s in execution.pending_steps())

    def mine(self, step: StepOp) -> bool:
        """Started by an earlier delivery of this same message (which stopped mid-step): ours to run again."""
        return bool(self.message_id) and step.started and step.owner == self.message_id

    def taken_over(self, step: StepOp) -> bool:
        """Started by another delivery whose lease has passed (its message is lost): ours to run (``recovery``),
        unless this delivery queued that attempt to a message of its own already (``hand``)."""
        return (step.id not in self.claimed and step.id not in self.refused
                and f"{step.id}:{step.attempt}" not in self.handed
                and taken_over(step, self.message, self.message_id, clock_of(self.world).now(), self.sent_at))

    def hand(self, steps: Sequence[StepOp]) -> None:
        """``steps`` were queued, each to a message of its own: the take-overs among them are those messages' now.
        A restart's wake (``recovery.taken_over``) otherwise picked one of them to run inline at its next turn, if
        its message had not started it yet (its attempt still the dead one, started before the wake): the World let
        one of the two start it, so the other was a refused write or a duplicate delivery."""
        self.handed.update(f"{s.id}:{s.attempt}" for s in steps if s.started)

    def runnable(self, execution: WorkflowExecution) -> list[StepOp]:
        now = clock_of(self.world).now()
        return [s for s in execution.pending_steps()
                if (not s.started or self.mine(s) or s.id in self.claimed or self.taken_over(s))
                and (s.retry_after is None or s.retry_after <= now)]

    @staticmethod
    def beside_wakes(execution: WorkflowExecution, step: StepOp) -> bool:
        """Whether ``step`` is better queued than run inline: its end wakes the workflow at once (a bounded batch's
        item, ``authoring.runtime.wakes_on``) and other steps of the run are open, whose ends wake it too. A flow
        running a step inline is closed to wakes (``HandedWakes``: no wake waits for a step's body), so each of
        those ends would start a delivery of its own, with no kept replay to go on from (the inline flow holds it):
        a bounded map of 200 items at 20 read 31,040 events (its log holds 603) in 100 flows, 76 of them
        superseded by another's write. Queued, the flow suspends at once, open to the ends handed to it, and the
        next end goes on from its kept replay (399 events read). A step its own queue message brings loses no wake
        either way."""
        return bool(step.wakes_on) and any(other is not step for other in execution.pending_steps())

    def has_inline_work(self, execution: WorkflowExecution) -> bool:
        return any(s.id in self.owned or s.id in self.claimed or self.mine(s) or self.taken_over(s)
                   for s in self.runnable(execution))

    def drop(self, step_id: str) -> None:
        """Never to run here (its end is recorded another way: a cancellation)."""
        self.owned.discard(step_id)
        self.claimed.pop(step_id, None)
