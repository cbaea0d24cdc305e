"""What the queue and streams cost in AWS requests: ``python bench/queue_streams.py`` (well under a minute).

Requests are counted on the client (``world.stats``), so the figures are deterministic and are what an AWS
bill counts: SQS requests, S3 requests, DynamoDB requests (and, where the emulator reports them, DynamoDB
capacity units). Runs on the embedded moto server; no account, no network.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from awsworld.aws import AWSWorld, RequestStats
from awsworld.local import LocalAWS

QUEUE = "__wkf_workflow_bench"
PREFIX = "__wkf_workflow_"
SAMPLE = 200


def _by_service(stats: RequestStats, per: float) -> str:
    parts = []
    for service in ("sqs", "s3", "dynamodb"):
        total = stats.total(service)
        parts.append(f"{service.upper() if service != 'dynamodb' else 'DynamoDB'} {total / per:>7.3f}")
    ops = ", ".join(f"{k}={v}" for k, v in sorted(stats.requests.items()))
    return "  ".join(parts) + f"   [{ops}]"


async def measure(world: AWSWorld, label: str, per: float, unit: str, action: Callable[[], Awaitable[Any]]) -> None:
    """Run ``action`` and print the requests it made divided by ``per`` (a fraction scales a sample up)."""
    before = world.stats.snapshot()
    started = time.perf_counter()
    await action()
    elapsed = time.perf_counter() - started
    spent = world.stats.snapshot() - before
    print(f"  {label:<48} per {unit:<8} {_by_service(spent, per)}  ({elapsed:.2f}s local)")


async def drain(world: AWSWorld, count: int) -> None:
    consumer = world.sqs_queue.consumer(PREFIX)
    done = 0
    while done < count:
        for outcome in await consumer.poll(10, 1):
            if hasattr(outcome, "payload"):
                await consumer.ack(outcome)  # type: ignore[arg-type]
                done += 1


async def queue_figures(world: AWSWorld) -> None:
    print("\nQueue (requests per message; SQS batches hold 10)")
    n = 50
    await measure(world, "queue(), no idempotency key", n, "message",
                  lambda: asyncio.gather(*(world.queue(QUEUE, {"i": i}) for i in range(n))))
    await measure(world, "queue() with an idempotency key", n, "message",
                  lambda: asyncio.gather(*(world.queue(QUEUE, {"i": i}, idempotency_key=f"q{i}") for i in range(n))))
    await measure(world, "duplicate queue() (dropped, key held)", n, "message",
                  lambda: asyncio.gather(*(world.queue(QUEUE, {"i": i}, idempotency_key=f"q{i}") for i in range(n))))
    await measure(world, "consume: receive + ack (with and without key)", 2 * n, "message",
                  lambda: drain(world, 2 * n))

    fan = 256
    batch = [{"payload": {"runId": "wrun_bench", "stepId": f"step_{i}"}, "idempotencyKey": f"step_{i}"}
             for i in range(fan)]
    await measure(world, f"queue_batch fan-out of {fan}, with keys", fan, "message",
                  lambda: world.queue_batch(QUEUE, batch))
    await measure(world, "  the same fan-out republished (all deduped)", fan, "message",
                  lambda: world.queue_batch(QUEUE, batch))
    await drain(world, fan)
    await measure(world, f"queue_batch fan-out of {fan}, no keys", fan, "message",
                  lambda: world.queue_batch(QUEUE, [{"payload": {"i": i}} for i in range(fan)]))
    await drain(world, fan)

    big = {"runId": "wrun_bench", "blob": "x" * (300 * 1024)}
    await measure(world, "queue() of a 300 KiB payload (S3 reference)", 1, "message",
                  lambda: world.queue(QUEUE, big))
    await drain(world, 1)
    print("  a delay over 15 minutes costs, per 15-minute hop: ReceiveMessage (shared), SendMessage, DeleteMessage")


async def stream_figures(world: AWSWorld) -> None:
    print("\nStreams (requests per 1,000 small chunks)")
    run = await world.events.create(None, {"eventType": "run_created", "eventData": {"workflowName": "bench"}})
    assert run.run is not None
    run_id = run.run.run_id
    chunks = [f"token {i} ".encode() for i in range(1000)]

    async def one_by_one() -> None:
        for chunk in chunks[:SAMPLE]:
            await world.streams.write(run_id, "unbatched", chunk)

    async def in_hundreds() -> None:
        for start in range(0, 1000, 100):
            await world.streams.write_multi(run_id, "hundreds", chunks[start : start + 100])

    async def session() -> None:
        writer = world.streams.create_write_session(run_id, "session", "wrtr_bench")
        for seq, chunk in enumerate(chunks):
            await writer.write(seq, [chunk])
        await writer.close()

    async def read_back() -> None:
        assert len([c async for c in world.streams.get(run_id, "session")]) == 1000

    async def page_back() -> None:
        cursor = None
        while True:
            page = await world.streams.get_chunks(run_id, "unbatched", limit=1000, cursor=cursor)
            cursor = page.cursor
            if not page.has_more:
                return

    # Unbatched writes cost the same per chunk however many there are (one S3 PUT, one transaction for a lone
    # writer); a sample of SAMPLE keeps the run short on the emulator, and the figures are scaled to 1,000.
    scale = SAMPLE / 1000
    await measure(world, f"write() x {SAMPLE}, no batching (scaled to 1k)", scale, "1k", one_by_one)
    await measure(world, "write_multi() x 10 of 100", 1, "1k", in_hundreds)
    await measure(world, "write_multi() x 1 of 1000", 1, "1k",
                  lambda: world.streams.write_multi(run_id, "single", chunks))
    await measure(world, "write session: 1000 write() calls + close()", 1, "1k", session)
    await measure(world, "get(): read 1000 chunks from 1 segment (closed)", 1, "1k", read_back)
    await measure(world, f"get_chunks(): {SAMPLE} chunks in {SAMPLE} segments (scaled)", scale, "1k", page_back)


async def main() -> None:
    started = time.perf_counter()
    async with LocalAWS() as local:
        world = local.world
        await queue_figures(world)
        await stream_figures(world)
    print(f"\n(total {time.perf_counter() - started:.1f}s)")


if __name__ == "__main__":
    asyncio.run(main())
