"""The contract's transition rules for the in-memory World, one planner per event type.

The rules are the World contract's (``/work/shared/spec/world-contract.md``: dense slots, the terminal-run start
fence, unique hook tokens released at run end unless retained, hook_disposed freeing a token at once) and, where
the contract leaves a choice, the AWS World's (``awsworld.aws.log.transitions``, the reference this World must
answer like): the same errors, decided in the same order.

A planner only reads. It raises the errors the AWS World decides from what it reads before committing
(a missing step, a finished one, a retry that is too early) and returns a :class:`Plan`: the events to append,
the entity change to make once their slots are known (``apply``), and the errors the AWS World learns only
at its commit (``resume_error``, then the run-status requirement, then ``commit_error``), which the writer
decides in that order. Nothing changes until every plan of a commit is known to land, so an atomic batch that
is refused leaves no trace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from ...world.entities import TERMINAL_STEP_STATUSES
from ...world.errors import (
    EntityConflictError,
    EventNotFoundError,
    HookAlreadyReceivedError,
    HookNotFoundError,
    InvalidInputError,
    RunGoneError,
    RunNotFoundError,
    StepNotFoundError,
    TooEarlyError,
    WorldError,
)
from ...world.events import (
    AttrSetData,
    CreateEventRequest,
    HookCreatedData,
    HookReceivedData,
    RunFailedData,
    StepCreatedData,
    StepRetryingData,
    WaitCreatedData,
)
from ...world.hook_ends import hook_fate
from ...world.ids import IN_BAND_SEQ_AT_RUN_CREATION, SPEC_VERSION_CURRENT, slot_to_event_id
from ...world.leases import LEASE_SECONDS_FIELD, LEASE_UNTIL_FIELD, lease_end, requested_lease, start_verdict
from ...world.write_rules import check_hook_token
from .records import PAYLOAD_NAME, HookRecord, RunRecord, State, StepRecord, TokenRecord, WaitRecord
from .values import JSONValue, Value, data_text, json_value

Shown = Literal["run", "step", "hook", "wait"]
Apply = Callable[[RunRecord, list[int], datetime], None]


@dataclass(slots=True)
class NewEvent:
    event_type: str
    correlation_id: str | None
    data: dict[str, JSONValue]  # eventData without the payload field
    payload: Value | None
    spec_version: int | None
    data_text: str | None = None


@dataclass(slots=True)
class Plan:
    events: list[NewEvent]
    apply: Apply | None = None
    require_alive: bool = False  # refused with RunGoneError on a terminal run
    resume_error: WorldError | None = None  # a repeated resume id: decided before the run's status
    commit_error: WorldError | None = None  # an entity condition the commit would fail
    open_delta: int = 0
    shows: Shown | None = None  # which entity the answer carries
    entity_id: str = ""
    noop: bool = False  # an idempotent repeat: answer the run as it is, write nothing
    creates_run: RunRecord | None = None  # a resilient start: the run does not exist yet


@dataclass(slots=True)
class Ctx:
    """What a planner sees: the run (None only for a resilient start), the write's time, its stored value."""

    run_id: str
    run: RunRecord | None
    now: datetime
    payload: Value | None
    state: State
    deployment_id: str | None


def plan_event(req: CreateEventRequest, ctx: Ctx) -> Plan:
    rule = RULES.get(req.event_type)
    if rule is None:
        raise InvalidInputError(f"{req.event_type} cannot be written by a caller", field="eventType")
    return rule(req, ctx)


_WITHOUT_PAYLOAD: dict[str, set[str]] = {t: {name} for t, name in PAYLOAD_NAME.items()}


def new_event(req: CreateEventRequest, ctx: Ctx, **extra: JSONValue) -> NewEvent:
    """The event as stored: its data as the caller's model dumps it (unknown fields kept), minus the payload
    (stored apart, in ``ctx.payload``: the dump leaves it out rather than converting it to throw it away)."""
    data = req.data()
    raw: dict[str, JSONValue] = data.__pydantic_serializer__.to_python(
        data, mode="json", by_alias=True, exclude_none=True, exclude=_WITHOUT_PAYLOAD.get(req.event_type))
    if extra:
        raw.update(extra)
    return NewEvent(req.event_type, req.correlation_id, raw, ctx.payload, req.spec_version, data_text(raw))


