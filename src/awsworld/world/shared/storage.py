"""The contract's storage (``world.runs``, ``world.steps``, ``world.events``, ``world.hooks``), written once: every
public method, its argument checks and its sequence of steps, over the primitives each World's engine gives.

Both Worlds answer alike because they run this code. A write is parsed and checked here (``world.rules``' request
rules, in the contract's order, so the same bad request gets the same 400 everywhere); ``run_created`` takes its
own branch; the value it carries is stored; then the engine decides (the rulebook's ``decide``, over the state it
reads) and commits; and the answer gets what every World adds to it: the event a repeated resume id first
recorded, and the events a writer skipped over. Listings check their arguments, page and make their cursors here
(``world/cursors.py``); a missing entity is refused here with the rulebook's error. What is a World's own is the
engine (``StorageEngine``): how a value is stored, how a decision becomes a commit, how records are read and
found. The shape is DBOS's ``SystemDatabase`` over thin engines, by composition: ``WorldStorage(engine)``. The
streams are written the same way (``world/shared/streams.py``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from ..clock import Clock
from ..cursors import (
    HOOK_KEYS,
    STEP_KEYS,
    entities_page_after,
    events_page_after,
    first_page,
    key_cursor,
    run_cursor,
    runs_query,
    slot_cursor,
)
from ..entities import TERMINAL_RUN_STATUSES, HookRecord, ResolveData, Run, Step
from ..errors import HookAlreadyReceivedError
from ..events import (
    AttributeChange,
    BatchEventOutcome,
    CreateEventRequest,
    Event,
    EventBatchResult,
    EventResult,
    LogSnapshot,
    parse_event_request,
)
from ..ids import event_id_to_slot
from ..pages import MAX_EVENTS_PAGE, EventPage, HookPage, RunPage, StepPage
from ..rules.decision import hook_missing
from ..rules.hooks import check_resume_id, lookup_refusal
from ..rules.log import skipped_over
from ..rules.requests import attr_set_event, batch_requests, check_run_id, check_write_params, in_request_order
from ..rules.runs import created_run_id
from ..rules.state import TokenState
from ..rules.steps import lazily_started, lazy_start, step_missing
from .answers import build

V = TypeVar("V")
"""What an engine's stored value is (the in-memory World's copy, the AWS World's inline value or S3 object)."""
Unit = list[CreateEventRequest]
"""A batch's unit: one request, or a born-running step's step_created and step_started (``batch_requests``)."""


class LogSlice(NamedTuple):
    """Events an engine read from a run's log, in slot order: ``more`` when more lie past them, with the log's
    counters when the read took them (``WorldStorage`` makes the page and its cursor: ``_page``)."""

    events: list[Event]
    more: bool
    snapshot: LogSnapshot | None = None


def _page(after: int, found: LogSlice) -> EventPage:
    """An events page of ``found`` (read after slot ``after``): its cursor is after the last event, or where it
    started when empty, so a reader can always come back for what is written later."""
    events = found.events
    return build(EventPage, data=events, cursor=slot_cursor(events[-1].slot if events else after),
                 has_more=found.more, snapshot=found.snapshot)


