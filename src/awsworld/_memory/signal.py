"""A wake-up call for coroutines waiting on in-memory state (a queue's new message, a stream's new chunk, a
commit to storage).

The in-memory World changes state synchronously, so whoever changes it can wake the waiters at once: no
reader ever polls. A waiter also passes a timeout, because some wake-ups are a matter of time (a delayed
message falls due, a run ends in storage that does not tell us) rather than of a call here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class Signal:
    """Every ``wait`` pending when ``notify`` is called returns True; later waits wait for the next one."""

    def __init__(self) -> None:
        self._waiters: set[asyncio.Future[None]] = set()

    def notify(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def wait(self, timeout: float | None) -> bool:
        """True when notified, False when ``timeout`` seconds (None: no limit) passed first.

        A cancel always ends it (``asyncio.timeout``, not ``asyncio.wait_for``: on 3.11 ``wait_for`` returns the
        result of a future notified in the same turn as the cancel, and swallows the cancel). A waiter's loop that
        was told to stop then went on waiting: the test driver cancels its queue wait each time it wakes, and one
        in a few hundred lived on, woken by every later notify, until each notify woke one per run so far
        (quadratic: a 1-minute schedule over a simulated day ran out the driver's 30 s)."""
        if timeout is not None and timeout <= 0:
            return False
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.add(waiter)
        try:
            async with asyncio.timeout(timeout):
                await waiter
        except TimeoutError:
            return False
        finally:
            self._waiters.discard(waiter)
        return True

    async def until(self, predicate: Callable[[], bool], timeout: float | None = None) -> bool:
        """True as soon as ``predicate()`` holds (checked now and after every ``notify``, never by polling); False
        when ``timeout`` real seconds pass first."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while not predicate():
            if not await self.wait(None if deadline is None else deadline - loop.time()):
                return predicate()
        return True

    @property
    def waiting(self) -> int:
        return len(self._waiters)
