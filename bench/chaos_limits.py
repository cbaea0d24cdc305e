"""The crash sweep on limits across runs (issue 35): one failure at every AWS call of a clean trial, in each mode.

A trial (``tests/chaos/limits_trial.py``) starts ``--runs`` runs of ``chaos.limited`` (limited to 3 at once, each
calling a step limited to 2 attempts at once across all runs) and drives them through the real Lambda flow
handler while call k of the handlers fails (``raise``: a transient error; ``die-before``: the process dies
instead of making it; ``die-after``: it lands, then the process dies). A clean trial's N calls fix the sweep: k =
1, 1 + every, ... <= N in each mode. Each failed trial is printed with its problems as it ends; the totals
follow (trials, stranded, failed otherwise, the peak run and step concurrency measured by the bodies, AWS calls),
and the exit code is 1 when any trial failed.

``tests/chaos/test_chaos_limits.py`` runs a sample of this sweep (every mode, a few k) and the trials that once
stranded a run; this script runs all of it, and the 100-run case (``--runs 100 --middle``: a fault in each mode at
the middle call of a clean 100-run trial).

Run: ``python bench/chaos_limits.py`` (``--every 11`` for a sample, ``--k 111 --mode die-before`` for one trial,
``--repeat 6`` to run each trial that many times: six runs at once make the calls' order vary a little, so a k
names a slightly different call from one trial to the next).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import cast

# The harness lives with the tests (the tests run it too); the handlers log and emit metrics to stdout as
# they do on Lambda, which would drown the table.
sys.path.insert(0, str(Path(__file__).absolute().parents[1] / "tests"))
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "CRITICAL")
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")

from awsworld.local import LocalAWS, MotoServer
from chaos import limited, reference
from chaos.harness import MODES, Fault, chaos_environment, new_executor
from chaos.limits_trial import LimitTrial, report, run_trial, trials
from chaos.moto_process import MotoProcess

SMALL_SECONDS = 60.0
LARGE_SECONDS = 600.0


def _summary(label: str, results: list[LimitTrial], wall: float) -> str:
    stranded = sum(1 for r in results if any("stranded" in p for p in r.problems))
    failed = sum(1 for r in results if not r.ok)
    peaks = (max((r.peaks[0] for r in results), default=0), max((r.peaks[1] for r in results), default=0))
    return (f"{label}: {len(results)} trials in {wall:.0f} s: {stranded} stranded, {failed - stranded} failed "
            f"otherwise, {sum(not r.fired for r in results)} whose fault did not fire; peak concurrency (runs, "
            f"steps) {peaks} of limits ({limited.RUN_LIMIT}, {limited.STEP_LIMIT}); "
            f"{sum(len(r.calls) for r in results)} AWS calls, {sum(r.crashes for r in results)} crashed "
            f"invocations; {sum(r.waited for r in results)} trials where the crashed step waited for its limit; "
            f"slowest trial {max((r.seconds for r in results), default=0.0):.1f} s")


async def sweep(args: argparse.Namespace) -> int:
    moto = MotoProcess().start()  # its own process: on the other core (see tests/chaos/moto_process.py)
    executor = new_executor(args.parallel)
    seconds = LARGE_SECONDS if args.runs > 20 else SMALL_SECONDS
    try:
        async with LocalAWS(dynamodb="moto", moto=cast(MotoServer, moto), initial_world=False) as local:
            clean = await run_trial(local, executor, None, args.runs, seconds)
            print(f"clean trial of {args.runs} runs: {'ok' if clean.ok else clean.problems} in {clean.seconds:.1f} s,"
                  f" {len(clean.calls)} AWS calls by the handlers, peaks {clean.peaks}", flush=True)
            if not clean.ok:
                return 1
            modes = args.mode or MODES
            if args.k:
                ks = args.k
            elif args.middle:
                ks = [len(clean.calls) // 2]
            else:
                ks = list(range(1, len(clean.calls) + 1, args.every))
            faults = [Fault(k, mode) for k in ks for mode in modes for _ in range(args.repeat)]
            print(f"{len(faults)} trials, {args.parallel} at a time", flush=True)
            started = time.monotonic()
            results = await trials(local, executor, faults, args.runs, seconds, args.parallel,
                                   on_result=lambda r: print(report([r]), flush=True) if not r.ok else None,
                                   pause_on_fault=args.pause_on_fault, resend_on_fault=args.resend_on_fault)
            wall = time.monotonic() - started
    finally:
        executor.shutdown(wait=False, cancel_futures=True)
        moto.stop()
    print(_summary(f"{args.runs} runs a trial", results, wall))
    return 1 if any(not r.ok for r in results) else 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=6, help="runs a trial (6; 100 for the large case)")
    parser.add_argument("--every", type=int, default=1, help="inject at every n-th call (1: all)")
    parser.add_argument("--k", type=int, action="append", help="only this call (repeatable)")
    parser.add_argument("--middle", action="store_true", help="only the middle call of the clean trial")
    parser.add_argument("--mode", action="append", choices=MODES, help="only this mode (repeatable)")
    parser.add_argument("--repeat", type=int, default=1, help="run each trial this many times")
    parser.add_argument("--pause-on-fault", action="store_true",
                        help="pause the step limit once the fault fired, until an attempt waits for it")
    parser.add_argument("--resend-on-fault", action="store_true",
                        help="send the crashed invocation's limited step messages again under new ids")
    parser.add_argument("--parallel", type=int, default=6, help="trials at a time")
    args = parser.parse_args(argv)
    with chaos_environment(AWSWORLD_MODULES=f"{reference.__name__},{limited.__name__}"):
        sys.exit(asyncio.run(sweep(args)))


if __name__ == "__main__":
    main()
