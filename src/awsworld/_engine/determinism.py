"""Deterministic workflow bodies: what the process-wide sources of time and randomness do inside a workflow.

A workflow body is replayed from its log many times, in many processes, so everything it computes must come out
the same every time. Inside a workflow body — code running as a task of the run's :class:`ReplayLoop` (checked
by the ``current_runtime`` context variable *and* the running loop, so concurrent runs, steps and every other
task of the process are unaffected) — these calls behave as follows:

=============================================  =========================================================
call                                           inside a workflow body
=============================================  =========================================================
``time.time()``, ``time.time_ns()``            replay-stable: the time of the last event replayed
                                               (``awsworld.now()``), constant until the next event
``random.random()``, ``randint``, ``choice``,  replay-stable: the run's own generator, seeded per run
``shuffle``, ``uniform``, … (module functions)  (``random.seed(x)`` reseeds it; ``random.seed()`` refused)
``uuid.uuid4()``                               replay-stable: drawn from the run's generator
``datetime.now()``/``utcnow()``/``today()``,   refused (``DeterminismError``): ``datetime`` is a C type
``date.today()``                               whose methods cannot be replaced; use ``awsworld.now()``
``time.localtime()``, ``gmtime()``,           refused without a time (``time.localtime(t)`` is fine): the
``ctime()``, ``asctime()``, ``strftime(f)``     C clock; the call's argument count is read from its ``CALL``
                                               instruction (``positional_arguments``)
``time.sleep()``                               refused: it blocks the process; ``awsworld.sleep`` is durable
``uuid.uuid1()``, ``os.urandom()``,            refused: host- and entropy-dependent
``secrets.*``, ``random.SystemRandom``,
``random.Random()`` without a seed
``threading.Thread.start``                     refused: what a thread does is not recorded
the same functions bound by name                refused (``from time import time`` binds the standard
                                               library's function, which is caught); of ``random``'s only
                                               the primitives and the stateful ones (``random``,
                                               ``getrandbits``, ``seed``, ``gauss``, ``getstate``,
                                               ``setstate``): the others (``randint``, ``choice``...) reach
                                               the primitives through the generator's class, swapped for
                                               ``_RoutedRandom``, and are replay-stable
``asyncio.as_completed(coroutines)``           replay-stable: tasks are created in argument order (asyncio
                                               itself wraps them from a set, in object-id order); an
                                               ``as_completed`` bound by name is refused for bare coroutines
``time.monotonic()``, ``perf_counter()``       not intercepted: they measure elapsed process time only
=============================================  =========================================================

The replay loop refuses timers (``asyncio.sleep``), threads (``run_in_executor``) and I/O (``open_connection``,
async HTTP clients, subprocesses: ``replay_loop.IO_METHODS``) the same way. A log call is exempt
(``LOGGING_PACKAGES``): its record gets the real time, and a clock its logging library reads is not refused. So is
the code of a module the body imports (``import_call``): it runs once per process, not at each replay.

Importing awsworld changes nothing in ``time``, ``uuid``, ``random`` or ``asyncio``. The replacements are put in
those modules only while a replay loop runs workflow code (``ReplayLoop.run_until_idle`` calls ``enter`` and
``leave``: a synchronous stretch, so no other task of that thread's event loop runs meanwhile), and what was there
before is put back after; while several threads run workflow code, they stay in until the last one leaves. Code of
another thread calling them meanwhile (a step body running in a worker thread) gets the real answer: each
replacement answers with the standard library's function unless its caller is a workflow body. The refusals use a
per-thread profile hook active over the same stretch (a ``sys.setprofile`` profiler of your own is suspended
meanwhile; a C-level profiler such as cProfile cannot be suspended and put back from Python, so it keeps running
and the refusals are off under it). The interpreter removes a profile hook that raised; a refusal the body catches
leaves it on all the same (``_rearm_after_refusal``).
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import functools
import importlib._bootstrap as _bootstrap
import importlib._bootstrap_external as _bootstrap_external
import inspect
import opcode
import os
import random as _random
import sys
import threading
import time as _time
import uuid as _uuid
from collections.abc import Callable, Iterable, Iterator
from types import CodeType, FrameType
from typing import TYPE_CHECKING, Any, NamedTuple

from ..authoring.calls import time_ns, uuid4
from ..authoring.errors import DeterminismError
from ..authoring.runtime import WorkflowRuntime, current_runtime

if TYPE_CHECKING:
    from _typeshed import ProfileFunction  # (what sys.setprofile takes: a name of the stubs only)

_ORIGINAL_TIME = _time.time
_ORIGINAL_TIME_NS = _time.time_ns
_ORIGINAL_UUID4 = _uuid.uuid4
_ORIGINAL_AS_COMPLETED = asyncio.as_completed
# The hidden instance behind the random module's functions (``random._inst``: not in its stubs).
_GLOBAL_RANDOM: _random.Random = vars(_random)["_inst"]

# The module functions of ``random`` (bound methods of its hidden global instance) routed to the run's generator.
RANDOM_FUNCTIONS = tuple(name for name in (
    "random", "uniform", "triangular", "randint", "choice", "randrange", "sample", "shuffle", "choices",
    "normalvariate", "lognormvariate", "expovariate", "vonmisesvariate", "gammavariate", "gauss",
    "betavariate", "paretovariate", "weibullvariate", "getrandbits", "randbytes", "binomialvariate",
    "getstate", "setstate",
) if hasattr(_random, name))
# Of those, the ones ``enter`` replaces in the module: the generator's C primitives (a bound C method is called
# without looking at its instance's class) and the ones that read or write the instance's own state (``seed`` is
# replaced apart, to refuse seeding from the OS). Every other one is Python code calling the primitives on the
# instance, whose class ``enter`` swaps for ``_RoutedRandom``: replacing 6 names instead of 24 is most of what
# entering costs (each replaced name is two stores into a module's dict, about 1,000 instructions).
_STATEFUL = ("gauss", "getstate", "setstate")
MODULE_ROUTED = tuple(name for name in RANDOM_FUNCTIONS if name in _STATEFUL or (
    inspect.isbuiltin(getattr(_random, name)) and getattr(getattr(_random, name), "__self__", None) is _GLOBAL_RANDOM))

_NOW = "awsworld.now()"


class WithoutTime(NamedTuple):
    """A C function of ``time`` that reads the clock only when it is not given a time (``time.localtime()``, not
    ``time.localtime(t)``): refused when its call passes ``positional`` arguments, the count without the time."""

    positional: int
    reason: str


def _without_time(call: str, given: str, positional: int = 0) -> WithoutTime:
    return WithoutTime(positional, f"{call} without a time reads the process's clock, which differs on every "
                                   f"replay: pass one ({given}, time.time() being replay-stable) or use {_NOW}")


_CALL = opcode.opmap["CALL"]


def positional_arguments(frame: FrameType) -> int | None:
    """How many positional arguments the call ``frame`` is making passes: the argument of its ``CALL``
    instruction (the one a ``c_call`` profile event stops at, on Python 3.11 to 3.13), None for another form
    (``f(*args)``, keywords) whose count the bytecode does not say."""
    code = frame.f_code.co_code
    at = frame.f_lasti
    return code[at + 1] if code[at] == _CALL else None


# C functions refused inside a workflow body (their calls are seen by the profile hook as ``c_call``); a
# ``WithoutTime`` only when the call passes no time.
_REFUSED_C: dict[object, str | WithoutTime] = {
    _dt.datetime.now: f"datetime.now() differs on every replay: use {_NOW}",
    # (named here to be refused, never called: the checker flags any use of a deprecated method)
    _dt.datetime.utcnow: f"datetime.utcnow() differs on every replay: use {_NOW}",  # pyright: ignore[reportDeprecated]
    _dt.datetime.today: f"datetime.today() differs on every replay: use {_NOW}",
    _dt.date.today: f"date.today() differs on every replay: use {_NOW}.date()",
    os.urandom: "os.urandom() (used by secrets, random.SystemRandom, and a uuid4 bound by name before awsworld "
                "was imported) differs on every replay: use awsworld.uuid4() / awsworld.random(), or a @step",
    _ORIGINAL_TIME: f"time.time() bound by name (from time import time) differs on every replay: use {_NOW} or "
                    f"call it as time.time()",
    _ORIGINAL_TIME_NS: "time.time_ns() bound by name (from time import time_ns) differs on every replay: use "
                       "awsworld.time_ns() or call it as time.time_ns()",
    _GLOBAL_RANDOM.random: "the random module's generator, bound by name (from random import ...), differs on "
                           "every replay: use awsworld.random() or call it as random.random()",
    _GLOBAL_RANDOM.getrandbits: "the random module's generator, bound by name (from random import ...), differs "
                                "on every replay: use awsworld.random() or call it through the module "
                                "(random.randint(...))",
    _time.sleep: "time.sleep() blocks the process, and the wait is not durable: use await awsworld.sleep(...)",
    _time.localtime: _without_time("time.localtime()", "time.localtime(time.time())"),
    _time.gmtime: _without_time("time.gmtime()", "time.gmtime(time.time())"),
    _time.ctime: _without_time("time.ctime()", "time.ctime(time.time())"),
    _time.asctime: _without_time("time.asctime()", "time.asctime(time.localtime(time.time()))"),
    _time.strftime: _without_time("time.strftime(format)", "time.strftime(format, time.localtime(time.time()))", 1),
}
# Python functions refused inside a workflow body (seen as ``call`` events, by code object).
_REFUSED_CODE: dict[CodeType, str] = {
    _uuid.uuid1.__code__: "uuid.uuid1() depends on the host and the clock: use awsworld.uuid4()",
    _ORIGINAL_UUID4.__code__: "uuid.uuid4() bound by name (from uuid import uuid4) differs on every replay: use "
                              "awsworld.uuid4() or call it as uuid.uuid4()",
    **{getattr(_random.Random, name).__code__: f"random.{name} bound by name (from random import {name}) reads or "
                                               f"changes the process's generator, not the run's: call it as "
                                               f"random.{name}(...)" for name in ("seed", *_STATEFUL)},
    threading.Thread.start.__code__: "workflow code cannot run threads (threading.Thread.start): what a thread "
                                     "does is neither recorded nor replayed; put the work in a @step",
}
_SEED = _random.Random.seed.__code__
_UNSEEDED = ("random.Random() without a seed seeds from the OS, which differs on every replay: use the random "
             "module's functions (random.random(), random.choice(...): the run's generator) or seed it with a "
             "value (random.Random(awsworld.random()))")
_GLOBAL_ONLY = frozenset(getattr(_random.Random, name).__code__ for name in ("seed", *_STATEFUL))
"""Refused for the random module's own generator only (the run's generator runs the same code, and may)."""
_REFUSED_NAMES = frozenset(code.co_name for code in _REFUSED_CODE)
"""The names of the refused functions: the profile hook sees every Python call of a workflow body, and a code
object's hash is not cached (it hashes its constants, nested code included, on every lookup), while a name's is:
a call is looked up by its code only when its name matches."""


LOGGING_PACKAGES = frozenset({"logging", "loguru", "structlog"})
"""Packages whose reads of the clock stamp a log line: what they read never reaches the workflow's calls, and a log
line says when it was written (a replay's line, now; docs/concepts/determinism.md). So a logging call in a workflow
body gets the real ``time.time()`` for its record (the standard library's ``LogRecord``), and a clock it reads
itself (loguru's and structlog's ``datetime.now()``) is not refused."""
_LOGGING_DEPTH = 12  # how many frames ``logging_call`` looks at for a refusal: a log call's handler, formatter...


def _top_package(frame: FrameType) -> str:
    """The top-level package of the module ``frame`` runs code of (``botocore`` for ``botocore.compat``)."""
    return str(frame.f_globals.get("__name__")).partition(".")[0]


def logging_call(frame: FrameType | None, depth: int = _LOGGING_DEPTH) -> bool:
    """Whether ``frame`` or one of its callers (``depth`` frames in all) is code of one of the
    ``LOGGING_PACKAGES``: asked only of a call that reads the clock or would be refused, never of every call."""
    for _ in range(depth):
        if frame is None:
            return False
        if _top_package(frame) in LOGGING_PACKAGES:
            return True
        frame = frame.f_back
    return False


_IMPORT_SYSTEM_FILES = frozenset((_bootstrap.module_from_spec.__code__.co_filename,
                                  _bootstrap_external.decode_source.__code__.co_filename))
"""The file names of the import system's frames (``<frozen importlib._bootstrap>`` and ``..._external>``, or the
source files' paths in an interpreter built without frozen modules): on the stack while a module's code runs as
it is imported."""
_BODY_BOUNDARY = asyncio.events.Handle._run.__code__
"""The frame below a workflow body's own: ``ReplayLoop.run_until_idle`` runs each ready callback (a task of the
body) through ``Handle._run``, so a frame of the import system above it is an import the body started."""


def import_call(frame: FrameType | None) -> bool:
    """Whether ``frame`` is running a module's code as the workflow body imports it (``import boto3`` or
    ``import aiohttp`` inside a body, or in a function it calls): asked only of a call that would be refused.
    A module's code runs once per process, when the first body to import it runs, not at each replay, so what it
    does is not a decision of the run: boto3's import reads ``time.localtime()`` and ``os.urandom()``, aiohttp's
    makes a ``random.Random()``, and a refusal failed the run with a message about a call its author never wrote
    (docs/concepts/determinism.md)."""
    while frame is not None and frame.f_code is not _BODY_BOUNDARY:
        if frame.f_code.co_filename in _IMPORT_SYSTEM_FILES:
            return True
        frame = frame.f_back
    return False


def active_execution() -> WorkflowRuntime | None:
    """The run whose workflow body is running right now on this thread, or None (a step, a client, any other
    task): the context variable says which run (``authoring.runtime.current_runtime``), the running loop confirms
    it is that run's replay loop."""
    execution = current_runtime.get()
    if execution is None or asyncio.events._get_running_loop() is not execution.loop:
        return None
    return execution


