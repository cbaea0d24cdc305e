"""What a durable step costs end to end, through the AWS World on the embedded emulator.

For serial runs of 10, 100 and 1,000 steps: flow deliveries, AWS requests (TransactWriteItems and reads named
apart: a serial inline step costs one transaction, its outcome riding in the write that declares the next step,
where it took two) and billable DynamoDB units per step, and client-side CPU per step (the event-loop thread:
runtime + SDK, not the emulator), which should stay flat as N grows because one delivery keeps its replay alive
instead of replaying from the start per step.
For a 256-way fan-out: SendMessageBatch calls, and run reads (``runs.get``) made by step messages (target 0).

Billable writes: items written by transactions are counted on the client; DynamoDB bills a transactional write
at least 2 units per item (each item here is under 1 KiB). "Reported" units are DynamoDB Local's
``ReturnConsumedCapacity``, which under-reports transactions. Run: ``python bench/runtime.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import time
from typing import Any

from awsworld import step, workflow
from awsworld.aws import RequestStats
from awsworld.local import LocalAWS


@step
async def bench_add(i: int) -> int:
    return i + 1


@workflow(name="bench.serial")
async def serial(n: int) -> int:
    total = 0
    for i in range(n):
        total += await bench_add(i)
    return total


@workflow(name="bench.fanout")
async def fanout(n: int) -> int:
    return sum(await asyncio.gather(*(bench_add(i) for i in range(n))))


async def _idle(local: LocalAWS) -> None:
    """Wait until the poller has nothing in flight for a moment."""
    assert local.poller is not None
    quiet = 0
    while quiet < 3:
        await asyncio.sleep(0.1)
        quiet = quiet + 1 if not local.poller._inflight else 0


def _per_step(stats: RequestStats, n: int) -> str:
    by_service: dict[str, int] = {}
    for key, count in stats.requests.items():
        service = key.split(".", 1)[0]
        by_service[service] = by_service.get(service, 0) + count
    services = ", ".join(f"{s} {c / n:.2f}" for s, c in sorted(by_service.items()))
    transactions = stats.requests["dynamodb.TransactWriteItems"]
    reads = stats.requests["dynamodb.GetItem"] + stats.requests["dynamodb.BatchGetItem"]
    return (f"{stats.total() / n:6.2f} req/step ({services}; {transactions / n:.2f} TransactWriteItems, "
            f"{reads / n:.2f} GetItem/BatchGetItem); {stats.transaction_items / n:5.2f} items written "
            f"(>= {2 * stats.transaction_items / n:5.2f} WRU), reported {stats.write_units / n:5.2f} WRU, "
            f"{stats.read_units / n:5.2f} RRU per step")


async def serial_runs(local: LocalAWS, sizes: tuple[int, ...]) -> None:
    assert local.poller is not None and local.client is not None
    print("serial runs (one step after another)")
    for n in sizes:
        await _idle(local)
        deliveries = local.poller.deliveries
        before = local.world.stats.snapshot()
        cpu = time.thread_time()
        wall = time.monotonic()
        run = await local.client.start(serial, n)
        assert await run.result(timeout=600) == sum(range(1, n + 1))
        await _idle(local)
        wall = time.monotonic() - wall
        cpu = time.thread_time() - cpu
        used = local.world.stats.snapshot() - before
        print(f"  N={n:>5}: {local.poller.deliveries - deliveries} flow deliveries, {_per_step(used, n)}; "
              f"client CPU {cpu / n * 1000:.2f} ms/step; wall {wall / n * 1000:.1f} ms/step")


async def fan_out(local: LocalAWS, n: int) -> None:
    assert local.poller is not None and local.client is not None
    world: Any = local.world
    reads = {"runs.get": 0}
    original = world.runs.get
    in_delivery: contextvars.ContextVar[bool] = contextvars.ContextVar("in_delivery", default=False)
    execute = local.poller.worker.execute

    async def counted(*args: Any, **kwargs: Any) -> Any:
        if in_delivery.get():
            reads["runs.get"] += 1
        return await original(*args, **kwargs)

    async def marked(*args: Any, **kwargs: Any) -> Any:
        in_delivery.set(True)
        return await execute(*args, **kwargs)

    world.runs.get = counted
    local.poller.worker.execute = marked  # type: ignore[method-assign]
    await _idle(local)
    deliveries = local.poller.deliveries
    before = world.stats.snapshot()
    wall = time.monotonic()
    run = await local.client.start(fanout, n)
    assert await run.result(timeout=600) == sum(range(1, n + 1))
    await _idle(local)
    wall = time.monotonic() - wall
    used = world.stats.snapshot() - before
    world.runs.get = original
    local.poller.worker.execute = execute  # type: ignore[method-assign]
    print(f"\n{n}-way fan-out: {local.poller.deliveries - deliveries} deliveries, "
          f"{used.requests['sqs.SendMessageBatch']} SendMessageBatch calls, "
          f"{reads['runs.get']} runs.get made by deliveries, {_per_step(used, n)}; wall {wall:.1f} s")


async def main_async(sizes: tuple[int, ...], fan: int) -> None:
    async with LocalAWS(dynamodb="dynamodb-local") as local:
        await serial_runs(local, sizes)
        await fan_out(local, fan)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--fan-out", type=int, default=256)
    args = parser.parse_args(argv)
    asyncio.run(main_async(tuple(int(s) for s in args.sizes.split(",")), args.fan_out))


if __name__ == "__main__":
    main()
