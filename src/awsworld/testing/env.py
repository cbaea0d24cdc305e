"""``WorkflowTestEnv``: run workflows in milliseconds, in memory, with time that skips.

    async with WorkflowTestEnv() as env:
        run = await env.client.start(order, "o-1")
        assert await run.result() == "shipped"        # a 30-day sleep inside costs no wall time

The environment is a ``MemoryWorld`` (the contract in memory, no sockets), a ``Client`` on it, and a driver
that runs every delivery in this process through the same delivery path Lambda runs. Its clock is virtual:
it moves at wall-clock pace, and jumps to the next due wait or retry whenever something waits for a run
(``Run.result()``, ``Run.wait_for_hook()``, ``Run.stream()``'s next chunk, ``env.sleep``) and no delivery can run
before then. Pass ``time_skipping=False`` to keep real time. A wait that nothing in the environment can end (a hook
the test never resumed) raises ``RunStalledError`` after ``stall_timeout`` seconds instead of hanging (``driver.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any

from .._deployments.identity import register
from .._deployments.upgrade import Upgrade, upgrade_run
from .._memory import MemoryWorld
from .._memory.clock import VirtualClock
from .._timeline import how_far
from .._worker.dispatch import Worker
from .._worker.tick import run_tick
from ..authoring.definitions import Registry, Workflow
from ..authoring.durations import Duration, parse_duration
from ..client.client import Client, check_delivery_loop
from ..client.waits import waits_text
from ..schedules.declared import declared_for
from ..world.entities import TERMINAL_RUN_STATUSES
from ..world.errors import HookNotFoundError
from .driver import STALL_TIMEOUT, Driver, RunStalledError

TEST_HOST = "a test environment"


MAX_RUNS_NAMED = 5
"""How many runs in progress a stalled resume's message lists with what each waits on."""


class HookStalledError(HookNotFoundError, RunStalledError):
    """A resume's ``wait`` for a hook no run holds, ended because nothing in the environment can bring one: a
    ``HookNotFoundError``, what the wait running out raises (``Client.resume_hook``), and a ``RunStalledError``, as
    every stalled wait of the test environment is. ``HookNotFoundError`` first, so its ``__init__`` runs."""


@contextlib.contextmanager
def _hook_stalls(wait: AbstractContextManager[None]) -> Iterator[None]:
    try:
        with wait:
            yield
    except RunStalledError as stalled:
        raise HookStalledError(str(stalled)) from None


