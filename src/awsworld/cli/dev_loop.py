"""``awsworld dev``'s event loop watched: a warning naming the line of your code that blocks it.

Every delivery of ``dev`` (each run's replay, each step body, the webhook route, the UI) shares one asyncio event
loop. A step body that blocks it, ``time.sleep(3)`` or a blocking HTTP call inside an ``async def``, stops all of
them for as long as it blocks: other runs stand still, the CLI's commands that need ``dev`` wait, and nothing says
why. On Lambda the same step only costs its own delivery's time, so the mistake goes unnoticed until ``dev``.

``LoopWatch`` is a thread that asks the loop to answer (``call_soon_threadsafe``) every ``PING_SECONDS`` and,
while it does not, looks at the loop thread's stack (``sys._current_frames``) for the innermost frame of code that
is neither awsworld's nor Python's nor an installed package's: the user's. When the same such frame stayed on the
stack for ``BLOCKED_SECONDS`` or more, it says so, with the file, line and source, the time it blocked, and what to
do instead (``await asyncio.sleep``, ``await asyncio.to_thread``); a block that goes on is said again every
``STILL_SECONDS``. A slow loop with no user frame holding it (dev's own work on a loaded machine) is not reported,
and one place is said at most once per ``SAY_AGAIN_SECONDS`` (with how many blocks it made since).
"""

from __future__ import annotations

import asyncio
import faulthandler
import linecache
import logging
import os
import sys
import sysconfig
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType

from .exit_codes import STOPPED

log = logging.getLogger("awsworld.dev")

PING_SECONDS = 0.25
"""How often the watch asks the loop to answer, and looks at its stack while it does not."""
BLOCKED_SECONDS = 1.0
"""A block of the loop by one frame of user code this long or longer is said."""
STILL_SECONDS = 10.0
"""A block that goes on is said again this often (a body that never returns would otherwise say nothing)."""
SAY_AGAIN_SECONDS = 60.0
"""One place in the user's code is said at most this often."""

_NOT_USERS = tuple(os.path.normcase(os.path.realpath(path)) + os.sep for path in {
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),  # awsworld itself
    *(sysconfig.get_paths()[name] for name in ("stdlib", "platstdlib", "purelib", "platlib")),
})


def users_frame(frame: FrameType | None) -> FrameType | None:
    """The innermost frame of ``frame``'s stack that runs the user's code (not awsworld's, Python's or a package's).
    The process's ``__main__`` is never the user's: ``dev`` imports the user's modules by name, and its ``__main__``
    is the ``awsworld`` console script (in the venv's ``bin/``, none of the folders above), whose ``sys.exit(main())``
    is the outermost frame of every stack."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith("<") and frame.f_globals.get("__name__") != "__main__" and \
                not os.path.normcase(os.path.realpath(filename)).startswith(_NOT_USERS):
            return frame
        frame = frame.f_back
    return None


@dataclass
class Block:
    """One frame of user code seen holding the loop: where, and since when."""

    frame: FrameType
    since: float
    line: int  # the frame's line when last seen blocking (it moves on once the block ends)
    said: float | None = None  # when it was said last (a block that goes on is said again)
    quiet: bool = False  # its place was said a moment ago: this block is only counted

    def where(self) -> str:
        code = self.frame.f_code
        source = linecache.getline(code.co_filename, self.line).strip()
        return f"{code.co_filename}:{self.line}, in {code.co_name}" + (f": {source}" if source else "")


class LoopWatch:
    """Says when a frame of user code blocks ``loop`` for ``BLOCKED_SECONDS`` or more (see the module doc)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, *, say: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.loop = loop
        self.say = say or (lambda text: log.warning("%s", text))
        self.clock = clock
        self.blocks = 0  # blocks said (a figure for tests)
        self._loop_thread = threading.get_ident()  # (made on the loop's thread)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._said: dict[tuple[str, int], tuple[float, int]] = {}  # (file, line) -> (said at, blocks since)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._watch, name="awsworld-dev-loop-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _watch(self) -> None:
        while not self._stop.wait(PING_SECONDS):
            answered = threading.Event()
            try:
                self.loop.call_soon_threadsafe(answered.set)
            except RuntimeError:  # the loop closed
                return
            block: Block | None = None
            while not answered.wait(PING_SECONDS):
                if self._stop.is_set():
                    return
                frame = users_frame(sys._current_frames().get(self._loop_thread))
                now = self.clock()
                if block is not None and frame is not block.frame:  # that frame let go (the loop may not yet)
                    self._ended(block, now)
                    block = None
                if frame is None:
                    continue
                if block is None:
                    block = Block(frame, now, frame.f_lineno)
                    continue
                block.line = frame.f_lineno
                if now - (block.said or block.since) >= STILL_SECONDS:
                    self._tell(block, now, going_on=True)
            if block is not None:
                self._ended(block, self.clock())

    def _ended(self, block: Block, now: float) -> None:
        if now - block.since >= BLOCKED_SECONDS:
            self._tell(block, now, going_on=False)

    def _tell(self, block: Block, now: float, *, going_on: bool) -> None:
        if block.quiet:
            return
        key = (block.frame.f_code.co_filename, block.line)
        last = self._said.get(key)
        if last is not None and now - last[0] < SAY_AGAIN_SECONDS and block.said is None:
            self._said[key] = (last[0], last[1] + 1)  # said a moment ago: counted, said with the next
            block.quiet = True
            return
        more = f" ({last[1]} more block(s) there since it was last said)" if last is not None and last[1] else ""
        self._said[key] = (now, 0)
        block.said = now
        self.blocks += 1
        how = "has blocked dev's event loop for {:.0f} s so far" if going_on else \
            "blocked dev's event loop for {:.1f} s"
        self.say(f"your code {how.format(now - block.since)} at {block.where()}{more}: every run, step and request "
                 "of this dev waits meanwhile. In an async def, `await asyncio.sleep(...)` rather than "
                 "`time.sleep(...)`, and a blocking call runs off the loop with `await asyncio.to_thread(fn, ...)`")


