"""Carrying out a schedule's decisions: write the decision, then do what it recorded, then settle it.

The tick job and the ``ScheduleClient`` both decide through ``decide_and_apply``: read the record, carry out any
``pending`` effects a writer before left undone, decide (a ``world.rules.schedules`` function), write the
decision conditioned on the version read, and only once it won, start and cancel runs, then clear ``pending``.
A lost write reads the record again and decides afresh; a crash after the write leaves ``pending`` for the next
reader. Starting and cancelling a run go through ``_worker/run_control.py``, as every start and cancel does: the
caller hands over its ``RunStarter`` (a tick's checks no published names; ``client.schedules`` uses its client's).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

from .._worker.run_control import RunStarter, cancel_run
from ..authoring.definitions import REGISTRY
from ..durable import json_data, serde
from ..world.errors import RunGoneError, RunIdTakenError, RunNotFoundError
from ..world.protocol import World
from ..world.rules.schedules import Claim, settle
from ..world.schedules import Action, ScheduleState, ScheduleStore, tick_text
from .info import CONTEXT_KEY

log = logging.getLogger("awsworld.schedules")

MAX_ATTEMPTS = 8
"""Decisions tried per call before giving up (each lost write means another writer moved the record)."""


class ScheduleBusyError(RuntimeError):
    """Other writers moved the schedule ``MAX_ATTEMPTS`` times in a row under this decision: try again."""


Decide = Callable[[ScheduleState, str | None], Claim | None]
"""A decision on a record, given the status of its last run (None: it has none)."""


def run_context(state: ScheduleState, action: Action) -> dict[str, Any]:
    """What a scheduled run's executionContext holds: its schedule, its nominal tick, what fired it, and its
    workflow's retention when this process knows the workflow (as ``Client.start`` adds it)."""
    assert action.tick is not None
    definition = REGISTRY.workflows.get(state.workflow_name)
    retention = definition.execution_context() if definition is not None else {}
    return {**retention, CONTEXT_KEY: {"id": state.schedule_id, "tick": tick_text(action.tick),
                                       "trigger": action.trigger}}


async def perform(world: World, store: ScheduleStore, state: ScheduleState, actions: Sequence[Action], *,
                  starter: RunStarter) -> None:
    """Carry out ``actions`` in order. Each is idempotent: a start names its run (a second start of it returns
    the first run), a cancel of a run that has ended or does not exist changes nothing."""
    text: str | None = None
    for action in actions:
        if action.kind == "cancel":
            with contextlib.suppress(RunGoneError, RunNotFoundError):
                await cancel_run(world, action.run_id, reason=f"schedule {state.schedule_id}: a newer run replaces "
                                                              "it (overlap cancel_previous)")
            continue
        if text is None:
            text = await store.input(state)
        call = json_data.as_call(serde.from_json_text(text))
        # A tick's id taken by a run of another workflow (a schedule deleted and made again under its id with
        # another workflow, then backfilled): that tick ran, as for a tick's own run; refusing it would leave the
        # effect pending, and the schedule stuck on it.
        with contextlib.suppress(RunIdTakenError):
            await starter.start(state.workflow_name, tuple(call.args), call.kwargs, run_id=action.run_id,
                                context=run_context(state, action))


async def last_status(world: World, state: ScheduleState) -> str | None:
    """The status of the schedule's last run (None: it has none, or it is not recorded)."""
    if state.last_run_id is None:
        return None
    try:
        return str((await world.runs.get(state.last_run_id, resolve_data="none")).status)
    except RunNotFoundError:
        return None


async def carry_out(world: World, store: ScheduleStore, state: ScheduleState, *, starter: RunStarter) -> ScheduleState:
    """Do ``state.pending`` and clear it; the record as it stands after (another writer's, if one moved it)."""
    if not state.pending:
        return state
    await perform(world, store, state, state.pending, starter=starter)
    settled = settle(state, world.clock.now())
    if await store.write(settled, expected_version=state.version):
        return settled
    return await store.get(state.schedule_id)  # moved on: its writer saw the pending effects and did them too


async def decide_and_apply(world: World, store: ScheduleStore, state: ScheduleState, decide: Decide, *,
                           starter: RunStarter,
                           needs_status: Callable[[ScheduleState], bool] | None = None
                           ) -> tuple[ScheduleState, Claim | None]:
    """Decide on ``state`` (refreshed whenever a write is lost) and carry the decision out; the record as it
    stands after, and the decision (None: nothing to do). ``needs_status``: whether the decision reads the last
    run's status (default: always, when there is a last run)."""
    for _ in range(MAX_ATTEMPTS):
        while state.pending:
            state = await carry_out(world, store, state, starter=starter)
        wanted = needs_status is None or needs_status(state)
        decision = decide(state, await last_status(world, state) if wanted else None)
        if decision is None:
            return state, None
        if await store.write(decision.state, expected_version=state.version):
            return await carry_out(world, store, decision.state, starter=starter), decision
        state = await store.get(state.schedule_id)
    raise ScheduleBusyError(f"schedule {state.schedule_id!r} kept moving under this change: try again")