def profile_hook(frame: FrameType, event: str, arg: object) -> None:
    """The refusals: the ``sys.setprofile`` hook while workflow code runs (``enter`` to ``leave``). It is called
    for every call and return of a workflow body, so what runs between ``enter`` and ``leave`` (and after each
    ready callback, ``ReplayLoop.run_until_idle``) makes as few calls as it can."""
    if event == "c_call":
        refused = _REFUSED_C.get(arg)
        if refused is None:
            return
        if isinstance(refused, WithoutTime):
            if positional_arguments(frame) != refused.positional:
                return
            refused = refused.reason
    elif event == "call":
        code = frame.f_code
        if code.co_name not in _REFUSED_NAMES:
            return
        refused = _REFUSED_CODE.get(code)
        if refused is None:
            return
        if code in _GLOBAL_ONLY and frame.f_locals.get("self") is not _GLOBAL_RANDOM:
            # Another generator: its own state, which may be read and changed, but not seeded from the OS.
            if code is not _SEED or frame.f_locals.get("a") is not None:
                return
            refused = _UNSEEDED
    else:
        return
    if active_execution() is not None and not logging_call(frame) and not import_call(frame):
        made_by = library_call(frame) if event == "c_call" else library_call(frame.f_back, frame.f_code.co_filename)
        _rearm_after_refusal(frame)
        raise DeterminismError(f"not allowed in a workflow body: {refused}{made_by}")


