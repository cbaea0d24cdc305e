"""A deterministic asyncio event loop for workflow code.

The workflow runs as ordinary asyncio tasks, so ``asyncio.gather``, ``asyncio.wait`` and ``as_completed``
behave as a Python developer expects; but the loop does no I/O, has no clock and is driven step by step by the
replay engine (``run_until_idle``), so callbacks run in one order only: FIFO. Timers are refused: time in a
workflow is durable (``awsworld.sleep``), never the process's.

Tasks hash by their creation number, not their address, so a set of tasks (``asyncio.wait``'s answers, a set
the workflow builds) iterates in the same order on every replay. While it runs workflow code the loop keeps the
determinism guard on (``determinism``: replay-stable time and randomness, non-replay-stable calls refused), and only
then: importing awsworld leaves the standard library as it is.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import sys
from collections.abc import Callable, Coroutine, Generator
from typing import Any, TypeVar

from ..authoring.errors import DeterminismError
from . import determinism

T = TypeVar("T")


class ReplayTask(asyncio.Task[Any]):
    """A task of the replay loop: hashes by its creation number (replay-stable), compares by identity."""

    creation_number = 0
    """Its place among the tasks its loop created (set by ``ReplayLoop.create_task``)."""

    def __hash__(self) -> int:
        return self.creation_number


class ReplayLoop(asyncio.AbstractEventLoop):
    def __init__(self) -> None:
        self._ready: collections.deque[asyncio.Handle] = collections.deque()
        self._running = False
        self._closed = False
        self._exception_handler: Any = None
        self.unhandled: list[dict[str, Any]] = []
        self._tasks_created = 0
        self.refusal: DeterminismError | None = None
        """The last refusal this loop raised (a timer, a thread, I/O): a body that catches it and returns with a call
        never awaited (``asyncio.wait_for(step(), 5)``: the timer is refused before the step's coroutine runs) fails
        with it, not with ``CallNotAwaitedError`` (``_engine/execution.py``, ``_check_awaited``)."""

    def refuse(self, message: str) -> DeterminismError:
        """The refusal to raise, kept as ``refusal``."""
        self.refusal = DeterminismError(message)
        return self.refusal

    # -- what tasks and futures call
    def call_soon(self, callback: Callable[..., Any], *args: Any,
                  context: contextvars.Context | None = None) -> asyncio.Handle:
        handle = asyncio.Handle(callback, args, self, context)
        self._ready.append(handle)
        return handle

    def call_soon_threadsafe(self, callback: Callable[..., Any], *args: Any,
                             context: contextvars.Context | None = None) -> asyncio.Handle:
        raise DeterminismError("workflow code cannot be driven from another thread")

    def call_later(self, delay: float, callback: Callable[..., Any], *args: Any,
                   context: contextvars.Context | None = None) -> asyncio.TimerHandle:
        raise self.refuse(
            "timers are not available in workflow code (asyncio.sleep, wait_for/timeout with a deadline, an async "
            "client's own timeouts): use awsworld.sleep(), which is durable; bound a step's time with "
            "@step(timeout=...), and put I/O in a @step"
        )

    def call_at(self, when: float, callback: Callable[..., Any], *args: Any,
                context: contextvars.Context | None = None) -> asyncio.TimerHandle:
        return self.call_later(0, callback, *args, context=context)

    def time(self) -> float:
        return 0.0

    def create_future(self) -> asyncio.Future[Any]:
        return asyncio.Future(loop=self)

    def create_task(self, coro: Coroutine[Any, Any, T] | Generator[Any, None, T], *, name: str | None = None,
                    context: contextvars.Context | None = None) -> asyncio.Task[T]:
        refused = determinism.refused_task_creation()
        if refused is not None:
            raise self.refuse(refused)
        task = ReplayTask(coro, loop=self, name=name, context=context)
        self._tasks_created += 1
        task.creation_number = self._tasks_created
        return task

    def get_debug(self) -> bool:
        return False

    def get_task_factory(self) -> None:
        """None: tasks are made by ``create_task`` (anyio, under httpx, asks before it makes one)."""
        return None

    def is_running(self) -> bool:
        return self._running

    def is_closed(self) -> bool:
        return self._closed

    def cancel_tasks(self) -> None:
        """Cancel every unfinished task of this loop, in the order they were created (replay-stable: the set
        ``asyncio.all_tasks`` answers is not ordered). Their cancellations run at the next ``run_until_idle``."""
        for task in sorted(asyncio.all_tasks(self), key=_creation_number):
            task.cancel()

    def close(self) -> None:
        self._ready.clear()
        self._closed = True

    def call_exception_handler(self, context: dict[str, Any]) -> None:
        # "Task exception was never retrieved" and the like: kept for diagnostics, never printed mid-replay.
        self.unhandled.append(context)

    def default_exception_handler(self, context: dict[str, Any]) -> None:
        self.unhandled.append(context)

    def get_exception_handler(self) -> Any:
        return self._exception_handler

    def set_exception_handler(self, handler: Any) -> None:
        self._exception_handler = handler

    def run_in_executor(self, executor: Any, func: Callable[..., Any], *args: Any) -> Any:
        raise self.refuse("workflow code cannot run threads: put the work in a @step")

    # -- what the replay engine calls
    def run_until_idle(self) -> None:
        """Run callbacks until none is ready. The outer loop's running-loop slot is swapped for ours meanwhile
        so ``asyncio.get_running_loop()`` inside workflow code answers this loop, and the determinism guard is on
        (``determinism.enter``: the replay-stable ``time``/``random``/``uuid4`` and the refusals). With nothing
        ready no workflow code runs, and none of that is done (most events a replay applies wake nothing)."""
        ready = self._ready
        if not ready:
            return
        outer = asyncio.events._get_running_loop()
        asyncio.events._set_running_loop(self)
        self._running = True
        entered = determinism.enter()
        try:
            while ready:
                handle = ready.popleft()
                if not handle._cancelled:
                    handle._run()
                    if sys.getprofile() is not determinism.profile_hook:
                        determinism.ensure_guard()
        finally:
            determinism.leave(entered)
            self._running = False
            asyncio.events._set_running_loop(outer)


IO_METHODS = (
    "getaddrinfo", "getnameinfo", "create_connection", "create_server", "sendfile", "start_tls",
    "create_unix_connection", "create_unix_server", "connect_accepted_socket", "create_datagram_endpoint",
    "connect_read_pipe", "connect_write_pipe", "subprocess_shell", "subprocess_exec", "add_reader", "remove_reader",
    "add_writer", "remove_writer", "sock_recv", "sock_recv_into", "sock_recvfrom", "sock_recvfrom_into",
    "sock_sendall", "sock_sendto", "sock_connect", "sock_accept", "sock_sendfile", "add_signal_handler",
    "remove_signal_handler",
)
"""The event loop's I/O methods (``asyncio.AbstractEventLoop``'s): what ``asyncio.open_connection``,
``asyncio.create_subprocess_exec`` and an async client's connections (httpx through anyio) call. The abstract class
raises a bare ``NotImplementedError`` for each; on the replay loop each raises ``DeterminismError`` naming the call
and the fix instead."""


def _refuses_io(name: str) -> Callable[..., Any]:
    def refuse(self: ReplayLoop, *args: object, **kwargs: object) -> Any:
        raise self.refuse(determinism.IO_REFUSAL.format(
            call=f"the event loop's {name}(): a connection, a subprocess, a file descriptor"))

    refuse.__name__ = refuse.__qualname__ = name
    return refuse


for _io_method in IO_METHODS:
    setattr(ReplayLoop, _io_method, _refuses_io(_io_method))


def _creation_number(task: asyncio.Task[Any]) -> int:
    return task.creation_number if isinstance(task, ReplayTask) else 0
