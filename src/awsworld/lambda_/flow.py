"""The flow route: one SQS batch in, every record through ``Runtime.execute`` concurrently, and back the
``batchItemFailures`` Lambda should retry (the event source mapping uses ``ReportBatchItemFailures``).

Per record, through the queue consumer (``awsworld.aws.deliveries``):

- ``Delivery``: run it within the invocation's budget. The runtime says ack (the dedup key is released;
  the message itself is deleted by the event source mapping, which deletes every record not reported as
  failed) or redeliver after N seconds (a delayed re-send plus a delete of this copy). Either way the
  record is a success for Lambda.
- ``Deferred`` (a long delay's hop that came early: re-sent and deleted) and ``Malformed`` moved to the DLQ:
  success, nothing to run.
- ``Refused`` (another prefix's message) and ``Malformed`` left to the redrive policy: failure.
- An exception (a transient AWS error, a bug, or a workflow or step this deployment does not have): failure
  for that record only. Before reporting it, the record's visibility is shortened to an exponential backoff
  (10 s, 20 s, ... capped at 10 min) so a transient error is retried in seconds rather than after the
  queue's 12-minute visibility timeout; the receive count still grows, so a message that keeps failing
  reaches the DLQ after the queue's ``maxReceiveCount`` (10) receives, about 40 minutes.

An unknown workflow or step is such a failure, on purpose: it usually means the code deployed does not match
the messages in flight (a module missing from ``AWSWORLD_MODULES``, a rename, a rollback), which a deploy
fixes within the ~40 minutes the backoff spends before the DLQ, and the DLQ keeps it 14 days for a redrive.
It is logged once per receive at ERROR with the name and counted (``UnknownWorkflow``), never retried fast
enough to loop.

Powertools' ``AsyncBatchProcessor`` does the bookkeeping (records to ``SQSRecord``, failures to the partial
response); its ``async_process`` is overridden for one reason only: it would run the records with
``asyncio.run`` (outside Lambda) or whatever loop ``get_event_loop`` finds (inside), while the World's clients
live on the container's own loop (see ``container``).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools.utilities.batch import AsyncBatchProcessor, EventType, async_process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from botocore.exceptions import BotoCoreError, ClientError

from ..aws.deliveries import Deferred, Malformed, QueueConsumer, Refused
from ..runtime.messages import FlowMessage
from ..runtime.runtime import budget_deadline
from ..world.queue import DEFAULT_QUEUE_PREFIX, Delivery
from . import observability as obs
from .container import Container, default_container

logger = obs.logger

BACKOFF_BASE_SECONDS = 10
BACKOFF_MAX_SECONDS = 600


class RecordFailed(Exception):
    """A record to report as failed for a known reason (logged as a warning, without a traceback)."""


class UnknownWorkflowError(LookupError):
    """The delivery names a workflow or step that no module in ``AWSWORLD_MODULES`` registered."""


def backoff_seconds(receive_count: int) -> int:
    """Visibility for a failed record: 10 s after the first receive, doubling, at most 10 minutes."""
    return int(min(BACKOFF_MAX_SECONDS, BACKOFF_BASE_SECONDS * 2 ** max(0, min(receive_count - 1, 16))))


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
    """One invocation: the consumer, the runtime and the wall-clock deadline its records share."""

    container: Container
    consumer: QueueConsumer
    deadline: float

    async def process(self, record: SQSRecord) -> str:
        """Handle one record; return a short status, or raise to have it reported as failed."""
        logger.thread_safe_append_keys(sqsMessageId=record.message_id)
        try:
            outcome = await self.consumer.open(record.raw_event)
            if isinstance(outcome, Delivery):
                return await self._deliver(outcome)
            if isinstance(outcome, Deferred):
                obs.count(obs.DEFERRED_HOPS)
                return "deferred"
            if isinstance(outcome, Malformed):
                obs.count(obs.MALFORMED_MESSAGES)
                if outcome.dead_lettered:
                    return "dead-lettered"
                raise RecordFailed(f"malformed message left to the redrive policy: {outcome.reason}")
            assert isinstance(outcome, Refused)
            obs.count(obs.REFUSED_MESSAGES)
            raise RecordFailed(f"message for queue {outcome.queue_name} is not under {self.consumer.prefix}")
        except RecordFailed as failed:
            logger.warning("record reported as failed: %s", failed)
            await self._back_off(record)
            raise
        except UnknownWorkflowError as unknown:
            obs.count(obs.UNKNOWN_WORKFLOW)
            logger.error("record reported as failed: %s; it is retried with backoff and, if this deployment "
                         "still lacks it, reaches the dead-letter queue", unknown)
            await self._back_off(record)
            raise
        except Exception as error:
            obs.count(obs.DELIVERY_ERRORS)
            logger.exception("record reported as failed: %s", type(error).__name__)
            await self._back_off(record)
            raise

    async def _deliver(self, delivery: Delivery) -> str:
        message = FlowMessage.from_payload(delivery.payload)
        logger.thread_safe_append_keys(messageId=delivery.message_id, runId=message.run_id,
                                       stepId=message.step_id, workflow=message.workflow_name,
                                       attempt=delivery.attempt)
        obs.count(obs.STEP_DELIVERIES if message.step_id else obs.FLOW_DELIVERIES)
        obs.milliseconds(obs.QUEUE_LAG, (datetime.now(UTC) - delivery.created_at).total_seconds() * 1000)
        if not message.step_id and delivery.attempt == 1 and (delivery.idempotency_key or "").endswith(":start"):
            obs.count(obs.RUNS_STARTED)
        self._check_registered(message)
        started = time.monotonic()
        outcome = await self.container.runtime.execute(delivery.payload, deadline=self.deadline)
        obs.record_outcome(outcome)
        if outcome.ack:
            await self.consumer.ack(delivery, delete_message=False)
            action = "ack"
        else:
            await self.consumer.redeliver_after(delivery, outcome.retry_after or 1.0)
            action = f"redeliver in {outcome.retry_after}s"
        logger.info("delivery handled", extra={
            "outcome": outcome.status, "action": action, "iterations": outcome.stats.iterations,
            "inlineSteps": outcome.stats.inline_steps, "queuedSteps": outcome.stats.queued_steps,
            "durationMs": round((time.monotonic() - started) * 1000),
        })
        return outcome.status

    def _check_registered(self, message: FlowMessage) -> None:
        registry = self.container.runtime.registry
        try:
            registry.workflow(message.workflow_name)
            if message.step_id and message.step_name:
                registry.step(message.step_name)
        except LookupError as missing:
            raise UnknownWorkflowError(str(missing)) from None

    async def _back_off(self, record: SQSRecord) -> None:
        """Shorten the failed record's visibility (best effort: on error the queue's own timeout applies)."""
        try:
            count = int(record.attributes.approximate_receive_count)
        except (KeyError, TypeError, ValueError):
            count = 1
        try:
            sqs = await self.consumer.clients.sqs()
            await sqs.change_message_visibility(QueueUrl=self.consumer.queue._url(),
                                                ReceiptHandle=record.receipt_handle,
                                                VisibilityTimeout=backoff_seconds(count))
        except (ClientError, BotoCoreError, KeyError) as error:
            logger.warning("could not shorten the failed record's visibility: %s", type(error).__name__)


def handle(event: dict[str, Any], context: Any, container: Container | None = None) -> PartialItemFailureResponse:
    """The flow route's logic, for a given container (the Lambda entry point passes the default one)."""
    container = container or default_container()
    deadline = budget_deadline(context.get_remaining_time_in_millis())
    consumer = container.world.sqs_queue.consumer(DEFAULT_QUEUE_PREFIX)
    invocation = FlowInvocation(container, consumer, deadline)
    processor = ContainerBatchProcessor(container)
    response = async_process_partial_response(event=event, record_handler=invocation.process,
                                              processor=processor, context=context)
    failures = response.get("batchItemFailures", [])
    logger.info("batch handled", extra={"records": len(event.get("Records", [])), "failures": len(failures)})
    return response


@obs.instrument
def handler(event: dict[str, Any], context: Any) -> PartialItemFailureResponse:
    """Lambda entry point (``handlers/flow.handler``)."""
    return handle(event, context)