class StorageEngine(Protocol[V]):
    """What a World gives ``WorldStorage``: its clock, how it stores a value, commits a write and reads its
    records. Every method is called with arguments ``WorldStorage`` has checked."""

    @property
    def clock(self) -> Clock: ...

    @property
    def expires_runs(self) -> bool:
        """Whether the World deletes an ended run, and its tokens' records, once its retention passes (DynamoDB's
        TTL): a token it has no record of may then be one its run held (``rules.hooks.lookup_refusal``)."""
        ...

    # -- writes ------------------------------------------------------------------------------------------------

    async def store_value(self, run_id: str, req: CreateEventRequest) -> V:
        """The value ``req`` carries (``rules.requests.carried_value``), checked and stored before the commit."""
        ...

    async def store_values(self, run_id: str, units: list[Unit]) -> list[V]:
        """``store_value`` of each of a batch's units (the value a unit carries is its first request's)."""
        ...

    async def create_run(self, run_id: str, req: CreateEventRequest, resolve: ResolveData) -> EventResult:
        """``run_created`` (``rules.runs.run_created``): the run and its first event; a run id that exists answers
        with that run and writes nothing."""
        ...

    async def write_event(self, run_id: str, req: CreateEventRequest, value: V, *, event_count: int | None,
                          in_band: bool, expected_seq_in_band: int | None, resolve: ResolveData,
                          patient: bool) -> EventResult:
        """Decide ``req`` (``rules.decide``) and commit it: the answer, or the rulebook's refusal raised.
        ``event_count``: how many events the writer holds; ``patient``: the write records a step body's result
        (losing it to throttling would run the body again)."""
        ...

    async def write_batch(self, run_id: str, units: list[Unit], values: list[V], in_band: bool,
                          expected_seq_in_band: int | None, resolve: ResolveData, atomic: bool,
                          stamp: datetime | None, expect_seq: int | None
                          ) -> tuple[list[BatchEventOutcome], dict[int, BatchEventOutcome], int | None]:
        """Decide each unit (``rules.decide_unit``) and commit those accepted in one commit: each unit's outcome,
        the step_created outcome of each born-running pair by the unit's position, and the in-band count."""
        ...

    async def recorded_event(self, run_id: str, slot: int, resolve: ResolveData) -> Event | None:
        """The event at ``slot`` (what a repeated resume id first recorded), None when it cannot be read."""
        ...

    async def events_between(self, run_id: str, after: int, before: int, count: int,
                             resolve: ResolveData) -> LogSlice:
        """Up to ``count`` events after slot ``after`` and before slot ``before`` (a write's skipped-over report),
        ``more`` when more lie between; no snapshot."""
        ...

    # -- reads -------------------------------------------------------------------------------------------------

    async def run(self, run_id: str, resolve: ResolveData) -> Run:
        """The run; ``rules.runs.run_missing`` raised when there is none."""
        ...

    async def run_ids(self, workflow_name: str | None, statuses: list[str] | None, before: str | None,
                      wanted: int) -> list[str]:
        """Up to ``wanted`` run ids, newest first (a run id is a ULID), of the runs of ``workflow_name`` (None:
        any) in ``statuses`` (None: any), below ``before`` (None: from the newest)."""
        ...

    async def runs(self, run_ids: list[str], resolve: ResolveData) -> list[Run]:
        """The runs of ``run_ids`` in that order (one that vanished since it was listed is left out)."""
        ...

    async def await_change(self, run_id: str, seconds: float, polls: int) -> None:
        """Return when the run may have ended, at the latest after ``seconds`` (``polls``: how often this wait
        came back already)."""
        ...

    async def step(self, run_id: str, step_id: str, resolve: ResolveData) -> Step | None: ...

    async def steps(self, run_id: str, after: str | None, limit: int,
                    resolve: ResolveData) -> tuple[list[Step], bool]:
        """A page of the run's steps in key order (``STEP#`` + id) after the key ``after``, and whether more
        exist (no run: none)."""
        ...

    async def hook(self, hook_id: str, run_id: str | None, resolve: ResolveData) -> HookRecord | None:
        """The hook (hook ids are global: ``run_id`` None looks its run up)."""
        ...

    async def hook_by_token(self, token: str, resolve: ResolveData) -> tuple[HookRecord | None, TokenState | None]:
        """The hook holding ``token`` (live, or retained by its ended run), else None and the token's record
        as found (``rules.hooks.lookup_refusal`` says what that means)."""
        ...

    async def hooks(self, run_id: str, after: str | None, limit: int,
                    resolve: ResolveData) -> tuple[list[HookRecord], bool]:
        """A page of the run's hooks in key order (``HOOK#`` + id) after the key ``after``."""
        ...

    async def resume_holder(self, resume_id: str) -> tuple[str, str] | None:
        """The (run id, hook id) the ``resumeOnce`` id ``resume_id`` is recorded on (``world/rules/hooks.py``),
        or None."""
        ...

    async def events(self, run_id: str, after: int, limit: int, resolve: ResolveData) -> LogSlice:
        """Up to ``limit`` events after slot ``after``, with the log's counters as a snapshot; the run missing:
        ``run_missing``."""
        ...

    async def correlated_events(self, run_id: str, correlation_id: str, after: int, limit: int,
                                resolve: ResolveData) -> LogSlice:
        """As ``events``, of the events with ``correlation_id`` only."""
        ...


