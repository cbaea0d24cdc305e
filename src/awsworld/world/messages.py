"""The wire message of the workflow queue, in the contract: which run, and for a step message which step, with the
run's identity, and the queue a workflow's messages go to (``queue_name_for``). Everyone who sends or reads one
(the client, the worker's deliveries, the watchdog, ``awsworld dev``) reaches it here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from .queue import DEFAULT_QUEUE_PREFIX

WATCHDOG_WAKE = "watchdog"
"""Sent by the watchdog (``_worker.watchdog``) to a run whose due passed with no write."""
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
    run_context: dict[str, Any] = field(default_factory=dict[str, Any])
    divergence: int = 0
    wake: str | None = None
    """Why a flow message was sent to a run that may have lost its own (``WAKE_KINDS``): its flow makes sure
    every part of the run has a live way forward (see ``Flow``)."""
    wakes_on: tuple[str, ...] = ()
    """A step message's: the ends of the step (``completed``, ``failed``) after which its delivery continues the
    workflow though other steps of the run are still open (``authoring.runtime.wakes_on``: a batch's items)."""
    deployment: str | None = None
    """The deployment the message is for (``deploymentId``): the run's pin, set by the run's own flow on what it
    queues, so a delivery that reaches another deployment is handed over unread (``_deployments.routing``). None:
    wherever it arrives (an unpinned run's; one sent from outside the run, whose flow checks the pin)."""
    reroutes: int = 0
    """How often this delivery was re-routed already (``deploymentMismatchRetryCount``; ``_deployments.pins``)."""

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
        if not isinstance(payload, dict):
            raise ValueError("not an awsworld flow or step message (needs runId and workflowName)")
        fields = cast(dict[str, Any], payload)
        run_id, workflow_name, wake = fields.get("runId"), fields.get("workflowName"), fields.get("wake")
        deployment = fields.get("deploymentId")
        wakes: object = fields.get("wakesOn")
        ends = cast(list[object], wakes) if isinstance(wakes, list) else []
        if not isinstance(run_id, str) or not isinstance(workflow_name, str):
            raise ValueError("not an awsworld flow or step message (needs runId and workflowName)")
        return cls(
            run_id=run_id,
            workflow_name=workflow_name,
            step_id=fields.get("stepId"),
            step_name=fields.get("stepName"),
            run_context=dict(fields.get("runContext") or {}),
            divergence=int(fields.get("replayDivergenceCount") or 0),
            wake=wake if isinstance(wake, str) else None,
            wakes_on=tuple(end for end in ends if isinstance(end, str)),
            deployment=deployment if isinstance(deployment, str) else None,
            reroutes=int(fields.get("deploymentMismatchRetryCount") or 0),
        )
