"""How fast a stream moves and what a live reader costs: ``python bench/stream_throughput.py`` (about a minute).

A step's writer (``get_writable``, run as the runtime runs it: ``StepContext.run``) writes while a live reader
(``streams.get``, what ``Run.stream`` and ``awsworld streams --follow`` read with) reads the same stream from
another ``AWSWorld`` on the same table and bucket, as a client in another process does. Printed per workload:
chunks and bytes per second written (the step's body until its last chunk is durable) and read (from the first
write to the reader's last chunk), and AWS requests per 1,000 chunks, the writer's and the reader's apart,
counted on the client (``world.stats``: deterministic but for how many chunks share a write window, and how many
polls a reader makes while it waits). ``bench/queue_streams.py`` prices the writes; this adds the live reader
and real sizes (10,000 small chunks, 1 MiB chunks). Seconds are wall time on the embedded moto server, in one
process: relative figures, slower on a loaded machine (say so when you quote them).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass

from awsworld.authoring.step_context import StepContext, StepMetadata
from awsworld.aws import AWSWorld
from awsworld.local import LocalAWS


@dataclass
class Workload:
    label: str
    count: int
    size: int
    pause: float  # seconds between writes (a model's tokens come paced)


WORKLOADS = [
    Workload("10,000 x 100 B, a tight loop", 10_000, 100, 0.0),
    Workload("300 x 20 B tokens, 20 ms apart (50/s)", 300, 20, 0.02),
    Workload("100 x 20 B tokens, 60 ms apart (one per window)", 100, 20, 0.06),
    Workload("16 x 1 MiB", 16, 1 << 20, 0.0),
]


def _requests(spent: Counter[str], per: float) -> str:
    kinds = {"S3 PUT": ("s3.PutObject",), "S3 GET": ("s3.GetObject",),
             "DDB tx": ("dynamodb.TransactWriteItems",),
             "DDB read": ("dynamodb.GetItem", "dynamodb.Query", "dynamodb.BatchGetItem")}
    parts = [f"{name} {sum(spent[op] for op in ops) / per:>8.1f}" for name, ops in kinds.items()]
    other = sum(spent.values()) - sum(spent[op] for ops in kinds.values() for op in ops)
    return "  ".join(parts) + f"  other {other / per:>6.1f}"


async def measure(writer_world: AWSWorld, reader_world: AWSWorld, load: Workload) -> None:
    created = await writer_world.events.create(None, {"eventType": "run_created",
                                                      "eventData": {"workflowName": "bench.stream"}})
    assert created.run is not None
    run_id = created.run.run_id
    context = StepContext(writer_world, StepMetadata(run_id, "step_1", "bench.writer", 1, None))
    chunk = b"." * load.size
    written_at = read_at = 0.0
    received = 0

    async def body() -> None:
        out = context.writer("out")
        for _ in range(load.count):
            await out.write(chunk)
            if load.pause:
                await asyncio.sleep(load.pause)
        await out.close()

    async def read() -> None:
        nonlocal read_at, received
        async for got in reader_world.streams.get(run_id, "out"):
            received += len(got)
        read_at = time.perf_counter()

    writes, reads = writer_world.stats.snapshot(), reader_world.stats.snapshot()
    reader = asyncio.create_task(read())
    started = time.perf_counter()
    await context.run(body())
    written_at = time.perf_counter()
    await reader
    assert received == load.count * load.size, (received, load)
    wrote = (writer_world.stats.snapshot() - writes).requests
    was_read = (reader_world.stats.snapshot() - reads).requests
    per = load.count / 1000
    total = load.count * load.size
    for side, seconds in (("write", written_at - started), ("read", read_at - started)):
        print(f"  {load.label:<48} {side:<5} {load.count / seconds:>9,.0f} chunks/s {total / seconds / 1e6:>7.2f} "
              f"MB/s  ({seconds:.2f} s)")
    print(f"  {'':<48} requests per 1,000 chunks: writer {_requests(Counter(wrote), per)}")
    print(f"  {'':<48} {'':<26} reader {_requests(Counter(was_read), per)}")


async def main() -> None:
    started = time.perf_counter()
    async with LocalAWS(initial_world=False) as local:
        writer_world = await local.new_world()
        async with AWSWorld(writer_world.config) as reader_world:
            print(f"Streams on the embedded emulator (write window {writer_world.streams.stream_flush_interval_ms} "
                  "ms; a live reader in another World on the same stack)")
            for load in WORKLOADS:
                await measure(writer_world, reader_world, load)
    print(f"\n(total {time.perf_counter() - started:.1f}s)")


if __name__ == "__main__":
    asyncio.run(main())
