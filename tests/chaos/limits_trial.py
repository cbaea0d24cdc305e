"""One trial of the crash suite on limits across runs (issue 35), shared by ``test_chaos_limits`` and
``bench/chaos_limits.py``: ``runs`` runs of ``limited.limited`` (limited to 3 at once, each calling a step limited
to 2 attempts at once across all runs) driven through the real Lambda flow handler while one AWS call of the
handlers fails (``harness``: raise, die before, die after). A trial checks: every run completes with its output
(0 stranded), the peaks the bodies measured never pass the limits, and once the runs have ended no slot is held
and nobody waits (the pools), the queue is empty and no dedup marker is live."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from awsworld.aws import AWSWorld
from awsworld.client.client import Client
from awsworld.lambda_host import observability as obs
from awsworld.local import LocalAWS
from awsworld.world.entities import TERMINAL_RUN_STATUSES

from . import limited
from .harness import CallLog, CrashingEventSource, Fault, Functions, live_dedup_markers, queue_counts

DRAIN_SECONDS = 75.0
"""Once the runs have ended, how long the queue may take to empty: a delivery that found a step leased to a dead
one queues a wake for that lease's end (``_worker/recovery.py``: the flow budget, 5 s, and the lease grace, 30 s,
from the step's start), which comes, finds the run ended and is gone. The drain ends as soon as the queue is
empty. The bound is twice the lease because six trials share two cores in CI: twice (k=54 and k=286 of the
die-after sample) a lease-end wake was still queued 45 s after the run ended, its delivery late under load."""
PAUSE_SECONDS = 12.0
"""How long a paused step limit waits for an attempt to wait on it: a crashed delivery's message comes back after
the queue's visibility timeout (``harness.VISIBILITY_TIMEOUT_SECONDS``)."""


@dataclass
class LimitTrial:
    fault: Fault | None
    runs: int
    calls: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    peaks: tuple[int, int] = (0, 0)
    seconds: float = 0.0
    crashes: int = 0
    fired: bool = True
    waited: bool = False
    """With ``pause_on_fault``: an attempt waited for the paused limit (the crashed delivery's step came back)."""

    @property
    def ok(self) -> bool:
        return not self.problems


async def run_trial(local: LocalAWS, executor: ThreadPoolExecutor, fault: Fault | None, runs: int,
                    completion_seconds: float, *, pause_on_fault: bool = False,
                    resend_on_fault: bool = False) -> LimitTrial:
    """``pause_on_fault``: once the fault has fired, the step limit is paused (``client.limits.pause``) until an
    attempt waits for it (or ``PAUSE_SECONDS`` pass), then resumed: the crashed delivery's message, when it was a
    limited step's, comes back while no slot is free, as it does when other runs hold them all. It waits and is
    sent again by the limit's wake under a new message id (what six runs at once do now and then, at calls that
    vary from trial to trial; one run and the pause do it at the same call every time).

    ``resend_on_fault``: once the fault has fired, the limited step messages of the crashed invocation are sent
    again under new message ids (``_resend``), delivered in a batch of their own before the crashed records come
    back: a second message for a step the dead delivery started, as a flow's re-dispatch of a step not started
    yet, or a slot's wake, makes beside its step message (six runs at once: k=150 of the die-before sweep)."""
    label = uuid.uuid4().hex[:12]
    config = await local.new_config()
    world = AWSWorld(config)
    log = CallLog(fault)
    functions = Functions(config, log, executor)
    trial = LimitTrial(fault, runs)
    started = time.monotonic()
    try:
        client = Client(world)
        source = CrashingEventSource(world, functions)
        handles = [await client.start(limited.limited, label, n) for n in range(runs)]
        deadline = started + completion_seconds
        statuses: list[str] = []
        paused_until: float | None = None
        while time.monotonic() < deadline:
            statuses = [(await world.runs.get(h.run_id, resolve_data="none")).status for h in handles]
            if all(s in TERMINAL_RUN_STATUSES for s in statuses):
                break
            fired = log.fired
            await source.poll_once(wait_seconds=1)
            if resend_on_fault and not fired and log.fired:
                await _resend(world, source)
            if pause_on_fault and paused_until is None and log.fired:
                await client.limits.pause(limited.STEP_LIMIT_NAME)
                paused_until = time.monotonic() + PAUSE_SECONDS
            elif paused_until is not None and paused_until > 0 and (
                    time.monotonic() > paused_until
                    or any(p.waiting for p in await world.limiters.pools(limited.STEP_LIMIT_NAME))):
                await client.limits.resume(limited.STEP_LIMIT_NAME)
                trial.waited = time.monotonic() <= paused_until
                paused_until = 0.0
        if paused_until:  # (the runs ended while it was paused: its waiters go on in the drain)
            await client.limits.resume(limited.STEP_LIMIT_NAME)
        stranded = [h.run_id for h, s in zip(handles, statuses, strict=True) if s not in TERMINAL_RUN_STATUSES]
        if stranded:
            where = [await _stranded(world, r, source) for r in stranded]
            trial.problems.append(f"{len(stranded)} of {runs} runs stranded after {completion_seconds:.0f} s: "
                                  f"{where}")
        for n, handle in enumerate(handles):
            if handle.run_id in stranded:
                continue
            try:
                output = await handle.result(timeout=1)
            except Exception as error:
                trial.problems.append(f"run {n} ended: {error}")
                continue
            if output != 3 * n:
                trial.problems.append(f"run {n} returned {output!r}, not {3 * n}")
        drain_until = time.monotonic() + DRAIN_SECONDS
        while time.monotonic() < drain_until:
            if not await source.poll_once(wait_seconds=1) and sum((await queue_counts(world)).values()) == 0:
                break
        trial.peaks = (limited.RUN_PEAK[label], limited.STEP_PEAK[label])
        if trial.peaks[0] > limited.RUN_LIMIT or trial.peaks[1] > limited.STEP_LIMIT:
            trial.problems.append(f"peaks {trial.peaks} beyond the limits ({limited.RUN_LIMIT}, "
                                  f"{limited.STEP_LIMIT})")
        for name in (limited.RUN_LIMIT_NAME, limited.STEP_LIMIT_NAME):
            for pool in await world.limiters.pools(name):
                if pool.holders or pool.waiting:
                    trial.problems.append(f"{name} still holds {sorted(pool.holders)} and has {pool.waiting} "
                                          "waiting after the runs ended")
        if not stranded:
            counts = await queue_counts(world)
            if sum(counts.values()):
                trial.problems.append(f"queue not drained: {counts}")
            trial.problems.extend(text for _, text in await live_dedup_markers(world))
        trial.fired = fault is None or log.fired  # (six runs at once: their calls' order varies a little)
        trial.problems.extend(functions.errors)
        trial.calls = list(log.calls)
        trial.crashes = functions.crashes
    finally:
        trial.seconds = time.monotonic() - started
        limited.forget(label)
        await functions.close()
        await world.close()
        await local.drop(config)
    return trial


