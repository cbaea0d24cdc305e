"""``client.limits``: limits across runs while they run: what they hold, who waits, and run-time changes.

    await client.limits.list()                                   # every limit with a stored pool
    await client.limits.list(idle=False)                         # without keys nothing holds or waits on
    await client.limits.describe("workflow:shop.order", key="cust-7")   # holders, waiters in order, the bucket
    await client.limits.set(order, key="cust-7", concurrency=3)  # a key's limit, now (waiters that fit start)
    await client.limits.pause(export_step)                       # no new grants for the key ("" unkeyed)
    await client.limits.resume(export_step)
    await client.limits.reset(order, key="cust-7")               # code's numbers again, gone holders freed

A limit is named by its name (``workflow:<name>``, ``step:<name>``, or the ``name=`` it was given) or by the
``@workflow`` / ``@step`` that declares it. A change takes effect at once, without a deploy: it is one write of
the key's pool (``world.rules.limiters.adjust``) that grants, in the same write, the waiters a raised limit or a
resume lets in and sends their messages. A limit changed in code applies when the new code first uses it (each
use records the code's numbers in the pool): nothing to migrate. A run-time override stays until ``reset``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from .._timeline import deadline_text
from .._worker.limiter import Limiter, limiters_of
from .._worker.run_limits import RunSlot, limit_key_text, recorded_slot
from .._worker.step_limits import LIMIT_FIELD
from ..authoring.definitions import REGISTRY, StepDef, WorkflowDef, did_you_mean, nearest
from ..authoring.limits import declared, declared_names, keyed, limits_runs, named_as
from ..world.clock import clock_of
from ..world.entities import TERMINAL_RUN_STATUSES
from ..world.events import Event
from ..world.protocol import World
from ..world.rules.limiters import (
    SHARED_POOL,
    STEP_HOLDER,
    Adjustment,
    Change,
    Holding,
    LimitInputError,
    LimitNotFoundError,
    LimitSpec,
    Pool,
    Rate,
    Waiter,
    available_tokens,
    check_key,
    check_name,
    holder_run,
    in_order,
    next_start,
    parse_rate,
    pool_of,
    run_holder,
    step_holder,
)

LimitRef = str | Callable[..., Any]
"""A limit's name, or the ``@workflow`` / ``@step`` that declares it."""


@dataclass(frozen=True)
class KeyView:
    """One key of a limit as it is now: its limit (code's, or its override), who holds its slots, who waits for
    one (in the order they will be granted: ``place`` 1 is next), its pause, its bucket's tokens, and when the
    bucket next gives a start (``next_start``: a start reserved before comes earlier)."""

    key: str
    concurrency: int | None
    holders: list[tuple[str, Holding]]
    waiters: list[Waiter]
    paused: bool
    rate: Rate | None
    tokens: float | None
    overridden: bool
    next_start: datetime | None = None

    def place(self, holder: str) -> int | None:
        return next((i + 1 for i, w in enumerate(self.waiters) if w.holder == holder), None)

    @property
    def idle(self) -> bool:
        """Nothing to look at now: no holder, no waiter, no pause or override, not shut (a concurrency of 0), and
        a token to give (no start reserved ahead). ``list(idle=False)`` leaves such keys out: a pool stays stored
        for 30 days after its last use (``aws/limiter_store.py``'s ``IDLE_DAYS``), so per-customer keys listed
        every customer of the month, thousands of lines of ``0/1``."""
        return (not self.holders and not self.waiters and not self.paused and not self.overridden
                and self.concurrency != 0 and (self.tokens is None or self.tokens >= 1))


@dataclass(frozen=True)
class LimitView:
    """A limit: its numbers as code last declared them, its total now (a shared pool's), and its keys."""

    name: str
    spec: LimitSpec
    total: int | None
    keys: list[KeyView]
    declared: bool = False
    """``spec`` is the code's of this process (else the numbers the first pool recorded): a key whose own differ
    keeps those of the code that used it last until this code uses it (``_worker/limiter.py``)."""
    hidden: int = 0
    """Idle keys left out of ``keys`` (``LimitsClient.list(idle=False)``)."""

    def key(self, key: str) -> KeyView | None:
        return next((k for k in self.keys if k.key == key), None)


