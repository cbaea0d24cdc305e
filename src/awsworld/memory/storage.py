"""``MemoryStorage``: the storage half of the in-memory World (``runs``, ``steps``, ``events``, ``hooks``).

Every decision is the rulebook's (``world/rules/``); this keeps the records (``records.py``), the write path
and log reads (``log.py``), every timestamp on the ``clock`` it is given (so a test that skips time sees waits
and retries fall due), and lets a test wait for a state without polling: every commit wakes ``wait_until``'s
waiters, which re-check their predicate. The conformance suite runs it beside the AWS World.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from ..world.clock import Clock
from ..world.cursors import HOOK_KEYS, STEP_KEYS, entities_page_after, first_page, key_cursor, run_cursor, runs_query
from ..world.entities import TERMINAL_RUN_STATUSES, Hook, ResolveData, Run, Step
from ..world.events import AttributeChange, EventResult
from ..world.pages import HookPage, RunPage, StepPage
from ..world.rules.decision import hook_missing
from ..world.rules.hooks import lookup_refusal
from ..world.rules.requests import attr_set_event
from ..world.rules.steps import step_missing
from .log import MemoryLog
from .records import RunRecord, State, build, hook_model, run_model, step_model

E = TypeVar("E")
M = TypeVar("M")


class MemoryStorage:
    """The runs, steps, events and hooks of one in-memory World. Several ``MemoryWorld`` objects may share one
    (what separate processes on one table look like)."""

    def __init__(self, clock: Clock, *, deployment_id: str | None = None, max_value_bytes: int | None = None) -> None:
        """``max_value_bytes``: refuse larger user values with ``PayloadTooLargeError``
        (``world/limits.py``); None accepts any size."""
        self.clock = clock
        self.deployment_id = deployment_id
        self.state = State()
        self._changed: asyncio.Event | None = None  # made by the first waiter, set and dropped by the next commit
        self.log = MemoryLog(self.state, clock, deployment_id, max_value_bytes, self.notify_change)
        self.runs = MemoryRuns(self)
        self.steps = MemorySteps(self.state)
        self.events = MemoryEvents(self.log)
        self.hooks = MemoryHooks(self.state)

    # ------------------------------------------------------------------ for the test environment

    def run_status(self, run_id: str) -> str | None:
        """The run's status, or None when there is no such run (synchronous: no I/O to wait for)."""
        run = self.state.runs.get(run_id)
        return run.status if run is not None else None

    def holds_hook(self, run_id: str, token: str) -> bool:
        """Whether ``run_id`` holds the hook ``token`` now (synchronous, for the test driver's skip rule)."""
        holder = self.state.tokens.get(token)
        return holder is not None and holder.run_id == run_id and not holder.released

    def notify_change(self) -> None:
        """Wake every ``wait_until`` waiter to re-check its predicate; each commit calls it."""
        changed = self._changed
        if changed is not None:
            self._changed = None
            changed.set()

    async def wait_until(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool:
        """True as soon as ``predicate()`` holds (checked now and after every commit, never by polling); False
        when ``timeout`` real seconds pass first."""
        if predicate():
            return True
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            if self._changed is None:
                self._changed = asyncio.Event()
            changed = self._changed
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return predicate()
            try:
                await asyncio.wait_for(changed.wait(), remaining)
            except TimeoutError:
                return predicate()
            if predicate():
                return True

    def dump(self) -> State:
        """A deep copy of everything stored: what a test compares before and after a write that must write
        nothing (what a test of the AWS World reads by scanning its table)."""
        return copy.deepcopy(self.state)


class MemoryRuns:
    def __init__(self, storage: MemoryStorage) -> None:
        self.storage = storage
        self.state = storage.state

    async def get(self, run_id: str, *, resolve_data: ResolveData = "all") -> Run:
        return run_model(self.storage.log.run(run_id), resolve_data)

    async def list(
        self,
        *,
        workflow_name: str | None = None,
        status: str | Sequence[str] | None = None,
        cursor: str | None = None,
        limit: int = 50,
        resolve_data: ResolveData = "none",
    ) -> RunPage:
        """Newest first by run id (a ULID), the contract's order; ``status=[]`` matches nothing."""
        query = runs_query(status, cursor, limit)
        if query is None:
            return RunPage()
        statuses, before = query.statuses, query.before
        page, more = first_page(sorted((r.run_id for r in self.state.runs.values()
                                        if (workflow_name is None or r.workflow_name == workflow_name)
                                        and (statuses is None or r.status in statuses)
                                        and (before is None or r.run_id < before)), reverse=True), limit)
        runs = [run_model(self.state.runs[r], resolve_data) for r in page]
        return build(RunPage, data=runs, cursor=run_cursor(page, more), has_more=more)

    async def wait_for_terminal_status(self, run_id: str, *, timeout: float = 30.0,
                                       resolve_data: ResolveData = "all") -> Run:
        """The run once terminal, or its latest snapshot after ``timeout`` real seconds; woken by the commit
        that ends it (no polling)."""
        self.storage.log.run(run_id)  # a missing run fails like get

        def ended() -> bool:
            return self.storage.run_status(run_id) in TERMINAL_RUN_STATUSES

        await self.storage.wait_until(ended, max(0.0, timeout))
        return await self.get(run_id, resolve_data=resolve_data)

    async def set_attributes(self, run_id: str, changes: Sequence[AttributeChange | Mapping[str, Any]], *,
                             allow_reserved: bool = False) -> EventResult:
        return await self.storage.log.create(run_id, attr_set_event(changes, allow_reserved))


class MemorySteps:
    def __init__(self, state: State) -> None:
        self.state = state

    async def get(self, run_id: str, step_id: str, *, resolve_data: ResolveData = "all") -> Step:
        run = self.state.runs.get(run_id)
        step = run.steps.get(step_id) if run is not None else None
        if run is None or step is None:
            raise step_missing(run_id, step_id)
        return step_model(run, step, resolve_data)

    async def list(self, run_id: str, *, cursor: str | None = None, limit: int = 100,
                   resolve_data: ResolveData = "all") -> StepPage:
        """A run's steps in id order, ``limit`` at a time."""
        run = self.state.runs.get(run_id)
        steps, next_cursor, more = _entity_page(run, run.steps if run is not None else {}, STEP_KEYS, cursor,
                                                limit, resolve_data, step_model)
        return build(StepPage, data=steps, cursor=next_cursor, has_more=more)


class MemoryEvents:
    def __init__(self, log: MemoryLog) -> None:
        self.create = log.create
        self.create_batch = log.create_batch
        self.list = log.list
        self.list_by_correlation_id = log.list_by_correlation_id


class MemoryHooks:
    def __init__(self, state: State) -> None:
        self.state = state

    async def get(self, hook_id: str, *, run_id: str | None = None, resolve_data: ResolveData = "all") -> Hook:
        owner = run_id if run_id is not None else self.state.hook_runs.get(hook_id)
        run = self.state.runs.get(owner) if owner is not None else None
        hook = run.hooks.get(hook_id) if run is not None else None
        if run is None or hook is None:
            raise hook_missing(hook_id)
        return hook_model(run, hook, resolve_data)

    async def get_by_token(self, token: str, *, resolve_data: ResolveData = "all") -> Hook:
        """The active hook owning ``token``, or the retained hook of a finished run still holding it (closed). A
        token whose run ended and released it: ``HookClosedError`` naming the run (``world/rules/hooks.py``)."""
        holder = self.state.tokens.get(token)
        run = self.state.runs.get(holder.run_id) if holder is not None else None
        hook = run.hooks.get(holder.hook_id) if run is not None and holder is not None else None
        if run is None or hook is None or holder is None:
            raise lookup_refusal(holder)
        return hook_model(run, hook, resolve_data)

    async def list(self, run_id: str, *, cursor: str | None = None, limit: int = 100,
                   resolve_data: ResolveData = "all") -> HookPage:
        run = self.state.runs.get(run_id)
        hooks, next_cursor, more = _entity_page(run, run.hooks if run is not None else {}, HOOK_KEYS, cursor,
                                                limit, resolve_data, hook_model)
        return build(HookPage, data=hooks, cursor=next_cursor, has_more=more)


def _entity_page(run: RunRecord | None, entities: Mapping[str, E], prefix: str, cursor: str | None, limit: int,
                 resolve_data: ResolveData, model: Callable[[RunRecord, E, ResolveData], M]
                 ) -> tuple[list[M], str | None, bool]:
    """One page of a run's steps or hooks in id order (the contract's): the models, the cursor
    after the last one when more exist, and whether they do."""
    after = entities_page_after(cursor, limit, prefix)
    keys, more = first_page(sorted(prefix + i for i in entities if after is None or prefix + i > after), limit)
    data = [model(run, entities[k.removeprefix(prefix)], resolve_data) for k in keys] if run is not None else []
    return data, key_cursor(keys, more), more


