"""``events.create``, ``events.create_batch`` and the log reads of the in-memory World.

A write parses and checks its request (``world.events.parse_event_request``, the shared models), copies its
user value, and then decides and commits with no ``await`` in between: on one event loop nothing else can run
inside a commit, so slots are allocated at commit and densely, the in-band fence and every entity condition hold
at the moment of the append, and a refused write changes nothing. The order in which errors are decided is the
AWS World's (``awsworld.aws.log.event_writer``): the fence first, then what it decides before its commit, then a
repeated resume id, the run's status, and the entity conditions its commit would fail.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from ...world.clock import Clock
from ...world.cursors import check_limit, encode_cursor, slot_after
from ...world.entities import ResolveData
from ...world.errors import (
    HookAlreadyReceivedError,
    InBandSupersededError,
    InvalidInputError,
    LogMovedError,
    RunGoneError,
    RunNotFoundError,
    WorldError,
)
from ...world.events import (
    BatchEventOutcome,
    CreateEventRequest,
    Event,
    EventBatchResult,
    EventResult,
    LogSnapshot,
    parse_event_request,
)
from ...world.ids import check_entity_id, event_id_to_slot, new_run_id
from ...world.pages import EventPage
from ...world.watch import commit_due
from ...world.write_rules import batch_requests, check_run_id, check_write_params, failed_outcome
from .records import (
    PAYLOAD_NAME,
    RunRecord,
    State,
    build,
    event_model,
    hook_model,
    new_stored_event,
    run_model,
    step_model,
    wait_model,
)
from .rules import Ctx, Plan, new_event, new_run_record, plan_born_running, plan_event
from .values import NULL, Value, json_value, store_value
from .watch import set_due

MAX_PAGE = 1000

EventInput = CreateEventRequest | Mapping[str, Any]


@dataclass(slots=True)
class _Unit:
    """One request of a batch, or the step_created + step_started pair that makes a step born running."""

    reqs: list[CreateEventRequest]
    payload: Value | None = None

    @property
    def req(self) -> CreateEventRequest:
        return self.reqs[0]


class MemoryLog:
    def __init__(self, state: State, clock: Clock, deployment_id: str | None, max_value_bytes: int | None,
                 committed: Callable[[], None]) -> None:
        self.state = state
        self.clock = clock
        self.deployment_id = deployment_id
        self.max_value_bytes = max_value_bytes
        self._committed = committed  # wakes whoever waits for a change (MemoryStorage.wait_until)

    # ------------------------------------------------------------------ writes

    async def create(
        self,
        run_id: str | None,
        event: EventInput,
        *,
        event_count: int | None = None,
        in_band: bool = False,
        expected_seq_in_band: int | None = None,
        resolve_data: ResolveData = "all",
        after_step_body: bool = False,  # advisory (patience under throttling): nothing throttles here
    ) -> EventResult:
        req = parse_event_request(event)
        check_write_params(req, in_band, expected_seq_in_band, event_count)
        if req.event_type == "run_created":
            return self._create_run(run_id, req, resolve_data)
        run_id = check_run_id(run_id)
        payload = self._payload(req)
        # ---- from here to the commit: no await
        now = self.clock.now()
        run = self.state.runs.get(run_id)
        if run is None and req.event_type != "run_started":
            raise RunNotFoundError(f"run {run_id} not found")
        if run is not None and in_band:
            _fence(run, expected_seq_in_band)
        plan = plan_event(req, Ctx(run_id, run, now, payload, self.state, self.deployment_id))
        if plan.noop:
            assert run is not None
            return build(EventResult, run=run_model(run, resolve_data))
        error = self._refusal(run, plan)
        if error is not None:
            if isinstance(error, HookAlreadyReceivedError) and run is not None and error.event_id is not None:
                error.event = event_model(run_id, run.events[event_id_to_slot(error.event_id) - 1], resolve_data)
            raise error
        seq_in_band = _seq_in_band_after(run, plan, in_band, expected_seq_in_band)
        run, [slots] = self._commit(run_id, run, [plan], now, seq_in_band)
        result = self._result(run, slots[-1] if slots else None, self._shown(run, plan, resolve_data), resolve_data,
                              seq_in_band)
        if event_count is not None and slots and slots[-1] - 1 > event_count:
            report = self._between(run, event_count, slots[-1], resolve_data)
            result.events, result.cursor, result.has_more = report.data, report.cursor, report.has_more
        return result

    async def create_batch(
        self,
        run_id: str,
        events: Sequence[EventInput],
        *,
        in_band: bool = False,
        expected_seq_in_band: int | None = None,
        resolve_data: ResolveData = "all",
        atomic: bool = False,
        stamp: datetime | None = None,
        expect_seq: int | None = None,
    ) -> EventBatchResult:
        """As the AWS World's: ``atomic`` (all land or none, the first refusal raised), ``stamp`` (an in-band
        writer's time for the batch, never more than a second ahead of the clock) and ``expect_seq`` (land right
        after that many events or raise ``LogMovedError``)."""
        run_id = check_run_id(run_id)
        units = [_Unit(group) for group in batch_requests(events, in_band=in_band,
                                                          expected_seq_in_band=expected_seq_in_band,
                                                          stamp=stamp, now=self.clock.now())]
        for unit in units:
            unit.payload = self._payload(unit.req)
        # ---- from here to the commit: no await
        now = stamp.astimezone(UTC) if stamp is not None else self.clock.now()
        run = self.state.runs.get(run_id)
        if run is None:
            raise RunNotFoundError(f"run {run_id} not found")
        if expect_seq is not None and run.seq != expect_seq:
            raise LogMovedError(f"run {run_id} holds {run.seq} events, not {expect_seq}", seq=run.seq)
        if in_band:
            _fence(run, expected_seq_in_band)
        outcomes: dict[int, BatchEventOutcome] = {}
        plans: dict[int, Plan] = {}
        for i, unit in enumerate(units):
            ctx = Ctx(run_id, run, now, unit.payload, self.state, self.deployment_id)
            try:
                plans[i] = plan_born_running(unit.reqs[0], unit.reqs[1], ctx) if len(unit.reqs) == 2 \
                    else plan_event(unit.req, ctx)
            except WorldError as error:
                if atomic:
                    raise
                outcomes[i] = failed_outcome(error)

        def refuse(error_of: Callable[[Plan], WorldError | None]) -> None:
            """Drop each plan ``error_of`` finds an error in, as its outcome (an atomic batch raises the first)."""
            for i, plan in list(plans.items()):
                error = error_of(plan)
                if error is not None:
                    if atomic:
                        raise error
                    outcomes[i] = failed_outcome(error)
                    del plans[i]

        # What the AWS World's commit decides, in its order: repeated resume ids, the run's status, entities.
        refuse(lambda plan: plan.resume_error)
        if run.terminal and any(p.require_alive for p in plans.values()):
            raise RunGoneError(f"run {run_id} is {run.status}")
        refuse(lambda plan: plan.commit_error)
        seq_in_band: int | None = None
        created: dict[int, BatchEventOutcome] = {}  # born running: the step_created outcome, with its own event
        if plans:
            landing = sorted(plans)
            ordered = [plans[i] for i in landing]
            seq_in_band = _seq_in_band_after(run, ordered[0], in_band, expected_seq_in_band,
                                             sum(len(p.events) for p in ordered))
            run, placed = self._commit(run_id, run, ordered, now, seq_in_band)
            for i, plan, slots in zip(landing, ordered, placed, strict=True):
                shown = self._shown(run, plan, resolve_data)
                outcomes[i] = _landed(self._result(run, slots[-1] if slots else None, shown, resolve_data,
                                                   seq_in_band))
                if len(units[i].reqs) == 2:
                    created[i] = _landed(self._result(run, slots[0], shown, resolve_data, seq_in_band))
        flat: list[BatchEventOutcome] = []
        for i, unit in enumerate(units):
            outcome = outcomes[i]
            if len(unit.reqs) == 2:  # born running: one outcome per request
                flat.append(created.get(i, outcome))
            flat.append(outcome)
        return build(EventBatchResult, results=flat, seq_in_band=seq_in_band)

    # ------------------------------------------------------------------ the commit

    def _create_run(self, run_id: str | None, req: CreateEventRequest, resolve: ResolveData) -> EventResult:
        """run_created: a client-given id is idempotent (the existing run comes back, nothing is written)."""
        run_id = check_entity_id(run_id, "runId") if run_id else new_run_id()
        data = req.data().model_dump(mode="json", by_alias=True, exclude_none=True)
        payload = self._payload(req) or NULL
        existing = self.state.runs.get(run_id)
        if existing is not None:
            return build(EventResult, run=run_model(existing, resolve))
        now = self.clock.now()
        context = data.get("executionContext")
        run = new_run_record(run_id, data, now, req.spec_version, self.deployment_id,
                             json_value(context) if context is not None else None)
        first = new_event(req, Ctx(run_id, run, now, payload, self.state, self.deployment_id))
        first.spec_version = run.spec_version
        self.state.runs[run_id] = run
        self._append(run, [first], now)
        run.seq = 1
        set_due(self.state, run, commit_due(now, ends_run=False))
        self._committed()
        return build(EventResult, event=event_model(run_id, run.events[0], resolve),
                                           run=run_model(run, resolve), seq_in_band=1)

    def _commit(self, run_id: str, run: RunRecord | None, plans: list[Plan], now: datetime,
                seq_in_band: int | None) -> tuple[RunRecord, list[list[int]]]:
        """Append every plan's events at the next free slots and make their entity changes (no await)."""
        created = next((p.creates_run for p in plans if p.creates_run is not None), None)
        if created is not None:
            run = created
            self.state.runs[run_id] = run
        assert run is not None
        placed = [self._append(run, p.events, now) for p in plans]
        run.seq = len(run.events)
        run.updated_at = now
        if seq_in_band is not None:
            run.seq_in_band = seq_in_band
        for plan, slots in zip(plans, placed, strict=True):
            run.open_steps += plan.open_delta
            if plan.apply is not None:
                plan.apply(run, slots, now)
        leases = [lease for p in plans if p.events and p.events[-1].event_type == "step_started"
                  and (lease := run.steps[p.entity_id].lease_until) is not None]
        set_due(self.state, run, commit_due(now, ends_run=run.terminal, leases=leases))
        self._committed()
        return run, placed

    @staticmethod
    def _append(run: RunRecord, events: list[Any], now: datetime) -> list[int]:
        slots = []
        for new in events:
            slot = len(run.events) + 1
            run.append(new_stored_event(slot, new.event_type, new.correlation_id, new.data, new.data_text,
                                        new.payload, now, new.spec_version))
            slots.append(slot)
        return slots

    @staticmethod
    def _refusal(run: RunRecord | None, plan: Plan) -> WorldError | None:
        if plan.resume_error is not None:
            return plan.resume_error
        if run is not None and plan.require_alive and run.terminal:
            return RunGoneError(f"run {run.run_id} is {run.status}")
        return plan.commit_error

    @staticmethod
    def _shown(run: RunRecord, plan: Plan, resolve: ResolveData) -> dict[str, Any]:
        """The entity a write's answer carries (the two outcomes of a born-running pair share it)."""
        if plan.shows == "run":
            return {"run": run_model(run, resolve)}
        if plan.shows == "step":
            return {"step": step_model(run, plan.entity_id, run.steps[plan.entity_id], resolve)}
        if plan.shows == "hook":
            return {"hook": hook_model(run, plan.entity_id, run.hooks[plan.entity_id], resolve)}
        if plan.shows == "wait":
            return {"wait": wait_model(run.run_id, plan.entity_id, run.waits[plan.entity_id])}
        return {}

    @staticmethod
    def _result(run: RunRecord, slot: int | None, shown: dict[str, Any], resolve: ResolveData,
                seq_in_band: int | None) -> EventResult:
        """A write's answer: the event at ``slot`` (the last one it wrote, if any) and the entity it changed."""
        event = event_model(run.run_id, run.events[slot - 1], resolve) if slot else None
        return build(EventResult, event=event, seq_in_band=seq_in_band, open_steps=run.open_steps, **shown)

    def _payload(self, req: CreateEventRequest) -> Value | None:
        """The event's user value, checked and copied, when its request carries one (even a null)."""
        name = PAYLOAD_NAME.get(req.event_type)
        if name is None:
            return None
        data = req.data()
        extra = data.model_extra or {}
        if name in data.model_fields_set:
            value = getattr(data, name)
        elif name in extra:
            value = extra[name]
        else:
            return None
        if isinstance(value, BaseModel):
            value = value.model_dump(mode="json", by_alias=True, exclude_none=True)
        return store_value(value, f"eventData.{name}", self.max_value_bytes)

    # ------------------------------------------------------------------ reads

    def run(self, run_id: str) -> RunRecord:
        run = self.state.runs.get(run_id)
        if run is None:
            raise RunNotFoundError(f"run {run_id} not found")
        return run

    async def list(self, run_id: str, *, cursor: str | None = None, limit: int = MAX_PAGE,
                   resolve_data: ResolveData = "all") -> EventPage:
        check_limit(limit, MAX_PAGE)
        after = slot_after(cursor)
        run = self.run(run_id)
        chunk = run.events[after:after + limit]
        data = [event_model(run_id, e, resolve_data) for e in chunk]
        return build(EventPage, data=data, cursor=encode_cursor({"s": chunk[-1].slot if chunk else after}),
                                         has_more=len(run.events) > after + limit, snapshot=_snapshot(run))

    async def list_by_correlation_id(self, run_id: str, correlation_id: str, *, cursor: str | None = None,
                                     limit: int = MAX_PAGE, resolve_data: ResolveData = "all") -> EventPage:
        check_limit(limit, MAX_PAGE)
        if not correlation_id:
            raise InvalidInputError("correlation_id is required", field="correlationId")
        after = slot_after(cursor)
        run = self.run(run_id)
        slots = run.by_correlation.get(correlation_id, [])
        start = bisect.bisect_right(slots, after)
        page = slots[start:start + limit]
        data = [event_model(run_id, run.events[s - 1], resolve_data) for s in page]
        return build(EventPage, data=data, cursor=encode_cursor({"s": page[-1] if page else after}),
                                         has_more=len(slots) > start + limit, snapshot=_snapshot(run))

    def _between(self, run: RunRecord, after: int, before: int, resolve: ResolveData) -> EventPage:
        """The report of a write that landed at ``before`` while its writer held ``after`` events."""
        limit = min(MAX_PAGE, before - after - 1)
        chunk = run.events[after:after + limit]
        data: list[Event] = [event_model(run.run_id, e, resolve) for e in chunk]
        return build(EventPage, data=data, cursor=encode_cursor({"s": chunk[-1].slot if chunk else after}),
                                         has_more=before - 1 > after + limit, snapshot=None)


def _snapshot(run: RunRecord) -> LogSnapshot:
    return build(LogSnapshot, seq=run.seq, seq_in_band=run.seq_in_band)


def _fence(run: RunRecord, expected: int | None) -> None:
    """The in-band fence, decided before anything else the write does: a stale writer touches nothing."""
    if run.seq_in_band != expected:
        raise InBandSupersededError(
            f"run {run.run_id} moved on: in-band count is {run.seq_in_band}, not {expected}",
            seq=run.seq, seq_in_band=run.seq_in_band)


def _seq_in_band_after(run: RunRecord | None, first: Plan, in_band: bool, expected: int | None,
                       count: int | None = None) -> int | None:
    """The in-band count after an accepted write: in-band writes advance it by the positions they take (a
    resilient start made in-band counts both of its events); out-of-band writes report none."""
    if not in_band:
        return None
    count = len(first.events) if count is None else count
    if first.creates_run is not None or run is None:
        return count
    assert expected is not None
    return expected + count






def _landed(result: EventResult) -> BatchEventOutcome:
    return build(BatchEventOutcome, status=200, result=result, error=None, message=None)



