"""A run's slot of its workflow's concurrency limit: taken at its start, freed at its end.

- **At the start** (``Client.start``, right after ``run_created`` and before the message that runs it is queued):
  ``admit`` asks for a slot of the run's key. Granted, the start queues the run's message as usual; made to wait,
  it queues nothing (the run stays ``pending``; the write that frees a slot for it queues its message: a
  hand-off). Because every start registers in the order it was made, a key's runs start in that order (with
  priority first). The key, the pool and the priority are recorded in the run's ``executionContext``
  (``limit``, ``priority``), so every later party knows them without evaluating the key function again.
- **At the first delivery** (``Flow``, before ``run_started``): ``admit`` again. A run admitted at its start
  finds its slot (one read, no write); a run whose start crashed between its creation and its admission, or was
  started by a client without its workflow's code, takes its place here (ordered by its creation time). A wake
  of a waiting run (the watchdog, an operator) finds it waiting, frees the slots of holders that ended without
  freeing them, and leaves it waiting.
- **At its end** (the flow that finds the run ended: completed, failed, cancelled): ``leave`` frees the slot (or
  the place, for a run that ended waiting), and the pool's next waiter is granted and woken in the same write. A
  run holds its slot only while it is not ended (``world.rules.limiters``: a holder whose run ended holds
  nothing), so the terminal write frees it even when the process dies before ``leave``: the next party that
  needs the slot finds the run ended.
- **Busy keys** (``Concurrency(on_busy=)``): ``skip`` cancels the new run at its start (its reason names the
  holders); ``cancel`` cancels the holders and makes the new run the first to wait (their ends hand it the slot).
  ``admit`` says which runs to cancel; its caller cancels them (``run_control.cancel_run``, as ``Client.cancel``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from .._engine.execution import CLOCK_FROM_START
from ..authoring.definitions import WorkflowDef
from ..durable import codecs
from ..durable.codecs import Place
from ..world.events import Event
from ..world.messages import FlowMessage, queue_name_for
from ..world.protocol import World
from ..world.rules.limiters import (
    Ask,
    Busy,
    LimitInputError,
    MustWait,
    check_key,
    check_priority,
    holder_run,
    pool_of,
    run_holder,
)
from .limiter import Limiter, limiters_of

log = logging.getLogger("awsworld.limits")

LIMIT_CONTEXT = "limit"
"""``executionContext.limit``: the run's limit, key and pool (``{"name", "key", "pool"}``), set at its start."""
PRIORITY_CONTEXT = "priority"
"""``executionContext.priority``: the run's priority (higher first), which its steps' waits inherit."""


@dataclass(frozen=True)
class RunSlot:
    """Which slot a run takes: its limit's name, key and pool."""

    name: str
    key: str
    pool: str

    def context(self) -> dict[str, str]:
        return {"name": self.name, "key": self.key, "pool": self.pool}


Admission = Literal["go", "wait", "skip"]


def slot_of(definition: WorkflowDef | None, args: tuple[Any, ...], kwargs: dict[str, Any], *,
            key: str | None = None) -> RunSlot | None:
    """The slot a run of ``definition`` with these arguments takes (``key``: a start's override of the key
    function); None when the workflow has no limit."""
    if definition is None or definition.limit is None:
        if key is not None:
            name = definition.name if definition is not None else "this workflow"
            raise LimitInputError(f"concurrency_key= needs a workflow with concurrency=: {name} has none",
                                  field="concurrencyKey")
        return None
    declared = definition.limit
    chosen = check_key(key, declared.spec.name) if key is not None else declared.key_of(args, kwargs)
    return RunSlot(declared.spec.name, chosen, pool_of(declared.spec, chosen))


def recorded_slot(context: Mapping[str, Any] | None) -> RunSlot | None:
    """The slot a run's ``executionContext`` records (None: none was recorded)."""
    raw = (context or {}).get(LIMIT_CONTEXT)
    if not isinstance(raw, dict):
        return None
    return RunSlot(str(raw.get("name", "")), str(raw.get("key", "")), str(raw.get("pool", "")))


def slot_text(context: Mapping[str, Any] | None) -> str | None:
    """The slot a run's ``executionContext`` records, for people, in ``client.limits.queued_text``'s words
    (``workflow:shop.order key 'c7'``; a limit without a key function: ``workflow:shop.export``); None without a
    limit. What the timelines say its start waited for (``ui.model``'s queued lane, ``awsworld events``)."""
    slot = recorded_slot(context)
    return None if slot is None else limit_key_text(slot.name, slot.key)


def limit_key_text(limit: str, key: str) -> str:
    """A limit's key for people: ``workflow:shop.order key 'c7'``; the one key of a limit without a key function
    (``''``): the limit's name alone. Every message that names a run's slot says it so."""
    return limit + (f" key {key!r}" if key else "")