def _where(frame: FrameType) -> str:
    return f"{frame.f_code.co_filename}, line {frame.f_lineno}, in {frame.f_code.co_name}"


@functools.cache
def _installed_packages() -> frozenset[str]:
    """The top-level names the installed distributions provide (their ``.dist-info``: site-packages, and what
    ``sam build`` installs beside a function's modules). Read once, at the first refusal of a library's call (and
    imported then: not on a cold start's path)."""
    import importlib.metadata

    return frozenset(importlib.metadata.packages_distributions())


def library_call(caller: FrameType | None, refused_file: str | None = None) -> str:
    """What a refusal adds when the refused call is a library's, not the body's own (boto3 signing a request
    reads ``datetime.now()``, ``tempfile`` makes a ``random.Random()``): the library's line and the line of the
    body's code that called it, and that the call belongs in a step. The refusal alone said ``use
    awsworld.now()`` to an author who had written ``s3.list_buckets()``. ``caller`` is the frame that made the
    refused call (the one a ``c_call`` event stops in, or the caller of a refused Python function, whose own
    module's frames, in ``refused_file``, are passed over: ``random.Random()`` seeds in ``Random.__init__``). The
    body's code is the package of the outermost frame of the workflow's task that is neither awsworld's nor
    asyncio's (``_BODY_BOUNDARY`` ends the task's frames). A library is Python's own module or an installed
    distribution's: a module of the project beside the workflow's is the author's code, and its call is refused
    as the body's."""
    while caller is not None and caller.f_code.co_filename == refused_file:
        caller = caller.f_back
    if caller is None:
        return ""
    frames: list[FrameType] = []
    frame: FrameType | None = caller
    while frame is not None and frame.f_code is not _BODY_BOUNDARY:
        frames.append(frame)
        frame = frame.f_back
    body = next((f for f in reversed(frames) if _top_package(f) not in ("awsworld", "asyncio")), None)
    library = _top_package(caller)
    if body is None or library == _top_package(body) or not (
            library in sys.stdlib_module_names or library in _installed_packages()):
        return ""
    yours = next(f for f in frames if _top_package(f) == _top_package(body))
    return (f"; the call is {library}'s ({caller.f_globals.get('__name__')}, line {caller.f_lineno}, in "
            f"{caller.f_code.co_name}), made for your code at {_where(yours)}: call the library from a @step, "
            "whose result the log records")


