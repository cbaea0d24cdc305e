"""The embedded default's stand-in for Lambda's SQS event source mapping.

It receives batches from the queue and hands every record to the same ``DeliveryPath`` the Lambda flow
handler runs (one copy of the delivery logic: ``awsworld._worker.delivery``), then does what the event source
mapping does with the answer: a record reported as failed is left in the queue (the path already set its
back-off visibility), any other record is deleted. Like a Lambda timeout, a delivery still running when its
invocation's time is up (the budget plus the margin the worker keeps for a continuation) is cancelled and
its record left to come back after the visibility timeout.

With ``tick_seconds`` it also runs the tick (``_worker.tick``: the watchdog and the schedules) on the real clock,
as the stack's schedule does every minute: ``awsworld dev`` turns it on. The first tick runs at ``start`` (so
``awsworld schedules list`` shows the schedules declared in code at once) and the next ones on the wall clock's
multiples of ``tick_seconds`` (with 10 s: at :00, :10, ...), so a schedule due on the minute fires within a moment
of it, not up to ``tick_seconds`` later.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from .._deployments.local_host import LocalHost
from .._worker.delivery import DeliveryPath
from .._worker.dispatch import Worker
from .._worker.invoker import LAMBDA_TIMEOUT_SECONDS, Invoker, finish_or_cancel
from .._worker.tick import run_tick
from ..world.queue import DEFAULT_QUEUE_PREFIX

if TYPE_CHECKING:
    from ..aws.world import AWSWorld

log = logging.getLogger("awsworld.local")

__all__ = ["LAMBDA_TIMEOUT_SECONDS", "LocalPoller"]

RECEIVE_WAIT_SECONDS = 1
"""The long poll of each receive: a message sent meanwhile is received at once, and an idle poller asks once a
second. ``stop`` cancels the poll in progress instead of waiting it out."""

TICK_LAG = 0.05
"""How long after a multiple of ``tick_seconds`` the tick runs (see ``_until_next_multiple``)."""


class LocalPoller:
    def __init__(self, world: AWSWorld, worker: Worker, *, prefix: str = DEFAULT_QUEUE_PREFIX,
                 timeout: float | None = None, concurrency: int = 32,
                 tick_seconds: float | None = None) -> None:
        self.world = world
        self.consumer = world.sqs_queue.consumer(prefix)
        self.host = LocalHost(self.consumer, self._spawn, timeout=timeout)  # its deployments (``awsworld dev``)
        self.host.deploy(worker)
        self.timeout = timeout
        self._slots = asyncio.Semaphore(concurrency)
        self._task: asyncio.Task[None] | None = None
        self.tick_seconds = tick_seconds
        self.ticks = 0
        self._ticker: asyncio.Task[None] | None = None
        self._inflight: set[asyncio.Task[None]] = set()
        self._stopping = asyncio.Event()
        self._receiving: asyncio.Task[list[dict[str, Any]]] | None = None

    @property
    def invoker(self) -> Invoker:
        """The live deployment's: it receives every record (others run what is handed to them)."""
        return self.host.live_invoker

    @property
    def path(self) -> DeliveryPath:
        return self.invoker.path

    @property
    def worker(self) -> Worker:
        """The live deployment's worker (after ``awsworld dev`` reloads code, the new one's, not the first)."""
        return self.path.worker

    @property
    def deliveries(self) -> int:
        return self.host.deliveries

    @property
    def results(self) -> list[Any]:
        return self.host.results

    @property
    def timed_out(self) -> int:
        return self.host.timed_out

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="awsworld-local-poller")
        if self.tick_seconds is not None:
            self._ticker = asyncio.create_task(self._tick_loop(self.tick_seconds), name="awsworld-local-tick")

    async def _tick_loop(self, seconds: float) -> None:
        while not self._stopping.is_set():
            self.ticks += 1
            try:
                await run_tick(self.world)
            except Exception as error:  # logged per job by the tick; the next tick tries again
                log.debug("local tick failed: %s", error)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), _until_next_multiple(time.time(), seconds))

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            receiving = asyncio.create_task(self.consumer.receive(max_messages=10, wait_seconds=RECEIVE_WAIT_SECONDS))
            self._receiving = receiving
            try:
                await asyncio.wait((receiving,))
            finally:
                self._receiving = None
                receiving.cancel()  # (this task cancelled: the receive with it)
            if receiving.cancelled():  # ``stop`` ended the long poll: nothing was received
                return
            try:
                records = receiving.result()
            except Exception as error:  # the emulator is going away, or a transient error: try again shortly
                if self._stopping.is_set():
                    return
                log.warning("local poller: receive failed: %s", error)
                await asyncio.sleep(0.5)
                continue
            for record in records:
                await self._slots.acquire()
                task = asyncio.create_task(self._invoke(record))
                self._inflight.add(task)
                task.add_done_callback(self._inflight.discard)

    async def _invoke(self, record: dict[str, Any]) -> None:
        try:
            await self.invoker.invoke(record)
        finally:
            self._slots.release()

    def _spawn(self, invocation: Coroutine[Any, Any, Any]) -> None:
        """A record another deployment handed over: run it in the background, as a delivery in flight (it takes
        no poll slot: the record it came with holds one already)."""
        task = asyncio.create_task(invocation)
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    @property
    def running(self) -> int:
        """How many deliveries are running now."""
        return len(self._inflight)

    async def stop(self) -> None:
        """Stop receiving at once, then let the deliveries in flight end (``finish_or_cancel``). The long poll in
        progress is cancelled rather than waited for: it would hold every ``awsworld_local`` test's teardown, and
        ``awsworld dev``'s Ctrl-C, for up to ``RECEIVE_WAIT_SECONDS``. A message the emulator handed to that poll as
        it was cancelled comes back after its visibility timeout, as one a stopped Lambda poller took does."""
        self._stopping.set()
        if self._receiving is not None:
            self._receiving.cancel()
        for task in (self._task, self._ticker):
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await finish_or_cancel(self._inflight)


def _until_next_multiple(now: float, seconds: float) -> float:
    """Seconds from ``now`` (epoch seconds) to just after the next multiple of ``seconds``: a schedule's tick on
    the minute is due by then (``TICK_LAG`` covers a timer that fires a little early)."""
    return seconds - now % seconds + TICK_LAG