def recorded_priority(context: Mapping[str, Any] | None) -> int:
    value = (context or {}).get(PRIORITY_CONTEXT)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def start_context(slot: RunSlot | None, priority: int | None) -> dict[str, Any]:
    """What a start adds to the run's ``executionContext``: its slot and priority, and, for a run that may wait for
    its slot, that its clock starts at its ``run_started`` (``_engine.execution.CLOCK_FROM_START``)."""
    context: dict[str, Any] = {}
    if slot is not None:
        context[LIMIT_CONTEXT] = slot.context()
        context[CLOCK_FROM_START] = True  # it may wait for its slot: its clock starts when it does
    if priority:
        context[PRIORITY_CONTEXT] = check_priority(priority)
    return context


@dataclass(frozen=True)
class Admitted:
    """What ``admit`` decided: ``kind`` (``go``: the run holds its slot; ``wait``: it waits for one; ``skip``: its
    key is busy and its workflow skips such starts) and the runs the caller cancels (``cancel``, with
    ``reason``: the run itself when skipped, the holders a ``cancel`` start replaces)."""

    kind: Admission
    cancel: tuple[str, ...] = ()
    reason: str = ""


async def admit(world: World, definition: WorkflowDef, slot: RunSlot, run_id: str, *, priority: int,
                arrival: datetime, deployment: str | None = None) -> Admitted:
    """Take ``run_id``'s slot, or its place among the waiters (both idempotent: a second admission of a run finds
    what the first did)."""
    declared = definition.limit
    assert declared is not None
    wake = FlowMessage(run_id, definition.name, deployment=deployment).to_payload()  # (its pin: handed over unread)
    ask = Ask(run_holder(run_id), slot.key, priority, arrival,
              wake={"queue": queue_name_for(definition.name), "payload": wake, "key": f"{run_id}:limit"},
              on_busy=declared.on_busy)
    decision = await Limiter(world).acquire(declared.spec, ask)
    if isinstance(decision, Busy):
        return Admitted("skip", (run_id,), f"skipped: {declared.spec.name} key {slot.key!r} is busy (held by "
                                           f"{_runs(decision.holders)})")
    if isinstance(decision, MustWait):
        replaced = tuple(r for h in decision.cancel if (r := holder_run(h)) is not None)
        return Admitted("wait", replaced, f"cancelled: run {run_id} of {declared.spec.name} key {slot.key!r} "
                                          "replaces it")
    return Admitted("go")


def slot_in_log(definition: WorkflowDef | None, run_id: str, log: Sequence[Event]) -> RunSlot | None:
    """The slot of the run whose log this is: the one its start recorded, else (a start without the workflow's
    code) its key computed from its input now. ``LimitInputError`` when the key function refuses the input."""
    if not log:
        return None
    created = log[0].event_data or {}
    context = created.get("executionContext")
    slot = recorded_slot(context if isinstance(context, dict) else None)
    if slot is not None or definition is None or definition.limit is None:
        return slot
    call = codecs.load_call(created.get("input"), definition.args_codec,
                            Place("input", f"workflow {definition.name!r}", run_id), definition.fn)
    return slot_of(definition, tuple(call.args), call.kwargs)


async def admit_in_flow(world: World, definition: WorkflowDef, run_id: str, log: Sequence[Event], *,
                        deployment: str | None) -> Admitted:
    """A pending run's first delivery (or a wake of one that waits): ``admit``, by what its log records.
    ``deployment``: the run's pin (the flow's ``FlowMessage.deployment``), carried by the wake a grant sends, as
    by every message of a pinned run: the live deployment hands it over unread."""
    slot = slot_in_log(definition, run_id, log)
    if slot is None or definition.limit is None:
        return Admitted("go")
    context = (log[0].event_data or {}).get("executionContext")
    return await admit(world, definition, slot, run_id,
                       priority=recorded_priority(context if isinstance(context, dict) else None),
                       arrival=log[0].created_at, deployment=deployment)


async def leave_in_flow(world: World, definition: WorkflowDef | None, run_id: str, log: Sequence[Event]) -> None:
    """A flow saw its run end: ``leave`` its slot, by what its log records (a key that cannot be computed took
    no slot)."""
    try:
        slot = slot_in_log(definition, run_id, log)
    except Exception as error:  # (the admission failed the run on it: nothing was taken)
        log_line = f"run {run_id}: its limit's key cannot be computed ({type(error).__name__}); nothing to free"
        logging.getLogger("awsworld.limits").info(log_line)
        return
    if slot is not None:
        await leave(world, slot, run_id)


async def leave(world: World, slot: RunSlot, run_id: str) -> None:
    """The run ended: free its slot (or its place among the waiters). Idempotent."""
    if limiters_of(world) is None:
        return
    await Limiter(world).release(slot.name, slot.pool, run_holder(run_id))


def _runs(holders: Sequence[str]) -> str:
    return ", ".join(f"run {r}" for h in holders if (r := holder_run(h)) is not None) or "nobody"
