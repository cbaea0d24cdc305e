"""The flow route: one SQS batch in, every record through the one delivery path
(``awsworld._worker.delivery``) concurrently, and back the ``batchItemFailures`` Lambda should retry (the
event source mapping uses ``ReportBatchItemFailures`` and deletes every record not reported as failed).

Everything about a record's fate (ack, redeliver, back-off, dead-letter, an unknown workflow's window) is
decided by ``DeliveryPath``, the same code the local poller runs; this module only adapts Lambda to it: the
invocation's deadline, the partial batch response, and logs and metrics through Powertools.

The partial batch response is written here, not with Powertools' batch utility: it is a list of the failed
records' ids, and the utility (with the parser models it imports) was a sixth of the flow function's import
time (bench/cold_start.py). The records run concurrently on the container's own loop, where the World's
clients live (see ``container``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, TypedDict

from .._worker.delivery import DeliveryPath, backoff_seconds
from .._worker.dispatch import Outcome, budget_deadline
from ..world.queue import DEFAULT_QUEUE_PREFIX
from . import observability as obs
from . import snapstart
from .container import Container, default_container
from .versions import HAND_OVER, is_hand_over

logger = obs.logger

__all__ = ["NotAnSqsBatchError", "PartialBatchResponse", "backoff_seconds", "handle", "handler"]

SQS_EVENT_SOURCE = "aws:sqs"


class NotAnSqsBatchError(ValueError):
    """The flow function was invoked with an event that is not a batch of the SQS event source mapping (a console
    test event, a direct ``lambda invoke``, another trigger wired to it). Acknowledging nothing would hide the
    mistake; the invocation fails with this instead, naming the event's shape, never its values."""


class ItemFailure(TypedDict):
    itemIdentifier: str


class PartialBatchResponse(TypedDict):
    """What a handler with ``ReportBatchItemFailures`` returns: the records to keep in the queue."""

    batchItemFailures: list[ItemFailure]


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


@dataclass
class FlowInvocation:
    """One invocation: the delivery path and the wall-clock deadline its records share."""

    path: DeliveryPath
    deadline: float

    async def failed(self, record: dict[str, Any]) -> bool:
        """Run one record; True when it stays in the queue (the path said so, or it raised)."""
        message_id = record.get("messageId", "")
        logger.thread_safe_append_keys(sqsMessageId=message_id)
        try:
            result = await self.path.handle(record, self.deadline)
        except Exception:
            logger.warning("record processing raised; the record stays in the queue", exc_info=True)
            return True
        return result.failed

    def run(self, container: Container, records: list[dict[str, Any]]) -> PartialBatchResponse:
        async def every_record() -> list[bool]:
            return list(await asyncio.gather(*(self.failed(record) for record in records)))

        outcomes = container.run(every_record())
        return {"batchItemFailures": [{"itemIdentifier": record["messageId"]}
                                      for record, failed in zip(records, outcomes, strict=True) if failed]}


def sqs_records(event: object) -> list[dict[str, Any]]:
    """The records of an SQS event source mapping's batch, or ``NotAnSqsBatchError``: the mapping always sends
    ``{"Records": [...]}`` with 1 to 10,000 records, each with its ``messageId`` and ``eventSource: aws:sqs``."""
    records = event.get("Records") if isinstance(event, dict) else None
    if not isinstance(records, list) or not records:
        raise NotAnSqsBatchError(
            f"the flow function takes batches of its SQS queue ({{\"Records\": [...]}}, from the event source "
            f"mapping); it was invoked with {_shape(event)}. Start runs with `awsworld start` or Client.start, "
            f"which queue them; do not invoke the function directly")
    for index, record in enumerate(records):
        if not isinstance(record, dict) or record.get("eventSource") != SQS_EVENT_SOURCE \
                or not isinstance(record.get("messageId"), str):
            source = record.get("eventSource") if isinstance(record, dict) else None
            raise NotAnSqsBatchError(
                f"the flow function takes batches of its SQS queue; record {index} of {len(records)} is not an SQS "
                f"message (eventSource {source!r:.40}, needs {SQS_EVENT_SOURCE!r} and a messageId): only the SQS "
                f"event source mapping may invoke it")
    return records


def _shape(event: object) -> str:
    """What an event is, for the error: its type and (for an object) its first keys; never a value."""
    if isinstance(event, dict):
        keys = [f"{key!r:.40}" for key in list(event)[:5]]
        more = ", ..." if len(event) > 5 else ""
        return f"an object with keys [{', '.join(keys)}{more}]" if keys else "an empty object"
    return f"a JSON {type(event).__name__}"


def handle(event: dict[str, Any], context: Any, container: Container | None = None) -> PartialBatchResponse:
    """The flow route's logic, for a given container (the Lambda entry point passes the default one). An event
    that is not an SQS batch fails the invocation (``NotAnSqsBatchError``) before anything is read or written."""
    records = sqs_records(event)
    container = container or default_container()
    deadline = budget_deadline(context.get_remaining_time_in_millis())
    if not container.published:  # a plain cold start (with SnapStart, the version's initialisation published)
        try:
            container.run(container.publish_names(ahead=False))
        except Exception:  # best effort: the next invocation tries again; deliveries do not depend on it
            logger.warning("could not publish this function's workflow names", exc_info=True)
    consumer = container.world.sqs_queue.consumer(DEFAULT_QUEUE_PREFIX)
    path = DeliveryPath(container.worker, consumer, PowertoolsObserver(), container.host)
    response = FlowInvocation(path, deadline).run(container, records)
    logger.info("batch handled", extra={"records": len(records), "failures": len(response["batchItemFailures"])})
    return response


class HandOverResult(TypedDict):
    """What a hand-over invocation answers (asynchronous: nobody reads it but its log line)."""

    status: str
    failed: bool


def handle_hand_over(event: dict[str, Any], context: Any, container: Container) -> HandOverResult:
    """Run the SQS record another version of this function handed over (``versions``): through the same delivery
    path as a batch's record, told it was handed over (``handed``: the re-routes so far, so a disagreement cannot
    loop), then deleted unless it failed, since no event source mapping deletes it for this invocation (``live``
    reported it failed to its own). A record it cannot run is left in flight: it comes back after the queue's
    visibility timeout, as a crashed delivery's does."""
    handed = event[HAND_OVER]
    record, reroutes = handed.get("record"), handed.get("reroutes")
    if not isinstance(record, dict) or not isinstance(reroutes, int):
        raise NotAnSqsBatchError(f"a hand-over event carries a record and its re-route count; this one has "
                                 f"{_shape(handed)}")
    deadline = budget_deadline(context.get_remaining_time_in_millis())
    consumer = container.world.sqs_queue.consumer(DEFAULT_QUEUE_PREFIX)
    path = DeliveryPath(container.worker, consumer, PowertoolsObserver(), container.host)

    async def run() -> HandOverResult:
        result = await path.handle(record, deadline, handed=reroutes)
        if not result.failed:
            await consumer.delete(record)
        return {"status": result.status, "failed": result.failed}

    answer = container.run(run())
    logger.info("handed-over record handled", extra={"outcome": answer["status"], "reroutes": reroutes})
    return answer


@obs.instrument
def handler(event: dict[str, Any], context: Any) -> PartialBatchResponse | HandOverResult:
    """Lambda entry point (``handlers/flow.handler``): a batch of the queue, or a record another version of this
    function handed over (``versions``)."""
    if is_hand_over(event):
        return handle_hand_over(event, context, default_container())
    return handle(event, context)


# Under SnapStart: prime the default container before the snapshot, renew it after each restore.
snapstart.install(default_container)
