"""The crash suite on limits across runs (issue 35): runs of a workflow limited to 3 at once, each calling a step
limited to 2 attempts at once across all runs, driven through the real Lambda flow handler while one AWS call of
the handlers fails (``harness``: raise, die before, die after). Every trial checks: every run completes with its
output (0 stranded), the peaks the bodies measured never pass the limits, and once the runs have ended no slot is
held and nobody waits (the pools), the queue is empty and no dedup marker is live.

A sample of faults over a 6-run trial's calls (every ``STRIDE``-th call, each mode), and 100 runs with a fault in
each mode at the middle of their calls."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import cast

import pytest

from awsworld.aws import AWSWorld
from awsworld.client.client import Client
from awsworld.local import LocalAWS, MotoServer
from awsworld.world.entities import TERMINAL_RUN_STATUSES

from . import limited, reference
from .harness import (
    MODES,
    CallLog,
    CrashingEventSource,
    Fault,
    Functions,
    chaos_environment,
    live_dedup_markers,
    new_executor,
    queue_counts,
)
from .moto_process import MotoProcess

STRIDE = 11
SMALL = 6
LARGE = 100
PARALLEL = 6
DRAIN_SECONDS = 20.0


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

    @property
    def ok(self) -> bool:
        return not self.problems


@pytest.fixture(scope="module")
def moto_process() -> Iterator[MotoServer]:
    server = MotoProcess().start()
    yield cast(MotoServer, server)
    server.stop()


@pytest.fixture(scope="module")
async def local(moto_process: MotoServer) -> AsyncIterator[LocalAWS]:
    with chaos_environment(AWSWORLD_MODULES=f"{reference.__name__},{limited.__name__}"):
        async with LocalAWS(dynamodb="moto", moto=moto_process, initial_world=False) as aws:
            yield aws


@pytest.fixture(scope="module")
def executor() -> Iterator[ThreadPoolExecutor]:
    pool = new_executor(PARALLEL)
    yield pool
    pool.shutdown(wait=False, cancel_futures=True)


async def run_trial(local: LocalAWS, executor: ThreadPoolExecutor, fault: Fault | None, runs: int,
                    completion_seconds: float) -> LimitTrial:
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
        while time.monotonic() < deadline:
            statuses = [(await world.runs.get(h.run_id, resolve_data="none")).status for h in handles]
            if all(s in TERMINAL_RUN_STATUSES for s in statuses):
                break
            await source.poll_once(wait_seconds=1)
        stranded = [h.run_id for h, s in zip(handles, statuses, strict=True) if s not in TERMINAL_RUN_STATUSES]
        if stranded:
            where = [await _stranded(world, r) for r in stranded]
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


async def _stranded(world: AWSWorld, run_id: str) -> str:
    """Where a stranded run stands: its status, its log's last events, the step limit's pools, the queue."""
    status = (await world.runs.get(run_id, resolve_data="none")).status
    events = [(e.event_type, e.correlation_id) for e in await Client(world).get_run(run_id).events()][-4:]
    pools = [(p.pool, dict(p.holders), p.waiting) for p in await world.limiters.pools(limited.STEP_LIMIT_NAME)]
    return f"{run_id} {status} {events} steps {pools} queue {await queue_counts(world)}"


async def trials(local: LocalAWS, executor: ThreadPoolExecutor, faults: list[Fault], runs: int,
                 completion_seconds: float) -> list[LimitTrial]:
    import asyncio

    slots = asyncio.Semaphore(PARALLEL)

    async def one(fault: Fault) -> LimitTrial:
        async with slots:
            try:
                return await run_trial(local, executor, fault, runs, completion_seconds)
            except Exception as error:
                return LimitTrial(fault, runs, problems=[f"harness error {type(error).__name__}: {error}"])

    return list(await asyncio.gather(*(one(f) for f in faults)))


def _report(results: list[LimitTrial]) -> str:
    return "\n".join(f"  {r.fault} {r.calls[r.fault.k - 1] if r.fault and len(r.calls) >= r.fault.k else ''}: "
                     f"{'; '.join(r.problems)}" for r in results if not r.ok)


@pytest.mark.timeout(1200)
async def test_limited_runs_and_steps_under_a_fault_at_sampled_calls_in_each_mode(
        local: LocalAWS, executor: ThreadPoolExecutor) -> None:
    clean = await run_trial(local, executor, None, SMALL, 60)
    assert clean.ok, clean.problems
    assert clean.peaks[0] >= 1 and clean.peaks[1] >= 1
    assert "dynamodb.PutItem" in clean.calls  # (the pools' writes are among the handlers' calls)
    faults = [Fault(k, mode) for k in range(1, len(clean.calls) + 1, STRIDE) for mode in MODES]
    results = await trials(local, executor, faults, SMALL, 60)
    failed = [r for r in results if not r.ok]
    assert sum(r.fired for r in results) >= 0.9 * len(results)
    peaks = (max(r.peaks[0] for r in results), max(r.peaks[1] for r in results))
    print(f"LIMITS CHAOS: {len(results)} trials of {SMALL} runs over {len(clean.calls)} calls; peaks {peaks}; "
          f"{sum(r.crashes for r in results)} crashed invocations")
    assert not failed, f"{len(failed)} of {len(results)} trials failed:\n{_report(failed)}"


@pytest.mark.timeout(1800)
async def test_a_limit_of_3_over_100_runs_with_a_fault_in_each_mode(
        local: LocalAWS, executor: ThreadPoolExecutor) -> None:
    clean = await run_trial(local, executor, None, LARGE, 600)
    assert clean.ok, clean.problems
    middle = len(clean.calls) // 2
    results = await trials(local, executor, [Fault(middle, mode) for mode in MODES], LARGE, 600)
    failed = [r for r in results if not r.ok]
    print(f"LIMITS CHAOS 100: {len(clean.calls)} calls clean; peaks {[r.peaks for r in [clean, *results]]}; "
          f"{[r.seconds for r in [clean, *results]]} s")
    assert not failed, f"{len(failed)} of {len(results)} trials failed:\n{_report(failed)}"
    assert all(r.peaks[0] == limited.RUN_LIMIT for r in [clean, *results])  # the limit was reached, not passed
