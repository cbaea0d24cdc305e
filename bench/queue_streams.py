"""What the queue and streams cost in AWS requests: ``python bench/queue_streams.py`` (well under a minute).

Requests are counted on the client (``world.stats``), so the figures are deterministic and are what an AWS
bill counts: SQS requests, S3 requests, DynamoDB requests (and, where the emulator reports them, DynamoDB
capacity units). Runs on the embedded moto server; no account, no network.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from awsworld.aws import AWSWorld, RequestStats
from awsworld.local import LocalAWS
from awsworld.runtime.step_context import StepContext, StepMetadata

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


# -- streams: requests and dollars per million chunks --------------------------------------------------------------


STREAM_PRICES = {"s3.PutObject": 5.0, "s3.GetObject": 0.4, "wru": 0.625, "rru": 0.125}
"""US East on-demand, dollars per million: S3 PUT and GET requests, DynamoDB write and read request units."""


def _ddb_bytes(value: dict[str, Any]) -> int:
    (kind, inner), = value.items()
    if kind in ("S", "B"):
        return len(inner.encode("utf-8") if isinstance(inner, str) else inner)
    if kind == "N":
        return len(inner.lstrip("-").replace(".", "")) // 2 + 2
    return 1 if kind in ("BOOL", "NULL") else 3 + len(str(inner))  # a map or list: not in stream items


class StreamMeter:
    """DynamoDB units the stream requests bill (moto reports none): a transaction 2 WRU per started KB of each
    item — the segment it puts sized from its attributes, the run head it checks and the thin stream meta it
    updates taken as under 1 KB — a plain write 1 WRU (the close), a consistent read 1 RRU (items under 4 KB)."""

    def __init__(self, world: AWSWorld) -> None:
        self.wru = 0.0
        world.clients.register_handler("before-parameter-build.dynamodb.TransactWriteItems", self._transaction)

    def _transaction(self, params: dict[str, Any] | None = None, **_: Any) -> None:
        for entry in (params or {}).get("TransactItems", []):
            item = entry.get("Put", {}).get("Item")
            size = sum(len(k) + _ddb_bytes(v) for k, v in item.items()) if item else 1024
            self.wru += 2 * math.ceil(size / 1024)


@dataclass
class StreamRow:
    label: str
    chunks: int
    requests: Counter[str]
    wru: float

    @property
    def plain(self) -> int:
        """Plain writes (the close's UpdateItem), 1 WRU each."""
        return sum(self.requests[f"dynamodb.{op}"] for op in ("PutItem", "UpdateItem", "DeleteItem"))

    @property
    def rru(self) -> int:
        return self.requests["dynamodb.GetItem"] + self.requests["dynamodb.Query"]

    @property
    def dollars_per_million(self) -> float:
        spent = (self.requests["s3.PutObject"] * STREAM_PRICES["s3.PutObject"]
                 + self.requests["s3.GetObject"] * STREAM_PRICES["s3.GetObject"]
                 + (self.wru + self.plain) * STREAM_PRICES["wru"] + self.rru * STREAM_PRICES["rru"])
        return spent / self.chunks

    def line(self) -> str:
        per = 1000 / self.chunks
        put, get, tx = (self.requests[k] for k in ("s3.PutObject", "s3.GetObject", "dynamodb.TransactWriteItems"))
        return (f"  {self.label:<58} {put * per:>7.1f} {get * per:>7.1f} {tx * per:>7.1f} "
                f"{self.plain * per:>6.1f} {self.rru * per:>6.1f} {(self.wru + self.plain) * per:>7.1f} "
                f"{self.dollars_per_million:>9.3f}")


async def stream_figures(world: AWSWorld) -> None:
    """Per 1,000 chunks and per million, by way of writing. A step's writer batches by itself (a window after
    the first buffered chunk, see awsworld.aws.streams), so the step rows depend on how many writes fall in a
    window: a tight loop is one commit per 100 chunks; the paced rows vary a little from run to run."""
    meter = StreamMeter(world)
    run = await world.events.create(None, {"eventType": "run_created", "eventData": {"workflowName": "bench"}})
    assert run.run is not None
    run_id = run.run.run_id
    chunks = [f"token {i:>4} ".encode() + b"." * 88 for i in range(1000)]  # 100 bytes each
    rows: list[StreamRow] = []

    async def row(label: str, count: int, action: Callable[[], Awaitable[Any]]) -> None:
        before, wru = world.stats.snapshot(), meter.wru
        await action()
        spent = world.stats.snapshot() - before
        rows.append(StreamRow(label, count, Counter({k: v for k, v in spent.requests.items()
                                                      if not k.startswith("sqs.")}), meter.wru - wru))

    def step_loop(name: str, count: int, pause: float) -> Callable[[], Awaitable[Any]]:
        """A step body writing ``count`` chunks one ``await write()`` at a time, run as the runtime runs it
        (``StepContext.run`` flushes its writers before the step's end would be recorded)."""
        context = StepContext(world, StepMetadata(run_id, f"step_{name}", "bench.writer", 1, None))

        async def body() -> None:
            writer = context.writer(name)
            for chunk in chunks[:count]:
                await writer.write(chunk)
                if pause:
                    await asyncio.sleep(pause)

        return lambda: context.run(body())

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

    window = world.streams.stream_flush_interval_ms
    await row("step: 100 x await write() in a loop (get_writable)", 100, step_loop("loop", 100, 0))
    await row("step: 100 x write(), 5 ms apart", 100, step_loop("paced", 100, 0.005))
    await row(f"step: 20 x write(), {window + 10} ms apart (one per window)", 20,
              step_loop("sparse", 20, (window + 10) / 1000))
    await row(f"write() x {SAMPLE} one at a time (= a step's write before)", SAMPLE, one_by_one)
    await row("write() x 100 concurrent (a shared commit)", 100,
              lambda: asyncio.gather(*(world.streams.write(run_id, "concurrent", c) for c in chunks[:100])))
    await row("write_multi() x 10 of 100", 1000, in_hundreds)
    await row("write_multi() x 1 of 1000", 1000, lambda: world.streams.write_multi(run_id, "single", chunks))
    await row("write session: 1000 write() + close()", 1000, session)
    await row("get(): read 1000 chunks of 1 segment (closed)", 1000, read_back)
    await row(f"get_chunks(): {SAMPLE} chunks in {SAMPLE} segments", SAMPLE, page_back)

    print(f"\nStreams: requests per 1,000 chunks of 100 bytes and $ per million chunks (window {window} ms; "
          f"S3 PUT ${STREAM_PRICES['s3.PutObject']}/M, GET ${STREAM_PRICES['s3.GetObject']}/M, DynamoDB "
          f"${STREAM_PRICES['wru']}/M WRU, ${STREAM_PRICES['rru']}/M RRU)")
    print(f"  {'':<58} {'S3 PUT':>7} {'S3 GET':>7} {'DDB tx':>7} {'plain':>6} {'reads':>6} {'WRU':>7} {'$/M':>9}")
    for stream_row in rows:
        print(stream_row.line())


async def main() -> None:
    started = time.perf_counter()
    async with LocalAWS() as local:
        world = local.world
        await queue_figures(world)
        await stream_figures(world)
    print(f"\n(total {time.perf_counter() - started:.1f}s)")


if __name__ == "__main__":
    asyncio.run(main())