def _rearm_after_refusal(frame: FrameType) -> None:
    """The interpreter removes a profile hook that raised (3.11 to 3.13), so a body that catches a refusal
    (``except Exception:`` around a block) would run unguarded until its next await, where
    ``ReplayLoop.run_until_idle`` puts the hook back. So before raising, ``profile_hook`` sets a one-shot trace
    function on this thread (and on the refused call's frame and its caller's, which see the exception next): its
    first event, as the refusal unwinds, puts the profile hook back and the trace function away, and the rest of
    the stretch stays guarded. Only on a refusal (a trace function slows every call while it is set); not under a
    tracer of your own (a debugger, coverage on 3.11), which is left alone: there the refusals stay off until
    the next await, as before."""
    if sys.gettrace() is not None:
        return
    frames = [frame] if frame.f_back is None else [frame, frame.f_back]

    def rearm(_frame: FrameType, _event: str, _arg: object) -> None:
        sys.settrace(None)
        for traced in frames:
            traced.f_trace = None  # pyright: ignore[reportAttributeAccessIssue]  (None: no local trace function)
        frames.clear()
        if active_execution() is not None:
            ensure_guard()

    for traced in frames:
        traced.f_trace = rearm
    sys.settrace(rearm)


def enter() -> ProfileFunction | None:
    """Workflow code is about to run on this thread (``ReplayLoop.run_until_idle``): put the replay-stable
    functions in place and turn the refusals on (last, so that only this function's return is seen by the hook).
    Returns what ``leave`` restores."""
    global _entered
    with _patch_lock:
        if _entered == 0:
            taken = _replaced.append
            for namespace, name, replacement in _REPLACEMENTS:
                taken(namespace[name])
                namespace[name] = replacement
            _replaced_class.append(type(_GLOBAL_RANDOM))
            _GLOBAL_RANDOM.__class__ = _RoutedRandom
        _entered += 1
    previous = sys.getprofile()
    if previous is not profile_hook and _replaceable(previous):
        sys.setprofile(profile_hook)
    return previous


