"""CPU per step and per run start on the embedded emulator (moto's server in-process), as ``awsworld dev`` runs.

Everything runs in one process, as under ``dev``: the client, the poller and its deliveries, and moto's HTTP
server (a thread per request). The figure is the process's CPU time (``time.process_time``: every thread), not
wall time. Workloads, each on a fresh ``LocalAWS`` (moto for DynamoDB, SQS and S3) after a warm-up run:

1. run starts: ``--starts`` (100) one-step runs started one after the other, then each awaited; CPU per run
   (the start, the delivery of its step, its end);
2. serial: one run of ``--serial`` (100) steps in sequence; CPU per step;
3. fan-out: one run of ``--fanout`` (200) steps at once (``asyncio.gather``); CPU per step.

Every run's result is checked. Each workload is the best of ``--repeat`` (2); ``--requests`` also prints the
World's requests per unit by operation. ``--profile WORKLOAD`` prints instead a cProfile of one run of that
workload over every thread (the event loop's, the client pool's, moto's request threads), each profiler timed by
its thread's CPU clock (``time.thread_time``), so time spent waiting (a long poll, the DynamoDB lock) is not
counted; the profiler's own overhead still inflates functions that make many small calls.

To compare two trees, put the other tree's ``src`` first on ``PYTHONPATH`` and run them one after the other,
twice, interleaved: on a shared machine CPU time per unit moves by 10-20 % between runs of the same tree.

Measured (python 3.11, moto 5.2.6, 2 cores shared with other work; best of interleaved runs of the three trees):

    ms CPU per ...                          before   moto_speedups   + loopback User-Agent
    run start (60, best of 3, load 3-6)     128      108             103
    serial step (100, best of 3)            17.7     11.2            9.9
    fan-out step (200, best of 2, load 2.5) 52       47              46
    fan-out step (200, load 7-11)           61-63    42-47           42-47

The fan-out gains most on a loaded machine: the queue is longer there, and a receive cost moto time in the queue's
length for every message it returned (``moto_speedups``'s retention check).

Where the CPU of a run start goes (``--profile`` and per-function thread-CPU wrappers, after the changes): moto's
server about 55 % (its DynamoDB actions 28 %: UpdateExpression validation 6 %, condition parsing 5 %, the
AST copy 3 %; request set-up 7 %, response serialization 6 %; the rest HTTP and Flask), the client's botocore
calls about 25 % (signing, request building, urllib3 and http.client), the event loop (awsworld and its codec)
the rest. A run start is 19 requests (5 TransactWriteItems, 4 BatchGetItem, 3 Query, ...), a serial step 1.3,
a fan-out step 5.6.

Run: ``PYTHONPATH=src python bench/emulator_cpu.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from awsworld import step, workflow
from awsworld.local import LocalAWS


@step
async def bench_emu_add(value: int) -> int:
    return value + 1


@workflow(name="bench.emu.one")
async def one(value: int) -> int:
    return await bench_emu_add(value)


@workflow(name="bench.emu.serial")
async def serial(n: int) -> int:
    value = 0
    for _ in range(n):
        value = await bench_emu_add(value)
    return value


@workflow(name="bench.emu.fanout")
async def fanout(n: int) -> int:
    return sum(await asyncio.gather(*(bench_emu_add(i) for i in range(n))))


@dataclass(frozen=True)
class Figure:
    label: str
    unit: str
    units: int
    cpu: float
    wall: float
    requests: dict[str, int]

    def line(self) -> str:
        return (f"{self.label:<28} {self.cpu * 1000 / self.units:8.2f} ms CPU/{self.unit}"
                f"  {self.wall * 1000 / self.units:8.2f} ms wall/{self.unit}"
                f"  {sum(self.requests.values()) / self.units:6.1f} requests/{self.unit}"
                f"  ({self.units} {self.unit}s, {self.cpu:.2f} s CPU)")

    def breakdown(self) -> str:
        return "    " + ", ".join(f"{name} {count / self.units:.1f}" for name, count in
                                  sorted(self.requests.items(), key=lambda entry: -entry[1]))


async def starts(local: LocalAWS, n: int) -> None:
    assert local.client is not None
    runs = [await local.client.start(one, i) for i in range(n)]
    for i, run in enumerate(runs):
        assert await run.result(timeout=600) == i + 1


async def serial_run(local: LocalAWS, n: int) -> None:
    assert local.client is not None
    assert await (await local.client.start(serial, n)).result(timeout=600) == n


async def fanout_run(local: LocalAWS, n: int) -> None:
    assert local.client is not None
    assert await (await local.client.start(fanout, n)).result(timeout=600) == n * (n + 1) // 2


async def measure(label: str, unit: str, units: int, body: Callable[[LocalAWS], Awaitable[None]],
                  repeat: int) -> Figure:
    best: Figure | None = None
    async with LocalAWS() as local:
        await starts(local, 2)  # warm-up: clients, service models, moto's backends
        for _ in range(repeat):
            before = local.world.stats.snapshot()
            cpu, wall = time.process_time(), time.perf_counter()
            await body(local)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            requests = dict((local.world.stats.snapshot() - before).requests)
            figure = Figure(label, unit, units, cpu, wall, requests)
            if best is None or figure.cpu < best.cpu:
                best = figure
    assert best is not None
    return best


async def profile(body: Callable[[LocalAWS], Awaitable[None]], limit: int) -> str:
    """A cProfile of ``body`` over every thread: the event loop's and each of moto's request threads (a new one
    per connection), each with its own profiler, merged."""
    profilers: list[cProfile.Profile] = []

    def start_thread_profiler(*_: object) -> None:
        profiler = cProfile.Profile(time.thread_time)
        profilers.append(profiler)
        profiler.enable()  # replaces this hook on this thread

    async with LocalAWS() as local:
        await starts(local, 2)
        threading.setprofile(start_thread_profiler)
        main_profiler = cProfile.Profile(time.thread_time)
        main_profiler.enable()
        try:
            await body(local)
        finally:
            main_profiler.disable()
            threading.setprofile(None)  # type: ignore[arg-type]
    out = io.StringIO()
    stats = pstats.Stats(main_profiler, stream=out)
    for profiler in profilers:
        profiler.disable()
        stats.add(profiler)
    stats.sort_stats("cumulative").print_stats(limit)
    stats.sort_stats("tottime").print_stats(limit)
    return out.getvalue()


async def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=100)
    parser.add_argument("--serial", type=int, default=100)
    parser.add_argument("--fanout", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--profile", choices=("starts", "serial", "fanout"))
    parser.add_argument("--limit", type=int, default=60, help="rows of the profile")
    parser.add_argument("--requests", action="store_true", help="print the requests per unit by operation")
    parser.add_argument("--only", choices=("starts", "serial", "fanout"), action="append",
                        help="run only this workload (repeatable)")
    args = parser.parse_args(argv)
    workloads: dict[str, tuple[str, str, int, Callable[[LocalAWS], Awaitable[None]]]] = {
        "starts": ("run starts (one step each)", "run", args.starts, lambda local: starts(local, args.starts)),
        "serial": (f"serial {args.serial}", "step", args.serial, lambda local: serial_run(local, args.serial)),
        "fanout": (f"fan-out {args.fanout}", "step", args.fanout, lambda local: fanout_run(local, args.fanout)),
    }
    if args.profile:
        print(await profile(workloads[args.profile][3], args.limit))
        return
    print(f"python {sys.version.split()[0]}; CPU = process time, every thread")
    for key, (label, unit, units, body) in workloads.items():
        if args.only and key not in args.only:
            continue
        figure = await measure(label, unit, units, body, args.repeat)
        print(figure.line(), flush=True)
        if args.requests:
            print(figure.breakdown(), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
