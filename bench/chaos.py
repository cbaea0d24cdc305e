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

Run: ``python bench/chaos.py`` (``--every 3`` for CI's sample, ``--k 12 --mode die-after`` for one trial,
``-v`` for every problem of every failed trial).
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
    Fault,
    Trial,
    TrialResult,
    chaos_environment,
    faults_for,
    new_executor,
    run_trials,
)
from chaos.moto_process import MotoProcess


def _row(result: TrialResult) -> str:
    assert result.fault is not None
    call = result.call or "(not reached)"
    return (f"{result.fault.k:>4}  {call:<36} {result.fault.mode:<11} {result.outcome:<13} "
            f"{result.seconds:6.1f}  {result.crashes:>3}")


async def sweep(args: argparse.Namespace) -> int:
    moto = MotoProcess().start()  # its own process: on the other core (see tests/chaos/moto_process.py)
    executor = new_executor(args.parallel)
    try:
        async with LocalAWS("moto", moto=cast(MotoServer, moto), initial_world=False) as local:
            clean = await Trial(local, executor).run()
            print(f"clean run: {clean.outcome} in {clean.seconds:.1f} s, {len(clean.calls)} AWS calls by the "
                  f"handlers, {clean.invocations} cold starts")
            if args.verbose:
                print("\n".join(f"{k:>4}  {call}" for k, call in enumerate(clean.calls, 1)))
            for problem in clean.problems:
                print(f"  {problem}")
            if not clean.ok:
                return 1
            if args.k:
                faults = [Fault(args.k, mode) for mode in (args.mode or MODES)]
            else:
                faults = faults_for(len(clean.calls), every=args.every, modes=args.mode or MODES)
            print(f"\n{len(faults)} trials, {args.parallel} at a time\n")
            print(f"{'k':>4}  {'call at k':<36} {'mode':<11} {'outcome':<13} {'secs':>6}  crashes")
            started = time.monotonic()

            def show(result: TrialResult) -> None:
                if args.verbose or not result.ok:
                    print(_row(result), flush=True)
                    for problem in result.problems if args.verbose or not result.ok else []:
                        print(f"        {problem}", flush=True)

            results = await run_trials(local, faults, parallel=args.parallel, executor=executor, on_result=show)
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
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--every", type=int, default=1, help="inject at every n-th call (1: all)")
    parser.add_argument("--k", type=int, help="only this call")
    parser.add_argument("--mode", action="append", choices=MODES, help="only this mode (repeatable)")
    parser.add_argument("--parallel", type=int, default=8, help="trials at a time")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every trial as it ends")
    args = parser.parse_args(argv)
    with chaos_environment():
        sys.exit(asyncio.run(sweep(args)))


if __name__ == "__main__":
    main()
