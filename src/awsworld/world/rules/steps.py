"""Steps and waits, for every World: their creation, starts, outcomes and completion.

- ``step_created`` declares a step of a live run (a second one of the id conflicts, 409) and counts it open;
  followed in one batch by its ``step_started`` it is born running at attempt 1 (``born_running``).
- ``step_started`` begins an attempt of an unfinished step of a live run (the terminal-run start fence): not
  before its ``retryAfter`` (425, with how long to wait), and not while another delivery's lease runs
  (``leases.start_verdict``), nor over an unfinished attempt of an at-most-once step or one that was the last
  its ``maxAttempts`` allows (``at_most_once.check_start``). It records the attempt and the lease's end, not
  the seconds asked for.
- ``step_retrying`` puts the step back to pending with its error (and when it may start again);
  ``step_completed`` / ``step_failed`` finish it. A step that already ran may still record its outcome after its
  run ended: the fence is on starting, not on finishing. Not so the end of an attempt the runtime found cut off
  (``interruptedAttempt``, ``at_most_once.interrupted_end_of``): no body ran for it, so the run's end refuses it.
- a lazy start: a ``step_started`` carrying the step's ``stepName`` and ``input`` declares the step as it starts
  it (what the Workflow SDK's runtime sends for a step it runs inline without declaring it first): it is the
  born-running pair, written atomically, so the step must not exist yet (409 otherwise: a racing delivery
  started it, and the loser must not run the body). ``lazy_start`` makes the pair, ``lazily_started`` the
  answer (the step_started's, with ``stepCreated``).
- ``wait_created`` declares a wait of a live run; ``wait_completed`` completes it once.
- An operator's skip of a wait or of a retry's back-off is one of these events marked ``skipped`` (``skips``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from ..entities import TERMINAL_STEP_STATUSES
from ..errors import EntityConflictError, EventNotFoundError, RunGoneError, StepNotFoundError, TooEarlyError
from ..events import (
    CreateEventRequest,
    EventBatchResult,
    EventResult,
    StepCreatedData,
    StepRetryingData,
    WaitCreatedData,
    parse_event_request,
)
from ..ids import check_path_id
from .at_most_once import (
    MAX_ATTEMPTS_FIELD,
    check_interrupted_end,
    check_start,
    interrupted_end_of,
    requested_max_attempts,
)
from .decision import Check, Decision, NewEvent
from .leases import LEASE_SECONDS_FIELD, LEASE_UNTIL_FIELD, StartAsk, lease_end, start_ask, start_verdict
from .requests import data_as, event_data
from .skips import SKIPPED_FIELD, check_retry_skip, recorded, requested
from .state import FIRST_EVENT, StepState, View, WaitState, evolve


def step_missing(run_id: str, step_id: str) -> StepNotFoundError:
    """What a write to, or a read of, a step the run does not have raises."""
    return StepNotFoundError(f"step {step_id} not found in run {run_id}")


def step_created(req: CreateEventRequest, view: View) -> Decision:
    return _declared(req, view, None)


def born_running(created: CreateEventRequest, started: CreateEventRequest, view: View) -> Decision:
    """step_created followed by step_started in one batch: the step is born running at attempt 1."""
    extra = started.data().__pydantic_extra__
    requested_max_attempts(extra)  # checked as on any start (attempt 1 is never over another)
    decision = _declared(created, view, start_ask(extra))
    assert decision.step is not None and decision.step.lease_until is not None
    decision.events.append(_started_event(started, 1, decision.step.lease_until))
    return decision


def _declared(req: CreateEventRequest, view: View, ask: StartAsk | None) -> Decision:
    """A step of a live run declared (a second one of the id conflicts) and counted open; with ``ask``, born
    running at attempt 1 under the lease that start asks for (one state, not a pending one evolved)."""
    step_id, now = check_path_id(req.correlation_id or "", "correlationId"), view.now
    name = data_as(req, StepCreatedData).step_name
    ref = FIRST_EVENT if view.carries_value else None
    if ask is None:
        step = StepState(step_id, name, "pending", now, now, req.spec_version, input=ref)
    else:
        step = StepState(step_id, name, "running", now, now, req.spec_version, attempt=1, input=ref,
                         started_at=now, owner=ask.owner or None, lease_until=lease_end(now, ask.lease_seconds))
    event = NewEvent(req.event_type, step_id, event_data(req), view.carries_value, req.spec_version)
    return Decision(req.event_type, step_id, [event], (Check.RUN_ALIVE, Check.ABSENT), shows="step", step=step,
                    open_steps=1)


def _started_event(req: CreateEventRequest, attempt: int, lease: datetime) -> NewEvent:
    """step_started as the log keeps it: the attempt and the lease's end (not the seconds asked for, nor the
    attempts the policy allows)."""
    data = event_data(req, attempt=attempt, **{LEASE_UNTIL_FIELD: _iso(lease)})
    data.pop(LEASE_SECONDS_FIELD, None)
    data.pop(MAX_ATTEMPTS_FIELD, None)
    return NewEvent(req.event_type, req.correlation_id, data, spec_version=req.spec_version)


def _existing(req: CreateEventRequest, view: View) -> StepState:
    step = view.step
    if step is None:
        raise step_missing(view.run_id, req.correlation_id or "")
    if step.status in TERMINAL_STEP_STATUSES:
        raise EntityConflictError(f"step {req.correlation_id} is already {step.status}")
    return step


LAZY_DECLARATION_FIELDS = ("stepName", "input")
"""What a step_started carries when it declares its step too (a lazy start): both go on the step_created."""


def lazy_start(req: CreateEventRequest) -> list[CreateEventRequest] | None:
    """The born-running pair a lazy ``step_started`` stands for (it carries a string ``stepName`` and an
    ``input``, even a null one): step_created with the name and the input, then the step_started without the
    input. None for any other request. A World writes the pair as one atomic batch."""
    if req.event_type != "step_started":
        return None
    extra = req.data().__pydantic_extra__ or {}
    if not isinstance(extra.get("stepName"), str) or "input" not in extra:
        return None
    started = req.data().model_dump(mode="json", by_alias=True, exclude_none=True)
    started.pop("input", None)
    created: dict[str, Any] = {"stepName": extra["stepName"], "input": extra["input"]}
    if isinstance(extra.get("workflowName"), str):
        created["workflowName"] = extra["workflowName"]
    common = {"correlationId": req.correlation_id, "specVersion": req.spec_version}
    return [parse_event_request({"eventType": "step_created", "eventData": created, **common}),
            parse_event_request({"eventType": "step_started", "eventData": started, **common})]


def lazily_started(batch: EventBatchResult) -> EventResult:
    """A lazy start's answer: its step_started's result (the event and the running step), ``step_created``."""
    result = batch.results[-1].result
    assert result is not None, "an atomic batch either lands whole or raises"
    result.step_created = True
    return result


def step_started(req: CreateEventRequest, view: View) -> Decision:
    step = _existing(req, view)
    if view.run is not None and view.run.terminal:
        # The terminal-run start fence first (the commit's RUN_ALIVE check says the same, but only once the
        # decision is made): judged by the lease and the attempts below, the owner's redelivery of a last or
        # at-most-once attempt read as cut off, and the runtime recorded that attempt's end after the run's.
        raise RunGoneError(f"run {view.run_id} is {view.run.status}")
    now = view.now
    if step.retry_after is not None and step.retry_after > now:
        wait = (step.retry_after - now).total_seconds()
        raise TooEarlyError(f"step {req.correlation_id} may not start before {_iso(step.retry_after)}",
                            retry_after=max(1.0, float(int(wait + 0.999))))
    extra = req.data().__pydantic_extra__  # model_extra's field, read once (a property call per read)
    ask = start_ask(extra)
    lease = lease_end(now, ask.lease_seconds)
    # A second delivery (a duplicate message) while the step runs under the first one's message id and lease:
    # only a redelivery of that message may start it again, so a step message needs no queue-side dedup marker;
    # once the lease has passed, the owner is gone and this delivery takes the step over.
    start_verdict(status=step.status, holder=step.owner, owner=ask.owner, lease_until=step.lease_until,
                  started=step.updated_at, now=now, step_id=req.correlation_id)
    check_start(extra, status=step.status, attempt=step.attempt, step_id=req.correlation_id)
    attempt = step.attempt + 1
    after = evolve(step, status="running", attempt=attempt, started_at=step.started_at or now, updated_at=now,
                    owner=ask.owner, lease_until=lease, retry_after=None)
    return Decision(req.event_type, step.step_id, [_started_event(req, attempt, lease)],
                    (Check.RUN_ALIVE, Check.AS_READ), shows="step", step=after)


def step_outcome(status: str | None, value: Literal["output", "error"]) -> Callable[[CreateEventRequest, View],
                                                                                    Decision]:
    """step_completed / step_failed (``status``), or step_retrying (None: back to pending, maybe not before
    ``retryAfter``). The value stays in the event; the step points at it."""

    def decide(req: CreateEventRequest, view: View) -> Decision:
        skip = requested(req) if status is None else None  # (a malformed one is refused before the state is)
        extra = req.data().__pydantic_extra__
        run = view.run
        interrupted = interrupted_end_of(extra, run_status=run.status if run is not None else None,
                                         terminal=run is not None and run.terminal, run_id=view.run_id)
        step = _existing(req, view)
        check_interrupted_end(extra, status=step.status, attempt=step.attempt, step_id=req.correlation_id)
        now = view.now
        ref = FIRST_EVENT if view.carries_value else None
        data = event_data(req)
        if skip is not None:  # an operator's skip of the back-off: pending as it was, and may start now
            check_retry_skip(req.correlation_id, step.status, step.retry_after)
            data.pop("retryAfter", None)
            data[SKIPPED_FIELD] = recorded(skip, step.retry_after)
            after = evolve(step, **{value: ref}, updated_at=now, retry_after=None)
        elif status is None:
            retry_after = data_as(req, StepRetryingData).retry_after
            after = evolve(step, **{value: ref}, status="pending", updated_at=now,
                           retry_after=retry_after.astimezone(UTC) if retry_after is not None else None)
        else:
            after = evolve(step, **{value: ref}, status=status, updated_at=now, completed_at=now)
        event = NewEvent(req.event_type, step.step_id, data, view.carries_value, req.spec_version)
        # A skip moves a live run; an interrupted attempt's end is the runtime's bookkeeping, not after the run's end.
        alive = skip is not None or interrupted
        checks = (Check.RUN_ALIVE, Check.AS_READ) if alive else (Check.AS_READ,)
        return Decision(req.event_type, step.step_id, [event], checks, shows="step", step=after,
                        open_steps=0 if status is None else -1)

    return decide


def wait_created(req: CreateEventRequest, view: View) -> Decision:
    wait_id = check_path_id(req.correlation_id or "", "correlationId")
    resume_at = data_as(req, WaitCreatedData).resume_at.astimezone(UTC)
    wait = WaitState(wait_id, "waiting", resume_at, view.now, view.now, req.spec_version)
    event = NewEvent(req.event_type, wait_id, event_data(req), spec_version=req.spec_version)
    return Decision(req.event_type, wait_id, [event], (Check.RUN_ALIVE, Check.ABSENT), shows="wait", wait=wait)


def wait_completed(req: CreateEventRequest, view: View) -> Decision:
    skip = requested(req)
    wait = view.wait
    wait_id = req.correlation_id or ""
    if wait is None:
        raise EventNotFoundError(f"wait {wait_id} not found in run {view.run_id}")
    if wait.status == "completed":
        raise EntityConflictError(f"wait {wait_id} is already completed")
    after = evolve(wait, status="completed", completed_at=view.now, updated_at=view.now)
    data = event_data(req)
    if skip is not None:  # an operator's skip: the wait ends now; the log keeps when it was due
        data[SKIPPED_FIELD] = recorded(skip, wait.resume_at)
    event = NewEvent(req.event_type, wait_id, data, spec_version=req.spec_version)
    return Decision(req.event_type, wait_id, [event], (Check.RUN_ALIVE, Check.AS_READ), shows="wait", wait=after)


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="microseconds")