class LimitsClient:
    def __init__(self, world: World) -> None:
        self.world = world
        self.limiter = Limiter(world)

    async def list(self, *, idle: bool = True) -> list[LimitView]:
        """Every limit with a stored pool (a limit nothing used yet has none), its keys and their waiters.
        ``idle=False``: without its idle keys (``KeyView.idle``), counted in ``LimitView.hidden`` (``awsworld
        limits`` without ``--all``)."""
        views = [await self.describe(name) for name in await self.limiter.store.limits()]
        if idle:
            return views
        return [replace(view, keys=[k for k in view.keys if not k.idle], hidden=sum(k.idle for k in view.keys))
                for view in views]

    async def describe(self, limit: LimitRef, *, key: str | None = None) -> LimitView:
        """One limit as it is stored now (``key``: that key only); reads only. A holder whose run ended, or whose
        lease passed, without freeing its slot (a crash) is shown until the next write of its pool frees it
        (``reset`` does, at once)."""
        name, spec = _resolve(limit)
        pools = await self.limiter.pools(name)
        if key is not None:
            wanted = pool_of(spec, key) if spec is not None else _stored_pool(pools, key)
            pools = [p for p in pools if p.pool == wanted]
        if not pools:
            if spec is None:
                _named_otherwise(name)
                _declares_none(name)
                raise LimitNotFoundError(f"no limit {name!r} is stored (nothing has used it yet), and "
                                         f"{await self._unknown(name)}")
            return LimitView(name, spec, spec.total, [], declared=True)
        views: list[KeyView] = []
        now = clock_of(self.world).now()
        for pool in pools:
            waiters = in_order(await self.limiter.waiters(name, pool.pool)) if pool.waiting else []
            seen = {h.key for h in pool.holders.values()} | set(pool.keys) | {w.key for w in waiters}
            seen.discard(SHARED_POOL)
            keys = sorted(seen or ({pool.pool} if pool.pool != SHARED_POOL else set()))
            for k in keys:
                if key is not None and k != key:
                    continue
                state = pool.key(k)
                views.append(KeyView(
                    k, pool.concurrency(k), sorted(((h, v) for h, v in pool.holders.items() if v.key == k),
                                                   key=lambda item: item[1].since),
                    [w for w in waiters if w.key == k], state.paused, pool.rate(k), available_tokens(pool, k, now),
                    state.concurrency is not None or state.rate is not None or state.paused,
                    next_start(pool, k, now)))
        first = pools[0]
        return LimitView(name, spec or first.spec, first.total_limit(), views, declared=spec is not None)

    async def set(self, limit: LimitRef, *, key: str = "", concurrency: int | None = None,
                  total: int | None = None, rate: str | None = None, burst: int | None = None) -> LimitView:
        """Override ``key``'s concurrency or rate (``"20/s"``, with ``burst``), or the limit's ``total``, now and
        until ``reset``. A raised limit grants its waiters that now fit in the same write."""
        parsed = None if rate is None else parse_rate(rate, burst=burst)
        name = _resolve(limit)[0]
        if parsed is not None and limits_runs(name):  # what @workflow(rate=...) is refused for: starts ignore it
            raise LimitInputError(f"limit {name!r} limits runs at once: it takes a concurrency or a total, not a "
                                  "rate (a rate limits a step's attempts: @step(rate=...))", field="rate")
        await self._adjust(limit, key, Adjustment("set", key if total is None else SHARED_POOL,
                                                  concurrency=concurrency, rate=parsed, total=total))
        return await self.describe(limit, key=None if total is not None else key)

    async def pause(self, limit: LimitRef, *, key: str = "") -> LimitView:
        """No new slot or token for ``key`` until ``resume``: holders keep theirs, askers wait."""
        return await self._change(limit, key, "pause")

    async def resume(self, limit: LimitRef, *, key: str = "") -> LimitView:
        return await self._change(limit, key, "resume")

    async def reset(self, limit: LimitRef, *, key: str = "", total: bool = False) -> LimitView:
        """Drop ``key``'s overrides and pause (code's numbers apply again) and its bucket's state; holders whose
        run ended or whose lease passed are freed (``describe`` does that too). ``total=True``: the limit's total
        set at run time (``set(total=)``) instead, the code's again. A total set (to 0, say, shutting every key)
        could once be undone only by a ``set``: ``reset`` of the keyed limit asked for a key, and a key's reset
        left the total as it was."""
        if total:
            if key:
                raise LimitInputError("reset a key (--key, key=) or the limit's total (--total, total=True), not both",
                                      field="total")
            name, spec = _resolve(limit)
            pools = [] if spec is not None else await self.limiter.pools(name)
            shared = spec.shared if spec is not None else any(p.pool == SHARED_POOL for p in pools)
            if not shared and (spec is not None or pools):  # (none stored, no code: not found, as any change)
                raise LimitInputError(f"limit {name!r} has no total (its keys are independent): reset a key "
                                      "(key=, --key KEY)", field="total")
            return await self._change(limit, "", "reset", pool_key=SHARED_POOL)
        return await self._change(limit, key, "reset")

    async def _change(self, limit: LimitRef, key: str, change: Change, *, pool_key: str | None = None) -> LimitView:
        pool = await self._adjust(limit, key, Adjustment(change, key if pool_key is None else pool_key))
        if change == "reset":  # and every holder that holds nothing any more (a crash) is freed, now
            await self.limiter.settle(pool.limit, pool.pool)
        return await self.describe(limit, key=key if pool_key is None else None)

    async def _unknown(self, name: str) -> str:
        """What a name no pool stores and no code here declares most likely meant: the nearest of the limits stored
        or declared here (``workflow:shop.ordr``, or ``shop.order`` without its ``workflow:``), else those limits.
        It once said only "no code declaring it was given", even to a command run with the code (AWSWORLD_MODULES),
        and a typo read as a limit nothing had used yet."""
        known = sorted(set(await self.limiter.store.limits()) | set(declared_names()))
        code = ("the code here declares none by that name" if declared_names() else
                "no code declaring it was given (AWSWORLD_MODULES, or name its @workflow or @step)")
        prefixed = [k for k in known if k in (f"workflow:{name}", f"step:{name}")]
        suggestions = prefixed or nearest(name, known)
        if suggestions:
            return code + did_you_mean(suggestions)
        shown = ", ".join(repr(k) for k in known[:8]) + (f" and {len(known) - 8} more" if len(known) > 8 else "")
        return f"{code}; the limits known: {shown}" if known else code

    async def _adjust(self, limit: LimitRef, key: str, adjustment: Adjustment) -> Pool:
        name, spec = _resolve(limit)
        check_key(key, name)
        pools = await self.limiter.pools(name)
        stored = _stored_keys(pools)
        if key and adjustment.key != SHARED_POOL and keyed(name) is False and (
                adjustment.change == "set" or key not in stored):  # (one stored already can be reset or resumed)
            # (its one key is "": a key of its own would be stored, listed and used by no run)
            raise LimitInputError(f"limit {name!r} has no key function in its code: its one key is '', so key "
                                  f"{key!r} is no key a run uses; leave --key (key=) out", field="key")
        if adjustment.key == "" and "" not in stored and (stored or keyed(name)):
            # A keyed limit has no key "": pausing or setting it changed nothing any run holds, and said nothing
            # (with no key stored yet, it stored a key "" of its own, paused, that no run uses).
            shown = (", ".join(repr(k) for k in sorted(stored)[:5]) + (", ..." if len(stored) > 5 else "")
                     if stored else "none used yet")
            raise LimitInputError(f"limit {name!r} is keyed (its keys: {shown}): name the key to change (key=, "
                                  "--key KEY; a total: total=, --total)", field="key")
        pool_key = pool_of(spec, key) if spec is not None else _stored_pool(pools, key)
        if spec is None and not any(p.pool == pool_key for p in pools):
            if not pools:
                _named_otherwise(name)
                _declares_none(name)
                raise LimitNotFoundError(f"no limit {name!r} is stored (nothing has used it yet), and "
                                         f"{await self._unknown(name)}")
            raise LimitNotFoundError(f"no limit {name!r} is stored for key {key!r}: name its @workflow or @step "
                                     "to set a key nothing has used yet")
        return await self.limiter.adjust(name, pool_key, adjustment, spec=spec)


