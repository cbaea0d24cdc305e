"""A step attempt's slot and token of its step's limit across runs (``@step(concurrency=, rate=)``).

Taken right before the attempt's ``step_started`` (``take``), on every path that starts a step (a queued step's
message, the flow's inline step; a limited step is never declared born running), and freed once its body has
ended (``give_back``), before its outcome is recorded: a slot bounds running bodies, and a body that ended runs
no more. In that order:

1. **The slot** (``concurrency``, ``total``): held by ``step_holder(run, step)`` under the attempt's lease (its
   ``step_started`` lease, and a second more), so the slot of a container that died frees when that lease passes,
   exactly as the step becomes anyone's to take over. A full key makes the attempt wait: it is recorded as a
   waiter whose wake is the step's own message, and the delivery ends (holding no container); the write that
   frees a slot for it sends that message. The waiters of a key are served by the run's priority
   (``executionContext.priority``, carried on the step message's ``runContext``), then fairly between keys,
   then by arrival.
2. **The token** (``rate``): the next start time the key's bucket allows is reserved in one write; a time in the
   future sends the step's message again, delayed to it and marked with it (``reservedAt``), and the delivery
   ends. The marked message starts without reserving again. A step waiting for its token keeps its slot (its
   lease covers the wait), so the starts both limits allow are the starts that happen.

   A flow that replays the run once the watch horizon has passed since a step became due (its declaration, or
   its retry's time), and finds it not started, takes its message for lost and sends it again
   (``recovery.overdue``). So a start reserved for later than that (``sent_again_after`` from when the step became
   due, ``DUE_FIELD`` on its message) is also kept in the limiter store under the step (``keep_reservation``), and
   a message that comes that late asks the store for its step's start before it reserves one (a start kept for
   an earlier attempt, before the step became due again, is not its own). Without that, every wake of a backlog
   longer than the horizon reserved each waiting step another start, further back: 40 runs of one step at
   ``1/m`` reserved 122 starts for 40 and pushed the bucket's next start 2 hours out, where 40 minutes was due; a
   step that waited that long for a slot first reserved again at each wake as well (12 runs at 2 at once and
   ``1/m``: 17 starts). A retry asks again (``retried``): its message was the first attempt's, reserved start and
   all, so a retry started at once on its first attempt's token.

The key is the step's key function over its arguments (read from the step's declaration when the delivery does
not hold them: a queued step's message carries no input). A key function that raises fails the attempt with
``LimitInputError`` (not retried) after its start, without running the body or taking anything.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from ..authoring.definitions import Registry, StepDef
from ..authoring.errors import CodecError
from ..durable import codecs
from ..durable.codecs import Place
from ..world.clock import clock_of
from ..world.entities import TERMINAL_RUN_STATUSES, TERMINAL_STEP_STATUSES
from ..world.errors import RunNotFoundError, StepNotFoundError
from ..world.events import Event
from ..world.messages import FlowMessage, queue_name_for
from ..world.protocol import World
from ..world.rules.leases import DEFAULT_LEASE_SECONDS
from ..world.rules.limiters import Acquired, Ask, LimitInputError, LimitSpec, pool_of, step_holder
from ..world.watch import bucket_seconds, horizon
from .limiter import Limiter, limiters_of

RESERVED_FIELD = "reservedAt"
"""A step message's ``runContext`` field: the start time its bucket reserved for it (it starts without a new
token)."""
PRIORITY_FIELD = "priority"
"""A step message's ``runContext`` field: its run's priority (``run_limits.PRIORITY_CONTEXT``)."""
DUE_FIELD = "dueSince"
"""A step message's ``runContext`` field: since when its step has been due to start, its declaration or its retry's
time (a wake may send the message again once the watch horizon has passed since: ``recovery.overdue``)."""
PAUSED_FIELD = "pausedWait"
"""A step message's ``runContext`` field: the message is the wake of a step that waited for its paused limit's
resume (a limit with a rate alone: ``_wait_for_resume``), whose grant it gives back before it asks for a token."""
SLOT_MARGIN = timedelta(seconds=1)
"""A slot's lease outlasts the attempt's own by this much: taken before the attempt's start, it must not end
before the lease that start records."""


@dataclass(frozen=True)
class Slot:
    """A slot this attempt holds: give it back with ``give_back`` once its body has ended."""

    limit: str
    pool: str
    holder: str


@dataclass(frozen=True)
class Taken:
    """The attempt may start. ``slot``: the slot it holds (None: its limit is a rate alone); ``admitted``: when
    its limit let it start (its reserved time, for a rate), recorded on its ``step_started`` (``LIMIT_FIELD``)."""

    limit: str
    key: str
    admitted: datetime
    slot: Slot | None = None

    def recorded(self) -> dict[str, str]:
        return {"name": self.limit, "key": self.key, "admittedAt": self.admitted.isoformat()}


LIMIT_FIELD = "limit"
"""``step_started``'s field naming the limit an attempt started under, its key and when it was admitted."""


