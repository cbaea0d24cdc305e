"""``MemoryStorage``: the in-memory World's storage engine under ``world/shared/storage.py``'s ``WorldStorage``.

Every decision is the rulebook's (``world/rules/``) and every contract method ``WorldStorage``'s; this keeps the
records (``records.py``), commits writes and reads the log (``log.py``), finds entities and lists runs, steps
and hooks, keeps every timestamp on the ``clock`` it is given (so a test that skips time sees waits and retries
fall due), and wakes whoever waits for a run's status (``changed``: a commit that creates a run or changes its
status notifies it, and ``Signal.until`` re-checks a predicate then, never by polling; a commit that leaves every
status as it was wakes nobody, so a step's writes do not wake a ``run.result()`` waiter for nothing). The
conformance suite runs it beside the AWS World.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

from ..world.clock import Clock
from ..world.cursors import HOOK_KEYS, STEP_KEYS, first_page
from ..world.entities import TERMINAL_RUN_STATUSES, HookRecord, ResolveData, Run, Step
from ..world.rules.erasure import check_erasable
from ..world.rules.hooks import hook_status
from ..world.rules.requests import check_run_id
from ..world.rules.state import TokenState
from ..world.shared.answers import hook_answer, step_answer
from .log import MemoryLog
from .records import State, run_model
from .signal import Signal


class MemoryStorage:
    """The runs, steps, events and hooks of one in-memory World. Several ``MemoryWorld`` objects may share one
    (what separate processes on one table look like)."""

    expires_runs = False
    """Nothing of a run is deleted here: a token with no record is one no run has used yet."""

    def __init__(self, clock: Clock, *, deployment_id: str | None = None, max_value_bytes: int | None = None) -> None:
        """``max_value_bytes``: refuse larger user values with ``PayloadTooLargeError``
        (``world/limits.py``); None accepts any size."""
        self.clock = clock
        self.deployment_id = deployment_id
        self.state = State()
        self.changed = Signal()  # a commit that creates a run or changes its status notifies it
        log = self.log = MemoryLog(self.state, clock, deployment_id, max_value_bytes, self.changed.notify)
        # The write path and the log's reads are the log's own methods (no wrapper between a call and them).
        self.store_value, self.store_values, self.create_run = log.store_value, log.store_values, log.create_run
        self.write_event, self.write_batch, self.recorded_event = log.write_event, log.write_batch, log.recorded_event
        self.events_between, self.events, self.correlated_events = log.events_between, log.events, log.correlated_events

    # ------------------------------------------------------------------ runs

    async def run(self, run_id: str, resolve: ResolveData) -> Run:
        return run_model(self.log.run(run_id), resolve)

    async def run_ids(self, workflow_name: str | None, statuses: list[str] | None, before: str | None,
                      wanted: int) -> list[str]:
        return sorted((r.run_id for r in self.state.runs.values()
                       if (workflow_name is None or r.workflow_name == workflow_name)
                       and (statuses is None or r.status in statuses)
                       and (before is None or r.run_id < before)), reverse=True)[:wanted]

    async def runs(self, run_ids: list[str], resolve: ResolveData) -> list[Run]:
        return [run_model(self.state.runs[r], resolve) for r in run_ids]

    async def await_change(self, run_id: str, seconds: float, polls: int) -> None:
        """Woken by the commit that ends the run (no polling)."""
        await self.changed.until(lambda: self.run_status(run_id) in TERMINAL_RUN_STATUSES, seconds)

    # ------------------------------------------------------------------ steps and hooks

    async def step(self, run_id: str, step_id: str, resolve: ResolveData) -> Step | None:
        run = self.state.runs.get(run_id)
        step = run.steps.get(step_id) if run is not None else None
        return step_answer(run_id, step, resolve, run.value_at) if run is not None and step is not None else None

    async def steps(self, run_id: str, after: str | None, limit: int, resolve: ResolveData) -> tuple[list[Step], bool]:
        run = self.state.runs.get(run_id)
        if run is None:
            return [], False
        ids, more = _page(run.steps, after, STEP_KEYS, limit)
        return [step_answer(run_id, run.steps[i], resolve, run.value_at) for i in ids], more

    async def hook(self, hook_id: str, run_id: str | None, resolve: ResolveData) -> HookRecord | None:
        owner = run_id if run_id is not None else self.state.hook_runs.get(hook_id)
        run = self.state.runs.get(owner) if owner is not None else None
        hook = run.hooks.get(hook_id) if run is not None else None
        if run is None or hook is None:
            return None
        return hook_answer(run.run_id, hook, hook_status(run.status), resolve, run.value_at)

    async def hook_by_token(self, token: str, resolve: ResolveData) -> tuple[HookRecord | None, TokenState | None]:
        holder = self.state.tokens.get(token)
        return (await self.hook(holder.hook_id, holder.run_id, resolve) if holder is not None else None), holder

    async def resume_holder(self, resume_id: str) -> tuple[str, str] | None:
        return self.state.resumes_once.get(resume_id)

    async def hooks(self, run_id: str, after: str | None, limit: int,
                    resolve: ResolveData) -> tuple[list[HookRecord], bool]:
        run = self.state.runs.get(run_id)
        if run is None:
            return [], False
        ids, more = _page(run.hooks, after, HOOK_KEYS, limit)
        return [hook_answer(run_id, run.hooks[i], hook_status(run.status), resolve, run.value_at) for i in ids], more

    # ------------------------------------------------------------------ erasure

    def delete_run(self, run_id: str) -> bool:
        """``World.delete_run``'s storage part (``world/rules/erasure.py`` decides): the run's record (its log,
        values, steps, hooks, waits and resume markers) and the global records naming it (its tokens, released
        ones too, its hook ids, the ``resumeOnce`` ids its hooks recorded, its watch entry), in one synchronous
        step; False when there is no such run. An unfinished run is refused and nothing changes."""
        run = self.state.runs.get(check_run_id(run_id))
        if run is None:
            return False
        check_erasable(run_id, run.status)
        state = self.state
        del state.runs[run_id]
        state.tokens = {token: held for token, held in state.tokens.items() if held.run_id != run_id}
        state.hook_runs = {hook: owner for hook, owner in state.hook_runs.items() if owner != run_id}
        state.resumes_once = {key: holder for key, holder in state.resumes_once.items() if holder[0] != run_id}
        state.watch.pop(run_id, None)
        return True

    # ------------------------------------------------------------------ for the test environment

    def run_status(self, run_id: str) -> str | None:
        """The run's status, or None when there is no such run (synchronous: no I/O to wait for)."""
        run = self.state.runs.get(run_id)
        return run.status if run is not None else None

    def dump(self) -> State:
        """A deep copy of everything stored: what a test compares before and after a write that must write
        nothing (what a test of the AWS World reads by scanning its table)."""
        return copy.deepcopy(self.state)


def _page(entities: Mapping[str, object], after: str | None, prefix: str, limit: int) -> tuple[list[str], bool]:
    """The ids of one page of a run's steps or hooks in id order (the contract's), after the listing's key
    ``after`` (``STEP#id``, ``HOOK#id``: ``world/cursors.py``), and whether more exist."""
    start = None if after is None else after.removeprefix(prefix)
    return first_page(sorted(i for i in entities if start is None or i > start), limit)
