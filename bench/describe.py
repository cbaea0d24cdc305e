"""What ``awsworld describe RUN`` costs on big runs under ``awsworld dev``: a run of ``--steps`` steps (500) that
returns 1 MiB, and a run that started ``--children`` child runs (100).

Prints, for each, the World requests the command makes (its ``AWSWorld``'s ``stats.requests``, the command run in
this process as ``tests/cli/test_streams_cli.py`` runs one) with each request's time and response size, then the
median and minimum over ``--runs`` processes of the console script's wall and CPU time (``bench/cli_start.py``'s
``timed``), beside ``awsworld runs`` (a command's start and a listing). CPU time moves far less with load than wall
time; ``uptime``'s load is printed with the figures.

Where the time went (measured 2026-12-07 on 2 shared cores, load 3-8: wall figures are rough, CPU and counts are
not): the command's own CPU is about 0.65 s, of which 0.55 s is any World command's start (``runs`` costs the
same); the rest of the wall time was the embedded emulator answering. moto walked each DynamoDB attribute value of
an answer as a structure of ten members, about 0.1 ms a value, so the steps page of a 500-step run (500 items of 16
attributes, 310 KB) cost 0.55 s of CPU to answer and ``describe`` of the run took 1.6-2.0 s, where ``runs`` took
0.6 s. ``local/moto_speedups.py`` writes such values as they are: that Query costs 0.09 s, and ``describe`` 1.0 s
(load 3). The requests are a handful whatever the steps: 1 ``BatchGetItem`` and 1 ``GetItem`` for the run, 1
``Query`` per 1,000 steps, 1 ``GetItem`` and 1 ``Query`` per 1,000 events, 1 ``Query`` for the streams; and one
``runs.get`` per child, now 16 at a time (``client.client.run_views``), as the steps, the log and the streams are
read at once: they were read one after another (``tests/cli/test_describe_reads.py``). The emulator answers one
DynamoDB request at a time, so that gains little under ``dev``; on AWS each read is a round trip. The 1 MiB result
is never read.

Run: ``python bench/describe.py`` (about two minutes: the runs are made first), ``--runs 5`` for steadier medians.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from cli_start import awsworld_command, report, running_dev, timed

MODULE = "describe_bench"
WORKFLOWS = '''
from awsworld import step, workflow


@step(name="describebench.one")
async def one(i: int) -> int:
    return i


@workflow(name="describebench.steps")
async def steps(n: int) -> str:
    for i in range(n):
        await one(i)
    return "x" * (1 << 20)


@workflow(name="describebench.kid")
async def kid(i: int) -> int:
    return i


@workflow(name="describebench.parent")
async def parent(n: int) -> int:
    total = 0
    for i in range(n):
        total += await kid(i)
    return total
'''


def counted_describe(run_id: str, env: dict[str, str]) -> None:
    """``awsworld describe RUN`` in this process, printing each World request: its time and response size."""
    from awsworld import aws as aws_package
    from awsworld.aws import AWSConfig, AWSWorld, RequestStats
    from awsworld.cli import main as awsworld_cli

    stats = RequestStats()
    started = threading.local()
    log: list[tuple[str, float, int]] = []

    def before(model: Any, **_: Any) -> None:
        started.at = time.perf_counter()

    def after(model: Any, http_response: Any = None, **_: Any) -> None:
        log.append((model.name, time.perf_counter() - started.at, len(getattr(http_response, "content", b"") or b"")))

    class Counted(AWSWorld):  # the World the command opens (cli.output.remote), counting into `stats`
        def __init__(self, config: AWSConfig | None = None) -> None:
            super().__init__(config)
            self.clients.stats = stats
            self.clients.register_handler("before-call", before)
            self.clients.register_handler("after-call", after)

    saved = dict(os.environ)
    os.environ.update(env)
    os.environ.pop("AWSWORLD_MODULES", None)  # (the bench's module is in the scratch directory, not importable here)
    real = aws_package.AWSWorld
    aws_package.AWSWorld = Counted  # type: ignore[misc]
    try:
        cpu, wall = time.process_time(), time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            awsworld_cli(["describe", run_id])
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    finally:
        aws_package.AWSWorld = real  # type: ignore[misc]
        os.environ.clear()
        os.environ.update(saved)
    print(f"  in process: wall {wall * 1000:.0f} ms, cpu {cpu * 1000:.0f} ms; "
          f"{stats.total()} requests {dict(sorted(stats.requests.items()))}")
    by_kind: dict[str, list[tuple[float, int]]] = {}
    for name, seconds, size in log:
        by_kind.setdefault(name, []).append((seconds, size))
    for name, done in sorted(by_kind.items()):
        print(f"    {name:<13} x{len(done):<4} {sum(s for s, _ in done) * 1000:7.0f} ms summed, "
              f"slowest {max(s for s, _ in done) * 1000:5.0f} ms, {sum(n for _, n in done) / 1024:7.0f} KiB")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="processes per command (median and minimum)")
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--children", type=int, default=100)
    args = parser.parse_args(argv)
    awsworld = awsworld_command()
    scratch = Path(tempfile.mkdtemp(prefix="describe-bench-"))
    try:
        with running_dev(scratch, WORKFLOWS, MODULE) as env:
            made = {}
            for label, workflow, n in ((f"{args.steps} steps, 1 MiB result", "describebench.steps", args.steps),
                                       (f"{args.children} children", "describebench.parent", args.children)):
                started = subprocess.run([*awsworld, "start", workflow, f"[{n}]", "--wait", "600"], env=env,
                                         cwd=scratch, capture_output=True, text=True, check=True)
                made[label] = started.stdout.split()[0]
            print(f"{' '.join(awsworld)}; load {os.getloadavg()[0]:.2f}; median of {args.runs} processes")
            for label, run_id in made.items():
                print(f"describe of a run of {label}")
                counted_describe(run_id, env)
                report("describe RUN", *timed([*awsworld, "describe", run_id], env, scratch, args.runs))
            report("runs (for comparison)", *timed([*awsworld, "runs"], env, scratch, args.runs))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