def _resolve(limit: LimitRef) -> tuple[str, LimitSpec | None]:
    """The limit's name and its numbers in this process's code: the ``@workflow`` / ``@step``'s, or those of a
    name this process declares (``authoring.limits.declared``; None: known only by what is stored)."""
    if isinstance(limit, str):
        return check_name(limit), declared(limit)
    definition: WorkflowDef | StepDef | None = getattr(limit, "__awsworld_workflow__", None) or getattr(
        limit, "__awsworld_step__", None)
    if definition is None or definition.limit is None:
        raise TypeError(f"{limit!r} is not a @workflow or @step with concurrency= or rate=")
    return definition.limit.spec.name, definition.limit.spec


def _named_otherwise(name: str) -> None:
    """``LimitNotFoundError`` naming the limit when ``name`` is the default name of a workflow or step whose code
    here gives its limit a ``name=`` (``step:shop.charge`` for ``payments-api``): the limit is stored under that."""
    actual = named_as(name)
    if actual is not None:
        raise LimitNotFoundError(f"{name.replace(':', ' ', 1)}'s limit is named {actual!r} (its name=): name "
                                 f"{actual!r} instead of {name!r}")


def _declares_none(name: str) -> None:
    """``LimitNotFoundError`` saying so when ``name`` is the default name of a workflow or step the code here
    registers without a limit (``step:shop.fetch`` for a plain ``@step``): it was answered with the nearest limits
    (``did you mean 'step:shop.fetchall'``), which read as a typo in a name that was right."""
    kind, _, owner = name.partition(":")
    registered = REGISTRY.steps if kind == "step" else REGISTRY.workflows if kind == "workflow" else {}
    if owner not in registered:
        return
    takes = "concurrency=..., rate=..." if kind == "step" else "concurrency=..."
    raise LimitNotFoundError(f"{kind} {owner!r} declares no limit in the code here, so there is no limit {name!r} "
                             f"to describe or change: a limit is declared in its code, @{kind}({takes})")


