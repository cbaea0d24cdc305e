"""Where "now" comes from: the system clock, unless the World carries its own.

The runtime decides whether a wait is due or a retry may run by comparing the World's own timestamps with
"now"; both must come from one clock or a test World with a virtual clock (``awsworld.testing``) would see
its sleeps finish at the wrong moment. A World that keeps time itself exposes it as ``world.clock``;
everything else (the AWS World) uses the system clock.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    def now(self) -> datetime:
        """An aware UTC datetime that never goes backwards."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


SYSTEM_CLOCK = SystemClock()


def clock_of(world: object) -> Clock:
    """The clock a World's timestamps follow: its own ``clock`` attribute, else the system clock."""
    clock = getattr(world, "clock", None)  # not isinstance(Clock): a runtime Protocol check costs ~27 us
    return SYSTEM_CLOCK if clock is None else clock
