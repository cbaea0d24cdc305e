"""The crash suite on limits across runs (issue 35): runs of a workflow limited to 3 at once, each calling a step
limited to 2 attempts at once across all runs, driven through the real Lambda flow handler while one AWS call of
the handlers fails (``limits_trial``: every run completes with its output, the peaks never pass the limits, no
slot is held, nobody waits, the queue is empty and no dedup marker is live once the runs end).

A sample of faults over a 6-run trial's calls (every ``STRIDE``-th call, each mode: one round of trials), and the
trials that once stranded a run, made deterministic. ``bench/chaos_limits.py`` sweeps every call, and runs the
100-run case (``--runs 100 --middle``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import cast

import pytest

from awsworld.local import LocalAWS, MotoServer

from . import limited, reference
from .harness import MODES, Fault, Mode, chaos_environment, new_executor
from .limits_trial import report, run_trial, trials
from .moto_process import MotoProcess

STRIDE = 160
"""k = 1, 161 over the clean trial's ~320 calls, in each mode: 6 trials, one round of ``PARALLEL``."""
SMALL = 6
PARALLEL = 6
STRANDED_ONCE: list[tuple[Mode, int]] = [("die-after", 33), ("die-before", 34)]
"""One run's trial, its step limit paused from the fault until the crashed delivery's step waits for it (or 12 s
pass): the delivery that ran the run's queued ``work`` step went on with the run and started ``leave`` inline,
then died (just after, or instead of, its next write). Its message comes back and must find ``work`` finished
before it asks the limit, and go on with the run as itself, owner of ``leave``. Once, it asked first, found no
free slot and waited; the limit's wake sent it again under a new message id, owner of nothing, and the run
stranded (2 of 84 trials of six runs; then 1 of 41 where the dead delivery was a slot's wake for a ``work`` step
its flow had run inline: ``python bench/chaos_limits.py --mode die-before --pause-on-fault``, k=118). If a change
moves these calls, find them again with ``python bench/chaos_limits.py --runs 1 --pause-on-fault --mode
die-after --mode die-before`` (the trials whose crashed step waited: ``_worker/step_limits.py``,
``ended_already``, reverted). The queued ``work`` step's message reads its run's pin before its body runs
(``_deployments/routing.py``, ``reads_step_pin``: one ``BatchGetItem``, call 23), which moved both by one."""

SECOND_MESSAGE: tuple[Mode, int] = ("die-before", 28)
"""One run's trial, its step limit paused from the fault, and the crashed invocation's ``work`` message sent
again under a new id (``resend_on_fault``): the delivery of the run's queued ``work`` step started it and died
before recording its end. The second message for that step, refused its start (``running-elsewhere``), gave the
step's slot back; the dead delivery's redelivery then found no slot, waited, and the limit's wake (a new id, owner
of nothing) was refused its start too while the dead attempt's lease ran: the run stranded, its step started by a
message gone (six runs: ``python bench/chaos_limits.py --k 150 --mode die-before --pause-on-fault``, 1 of 6 runs
in 1 of 41 trials; one run and the resend strand at k=25-27 in each mode, deterministically:
``_worker/step_runner.py``, ``attempt_step``'s give-back on ``running-elsewhere``, reverted). If a change moves
the call, find it again with ``python bench/chaos_limits.py --runs 1 --pause-on-fault --resend-on-fault`` (the
pin read of ``reads_step_pin`` moved it from 27 to 28).
(The sweep's next such strand, a transient error after a queued step's start whose delivery gave the slot back,
k=97 and k=259 raise with ``--pause-on-fault``, is ``tests/runtime/test_e2e_step_limits.py``'s
``test_an_attempt_that_fails_after_its_start_keeps_its_slot_for_its_redelivery``: one run does not reach it.)"""


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


@pytest.mark.timeout(600)
async def test_limited_runs_and_steps_under_a_fault_at_sampled_calls_in_each_mode(
        local: LocalAWS, executor: ThreadPoolExecutor) -> None:
    clean = await run_trial(local, executor, None, SMALL, 60)
    assert clean.ok, clean.problems
    assert clean.peaks[0] >= 1 and clean.peaks[1] >= 1
    assert "dynamodb.PutItem" in clean.calls  # (the pools' writes are among the handlers' calls)
    # The last sampled call stays STRIDE / 2 calls before the clean trial's end: a trial's count varies with timing
    # (its idle receives), so a fault sampled among the last few calls may find its trial ended first. A clean trial
    # of over 320 calls once gave k=321 too (with a stride of 80): 3 of its 15 trials did not fire (12 < 90%).
    faults = [Fault(k, mode) for k in range(1, len(clean.calls) + 1 - STRIDE // 2, STRIDE) for mode in MODES]
    results = await trials(local, executor, faults, SMALL, 60, PARALLEL)
    failed = [r for r in results if not r.ok]
    assert sum(r.fired for r in results) >= 0.9 * len(results)
    peaks = (max(r.peaks[0] for r in results), max(r.peaks[1] for r in results))
    print(f"LIMITS CHAOS: {len(results)} trials of {SMALL} runs over {len(clean.calls)} calls; peaks {peaks}; "
          f"{sum(r.crashes for r in results)} crashed invocations")
    assert not failed, f"{len(failed)} of {len(results)} trials failed:\n{report(failed)}"


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("mode", "k"), STRANDED_ONCE, ids=[f"{m}-{k}" for m, k in STRANDED_ONCE])
async def test_a_finished_steps_redelivery_goes_on_as_itself_without_waiting_for_its_limit(
        local: LocalAWS, executor: ThreadPoolExecutor, mode: Mode, k: int) -> None:
    result = await run_trial(local, executor, Fault(k, mode), 1, 60, pause_on_fault=True)
    assert result.fired and result.calls[k - 1] == "dynamodb.TransactWriteItems", result.calls[k - 1:k]
    assert not result.waited  # it came back, found its step finished and went on: it never waited for the limit
    assert result.ok, report([result])


@pytest.mark.timeout(300)
async def test_a_second_message_for_a_started_step_leaves_its_slot_to_the_redelivery_that_runs_it(
        local: LocalAWS, executor: ThreadPoolExecutor) -> None:
    mode, k = SECOND_MESSAGE
    result = await run_trial(local, executor, Fault(k, mode), 1, 60, pause_on_fault=True, resend_on_fault=True)
    assert result.fired and result.calls[k - 1] == "dynamodb.TransactWriteItems", result.calls[k - 1:k]
    assert not result.waited  # its slot was still its own: it never waited for the limit
    assert result.ok, report([result])
