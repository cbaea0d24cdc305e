"""What a batch (``map``, ``parallel``, ``first_successful``) decides and returns: its completion rule, each
item's outcome, and the result with the reason it completed.

The rule, as AWS Lambda durable functions' ``CompletionConfig`` states it (the SDK's names in capitals):

- ``min_successful``: the batch completes as soon as this many items have succeeded
  (``MIN_SUCCESSFUL_REACHED``, ``"min_successful_reached"`` here; ``"all_completed"`` when every item had
  finished by then, so the minimum stopped nothing).
- ``tolerated_failures`` (a count) and ``tolerated_failure_fraction`` (of all the items, 0 to 1): the batch
  completes as soon as more items have failed than either allows (``FAILURE_TOLERANCE_EXCEEDED``,
  ``"failure_tolerance_exceeded"``).
- Neither tolerance given: none is tolerated (the first failure completes the batch) unless ``min_successful``
  is, and then failures never complete it early: asking for a minimum is not asking to give up once it cannot
  be reached. The batch runs every item and completes ``ALL_COMPLETED`` (``"all_completed"``), not ``ok``.
- Otherwise it completes when every item has finished: ``ALL_COMPLETED``.

Once it has completed, the batch returns: no new item starts (``not_started``), and items still running finish
in the background, unwaited (``started`` in the result, as the SDK's ``STARTED``; their outcomes reach the log).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, overload

R = TypeVar("R")

ItemStatus = Literal["succeeded", "failed", "started", "not_started"]
"""An item's outcome when its batch completed: ``started`` is still running then (it finishes in the
background, unwaited), ``not_started`` was never started (the batch completed first)."""
CompletionReason = Literal["all_completed", "min_successful_reached", "failure_tolerance_exceeded"]
"""Why a batch completed: ``all_completed`` (every item finished), ``min_successful_reached`` (enough had
succeeded), ``failure_tolerance_exceeded`` (more had failed than tolerated). The SDK's ``ALL_COMPLETED``,
``MIN_SUCCESSFUL_REACHED`` and ``FAILURE_TOLERANCE_EXCEEDED``."""


class BatchOptionError(ValueError):
    """A batch option that cannot mean anything (a negative count, a fraction above 1, a minimum above the number
    of items, a float where a count goes...). Raised by the call, before any item starts."""


def _count(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BatchOptionError(f"{what} must be an int, got {value!r}")
    return value


@dataclass(frozen=True)
class CompletionRule:
    """When a batch of ``total`` items completes (see the module doc)."""

    total: int
    min_successful: int | None = None
    tolerated_failures: int | None = None
    tolerated_failure_fraction: float | None = None

    @classmethod
    def checked(cls, total: int, *, min_successful: object = None, tolerated_failures: object = None,
                tolerated_failure_fraction: object = None) -> CompletionRule:
        """The rule, or ``BatchOptionError`` naming the option that is wrong."""
        minimum = None if min_successful is None else _count(min_successful, "min_successful")
        if minimum is not None and not 0 <= minimum <= total:
            raise BatchOptionError(f"min_successful must be between 0 and the number of items ({total}), "
                                   f"got {minimum}")
        tolerated: int | None = None
        if tolerated_failures is not None:
            if isinstance(tolerated_failures, float):
                raise BatchOptionError(f"tolerated_failures is a count; for a share of the items pass "
                                       f"tolerated_failure_fraction={tolerated_failures!r}")
            tolerated = _count(tolerated_failures, "tolerated_failures")
            if tolerated < 0:
                raise BatchOptionError(f"tolerated_failures must be >= 0, got {tolerated}")
        fraction: float | None = None
        if tolerated_failure_fraction is not None:
            if isinstance(tolerated_failure_fraction, bool) or not isinstance(tolerated_failure_fraction,
                                                                                (int, float)):
                raise BatchOptionError(f"tolerated_failure_fraction must be a number from 0 to 1, got "
                                       f"{tolerated_failure_fraction!r}")
            fraction = float(tolerated_failure_fraction)
            if math.isnan(fraction) or not 0.0 <= fraction <= 1.0:
                raise BatchOptionError(f"tolerated_failure_fraction must be from 0 to 1 (0.2: a fifth of the "
                                       f"items may fail), got {tolerated_failure_fraction!r}")
        return cls(total, minimum, tolerated, fraction)

    @property
    def fails_fast(self) -> bool:
        """No tolerance and no minimum given: the first failure completes the batch."""
        return (self.tolerated_failures is None and self.tolerated_failure_fraction is None
                and self.min_successful is None)

    def exceeded(self, failed: int) -> bool:
        """Whether ``failed`` failures are more than the rule tolerates."""
        if self.fails_fast:
            return failed > 0
        if self.tolerated_failures is not None and failed > self.tolerated_failures:
            return True
        fraction = self.tolerated_failure_fraction
        return fraction is not None and self.total > 0 and failed > fraction * self.total

    def reached(self, succeeded: int) -> bool:
        return self.min_successful is not None and succeeded >= self.min_successful

    def decide(self, succeeded: int, failed: int) -> CompletionReason | None:
        """The reason the batch completes at these counts, or None while it goes on."""
        if self.exceeded(failed):
            return "failure_tolerance_exceeded"
        if self.reached(succeeded):
            return "min_successful_reached"
        return None

    def describe(self) -> str:
        """The rule for a message: ``1 tolerated, 3 successes required``."""
        parts: list[str] = []
        if self.fails_fast:
            parts.append("none tolerated")
        if self.tolerated_failures is not None:
            parts.append(f"{self.tolerated_failures} tolerated")
        if self.tolerated_failure_fraction is not None:
            parts.append(f"a fraction of {self.tolerated_failure_fraction:g} tolerated")
        if self.min_successful is not None:
            parts.append(f"{self.min_successful} successes required")
        return ", ".join(parts)


@dataclass(frozen=True)
class BatchItem(Generic[R]):
    """One input's outcome: ``value`` when it succeeded, ``error`` when it failed, neither when the batch
    completed before it finished (``started``) or started (``not_started``). ``name``: its label in the log
    (``map(item_name=...)``, ``parallel(names=...)``), when it has one."""

    index: int
    status: ItemStatus
    value: R | None = None
    error: BaseException | None = None
    name: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"

    @property
    def failed(self) -> bool:
        return self.status == "failed"


class BatchError(Exception):
    """A batch failed: more failures than tolerated, fewer successes than required (``.values()``), or every
    awaitable failed (``first_successful``). ``errors`` holds every failure in input order and ``result`` the
    whole ``BatchResult``."""

    def __init__(self, message: str, result: BatchResult[Any]) -> None:
        super().__init__(message)
        self.result = result
        self.errors: list[BaseException] = result.errors()


class BatchResult(Generic[R]):
    """What ``map`` and ``parallel`` return: one ``BatchItem`` per input, in input order (iterate it, index it,
    ``len`` it), and ``completion_reason``: why the batch completed.

    - ``"all_completed"`` (the SDK's ``ALL_COMPLETED``): every item finished.
    - ``"min_successful_reached"`` (``MIN_SUCCESSFUL_REACHED``): ``min_successful`` items succeeded while some
      had not finished; those still running are ``started``, those never started ``not_started``.
    - ``"failure_tolerance_exceeded"`` (``FAILURE_TOLERANCE_EXCEEDED``): more items failed than tolerated (before
      enough succeeded, when a minimum was asked too); the others are ``started`` or ``not_started`` likewise.

    ``ok``: the tolerance was not exceeded and, when a minimum was asked, it was reached (an ``all_completed``
    batch with fewer successes than ``min_successful`` is not ok). ``values()`` returns the successful values in
    input order, or raises ``BatchError`` when not ``ok``."""

    def __init__(self, items: Sequence[BatchItem[R]], *, reason: CompletionReason,
                 rule: CompletionRule | None = None) -> None:
        self.items: list[BatchItem[R]] = list(items)
        self.completion_reason: CompletionReason = reason
        self.rule = rule if rule is not None else CompletionRule(len(self.items))

    @property
    def min_successful(self) -> int | None:
        return self.rule.min_successful

    @property
    def tolerated_failures(self) -> int | None:
        return self.rule.tolerated_failures

    @property
    def tolerated_failure_fraction(self) -> float | None:
        return self.rule.tolerated_failure_fraction

    @property
    def succeeded(self) -> list[BatchItem[R]]:
        return [item for item in self.items if item.status == "succeeded"]

    @property
    def failed(self) -> list[BatchItem[R]]:
        return [item for item in self.items if item.status == "failed"]

    @property
    def started(self) -> list[BatchItem[R]]:
        """Items still running when the batch completed (they finish in the background, unwaited)."""
        return [item for item in self.items if item.status == "started"]

    @property
    def not_started(self) -> list[BatchItem[R]]:
        return [item for item in self.items if item.status == "not_started"]

    @property
    def ok(self) -> bool:
        if self.completion_reason == "failure_tolerance_exceeded":
            return False
        return self.rule.min_successful is None or len(self.succeeded) >= self.rule.min_successful

    def errors(self) -> list[BaseException]:
        """Every failure, in input order."""
        return [item.error for item in self.items if item.error is not None]

    def values(self) -> list[R]:
        """The successful values in input order; ``BatchError`` (carrying every failure) when the batch is not
        ``ok``. Items that failed within the tolerance, or had not finished, have no value here."""
        if not self.ok:
            raise BatchError(self._failure_message(), self)
        return [item.value for item in self.items if item.status == "succeeded"]  # type: ignore[misc]

    def _failure_message(self) -> str:
        failed = self.failed
        head = (f"{len(failed)} of {len(self.items)} items failed ({self.rule.describe()}, "
                f"{len(self.succeeded)} succeeded; {self.completion_reason})")
        details = "; ".join(f"item {_label(item)}: {describe_error(item.error)}" for item in failed[:5])
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
                f"{len(self.started)} still running, {len(self.not_started)} not started, "
                f"{self.completion_reason})")


def _label(item: BatchItem[Any]) -> str:
    return str(item.index) if item.name is None else f"{item.index} ({item.name})"


def describe_error(error: BaseException | None) -> str:
    return "" if error is None else f"{type(error).__name__}: {error}"