def _run(ctx: Ctx) -> RunRecord:
    if ctx.run is None:
        raise RunNotFoundError(f"run {ctx.run_id} not found")
    return ctx.run


def new_run_record(run_id: str, data: dict[str, JSONValue], now: datetime, spec_version: int | None,
                   deployment_id: str | None, context: Value | None) -> RunRecord:
    attributes = data.get("attributes") or {}
    return RunRecord(run_id=run_id, workflow_name=str(data["workflowName"]),
                     deployment_id=data.get("deploymentId") or deployment_id,
                     spec_version=spec_version or SPEC_VERSION_CURRENT, status="pending", created_at=now,
                     updated_at=now, context=context, attributes=dict(attributes),
                     seq=0, seq_in_band=IN_BAND_SEQ_AT_RUN_CREATION)


# ---------------------------------------------------------------- run events


def _run_started(req: CreateEventRequest, ctx: Ctx) -> Plan:
    run = ctx.run
    if run is None:  # a resilient start: it creates the run when it carries what run_created would
        data = req.data().model_dump(mode="json", by_alias=True, exclude_none=True)
        if not data.get("workflowName") or "input" not in req.data().model_fields_set:
            raise RunNotFoundError(f"run {ctx.run_id} not found (run_started without workflowName and input "
                                   "cannot create it)")
        rest = {k: v for k, v in data.items() if k != "input"}
        context = data.get("executionContext")
        record = new_run_record(ctx.run_id, data, ctx.now, req.spec_version, ctx.deployment_id,
                                json_value(context) if context is not None else None)
        record.status, record.started_at = "running", ctx.now
        created = NewEvent("run_created", None, rest, ctx.payload, req.spec_version, data_text(rest))
        started = NewEvent("run_started", None, {}, None, req.spec_version)
        return Plan([created, started], creates_run=record, shows="run")
    if run.status == "running":
        return Plan([], noop=True, shows="run")
    if run.status != "pending":
        raise RunGoneError(f"run {ctx.run_id} is {run.status}: it cannot start")

    def apply(run: RunRecord, slots: list[int], now: datetime) -> None:
        run.status = "running"
        run.started_at = run.started_at or now

    return Plan([NewEvent("run_started", None, {}, None, req.spec_version)], apply, shows="run")


def _run_terminal(status: str, carries_value: bool) -> Callable[[CreateEventRequest, Ctx], Plan]:
    def planner(req: CreateEventRequest, ctx: Ctx) -> Plan:
        run = _run(ctx)
        if run.terminal:
            if run.status == status == "cancelled":
                return Plan([], noop=True, shows="run")
            raise EntityConflictError(f"run {ctx.run_id} is already {run.status}")
        has_value = carries_value and ctx.payload is not None
        data = req.data()
        error_code = data.error_code if isinstance(data, RunFailedData) else None

        def apply(run: RunRecord, slots: list[int], now: datetime) -> None:
            run.status, run.completed_at = status, now
            if has_value:
                run.end_slot = slots[0]  # the output or error stays in the event
            if error_code:
                run.error_code = error_code
            release_hooks(ctx.state, run, now, status)

        return Plan([new_event(req, ctx)], apply, shows="run")

    return planner


def release_hooks(state: State, run: RunRecord, now: datetime, status: str) -> None:
    """A run's end closes its hooks (``world/hook_ends.py``): it removes the live ones and frees their tokens,
    except tokens still under retention: those stay held (and their hooks readable, closed) until the retention
    passes. Each token's record stays, released with its run's end ``status``, until a new hook claims it."""
    for hook_id, hook in list(run.hooks.items()):
        token = state.tokens.get(hook.token)
        owned = token is not None and token.hook_id == hook_id
        if token is not None and owned:
            token.released, token.end_status = True, status
        if hook_fate(hook.retention_until, now) == "retained":
            continue
        del run.hooks[hook_id]
        if state.hook_runs.get(hook_id) == run.run_id:
            del state.hook_runs[hook_id]