async def _resend(world: AWSWorld, source: CrashingEventSource) -> None:
    """Send the limited step messages of the last invocation (the crashed one) again, each under a new id."""
    _, batch = source.batches[-1]
    for _, body in batch:
        envelope = json.loads(body)
        if envelope.get("payload", {}).get("stepName") == limited.WORK_STEP:
            await world.queue(envelope["queueName"], envelope["payload"])


async def _stranded(world: AWSWorld, run_id: str, source: CrashingEventSource) -> str:
    """Where a stranded run stands: its status, its log's events (a step's start with its owner's message id), the
    step limit's pools, the queue, and the run's messages of each invocation (crashed or not)."""
    status = (await world.runs.get(run_id, resolve_data="none")).status
    events = [(e.event_type, e.correlation_id, *([(e.event_data or {}).get("ownerMessageId")]
                                                  if e.event_type == "step_started" else []))
              for e in await Client(world).get_run(run_id).events()]
    batches = [("CRASHED" if crashed else "ok", [(i, b) for i, b in batch if run_id in b])
               for crashed, batch in source.batches if any(run_id in b for _, b in batch)]
    pools = [(p.pool, dict(p.holders), p.waiting) for p in await world.limiters.pools(limited.STEP_LIMIT_NAME)]
    return f"{run_id} {status} {events} steps {pools} queue {await queue_counts(world)} deliveries {batches}"


async def trials(local: LocalAWS, executor: ThreadPoolExecutor, faults: list[Fault], runs: int,
                 completion_seconds: float, parallel: int,
                 on_result: Callable[[LimitTrial], object] | None = None,
                 pause_on_fault: bool = False, resend_on_fault: bool = False) -> list[LimitTrial]:
    """Run a trial per fault, ``parallel`` at a time, each on its own World; results in the order of ``faults``
    (``on_result`` is called with each as it ends)."""
    slots = asyncio.Semaphore(parallel)

    async def one(fault: Fault) -> LimitTrial:
        async with slots:
            try:
                result = await run_trial(local, executor, fault, runs, completion_seconds,
                                         pause_on_fault=pause_on_fault, resend_on_fault=resend_on_fault)
            except Exception as error:
                result = LimitTrial(fault, runs, problems=[f"harness error {type(error).__name__}: {error}"])
        if on_result is not None:
            on_result(result)
        return result

    try:
        return list(await asyncio.gather(*(one(f) for f in faults)))
    finally:
        obs.metrics.clear_metrics()  # nothing of the trials' counts is left for another test's flush


def report(results: list[LimitTrial]) -> str:
    return "\n".join(f"  {r.fault} {r.calls[r.fault.k - 1] if r.fault and len(r.calls) >= r.fault.k else ''}: "
                     f"{'; '.join(r.problems)}" for r in results if not r.ok)