WAITING = "waiting"
ENDED = "ended"
"""``take``'s answer to a step message whose run has ended: it took no token and holds no slot (the attempt is
``gone``)."""


async def step_key(world: World, definition: StepDef, run_id: str, step_id: str, call_input: Any) -> str:
    """The key of this call of ``definition`` (its arguments read from the step when not given)."""
    assert definition.limit is not None
    if definition.limit.key is None:
        return ""
    if call_input is None:
        call_input = (await world.steps.get(run_id, step_id, resolve_data="all")).input
    return key_of_call(definition, call_input, run_id, step_id)


def key_of_call(definition: StepDef, call_input: Any, run_id: str, step_id: str) -> str:
    """The key of a call whose stored arguments are ``call_input`` (``LimitInputError``, ``CodecError``)."""
    assert definition.limit is not None
    if definition.limit.key is None:
        return ""
    call = codecs.load_call(call_input, definition.args_codec,
                            lambda: Place("arguments", f"step {definition.name!r}", run_id, step_id), definition.fn)
    return definition.limit.key_of(tuple(call.args), call.kwargs)


def declared_limit(definition: StepDef, call_input: Any, run_id: str, step_id: str) -> dict[str, str] | None:
    """What ``step_created`` records of a limited step (``LIMIT_FIELD``): its limit and key, so ``describe`` and
    the viewer say which slot or token a step not started yet waits for. None for a step without a limit, or
    one whose key function refuses its arguments (its attempt fails on that, see the module's docstring)."""
    if definition.limit is None:
        return None
    try:
        return {"name": definition.limit.spec.name, "key": key_of_call(definition, call_input, run_id, step_id)}
    except (LimitInputError, CodecError):
        return None


