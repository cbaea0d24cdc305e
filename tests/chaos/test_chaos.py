"""Crash injection at the AWS calls of a run driven through the real Lambda handlers (see ``harness``).

The clean run first: it must complete as every faulted trial must, and its count of AWS calls, N, fixes the
sample. Then a deterministic sample of the full sweep (``bench/chaos.py`` runs all of it; ``SWEEP``): on moto a
fault at every twenty-fourth call, k = 1, 25, 49, ... <= N, in each of the three modes, several trials at a time,
each on its own World; on ``[localstack]`` every forty-eighth, k = 13, 61, 109, ..., points moto's sample never takes
(fewer trials: what LocalStack adds is its SQS and S3, which every trial exercises, and the suite's time is
bounded).
One test holds the whole sample (N is only known at run time) and its failure message lists every trial that
went wrong and how, as the bench's table would.

The "message lost" modes (``loss``) have a sample of their own: ``LOSS_TRIALS`` points spread evenly over the
clean run, each in one of the four combinations of loss (``lost``, ``redriven``) and recovery (``watchdog``,
``operator``), taken in turn, so the sample covers the run's length and every combination.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import pytest

from awsworld.local import LocalAWS, MotoServer
from conftest import LOCALSTACK, local_aws_options  # tests/conftest.py (tests/ is on sys.path)

from .harness import MODES, Fault, Mode, Trial, TrialResult, chaos_environment, new_executor, run_trials
from .loss import LOSS_ENVIRONMENT, LOSS_MODES, RECOVERIES
from .moto_process import MotoProcess

SWEEP = {"moto": (1, 24), LOCALSTACK: (13, 48)}
"""Each backend's (first k, stride): about 14 trials on moto and 7 on LocalStack, disjoint (moto's k are 1 and
LocalStack's 13 modulo 24), within the suite's budget on two cores. ``bench/chaos.py`` sweeps every k
(``bench/sweeps.py`` runs it with the other sweeps)."""
PARALLEL = 8
HANDED_MODES = [*((0, mode) for mode in MODES), *((1, mode) for mode in MODES), (-1, "die-before"), (-1, "die-after")]
"""The handed-over run's sample, one round of ``PARALLEL`` trials: a fault at the first hand-over's Invoke (0) and the
call after it (1), in each mode, and a crash on either side of the last Invoke (-1). ``bench/chaos.py --handed``
sweeps every k."""
LOSS_TRIALS = 8
"""One round of ``PARALLEL`` trials, each combination twice: a loss trial waits out a lease and a watch horizon
(about 20 s); ``bench/chaos.py --loss`` sweeps every point in every combination."""
"""Trials at a time. Each spends most of its time waiting (delays, visibility timeouts), so on a 2-core
machine 8 at a time keep the emulator busy without a trial's invocations outliving their own timeout."""
CHAOS_BACKENDS = ["moto", LOCALSTACK]
"""The clean run and the sampled sweep run on moto and on DynamoDB Local with LocalStack's SQS, S3 and KMS
(``[localstack]``); the budget and KMS variants on moto only (``MOTO_ONLY``), for the suite's time."""
MOTO_ONLY = pytest.mark.parametrize("backend", ["moto"], indirect=True)


@pytest.fixture(scope="module")
def executor() -> Iterator[ThreadPoolExecutor]:
    pool = new_executor(PARALLEL)
    yield pool
    pool.shutdown(wait=False, cancel_futures=True)


@pytest.fixture(scope="module")
def moto_process() -> Iterator[MotoServer]:
    """The emulator in a process of its own (see ``moto_process``): the session's in-process one would share
    this process's GIL with the handlers, and the sample would take twice as long."""
    server = MotoProcess().start()
    yield cast(MotoServer, server)
    server.stop()


