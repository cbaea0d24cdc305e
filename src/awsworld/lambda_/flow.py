"""The flow route: one SQS batch in, every record through the one delivery path
(``awsworld.runtime.delivery``) concurrently, and back the ``batchItemFailures`` Lambda should retry (the
event source mapping uses ``ReportBatchItemFailures`` and deletes every record not reported as failed).

Everything about a record's fate (ack, redeliver, back-off, dead-letter, an unknown workflow's window) is
decided by ``DeliveryPath``, the same code the local poller runs; this module only adapts Lambda to it: the
invocation's deadline, Powertools' batch bookkeeping, and logs and metrics through Powertools.

Powertools' ``AsyncBatchProcessor`` is used for the partial response; its ``async_process`` is overridden for
one reason only: it would run the records with ``asyncio.run`` (outside Lambda) or whatever loop
``get_event_loop`` finds (inside), while the World's clients live on the container's own loop (see
``container``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.utilities.batch import AsyncBatchProcessor, EventType, async_process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from ..runtime.delivery import DeliveryPath, backoff_seconds
from ..runtime.runtime import Outcome, budget_deadline
from ..world.queue import DEFAULT_QUEUE_PREFIX
from . import observability as obs
from .container import Container, default_container

logger = obs.logger

__all__ = ["RecordFailed", "backoff_seconds", "handle", "handler"]


class RecordFailed(Exception):
    """Raised to Powertools for a record the delivery path reported as failed (it stays in the queue)."""


class PowertoolsObserver:
    """The delivery path's counts as EMF metrics, its keys on every log line of the record."""

    def count(self, name: str, value: float = 1) -> None:
        obs.count(name, value)

    def milliseconds(self, name: str, value: float) -> None:
        obs.milliseconds(name, value)

    def bind(self, **keys: Any) -> None:
        logger.thread_safe_append_keys(**keys)

    def handled(self, outcome: Outcome) -> None:
        obs.record_outcome(outcome)


class ContainerBatchProcessor(AsyncBatchProcessor):
    """``AsyncBatchProcessor`` whose records run concurrently on the container's persistent loop."""

    def __init__(self, container: Container) -> None:
        super().__init__(EventType.SQS, raise_on_entire_batch_failure=False)
        self.container = container

    def async_process(self) -> list[tuple[Any, ...]]:
        async def every_record() -> list[tuple[Any, ...]]:
            return list(await asyncio.gather(*(self._async_process_record(r) for r in self.records)))

        return self.container.run(every_record())


@dataclass
class FlowInvocation:
    """One invocation: the delivery path and the wall-clock deadline its records share."""

    path: DeliveryPath
    deadline: float

    async def process(self, record: SQSRecord) -> str:
        logger.thread_safe_append_keys(sqsMessageId=record.message_id)
        result = await self.path.handle(record.raw_event, self.deadline)
        if result.failed:
            raise RecordFailed(result.status)
        return result.status


def handle(event: dict[str, Any], context: Any, container: Container | None = None) -> PartialItemFailureResponse:
    """The flow route's logic, for a given container (the Lambda entry point passes the default one)."""
    container = container or default_container()
    deadline = budget_deadline(context.get_remaining_time_in_millis())
    consumer = container.world.sqs_queue.consumer(DEFAULT_QUEUE_PREFIX)
    path = DeliveryPath(container.runtime, consumer, PowertoolsObserver())
    processor = ContainerBatchProcessor(container)
    response = async_process_partial_response(event=event, record_handler=FlowInvocation(path, deadline).process,
                                              processor=processor, context=context)
    failures = response.get("batchItemFailures", [])
    logger.info("batch handled", extra={"records": len(event.get("Records", [])), "failures": len(failures)})
    return response


@obs.instrument
def handler(event: dict[str, Any], context: Any) -> PartialItemFailureResponse:
    """Lambda entry point (``handlers/flow.handler``)."""
    return handle(event, context)