def _attr_set(req: CreateEventRequest, ctx: Ctx) -> Plan:
    run = _run(ctx)
    if run.terminal:
        raise EntityConflictError(f"run {ctx.run_id} is {run.status}: its attributes are final")
    data = req.data()
    assert isinstance(data, AttrSetData)
    changes = [(c.key, c.value) for c in data.changes]

    def apply(run: RunRecord, slots: list[int], now: datetime) -> None:
        for key, value in changes:
            if value is None:
                run.attributes.pop(key, None)
            else:
                run.attributes[key] = value

    return Plan([new_event(req, ctx)], apply, shows="run")


# ---------------------------------------------------------------- steps


def _step_created(req: CreateEventRequest, ctx: Ctx) -> Plan:
    run = _run(ctx)
    step_id = req.correlation_id or ""
    data = req.data()
    assert isinstance(data, StepCreatedData)
    has_input = ctx.payload is not None
    name, spec = data.step_name, req.spec_version

    def apply(run: RunRecord, slots: list[int], now: datetime) -> None:
        run.steps[step_id] = StepRecord(name, "pending", now, now, spec, input_slot=slots[0] if has_input else None)

    conflict = EntityConflictError(f"step {step_id} already exists") if step_id in run.steps else None
    return Plan([new_event(req, ctx)], apply, require_alive=True, commit_error=conflict, open_delta=1,
                shows="step", entity_id=step_id)


def plan_born_running(created: CreateEventRequest, started: CreateEventRequest, ctx: Ctx) -> Plan:
    """step_created followed by step_started in one batch: the step is born running at attempt 1."""
    plan = _step_created(created, ctx)
    create = plan.apply
    assert create is not None
    extra = started.data().model_extra or {}
    owner = extra.get("ownerMessageId")
    lease = lease_end(ctx.now, requested_lease(extra))
    step_id = plan.entity_id

    def apply(run: RunRecord, slots: list[int], now: datetime) -> None:
        create(run, slots, now)
        step = run.steps[step_id]
        step.status, step.attempt, step.started_at, step.lease_until = "running", 1, now, lease
        if isinstance(owner, str) and owner:
            step.owner = owner

    plan.apply = apply
    plan.events.append(_started_event(started, Ctx(ctx.run_id, ctx.run, ctx.now, None, ctx.state,
                                                   ctx.deployment_id), 1, lease))
    return plan


def _started_event(req: CreateEventRequest, ctx: Ctx, attempt: int, lease: datetime) -> NewEvent:
    """step_started as the log keeps it: the attempt and the lease's end (not the seconds asked for)."""
    event = new_event(req, ctx, attempt=attempt, **{LEASE_UNTIL_FIELD: lease.isoformat(timespec="microseconds")})
    if event.data.pop(LEASE_SECONDS_FIELD, None) is not None:
        event.data_text = data_text(event.data)
    return event


def _existing_step(req: CreateEventRequest, ctx: Ctx) -> StepRecord:
    run = _run(ctx)
    step = run.steps.get(req.correlation_id or "")
    if step is None:
        raise StepNotFoundError(f"step {req.correlation_id} not found in run {ctx.run_id}")
    if step.status in TERMINAL_STEP_STATUSES:
        raise EntityConflictError(f"step {req.correlation_id} is already {step.status}")
    return step


