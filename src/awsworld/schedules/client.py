"""``client.schedules``: schedules at run time (create, list, describe, pause, resume, trigger, backfill, delete).

    await client.schedules.create("eu-sync", sync_shop, Schedule(every="15m", offset="5m", args=("eu",)))
    (await client.schedules.describe("eu-sync")).upcoming      # the next fire times
    await client.schedules.pause("eu-sync", note="supplier outage")
    await client.schedules.trigger("eu-sync")                  # a run now, under the overlap policy
    await client.schedules.backfill("eu-sync", start, end)     # every tick in [start, end) that has no run

Each change is a decision of ``world.rules.schedules`` written through ``effects.decide_and_apply``, so it
cannot race a tick into a second run. The Client builds this object (its ``schedules`` property) and hands over
its start, so scheduled runs are recorded by the same code as ``Client.start``'s.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from .._worker.run_control import RunStarter
from ..authoring.definitions import Workflow, workflow_definition
from ..durable import json_data, serde
from ..world import schedule_timing as timing
from ..world.rules.schedules import Claim, pause, refuse_backfill, refuse_create, refuse_delete, resume, trigger
from ..world.rules.schedules import backfill as backfill_actions
from ..world.schedules import (
    MAX_BACKFILL_TICKS,
    Overlap,
    ScheduleNotFoundError,
    ScheduleState,
    check_schedule_id,
    schedule_run_id,
)
from .declared import DECLARED
from .effects import ScheduleBusyError, decide_and_apply, perform
from .model import Schedule

UPCOMING = 5


@dataclass(frozen=True)
class Described:
    """A schedule, its next fire times (``upcoming``; none while paused) and the arguments each run gets (``args``,
    ``kwargs``: what an operator checks first, and the record holds only in serialized form)."""

    state: ScheduleState
    upcoming: list[datetime]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict[str, Any])


@dataclass(frozen=True)
class Triggered:
    """What ``trigger`` did: ``outcome`` is ``started`` (``run_id`` names the run), ``buffered`` (it starts once
    the running one ends) or ``skipped`` (the overlap policy skipped it)."""

    outcome: str
    run_id: str | None


class ScheduleClient:
    def __init__(self, starter: RunStarter) -> None:
        """Built by ``Client.schedules`` with the client's starter (``_worker/run_control.py``): a schedule's runs
        start as the client's do, its checks included (this module does not import the Client)."""
        self.starter = starter
        self.world = starter.world
        store = starter.world.schedules
        if store is None:
            raise TypeError(f"{type(starter.world).__name__} has no schedule store (world.schedules)")
        self.store = store

    def _now(self) -> datetime:
        return self.world.clock.now()

    async def create(self, schedule_id: str, workflow: Workflow[..., Any] | str,
                     schedule: Schedule) -> ScheduleState:
        """A schedule of ``workflow`` (a ``@workflow`` or a registered name), counting its ticks from now.
        ``ScheduleExistsError`` if the id is taken (nothing is written); arguments that do not fit a workflow
        this client knows are a ``TypeError`` here, as for ``Client.start`` (its parameters and their annotations:
        ``authoring.arguments``)."""
        check_schedule_id(schedule_id)
        if isinstance(workflow, str):
            name = workflow
            registry = self.starter.registry
            definition = registry.workflow(name) if registry is not None else None
        else:
            definition = workflow_definition(workflow)
            name = definition.name
        if definition is not None:
            definition.check_arguments(tuple(schedule.args), dict(schedule.kwargs))
        await self.starter.refuse_unpublished(name)  # a name no consumer of the queue registers (published.model)
        state = schedule.state(schedule_id, name, self._now(), source="api")
        with contextlib.suppress(ScheduleNotFoundError):
            refuse_create(await self.store.get(schedule_id), schedule_id)
        if not await self.store.write(state, expected_version=None):
            refuse_create(await self.store.get(schedule_id), schedule_id)
        return state

    async def get(self, schedule_id: str) -> ScheduleState:
        """The schedule; ``ScheduleNotFoundError`` when there is none, saying so when a workflow of this process
        declares it in code and the World was not asked to apply that declaration (a ``WorkflowTestEnv`` applies
        only those of the workflows it names: the ``awsworld_env`` fixture names none)."""
        try:
            return await self.store.get(check_schedule_id(schedule_id))
        except ScheduleNotFoundError as missing:
            declared, applied = DECLARED.get(schedule_id), getattr(self.store, "declared", None)
            if declared is None or applied is None or any(d.schedule_id == schedule_id for d in applied):
                raise  # (a store over HTTP does not say what its host applies: nothing to add)
            raise ScheduleNotFoundError(
                f"{missing}: {declared.workflow_name} declares it in code ({declared.module}), but this World does "
                "not apply that declaration: a WorkflowTestEnv stores and fires the schedules of the workflows it "
                f"names (WorkflowTestEnv(schedules=[{declared.workflow_name!r}]), or the function; the awsworld_env "
                "fixture names none); a deployment, those of the modules it serves") from None

    async def list(self) -> list[ScheduleState]:
        return await self.store.list()

    async def describe(self, schedule_id: str, *, upcoming: int = UPCOMING) -> Described:
        state = await self.get(schedule_id)
        after = max(state.cursor, self._now())
        times = [] if state.paused or state.orphaned else timing.upcoming(state.spec, after, upcoming)
        call = json_data.as_call(serde.from_json_text(await self.store.input(state)))
        return Described(state, times, tuple(call.args), dict(call.kwargs))

    async def pause(self, schedule_id: str, *, note: str | None = None) -> ScheduleState:
        """No tick fires until ``resume``; the ticks that pass meanwhile count as missed then."""
        now = self._now()
        return await self._change(schedule_id, lambda state, _: None if state.paused else _claim(
            pause(state, now, note)))

    async def resume(self, schedule_id: str) -> ScheduleState:
        """Fire again; the ticks that passed while paused are settled by the catch-up policy at the next tick
        (default: the most recent one runs)."""
        now = self._now()
        return await self._change(schedule_id, lambda state, _: None if not state.paused else _claim(
            resume(state, now, partial(timing.next_after, state.spec))))

    async def trigger(self, schedule_id: str, *, overlap: Overlap | None = None) -> Triggered:
        """A run now, outside the spec, under ``overlap`` (default: the schedule's policy)."""
        state = await self.get(schedule_id)
        await self._check_arguments(state)
        now = self._now()
        decided: list[Claim] = []

        def decide(current: ScheduleState, status: str | None) -> Claim:
            decided.append(trigger(current, now, status, overlap))
            return decided[-1]

        await decide_and_apply(self.world, self.store, state, decide, starter=self.starter)
        decision = decided[-1]
        return Triggered(decision.outcome, decision.started[0].run_id if decision.started else None)

    async def backfill(self, schedule_id: str, start: datetime, end: datetime) -> list[str]:
        """Start a run for every tick in ``[start, end)`` (at most 1000), each under the id its regular run has,
        so a tick that already ran is not run again. Backfilled runs start at once, outside the overlap policy.
        Returns their run ids, in tick order."""
        state = await self.get(schedule_id)
        begin, finish = timing.as_utc(start, "start"), timing.as_utc(end, "end")
        ticks = [t for t in timing.between(state.spec, begin - _EPSILON, finish, MAX_BACKFILL_TICKS + 1) if t < finish]
        refuse_backfill(begin, finish, self._now(), ticks)
        await self._check_arguments(state)
        actions = backfill_actions(state, ticks)
        await perform(self.world, self.store, state, actions, starter=self.starter)
        return [a.run_id for a in actions]

    async def delete(self, schedule_id: str) -> None:
        """Remove the schedule (its runs stay). A schedule declared in code is refused while the deployed code
        declares it (``ScheduleDeclaredInCodeError``): it would come back at the next tick."""
        for _ in range(8):
            state = await self.get(schedule_id)
            refuse_delete(state)
            if await self.store.delete(schedule_id, expected_version=state.version):
                return
        raise ScheduleBusyError(f"schedule {schedule_id!r} kept moving while being deleted: try again")

    def run_id(self, schedule_id: str, tick: datetime) -> str:
        """The id of the run a tick of this schedule starts (and a backfill of that tick)."""
        return schedule_run_id(check_schedule_id(schedule_id), timing.as_utc(tick, "tick"))

    async def _change(self, schedule_id: str, decide: Callable[[ScheduleState, str | None], Claim | None]
                      ) -> ScheduleState:
        state, _ = await decide_and_apply(self.world, self.store, await self.get(schedule_id), decide,
                                          starter=self.starter, needs_status=lambda _: False)
        return state

    async def _check_arguments(self, state: ScheduleState) -> None:
        """The stored arguments against the workflow, when this client knows it (``TypeError``, nothing written)."""
        registry = self.starter.registry
        definition = registry.workflows.get(state.workflow_name) if registry is not None else None
        if definition is None:
            return
        call = json_data.as_call(serde.from_json_text(await self.store.input(state)))
        definition.check_arguments(tuple(call.args), call.kwargs)


def _claim(state: ScheduleState) -> Claim:
    """A change with no effects, as a decision."""
    return Claim(replace(state))


_EPSILON = timedelta(microseconds=1)  # a backfill's start is in its range: ticks from just before it