async def take(world: World, definition: StepDef, run_id: str, step_id: str, key: str, *, wake: FlowMessage,
               lease_seconds: float | None, queued: bool = True) -> Taken | str:
    """The slot and token of an attempt about to start: ``Taken``, ``WAITING`` (its message brings it back: the
    delivery ends) or ``ENDED`` (its run has ended: nothing taken, and the slot its message came for given back).

    ``queued``: the attempt is a step message's, which may come after its run's end (sent before a cancel, or the
    wake of a slot granted just before it). Such a message took a token before its ``step_started`` was refused
    (a ``RateLimit`` spent on nothing), and one of a limit with a slot and a rate whose bucket was empty kept its
    slot while it went back for its token, until that late start came. So before it reserves a token it looks at
    its run (one metadata-only read, for a step with a rate and no start reserved yet). The flow's own start of a
    step born running (``queued=False``) has just read its run's log."""
    declared = definition.limit
    assert declared is not None
    spec = declared.spec
    limiter = Limiter(world)
    now = clock_of(world).now()
    context = wake.run_context
    holder, pool = step_holder(run_id, step_id), pool_of(spec, key)
    reserved = _moment(context.get(RESERVED_FIELD))
    due = _moment(context.get(DUE_FIELD)) or now
    kept = None
    if reserved is None and spec.rate is not None and now - due >= sent_again_after():
        # (a message sent again: the first may wait for a start its step holds, reserved since it became due)
        found = await limiter.store.reservation(spec.name, pool, holder)
        kept = reserved = found if found is not None and found >= due else None
    priority = context.get(PRIORITY_FIELD)
    slot = None
    if spec.concurrency is not None or spec.total is not None:
        lease = timedelta(seconds=lease_seconds if lease_seconds is not None else DEFAULT_LEASE_SECONDS)
        if reserved is not None and reserved > now:
            lease += reserved - now
        payload = wake.to_payload()
        decision = await limiter.acquire(spec, Ask(
            holder, key, priority if isinstance(priority, int) else 0, now, lease_until=now + lease + SLOT_MARGIN,
            wake={"queue": queue_name_for(wake.workflow_name), "payload": payload,
                  "key": f"{run_id}:{step_id}:slot:{now.timestamp():.6f}"}), unlogged_run=None if queued else run_id)
        if not isinstance(decision, Acquired):
            await _withdraw_if_ended(world, limiter, spec.name, pool, run_id, step_id if queued else None, holder)
            return WAITING
        slot = Slot(spec.name, pool, holder)
    admitted = now
    if spec.rate is not None:
        if reserved is None and slot is None and context.get(PAUSED_FIELD):
            await limiter.release(spec.name, pool, holder)  # (the resume's grant: a rate alone holds no slot)
        if reserved is None and queued and await has_ended(world, run_id):
            if slot is not None:
                await limiter.release(spec.name, pool, holder)
            return ENDED
        found_at = reserved if reserved is not None else await limiter.reserve(spec, key)
        for _ in range(3):
            if found_at is not None or slot is not None:
                break
            if await _wait_for_resume(limiter, spec, key, holder, wake, now, None if queued else run_id):
                await _withdraw_if_ended(world, limiter, spec.name, pool, run_id, step_id if queued else None,
                                         holder)
                return WAITING
            found_at = await limiter.reserve(spec, key)  # (resumed meanwhile)
        at = admitted = found_at if found_at is not None else now
        if reserved is None and at - due >= sent_again_after():
            await limiter.store.keep_reservation(spec.name, pool, holder, at)
        sent = clock_of(world).now()
        if kept is not None and kept > sent:
            return WAITING  # the message delayed to its start brings it (lost: a wake after that start sends it)
        if at > sent:  # (a reserved message that came early goes back for the rest of its delay)
            later = replace(wake, run_context={**context, RESERVED_FIELD: at.isoformat()})
            await world.queue(queue_name_for(wake.workflow_name), later.to_payload(),
                              idempotency_key=f"{run_id}:{step_id}:rate:{at.timestamp():.6f}:{sent.timestamp():.3f}",
                              delay_seconds=_delay(at, sent, limiter.store.delay_step))
            return WAITING
    return Taken(spec.name, key, admitted, slot)


async def _wait_for_resume(limiter: Limiter, spec: LimitSpec, key: str, holder: str, wake: FlowMessage,
                           now: datetime, unlogged_run: str | None) -> bool:
    """A step of a paused limit with a rate alone (``rules.limiters.paused_bucket``): it waits for the resume as a
    slot's waiter, in the same order (its run's priority, then turns between keys), and the resume's grant sends
    its message back, marked (``PAUSED_FIELD``) so it gives back the slot the grant made it hold. False when the
    key was resumed meanwhile (the slot it was granted at once is given back: ask the bucket again)."""
    context = wake.run_context
    priority = context.get(PRIORITY_FIELD)
    payload = replace(wake, run_context={**context, PAUSED_FIELD: True}).to_payload()
    decision = await limiter.acquire(spec, Ask(
        holder, key, priority if isinstance(priority, int) else 0, now, lease_until=now + SLOT_MARGIN,
        wake={"queue": queue_name_for(wake.workflow_name), "payload": payload,
              "key": f"{holder}:paused:{now.timestamp():.6f}"}), unlogged_run=unlogged_run)
    if isinstance(decision, Acquired):
        await limiter.release(spec.name, pool_of(spec, key), holder)
        return False
    return True