def leave(previous: ProfileFunction | None) -> None:
    """Workflow code has stopped running on this thread: the refusals off (first, and without a call the hook
    would see: ``_replaceable`` written out), and once no thread runs workflow code, ``time``, ``uuid``, ``random``
    and ``asyncio`` as they were."""
    global _entered
    if previous is not profile_hook and (previous is None or callable(previous)):
        sys.setprofile(previous)
    with _patch_lock:
        _entered -= 1
        if _entered == 0:
            for (namespace, name, _), original in zip(_REPLACEMENTS, _replaced, strict=True):
                namespace[name] = original
            _replaced.clear()
            _GLOBAL_RANDOM.__class__ = _replaced_class.pop()


def _replaceable(hook: object) -> bool:
    """``sys.setprofile`` can put back only a Python callable; cProfile's hook is not one."""
    return hook is None or callable(hook)


def ensure_guard() -> None:
    """Put the guard back after a refusal (a profile hook that raised is removed by the interpreter), or after
    workflow code set a profile hook of its own. ``ReplayLoop.run_until_idle`` calls it only when
    ``sys.getprofile()`` is not ``profile_hook``, sparing a call and return the hook would see."""
    current = sys.getprofile()
    if current is not profile_hook and _replaceable(current):
        sys.setprofile(profile_hook)


