"""The in-memory World's write path and log reads: the engine primitives (``world/shared/storage.py``) that commit a
write and read the log.

``WorldStorage`` parses and checks a request and has its value stored (``store_value``: a checked copy); then a
write decides (``world.rules``) and commits with no ``await`` in between: on one event loop nothing else runs
inside a commit, so slots are allocated densely at the commit, every check a decision carries is evaluated
against the records at that moment (``_failed``), and a refused write changes nothing. What this module adds to
the rules is storage: the records a decision reads and how its states and events are stored.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from ..world.clock import Clock
from ..world.entities import ResolveData
from ..world.errors import WorldError
from ..world.events import BatchEventOutcome, CreateEventRequest, Event, EventResult, LogSnapshot
from ..world.ids import IN_BAND_SEQ_AT_RUN_CREATION, slot_to_event_id
from ..world.limits import looks_first
from ..world.rules import Decision, Failed, NewEvent, NewRun, RunState, View, decide, decide_unit, refusals
from ..world.rules.book import READS, due_after, read_token
from ..world.rules.checks import Found, failed
from ..world.rules.conditions import holds
from ..world.rules.decision import NOTHING_FAILED
from ..world.rules.hooks import hook_status, token_owned_by
from ..world.rules.log import check_expected_seq, check_fence, seq_in_band_after
from ..world.rules.requests import VALUE_FIELD, carried_value, failed_outcome
from ..world.rules.runs import run_created, run_missing
from ..world.rules.state import placed
from ..world.shared.answers import build, hook_answer, step_answer, wait_answer
from ..world.shared.storage import LogSlice, Unit
from .records import RunRecord, State, StoredEvent, event_model, run_model
from .values import NULL, Value, data_text, json_value, store_value
from .watch import run_lifetime_end, set_due

Placed = tuple[Decision, Value | None]


class MemoryLog:
    def __init__(self, state: State, clock: Clock, deployment_id: str | None, max_value_bytes: int | None,
                 status_changed: Callable[[], None]) -> None:
        self.state = state
        self.clock = clock
        self.deployment_id = deployment_id
        self.max_value_bytes = max_value_bytes
        self._status_changed = status_changed  # wakes whoever waits for a run's status (MemoryStorage.changed)
        self._found = Found()  # what _failed found, refilled for each decision (no allocation per write)
        self._run_state: RunState | None = None  # the last view's run, reused while the run reads the same

    # ------------------------------------------------------------------ writes

    async def store_value(self, run_id: str, req: CreateEventRequest) -> Value | None:
        return self._value(req)

    async def store_values(self, run_id: str, units: list[Unit]) -> list[Value | None]:
        values: list[Value | None] = []
        for unit in units:  # a loop, not a comprehension: a frame each, on every write
            values.append(self._value(unit[0]))
        return values

    async def write_event(self, run_id: str, req: CreateEventRequest, value: Value | None, *,
                          event_count: int | None, in_band: bool, expected_seq_in_band: int | None,
                          resolve: ResolveData, patient: bool) -> EventResult:
        """``event_count`` and ``patient`` are advisory (the run's seq guessed, patience under throttling):
        memory reads the run as it is, and nothing throttles here."""
        now = self.clock.now()  # from here to the commit: no await
        run = self.state.runs.get(run_id)
        if run is not None and in_band:
            check_fence(run_id, run.seq, run.seq_in_band, expected_seq_in_band)
        decision = decide(req, self._view(run_id, run, req, now, value))
        if decision.noop:
            assert run is not None
            return build(EventResult, run=run_model(run, resolve))
        refused = refusals(run_id, [(decision, self._failed(run, decision, now))]).first
        if refused is not None:
            raise refused
        seq_in_band = seq_in_band_after(in_band, expected_seq_in_band, len(decision.events),
                                        creates_run=run is None)
        run, [slots], [open_after] = self._commit(run_id, run, [(decision, value)], now, seq_in_band)
        return self._result(run, self._shown(run, decision, resolve), slots[-1] if slots else None,
                            resolve, seq_in_band, open_after)

    async def write_batch(self, run_id: str, units: list[Unit], values: list[Value | None], in_band: bool,
                          expected_seq_in_band: int | None, resolve: ResolveData, atomic: bool,
                          stamp: datetime | None, expect_seq: int | None
                          ) -> tuple[list[BatchEventOutcome], dict[int, BatchEventOutcome], int | None]:
        now = stamp.astimezone(UTC) if stamp is not None else self.clock.now()  # from here to the commit: no await
        run = self.state.runs.get(run_id)
        if run is None:
            raise run_missing(run_id)
        check_expected_seq(run_id, run.seq, expect_seq)
        if in_band:
            check_fence(run_id, run.seq, run.seq_in_band, expected_seq_in_band)
        outcomes: dict[int, BatchEventOutcome] = {}
        paired: dict[int, BatchEventOutcome] = {}  # a born-running pair's step_created, by unit
        decided: dict[int, Decision] = {}
        checked: list[tuple[Decision, Failed]] = []  # each decision with its checks against the records now
        for i, unit in enumerate(units):
            try:
                decision = decided[i] = decide_unit(unit, self._view(run_id, run, unit[0], now, values[i]))
            except WorldError as error:
                if atomic:
                    raise
                outcomes[i] = failed_outcome(error)
                continue
            checked.append((decision, self._failed(run, decision, now)))  # pure: nothing changes until the commit
        order = list(decided)  # in unit order: filled in it
        refused = refusals(run_id, checked)
        if atomic and refused.first is not None:
            raise refused.first
        if refused.request is not None:
            raise refused.request
        for k, error in refused.writes.items():
            outcomes[order[k]] = failed_outcome(error)
        landing: list[int] = []  # one loop, not three comprehensions: a frame each, on every write
        writes: list[Placed] = []
        count = 0
        for i in order:
            if i not in outcomes:
                landing.append(i)
                writes.append((decided[i], values[i]))
                count += len(decided[i].events)
        seq_in_band = None
        if landing:
            seq_in_band = seq_in_band_after(in_band, expected_seq_in_band, count, creates_run=False)
            run, placed_slots, opens = self._commit(run_id, run, writes, now, seq_in_band)
            for i, slots, open_after in zip(landing, placed_slots, opens, strict=True):
                shown = self._shown(run, decided[i], resolve)
                outcomes[i] = _landed(self._result(run, shown, slots[-1], resolve, seq_in_band, open_after))
                if len(units[i]) == 2:  # born running: the step_created's outcome, with its own event
                    paired[i] = _landed(self._result(run, shown, slots[0], resolve, seq_in_band, open_after))
        return [outcomes[i] for i in range(len(units))], paired, seq_in_band

    # ------------------------------------------------------------------ deciding and committing

    def _view(self, run_id: str, run: RunRecord | None, req: CreateEventRequest, now: datetime,
              value: Value | None) -> View:
        """What the rule of ``req`` reads, from the records (this World knows everything it holds)."""
        if run is None:
            return View(run_id, now, carries_value=value is not None, deployment_id=self.deployment_id)
        cid, kind = req.correlation_id or "", req.event_type.split("_")[0]
        wanted = READS.get(req.event_type, frozenset())  # what the rule reads (world.rules.book)
        entity = "entity" in wanted
        hook = run.hooks.get(cid) if entity and kind == "hook" else None
        name = read_token(req, hook) if kind == "hook" else None  # only hook rules read a token
        known = self._run_state  # a run's writes come in a row: its state is often the last view's
        if known is None or known.run_id != run_id or known.status != run.status \
                or known.started_at is not run.started_at:
            known = self._run_state = RunState(run_id, run.status, run.started_at)
        return View(run_id, now, known,
                    step=run.steps.get(cid) if entity and kind == "step" else None, hook=hook,
                    wait=run.waits.get(cid) if entity and kind == "wait" else None,
                    hooks=tuple(run.hooks.values()) if "hooks" in wanted else (),
                    token=self.state.tokens.get(name) if name is not None else None,
                    carries_value=value is not None, deployment_id=self.deployment_id)

    def _failed(self, run: RunRecord | None, decision: Decision, now: datetime) -> Failed:
        """The decision's checks (``world.rules.checks``), against the records now."""
        if run is None or not decision.checks:
            return NOTHING_FAILED
        cid, kind = decision.entity_id, decision.kind
        token = decision.checked_token if kind == "hook" else None  # only hook decisions check a token
        entities = run.steps if kind == "step" else run.hooks if kind == "hook" else run.waits
        resume = run.resumes.get((cid, decision.resume_id)) if decision.resume_id is not None else None
        found = self._found  # entity_as_read and run_as_read stay True: nothing ran since the read
        found.run_status = run.status
        found.entity = cid in entities
        found.resumed, found.resume_slot = resume is not None, resume
        found.hook_id_taken = cid in self.state.hook_runs
        found.token = self.state.tokens.get(token) if token is not None else None
        found.resume_holder = self.state.resumes_once.get(decision.resume_id) \
            if decision.resume_once and decision.resume_id is not None else None
        return failed(decision, found, now)

    def _commit(self, run_id: str, run: RunRecord | None, decisions: list[Placed], now: datetime,
                seq_in_band: int | None) -> tuple[RunRecord, list[list[int]], list[int]]:
        """Append every decision's events at the next free slots and store what it changed (no await); the slots
        of each decision's events and the open steps right after it."""
        made = None
        for decision, _value in decisions:  # loops, not generators: a frame each, on every write
            if decision.creates_run is not None:
                made = decision.creates_run
                break
        status_before = run.status if made is None and run is not None else None  # (None: a run created here)
        if made is not None:
            run = self.state.runs[run_id] = _record(made)
        assert run is not None
        over = run.terminal
        placed_slots: list[list[int]] = []
        opens: list[int] = []
        committed: list[Decision] = []
        for decision, value in decisions:
            committed.append(decision)
            slots = self._append(run, decision.events, value, now)
            placed_slots.append(slots)
            self._apply(run, decision, slots, now)
            opens.append(run.open_steps)
        run.seq = len(run.events)
        run.updated_at = now
        if seq_in_band is not None:
            run.seq_in_band = seq_in_band
        set_due(self.state, run, due_after(committed, now, run_over=over,
                                           lifetime_end=run_lifetime_end(run) if made is not None else None))
        if run.status != status_before:
            self._status_changed()
        return run, placed_slots, opens

    def _apply(self, run: RunRecord, decision: Decision, slots: list[int], now: datetime) -> None:
        state, cid = self.state, decision.entity_id
        change = decision.run
        if change is not None:
            run.status = change.status or run.status
            run.started_at = change.started_at or run.started_at
            run.completed_at = change.completed_at or run.completed_at
            if change.end_value is not None:
                run.end_slot = slots[change.end_value.index]
            run.error_code = change.error_code or run.error_code
            for key, value in change.attributes:
                if value is None:
                    run.attributes.pop(key, None)
                else:
                    run.attributes[key] = value
        run.open_steps += decision.open_steps
        if decision.step is not None:
            run.steps[cid] = placed(decision.step, slots)
        if decision.wait is not None:
            run.waits[cid] = decision.wait
        if decision.hook is not None:
            run.hooks[cid] = placed(decision.hook, slots)
            state.hook_runs[cid] = run.run_id
        if decision.token is not None:
            state.tokens[decision.token.token] = decision.token
        if decision.resume_id is not None:
            run.resumes[(cid, decision.resume_id)] = slots[-1]
            if decision.resume_once:
                state.resumes_once[decision.resume_id] = (run.run_id, cid)
        gone = [cid] if decision.hook_gone else []
        for end in decision.hook_ends:  # a hook's end writes its token only where it still holds it
            if holds(token_owned_by(end.hook.hook_id), state.tokens.get(end.hook.token), now):
                state.tokens[end.hook.token] = end.token
            if end.fate == "released":
                gone.append(end.hook.hook_id)
        for hook_id in gone:
            del run.hooks[hook_id]
            if state.hook_runs.get(hook_id) == run.run_id:
                del state.hook_runs[hook_id]

    async def create_run(self, run_id: str, req: CreateEventRequest, resolve: ResolveData) -> EventResult:
        """run_created: a client-given id is idempotent (the existing run comes back, nothing is written)."""
        value = self._value(req) or NULL
        existing = self.state.runs.get(run_id)
        if existing is not None:
            return build(EventResult, run=run_model(existing, resolve))
        now = self.clock.now()
        made, first = run_created(run_id, req, now, self.deployment_id)
        run, _, _ = self._commit(run_id, None, [(Decision(req.event_type, "", [first], creates_run=made), value)],
                                 now, None)
        return build(EventResult, event=event_model(run_id, run.events[0], resolve), run=run_model(run, resolve),
                     seq_in_band=IN_BAND_SEQ_AT_RUN_CREATION)

    @staticmethod
    def _append(run: RunRecord, events: list[NewEvent], value: Value | None, now: datetime) -> list[int]:
        slots: list[int] = []
        for new in events:
            slot = len(run.events) + 1
            run.append(StoredEvent(slot, slot_to_event_id(slot), new.event_type, new.correlation_id, new.data,
                                   data_text(new.data), value if new.carries_value else None, now,
                                   new.spec_version))
            slots.append(slot)
        return slots

    @staticmethod
    def _shown(run: RunRecord, decision: Decision, resolve: ResolveData) -> dict[str, Any]:
        """The entity the write changed, as its answer carries it (one model for both outcomes of a born-running
        pair: they show the same step)."""
        cid = decision.entity_id
        if decision.shows == "run":
            return {"run": run_model(run, resolve)}
        if decision.shows == "step":
            return {"step": step_answer(run.run_id, run.steps[cid], resolve, run.value_at)}
        if decision.shows == "hook":
            return {"hook": hook_answer(run.run_id, run.hooks[cid], hook_status(run.status), resolve, run.value_at)}
        if decision.shows == "wait":
            return {"wait": wait_answer(run.run_id, run.waits[cid])}
        return {}

    @staticmethod
    def _result(run: RunRecord, shown: dict[str, Any], slot: int | None, resolve: ResolveData,
                seq_in_band: int | None, open_after: int) -> EventResult:
        """A write's answer: the event at ``slot`` and the entity the write changed (``_shown``)."""
        event = event_model(run.run_id, run.events[slot - 1], resolve) if slot else None
        return build(EventResult, event=event, seq_in_band=seq_in_band, open_steps=open_after, **shown)

    def _value(self, req: CreateEventRequest) -> Value | None:
        """The request's value, checked and copied, when it carries one (even a null)."""
        carried, value = carried_value(req)
        if not carried:
            return None
        return store_value(value, f"eventData.{VALUE_FIELD[req.event_type]}", self.max_value_bytes,
                           look=looks_first(req.event_type))

    # ------------------------------------------------------------------ reads

    def run(self, run_id: str) -> RunRecord:
        run = self.state.runs.get(run_id)
        if run is None:
            raise run_missing(run_id)
        return run

    async def recorded_event(self, run_id: str, slot: int, resolve: ResolveData) -> Event | None:
        run = self.state.runs.get(run_id)
        return event_model(run_id, run.events[slot - 1], resolve) if run is not None else None

    async def events_between(self, run_id: str, after: int, before: int, count: int,
                             resolve: ResolveData) -> LogSlice:
        run = self.run(run_id)
        return _slice(run, run.events[after:after + count], before - 1 > after + count, resolve, snapshot=False)

    async def events(self, run_id: str, after: int, limit: int, resolve: ResolveData) -> LogSlice:
        run = self.run(run_id)
        return _slice(run, run.events[after:after + limit], len(run.events) > after + limit, resolve)

    async def correlated_events(self, run_id: str, correlation_id: str, after: int, limit: int,
                                resolve: ResolveData) -> LogSlice:
        run = self.run(run_id)
        slots = run.by_correlation.get(correlation_id, [])
        start = bisect.bisect_right(slots, after)
        return _slice(run, [run.events[s - 1] for s in slots[start:start + limit]], len(slots) > start + limit,
                      resolve)


def _slice(run: RunRecord, events: Sequence[StoredEvent], more: bool, resolve: ResolveData, *,
           snapshot: bool = True) -> LogSlice:
    return LogSlice([event_model(run.run_id, e, resolve) for e in events], more,
                    build(LogSnapshot, seq=run.seq, seq_in_band=run.seq_in_band) if snapshot else None)


def _record(made: NewRun) -> RunRecord:
    context = made.execution_context
    return RunRecord(made.run_id, made.workflow_name, made.deployment_id, made.spec_version, made.status,
                     made.created_at, made.created_at, json_value(context) if context is not None else None,
                     dict(made.attributes), started_at=made.started_at, seq_in_band=IN_BAND_SEQ_AT_RUN_CREATION)


def _landed(result: EventResult) -> BatchEventOutcome:
    return build(BatchEventOutcome, status=200, result=result, error=None, message=None)
