"""Group commit: the writes of one run inside one process share the run's turn, and one transaction.

Every write appends at the run head's ``seq`` (allocated at commit, conditioned on the head as the writer knew
it), so two writers of one run can never both win one attempt. Inside one process they do not race each other
through DynamoDB: each write queues for its run (``RunTurns``), and whoever finds the run idle commits
everything queued for it that may share one transaction — a *group* — while the others wait for their answers;
what queues meanwhile forms the next group (or joins this one while it backs off). A wide fan-out finishing in
one container (many step results at once) so costs one transaction per round trip, not one per result.

What may share a transaction: plain out-of-band writes (``events.create`` and non-atomic ``create_batch``) of the
event types in ``GROUPABLE``, at most ``MAX_GROUP_EVENTS`` events, never two writes of one entity (a transaction
names an item once, and their order would be decided by the group). Fenced (in-band), atomic, stamped and
``expect_seq`` writes, and the run-level events, commit alone. Each member keeps its own conditions (its entity
operations, its run-status requirement) and gets its own answer: a refused member gets its error and the others
land; a member is failed whole only where its request is (a single event, an atomic batch).

Contention between processes is settled at the commit. A writer that loses (the head's ``seq`` condition
failed, and the cancellation's ALL_OLD head says how far the run moved) learns from it (``Contention``): how many
commits others landed while it tried (slots moved over its own group's size) and how its recent attempts fared
set a per-run level, doubled on a loss and lowered on a win, jittered and bounded (``MAX_BACKOFF``). On a calm
run a first loss is retried at once from the ALL_OLD head; on a contended one the writer waits by the level, and
so does a winner before its next commit (else its fresh knowledge would win again and again and starve the
others), so the processes racing one run settle into taking turns, attempts per commit near 1, while their groups
grow. A writer that waited longer than a round trip re-reads the head (one consistent read, far cheaper than a
cancelled transaction) instead of retrying on what it knew before waiting, which others have made stale since;
when that read shows nobody else wrote meanwhile, it stops standing back.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter, OrderedDict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from itertools import count
from typing import Any

from ...world.entities import ResolveData
from ...world.events import BatchEventOutcome, CreateEventRequest, HookReceivedData
from ..dynamodb.items import Item
from .plan import Plan

MAX_GROUP_EVENTS = 40
"""Events in one group commit: the batch limit (each event is an event and at most two other items, so a
group's transaction stays under DynamoDB's 100 items)."""

GROUPABLE = frozenset({"step_created", "step_started", "step_completed", "step_failed", "step_retrying",
                       "wait_created", "wait_completed", "hook_received"})
"""Event types that may share a transaction with other writers' events: each touches the run head's counters
and one entity of its own (and a resume marker), never the run's status or a hook token."""

MAX_BACKOFF = 0.25
"""The longest a writer waits between two attempts at one commit (seconds)."""

_unit_ids = count()


@dataclass
class Unit:
    """One or two requests that write together: an event, or step_created + step_started (born running).
    ``index`` is unique in the process: it names the unit's operations in a transaction shared with others."""

    reqs: list[CreateEventRequest]
    stored: Any = None
    expiry: int | None = None  # the expiry class (days) the stored value's S3 object was tagged with
    index: int = field(default_factory=lambda: next(_unit_ids))
    sent_slots: list[int] = field(default_factory=list)
    """The slots of its events in every transaction sent with it: after a failure without an answer, one of
    them may hold it."""
    entity: Item | None = None
    entity_stale: bool = True
    entity_cached: bool = False  # ``entity`` came from this process's cache, not a read
    entity_read: bool = False  # the cache was refused once for this write: read from now on
    token_owner: str | None = None
    plan: Plan | None = None
    open_after: int | None = None  # the run's open steps right after this unit, when the head was known

    @property
    def req(self) -> CreateEventRequest:
        return self.reqs[0]

    @property
    def entity_ref(self) -> tuple[str, str]:
        return self.req.event_type.split("_")[0], self.req.correlation_id or ""


@dataclass
class Committed:
    """What a member needs to render its answer after the run's turn: the head after the commit (None when
    the commit was not conditioned on a head this process knew), the events the commit wrote by slot, and for a
    no-op the head it was decided on."""

    head: Item | None
    known: dict[int, Any]
    seq_in_band: int | None = None
    noop_head: Item | None = None
    new_seq: int | None = None
    now: str | None = None