FORCE_SECONDS = 15.0
"""After the second Ctrl-C, ``dev`` ends its process itself if it is still there this long after (a thread the
interrupted code left running, a shutdown step that waits for it)."""
BACKSTOP_SECONDS = 5.0
"""And if that could not run either, a watchdog outside Python ends the process this long after ``FORCE_SECONDS``
(with where each thread was: a bug of ``dev``'s to report)."""


def on_ctrl_c(stop: Callable[[], object], *, exit: Callable[[int], object] = os._exit,
              force_after: float = FORCE_SECONDS, backstop_after: float = BACKSTOP_SECONDS,
              held: Callable[[], str] = lambda: "dev's event loop") -> Callable[[int, FrameType | None], None]:
    """``dev``'s SIGINT handler: the first Ctrl-C calls ``stop`` (thread-safe: it only asks the loop), the second
    raises ``KeyboardInterrupt`` where the main thread is, the third ends the process (``exit(STOPPED)``). ``held``
    names what the user's code holds at the first press, said with its line: dev's event loop once it runs, dev's
    start while dev imports the user's modules (``cli/dev.CtrlC``, set from the command's first line).

    Why a handler of Python's (``signal.signal``) and not the loop's (``loop.add_signal_handler``): the loop's runs
    only when the loop turns, so while a workflow's ``while True:`` or a step's ``time.sleep(3600)`` held it, Ctrl-C
    did nothing at all, and only ``kill -9`` ended ``dev``. Python runs this one in the main thread between two
    bytecodes of whatever runs there, the user's blocking code included: the first press says where the user's code
    holds the loop (``frame``, found as ``LoopWatch`` finds it), and the second ends that code with
    ``KeyboardInterrupt``. That ends the delivery running it; ``dev`` turns its loop again and takes its way out
    (``cli/dev._serve_to_the_end``: the state is saved). That way out can itself wait on what the interrupted code
    left behind, so the second press also arms a timer that ends the process ``force_after`` seconds later, as a
    third press does at once: what ``--state`` holds is then its last snapshot, as after a crash
    (docs/get-started/dev.md, "What survives a restart"). The timer is a Python thread, which cannot run once the
    interpreter has begun to end (it stops every thread but the main one): should ``dev`` hang there,
    ``faulthandler``'s watchdog, a thread of C, prints where each thread is and ends the process (exit 1)
    ``backstop_after`` seconds after the timer's time."""
    presses = 0
    second = threading.Event()

    def say(text: str) -> None:  # (os.write: print here could re-enter a write the main thread was making)
        os.write(sys.stderr.fileno(), f"\n{text}\n".encode())

    def force() -> None:
        say("dev did not end after the second Ctrl-C: ending its process now (--state keeps its last snapshot)")
        exit(STOPPED)

    def force_later() -> None:
        second.wait()
        faulthandler.dump_traceback_later(force_after + backstop_after, exit=True, file=sys.stderr.fileno())
        time.sleep(force_after)
        force()

    # The timer's thread is started now, not in the handler: a handler runs between two bytecodes of whatever the
    # main thread does, maybe inside threading's own locks (starting a thread takes one), which a thread started
    # there would wait for for good. The handler only sets an Event, whose lock only this thread waits on.
    threading.Thread(target=force_later, name="awsworld-ctrl-c", daemon=True).start()

    def interrupted(signum: int, frame: FrameType | None) -> None:
        nonlocal presses
        presses += 1
        if presses >= 3:
            force()
            return
        if presses == 2:
            second.set()
            raise KeyboardInterrupt
        stop()
        holder = users_frame(frame)
        if holder is not None:
            where = Block(holder, 0.0, holder.f_lineno).where()
            say(f"stopping once your code lets {held()} go: it holds it at {where} (Ctrl-C again to stop at once)")

    return interrupted
