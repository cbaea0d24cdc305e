"""The test environment's stand-in for Lambda: every delivery of a ``MemoryWorld`` runs in this process.

Records go through the same ``Invoker`` and ``DeliveryPath`` as the local poller and the Lambda flow
handler, so a test exercises the code that deploys. Unlike the poller it never polls: it wakes when a message
becomes visible or a delivery ends.

Time skipping: while someone is waiting for a run's outcome (``skipping()``, held by ``Run.result()`` through
the environment, and by ``WorkflowTestEnv.sleep``), and no delivery is running and no message is visible, the
clock jumps to the moment the next message becomes visible (a sleep's wake-up, a retry's back-off) or the next
run's due comes (``world.watch``). Time never jumps while a test is doing something else (resuming a hook,
say), so a workflow racing a hook against a timeout sees the hook; nor, when the test has another wait pending (a
``run.result()`` task), while a wait whose end has come (the run holds the hook) has yet to return to the test.

A wait nothing can end fails instead of hanging: when a test waits for a run (``Run.result()``,
``Run.wait_for_hook()``, a resume's ``wait`` for its hook) and nothing in the environment can move it (no delivery
running or visible, no message, sleep, retry, timeout or schedule due, no watchdog due unless its last one moved a
run (``_next_jump``), and no other wait of the test already satisfied) for ``stall_timeout`` real seconds in a row,
each such wait raises ``RunStalledError`` naming what the run waits on (a hook nobody resumed, a hook token the run
does not hold, a limit's slot another stuck run holds). Any delivery, send or new wait restarts the count, so a test
that resumes the hook from another task in the meantime is not cut off.

The watchdog ticks on the same clock: whenever the soonest due in the World's watch index has come, the driver
runs the tick (``_worker.tick``) before anything else, so a run whose message was lost (a test can delete it
from ``world.memory_queue``) is woken when its due comes, as the stack's minute schedule would wake it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from .._deployments.local_host import LocalHost
from .._memory import MemoryWorld
from .._memory.clock import VirtualClock
from .._worker.delivery import RecordResult
from .._worker.dispatch import Worker
from .._worker.invoker import Invoker, finish_or_cancel
from .._worker.tick import TickFailedError, run_tick
from ..world.queue import DEFAULT_QUEUE_PREFIX

STALL_TIMEOUT = 2.0
"""Real seconds a wait for a run may find nothing in the environment able to move it before it raises
``RunStalledError``: long enough for a test's own task to resume a hook, short against ``Run.result()``'s 60."""


STOP_UNWIND_SECONDS = 1.0
"""How long closing the environment waits for the deliveries it cancelled to unwind (their ``finally`` blocks)."""


class RunStalledError(TimeoutError):
    """A test waited for a run (its end, or a hook) that nothing in the test environment can bring: no delivery
    runs or is due and no sleep, retry or timeout is pending. The message names what the run waits on. A
    ``TimeoutError``, as the wait's own timeout would have raised, only sooner and saying why."""