@dataclass
class Member:
    """One request (``events.create`` or ``create_batch``) waiting for, or in, a commit of its run."""

    units: list[Unit]
    event_count: int | None = None
    in_band: bool = False
    expected: int | None = None
    resolve: ResolveData = "all"
    patient: bool = False
    atomic: bool = False
    stamp: str | None = None
    expect_seq: int | None = None
    single: bool = False
    pre_head: Item | None = None  # the run head read before the turn, with the entities
    started: float | None = None  # when it was first taken into a commit (its deadline counts from there)
    attempts: int = 0
    outcomes: dict[int, BatchEventOutcome] = field(default_factory=dict)  # per unit index, when decided
    paired: dict[int, BatchEventOutcome] = field(default_factory=dict)  # a born pair's step_created, by position
    committed: Committed | None = None
    future: asyncio.Future[Committed] | None = None

    @property
    def strict(self) -> bool:
        """A refusal fails the whole request (raised), instead of being answered per event."""
        return self.single or self.atomic

    @property
    def groupable(self) -> bool:
        return (not self.in_band and not self.atomic and self.stamp is None and self.expect_seq is None
                and all(r.event_type in GROUPABLE for u in self.units for r in u.reqs))

    @property
    def events(self) -> int:
        return sum(len(u.reqs) for u in self.units)

    @property
    def refs(self) -> set[tuple[str, str]]:
        """The items only one member of a group may write: its entities, and the marker of a ``resumeOnce`` id
        (``hook_plans``: two hooks' writes of one id are two operations on one item)."""
        refs = {u.entity_ref for u in self.units}
        for unit in self.units:
            data = unit.req.event_data
            if isinstance(data, HookReceivedData) and data.resume_once and data.resume_id is not None:
                refs.add(("resume-once", data.resume_id))
        return refs

    @property
    def settled(self) -> bool:
        return self.future is None or self.future.done()

    def out_of_time(self, now: float, normal: float, patient: float) -> bool:
        """True once it has lost at least one attempt and its time since it was first taken is over."""
        if self.started is None:
            self.started = now
        return self.attempts > 0 and now >= self.started + (patient if self.patient else normal)

    def fail(self, error: BaseException) -> None:
        if self.future is not None and not self.future.done():
            self.future.set_exception(error)

    def answer(self, committed: Committed) -> None:
        self.committed = committed
        if self.future is not None and not self.future.done():
            self.future.set_result(committed)


@dataclass
class WriteStats:
    """What the writer did, for benchmarks and tests: transactions sent and landed, events written, and per
    request how many transactions it was sent in (``attempts``) and how many requests shared each commit."""

    transactions: int = 0
    commits: int = 0
    events: int = 0
    losses: int = 0
    backoff_seconds: float = 0.0
    attempts: Counter[int] = field(default_factory=Counter)
    group_sizes: Counter[int] = field(default_factory=Counter)


