"""One record as one Lambda invocation: the stand-in for the SQS event source mapping's handling of a record.

The local poller (moto's SQS) and the test environment's driver (the in-memory queue) both hand records
here, so what happens after the one delivery path answers is written once: a record reported as failed is
left in the queue (the path already set its back-off), any other record is deleted, and a delivery still
running when its invocation's time is up is cancelled, as Lambda would, its record left to come back after
the visibility timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Protocol

from .._deployments.host import DeploymentHost
from ..world.queue import FLOW_FUNCTION_TIMEOUT_SECONDS, flow_function_timeout_seconds
from .delivery import Consumer, DeliveryPath, RecordResult, Track
from .dispatch import Worker, budget_deadline

log = logging.getLogger("awsworld.local")

LAMBDA_TIMEOUT_SECONDS = float(FLOW_FUNCTION_TIMEOUT_SECONDS)
"""The default flow function's timeout; an invoker made with none takes the deployed one's
(``AWSWORLD_FLOW_TIMEOUT_SECONDS``), so the emulator cuts a delivery off where the stack's function would."""


class DeletingConsumer(Consumer, Protocol):
    """A consumer that can also delete a record (what the event source mapping does after a success)."""

    async def delete(self, record: Any) -> None: ...


class Invoker:
    def __init__(self, worker: Worker, consumer: DeletingConsumer, *,
                 timeout: float | None = None, host: DeploymentHost | None = None) -> None:
        """``host``: how this worker's deployment hands a delivery to another (``_deployments.local_host``).
        ``timeout``: one invocation's limit in seconds (None: ``AWSWORLD_FLOW_TIMEOUT_SECONDS``, read now)."""
        self.consumer = consumer
        self.path = DeliveryPath(worker, consumer, host=host)
        self.timeout = float(flow_function_timeout_seconds()) if timeout is None else timeout
        self.deliveries = 0
        self.results: list[RecordResult] = []
        self.timed_out = 0

    async def invoke(self, record: Any, *, handed: int | None = None) -> RecordResult | None:
        """The path's answer for one record (None when the invocation timed out), then delete it unless it
        failed. ``handed``: the record was handed to this deployment by another (re-routed that many times)."""
        self.deliveries += 1
        deadline = budget_deadline(self.timeout * 1000)
        track = Track()
        try:
            result = await asyncio.wait_for(self.path.handle(record, deadline, track, handed=handed),
                                            timeout=self.timeout)
        except TimeoutError:
            self.timed_out += 1
            log.warning("%s: its delivery outlived its %ss invocation and was stopped, as Lambda would; its "
                        "message comes back after the visibility timeout", track.label(), self.timeout,
                        extra=track.keys())
            return None
        self.results.append(result)
        if not result.failed:
            with contextlib.suppress(Exception):  # already deleted (a redelivery, a hop): as on SQS, harmless
                await self.consumer.delete(record)
        return result


SHUTDOWN_GRACE_SECONDS = 5.0
"""How long a host that stops (``awsworld dev``, ``LocalAWS``) lets the deliveries still running end."""


async def finish_or_cancel(tasks: set[asyncio.Task[Any]], grace: float = SHUTDOWN_GRACE_SECONDS) -> None:
    """At shutdown: give deliveries still running ``grace`` seconds to end, then cancel the rest (as Lambda
    would at its timeout; their records come back after the visibility timeout)."""
    if tasks:
        await asyncio.wait(set(tasks), timeout=grace)
        for task in set(tasks):
            task.cancel()
