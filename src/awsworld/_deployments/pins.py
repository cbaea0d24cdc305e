"""Which deployment a run is pinned to: the reserved run attribute ``$awsworld.deployment``, and its errors.

The pin is written in the run's log, where everything durable about a run is, so every reader sees the same:

- by the run's first flow delivery, right after its ``run_started``, naming the deployment that delivery ran on
  (``start_pin``): a ``Client`` on a deployed stack does not know which version of the flow function will take
  the run, and the one that does is, by definition, the one that started it;
- at creation, in ``run_created``'s attributes, when the creator knows it: a child run takes its parent's
  (``authoring.children``), a start with ``Client.options(deployment=...)`` names one;
- by ``awsworld upgrade`` (``_deployments.upgrade``), which moves a run on purpose after a replay.

A run without the attribute is unpinned: its deliveries run wherever they arrive (the newest code). That is a
workflow declared ``@workflow(pinned=False)``, a start with ``deployment="latest"``, a run delivered where no
deployment id is known (``$LATEST`` on Lambda, a bare ``Worker``), and a run that started before pinning existed.

``run.deployment_id`` (the contract's field) stays what the World that created the run says it is (the stack, or
``local``): it is fixed at creation, while a pin can be moved by an upgrade.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from ..authoring.definitions import Registry
from ..world.entities import TERMINAL_RUN_STATUSES
from ..world.events import Event

PIN_ATTRIBUTE = "$awsworld.deployment"
"""The reserved run attribute naming the deployment a run is pinned to (clients cannot write ``$`` keys)."""
LATEST = "latest"
"""``Client.options(deployment=LATEST)`` / ``awsworld upgrade --to latest``: the newest deployment, unpinned at
start (the run's deliveries go wherever new code runs) or, for an upgrade, the newest deployment registered."""
DEPLOYMENT_MISMATCH = "DEPLOYMENT_MISMATCH"
"""The ``errorCode`` of a run failed because its deployment is gone, or its deliveries kept reaching other
deployments (the spec's ErrDeploymentMismatch)."""
MAX_REROUTES = 3
"""How often one delivery may be re-routed (handed from one deployment to another, or sent again because its
deployment could not be reached) before its run fails with ``DeploymentMismatchError``."""


@dataclass(frozen=True)
class Running:
    """The deployment whose code runs the current delivery, and that code (``RUNNING_ON``)."""

    deployment: str | None
    registry: Registry


RUNNING_ON: ContextVar[Running | None] = ContextVar("awsworld_running_on", default=None)
"""Set by ``_worker.dispatch.Worker`` around each delivery: what a child run started from one of its steps is
pinned to (``child_pin``)."""


def child_pin(workflow: str) -> str | None:
    """The pin of a child run of ``workflow`` started now: the parent's deployment (the one running this delivery,
    which is the parent's: routing sees to it), unless the child's workflow is ``pinned=False`` there."""
    running = RUNNING_ON.get()
    if running is None or running.deployment is None:
        return None
    definition = running.registry.workflows.get(workflow)
    return None if definition is not None and not definition.pinned else running.deployment


class DeploymentMismatchError(RuntimeError):
    """A run's deliveries kept reaching other deployments, or the deployment it is pinned to is gone (retired,
    its Lambda version deleted). The run fails with this error's name and ``DEPLOYMENT_MISMATCH``;
    ``deployment`` names the deployment."""

    def __init__(self, run_id: str, deployment: str, why: str) -> None:
        super().__init__(f"run {run_id} is pinned to deployment {deployment!r}, {why}")
        self.run_id = run_id
        self.deployment = deployment


class DeploymentUnavailableError(LookupError):
    """The deployment named cannot take the run: ``client.options(deployment="v7").start(...)`` naming one that is
    not registered, was retired, or whose code does not register the workflow raises it, and nothing is started
    (``deployment`` names it; the message lists the registered ones). Exported as
    ``awsworld.DeploymentUnavailableError``; a ``LookupError``.

    Inside awsworld it is also the spec's ErrDeploymentUnavailable: a delivery addressed to a deployment a host
    cannot reach (retired, its Lambda version deleted), raised by the host's ``hand_over``; the run is then
    re-routed and, in the end, fails with ``DeploymentMismatchError`` (``errorCode`` ``DEPLOYMENT_MISMATCH``)."""

    def __init__(self, deployment: str, why: str = "it is gone") -> None:
        super().__init__(f"deployment {deployment!r} cannot be reached: {why}")
        self.deployment = deployment


class Misrouted(Exception):
    """Raised by a flow whose log says the run is pinned to another deployment (``pin``), before it wrote
    anything: the delivery path hands the delivery over instead of running it here."""

    def __init__(self, run_id: str, pin: str, here: str) -> None:
        super().__init__(f"run {run_id} is pinned to deployment {pin!r}; this is {here!r}")
        self.run_id = run_id
        self.pin = pin


def pin_of(attributes: Mapping[str, str] | None) -> str | None:
    """The deployment a run view's attributes pin it to, or None (unpinned, or started on ``latest``)."""
    value = (attributes or {}).get(PIN_ATTRIBUTE)
    return None if not value or value == LATEST else value


def pinned_run(status: str, attributes: Mapping[str, str] | None) -> str | None:
    """The pin of a run still going (an ended run's pin is history: it holds no deployment)."""
    return None if status in TERMINAL_RUN_STATUSES else pin_of(attributes)


def recorded_in_log(events: Sequence[Event]) -> str | None:
    """The attribute as the run's log leaves it (``run_created``'s attributes, then the last ``attr_set`` that
    touched it), ``LATEST`` included: what a flow reads, having the log in hand (no read of its own)."""
    found: str | None = None
    for event in events:
        data = event.event_data or {}
        if event.event_type == "run_created":
            found = (data.get("attributes") or {}).get(PIN_ATTRIBUTE) or None
        elif event.event_type == "attr_set":
            for change in data.get("changes") or ():
                if change.get("key") == PIN_ATTRIBUTE:
                    found = change.get("value") or None
    return found


def pinned_in_log(events: Sequence[Event]) -> str | None:
    """The deployment the run's log pins it to, or None (unpinned, or started on ``latest``)."""
    found = recorded_in_log(events)
    return None if found == LATEST else found


def pin_change(deployment: str | None) -> dict[str, Any]:
    """The ``attr_set`` change that pins a run to ``deployment`` (None: unpins it)."""
    return {"key": PIN_ATTRIBUTE, "value": deployment}


def pinned_attributes(deployment: str | None) -> dict[str, str]:
    """``run_created``'s attributes for a run pinned at creation (none for an unpinned one)."""
    return {} if deployment is None else {PIN_ATTRIBUTE: deployment}


__all__ = [
    "DEPLOYMENT_MISMATCH",
    "LATEST",
    "MAX_REROUTES",
    "PIN_ATTRIBUTE",
    "RUNNING_ON",
    "DeploymentMismatchError",
    "DeploymentUnavailableError",
    "Misrouted",
    "Running",
    "child_pin",
    "pin_change",
    "pin_of",
    "pinned_attributes",
    "pinned_in_log",
    "pinned_run",
    "recorded_in_log",
]
