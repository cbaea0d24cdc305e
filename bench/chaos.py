"""The full crash sweep: one failure at every AWS call of a clean run of the reference workflow, in each mode.

A clean run of ``chaos.reference`` (serial steps, a gather, a retried step, a sleep, a webhook, a plain hook,
a stream) through the real Lambda flow and webhook handlers makes N AWS calls. For every k in 1..N and each
mode (``raise``: call k fails with a transient error; ``die-before``: the process dies instead of making it;
``die-after``: it lands, then the process dies), a trial injects that one failure and lets Lambda go on (see
``tests/chaos/harness.py``). The table gives, per trial, the call at k, the outcome and the seconds the run
took to complete; the totals follow, and the exit code is 1 when any trial did not complete cleanly.

Outcomes: ``completed`` (right output, each step completed once, nothing duplicated or left behind),
``stranded`` (not finished in time), ``wrong output`` (finished otherwise, or failed), ``duplicated`` (an event
recorded twice), ``leaked`` (a live dedup marker, an unreferenced S3 object, a queue left non-empty).

With ``--loss``, the "message lost" sweep instead (``tests/chaos/loss.py``): at every k the process dies after
the call and the records it held are lost (``lost``) or dead-lettered and redriven under new ids
(``redriven``); the run is then brought back by the watchdog's ticks (``watchdog``) or by an operator's wakes
(``operator``): four trials per k, in the loss environment (watch horizon and lease grace in seconds). The
table adds the records lost, the ticks or wakes sent, and the step bodies run beyond a clean run's (a lost
attempt's body may have run: at-least-once; a body running more often than its step was started fails the trial).

Run: ``python bench/chaos.py`` (``--every 3`` for CI's sample, ``--k 12 --mode die-after`` for one trial,
``--loss`` for the message-lost sweep, ``--handed`` for a run pinned to the older of two versions, each delivery
handed over to it by an Invoke (``tests/chaos/test_chaos.py`` samples it), ``-v`` for every problem of every
failed trial).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import cast

# The harness lives with the tests (the tests run it too); the handlers log and emit metrics to stdout as
# they do on Lambda, which would drown the table.
sys.path.insert(0, str(Path(__file__).absolute().parents[1] / "tests"))
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "CRITICAL")
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")

from awsworld.local import LocalAWS, MotoServer
from chaos.harness import (
    MODES,
    Trial,
    TrialResult,
    chaos_environment,
    faults_for,
    new_executor,
    run_trials,
)
from chaos.loss import LOSS_ENVIRONMENT, LOSS_MODES
from chaos.moto_process import MotoProcess


def _row(result: TrialResult) -> str:
    assert result.fault is not None
    call = result.call or "(not reached)"
    mode = result.fault.mode + (f"/{result.fault.recovery}" if result.fault.recovery else "")
    return (f"{result.fault.k:>4}  {call:<36} {mode:<18} {result.outcome:<13} "
            f"{result.seconds:6.1f}  {result.crashes:>7}  {result.lost:>4}  {result.wakes:>5}  "
            f"{result.extra_bodies:>5}")


async def sweep(args: argparse.Namespace) -> int:
    moto = MotoProcess().start()  # its own process: on the other core (see tests/chaos/moto_process.py)
    executor = new_executor(args.parallel)
    try:
        async with LocalAWS("moto", moto=cast(MotoServer, moto), initial_world=False) as local:
            clean = await Trial(local, executor, handed=args.handed).run()
            print(f"clean run: {clean.outcome} in {clean.seconds:.1f} s, {len(clean.calls)} AWS calls by the "
                  f"handlers, {clean.invocations} cold starts")
            if args.verbose:
                print("\n".join(f"{k:>4}  {call}" for k, call in enumerate(clean.calls, 1)))
            for problem in clean.problems:
                print(f"  {problem}")
            if not clean.ok:
                return 1
            modes = args.mode or (LOSS_MODES if args.loss else MODES)
            faults = faults_for(len(clean.calls), every=args.every, modes=modes)
            if args.k:
                faults = [f for f in faults_for(args.k, modes=modes) if f.k == args.k]
            print(f"\n{len(faults)} trials, {args.parallel} at a time\n")
            print(f"{'k':>4}  {'call at k':<36} {'mode':<18} {'outcome':<13} {'secs':>6}  crashes  lost  wakes  extra")
            started = time.monotonic()

            def show(result: TrialResult) -> None:
                if args.verbose or not result.ok:
                    print(_row(result), flush=True)
                    for problem in result.problems if args.verbose or not result.ok else []:
                        print(f"        {problem}", flush=True)

            results = await run_trials(local, faults, parallel=args.parallel, executor=executor, on_result=show,
                                       handed=args.handed)
            wall = time.monotonic() - started
    finally:
        executor.shutdown(wait=False, cancel_futures=True)
        moto.stop()

    print("\nall trials, in order of k:")
    for result in results:
        print(_row(result))
    outcomes = Counter(r.outcome for r in results)
    failed = [r for r in results if not r.ok]
    slowest = max((r.seconds for r in results if r.ok), default=0.0)
    print(f"\n{len(results)} trials in {wall:.0f} s ({args.parallel} at a time): "
          f"{outcomes['completed']} completed, {outcomes['stranded']} stranded, "
          f"{outcomes['duplicated']} duplicated, {outcomes['wrong output']} wrong output, "
          f"{outcomes['leaked']} leaked, {outcomes['harness error']} harness errors; "
          f"slowest completed trial {slowest:.1f} s")
    extra = [r.extra_bodies for r in results]
    print(f"step bodies run beyond a clean run's, in {sum(1 for e in extra if e > 0)} trials: "
          f"{sum(e for e in extra if e > 0)} in all, at most {max(extra, default=0)} in one trial; "
          f"records lost {sum(r.lost for r in results)} in {sum(1 for r in results if r.lost)} trials")
    print(f"at-most-once attempts cut off and recorded StepInterruptedError: {sum(r.interrupted for r in results)} "
          f"in {sum(1 for r in results if r.interrupted)} trials (its body never ran twice in one attempt: a trial "
          f"where it did fails as duplicated)")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--every", type=int, default=1, help="inject at every n-th call (1: all)")
    parser.add_argument("--k", type=int, help="only this call")
    parser.add_argument("--mode", action="append", choices=(*MODES, *LOSS_MODES),
                        help="only this mode (repeatable)")
    parser.add_argument("--loss", action="store_true", help="the message-lost sweep (lost and redriven modes)")
    parser.add_argument("--handed", action="store_true",
                        help="the run pinned to an older version, every delivery handed over to it (Invoke)")
    parser.add_argument("--parallel", type=int, default=8, help="trials at a time")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every trial as it ends")
    args = parser.parse_args(argv)
    if args.mode and set(args.mode) & set(LOSS_MODES):
        args.loss = True
    with chaos_environment(**(LOSS_ENVIRONMENT if args.loss else {})):
        sys.exit(asyncio.run(sweep(args)))


if __name__ == "__main__":
    main()
