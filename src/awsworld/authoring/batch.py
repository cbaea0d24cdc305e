"""Fan-out with limits and completion rules: ``map`` and ``first_successful``.

Both are plain asyncio on whatever loop runs them, so they work in a workflow body (on the replay loop) and
outside one (a step called as a plain function, a unit test). In a workflow they are replay-stable because
every decision follows the order in which items finish, and that order is the log's: an item's task is
created in input order and started only by the loop below, which reacts to one finished item at a time, in the
order their completions are queued (FIFO, as the replay loop runs callbacks). So the same items start at the
same log positions on every replay, and their steps, sleeps and hooks get the same ids.

``max_concurrency`` counts *items* in flight, from the moment an item's task starts to the moment it returns or
raises, whatever it awaits meanwhile (steps, sleeps, hooks, child workflows): an item that sleeps or waits on a
hook still holds its slot, so no more than ``max_concurrency`` of them are ever started-but-unfinished.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, overload

T = TypeVar("T")
R = TypeVar("R")

ItemStatus = Literal["succeeded", "failed", "not_started"]
CompletionReason = Literal["all_completed", "min_successful_reached", "failure_tolerance_exceeded"]


@dataclass(frozen=True)
class BatchItem(Generic[R]):
    """One input's outcome: ``value`` when it succeeded, ``error`` when it failed, neither when ``map`` decided
    the batch's outcome before starting it."""

    index: int
    status: ItemStatus
    value: R | None = None
    error: BaseException | None = None

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"

    @property
    def failed(self) -> bool:
        return self.status == "failed"


class BatchError(Exception):
    """A batch failed: more failures than tolerated, fewer successes than required (``map``'s ``.values()``),
    or every awaitable failed (``first_successful``). ``errors`` holds every failure in input order and
    ``result`` the whole ``BatchResult``."""

    def __init__(self, message: str, result: BatchResult[Any]) -> None:
        super().__init__(message)
        self.result = result
        self.errors: list[BaseException] = result.errors()


class BatchResult(Generic[R]):
    """What ``map`` returns: one ``BatchItem`` per input, in input order (iterate it, index it, ``len`` it).

    ``ok`` says whether the batch met its completion rule; ``values()`` returns the successful values in input
    order, or raises ``BatchError`` when it did not."""

    def __init__(self, items: Sequence[BatchItem[R]], *, reason: CompletionReason, tolerated_failures: int,
                 min_successful: int | None) -> None:
        self.items: list[BatchItem[R]] = list(items)
        self.completion_reason: CompletionReason = reason
        self.tolerated_failures = tolerated_failures
        self.min_successful = min_successful

    @property
    def succeeded(self) -> list[BatchItem[R]]:
        return [item for item in self.items if item.status == "succeeded"]

    @property
    def failed(self) -> list[BatchItem[R]]:
        return [item for item in self.items if item.status == "failed"]

    @property
    def not_started(self) -> list[BatchItem[R]]:
        return [item for item in self.items if item.status == "not_started"]

    @property
    def ok(self) -> bool:
        failed, succeeded = len(self.failed), len(self.succeeded)
        if failed > self.tolerated_failures:
            return False
        return self.min_successful is None or succeeded >= self.min_successful

    def errors(self) -> list[BaseException]:
        """Every failure, in input order."""
        return [item.error for item in self.items if item.error is not None]

    def values(self) -> list[R]:
        """The successful values in input order; ``BatchError`` (carrying every failure) when the batch did not
        meet its rule. Items that failed within the tolerance, or were never started, have no value here."""
        if not self.ok:
            raise BatchError(self._failure_message(), self)
        return [item.value for item in self.items if item.status == "succeeded"]  # type: ignore[misc]

    def _failure_message(self) -> str:
        failed = self.failed
        need = "" if self.min_successful is None else f", {self.min_successful} successes required"
        head = (f"{len(failed)} of {len(self.items)} items failed ({self.tolerated_failures} tolerated{need}, "
                f"{len(self.succeeded)} succeeded)")
        details = "; ".join(f"item {item.index}: {_describe(item.error)}" for item in failed[:5])
        more = f"; and {len(failed) - 5} more" if len(failed) > 5 else ""
        return f"{head}: {details}{more}" if details else head

    def __iter__(self) -> Iterator[BatchItem[R]]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, index: int) -> BatchItem[R]: ...

    @overload
    def __getitem__(self, index: slice) -> list[BatchItem[R]]: ...

    def __getitem__(self, index: int | slice) -> BatchItem[R] | list[BatchItem[R]]:
        return self.items[index]

    def __repr__(self) -> str:
        return (f"BatchResult({len(self.succeeded)} succeeded, {len(self.failed)} failed, "
                f"{len(self.not_started)} not started, {self.completion_reason})")


