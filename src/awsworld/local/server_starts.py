"""An emulator's start, run off the event loop so that a cancellation (a Ctrl-C of ``awsworld dev`` or ``demo``, a
SIGTERM of ``dev``) does not wait for it.

A start blocks for a while (moto's imports every backend, DynamoDB Local's and LocalStack's boot a process), so it
runs on a thread. ``asyncio.to_thread`` runs it on the loop's executor, whose threads the interpreter joins at its
exit: a cancelled start ended the task that awaited it, "stopped" was said, and the process then waited for the
start to end (0.4 to 2 s for moto here, the whole boot for a process). ``start_off_the_loop`` runs it on a daemon
thread of its own instead, which ends with the process, and stops what it started if the start was abandoned and
the process goes on (tests/cli/test_dev_ctrl_c_start.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import TypeVar, cast

Started = TypeVar("Started")


async def start_off_the_loop(start: Callable[[], Started], stop: Callable[[Started], object]) -> Started:
    """``start()`` on a daemon thread, its result (or its exception) awaited here. Cancelled, this returns at once;
    the start goes on, and once it is done ``stop`` is called with what it started (on a thread too), unless the
    loop has closed by then: the process is ending, and what was started ends with it."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[Started] = loop.create_future()

    def hand_over(result: Started | None, error: BaseException | None) -> None:  # on the loop
        if answer.cancelled():
            if error is None:
                threading.Thread(target=stop, args=(result,), name="awsworld-unstart", daemon=True).start()
        elif error is not None:
            answer.set_exception(error)
        else:
            answer.set_result(cast(Started, result))

    def run() -> None:
        result: Started | None = None
        error: BaseException | None = None
        try:
            result = start()
        except BaseException as raised:  # the awaiting task's to raise, as with to_thread
            error = raised
        with contextlib.suppress(RuntimeError):  # the loop closed: the process is ending
            loop.call_soon_threadsafe(hand_over, result, error)

    threading.Thread(target=run, name="awsworld-start", daemon=True).start()
    return await answer