async def _withdraw_if_ended(world: World, limiter: Limiter, limit: str, pool: str, run_id: str,
                             step_id: str | None, holder: str) -> None:
    """The attempt was written as a waiter: if its step (``step_id``: a step message's, which may come after the
    step's end) or its run has ended meanwhile, take the waiter out again. Nobody else would:

    - a step message that comes after its run's end (a cancel while it was queued) found its limit full or
      paused and waited after the end's tidy (``free_run_steps``) had looked; it was listed until a grant or a
      resume;
    - the wake of a step the workflow cancelled after its grant (``free_cancelled_steps`` gave the granted slot
      back) is a fresh message, which asks before it looks at its step's end (only a redelivery looks first:
      ``ended_already``): found the limit full again (or paused), it waited a second time, for a step that never
      runs, while its run went on; its grant then went to nobody, ahead of live waiters.

    Written before these reads, the waiter is seen by the tidy of an end that they do not see. One read of the
    step without values and one metadata-only read of the run, on the waiting path only (the flow's own ask for a
    step to be born running, ``step_id`` None, has no step to read: its declaration comes after)."""
    if (step_id is not None and await step_ended(world, run_id, step_id)) or await has_ended(world, run_id):
        await limiter.release(limit, pool, holder)


async def step_ended(world: World, run_id: str, step_id: str) -> bool:
    """Whether step ``step_id`` has ended (cancelled by its workflow, say): one read without values. A step not
    found is not ended here (its run's look, ``has_ended``, answers for a run that is gone)."""
    try:
        step = await world.steps.get(run_id, step_id, resolve_data="none")
    except (StepNotFoundError, RunNotFoundError):
        return False
    return step.status in TERMINAL_STEP_STATUSES


async def has_ended(world: World, run_id: str) -> bool:
    """Whether run ``run_id`` has ended (or is gone): one metadata-only read. A failed read raises (the delivery
    is retried), unlike a running body's check (``step_runner.run_ended``), which looks again later."""
    try:
        run = await world.runs.get(run_id, resolve_data="none")
    except RunNotFoundError:
        return True
    return run.status in TERMINAL_RUN_STATUSES


async def withdraw_waiter(world: World, definition: StepDef, run_id: str, step_id: str, key: str) -> None:
    """Take the step's waiter (or its pause's) out of its limit: a first attempt written as a waiter whose
    ``step_created`` was then refused because its run had ended. The end's tidy (``free_run_steps``) finds a run's
    waiters by its log's ``step_created``, which never landed, and ``take``'s own look at the run came before the
    end: nobody else would take it out (idempotent: a waiter gone already is left as it is)."""
    declared = definition.limit
    assert declared is not None
    await Limiter(world).release(declared.spec.name, pool_of(declared.spec, key), step_holder(run_id, step_id))


async def give_back(world: World, taken: Taken | None) -> None:
    """The attempt's body has ended: its slot goes to the next waiter (idempotent)."""
    if taken is None or taken.slot is None:
        return
    slot = taken.slot
    await Limiter(world).release(slot.limit, slot.pool, slot.holder)


async def ended_already(world: World, definition: StepDef, run_id: str, step_id: str) -> bool:
    """Whether the step has ended (``step_runner.attempt_step``: a redelivery of its message looks before asking
    its limit). If it has, the slot its holder may still hold is freed: a delivery that died between recording
    the step's end and giving the slot back (``hold``) left it, and the redelivery that gave it back is this
    one. One read of the step, a write only where the slot is still held."""
    declared = definition.limit
    assert declared is not None
    step = await world.steps.get(run_id, step_id, resolve_data="all" if declared.key is not None else "none")
    if step.status not in TERMINAL_STEP_STATUSES:
        return False
    spec = declared.spec
    if spec.concurrency is not None or spec.total is not None:
        try:
            key = key_of_call(definition, step.input, run_id, step_id)
        except (LimitInputError, CodecError):
            return True  # its attempt took nothing under a key that is none
        await Limiter(world).release(spec.name, pool_of(spec, key), step_holder(run_id, step_id))
    return True