def _step_started(req: CreateEventRequest, ctx: Ctx) -> Plan:
    step = _existing_step(req, ctx)
    if step.retry_after is not None and step.retry_after > ctx.now:
        wait = (step.retry_after - ctx.now).total_seconds()
        raise TooEarlyError(f"step {req.correlation_id} may not start before {step.retry_after.isoformat()}",
                            retry_after=max(1.0, float(int(wait + 0.999))))
    extra = req.data().model_extra or {}
    owner: Any = extra.get("ownerMessageId")
    lease = lease_end(ctx.now, requested_lease(extra))
    # A duplicate message while the step runs under the first one's message id and lease: only a redelivery of
    # that message may start it again; once the lease has passed, this delivery takes it over (world.leases).
    start_verdict(status=step.status, holder=step.owner, owner=owner if isinstance(owner, str) else None,
                  lease_until=step.lease_until, started=step.updated_at, now=ctx.now, step_id=req.correlation_id)
    attempt = step.attempt + 1

    def apply(run: RunRecord, slots: list[int], now: datetime) -> None:
        step.status, step.attempt, step.updated_at = "running", attempt, now
        step.started_at = step.started_at or now
        step.owner = owner if isinstance(owner, str) else None
        step.retry_after = None
        step.lease_until = lease

    return Plan([_started_event(req, ctx, attempt, lease)], apply, require_alive=True, shows="step",
                entity_id=req.correlation_id or "")


def _step_result(status: str | None, value: Literal["output", "error"]) -> Callable[[CreateEventRequest, Ctx], Plan]:
    """step_completed / step_failed (``status``), or step_retrying (None: back to pending, maybe not before
    ``retryAfter``). A step that already ran may still record its end after its run ended."""

    def planner(req: CreateEventRequest, ctx: Ctx) -> Plan:
        step = _existing_step(req, ctx)
        has_value = ctx.payload is not None
        data = req.data()
        retry_after = data.retry_after if isinstance(data, StepRetryingData) else None

        def apply(run: RunRecord, slots: list[int], now: datetime) -> None:
            slot = slots[0] if has_value else None
            if value == "output":
                step.output_slot = slot
            else:
                step.error_slot = slot
            step.updated_at = now
            if status is None:
                step.status = "pending"
                step.retry_after = retry_after.astimezone(UTC) if retry_after is not None else None
            else:
                step.status, step.completed_at = status, now

        return Plan([new_event(req, ctx)], apply, open_delta=0 if status is None else -1, shows="step",
                    entity_id=req.correlation_id or "")

    return planner


# ---------------------------------------------------------------- hooks


def _hook_created(req: CreateEventRequest, ctx: Ctx) -> Plan:
    run = _run(ctx)
    data = req.data()
    assert isinstance(data, HookCreatedData)
    hook_id, token = req.correlation_id or "", data.token
    retention = data.token_retention_until.astimezone(UTC) if data.token_retention_until else None
    check_hook_token(token, retention, ctx.now)
    held = ctx.state.tokens.get(token)
    exists = EntityConflictError(f"hook {hook_id} already exists")
    if hook_id in run.hooks:
        return Plan([new_event(req, ctx)], require_alive=True, commit_error=exists)
    if held is not None and not held.free_at(ctx.now):
        if held.run_id == ctx.run_id and held.hook_id == hook_id:
            return Plan([new_event(req, ctx)], require_alive=True, commit_error=exists)
        # The token is held by another hook: record hook_conflict naming its run; no hook is created.
        conflict = NewEvent("hook_conflict", hook_id, {"token": token, "conflictingRunId": held.run_id}, None,
                            req.spec_version)
        return Plan([conflict], require_alive=True)
    taken = exists if hook_id in ctx.state.hook_runs else None
    has_metadata = ctx.payload is not None
    is_webhook, spec = bool(data.is_webhook), req.spec_version

    def apply(run: RunRecord, slots: list[int], now: datetime) -> None:
        run.hooks[hook_id] = HookRecord(token, is_webhook, now, now, spec,
                                        metadata_slot=slots[0] if has_metadata else None, retention_until=retention)
        ctx.state.hook_runs[hook_id] = run.run_id
        ctx.state.tokens[token] = TokenRecord(run.run_id, hook_id, retention)

    return Plan([new_event(req, ctx)], apply, require_alive=True, commit_error=taken, shows="hook",
                entity_id=hook_id)