def _describe(error: BaseException | None) -> str:
    return "" if error is None else f"{type(error).__name__}: {error}"


async def map(  # the name; ``batch_map`` is the same function without shadowing the builtin
    fn: Callable[[T], Awaitable[R]], items: Iterable[T], *, max_concurrency: int | None = None,
    min_successful: int | None = None, tolerated_failures: int | None = None,
) -> BatchResult[R]:
    """Run ``fn`` (a step, or an async function made of steps, sleeps, hooks) on every item; return a
    ``BatchResult`` in input order.

    - ``max_concurrency``: at most this many items in flight at once, whatever they await.
    - ``min_successful``: the batch succeeds once this many items have succeeded; no new item starts after.
    - ``tolerated_failures``: the batch fails once more items than this have failed; no new item starts after.
      Default: 0 without ``min_successful``; with it, as many as still leave ``min_successful`` reachable.

    Once the outcome is decided no new item starts; items already started run to their end and their results are
    kept. ``map`` never raises for an item's failure: ``result.values()`` does, with every failure, when the
    batch failed. Cancelling ``map`` cancels the items in flight (their steps are stopped where they run)."""
    inputs = list(items)
    total = len(inputs)
    if max_concurrency is not None and max_concurrency < 1:
        raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
    if min_successful is not None and not 0 <= min_successful <= total:
        raise ValueError(f"min_successful must be between 0 and the number of items ({total}), got {min_successful}")
    if tolerated_failures is not None and tolerated_failures < 0:
        raise ValueError(f"tolerated_failures must be >= 0, got {tolerated_failures}")
    tolerance = tolerated_failures if tolerated_failures is not None else (
        0 if min_successful is None else total - min_successful)
    limit = total if max_concurrency is None else max_concurrency

    outcomes: list[BatchItem[R] | None] = [None] * total
    finished: asyncio.Queue[int] = asyncio.Queue()  # indexes of finished items, in the order they finished
    running: dict[int, asyncio.Task[None]] = {}
    succeeded = failed = 0

    async def run(index: int) -> None:
        try:
            value = await fn(inputs[index])
            outcomes[index] = BatchItem(index, "succeeded", value=value)
        except asyncio.CancelledError as cancelled:
            # Cancelled from inside (a step cancelled elsewhere): a failure of this item. Cancelled by ``map``'s
            # own cancellation: it does not matter, nobody reads it.
            outcomes[index] = BatchItem(index, "failed", error=cancelled)
            raise
        except Exception as error:
            outcomes[index] = BatchItem(index, "failed", error=error)
        finally:
            finished.put_nowait(index)

    def decided() -> CompletionReason | None:
        if failed > tolerance:
            return "failure_tolerance_exceeded"
        if min_successful is not None and succeeded >= min_successful:
            return "min_successful_reached"
        return None

    loop = asyncio.get_running_loop()
    started = 0
    try:
        while True:
            while decided() is None and started < total and len(running) < limit:
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
    finally:
        for task in running.values():
            task.cancel()

    reason = decided() or "all_completed"
    result_items = [item if item is not None else BatchItem[R](index, "not_started")
                    for index, item in enumerate(outcomes)]
    return BatchResult(result_items, reason=reason, tolerated_failures=tolerance, min_successful=min_successful)


batch_map = map
"""``awsworld.map`` under a name that does not shadow the builtin (``from awsworld import batch_map``)."""


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
    result = BatchResult(items, reason="failure_tolerance_exceeded", tolerated_failures=len(tasks) - 1,
                         min_successful=1)
    raise BatchError(f"all {len(tasks)} awaitables failed: "
                     + "; ".join(f"#{i}: {_describe(e)}" for i, e in sorted(errors.items())), result)


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable
