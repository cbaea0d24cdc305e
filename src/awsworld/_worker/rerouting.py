"""A delivery for a run pinned to another deployment: handed to it, sent again, or its run failed (bounded).

The delivery path (``_worker.delivery``) calls ``Rerouting.hand_over`` when a message is addressed to another
deployment, when the flow read a pin to another deployment in the run's log (``_deployments.pins.Misrouted``), or
when this deployment lacks the run's code and the run is pinned elsewhere. What follows:

- the target is reachable: the record is handed to it (``_deployments.host``) and left in flight here, reported
  failed to the event source without a back-off, so nothing deletes it while the target runs it;
- the target cannot be reached (``DeploymentUnavailableError``: retired, its Lambda version deleted): the run is
  read once (this path only). An ended run's delivery is acknowledged; a run an upgrade moved since the message was
  addressed gets a copy addressed to where it is now. Otherwise a copy of the message with its re-route count one
  higher is sent after ``AWSWORLD_REROUTE_DELAY_SECONDS`` (1 s) doubled per re-route (1, 2, 4 s), and the record
  acknowledged. Why a delay of its own, not the queue's failure back-off (``AWSWORLD_FAILURE_BACKOFF_SECONDS``, 10 s
  doubling) or its visibility timeout: nothing failed, and nothing crashed; the one thing waiting can bring is an
  ``awsworld upgrade`` under way moving the run (its next read finds the new pin), which takes seconds;
- a delivery re-routed ``MAX_REROUTES`` times already fails its run with ``DeploymentMismatchError`` naming the
  deployment (code ``DEPLOYMENT_MISMATCH``), whether it kept reaching other deployments or its own could not be
  reached, and a flow message is queued so the run's end is seen by its flow (a parent is told). Nothing loops.

A copy's idempotency key is derived from the delivery's message id and the count, so a repeat of this step (the
record back after a crash in between) sends nothing new while the first copy is queued.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from .._deployments.host import DeploymentHost
from .._deployments.pins import (
    DEPLOYMENT_MISMATCH,
    MAX_REROUTES,
    DeploymentMismatchError,
    DeploymentUnavailableError,
    pin_of,
)
from .._deployments.routing import exhausted
from ..settings import SETTINGS
from ..world.entities import TERMINAL_RUN_STATUSES
from ..world.errors import RunNotFoundError
from ..world.messages import FlowMessage, queue_name_for
from ..world.queue import Delivery
from .dispatch import Worker

log = logging.getLogger("awsworld.delivery")

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

REROUTED = "Rerouted"
"""Deliveries handed to the deployment their run is pinned to (a CloudWatch metric of the flow function)."""
DEPLOYMENT_MISMATCHES = "DeploymentMismatches"
"""Runs failed with ``DeploymentMismatchError`` (their deployment gone, or re-routed too often)."""
UNREACHABLE = "DeploymentUnreachable"
"""Re-routes whose deployment could not be reached (each is retried until ``MAX_REROUTES``)."""


def reroute_delay(reroutes: int) -> float:
    """How long the copy of a delivery re-routed ``reroutes`` times so far waits in the queue (``AWSWORLD_REROUTE_
    DELAY_SECONDS`` doubled per re-route, at most a minute)."""
    return min(60.0, SETTINGS.reroute_delay_seconds * 2 ** min(reroutes, 16))


class _Tracked(Protocol):
    def label(self) -> str: ...

    def keys(self, **more: Any) -> dict[str, Any]: ...


class _Counts(Protocol):
    def count(self, name: str, value: float = 1) -> None: ...


class _Acks(Protocol):
    async def ack(self, delivery: Delivery, *, delete_message: bool = True) -> None: ...


class ReroutingPath(Protocol[R_co]):
    """What rerouting needs of the delivery path (``_worker.delivery.DeliveryPath``)."""

    @property
    def worker(self) -> Worker: ...

    @property
    def host(self) -> DeploymentHost | None: ...

    @property
    def observer(self) -> _Counts: ...

    @property
    def consumer(self) -> _Acks: ...

    async def fail_run(self, delivery: Delivery, message: FlowMessage, error: dict[str, Any], code: str,
                       track: Any, status: str) -> R_co: ...

    async def ended(self, delivery: Delivery, how: str, track: Any) -> R_co: ...

    async def settled(self, delivery: Delivery, status: str) -> R_co: ...

    def left_in_flight(self, status: str) -> R_co: ...


@dataclass(frozen=True)
class Way:
    """One delivery on its way: the record, what was opened of it, and how often it was re-routed so far."""

    record: Mapping[str, Any]
    delivery: Delivery
    message: FlowMessage
    track: _Tracked
    reroutes: int


class Rerouting(Generic[R]):
    def __init__(self, path: ReroutingPath[R]) -> None:
        self.path = path

    async def hand_over(self, way: Way, target: str) -> R:
        """Hand the delivery to deployment ``target`` (see the module)."""
        path, message = self.path, way.message
        if exhausted(way.reroutes):
            why = (f"which could not be reached after {way.reroutes} re-routes of its delivery (retired, or its "
                   f"Lambda version deleted)" if message.reroutes >= way.reroutes else
                   f"and its delivery was re-routed {way.reroutes} times without running there")
            return await self._mismatch(way, target, why)
        try:
            if path.host is None:
                raise DeploymentUnavailableError(target, "this host reaches no other deployment")
            await path.host.hand_over(target, way.record, way.reroutes + 1)
        except DeploymentUnavailableError as gone:
            return await self._unreachable(way, target, gone)
        path.observer.count(REROUTED)
        log.info("%s: handed to deployment %s, which the run is pinned to (re-route %d)", way.track.label(),
                 target, way.reroutes + 1, extra=way.track.keys(outcome="rerouted", deployment=target))
        return path.left_in_flight("handed-over")

    async def _unreachable(self, way: Way, target: str, gone: DeploymentUnavailableError) -> R:
        path, message = self.path, way.message
        path.observer.count(UNREACHABLE)
        try:
            run = await path.worker.world.runs.get(message.run_id, resolve_data="none")
        except RunNotFoundError:
            return await path.ended(way.delivery, "does not exist", way.track)
        if run.status in TERMINAL_RUN_STATUSES:
            return await path.ended(way.delivery, f"is {run.status}", way.track)
        pin = pin_of(run.attributes)
        if pin != target:  # moved by an upgrade since the message was addressed: to where it is now
            await self._send(way, dataclasses.replace(message, deployment=pin), "moved", 0)
            return await self._acked(way, f"addressed to deployment {target}, but the run is on "
                                          f"{pin or 'the newest code'} now: sent there")
        count = way.reroutes + 1
        delay = reroute_delay(way.reroutes)
        await self._send(way, dataclasses.replace(message, deployment=target, reroutes=count), f"r{count}", delay)
        return await self._acked(way, f"{gone}; sent again in {delay:g} s (re-route {count}; the run fails "
                                      f"with {DEPLOYMENT_MISMATCH} after {MAX_REROUTES})")

    async def _send(self, way: Way, copy: FlowMessage, tag: str, delay: float) -> None:
        await self.path.worker.world.queue(
            queue_name_for(copy.workflow_name), copy.to_payload(), delay_seconds=delay,
            idempotency_key=f"{copy.run_id}:reroute:{way.delivery.message_id}:{tag}")

    async def _acked(self, way: Way, what: str) -> R:
        log.warning("%s: %s", way.track.label(), what, extra=way.track.keys(outcome="reroute-sent"))
        return await self.path.settled(way.delivery, "reroute-sent")

    async def _mismatch(self, way: Way, target: str, why: str) -> R:
        path, message = self.path, way.message
        path.observer.count(DEPLOYMENT_MISMATCHES)
        error = DeploymentMismatchError(message.run_id, target, why)
        hint = (f"; runs are moved off a deployment before it is retired with `awsworld upgrade --deployment "
                f"{target}`")
        result = await path.fail_run(way.delivery, message, {"name": type(error).__name__,
                                                             "message": str(error) + hint},
                                     DEPLOYMENT_MISMATCH, way.track, "deployment-mismatch")
        # The run's end, seen by a flow wherever the newest code runs: it tells a parent, cancels children.
        await path.worker.world.queue(queue_name_for(message.workflow_name),
                                      FlowMessage(message.run_id, message.workflow_name).to_payload(),
                                      idempotency_key=f"{message.run_id}:mismatch")
        return result


__all__ = ["DEPLOYMENT_MISMATCHES", "REROUTED", "UNREACHABLE", "Rerouting", "ReroutingPath", "Way", "reroute_delay"]