def _hook_received(req: CreateEventRequest, ctx: Ctx) -> Plan:
    run = _run(ctx)
    hook_id = req.correlation_id or ""
    data = req.data()
    assert isinstance(data, HookReceivedData)
    resume_id = data.resume_id
    repeat: WorldError | None = None
    if resume_id is not None and (hook_id, resume_id) in run.resumes:
        repeat = HookAlreadyReceivedError(f"hook {hook_id} already received this resume id", hook_id=hook_id,
                                          event_id=slot_to_event_id(run.resumes[(hook_id, resume_id)]))
    missing = None if hook_id in run.hooks else HookNotFoundError(f"hook {hook_id} not found in run {ctx.run_id}")

    def apply(run: RunRecord, slots: list[int], now: datetime) -> None:
        if resume_id is not None:
            run.resumes[(hook_id, resume_id)] = slots[-1]

    return Plan([new_event(req, ctx)], apply, require_alive=True, resume_error=repeat, commit_error=missing)


def _hook_disposed(req: CreateEventRequest, ctx: Ctx) -> Plan:
    run = _run(ctx)
    hook_id = req.correlation_id or ""
    hook = run.hooks.get(hook_id)
    if hook is None:
        raise HookNotFoundError(f"hook {hook_id} not found in run {ctx.run_id}")
    state = ctx.state

    def apply(run: RunRecord, slots: list[int], now: datetime) -> None:
        del run.hooks[hook_id]
        if state.hook_runs.get(hook_id) == run.run_id:
            del state.hook_runs[hook_id]
        token = state.tokens.get(hook.token)
        if token is not None and token.hook_id == hook_id:
            del state.tokens[hook.token]  # free at once, even under retention

    return Plan([new_event(req, ctx, token=hook.token)], apply)


# ---------------------------------------------------------------- waits


def _wait_created(req: CreateEventRequest, ctx: Ctx) -> Plan:
    run = _run(ctx)
    wait_id = req.correlation_id or ""
    data = req.data()
    assert isinstance(data, WaitCreatedData)
    resume_at, spec = data.resume_at.astimezone(UTC), req.spec_version

    def apply(run: RunRecord, slots: list[int], now: datetime) -> None:
        run.waits[wait_id] = WaitRecord("waiting", resume_at, now, now, spec)

    conflict = EntityConflictError(f"wait {wait_id} already exists") if wait_id in run.waits else None
    return Plan([new_event(req, ctx)], apply, require_alive=True, commit_error=conflict, shows="wait",
                entity_id=wait_id)


def _wait_completed(req: CreateEventRequest, ctx: Ctx) -> Plan:
    run = _run(ctx)
    wait_id = req.correlation_id or ""
    wait = run.waits.get(wait_id)
    if wait is None:
        raise EventNotFoundError(f"wait {wait_id} not found in run {ctx.run_id}")
    if wait.status == "completed":
        raise EntityConflictError(f"wait {wait_id} is already completed")

    def apply(run: RunRecord, slots: list[int], now: datetime) -> None:
        wait.status, wait.completed_at, wait.updated_at = "completed", now, now

    return Plan([new_event(req, ctx)], apply, require_alive=True, shows="wait", entity_id=wait_id)


RULES: dict[str, Callable[[CreateEventRequest, Ctx], Plan]] = {
    "run_started": _run_started,
    "run_completed": _run_terminal("completed", True),
    "run_failed": _run_terminal("failed", True),
    "run_cancelled": _run_terminal("cancelled", False),
    "attr_set": _attr_set,
    "step_created": _step_created,
    "step_started": _step_started,
    "step_retrying": _step_result(None, "error"),
    "step_completed": _step_result("completed", "output"),
    "step_failed": _step_result("failed", "error"),
    "hook_created": _hook_created,
    "hook_received": _hook_received,
    "hook_disposed": _hook_disposed,
    "wait_created": _wait_created,
    "wait_completed": _wait_completed,
}
"""Every event type a caller may write except run_created (the writer's, it makes the run)."""