class WorldStorage(Generic[V]):
    """``runs``, ``steps``, ``events`` and ``hooks`` of a World, over its engine."""

    def __init__(self, engine: StorageEngine[V]) -> None:
        self.engine = engine
        self.runs = Runs(self)
        self.steps = Steps(self)
        self.events = Events(self)
        self.hooks = Hooks(self)

    # -- events ------------------------------------------------------------------------------------------------

    async def create_event(self, run_id: str | None, event: CreateEventRequest | Mapping[str, Any], *,
                           event_count: int | None = None, in_band: bool = False,
                           expected_seq_in_band: int | None = None, resolve_data: ResolveData = "all",
                           after_step_body: bool = False) -> EventResult:
        engine = self.engine
        req = parse_event_request(event)
        check_write_params(req, in_band, expected_seq_in_band, event_count)
        if req.event_type == "run_created":
            return await engine.create_run(created_run_id(run_id), req, resolve_data)
        run_id = check_run_id(run_id)
        if (pair := lazy_start(req)) is not None:  # a lazy start is the born-running pair (rules.steps.lazy_start)
            return lazily_started(await self.create_batch(run_id, pair, in_band=in_band, atomic=True,
                                                          expected_seq_in_band=expected_seq_in_band,
                                                          resolve_data=resolve_data))
        value = await engine.store_value(run_id, req)
        try:
            result = await engine.write_event(run_id, req, value, event_count=event_count, in_band=in_band,
                                              expected_seq_in_band=expected_seq_in_band, resolve=resolve_data,
                                              patient=after_step_body or req.event_type in _AFTER_BODY)
        except HookAlreadyReceivedError as repeat:
            if repeat.event_id is not None and repeat.event is None:
                repeat.event = await engine.recorded_event(run_id, event_id_to_slot(repeat.event_id), resolve_data)
            raise
        if event_count is not None and result.event is not None:
            slot = result.event.slot
            skipped = skipped_over(event_count, slot)
            if skipped:
                report = _page(event_count, await engine.events_between(run_id, event_count, slot, skipped,
                                                                        resolve_data))
                result.events, result.cursor, result.has_more = report.data, report.cursor, report.has_more
        return result

    async def create_batch(self, run_id: str, events: Sequence[CreateEventRequest | Mapping[str, Any]], *,
                           in_band: bool = False, expected_seq_in_band: int | None = None,
                           resolve_data: ResolveData = "all", atomic: bool = False, stamp: datetime | None = None,
                           expect_seq: int | None = None) -> EventBatchResult:
        """``atomic``: every event lands or none does (the first refusal is raised, as ``create`` would).
        ``stamp``: the time recorded on the batch's events, for an in-band writer that has already shown this
        time to the workflow (a step's result consumed before it is recorded with the next declarations); it
        may not be in the future, and only a fenced (in-band) writer may give it. ``expect_seq``: the batch lands
        right after that many events or not at all (``LogMovedError``): what the workflow was shown must be
        what the log holds at that position."""
        engine = self.engine
        run_id = check_run_id(run_id)
        units = batch_requests(events, in_band=in_band, expected_seq_in_band=expected_seq_in_band, stamp=stamp,
                               now=engine.clock.now())
        values = await engine.store_values(run_id, units)
        outcomes, paired, seq_in_band = await engine.write_batch(run_id, units, values, in_band, expected_seq_in_band,
                                                                 resolve_data, atomic, stamp, expect_seq)
        return build(EventBatchResult, results=in_request_order(units, outcomes, paired), seq_in_band=seq_in_band)

    async def list_events(self, run_id: str, *, cursor: str | None = None, limit: int = MAX_EVENTS_PAGE,
                          resolve_data: ResolveData = "all") -> EventPage:
        after = events_page_after(cursor, limit, MAX_EVENTS_PAGE)
        return _page(after, await self.engine.events(run_id, after, limit, resolve_data))

    async def list_by_correlation_id(self, run_id: str, correlation_id: str, *, cursor: str | None = None,
                                     limit: int = MAX_EVENTS_PAGE, resolve_data: ResolveData = "all") -> EventPage:
        after = events_page_after(cursor, limit, MAX_EVENTS_PAGE, correlation_id=correlation_id, by_correlation=True)
        return _page(after, await self.engine.correlated_events(run_id, correlation_id, after, limit, resolve_data))

    # -- runs --------------------------------------------------------------------------------------------------

    async def get_run(self, run_id: str, *, resolve_data: ResolveData = "all") -> Run:
        return await self.engine.run(run_id, resolve_data)

    async def list_runs(self, *, workflow_name: str | None = None, status: str | Sequence[str] | None = None,
                        cursor: str | None = None, limit: int = 50, resolve_data: ResolveData = "none") -> RunPage:
        """Newest first by run id (a ULID), the contract's order; ``status=[]`` matches nothing, like SQL
        ``IN ()``.

        The ids come from an index (on AWS a GSI, eventually consistent), the runs from their items, read after: a
        run whose item no longer has a status the filter asks for (it completed since the index was read, or the
        index lags its item) is left out of the page, rather than listed under a filter its row shows it fails
        (``awsworld runs --status running`` listed a run it showed ``completed``). Such a page may hold fewer than
        ``limit`` runs; its cursor still goes on after every id the index gave."""
        query = runs_query(status, cursor, limit)
        if query is None:
            return RunPage()
        run_ids, more = first_page(await self.engine.run_ids(workflow_name, query.statuses, query.before, limit + 1),
                                   limit)
        runs = [run for run in await self.engine.runs(run_ids, resolve_data)
                if query.statuses is None or run.status in query.statuses]
        return build(RunPage, data=runs, cursor=run_cursor(run_ids, more), has_more=more)

    async def wait_for_terminal_status(self, run_id: str, *, timeout: float = 30.0,
                                       resolve_data: ResolveData = "all") -> Run:
        """The run once terminal, or its latest snapshot when ``timeout`` real seconds run out (never later)."""
        deadline = time.monotonic() + max(0.0, timeout)
        polls = 0
        while True:
            run = await self.engine.run(run_id, resolve_data)
            remaining = deadline - time.monotonic()
            if run.status in TERMINAL_RUN_STATUSES or remaining <= 0:
                return run
            await self.engine.await_change(run_id, remaining, polls)
            polls += 1

    async def set_attributes(self, run_id: str, changes: Sequence[AttributeChange | Mapping[str, Any]], *,
                             allow_reserved: bool = False) -> EventResult:
        return await self.create_event(run_id, attr_set_event(changes, allow_reserved))

    # -- steps and hooks ---------------------------------------------------------------------------------------

    async def get_step(self, run_id: str, step_id: str, *, resolve_data: ResolveData = "all") -> Step:
        step = await self.engine.step(run_id, step_id, resolve_data)
        if step is None:
            raise step_missing(run_id, step_id)
        return step

    async def list_steps(self, run_id: str, *, cursor: str | None = None, limit: int = 100,
                         resolve_data: ResolveData = "all") -> StepPage:
        """A run's steps in id order, ``limit`` at a time."""
        after = entities_page_after(cursor, limit, STEP_KEYS)
        steps, more = await self.engine.steps(run_id, after, limit, resolve_data)
        return build(StepPage, data=steps, cursor=key_cursor([STEP_KEYS + s.step_id for s in steps[-1:]], more),
                     has_more=more)

    async def get_hook(self, hook_id: str, *, run_id: str | None = None,
                       resolve_data: ResolveData = "all") -> HookRecord:
        hook = await self.engine.hook(hook_id, run_id, resolve_data)
        if hook is None:
            raise hook_missing(hook_id)
        return hook

    async def get_hook_by_token(self, token: str, *, resolve_data: ResolveData = "all") -> HookRecord:
        """The active hook owning ``token``, or the retained hook of a finished run still holding it (closed). A
        token whose run ended and released it: ``HookClosedError`` naming the run (``world/rules/hooks.py``)."""
        hook, holder = await self.engine.hook_by_token(token, resolve_data)
        if hook is None:
            raise lookup_refusal(holder, expires_runs=self.engine.expires_runs)
        return hook

    async def resumed_by(self, resume_id: str) -> tuple[str, str] | None:
        """``hooks.resumed_by``: the hook that recorded a ``resumeOnce`` id, whatever became of it, its token or
        its run since (``world/protocol.py``)."""
        check_resume_id(resume_id)
        return await self.engine.resume_holder(resume_id)

    async def list_hooks(self, run_id: str, *, cursor: str | None = None, limit: int = 100,
                         resolve_data: ResolveData = "all") -> HookPage:
        """A run's hooks in id order, ``limit`` at a time."""
        after = entities_page_after(cursor, limit, HOOK_KEYS)
        hooks, more = await self.engine.hooks(run_id, after, limit, resolve_data)
        return build(HookPage, data=hooks, cursor=key_cursor([HOOK_KEYS + h.hook_id for h in hooks[-1:]], more),
                     has_more=more)


_AFTER_BODY = frozenset({"step_completed", "step_retrying"})
"""Writes that record a step body's result: patient even when the caller does not say so."""


# The contract's namespaces: each member is the storage's own bound method (no wrapper between a call and it).


class Runs:
    def __init__(self, storage: WorldStorage[Any]) -> None:
        self.get = storage.get_run
        self.list = storage.list_runs
        self.wait_for_terminal_status = storage.wait_for_terminal_status
        self.set_attributes = storage.set_attributes


class Steps:
    def __init__(self, storage: WorldStorage[Any]) -> None:
        self.get = storage.get_step
        self.list = storage.list_steps


class Events:
    def __init__(self, storage: WorldStorage[Any]) -> None:
        self.create = storage.create_event
        self.create_batch = storage.create_batch
        self.list = storage.list_events
        self.list_by_correlation_id = storage.list_by_correlation_id


class Hooks:
    def __init__(self, storage: WorldStorage[Any]) -> None:
        self.get = storage.get_hook
        self.get_by_token = storage.get_hook_by_token
        self.list = storage.list_hooks
        self.resumed_by = storage.resumed_by