def _stored_keys(pools: list[Pool]) -> set[str]:
    """The keys stored pools hold: a key's own pool, or the keys a shared pool (a limit with a total) holds."""
    keys: set[str] = set()
    for pool in pools:
        if pool.pool != SHARED_POOL:
            keys.add(pool.pool)
        else:
            keys |= {k for k in pool.keys if k != SHARED_POOL} | {h.key for h in pool.holders.values()}
    return keys


def _stored_pool(pools: list[Pool], key: str) -> str:
    """The pool a key lives in when only what is stored tells: the shared one if the limit has it."""
    return SHARED_POOL if any(p.pool == SHARED_POOL for p in pools) else key


def waiting_since(view: KeyView, holder: str) -> datetime | None:
    return next((w.since for w in view.waiters if w.holder == holder), None)


def runs_of(holders: list[tuple[str, Holding]]) -> list[str]:
    return [r for h, _ in holders if (r := holder_run(h)) is not None]


async def limit_waits(world: World, run_id: str, status: str, context: dict[str, Any] | None,
                      events: Sequence[Event]) -> list[dict[str, Any]]:
    """What of a run waits for a limit, for ``describe`` and the viewer: the run itself (pending, its start
    waiting for a slot of its workflow's limit: ``kind`` ``slot`` with its ``place`` among ``of`` waiters and
    who holds the slots) and each step not started yet (its last event a ``step_created`` or ``step_retrying``)
    that waits for a slot (``slot``, with ``stepId``) or for its bucket's next token (``token``, with when the
    bucket next has one). Reads only."""
    if status in TERMINAL_RUN_STATUSES or limiters_of(world) is None:
        return []
    found: list[dict[str, Any]] = []
    limits = LimitsClient(world)
    seen: dict[tuple[str, str], tuple[KeyView | None, int | None]] = {}
    slot = recorded_slot(context)
    if status == "pending" and slot is None:  # started without the workflow's code: its first delivery queued it
        created = next((e.event_data or {} for e in events if e.event_type == "run_created"), {})
        workflow = created.get("workflowName")
        slot = await _unrecorded_slot(limits, workflow, run_id, _Read({})) if isinstance(workflow, str) else None
    if status == "pending" and slot is not None:
        entry = await _slot_wait(limits, slot.name, slot.key, run_holder(run_id))
        if entry is not None:
            found.append(entry)
    marks: dict[str, tuple[str, dict[str, Any]]] = {}
    last: dict[str, str] = {}
    for event in events:
        step_id = event.correlation_id or ""
        if event.event_type == "step_created":
            data = event.event_data or {}
            mark = data.get(LIMIT_FIELD)
            if isinstance(mark, dict):
                marks[step_id] = (str(data.get("stepName", step_id)), mark)
        if event.event_type.startswith("step_"):
            last[step_id] = event.event_type
    for step_id, (step_name, mark) in marks.items():
        if last.get(step_id) not in ("step_created", "step_retrying"):
            continue
        name, key = str(mark.get("name", "")), str(mark.get("key", ""))
        entry = await _slot_wait(limits, name, key, step_holder(run_id, step_id), seen)
        if entry is None:
            entry = await _token_wait(limits, name, key)
        if entry is not None:
            found.append({**entry, "stepId": step_id, "name": step_name})
    return found