@pytest.fixture(scope="module", params=CHAOS_BACKENDS, ids=CHAOS_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def servers(request: pytest.FixtureRequest, backend: str) -> dict[str, Any]:
    """The emulators for this backend: moto in its own process; DynamoDB Local and LocalStack are processes of
    their own already (the session's)."""
    if backend == "moto":
        return {"dynamodb": "moto", "moto": request.getfixturevalue("moto_process")}
    return local_aws_options(request, backend)


@pytest.fixture(scope="module")
async def local(servers: dict[str, Any]) -> AsyncIterator[LocalAWS]:
    """Fresh Worlds on the emulator, with the handlers' environment (back-offs, leases) set for the module."""
    with chaos_environment():
        async with LocalAWS(**servers, initial_world=False) as aws:
            yield aws


@pytest.fixture(scope="module")
async def clean(local: LocalAWS, executor: ThreadPoolExecutor) -> TrialResult:
    return await Trial(local, executor).run()


def _describe(result: TrialResult) -> str:
    assert result.fault is not None
    problems = "\n      ".join(result.problems)
    return (f"  {result.fault} {result.call or '(not reached)'}: {result.outcome} "
            f"after {result.seconds:.1f} s\n      {problems}")


async def test_a_clean_run_completes_through_the_lambda_handlers(clean: TrialResult) -> None:
    assert clean.outcome == "completed", clean.problems
    assert clean.crashes == 0 and clean.problems == []
    # The reference workflow reaches every kind of write: transactions, queued steps, S3 values and streams.
    assert {"dynamodb.TransactWriteItems", "sqs.SendMessage", "sqs.SendMessageBatch", "s3.PutObject"} <= set(
        clean.calls)


@pytest.mark.timeout(900)
async def test_one_failure_at_sampled_aws_calls_in_each_mode_strands_nothing(
        local: LocalAWS, executor: ThreadPoolExecutor, clean: TrialResult, backend: str) -> None:
    assert clean.ok, f"the clean run itself failed: {clean.problems}"
    first, stride = SWEEP[backend]
    faults = [Fault(k, mode) for k in range(first, len(clean.calls) + 1, stride) for mode in MODES]
    started = time.monotonic()
    results = await run_trials(local, faults, parallel=PARALLEL, executor=executor)
    elapsed = time.monotonic() - started

    failed = [r for r in results if not r.ok]
    summary = ", ".join(f"{sum(r.outcome == o for r in failed)} {o}"
                        for o in ("stranded", "wrong output", "duplicated", "leaked", "harness error"))
    assert not failed, (f"{len(failed)} of {len(results)} trials failed ({summary}) in {elapsed:.0f} s:\n"
                        + "\n".join(_describe(r) for r in failed))


@MOTO_ONLY
async def test_runs_whose_deliveries_keep_running_out_of_budget_complete(
        local: LocalAWS, executor: ThreadPoolExecutor) -> None:
    """With a 300 ms budget most deliveries end by queueing their own continuation, often right after
    claiming a step to run inline or before any new event: every run must still complete, and cleanly."""
    with chaos_environment(AWSWORLD_FLOW_BUDGET_MS="300"):
        results = await run_trials(local, [None] * 4, parallel=4, executor=executor)
    failed = [r for r in results if not r.ok]
    assert not failed, "\n".join(f"  {r.outcome} after {r.seconds:.1f} s: {'; '.join(r.problems)}" for r in failed)


@MOTO_ONLY
@pytest.mark.timeout(600)
async def test_a_failure_at_each_kms_call_of_an_encrypted_run_strands_nothing(
        local: LocalAWS, executor: ThreadPoolExecutor) -> None:
    """Per-run payload encryption adds calls to the handlers' path (KMS Decrypt of the run's data key, once per
    container): a fault at each of them, in each mode, strands nothing, and the run's values still open."""
    clean = await Trial(local, executor, encrypted=True).run()
    assert clean.ok, f"the clean encrypted run failed: {clean.problems}"
    kms = [k for k, call in enumerate(clean.calls, 1) if call.startswith("kms.")]
    assert kms, "the handlers unwrapped no data key"
    faults = [Fault(k, mode) for k in kms for mode in MODES]
    results = await run_trials(local, faults, parallel=PARALLEL, executor=executor, encrypted=True)
    failed = [r for r in results if not r.ok]
    assert not failed, f"{len(failed)} of {len(results)} trials failed:\n" + "\n".join(_describe(r) for r in failed)


CHARGE_SAMPLE = [*((d, mode) for d in (0, 1) for mode in MODES), (-1, "die-after"), (2, "die-after")]
"""The calls around the at-most-once step's body that a fault aims at, relative to the last call before it (its
attempt's start, the claim or the born-running batch, is before; its outcome's write and the next declarations
after), with the mode: every mode at 0 and 1, whose crash cuts the attempt off (a measured run interrupted at
(0, die-before), (0, die-after) and (1, die-before)), and a crash just before and just after them. ``PARALLEL``
trials, one round (the window -3..3 in every mode took three); ``bench/chaos.py`` covers every call in every mode.
The calls after the body are counted from each trial's own charge (``_aimed``), so (1, die-before) cuts the
attempt off in every trial; those at or before it by the clean run's count, which under load can shift (a measured
CI run missed): where the round cuts no attempt off, the rest of that window runs too (``CHARGE_WINDOW``)."""
CHARGE_WINDOW = [(d, mode) for d in range(-3, 4) for mode in MODES if (d, mode) not in CHARGE_SAMPLE]


@MOTO_ONLY
@pytest.mark.timeout(600)
async def test_a_fault_around_the_at_most_once_step_never_runs_one_attempt_twice(
        local: LocalAWS, executor: ThreadPoolExecutor, clean: TrialResult) -> None:
    """Faults at calls around the charge's start and end (``CHARGE_SAMPLE``): the run completes, the body runs at
    most once per recorded attempt (``harness.body_counts``), and where the fault cut an attempt off, the log records
    it failed with ``StepInterruptedError`` and retried."""
    assert clean.ok and clean.interrupted == 0, f"the clean run itself failed: {clean.problems}"
    [charged] = clean.charged_at
    results = await run_trials(local, _aimed(charged, CHARGE_SAMPLE), parallel=PARALLEL, executor=executor)
    if not any(r.interrupted for r in results):
        results += await run_trials(local, _aimed(charged, CHARGE_WINDOW), parallel=PARALLEL, executor=executor)
    failed = [r for r in results if not r.ok]
    assert not failed, f"{len(failed)} of {len(results)} trials failed:\n" + "\n".join(_describe(r) for r in failed)
    cut_off = [r for r in results if r.interrupted]
    assert cut_off, "no fault cut the charge's attempt off: the window missed it"
    assert all(len(r.charged_at) <= 1 + r.interrupted for r in results), \
        "a body ran only in its own attempt: one per interrupted attempt and the one that completed"


def _aimed(charged: int, window: list[tuple[int, Mode]]) -> list[Fault]:
    """The faults of ``window`` around a charge after ``charged`` calls (the clean run's): those at or before the
    last call before the body by the clean run's count, those after it by each trial's own charge
    (``Fault.after_charge``), so a crash meant for the body's attempt lands in it however the calls before it
    interleave (under load a trial's charge moved a call, and the whole sample missed it)."""
    return [Fault(d, mode, after_charge=True) if d >= 1 else Fault(charged + d, mode)
            for d, mode in window if charged + d >= 1]


def loss_sample(calls: int, trials: int = LOSS_TRIALS) -> list[Fault]:
    """``trials`` points spread over a clean run of ``calls`` calls, the loss/recovery combinations in turn."""
    combos = [(mode, recovery) for mode in LOSS_MODES for recovery in RECOVERIES]
    every = max(1, calls // trials)
    return [Fault(k, *combos[i % len(combos)]) for i, k in enumerate(range(1, calls + 1, every))][:trials]


@pytest.mark.timeout(600)
async def test_a_message_lost_or_redriven_at_sampled_points_strands_nothing(
        local: LocalAWS, executor: ThreadPoolExecutor) -> None:
    """The process dies after call k and the records it held are lost (or dead-lettered and redriven under new
    ids); the watchdog's ticks, or an operator's wakes, bring every run to its end with the right output, no
    event twice, no step body run more often than its step was started."""
    with chaos_environment(**LOSS_ENVIRONMENT):
        clean = await Trial(local, executor).run()
        assert clean.ok, f"the clean run itself failed: {clean.problems}"
        faults = loss_sample(len(clean.calls))
        results = await run_trials(local, faults, parallel=PARALLEL, executor=executor)
    failed = [r for r in results if not r.ok]
    assert not failed, f"{len(failed)} of {len(results)} trials failed:\n" + "\n".join(_describe(r) for r in failed)
    assert sum(r.lost for r in results) >= len(results) // 2, "most sampled points lose at least one record"
    assert {(r.fault.mode, r.fault.recovery) for r in results if r.fault} == {
        (m, r) for m in LOSS_MODES for r in RECOVERIES}


@MOTO_ONLY
@pytest.mark.timeout(600)
async def test_a_run_on_an_older_version_handed_over_at_every_delivery_strands_nothing(
        local: LocalAWS, executor: ThreadPoolExecutor, backend: str) -> None:
    """The run is pinned to the flow function's older version (``v0``) while ``v1`` is live: every delivery of it
    reaches v1, which hands the record to v0 with Lambda's asynchronous Invoke (``harness.Invoking``: one AWS call of
    v1, faultable like the others) and v0 runs it. The clean run, then a fault at its hand-overs' calls
    (``HANDED_MODES``), the hand-over's Invoke included: a crash on either side of it strands nothing."""
    clean = await Trial(local, executor, handed=True).run()
    assert clean.outcome == "completed", clean.problems
    invokes = [k for k, call in enumerate(clean.calls, 1) if call == "lambda.Invoke"]
    assert invokes, "every delivery was handed over"
    at = {0: invokes[0], 1: invokes[0] + 1, -1: invokes[-1]}
    faults = [Fault(at[which], mode) for which, mode in HANDED_MODES]
    print(f"\nhanded-over run: {len(clean.calls)} calls, {len(invokes)} of them hand-overs; {len(faults)} trials")
    results = await run_trials(local, faults, parallel=PARALLEL, executor=executor, handed=True)
    failed = [r for r in results if not r.ok]
    assert not failed, f"{len(failed)} of {len(results)} trials failed:\n" + "\n".join(_describe(r) for r in failed)
