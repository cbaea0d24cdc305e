"""A run's own events, for every World: its creation, start, end and attributes.

- ``run_created`` makes the run (``new_run``: a client-given id that exists already is answered with that run,
  and nothing is written: each World's create path does that lookup).
- ``run_started`` starts a pending run; a running one is an idempotent no-op; an ended one is gone (410). A
  ``run_started`` for a run that does not exist creates it when it carries what run_created would (a resilient
  start: both events land, run_created first), else the run is not found.
- ``run_completed`` / ``run_failed`` / ``run_cancelled`` end a live run (its hooks close: ``hooks.hook_ends``);
  cancelling a cancelled run is a no-op, answered with the run and no event (the log's end stays its last event;
  the Workflow SDK's cancel callers discard the answer, and its Vercel World's retry table expects a 409 there);
  ending an ended run otherwise conflicts (409).
- ``attr_set`` changes a live run's attributes in order (a None value removes the key); an ended run's are final.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, cast

from ..errors import EntityConflictError, RunGoneError, RunNotFoundError
from ..events import AttrSetData, CreateEventRequest, RunFailedData
from ..ids import check_path_id, new_run_id
from .decision import Check, Decision, NewEvent, NewRun, RunChange
from .hooks import hook_ends
from .requests import data_as, event_data
from .state import FIRST_EVENT, RunState, View, evolve


def run_missing(run_id: str) -> RunNotFoundError:
    return RunNotFoundError(f"run {run_id} not found")


def _run(view: View) -> RunState:
    if view.run is None:
        raise run_missing(view.run_id)
    return view.run


def created_run_id(run_id: str | None) -> str:
    """run_created's run id: the client's, checked (creating that run again is idempotent: the existing run
    comes back, nothing is written), or a new one."""
    return check_path_id(run_id, "runId") if run_id else new_run_id()


def new_run(run_id: str, data: dict[str, Any], now: datetime, spec_version: int,
            deployment_id: str | None) -> NewRun:
    """The run its first event makes (``data``: the run_created data, dumped): pending, stamped with the spec
    version it was written with (a request that gives none: this World's, ``CreateEventRequest``'s default),
    deployed where it says (else where the World is)."""
    context = data.get("executionContext")
    return NewRun(run_id, str(data["workflowName"]), data.get("deploymentId") or deployment_id,
                  spec_version, "pending", now, None, dict(data.get("attributes") or {}),
                  cast(dict[str, Any], context) if isinstance(context, dict) else None)


def run_created(run_id: str, req: CreateEventRequest, now: datetime,
                deployment_id: str | None) -> tuple[NewRun, NewEvent]:
    """What a run_created for an id no run has writes: the run, and its first event (slot 1, holding the input;
    the run's in-band count starts at ``IN_BAND_SEQ_AT_RUN_CREATION``)."""
    made = new_run(run_id, req.data().model_dump(mode="json", by_alias=True, exclude_none=True), now,
                   req.spec_version, deployment_id)
    return made, NewEvent("run_created", None, event_data(req), True, made.spec_version)


def run_started(req: CreateEventRequest, view: View) -> Decision:
    if view.run is None:  # a resilient start: it creates the run when it carries what run_created would
        full = req.data().model_dump(mode="json", by_alias=True, exclude_none=True)
        if not full.get("workflowName") or "input" not in req.data().model_fields_set:
            raise RunNotFoundError(f"run {view.run_id} not found (run_started without workflowName and input "
                                   "cannot create it)")
        check_path_id(view.run_id, "runId")  # (as run_created's: ids.check_path_id)
        made = new_run(view.run_id, full, view.now, req.spec_version, view.deployment_id)
        created = NewEvent("run_created", None, event_data(req), view.carries_value, req.spec_version)
        started = NewEvent("run_started", None, {}, spec_version=req.spec_version)
        return Decision(req.event_type, "", [created, started], shows="run",
                        creates_run=evolve(made, status="running", started_at=view.now))
    run = view.run
    if run.status == "running":
        return Decision(req.event_type, "", noop=True, shows="run")
    if run.status != "pending":
        raise RunGoneError(f"run {view.run_id} is {run.status}: it cannot start")
    return Decision(req.event_type, "", [NewEvent("run_started", None, {}, spec_version=req.spec_version)],
                    (Check.RUN_AS_READ,), shows="run",
                    run=RunChange(status="running", started_at=run.started_at or view.now))


def run_ended(status: str) -> Callable[[CreateEventRequest, View], Decision]:
    def decide(req: CreateEventRequest, view: View) -> Decision:
        run = _run(view)
        if run.terminal:
            if run.status == status == "cancelled":
                return Decision(req.event_type, "", noop=True, shows="run")
            raise EntityConflictError(f"run {view.run_id} is already {run.status}")
        data = req.data()
        change = RunChange(status=status, completed_at=view.now,
                           end_value=FIRST_EVENT if view.carries_value else None,
                           error_code=(data.error_code or None) if isinstance(data, RunFailedData) else None)
        event = NewEvent(req.event_type, None, event_data(req), view.carries_value, req.spec_version)
        return Decision(req.event_type, "", [event], (Check.RUN_AS_READ,), shows="run", run=change,
                        hook_ends=hook_ends(view, status))

    return decide


def attr_set(req: CreateEventRequest, view: View) -> Decision:
    run = _run(view)
    if run.terminal:
        raise EntityConflictError(f"run {view.run_id} is {run.status}: its attributes are final")
    changes = tuple((c.key, c.value) for c in data_as(req, AttrSetData).changes)
    event = NewEvent(req.event_type, None, event_data(req), spec_version=req.spec_version)
    return Decision(req.event_type, "", [event], shows="run", run=RunChange(attributes=changes))
