"""The embedded default's stand-in for the Lambda event source: poll the queue, hand each delivery to the
same ``Runtime.execute`` the flow handler uses, with a Lambda-like deadline, then acknowledge it or have it
redelivered."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from ..aws.deliveries import Deferred, Malformed, Refused
from ..runtime.runtime import Outcome, Runtime, budget_deadline
from ..world.queue import DEFAULT_QUEUE_PREFIX, Delivery

log = logging.getLogger("awsworld.local")

LAMBDA_TIMEOUT_SECONDS = 120.0
RETRY_AFTER_ERROR_SECONDS = 2.0


class LocalPoller:
    def __init__(self, world: Any, runtime: Runtime, *, prefix: str = DEFAULT_QUEUE_PREFIX,
                 timeout: float = LAMBDA_TIMEOUT_SECONDS, concurrency: int = 32) -> None:
        self.world = world
        self.runtime = runtime
        self.consumer = world.sqs_queue.consumer(prefix)
        self.timeout = timeout
        self._slots = asyncio.Semaphore(concurrency)
        self._task: asyncio.Task[None] | None = None
        self._inflight: set[asyncio.Task[None]] = set()
        self._stopping = asyncio.Event()
        self.deliveries = 0
        self.outcomes: list[Outcome] = []
        self.errors: list[BaseException] = []

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="awsworld-local-poller")

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            try:
                outcomes = await self.consumer.poll(max_messages=10, wait_seconds=1)
            except Exception as error:  # the emulator is going away, or a transient error: try again shortly
                if self._stopping.is_set():
                    return
                log.warning("local poller: receive failed: %s", error)
                await asyncio.sleep(0.5)
                continue
            for outcome in outcomes:
                if isinstance(outcome, Delivery):
                    await self._slots.acquire()
                    task = asyncio.create_task(self._handle(outcome))
                    self._inflight.add(task)
                    task.add_done_callback(self._inflight.discard)
                elif isinstance(outcome, Refused):
                    await self.consumer.release(outcome)
                elif isinstance(outcome, Malformed | Deferred):
                    continue

    async def _handle(self, delivery: Delivery) -> None:
        try:
            self.deliveries += 1
            deadline = budget_deadline(self.timeout * 1000)
            try:
                outcome = await self.runtime.execute(delivery.payload, deadline=deadline,
                                                     message_id=delivery.message_id)
            except Exception as error:
                self.errors.append(error)
                log.warning("local poller: delivery %s failed (%s: %s); redelivering in %ss", delivery.message_id,
                            type(error).__name__, error, RETRY_AFTER_ERROR_SECONDS)
                await self.consumer.redeliver_after(delivery, RETRY_AFTER_ERROR_SECONDS)
                return
            self.outcomes.append(outcome)
            if outcome.ack:
                await self.consumer.ack(delivery)
            else:
                await self.consumer.redeliver_after(delivery, outcome.retry_after or 1.0)
        except Exception as error:  # acknowledging failed: the message comes back after its visibility timeout
            self.errors.append(error)
            log.warning("local poller: could not acknowledge %s: %s", delivery.message_id, error)
        finally:
            self._slots.release()

    async def stop(self) -> None:
        self._stopping.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._inflight:
            await asyncio.wait(set(self._inflight), timeout=5)
            for task in self._inflight:
                task.cancel()