async def queued_runs(world: World, runs: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """Run id -> what each pending run of ``runs`` (run records: ``runs.list``'s page, ``runs.get``'s view) queues
    for, when it waits for a slot of its workflow's limit: ``limit``, ``key``, its ``place`` among ``of`` waiters,
    the key's slots ``held`` of its ``concurrency``, a limit with a total's ``heldInAll`` of its ``total``, and
    ``paused``. A pending run absent is not queued (not limited, or granted and about to start): the listings once
    showed both as a plain ``pending``, and a run stuck read as one queued behind a limit, or the other way round.
    One read of each limit key the runs wait on (``describe``), however many runs wait on it; reads only."""
    if limiters_of(world) is None:
        return {}
    limits = LimitsClient(world)
    views: dict[tuple[str, str], LimitView | None] = {}
    totals: dict[str, int] = {}
    whole = _Read({})
    found: dict[str, dict[str, Any]] = {}
    for run in runs:
        if run.status != "pending":
            continue
        slot = recorded_slot(run.execution_context) or await _unrecorded_slot(limits, run.workflow_name, run.run_id,
                                                                              whole)
        if slot is None:
            continue
        if (slot.name, slot.key) not in views:
            try:
                views[(slot.name, slot.key)] = await limits.describe(slot.name, key=slot.key)
            except LimitNotFoundError:
                views[(slot.name, slot.key)] = None
        view = views[(slot.name, slot.key)]
        key = view.key(slot.key) if view is not None else None
        place = key.place(run_holder(run.run_id)) if key is not None else None
        if view is None or key is None or place is None:
            continue
        if view.total is not None and slot.name not in totals:  # the shared pool's holders, every key's
            totals[slot.name] = sum(len(k.holders) for k in (await limits.describe(slot.name)).keys)
        found[run.run_id] = {"limit": slot.name, "key": slot.key, "place": place, "of": len(key.waiters),
                             "held": len(key.holders), "concurrency": key.concurrency,
                             "heldInAll": totals.get(slot.name), "total": view.total, "paused": key.paused}
    return found


@dataclass
class _Read:
    """The limits one listing (or one ``describe``) has read so far: each by name (None: not stored), and the
    names of every stored limit once asked for (``_unrecorded_slot``)."""

    views: dict[str, LimitView | None]
    names: list[str] | None = None


async def _unrecorded_slot(limits: LimitsClient, workflow: str, run_id: str, read: _Read) -> RunSlot | None:
    """The slot a pending run started without its workflow's code waits for: such a start records none (it cannot
    compute the key, nor know the limit's name), and the run's first delivery computes it and queues the run
    (``run_limits.slot_in_log``), writing nothing on the run. So the waiters say: first those of the limit by its
    default name ``workflow:<name>``, then, for a limit named otherwise (``Concurrency(name=...)``, one several
    workflows share), those of every stored limit (a run waits in no limit but its workflow's; a run started from
    a script's ``Client(AWSWorld())`` read "waits on its first delivery" and, under a named limit, a plain
    ``pending``). ``read``: what was read so far (each limit read once however many runs ask)."""
    holder, default = run_holder(run_id), f"workflow:{workflow}"
    slot = _waiting_in(await _limit(limits, default, read), holder)
    if slot is not None:
        return slot
    if read.names is None:
        read.names = sorted(await limits.limiter.store.limits())
    for name in read.names:
        if name != default and (slot := _waiting_in(await _limit(limits, name, read), holder)) is not None:
            return slot
    return None


async def _limit(limits: LimitsClient, name: str, read: _Read) -> LimitView | None:
    if name not in read.views:
        try:
            read.views[name] = await limits.describe(name)
        except (LimitNotFoundError, LimitInputError):
            read.views[name] = None
    return read.views[name]


def _waiting_in(view: LimitView | None, holder: str) -> RunSlot | None:
    """The slot ``holder`` waits for in limit ``view``, if it waits there."""
    if view is None:
        return None
    key = next((k.key for k in view.keys if any(w.holder == holder for w in k.waiters)), None)
    return None if key is None else RunSlot(view.name, key, "")


def queued_text(queued: dict[str, Any]) -> str:
    """One of ``queued_runs``'s entries for people: ``workflow:shop.order key 'c7' (1/1 held, place 2 of 3)``,
    ``workflow:shop.export key 't2' (1/20 in all, place 1 of 1)``, with ``paused`` or ``closed`` when nothing can
    start until an operator changes the key."""
    where = limit_key_text(queued["limit"], queued["key"])
    parts = []
    if queued["concurrency"] is not None:
        parts.append(f"{queued['held']}/{queued['concurrency']} held")
    if queued["total"] is not None:
        parts.append(f"{queued['heldInAll']}/{queued['total']} in all")
    if queued["paused"]:
        parts.append("paused")
    elif queued["concurrency"] == 0 or queued["total"] == 0:
        parts.append("closed")
    parts.append(f"place {queued['place']} of {queued['of']}")
    return f"{where} ({', '.join(parts)})"


def limit_wait_text(wait: dict[str, Any], now: datetime | None = None) -> str:
    """One entry of ``limit_waits`` for people: ``a slot of workflow:shop.order key 'c7' (place 2 of 3; held by
    r:wrun_...)``, ``a token of step:shop.charge (10/s burst 10; reserved, by 19:05:13.830 UTC (in 1 min 50 s)
    at the latest)``: its own start was reserved when it asked, before the bucket's next free one. ``now``: the
    World's time, which "in 1 min 50 s" counts from (default: the system clock's)."""
    where = limit_key_text(str(wait["limit"]), str(wait.get("key") or ""))
    if wait["kind"] == "token":
        return (f"a token of {where} ({wait['rate']}; reserved, by {deadline_text(wait['nextTokenAt'], now)} at the "
                "latest)")
    if wait.get("paused") and not wait["heldBy"]:  # (a rate alone, or nothing held: only the resume lets it on)
        command = f"awsworld limits resume {wait['limit']}" + (f" --key {wait['key']}" if wait.get("key") else "")
        return f"the resume of {where} (paused: `{command}`; place {wait['place']} of {wait['of']})"
    held = holders_text(wait["heldBy"])
    state = ("paused, " if wait.get("paused") else "") + (  # else "held by nobody" and no word of why it waits
        "closed: its concurrency is 0 until `limits set` raises it or `limits reset`, " if wait.get("concurrency") == 0
        else "closed: its total is 0 until `limits set --total` raises it or `limits reset --total`, "
        if wait.get("total") == 0 else "")
    return f"a slot of {where} ({state}place {wait['place']} of {wait['of']}; held by {held})"


SHOWN_HOLDERS = 3
"""How many holders a wait's text names (``held by run wrun_A, run wrun_B, run wrun_C and 7 more``): a step limit
of 10 held by one fan-out once put ten holder ids on each of its 190 waiting steps' lines."""


def holder_parts(holder: str) -> tuple[str | None, str | None]:
    """The run and the step (None for a run's own slot) a stored holder id names: ``r:<run>``, ``s:<run>:<step>``;
    (None, None) for an id of neither form."""
    run_id = holder_run(holder)
    if run_id is not None:
        return run_id, None
    if holder.startswith(STEP_HOLDER) and ":" in holder[len(STEP_HOLDER):]:
        run_id, step_id = holder[len(STEP_HOLDER):].rsplit(":", 1)
        return run_id, step_id
    return None, None


def holder_text(holder: str) -> str:
    """A holder or waiter for people, by ids ``awsworld describe`` takes: ``run wrun_…``, ``step step_3 of run
    wrun_…`` (the stored id when it is of neither form)."""
    run_id, step_id = holder_parts(holder)
    if run_id is None:
        return holder
    return f"run {run_id}" if step_id is None else f"step {step_id} of run {run_id}"


def holders_text(holders: Sequence[str]) -> str:
    """The holders of a wait's slots for people: ``run wrun_…`` for a run, ``step step_3 of run wrun_…`` for a step
    attempt, the first ``SHOWN_HOLDERS`` and how many more.
    Ids a user can pass to ``awsworld describe``: the stored holder ids (``r:wrun_…``, in ``heldBy``) are not."""
    said = [holder_text(holder) for holder in holders[:SHOWN_HOLDERS]]
    more = len(holders) - len(said)
    return ", ".join(said) + (f" and {more} more" if more else "") if said else "nobody"


async def _slot_wait(limits: LimitsClient, name: str, key: str, holder: str,
                     seen: dict[tuple[str, str], tuple[KeyView | None, int | None]] | None = None
                     ) -> dict[str, Any] | None:
    """``seen``: the keys already read by this ``limit_waits`` (one read of a pool for all of a run's waiting steps,
    whose places then come from the same read: 190 steps of a fan-out once read it 190 times), with their limit's
    total (a total of 0 shuts every key: a wait on it once read "held by nobody" and said nothing of why)."""
    if seen is not None and (name, key) in seen:
        view, total = seen[(name, key)]
    else:
        try:
            limit = await limits.describe(name, key=key)
            view, total = limit.key(key), limit.total
        except LimitNotFoundError:
            view, total = None, None
        if seen is not None:
            seen[(name, key)] = (view, total)
    place = None if view is None else view.place(holder)
    if view is None or place is None:
        return None
    return {"kind": "slot", "limit": name, "key": key, "place": place, "of": len(view.waiters),
            "heldBy": [h for h, _ in view.holders], "concurrency": view.concurrency, "total": total,
            "paused": view.paused}


async def _token_wait(limits: LimitsClient, name: str, key: str) -> dict[str, Any] | None:
    """``nextTokenAt``: when the bucket gives its next start to a newcomer; a waiting step reserved its own start
    before that (every waiter's is earlier), so it is the latest the step starts. (It was once now plus one
    interval whatever the backlog: 8 steps at ``2/m`` all read "the next at" 30 s away, the last starting 4 min
    later.)"""
    try:
        view = (await limits.describe(name, key=key)).key(key)
    except LimitNotFoundError:
        return None
    if view is None or view.rate is None or view.tokens is None or view.tokens >= 1 or view.next_start is None:
        return None
    return {"kind": "token", "limit": name, "key": key, "rate": view.rate.text(),
            "nextTokenAt": view.next_start.isoformat()}