class RunTurns:
    """Per-run queues of writes waiting for the run's turn in this process. The first write to find a run idle
    starts a drain (a task of its own, so one caller's cancellation does not interrupt the others' commit) that
    commits groups until the queue is empty."""

    def __init__(self, commit: Callable[[str, list[Member]], Awaitable[None]]) -> None:
        self._commit = commit
        self._queues: dict[str, deque[Member]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def submit(self, run_id: str, member: Member) -> Committed:
        loop = asyncio.get_running_loop()
        member.future = loop.create_future()
        queue = self._queues.get(run_id)
        if queue is None:
            queue = self._queues[run_id] = deque()
            task = loop.create_task(self._drain(run_id, queue), name=f"awsworld-commit-{run_id}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        queue.append(member)
        return await member.future

    def busy(self, run_id: str) -> bool:
        return run_id in self._queues

    async def _drain(self, run_id: str, queue: deque[Member]) -> None:
        try:
            while queue:
                group = self._take(queue)
                if not group:
                    continue
                try:
                    await self._commit(run_id, group)
                except BaseException as error:  # a bug or a cancelled task: no member may wait forever
                    for member in group:
                        if isinstance(error, asyncio.CancelledError):
                            if member.future is not None:
                                member.future.cancel()
                        else:
                            member.fail(error)
                    if isinstance(error, asyncio.CancelledError):
                        raise
        finally:
            if self._queues.get(run_id) is queue:
                del self._queues[run_id]
            for member in queue:  # only when cancelled
                if member.future is not None:
                    member.future.cancel()

    def _take(self, queue: deque[Member]) -> list[Member]:
        while queue and queue[0].settled:
            queue.popleft()  # its caller stopped waiting before its turn came: write nothing
        if not queue:
            return []
        group = [queue.popleft()]
        if group[0].groupable:
            self.absorb(queue, group)
        return group

    def absorb_for(self, run_id: str, group: list[Member]) -> None:
        """Let writes queued since ``group`` was formed join it (it has not landed yet)."""
        queue = self._queues.get(run_id)
        if queue and group and group[0].groupable:
            self.absorb(queue, group)

    @staticmethod
    def absorb(queue: deque[Member], group: list[Member]) -> None:
        live = [m for m in group if not m.settled]
        events = sum(m.events for m in live)
        refs: set[tuple[str, str]] = set().union(*(m.refs for m in live)) if live else set()
        kept: deque[Member] = deque()
        while queue:
            member = queue.popleft()
            if member.settled:
                continue
            if member.groupable and events + member.events <= MAX_GROUP_EVENTS and not refs & member.refs:
                group.append(member)
                events += member.events
                refs |= member.refs
            else:
                kept.append(member)
        queue.extend(kept)

    def requeue(self, run_id: str, member: Member) -> None:
        """Put a member taken into a group that turned out too large back at the head of its run's queue."""
        queue = self._queues.get(run_id)
        if queue is None:
            member.fail(RuntimeError("requeued outside a drain"))
        else:
            queue.appendleft(member)


@dataclass
class Contention:
    """What this process has learned about the run's other writers (see the module docstring)."""

    rtt: float = 0.02  # a transaction's round trip, smoothed
    level: float = 0.0  # how long to stand back between commits (seconds): raised on losses, lowered on wins
    seq: int | None = None  # the run's seq when this process last committed or lost

    def took(self, seconds: float) -> None:
        self.rtt += 0.2 * (min(seconds, 1.0) - self.rtt)

    def won(self, seq: int) -> None:
        # With doubling on a loss, this settles where about one attempt in five loses.
        self.seq = seq
        self.level = self.level * 0.84 if self.level > self.rtt / 4 else 0.0

    def lost(self, seq: int, moved: int, sent_events: int) -> float:
        """The wait before the next attempt after a lost race: ``moved`` slots were taken by others while this
        process tried to land ``sent_events`` (about as many per commit as they land, under the same load)."""
        self.seq = seq
        others = max(1.0, moved / max(1, sent_events))
        self.level = min(MAX_BACKOFF, max(self.level * 2, others * self.rtt))
        return self._jittered()

    def refreshed(self, seq: int) -> None:
        """The head was read after standing back: if nobody else wrote the run meanwhile, stop standing back."""
        if seq == self.seq:
            self.level = 0.0
        self.seq = seq

    def conflicted(self) -> float:
        """The wait after a transaction conflict or throttling: no head came back."""
        self.level = min(MAX_BACKOFF, max(self.level * 2, self.rtt))
        return self._jittered()

    def pace(self) -> float:
        """The wait before a new commit's first attempt: on a contended run a writer that just won stands back
        too (its next commit would otherwise win on fresh knowledge again and again, starving the others)."""
        return self._jittered() if self.level > 0 else 0.0

    def _jittered(self) -> float:
        return min(MAX_BACKOFF, random.uniform(0.5, 1.5) * self.level)


class ContentionByRun:
    """A bounded map of run id -> Contention (the runs this process wrote recently)."""

    def __init__(self, kept: int) -> None:
        self._kept = kept
        self._runs: OrderedDict[str, Contention] = OrderedDict()

    def __call__(self, run_id: str) -> Contention:
        found = self._runs.get(run_id)
        if found is None:
            found = self._runs[run_id] = Contention()
            while len(self._runs) > self._kept:
                self._runs.popitem(last=False)
        else:
            self._runs.move_to_end(run_id)
        return found
