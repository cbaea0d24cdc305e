"""A time scale: the waits of a run made shorter by a factor (``awsworld dev --time-scale 3600``: a 1-day sleep
takes 24 s, a 1-hour retry back-off 1 s), recorded in the log so every replay agrees, with the option or without.

The worker (``AWSWORLD_TIME_SCALE``) applies it where a wait's end is decided and written: a wait's
``wait_created`` (a sleep, a hook's timeout, a heartbeat wait) and a step's ``step_retrying`` (a retry's back-off,
a poll's next poll). Each records the time the wait really ends (``resumeAt``, ``retryAfter``: what ``describe``
shows, what the queue and the watchdog act on) and the factor (``timeScale``). Nothing else changes: ``now()``
is the time of the log's events, so after a scaled 1-day sleep the workflow's clock has moved 24 s.

A replay checks a wait the code declares against the log as always (``WorkflowExecution._apply``), with the
factor the log records: the code's ``sleep("1d")`` at time T matches a ``wait_created`` of ``T + 1d / factor``
carrying that factor, whatever the replaying process's own setting, so the same log replays the same way
everywhere. A retry's time is read from the log, never computed again, so it needs no check.

Why a scale and not a virtual clock (the test environment's, ``awsworld.testing``): ``dev`` serves people and
other programs in real time (a webhook, a hook resumed from a shell, the UI), so its clock cannot jump ahead
whenever its runs are idle; a scale keeps every recorded time a real one, and a person still gets the factor's
share of a hook's timeout to answer. Schedules are not scaled: they name wall-clock times (a cron, a zone).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

TIME_SCALE_FIELD = "timeScale"
"""``wait_created``'s and ``step_retrying``'s field: the factor the wait's recorded end was scaled by."""


@dataclass(frozen=True)
class TimeScale:
    """Real time runs ``factor`` times slower than the workflow's durations from ``anchor`` on (the moment a
    duration is counted from: when a sleep was called, when a poll was declared)."""

    factor: float
    anchor: datetime

    @property
    def scaled(self) -> bool:
        return self.factor != 1

    def real(self, logical: datetime) -> datetime:
        """When a wait due at ``logical`` (by the workflow's durations) really ends."""
        if not self.scaled or logical <= self.anchor:
            return logical
        return self.anchor + (logical - self.anchor) / self.factor

    def logical(self, real: datetime) -> datetime:
        """The workflow's time at the real time ``real`` (the inverse of ``real``)."""
        if not self.scaled or real <= self.anchor:
            return real
        return self.anchor + (real - self.anchor) * self.factor

    def mark(self, data: dict[str, Any]) -> dict[str, Any]:
        """``data`` with the factor recorded, when there is one."""
        return {**data, TIME_SCALE_FIELD: self.factor} if self.scaled else data


def recorded_factor(data: dict[str, Any] | None) -> float:
    """The factor an event records (1 without one, or with one no writer would write)."""
    value = (data or {}).get(TIME_SCALE_FIELD)
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 1:
        return float(value)
    return 1.0
