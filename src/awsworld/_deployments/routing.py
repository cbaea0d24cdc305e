"""Where a delivery runs: the two decisions that keep a run on its deployment's code, as pure functions.

- The **delivery path** (``_worker.delivery``) looks at a message's address (``FlowMessage.deployment``, the pin its
  run's own flow put on it) before reading anything: one for another deployment is handed over unread
  (``delivery_target``). A message without an address (a start, a wake, a hook's resume, the watchdog's: sent from
  outside the run) runs here, and its flow decides.
- The **flow** (``_worker.inline_loop``) reads the pin from the log it loads anyway (``flow_pin``): a run pinned
  elsewhere raises ``Misrouted`` before anything is written, and the path hands the delivery to the run's
  deployment; a run starting here is pinned here; the flow's messages carry the pin.

A delivery handed to a deployment is that deployment's to run (``handed``): it never goes back on its address
alone, which may be stale (an upgrade moved the run since it was queued); the flow's read of the log decides. A
step message reads no log before its body runs, so a pinned run's reads its run's pin first (``reads_step_pin``,
``handed_step_target``: one read per queued step message, the live deployment's included): a step's next attempt
queued before an ``awsworld upgrade`` runs on the code the run was moved to, forward to a fix or back to an older
version (a rollback), the fix for a step that keeps failing. Each hand-over
counts against ``MAX_REROUTES``, so two deployments that disagree cannot pass a delivery back and forth.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..world.events import Event
from .pins import LATEST, MAX_REROUTES, Misrouted, recorded_in_log


def delivery_target(address: str | None, here: str | None, *, handed: bool) -> str | None:
    """The deployment to hand a delivery to before it is read, or None: run it here. ``here`` None: this host
    runs one deployment with no id (no pinning); ``handed``: the delivery was handed to this deployment."""
    if here is None or handed or address is None or address == here:
        return None
    return address


def handed_step_target(pinned: str | None, here: str | None) -> str | None:
    """The deployment to hand a step message to, its run now ``pinned`` there (``pinned_run``: None for an
    unpinned or ended run), or None: run its body here. Its address said here; an upgrade may have moved the run
    since the message was queued (``reads_step_pin`` says which messages ask)."""
    if here is None or pinned is None or pinned == here:
        return None
    return pinned


def reads_step_pin(address: str | None, here: str | None, *, handed: bool) -> bool:
    """Whether a step message, addressed to ``address`` and delivered on ``here`` (not handed on: its address is
    here, or it has none), reads its run's pin before its body runs (``handed_step_target``). Every step message of
    a pinned run does, the live deployment's too: an ``awsworld upgrade`` back to an older deployment (a rollback)
    moves the run off the live one, and the step's next attempt, queued by the live one and addressed to it, ran
    the code the run was moved away from until its retries ran out. A step message without an address is an
    unpinned run's (or from before pinning), which no upgrade pins: no read."""
    return here is not None and (handed or address is not None)


def exhausted(reroutes: int) -> bool:
    """Whether a delivery re-routed ``reroutes`` times already may not be re-routed again."""
    return reroutes >= MAX_REROUTES


@dataclass(frozen=True)
class FlowPin:
    """What a flow does about its run's pin: ``address``, what its messages carry (the run's deployment, or None
    for an unpinned run); ``record``, the pin to write before ``run_started`` (a run starting here)."""

    address: str | None
    record: str | None = None


def flow_pin(run_id: str, log: Sequence[Event], here: str | None, *, pinned_workflow: bool) -> FlowPin:
    """The flow's decision for a run whose log is ``log``, on deployment ``here``; ``Misrouted`` when the run is
    pinned to another deployment. A run that has not started and is not pinned yet is pinned here unless its
    workflow is ``pinned=False`` or it was started on ``latest``; a started run without a pin (one from before
    pinning) stays unpinned."""
    if here is None:
        return FlowPin(None)
    if unpinned_for_good(log, pinned_workflow=pinned_workflow):
        return FlowPin(None)
    recorded = recorded_in_log(log)
    if recorded is None:
        return FlowPin(here, record=here)
    if recorded != here:
        raise Misrouted(run_id, recorded, here)
    return FlowPin(here)


def unpinned_for_good(log: Sequence[Event], *, pinned_workflow: bool) -> bool:
    """Whether the run whose log is ``log`` follows the newest code for good: started on ``latest``, a workflow
    declared ``pinned=False`` (``pinned_workflow`` False) not pinned at creation, or a run that started without a
    pin (one from before pinning). Neither its flow (``flow_pin``) nor ``awsworld upgrade``
    (``_deployments.upgrade``) pins such a run: a later deployment would leave it behind on old code."""
    recorded = recorded_in_log(log)
    if recorded == LATEST:
        return True
    if recorded is not None:
        return False
    return not pinned_workflow or any(e.event_type == "run_started" for e in log)


__all__ = ["FlowPin", "delivery_target", "exhausted", "flow_pin", "handed_step_target", "reads_step_pin",
           "unpinned_for_good"]