# ---------------------------------------------------------------------------------------------- replay-stable


def _patched_time() -> float:
    """The same float as ``awsworld.now().timestamp()`` (``time_ns() / 1e9`` can differ in the last bit); the real
    time for a log record (``logging_call``: the standard library's ``LogRecord`` and structlog's ``TimeStamper``
    call it themselves, so only the caller is looked at, not the 12 frames a refusal looks at)."""
    execution = active_execution()
    if execution is None or logging_call(inspect.currentframe(), 2):  # (this frame, then its caller's)
        return _ORIGINAL_TIME()
    return execution.current_time().timestamp()


def _patched_time_ns() -> int:
    if active_execution() is None or logging_call(inspect.currentframe(), 2):  # (a LogRecord's, on 3.13)
        return _ORIGINAL_TIME_NS()
    return time_ns()


def _patched_uuid4() -> _uuid.UUID:
    return _ORIGINAL_UUID4() if active_execution() is None else uuid4()


def _random_function(name: str) -> Callable[..., Any]:
    original = getattr(_random, name)

    def routed(*args: Any, **kwargs: Any) -> Any:
        execution = active_execution()
        if execution is None:
            return original(*args, **kwargs)
        return getattr(execution.rng, name)(*args, **kwargs)

    routed.__name__ = name
    routed.__qualname__ = name
    routed.__doc__ = original.__doc__
    routed.__dict__["__awsworld_original__"] = original  # (a function's own attribute, unknown to its type)
    return routed


def _patched_seed(*args: Any, **kwargs: Any) -> None:
    execution = active_execution()
    if execution is None:
        return _GLOBAL_RANDOM.seed(*args, **kwargs)
    if not args and kwargs.get("a") is None:
        raise DeterminismError("not allowed in a workflow body: random.seed() without a value seeds from the OS; "
                               "the run's generator is already seeded per run (pass a value to reseed it)")
    return execution.rng.seed(*args, **kwargs)


def _patched_as_completed(fs: Iterable[Any], *args: Any, **kwargs: Any) -> Iterator[Any]:
    """``asyncio.as_completed`` that, on a replay loop, turns coroutines into tasks in argument order first."""
    if active_execution() is not None and not (asyncio.isfuture(fs) or asyncio.iscoroutine(fs)):
        loop = asyncio.get_running_loop()
        ordered: list[Any] = []
        seen: set[int] = set()
        for item in fs:
            if id(item) in seen:
                continue
            seen.add(id(item))
            ordered.append(item if asyncio.isfuture(item) else asyncio.ensure_future(item, loop=loop))
        fs = ordered
    return _ORIGINAL_AS_COMPLETED(fs, *args, **kwargs)


