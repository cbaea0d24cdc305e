"""The crash suite's "message lost" modes: the process dies at call k and the messages it was handling are gone.

A ``lost`` trial is a ``die-after`` trial whose dead invocation's records are then deleted from the queue (a purge,
an operator's mistake, a queue recreated): they never come back. A ``redriven`` trial moves them to the
dead-letter queue and redrives them as a new message each (a new envelope id: what re-sending a dead letter's
payload does), so the delivery that comes is not the owner of what the dead one started. The dedup markers of
the lost messages stay, as they would.

Then something must bring the run back without its messages, in one of two ways (``Recovery``):

- ``watchdog``: the stack's schedule, played by the harness: a tick message to the flow queue every
  ``TICK_SECONDS`` (the flow function runs the watchdog, which wakes runs whose due has passed);
- ``operator``: no watchdog; whenever the queue has been empty for a moment and the run has not ended, the
  harness does what an operator does, ``Client.wake`` (``awsworld wake RUN``).

The environment (``LOSS_ENVIRONMENT``) shortens the watch horizon and the lease grace to seconds, so a trial's
recovery takes seconds instead of the deployed minutes; the rules are the deployed ones.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from botocore.exceptions import ClientError

from awsworld._worker.tick import TICK_BODY
from awsworld.aws import AWSWorld
from awsworld.aws.queue.queue_envelope import new_message_id
from awsworld.client.client import Client, Run
from awsworld.world.errors import RunGoneError

LossMode = Literal["lost", "redriven"]
LOSS_MODES: tuple[LossMode, ...] = ("lost", "redriven")
Recovery = Literal["watchdog", "operator"]
RECOVERIES: tuple[Recovery, ...] = ("watchdog", "operator")

LOSS_ENVIRONMENT = {
    "AWSWORLD_WATCH_HORIZON_SECONDS": "3",
    "AWSWORLD_WATCH_BUCKET_SECONDS": "1",
    # The lease must outlast what a delivery may still do after its budget: the function's 8 s timeout less
    # the 5 s budget, plus the outcome's write.
    "AWSWORLD_LEASE_GRACE_SECONDS": "4",
}
TICK_SECONDS = 1.0
"""The schedule's period in a trial (the stack's: a minute)."""
QUIET_SECONDS = 1.5
"""How long the queue stays empty before the operator wakes the run (and between two wakes)."""


@dataclass
class Loss:
    """What a loss trial did: records lost, wakes sent, ticks sent."""

    mode: LossMode
    recovery: Recovery
    lost: int = 0
    wakes: int = 0
    ticks: int = 0
    _quiet_since: float | None = None
    _last_tick: float = 0.0
    _last_wake: float = 0.0
    lost_ids: list[str] = field(default_factory=list)
    """The envelope ids (awsworld's message ids) of the lost records."""

    async def lose(self, world: AWSWorld, messages: Sequence[dict[str, Any]]) -> None:
        """The dead invocation's records: deleted (``lost``), or dead-lettered and redriven under new ids."""
        sqs = await world.clients.sqs()
        config = world.config
        for message in messages:
            if self.mode == "redriven":
                await sqs.send_message(QueueUrl=config.dlq_url, MessageBody=message["Body"])
            with contextlib.suppress(ClientError):
                await sqs.delete_message(QueueUrl=config.queue_url, ReceiptHandle=message["ReceiptHandle"])
            self.lost += 1
            self.lost_ids.append(_envelope_id(message["Body"]))
        if self.mode == "redriven":
            await self._redrive(world, len(messages))

    async def _redrive(self, world: AWSWorld, count: int) -> None:
        """Move ``count`` dead letters back to the flow queue, each as a new message (a new envelope id)."""
        sqs = await world.clients.sqs()
        config = world.config
        moved = 0
        deadline = time.monotonic() + 10
        while moved < count and time.monotonic() < deadline:
            response = await sqs.receive_message(QueueUrl=config.dlq_url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
            for dead in response.get("Messages", []):
                body = json.loads(dead["Body"])
                if isinstance(body, dict) and "messageId" in body:
                    body["messageId"] = new_message_id()
                await sqs.send_message(QueueUrl=config.queue_url, MessageBody=json.dumps(body))
                await sqs.delete_message(QueueUrl=config.dlq_url, ReceiptHandle=dead["ReceiptHandle"])
                moved += 1
        if moved < count:
            raise RuntimeError(f"redrove {moved} of {count} dead letters")

    async def recover(self, world: AWSWorld, client: Client, run: Run[Any], queued: int) -> None:
        """Called between deliveries once the loss happened: tick, or wake as an operator would."""
        now = time.monotonic()
        if self.recovery == "watchdog":
            if now - self._last_tick >= TICK_SECONDS:
                sqs = await world.clients.sqs()
                await sqs.send_message(QueueUrl=world.config.queue_url, MessageBody=TICK_BODY)
                self._last_tick = now
                self.ticks += 1
            return
        if queued:
            self._quiet_since = None
            return
        if self._quiet_since is None:
            self._quiet_since = now
        if now - self._quiet_since >= QUIET_SECONDS and now - self._last_wake >= QUIET_SECONDS:
            with contextlib.suppress(RunGoneError):
                await client.wake(run.run_id)
                self.wakes += 1
            self._last_wake = now
            self._quiet_since = None


def _envelope_id(body: str) -> str:
    try:
        parsed = json.loads(body)
    except ValueError:
        return ""
    return str(parsed.get("messageId", "")) if isinstance(parsed, dict) else ""