class Driver:
    def __init__(self, world: MemoryWorld, worker: Worker, clock: VirtualClock, *, time_skipping: bool = True,
                 timeout: float | None = None, prefix: str = DEFAULT_QUEUE_PREFIX,
                 stall_timeout: float | None = STALL_TIMEOUT) -> None:
        self.world = world
        self.stall_timeout = stall_timeout
        self.queue = world.memory_queue
        self.clock = clock
        self.time_skipping = time_skipping
        self.consumer = self.queue.consumer(prefix)
        self._inflight: set[asyncio.Task[RecordResult | None]] = set()
        self.host = LocalHost(self.consumer, self._spawn, timeout=timeout)  # its deployments (``deploy``)
        self.host.deploy(worker)
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._holders: list[_Holder] = []  # the waits that allow time to jump
        self._skip_limit: datetime | None = None  # env.sleep's end: its own skips stop there
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._failure: BaseException | None = None
        self._ticks = 0
        self._tick_again_at: datetime | None = None
        self._watch_progress: int | None = None  # _progress() when time last skipped to a watchdog due alone

    # -- what tests read -------------------------------------------------------------------------------

    @property
    def invoker(self) -> Invoker:
        """The live deployment's: it receives every record (others run what is handed to them)."""
        return self.host.live_invoker

    @property
    def deliveries(self) -> int:
        return self.host.deliveries

    @property
    def results(self) -> list[RecordResult]:
        return self.host.results

    @property
    def busy(self) -> bool:
        """A delivery is running or a message is visible now."""
        return bool(self._inflight) or self.queue.visible_count() > 0

    def next_wake(self) -> datetime | None:
        """When the next message becomes visible or the next watchdog tick is due (None: nothing is
        scheduled)."""
        times = [t for t in (self.queue.next_visible_at(), self._tick_due()) if t is not None]
        return min(times, default=None)

    def _next_jump(self) -> datetime | None:
        """Where time may skip to for a test's wait: ``next_wake``, leaving out the watchdog's next due when its last
        one, skipped to, wrote nothing to any run (``_progress``). A run that waits for what no due brings (a slot
        another run holds until the test resumes its hook) is woken by the watchdog at every due, finds nothing to
        do and is snoozed up to a day: skipping from one such due to the next would run the clock years ahead, and
        every timer with it, while the wait never ends. Ticks still run when time passes their due on its way to a
        message or a schedule."""
        times = [self.queue.next_visible_at(), self.world.schedules.next_due()]
        if self._watch_progress is None or self._watch_progress != self._progress():
            times.append(self.world.watch.next_due(lifetimes=False))  # (a year on: env.sleep() gets there)
        return min((t for t in times if t is not None), default=None)

    def _progress(self) -> int:
        """How much every run has written: their events and the runs themselves (a watchdog wake that moved
        nothing leaves it as it was)."""
        runs = self.world.storage.state.runs
        return len(runs) + sum(run.seq for run in runs.values())

    def _tick_due(self) -> datetime | None:
        """When the tick must next run: the soonest run due (the watchdog) or schedule due (``schedules``)."""
        times = [t for t in (self.world.watch.next_due(), self.world.schedules.next_due()) if t is not None]
        return min(times, default=None)

    @property
    def ticks(self) -> int:
        """Watchdog ticks run so far."""
        return self._ticks

    async def _tick_if_due(self) -> bool:
        """Run the tick when the soonest due has come; True when it ran."""
        due, now = self._tick_due(), self.clock.now()
        if due is None or due > now or (self._tick_again_at is not None and now < self._tick_again_at):
            return False
        self._ticks += 1
        with contextlib.suppress(TickFailedError):  # logged by the tick; its runs are due again later
            await run_tick(self.world)
        # A run the tick could not move (its wake failed) stays due: not again before a second has passed.
        self._tick_again_at = now + timedelta(seconds=1)
        return True

    # -- life ------------------------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="awsworld-test-driver")

    async def stop(self) -> None:
        """Stop receiving and cancel the deliveries still running, at once: nothing reads this environment's runs
        once it closes, and a delivery still running then is one that would not end by itself (a fake's
        ``asyncio.sleep``, a call that never answers, in a step's body; a test that failed while it ran). The
        grace ``awsworld dev`` and ``LocalAWS`` give theirs (``SHUTDOWN_GRACE_SECONDS``) cost every such test 5 s
        at teardown. Waits (a second at most) for the cancelled ones to unwind, so none is left pending on a loop
        that closes."""
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        running = set(self._inflight)
        await finish_or_cancel(running, grace=0)
        if running:
            await asyncio.wait(running, timeout=STOP_UNWIND_SECONDS)

    def wake(self) -> None:
        """Look again now (the clock was moved by hand)."""
        self._wake.set()

    @contextlib.contextmanager
    def skipping(self, *, bounded: bool = False, satisfied: Callable[[], bool] | None = None,
                 stuck: Callable[[], Awaitable[str]] | None = None) -> Iterator[None]:
        """Allow time to jump while inside (a test is waiting for time to pass). ``bounded``: only up to
        ``env.sleep``'s end (a test awaiting a run at the same time lifts the bound). ``satisfied``: what the
        wait is for has happened (the hook exists, say), so time must not jump on its behalf any more: checked
        right before every jump, because the waiter itself may not have run yet to leave. ``stuck``: what to say
        when nothing can satisfy the wait; with it, a stalled wait raises ``RunStalledError`` (module doc)."""
        holder = _Holder(bounded, satisfied, stuck, asyncio.current_task())
        self._holders.append(holder)
        self._wake.set()
        try:
            yield
        except asyncio.CancelledError:
            if holder.stalled is None or holder.task is None:
                raise
            holder.task.uncancel()  # the cancel was this driver's way in, not a cancel of the test
            raise RunStalledError(holder.stalled) from None
        finally:
            self._holders.remove(holder)
            self._wake.set()  # a wait that held jumps back (its end had come) no longer does: look again

    async def idle(self, timeout: float = 30.0) -> None:
        """Wait until no delivery runs and no message is visible (time does not jump for this); a
        ``TimeoutError`` saying what is still going after ``timeout`` real seconds (it was a bare one)."""
        try:
            async with asyncio.timeout(timeout):
                while self.busy:
                    self._idle.clear()
                    await self._idle.wait()
        except TimeoutError:
            raise TimeoutError(
                f"the test environment was still busy after {timeout:g} s of real time (deliveries running: "
                f"{len(self._inflight)}, messages waiting for one: {self.queue.visible_count()}, its clock at "
                f"{self.clock.now():%Y-%m-%d %H:%M:%S}): a step that never returns, or work that starts more work "
                "without end, keeps it busy") from None
        if self._failure is not None:
            raise RuntimeError("the test driver stopped") from self._failure

    async def run_until(self, moment: datetime) -> None:
        """Let deliveries run and time pass until ``moment``: jump from one due message to the next, then to
        ``moment`` itself."""
        limit, self._skip_limit = self._skip_limit, moment  # the background loop must not skip past it either
        try:
            await self._run_until(moment)
        finally:
            self._skip_limit = limit

    async def _run_until(self, moment: datetime) -> None:
        with self.skipping(bounded=True):
            while True:
                await self.idle()
                due = self.next_wake()
                if due is None or due > moment:
                    break
                if due > self.clock.now():
                    self.clock.advance_to(due)
                self._wake.set()
                await asyncio.sleep(0)
            self.clock.advance_to(moment)
            self._wake.set()
            await asyncio.sleep(0)
            await self.idle()

    # -- the loop --------------------------------------------------------------------------------------

    async def _loop(self) -> None:
        try:
            while not self._stopping:
                self._wake.clear()
                records = await self.consumer.receive(max_messages=10, wait_seconds=0)
                for record in records:
                    self._spawn(self.invoker.invoke(record))
                if records:
                    await asyncio.sleep(0)
                    continue
                if await self._tick_if_due():
                    continue
                if not self._inflight:
                    self._idle.set()
                    if self._skip_now():
                        continue
                    if self._stalled():
                        if not await self._wait(self.stall_timeout) and (stalled := self._stalled()):
                            await self._fail_stalled(stalled)
                        continue
                await self._wait()
        except BaseException as error:  # surfaced by idle(): a dead driver must not look like a stuck run
            self._failure = error
            self._idle.set()
            raise

    def _skip_now(self) -> bool:
        if not self.time_skipping:
            return False
        if any(h.satisfied is not None and h.satisfied() for h in self._holders):
            # A wait whose end has come (the run holds the hook) is about to return to a test that will act on it
            # (resume that hook): no jump before it has, even for another task's wait (a ``run.result()`` the test
            # left pending), or the hook's timeout could fall due first. Its leaving wakes the loop (``skipping``).
            return False
        waiting = [h for h in self._holders if h.satisfied is None or not h.satisfied()]
        if not waiting:
            return False
        unbounded = any(not h.bounded for h in waiting)
        due = self._next_jump()
        if due is None or (self._skip_limit is not None and due > self._skip_limit and not unbounded):
            return False
        only_the_watchdog = due not in (self.queue.next_visible_at(), self.world.schedules.next_due())
        self._watch_progress = self._progress() if only_the_watchdog else None
        self.clock.advance_to(due)
        return True

    def _stalled(self) -> list[_Holder]:
        """The test's waits, when nothing here can end any of them: no delivery runs or is visible, nothing is
        scheduled (no message, sleep, retry, timeout or tick), and every wait is for a run (none is ``env.sleep``'s,
        which ends by itself) and none is satisfied already (its waiter is about to act). Empty otherwise."""
        if self.stall_timeout is None or not self._holders or self.busy or self._next_jump() is not None:
            return []
        if any(h.bounded or h.stuck is None or (h.satisfied is not None and h.satisfied()) for h in self._holders):
            return []
        return list(self._holders)

    async def _fail_stalled(self, holders: list[_Holder]) -> None:
        """End each stalled wait with ``RunStalledError``: say why, then cancel its task (``skipping`` turns the
        cancel into the error)."""
        for holder in holders:
            if holder.stuck is None or holder.task is None or holder.task.done():
                continue
            try:
                holder.stalled = await holder.stuck()
            except Exception as error:  # the explanation is a read: its failure must not hide the stall
                holder.stalled = f"nothing in the test environment can move the run (reading why failed: {error!r})"
            holder.task.cancel()

    def _spawn(self, invocation: Coroutine[Any, Any, RecordResult | None]) -> None:
        """Run one invocation in the background, as a delivery in flight (a received record, or one another
        deployment handed over)."""
        task = asyncio.create_task(invocation)
        self._inflight.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._inflight.discard(task)
        self._wake.set()
        if not task.cancelled() and task.exception() is not None:
            self._failure = task.exception()

    async def _wait(self, limit: float | None = None) -> bool:
        """Until a message may be visible (a send, or the next one's time comes) or a delivery ends, or ``limit``
        real seconds pass; False when only the limit came."""
        due = self.next_wake()
        timeout = None if due is None else max(0.0, (due - self.clock.now()).total_seconds())
        visible = asyncio.create_task(self.queue.wait_for_visible(timeout))
        woken = asyncio.create_task(self._wake.wait())
        try:
            done, _ = await asyncio.wait({visible, woken}, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
            return bool(done)
        finally:
            for task in (visible, woken):
                task.cancel()


@dataclass(eq=False)
class _Holder:
    bounded: bool
    satisfied: Callable[[], bool] | None
    stuck: Callable[[], Awaitable[str]] | None = None
    task: asyncio.Task[Any] | None = None
    stalled: str | None = field(default=None)  # set with the reason when the driver ends the wait