_ASYNCIO_TASKS_FILE = os.path.join("asyncio", "tasks.py")
_ANYIO_SOCKETS_FILE = os.path.join("anyio", "_core", "_sockets.py")
IO_REFUSAL = ("workflow code cannot do I/O ({call}): what it reads is neither recorded nor replayed; put the I/O in "
              "a @step")
"""The refusal of I/O in a workflow body, naming the ``call``: the replay loop's I/O methods
(``replay_loop.IO_METHODS``) and anyio's connections (``refused_task_creation``)."""


def refused_task_creation() -> str | None:
    """Called when the replay loop wraps a coroutine in a task: the refusal of the two patterns it can see there,
    or None. An ``as_completed`` bound by name over bare coroutines creates their tasks in object-id order; anyio's
    ``connect_tcp`` (httpx's connections) to an IP address resolves nothing and starts a task per address (happy
    eyeballs) under a cancel scope whose delay is a timer: refused inside anyio's scope, that timer broke anyio's
    state ("Attempted to exit a cancel scope that isn't the current task's current cancel scope", whatever the
    client's ``timeout``), so the task is refused as I/O first."""
    here = inspect.currentframe()
    caller = here.f_back if here is not None else None
    frame = caller.f_back if caller is not None else None  # the caller of the loop's create_task
    for _ in range(5):
        if frame is None:
            return None
        code = frame.f_code
        if code.co_filename.endswith(_ASYNCIO_TASKS_FILE) and code.co_name in ("as_completed", "<setcomp>",
                                                                                "__init__"):
            return ("asyncio.as_completed() over bare coroutines creates their tasks in object-id order, which "
                    "differs between replays: pass tasks created in a fixed order "
                    "(as_completed([asyncio.create_task(c) for c in coroutines])) or call it as "
                    "asyncio.as_completed(...)")
        if code.co_filename.endswith(_ANYIO_SOCKETS_FILE):
            return IO_REFUSAL.format(call=f"anyio.{code.co_name}(), as httpx connects: a connection")
        frame = frame.f_back
    return None


class _RoutedRandom(_random.Random):
    """The class of the random module's generator while workflow code runs (``enter`` sets it): its primitives
    answer from the run's generator inside a workflow body and from the instance's own state anywhere else, so
    ``random.randint``, ``choice``, ``shuffle``, ``uniform``... (Python code calling them) are replay-stable there
    and untouched elsewhere. They consume the run's generator exactly as the run's own ``rng.randint`` would."""

    def random(self) -> float:
        execution = active_execution()
        return super().random() if execution is None else execution.rng.random()

    def getrandbits(self, k: int, /) -> int:
        execution = active_execution()
        return super().getrandbits(k) if execution is None else execution.rng.getrandbits(k)


_REPLACEMENTS: tuple[tuple[dict[str, Any], str, Callable[..., Any]], ...] = tuple(
    (namespace, name, replacement) for namespace, replacements in (
        (_time.__dict__, {"time": _patched_time, "time_ns": _patched_time_ns}),
        (_uuid.__dict__, {"uuid4": _patched_uuid4}),
        (_random.__dict__, {**{name: _random_function(name) for name in MODULE_ROUTED}, "seed": _patched_seed}),
        (asyncio.__dict__, {"as_completed": _patched_as_completed}),
        (asyncio.tasks.__dict__, {"as_completed": _patched_as_completed}),
    ) for name, replacement in replacements.items())
"""Each module's namespace, a name workflow code calls in it, and the replay-stable function ``enter`` puts there:
one flat table, read in one loop by ``enter`` and ``leave`` (they run around every resumption of a workflow body,
and a loop over a dict per module, building a dict of originals each time, cost twice as many instructions)."""
_replaced: list[Any] = []  # what ``enter`` took out, in ``_REPLACEMENTS``' order, for the last ``leave``
_replaced_class: list[type[_random.Random]] = []  # and the generator's class it swapped
_entered = 0  # threads (or nested loops) running workflow code now
_patch_lock = threading.Lock()
