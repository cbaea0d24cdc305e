"""Fan-out with limits and completion rules: ``map``, ``parallel`` and ``first_successful``.

All are plain asyncio on whatever loop runs them, so they work in a workflow body (on the replay loop) and
outside one (a step called as a plain function, a unit test). In a workflow they are replay-stable because
every decision follows the order in which items finish, and that order is the log's: an item's task is
created in input order and started only by the loop below, which reacts to one finished item at a time, in the
order their completions are queued (FIFO, as the replay loop runs callbacks). So the same items start at the
same log positions on every replay, and their steps, sleeps and hooks get the same ids.

``max_concurrency`` counts *items* in flight, from the moment an item's task starts to the moment it returns or
raises, whatever it awaits meanwhile (steps, sleeps, hooks, child workflows): an item that sleeps or waits on a
hook still holds its slot, so no more than ``max_concurrency`` of them are ever started-but-unfinished.

When an item or branch is labelled (``map(name=..., item_name=...)``, ``parallel(name=..., names=...)``), every
call it makes records the label in its display name (``authoring.names``): set inside the item's own task, so it
reaches exactly that item's calls. The labels are computed before any item starts, so a bad one fails the call
with nothing written. What completes a batch (``min_successful``, the tolerances) is ``batch_result``'s; once it
has, the batch returns at once and the items still running finish in the background (see ``map``)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import ExitStack
from typing import Literal, TypeVar, overload

from .batch_result import (
    BatchError,
    BatchItem,
    BatchOptionError,
    BatchResult,
    CompletionReason,
    CompletionRule,
    describe_error,
)
from .names import SEPARATOR, check_name, labelled
from .runtime import StepEnd, noted, wakes_on

T = TypeVar("T")
R = TypeVar("R")


@overload
async def map(fn: Callable[[T], Awaitable[R]], items: Iterable[T], *, max_concurrency: int | None = None,
              min_successful: int | None = None, tolerated_failures: int | None = None,
              tolerated_failure_fraction: float | None = None, with_index: Literal[False] = False,
              name: str | None = None, item_name: Callable[[T, int], str] | None = None) -> BatchResult[R]: ...


@overload
async def map(fn: Callable[[T, int], Awaitable[R]], items: Iterable[T], *, max_concurrency: int | None = None,
              min_successful: int | None = None, tolerated_failures: int | None = None,
              tolerated_failure_fraction: float | None = None, with_index: Literal[True],
              name: str | None = None, item_name: Callable[[T, int], str] | None = None) -> BatchResult[R]: ...


@noted("awsworld.map()")
async def map(  # the name; ``batch_map`` is the same function without shadowing the builtin
    fn: Callable[..., Awaitable[R]], items: Iterable[T], *, max_concurrency: int | None = None,
    min_successful: int | None = None, tolerated_failures: int | None = None,
    tolerated_failure_fraction: float | None = None, with_index: bool = False, name: str | None = None,
    item_name: Callable[[T, int], str] | None = None,
) -> BatchResult[R]:
    """Run ``fn`` (a step, or an async function made of steps, sleeps, hooks) on every item; return a
    ``BatchResult`` in input order.

    - ``max_concurrency``: at most this many items in flight at once, whatever they await.
    - ``min_successful``: the batch completes once this many items have succeeded; no new item starts after.
      Failures alone never complete it early then (unless a tolerance is given too): every item runs.
    - ``tolerated_failures`` (a count) / ``tolerated_failure_fraction`` (a share of the items, 0 to 1): the
      batch completes, failed, once more items have failed than either allows. Neither given and no
      ``min_successful``: none is tolerated. (The rule in full: ``batch_result``.)
    - ``with_index=True``: ``fn(item, index)`` rather than ``fn(item)``.
    - ``name`` and ``item_name`` (``item_name(item, index) -> str``): labels for the log; each call an item makes
      shows ``name / item label / call`` (display only, never compared on replay: ``authoring.names``).

    ``map`` returns as soon as the rule decides (the item whose end decided it is a position in the log, so every
    replay returns at the same point): no new item starts (those are ``not_started``), and items still running
    go on in the background without the workflow waiting for them (they are ``started`` in the result; their
    steps' outcomes land in the log as usual). When the workflow ends, whatever it left running is cancelled
    (``_engine.execution``). ``map`` never raises for an item's failure: ``result.values()`` does, with every
    failure, when the batch is not ``ok``. Bad options raise ``BatchOptionError`` (a ``ValueError``) before any
    item starts. Cancelling ``map`` cancels the items in flight (their steps are stopped where they run)."""
    if not callable(fn):
        raise BatchOptionError(f"map() calls fn on every item: pass a step or an async function, got {fn!r}")
    inputs = list(items)
    if not isinstance(with_index, bool):
        raise BatchOptionError(f"with_index must be True or False, got {with_index!r}")
    labels = _labels(name, [None if item_name is None else item_name(item, i) for i, item in enumerate(inputs)],
                     len(inputs), "item_name")

    def start(index: int) -> Awaitable[R]:
        started = fn(inputs[index], index) if with_index else fn(inputs[index])
        if not inspect.isawaitable(started):  # a plain function: Python's "can't be used in 'await'" says less
            raise TypeError(f"map() awaits what fn returns for each item, but {getattr(fn, '__qualname__', fn)!r} "
                            f"returned {type(started).__name__}: make it a @step or an async def")
        return started

    return await _run(start, len(inputs), labels, max_concurrency=max_concurrency, min_successful=min_successful,
                      tolerated_failures=tolerated_failures, tolerated_failure_fraction=tolerated_failure_fraction)


Branch = Awaitable[T] | Callable[[], Awaitable[T]]
"""A ``parallel`` branch: an awaitable (a step call, a coroutine of workflow code, a hook) or a function of no
arguments returning one (called when the branch starts)."""


@noted("awsworld.parallel()")
async def parallel(*branches: Branch[T], max_concurrency: int | None = None, min_successful: int | None = None,
                   tolerated_failures: int | None = None, tolerated_failure_fraction: float | None = None,
                   name: str | None = None, names: Sequence[str | None] | None = None) -> BatchResult[T]:
    """Run ``branches`` side by side and return a ``BatchResult`` in argument order, with ``map``'s options
    (``max_concurrency``, ``min_successful``, the tolerances) and rule. ``name`` labels the batch, ``names`` (one
    per branch, None for none) its branches, in the log's display names. A branch given as a coroutine that
    never starts (the batch completed first) is closed, never run."""
    if names is not None and len(names) != len(branches):
        raise BatchOptionError(f"parallel() got {len(branches)} branches but {len(names)} names")
    for branch in branches:
        if not inspect.isawaitable(branch) and not callable(branch):
            raise BatchOptionError(f"a parallel() branch must be an awaitable or a function returning one, "
                                   f"got {branch!r}")
    labels = _labels(name, list(names) if names is not None else [None] * len(branches), len(branches), "names")
    started: set[int] = set()

    def start(index: int) -> Awaitable[T]:
        started.add(index)
        branch = branches[index]
        return branch if inspect.isawaitable(branch) else branch()  # type: ignore[return-value]

    try:
        return await _run(start, len(branches), labels, max_concurrency=max_concurrency,
                          min_successful=min_successful, tolerated_failures=tolerated_failures,
                          tolerated_failure_fraction=tolerated_failure_fraction)
    finally:
        for index, branch in enumerate(branches):
            if index not in started and inspect.iscoroutine(branch):
                branch.close()  # never started: no "never awaited" warning, nothing of it ran


def _labels(name: str | None, own: list[str | None], total: int, what: str) -> list[tuple[str, ...]]:
    """Each item's labels (the batch's name, then the item's own, or ``#index`` when only the batch is named),
    checked before anything starts."""
    batch = () if name is None else (check_name(name, what="the batch's name"),)
    result: list[tuple[str, ...]] = []
    for index in range(total):
        label = own[index]
        if label is not None:
            result.append((*batch, check_name(label, what=f"{what} of item {index}")))
        else:
            result.append((*batch, f"#{index}") if batch else ())
    return result


async def _run(start: Callable[[int], Awaitable[R]], total: int, labels: list[tuple[str, ...]], *,
               max_concurrency: int | None, min_successful: int | None, tolerated_failures: int | None,
               tolerated_failure_fraction: float | None) -> BatchResult[R]:
    """Start items in index order within ``max_concurrency``, react to each one's end in the order they finish,
    and return as soon as the rule decides: items still running go on in the background (``_BACKGROUND``), and
    the items not started yet never start."""
    if max_concurrency is not None and (isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int)
                                        or max_concurrency < 1):
        raise BatchOptionError(f"max_concurrency must be an int of at least 1, got {max_concurrency!r}")
    rule = CompletionRule.checked(total, min_successful=min_successful, tolerated_failures=tolerated_failures,
                                  tolerated_failure_fraction=tolerated_failure_fraction)
    limit = total if max_concurrency is None else max_concurrency
    shown = [SEPARATOR.join(parts) if parts else None for parts in labels]

    outcomes: list[BatchItem[R] | None] = [None] * total
    finished: asyncio.Queue[int] = asyncio.Queue()  # indexes of finished items, in the order they finished
    running: dict[int, asyncio.Task[None]] = {}
    succeeded = failed = 0
    wakes = _wakes_on(rule, limit)

    async def run(index: int) -> None:
        if wakes:
            wakes_on.set(wakes_on.get() | wakes)  # in this item's own task: its steps only
        try:
            with ExitStack() as labelling:
                for part in labels[index]:
                    labelling.enter_context(labelled(part))
                value = await start(index)
            outcomes[index] = BatchItem(index, "succeeded", value=value, name=shown[index])
        except asyncio.CancelledError as cancelled:
            # Cancelled from inside (a step cancelled elsewhere): a failure of this item. Cancelled by the batch's
            # own cancellation: it does not matter, nobody reads it.
            outcomes[index] = BatchItem(index, "failed", error=cancelled, name=shown[index])
            raise
        except Exception as error:
            outcomes[index] = BatchItem(index, "failed", error=error, name=shown[index])
        finally:
            finished.put_nowait(index)

    loop = asyncio.get_running_loop()
    started = 0
    reason = rule.decide(0, 0)  # min_successful=0 completes before anything starts
    try:
        while reason is None:
            while started < total and len(running) < limit:
                running[started] = loop.create_task(run(started))  # created in input order: replay-stable ids
                started += 1
            if not running:
                break
            index = await finished.get()
            task = running.pop(index)
            if not task.done():
                await asyncio.wait([task])  # its ``finally`` ran; let it finish (it has nothing left to await)
            item = outcomes[index]
            if item is not None and item.status == "succeeded":
                succeeded += 1
            else:
                failed += 1
            reason = rule.decide(succeeded, failed)  # the first decision is the reason, and ends the batch
    except BaseException:
        for task in running.values():  # the batch itself was cancelled (or failed): so are its items
            task.cancel()
        raise
    for task in running.values():  # decided with these still running: they finish without the batch
        _BACKGROUND.add(task)
        task.add_done_callback(_BACKGROUND.discard)

    if reason == "min_successful_reached" and started == total and not running:
        reason = "all_completed"  # every item had finished anyway: the minimum stopped nothing
    result_items = [item if item is not None
                    else BatchItem[R](index, "started" if index in running else "not_started", name=shown[index])
                    for index, item in enumerate(outcomes)]
    return BatchResult(result_items, reason=reason or "all_completed", rule=rule)


def _wakes_on(rule: CompletionRule, limit: int) -> frozenset[StepEnd]:
    """The ends of an item's steps the batch reacts to at once (``authoring.runtime.wakes_on``): any end while
    items wait for a slot, a success when a minimum is asked, a failure when failures can decide. A step's end
    stands for its item's (a step may not be its item's last; then waking costs a replay and changes nothing)."""
    if limit < rule.total:
        return _ANY_END
    ends: set[StepEnd] = set()
    if rule.min_successful is not None:
        ends.add("completed")
    if rule.fails_fast or rule.tolerated_failures is not None or rule.tolerated_failure_fraction is not None:
        ends.add("failed")
    return frozenset(ends)


_BACKGROUND: set[asyncio.Task[None]] = set()
"""Items a batch returned without (the rule decided while they ran), held until they finish: the event loop
keeps only weak references to its tasks (``asyncio.create_task``'s documentation). In a workflow, the engine
cancels whatever the body left running when the body ends (``_engine.execution``), so none is held past its run."""


batch_map = map
"""``awsworld.map`` under a name that does not shadow the builtin (``from awsworld import batch_map``)."""


@noted("awsworld.first_successful()")
async def first_successful(*awaitables: Awaitable[T]) -> T:
    """The first of ``awaitables`` to succeed (in the order they finish, which in a workflow is the log's); the
    others are cancelled. When every one fails, ``BatchError`` carries every failure in argument order.

    What a cancelled one leaves behind: a sleep is dropped (the run is not woken for it); a hook stops being
    awaited (it keeps its token until disposed or the run ends; payloads sent to it are kept, unread); a step is
    ended as cancelled in the log and its body stopped where it runs (see ``step_runner``), and one not started
    yet never starts. The workflow waits for none of them: the flow advances it while a losing step runs inline,
    and a queued loser's delivery notices its step ended at its next status check."""
    if not awaitables:
        raise ValueError("first_successful() needs at least one awaitable")
    loop = asyncio.get_running_loop()
    # Tasks in argument order (a coroutine, a task, a Hook, any awaitable): replay-stable declaration order.
    tasks = [loop.create_task(_awaited(item)) for item in awaitables]
    errors: dict[int, BaseException] = {}
    try:
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in sorted(done, key=tasks.index):  # several finished together: the first argument wins
                if task.cancelled():
                    errors[tasks.index(task)] = asyncio.CancelledError()
                elif task.exception() is not None:
                    errors[tasks.index(task)] = task.exception()  # type: ignore[assignment]
                else:
                    return task.result()
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()
    items = [BatchItem[T](index, "failed", error=errors[index]) for index in range(len(tasks))]
    rule = CompletionRule(len(tasks), min_successful=1, tolerated_failures=len(tasks) - 1)
    result = BatchResult(items, reason="failure_tolerance_exceeded", rule=rule)
    raise BatchError(f"all {len(tasks)} awaitables failed: "
                     + "; ".join(f"#{i}: {describe_error(e)}" for i, e in sorted(errors.items())), result)


async def _awaited(awaitable: Awaitable[T]) -> T:
    """One of ``first_successful``'s awaitables, in a task of its own: any end of its steps wakes the workflow at
    once (``authoring.runtime.wakes_on``), so the first success is seen while the others still run or retry."""
    wakes_on.set(wakes_on.get() | _ANY_END)
    return await awaitable


_ANY_END: frozenset[StepEnd] = frozenset(("completed", "failed"))


__all__ = ["BatchError", "BatchItem", "BatchOptionError", "BatchResult", "Branch", "CompletionReason",
           "CompletionRule", "batch_map", "first_successful", "map", "parallel"]
