"""awsworld's test environment side by side with the AWS Lambda durable functions testing runner.

Both are what a developer runs in a unit test: a workflow executed in memory, in-process, with a clock that
skips over sleeps and retry back-offs. The same three workloads run on each:

1. serial N (10, 100, 1,000): one trivial step (input + 1) called N times in sequence; ms per step = wall time
   from start to result / N;
2. 64-way fan-out: 64 trivial steps at once (awsworld: ``asyncio.gather``; durable: ``context.map``), summed;
   and a bounded map (awsworld only): ``map(add, range(200), max_concurrency=20)``, where every item's end wakes
   the workflow to start the next item;
3. sleep + retries: a 30-day sleep, then a step that fails on its first two attempts and succeeds on the third,
   retried up to 3 times 1 minute apart (awsworld: ``@step(max_retries=3, retry_delay=60)``, the attempt read
   from ``step_metadata()``; durable: a fixed 60 s retry strategy, the attempt from its ``StepContext``).

awsworld side: a fresh ``WorkflowTestEnv`` per run (its MemoryWorld, virtual clock and in-process driver),
timed from ``client.start`` to ``run.result()`` returning; the env's delivery count and how far its clock moved
are read after. Durable side: ``bench/durable_runner_workloads.py`` run in its own venv
(``bench/.venv-durable``, created on demand: awsworld does not depend on the durable SDK), a fresh
``DurableFunctionTestRunner`` per run, timed from ``run_async`` to ``wait_for_result``. Every run's result is
checked on both sides. The two sides run one after the other, never at once, so they do not share the CPU.
Each workload is the best of ``--repeat`` (3) runs; serial runs of ``--large`` (10,000) steps or more run once.

Run: ``python bench/testing.py`` (``--no-durable`` skips the durable side; ``--profile`` prints a cProfile of
awsworld's largest serial run).

``python bench/testing.py --instructions`` prints instead the figure that compares two trees on a busy machine,
where wall time does not: instructions per step of the serial workload on the in-memory World, counted by
valgrind's cachegrind (``apt-get install valgrind``). It runs the workload once with 1,000 steps and once with 0,
each in a fresh process under cachegrind (``--serial-once N``, ``PYTHONHASHSEED=0``), and divides the
difference by 1,000, so start-up and imports cancel out. To measure another tree with this script, put that
tree's ``src`` first on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import json
import os
import pstats
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from awsworld import batch_map, sleep, step, step_metadata, workflow
from awsworld.testing import WorkflowTestEnv
from awsworld.world.entities import Step
from awsworld.world.events import Event

BENCH = Path(__file__).resolve().parent
DURABLE_VENV = BENCH / ".venv-durable"
DURABLE_SCRIPT = BENCH / "durable_runner_workloads.py"
DURABLE_PACKAGE = "aws-durable-execution-sdk-python-testing"

SLEEP = timedelta(days=30)
RETRY_DELAY = 60
RETRIES = 3
FAILURES = 2  # the flaky step fails on attempts 1 and 2 and succeeds on 3

# Issue 11's targets for the in-memory environment.
TARGET_MS_PER_STEP = 1.0  # serial 1,000
TARGET_FANOUT_SECONDS = 0.13  # 64-way fan-out
TARGET_SLEEP_RETRIES_SECONDS = 1.0  # strictly less than


@step
async def bench_testing_add(value: int) -> int:
    return value + 1


@step(max_retries=RETRIES, retry_delay=RETRY_DELAY)
async def bench_testing_flaky(value: int) -> dict[str, int]:
    """Fails on purpose until its third attempt. The attempt comes from the step's own metadata, not a global
    counter, so the figure also proves the retries were real deliveries that recorded their attempt."""
    attempt = step_metadata().attempt
    if attempt <= FAILURES:
        raise RuntimeError(f"attempt {attempt} fails on purpose")
    return {"x": value + 1, "attempt": attempt}


@workflow(name="bench.testing.serial")
async def serial(n: int) -> int:
    value = 0
    for _ in range(n):
        value = await bench_testing_add(value)
    return value


@workflow(name="bench.testing.fanout")
async def fanout(n: int) -> int:
    return sum(await asyncio.gather(*(bench_testing_add(i) for i in range(n))))


@workflow(name="bench.testing.bounded_map")
async def bounded_map(n: int, limit: int) -> int:
    return sum((await batch_map(bench_testing_add, range(n), max_concurrency=limit)).values())


@workflow(name="bench.testing.sleep_retries")
async def sleep_then_retries(value: int) -> dict[str, int]:
    await sleep(SLEEP)
    return await bench_testing_flaky(value)


# -- workloads -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """One row of the table. ``key`` names it in the durable runner's JSON too; ``steps`` > 0 reports ms per
    step (serial), otherwise wall seconds."""

    key: str
    label: str
    workflow: Callable[..., Coroutine[Any, Any, Any]]
    args: tuple[Any, ...]
    expected: Any
    repeat: int
    steps: int = 0

    def figure(self, seconds: float) -> str:
        return f"{seconds * 1000 / self.steps:.3f} ms/step" if self.steps else f"{seconds:.3f} s"


def workloads(sizes: Sequence[int] = (10, 100, 1000), width: int = 64, repeat: int = 3,
              large: int = 10_000, bounded: tuple[int, int] = (200, 20)) -> list[Workload]:
    rows = [Workload(f"serial-{n}", f"serial {n:,}", serial, (n,), n, 1 if n >= large else repeat, steps=n)
            for n in sizes]
    rows.append(Workload(f"fanout-{width}", f"{width}-way fan-out", fanout, (width,), sum(range(1, width + 1)),
                         repeat))
    items, limit = bounded
    rows.append(Workload(f"map-{items}-{limit}", f"map of {items} at max_concurrency {limit}", bounded_map,
                         (items, limit), sum(range(1, items + 1)), repeat))
    rows.append(Workload("sleep-retries", "sleep 30 d + 2 failed attempts",
                         sleep_then_retries, (1,), {"x": 2, "attempt": FAILURES + 1}, repeat))
    return rows


@dataclass
class Sample:
    """One awsworld run: wall seconds from start to result, what it returned, how many deliveries the env
    ran, how many events they read from the World (``events.list``: a replay from the run's first event reads
    the whole log again), how far the env's clock moved, and the run's log and steps (read after the clock
    stopped)."""

    wall: float
    cpu: float  # this process's CPU seconds over the same span: less sensitive to a busy machine than wall
    result: Any
    deliveries: int
    virtual: timedelta
    events: list[Event]
    steps: list[Step]
    events_read: int = 0


@dataclass
class Figure:
    workload: Workload
    samples: list[Sample] = field(default_factory=list)

    @property
    def best(self) -> Sample:
        return min(self.samples, key=lambda sample: sample.wall)


async def run_once(workload: Workload, *, profile: cProfile.Profile | None = None) -> Sample:
    """One run in a fresh ``WorkflowTestEnv``; only ``start`` to ``result`` is timed (and profiled)."""
    gc.collect()
    async with WorkflowTestEnv() as env:
        read = [0]
        listing = env.world.events.list

        async def counted(*args: Any, **kwargs: Any) -> Any:
            page = await listing(*args, **kwargs)
            read[0] += len(page.data)
            return page

        env.world.events.list = counted  # (the run's own reads below are not deliveries': read[0] is taken first)
        began = env.now()
        if profile is not None:
            profile.enable()
        started, cpu_started = time.perf_counter(), time.process_time()
        run = await env.client.start(workload.workflow, *workload.args)
        result = await run.result(timeout=600)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        if profile is not None:
            profile.disable()
        virtual = env.now() - began
        await env.idle()
        events_read = read[0]
        events, steps = await run.events(), await run.steps()
        deliveries = env.deliveries
    if result != workload.expected:
        raise AssertionError(f"{workload.key}: got {result!r}, expected {workload.expected!r}")
    return Sample(wall, cpu, result, deliveries, virtual, events, steps, events_read)


async def measure(workload: Workload) -> Figure:
    figure = Figure(workload)
    for _ in range(workload.repeat):
        figure.samples.append(await run_once(workload))
    return figure


async def measure_awsworld(rows: Sequence[Workload]) -> dict[str, Figure]:
    return {workload.key: await measure(workload) for workload in rows}


async def profile_serial(n: int, top: int = 30) -> str:
    """cProfile of one serial run of ``n`` steps (start to result), by internal time and by cumulative time."""
    profile = cProfile.Profile()
    # (under cProfile, whose hook is not a Python callable, the determinism guard leaves the profiler running
    # and its refusals are off: see awsworld/_engine/determinism.py)
    sample = await run_once(workloads((n,), repeat=1)[0], profile=profile)
    out = io.StringIO()
    out.write(f"cProfile of awsworld serial {n:,} (start to result, {sample.wall:.2f} s with the profiler on, "
              "determinism guard off)\n")
    stats = pstats.Stats(profile, stream=out).strip_dirs()
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


# -- the durable side ------------------------------------------------------------------------------------


def durable_python() -> Path:
    """The durable SDK's venv, created and installed on first use (``pip install`` of the testing package,
    which pulls the SDK); later runs reuse it."""
    python = DURABLE_VENV / "bin" / "python"
    if not python.exists():
        print(f"creating {DURABLE_VENV.relative_to(BENCH.parent)} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(DURABLE_VENV)], check=True)
    probe = subprocess.run([str(python), "-c", "import aws_durable_execution_sdk_python_testing"],
                           capture_output=True)
    if probe.returncode != 0:
        print(f"installing {DURABLE_PACKAGE} into it ...", file=sys.stderr)
        subprocess.run([str(python), "-m", "pip", "install", "-q", DURABLE_PACKAGE], check=True)
    return python


def measure_durable(sizes: Sequence[int], width: int, repeat: int, large: int) -> dict[str, Any]:
    """The durable runner's figures as its script prints them, or ``{"error": why}`` for every cell."""
    try:
        python = durable_python()
    except (OSError, subprocess.CalledProcessError) as error:
        return {"error": f"no durable venv: {error}"}
    command = [str(python), str(DURABLE_SCRIPT), "--sizes", ",".join(map(str, sizes)), "--fanout", str(width),
               "--repeat", str(repeat), "--large", str(large)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"runner script failed (exit {done.returncode}): {tail}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- the table -------------------------------------------------------------------------------------------


def _durable_cell(workload: Workload, durable: dict[str, Any] | None) -> tuple[str, float | None, str]:
    """(cell, seconds or None, invocations) for one workload from the durable JSON."""
    if durable is None:
        return "skipped (--no-durable)", None, "-"
    if "error" in durable:
        return durable["error"], None, "-"
    figures = durable["workloads"].get(workload.key)
    if figures is None:
        return "not run", None, "-"
    if "error" in figures:
        return f"cannot: {figures['error']}", None, "-"
    return workload.figure(figures["seconds"]), figures["seconds"], str(figures["invocations"])


def report(rows: Sequence[Workload], figures: dict[str, Figure], durable: dict[str, Any] | None) -> str:
    header = ("workload", "awsworld WorkflowTestEnv", "Lambda durable functions testing runner",
              "awsworld / durable", "awsworld deliveries", "events read / in log", "durable invocations",
              "virtual time")
    table: list[tuple[str, ...]] = [header]
    for workload in rows:
        best = figures[workload.key].best
        cell, seconds, invocations = _durable_cell(workload, durable)
        ratio = f"{best.wall / seconds:.2f}x" if seconds else "-"
        virtual = str(best.virtual).split(".")[0] if best.virtual >= timedelta(minutes=1) else "-"
        table.append((workload.label, workload.figure(best.wall), cell, ratio, str(best.deliveries),
                      f"{best.events_read:,} / {len(best.events):,}", invocations, virtual))
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = [" | ".join(value.ljust(width) for value, width in zip(row, widths, strict=True)).rstrip()
             for row in table]
    lines.insert(1, "-+-".join("-" * width for width in widths))
    most = max(w.repeat for w in rows)
    once = [w.label for w in rows if w.repeat == 1]
    lines.append("")
    lines.append((f"best of {most} runs per workload" + (f" ({', '.join(once)}: one run)" if once else "")
                  if most > 1 else "one run per workload")
                 + "; each run in a fresh env / runner; wall time from start to result")
    if durable is not None and "versions" in durable:
        lines.append("durable: " + ", ".join(f"{name} {v}" for name, v in durable["versions"].items())
                     + f", Python {durable['python']}; awsworld: Python {sys.version.split()[0]}")
    lines.append("")
    lines.append("issue 11 targets (awsworld, in memory):")
    lines.extend(targets(rows, figures))
    return "\n".join(lines)


def targets(rows: Sequence[Workload], figures: dict[str, Figure]) -> list[str]:
    def line(label: str, key: str, check: Callable[[float], bool], show: Callable[[float], str]) -> str:
        figure = figures.get(key)
        if figure is None:
            return f"  {label}: not measured"
        best = figure.best
        return (f"  {label}: {show(best.wall)} -> {'met' if check(best.wall) else 'MISSED'} "
                f"(CPU of that run: {show(best.cpu)})")

    width = next((w.args[0] for w in rows if w.key.startswith("fanout-")), 64)
    return [
        line(f"serial 1,000 <= {TARGET_MS_PER_STEP} ms/step", "serial-1000",
             lambda s: s * 1000 / 1000 <= TARGET_MS_PER_STEP, lambda s: f"{s:.3f} ms/step"),
        line(f"fan-out ({width}) <= {TARGET_FANOUT_SECONDS} s", f"fanout-{width}",
             lambda s: s <= TARGET_FANOUT_SECONDS, lambda s: f"{s:.3f} s"),
        line(f"sleep + retries < {TARGET_SLEEP_RETRIES_SECONDS} s", "sleep-retries",
             lambda s: s < TARGET_SLEEP_RETRIES_SECONDS, lambda s: f"{s:.3f} s"),
    ]


INSTRUCTION_STEPS = 1000
_SUMMARY = re.compile(r"^summary:\s+(\d+)", re.M)


def serial_once(steps: int) -> None:
    """The serial workload run once, and nothing else: what ``--instructions`` counts.

    The coroutine handed to ``asyncio.run`` returns None, not the ``Sample``: on Python 3.11, ``asyncio.run``
    ends by looking its SIGINT handler up as an enum, and the ValueError that lookup raises and swallows formats
    the main task's repr, result included, which for a ``Sample`` is every event and step of the run (a tenth of
    the figure, and none of it awsworld's)."""
    rows = workloads([steps], repeat=1)

    async def run_and_drop() -> None:
        await run_once(rows[0])

    asyncio.run(run_and_drop())


def instructions(steps: int) -> int:
    """Instructions (cachegrind's ``Ir``) of a fresh process running ``serial_once(steps)``."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "cachegrind.out"
        subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}",
                        sys.executable, __file__, "--serial-once", str(steps)],
                       check=True, capture_output=True, env={**os.environ, "PYTHONHASHSEED": "0"})
        found = _SUMMARY.search(out.read_text())
    if found is None:
        raise RuntimeError(f"no summary line in cachegrind's output for {steps} steps")
    return int(found.group(1))


def instructions_per_step(steps: int = INSTRUCTION_STEPS) -> float:
    return (instructions(steps) - instructions(0)) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,100,1000", help="serial workload sizes, comma separated")
    parser.add_argument("--fanout", type=int, default=64, help="fan-out width")
    parser.add_argument("--map", default="200,20", help="the bounded map's items and max_concurrency")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs for the small workloads")
    parser.add_argument("--large", type=int, default=10_000, help="serial runs of at least this many steps run once")
    parser.add_argument("--no-durable", action="store_true", help="skip the durable functions runner")
    parser.add_argument("--profile", action="store_true", help="cProfile awsworld's largest serial run")
    parser.add_argument("--instructions", action="store_true",
                        help="only print instructions per step of serial 1,000 under valgrind (cachegrind)")
    parser.add_argument("--serial-once", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serial_once is not None:
        serial_once(args.serial_once)
        return
    if args.instructions:
        import awsworld

        print(f"{instructions_per_step():,.0f} instructions per step (serial {INSTRUCTION_STEPS:,}, in-memory World, "
              f"awsworld from {Path(awsworld.__file__).parent})")
        return
    sizes = [int(size) for size in args.sizes.split(",") if size]
    items, limit = (int(part) for part in args.map.split(","))
    rows = workloads(sizes, args.fanout, args.repeat, args.large, (items, limit))

    figures = asyncio.run(measure_awsworld(rows))
    durable = None if args.no_durable else measure_durable(sizes, args.fanout, args.repeat, args.large)
    print(report(rows, figures, durable))
    if args.profile and sizes:
        print()
        print(asyncio.run(profile_serial(max(sizes))))


if __name__ == "__main__":
    main()
