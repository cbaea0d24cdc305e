"""Where "now" comes from: the system clock, unless the World carries its own.

The runtime decides whether a wait is due or a retry may run by comparing the World's own timestamps with
"now"; both must come from one clock or a test World with a virtual clock (``awsworld.testing``) would see
its sleeps finish at the wrong moment. Every World says which as ``world.clock`` (``world/protocol.py``): the
in-memory World its own (a ``VirtualClock`` unless given), the AWS World the system clock.
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


class Timed(Protocol):
    """What has a clock: a World (``world/protocol.py`` declares ``clock``)."""

    @property
    def clock(self) -> Clock: ...


def clock_of(world: Timed) -> Clock:
    """The clock a World's timestamps follow (``world.clock``)."""
    return world.clock
