"""A virtual clock for tests: real time plus an offset that only grows.

It runs at wall-clock pace (so a test that waits for a hook still sees time pass) and jumps forward when the
test environment skips time (``advance``), so a 30-day sleep costs nothing. It never goes backwards, so the
log's timestamps stay ordered.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta


class VirtualClock:
    def __init__(self, start: datetime | None = None) -> None:
        if start is not None and start.tzinfo is None:
            raise ValueError("start must be an aware datetime (UTC)")
        self._origin = (start or datetime.now(UTC)).astimezone(UTC)
        self._origin_monotonic = time.monotonic()
        self._offset = timedelta(0)
        self._last = self._origin

    def now(self) -> datetime:
        moment = self._origin + timedelta(seconds=time.monotonic() - self._origin_monotonic) + self._offset
        if moment < self._last:  # never backwards, even across a float rounding
            return self._last
        self._last = moment
        return moment

    @property
    def skipped(self) -> timedelta:
        """How far time was moved by hand or skipped in total."""
        return self._offset

    def advance(self, by: timedelta | float) -> datetime:
        """Move time forward by ``by`` (a timedelta or seconds); returns the new now."""
        delta = by if isinstance(by, timedelta) else timedelta(seconds=by)
        if delta < timedelta(0):
            raise ValueError("time only moves forward")
        self._offset += delta
        return self.now()

    def advance_to(self, moment: datetime) -> datetime:
        """Move time forward to ``moment`` (no-op when it has passed already)."""
        gap = moment - self.now()
        if gap > timedelta(0):
            self._offset += gap
        return self.now()