class WorkflowTestEnv:
    """Workflows in memory, in milliseconds: a ``MemoryWorld``, the worker's delivery path run in-process, and a
    virtual clock that skips to the next due sleep, retry or timeout whenever a test waits for a run and nothing
    else can run before it. ``async with WorkflowTestEnv() as env:`` (the pytest fixture ``awsworld_env`` gives a
    fresh one per test); ``env.client`` starts and reads runs; ``env.sleep``, ``env.advance``, ``env.idle`` and
    ``env.now`` drive and read the clock. Docs: *Get started: Your first test*."""

    def __init__(self, *, time_skipping: bool = True, start_time: datetime | None = None,
                 registry: Registry | None = None, timeout: float | None = None,
                 schedules: Sequence[Workflow[..., Any] | str] = (), deployment: str | None = None,
                 stall_timeout: float | None = STALL_TIMEOUT) -> None:
        """``time_skipping``: whether the clock skips ahead to the next due wait when a test waits for a run and
        nothing else can run (the default); ``False`` keeps real time (``env.sleep`` and ``env.advance`` still
        move it). ``start_time``: an aware datetime the clock starts at (default: now), for schedules and
        date-dependent code. ``registry``: the workflows and steps deliveries may run (default: every one this
        process has decorated). ``timeout``: one delivery's Lambda-like time limit, in real seconds (default: the
        flow function's, ``AWSWORLD_FLOW_TIMEOUT_SECONDS``, 120 s). ``schedules``: the workflows whose
        ``@workflow(schedule=...)`` declarations this environment fires on its clock (a test process imports many
        modules; nothing fires only because it was imported).

        ``deployment``: a name for this code (``"v1"``): runs are pinned to the deployment that starts them, and
        ``deploy`` adds another version, as a deploy publishes a new Lambda version (docs/how-to/changing-code.md,
        "Runs stay on the code that started them"). Without it nothing is pinned: every delivery runs ``registry``.

        ``stall_timeout``: real seconds a test's wait for a run (``run.result()``, ``run.wait_for_hook()``, a
        ``client.resume_hook(..., wait=...)`` for its hook) may find nothing in the environment able to move the run
        (no delivery running or due, no sleep, retry or timeout pending) before it raises ``RunStalledError`` naming
        what the run waits on (a hook the test never resumed, say); ``None`` waits out the wait's own timeout. Raise
        it if something outside the environment (a thread, a server) resumes your runs."""
        self.clock = VirtualClock(start_time)
        self.world = MemoryWorld(clock=self.clock)
        self.world.schedules.declared = declared_for(schedules)
        self.worker = Worker(self.world, registry, deployment=deployment)
        self.driver = Driver(self.world, self.worker, self.clock, time_skipping=time_skipping, timeout=timeout,
                             stall_timeout=stall_timeout)
        # Waiting for a run (``Run.result``, ``Run.wait_for_hook``) is what lets the clock skip ahead.
        self.client = Client(self.world, registry=self.worker.registry, waiting=self._waiting)
        self._started = False
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None  # where start() ran the driver

    def _waiting(self, run_id: str | None, *, hook_token: str | None = None) -> AbstractContextManager[None]:
        """A client's wait lets time skip until what it waits for has happened: the run's end, or the run
        holding the hook (so a timeout armed with the hook is not skipped to before the test can resume it). A wait
        for a run (``run_id``) that nothing here can end raises ``RunStalledError``; a resume's wait for whichever
        run comes to hold ``hook_token`` (``run_id`` None) raises it too, listing what the runs in progress wait on
        (``_no_holder``): it used to wait its ``wait`` out in real seconds and raise ``HookNotFoundError``."""
        self._check_loop()
        storage = self.world.storage

        def ended() -> bool:
            return run_id is not None and storage.run_status(run_id) in TERMINAL_RUN_STATUSES

        def holds_hook(token: str) -> bool:  # the run (any run, for a resume) holds the hook ``token`` now
            holder = storage.state.tokens.get(token)
            return holder is not None and not holder.released and run_id in (None, holder.run_id)

        if run_id is None:
            async def no_holder() -> str:
                assert hook_token is not None
                return await self._no_holder(hook_token)

            return _hook_stalls(self._noting_skips(self.driver.skipping(
                satisfied=lambda: hook_token is None or holds_hook(hook_token),
                stuck=None if hook_token is None else no_holder)))

        async def stuck() -> str:
            return await self._stuck(run_id, hook_token)

        if hook_token is None:
            return self._noting_skips(self.driver.skipping(satisfied=ended, stuck=stuck))
        return self._noting_skips(self.driver.skipping(satisfied=lambda: ended() or holds_hook(hook_token),
                                                       stuck=stuck))

    @contextlib.contextmanager
    def _noting_skips(self, wait: AbstractContextManager[None]) -> Iterator[None]:
        """``wait``, and a wait's own timeout (a ``TimeoutError``, not ``RunStalledError``) says how far time skipped
        meanwhile: a run that keeps scheduling work (a loop of sleeps, a poll that never succeeds) never ends however
        far the clock skips, and the timeout's real seconds alone would not tell that from a slow run."""
        began, real, deliveries = self.clock.now(), time.monotonic(), self.driver.deliveries
        with wait:
            try:
                yield
            except TimeoutError as error:
                skipped = (self.clock.now() - began).total_seconds() - (time.monotonic() - real)
                if not isinstance(error, RunStalledError) and skipped >= 1:
                    far = how_far(skipped).removeprefix("in ")
                    error.add_note(
                        f"While the test waited, this environment's clock skipped {far} ahead "
                        f"({self.driver.deliveries - deliveries} deliveries ran): the run keeps scheduling work (a "
                        "loop of sleeps or retries?) and never ends, however far time skips. End it from the test "
                        "(a hook, client.cancel) or bound its loop.")
                raise

    async def _stuck(self, run_id: str, hook_token: str | None) -> str:
        """Why a wait for the run cannot end (``RunStalledError``'s message): what the run waits on, as
        ``awsworld describe`` lists it (``client/waits.py``), and what the test can do about it."""
        view = await self.world.runs.get(run_id, resolve_data="none")
        what = await waits_text(self.world, run_id, view)
        run = f"run {run_id} ({view.workflow_name})"
        head = (f"{run} does not hold hook {hook_token!r}{await self._holder_of(hook_token)}, and"
                if hook_token is not None else f"{run} is {view.status}, and")
        return (f"{head} nothing in this test environment can move it (no delivery is running or due, and no "
                f"sleep, retry or timeout is pending). It waits on: {what}. Do what it waits for from the test before "
                "awaiting it (a hook: await env.client.resume_hook(token, payload); a slot: end the run holding it)")

    async def _no_holder(self, token: str) -> str:
        """Why a resume's ``wait`` for the hook ``token`` cannot end (``RunStalledError``'s message): no run holds
        it and nothing here can bring one to ``create_hook``; what the runs in progress wait on instead (a token
        spelled otherwise shows there)."""
        runs = (await self.world.runs.list(status=["pending", "running"], limit=MAX_RUNS_NAMED + 1)).data
        waits = [f"run {run.run_id} ({run.workflow_name}): {await waits_text(self.world, run.run_id, run)}"
                 for run in runs[:MAX_RUNS_NAMED]]
        more = "; and more" if len(runs) > MAX_RUNS_NAMED else ""
        what = f"The runs in progress wait on: {'; '.join(waits)}{more}" if waits else "No run is in progress"
        return (f"no run holds hook {token!r}, and nothing in this test environment can make one (no delivery is "
                f"running or due, and no sleep, retry or timeout is pending). {what}. Resume a token a run creates "
                "(await run.wait_for_hook(token) says when it does), or start the run that creates it first")

    async def _holder_of(self, token: str) -> str:
        """`` (run X holds it: wait on that run)`` when another run holds the hook ``token`` (a child, say), else
        nothing."""
        try:
            hook = await self.world.hooks.get_by_token(token, resolve_data="none")
        except HookNotFoundError:
            return ""
        holder = await self.world.runs.get(hook.run_id, resolve_data="none")
        return (f" (run {hook.run_id} ({holder.workflow_name}) holds it: wait for the hook on that run, "
                "env.client.get_run(run_id), or for a child, await run.children())")

    # -- deployments -----------------------------------------------------------------------------------

    async def deploy(self, deployment: str, registry: Registry) -> Worker:
        """Deploy another version of the code (``registry``: build one with ``Registry().capture()``) as
        ``deployment``: it takes every new run and every delivery of a run pinned to it, while runs started
        before keep running the code they started on. Returns its worker."""
        if self.worker.deployment is None:
            raise ValueError("this environment pins no run: pass WorkflowTestEnv(deployment=...) to name the first "
                             "deployment, then deploy others")
        if deployment in self.driver.host.invokers:
            raise ValueError(f"deployment {deployment!r} is deployed already")
        worker = Worker(self.world, registry, deployment=deployment)
        self.driver.host.deploy(worker)
        self.worker = worker
        self.client.registry = registry
        await register(self.world, deployment, registry, host=TEST_HOST)
        return worker

    async def retire(self, deployment: str) -> None:
        """Retire a deployment (as deleting its Lambda version does), whatever runs it still holds (``awsworld
        deployments retire`` refuses that; a test may want it): their deliveries can no longer reach it, and fail
        their runs with ``DeploymentMismatchError`` after the bounded re-routes."""
        if not self.driver.host.retire(deployment):
            raise ValueError(f"no deployment {deployment!r} is deployed here ({', '.join(self.deployments())})")
        store = self.world.deployments
        for found in await store.read():
            if found.deployment_id == deployment:
                await store.put(found.retire(self.clock.now()))

    async def upgrade(self, run_id: str, to: str) -> Upgrade:
        """Move a run to deployment ``to`` on purpose, as ``awsworld upgrade`` does: replayed against ``to``'s code
        first, and moved only if that replay matches (``Upgrade.outcome``: ``moved``, ``unpinned`` for a run pinned
        to no deployment, which stays so, or ``diverged`` with where)."""
        invoker = self.driver.host.invokers.get(to)
        if invoker is None:
            raise ValueError(f"no deployment {to!r} is deployed here ({', '.join(self.deployments())})")
        return await upgrade_run(self.world, run_id, to, invoker.path.worker.registry)

    def deployments(self) -> list[str]:
        """The deployments loaded, oldest first (the last one takes new runs)."""
        return self.driver.host.loaded()

    # -- time ------------------------------------------------------------------------------------------

    def now(self) -> datetime:
        """The environment's time (what the log's timestamps and ``awsworld.now()`` in workflows follow)."""
        return self.clock.now()

    async def sleep(self, duration: Duration) -> None:
        """Let ``duration`` of virtual time pass, running every delivery that falls due on the way."""
        self._check_loop()
        await self.driver.run_until(self.clock.now() + _delta(duration))

    def advance(self, duration: Duration) -> datetime:
        """Move the clock forward at once; what falls due runs in the background. Returns the new time."""
        moment = self.clock.advance(_delta(duration))
        self.driver.wake()
        return moment

    async def idle(self, timeout: float = 30.0) -> None:
        """Wait until no delivery is running and none is due now (time does not skip for this)."""
        self._check_loop()
        await self.driver.idle(timeout)

    @property
    def deliveries(self) -> int:
        """Deliveries run so far (flow and step messages alike)."""
        return self.driver.deliveries

    # -- life ------------------------------------------------------------------------------------------

    async def start(self) -> WorkflowTestEnv:
        """Start running deliveries (``async with`` does it); returns the environment."""
        if not self._started:
            if self.worker.deployment is not None:
                await register(self.world, self.worker.deployment, self.worker.registry, host=TEST_HOST)
            if self.world.schedules.declared:  # stored now, as a stack's first tick stores them: a test may
                await run_tick(self.world)       # describe or trigger one at once (before, "no schedule")
            self.driver.start()
            self._loop = asyncio.get_running_loop()
            self._started = True
        return self

    def _check_loop(self) -> None:
        """Refuse a wait nothing would end: made before the environment started (``WorkflowTestEnv()`` used without
        ``async with``: the run is recorded, and no delivery ever runs it, so ``run.result()`` waited for ever), after
        it closed, or on another event loop than its deliveries'."""
        if not self._started:
            raise RuntimeError(
                "this WorkflowTestEnv is not started, so nothing delivers its runs and this wait would never end: use "
                "it as `async with WorkflowTestEnv() as env:` (or `await env.start()` first), or take the "
                "awsworld_env fixture, which starts it for you")
        if self._closed:
            raise RuntimeError(
                "this WorkflowTestEnv is closed (its `async with` block has ended, or close() was called), so nothing "
                "delivers its runs any more and this wait would never end: wait for the runs inside the block")
        check_delivery_loop(self._loop, "this WorkflowTestEnv")

    async def close(self) -> None:
        """Stop the deliveries and close the World (``async with`` does it on exit)."""
        self._closed = True
        await self.driver.stop()
        await self.world.close()

    async def __aenter__(self) -> WorkflowTestEnv:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


def _delta(duration: Duration) -> timedelta:
    """Any duration awsworld takes (seconds, a timedelta, ``"2d"``); never negative: time only moves forward."""
    return parse_duration(duration, what="a test environment's duration")
