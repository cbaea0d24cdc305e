"""The payload of a queue message: which run, and for a step message which step, with the run's identity."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..world.queue import DEFAULT_QUEUE_PREFIX

WATCHDOG_WAKE = "watchdog"
"""Sent by the watchdog (``worker.watchdog``) to a run whose due passed with no write."""
OPERATOR_WAKE = "operator"
"""Sent by ``awsworld wake`` / ``Client.wake``."""
RESTART_WAKE = "restart"
"""Sent by ``awsworld dev --state`` to every unfinished run it restores (the queue is not saved)."""
WAKE_KINDS = (WATCHDOG_WAKE, OPERATOR_WAKE, RESTART_WAKE)


def queue_name_for(workflow_name: str) -> str:
    return f"{DEFAULT_QUEUE_PREFIX}{workflow_name}"


@dataclass
class FlowMessage:
    run_id: str
    workflow_name: str
    step_id: str | None = None
    step_name: str | None = None
    run_context: dict[str, Any] = field(default_factory=dict)
    divergence: int = 0
    wake: str | None = None
    """Why a flow message was sent to a run that may have lost its own (``WAKE_KINDS``): its flow makes sure
    every part of the run has a live way forward (see ``Flow``)."""
    wakes_on: tuple[str, ...] = ()
    """A step message's: the ends of the step (``completed``, ``failed``) after which its delivery continues the
    workflow though other steps of the run are still open (``authoring.runtime.wakes_on``: a batch's items)."""
    deployment: str | None = None
    """The deployment the message is for (``deploymentId``): the run's pin, set by the run's own flow on what it
    queues, so a delivery that reaches another deployment is handed over unread (``deployments.routing``). None:
    wherever it arrives (an unpinned run's; one sent from outside the run, whose flow checks the pin)."""
    reroutes: int = 0
    """How often this delivery was re-routed already (``deploymentMismatchRetryCount``; ``deployments.pins``)."""

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"runId": self.run_id, "workflowName": self.workflow_name}
        if self.step_id:
            payload.update(stepId=self.step_id, stepName=self.step_name, runContext=self.run_context)
        if self.divergence:
            payload["replayDivergenceCount"] = self.divergence
        if self.wake:
            payload["wake"] = self.wake
        if self.wakes_on:
            payload["wakesOn"] = list(self.wakes_on)
        if self.deployment:
            payload["deploymentId"] = self.deployment
        if self.reroutes:
            payload["deploymentMismatchRetryCount"] = self.reroutes
        return payload

    @classmethod
    def from_payload(cls, payload: Any) -> FlowMessage:
        if not isinstance(payload, dict) or not isinstance(payload.get("runId"), str) \
                or not isinstance(payload.get("workflowName"), str):
            raise ValueError("not an awsworld flow or step message (needs runId and workflowName)")
        return cls(
            run_id=payload["runId"],
            workflow_name=payload["workflowName"],
            step_id=payload.get("stepId"),
            step_name=payload.get("stepName"),
            run_context=dict(payload.get("runContext") or {}),
            divergence=int(payload.get("replayDivergenceCount") or 0),
            wake=payload["wake"] if isinstance(payload.get("wake"), str) else None,
            wakes_on=tuple(end for end in wakes if isinstance(end, str)) if isinstance(wakes := payload.get("wakesOn"),
                                                                                       list) else (),
            deployment=payload["deploymentId"] if isinstance(payload.get("deploymentId"), str) else None,
            reroutes=int(payload.get("deploymentMismatchRetryCount") or 0),
        )