def sent_again_after() -> timedelta:
    """How long after it became due a step not started may have its message sent again by a wake: the watch
    horizon (``recovery.overdue``), less a bucket (a wake's flow reads its clock a little after the due)."""
    return horizon() - timedelta(seconds=bucket_seconds())


def retried(message: FlowMessage, due: datetime) -> FlowMessage:
    """``message`` for its step's next attempt, due at ``due``: without the start its bucket reserved for the
    attempt before (the retry takes a token of its own)."""
    context = {k: v for k, v in message.run_context.items() if k != RESERVED_FIELD}
    return replace(message, run_context={**context, DUE_FIELD: due.isoformat()})


def _moment(value: object) -> datetime | None:
    """A time a step message's ``runContext`` carries (``RESERVED_FIELD``, ``DUE_FIELD``), or None."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _delay(at: datetime, now: datetime, step: float) -> float:
    seconds = (at - now).total_seconds()
    return float(math.ceil(seconds - 1e-9)) if step >= 1 else seconds


__all__ = ["ENDED", "LIMIT_FIELD", "WAITING", "LimitInputError", "Slot", "Taken", "ended_already",
           "free_cancelled_steps", "free_run_steps", "give_back", "retried", "step_key", "take", "withdraw_waiter"]


async def free_run_steps(world: World, registry: Registry, run_id: str, log: Sequence[Event]) -> list[str]:
    """The run has ended: free the slots its limited steps' attempts still hold (a step that ended, or is to be
    retried, whose delivery died before it gave its slot back: held until its lease passed), and take its steps
    still waiting for a slot out of the waiters (a run cancelled or failed while one waited: left, the waiter
    shows in ``awsworld limits`` and is granted a slot its wake only gives back). A limit with a rate alone counts
    too: its open steps may wait for a paused key's resume as waiters (``_wait_for_resume``), and left, such a
    waiter was listed until the resume, an owner that might never come back. The pools are those its attempts
    started under (``step_started``'s ``LIMIT_FIELD``) and those its steps that may wait were declared under
    (``step_created``'s, ``declared_limit``): a step still open, or one that ended while its latest attempt had
    not started (the workflow cancelled it while it waited: its waiter, or the slot a grant gave it, was left to
    its grant lease). One read per pool, a read of each such step's waiter record where the pool has waiters, a
    write only where one still holds or waits. A run none of whose steps was declared or started under a limit,
    the common case, costs one pass over its log and no I/O. A step whose latest attempt started and has not
    ended keeps its slot: its body may still run (a cancel reaches it at its next check), and a slot bounds
    running bodies; its delivery gives it back, or its lease frees it."""
    return await _free_steps(world, registry, run_id, log, None)


async def free_cancelled_steps(world: World, registry: Registry, run_id: str, log: Sequence[Event],
                               step_ids: Collection[str]) -> list[str]:
    """The workflow cancelled steps ``step_ids`` (``declarations.Declarer.cancel_steps``), and its run goes on:
    those whose latest attempt had not started leave the waiters, or give back the slot a grant gave them and
    their wake had not come for yet. Left, such a waiter stood in line until its grant (ahead of live ones of a
    lower place), and its wake gave the slot back only when it came. A step whose attempt runs is left alone:
    that attempt gives its slot back once its body has stopped (a slot bounds running bodies)."""
    return await _free_steps(world, registry, run_id, log, set(step_ids))


async def _free_steps(world: World, registry: Registry, run_id: str, log: Sequence[Event],
                      only: set[str] | None) -> list[str]:
    """``free_run_steps`` (``only`` None: every step of the run) or ``free_cancelled_steps`` (``only``: those
    steps, and of them only those that may wait)."""
    marked = [(event.event_type, event.correlation_id, limit) for event in log
              if event.event_type in _MARKED_EVENTS and event.correlation_id is not None
              and (only is None or event.correlation_id in only)
              and isinstance(limit := (event.event_data or {}).get(LIMIT_FIELD), dict)]
    unlogged = await _unlogged_waiters(world, registry, run_id, log) if only is None else []
    if not marked and not unlogged:
        return []
    names = {e.correlation_id: str((e.event_data or {}).get("stepName"))
             for e in log if e.event_type == "step_created" and e.correlation_id}
    ended = {e.correlation_id for e in log if e.event_type in ("step_completed", "step_failed")}
    latest: dict[str, str] = {}
    for e in log:
        if e.correlation_id and e.event_type in _ATTEMPT_EVENTS:
            latest[e.correlation_id] = e.event_type
    may_wait = {step_id for step_id, kind in latest.items() if kind != "step_started"}  # (its latest attempt)
    pools: dict[tuple[str, str], tuple[set[str], set[str]]] = {}
    for event_type, step_id, limit in marked:
        if step_id not in ended and step_id not in may_wait:
            continue  # its attempt runs, or ran in a container that died: that body may run on past its run's end
            # (to its next check of it, AWSWORLD_STEP_CHECK_SECONDS; a body that never awaits, to its end), so its
            # slot is its delivery's to give back once the body has stopped, or its lease's to free. Freed here,
            # a limit of 1 had the next waiter's body running beside the cancelled run's.
        opened = event_type == "step_created"
        if opened and step_id in ended and step_id not in may_wait:
            continue  # (a step that ended after its start waits for nothing; its attempts' starts name their pools)
        if only is not None and (not opened or step_id not in may_wait):
            continue  # (an attempt that runs gives its slot back once its body stops)
        try:
            declared = registry.step(names.get(step_id, "")).limit
        except LookupError:
            continue
        if declared is None:
            continue
        if declared.spec.concurrency is None and declared.spec.total is None and not opened:
            continue  # a rate alone holds no slot once started (a pause's waiter is its open step's: below)
        holders, waiting = pools.setdefault(
            (declared.spec.name, pool_of(declared.spec, str(limit.get("key", "")))), (set(), set()))
        holders.add(step_holder(run_id, step_id))
        if opened:
            waiting.add(step_holder(run_id, step_id))
    for name, pool, holder in unlogged:
        holders, waiting = pools.setdefault((name, pool), (set(), set()))
        holders.add(holder)
        waiting.add(holder)
    limiter = Limiter(world)
    freed: list[str] = []
    for (name, pool), (holders, waiting) in pools.items():
        freed += await limiter.release_all(name, pool, holders, waiting=waiting)
    return freed


async def _unlogged_waiters(world: World, registry: Registry, run_id: str,
                            log: Sequence[Event]) -> list[tuple[str, str, str]]:
    """The (limit, pool, holder) of the waiters a flow of this run wrote for steps it had yet to declare
    (``take`` with ``queued`` false: the step to be born running), as noted under the run
    (``LimiterStore.unlogged_waiters``). A flow that died between such a waiter and the step's ``step_created``,
    its run then cancelled before the redelivery that declares it again, left a waiter no log names: listed, and
    granted a slot that went to nobody, until the next grant, or until the resume of a paused limit (perhaps
    never). Asked only where that can be: a run that did not complete (a run completes through a flow that
    replayed it, declaring that step again first) of code with a limited step, one query per such limit."""
    if any(e.event_type == "run_completed" for e in reversed(log)):
        return []
    store = limiters_of(world)
    names = sorted({d.limit.spec.name for d in registry.steps.values() if d.limit is not None})
    if store is None or not names:
        return []
    own = step_holder(run_id, "")  # (a holder noted under another run id that merely starts alike is not ours)
    return [(name, pool, holder) for name in names for pool, holder in await store.unlogged_waiters(name, run_id)
            if holder.startswith(own)]


_MARKED_EVENTS = frozenset({"step_created", "step_started"})
_ATTEMPT_EVENTS = frozenset({"step_created", "step_started", "step_retrying"})
"""A step's events that begin or start an attempt: the latest says whether its attempt has started."""
