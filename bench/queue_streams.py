"""What the queue and streams cost in AWS requests: ``python bench/queue_streams.py`` (well under a minute).

Requests are counted on the client (``world.stats``), so the figures are deterministic and are what an AWS
bill counts: SQS requests, S3 requests, DynamoDB requests (and, where the emulator reports them, DynamoDB
capacity units). Runs on the embedded moto server; no account, no network.
"""

from __future__ import annotations

import asyncio
import math
import re
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from awsworld.authoring.step_context import StepContext, StepMetadata
from awsworld.aws import AWSWorld, RequestStats
from awsworld.local import LocalAWS
from awsworld.world import Delivery

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


# -- what dedup costs: DynamoDB write units by item size ----------------------------------------------------------


def _number_size(text: str) -> int:
    digits = len(text.strip().lstrip("+-").split("e")[0].split("E")[0].replace(".", "").strip("0"))
    return (digits + 1) // 2 + 1


def _value_size(value: dict[str, Any]) -> int:
    (kind, inner), = value.items()
    if kind == "S":
        return len(inner.encode("utf-8"))
    if kind == "N":
        return _number_size(inner)
    if kind == "B":
        return len(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "NS", "BS"):
        return sum(_value_size({kind[0]: v}) for v in inner)
    if kind == "M":
        return 3 + sum(len(k.encode("utf-8")) + _value_size(v) + 1 for k, v in inner.items())
    return 3 + sum(_value_size(v) + 1 for v in inner)  # L


def item_size(item: dict[str, Any] | None) -> int:
    """An item's size as DynamoDB bills it: attribute names plus values, in bytes."""
    return sum(len(name.encode("utf-8")) + _value_size(value) for name, value in (item or {}).items())


_ASSIGNMENT = re.compile(r"^\s*([#\w.]+)\s*=\s*(:\w+)\s*$")


class WriteMeter:
    """DynamoDB write requests by operation and the write units they bill, computed from item sizes: 1 WRU per
    started KB of the larger of the item before and after (a write refused by its condition bills too, at least
    1), 2 per started KB for every item of a ``TransactWriteItems``. "Before" comes from a shadow of the items
    this meter saw written, so put it on a fresh World; an ``UpdateItem`` is applied for plain ``SET a = :v`` and
    ``REMOVE a`` (all this World's dedup writes use)."""

    def __init__(self, world: AWSWorld) -> None:
        self.shadow: dict[tuple[str, str], dict[str, Any]] = {}
        self.requests: Counter[str] = Counter()
        self.units: Counter[str] = Counter()
        world.clients.register_handler("before-parameter-build.dynamodb", self._before)
        world.clients.register_handler("after-call.dynamodb", self._after)

    def snapshot(self) -> tuple[Counter[str], Counter[str]]:
        return Counter(self.requests), Counter(self.units)

    @staticmethod
    def _key(table_key: dict[str, Any]) -> tuple[str, str]:
        return table_key["pk"]["S"], table_key["sk"]["S"]

    def _updated(self, params: dict[str, Any]) -> dict[str, Any]:
        before = self.shadow.get(self._key(params["Key"]))
        after = dict(before or params["Key"])
        names = params.get("ExpressionAttributeNames") or {}
        values = params.get("ExpressionAttributeValues") or {}
        for clause in re.split(r"\b(?=SET |REMOVE )", params.get("UpdateExpression", "")):
            verb, _, body = clause.strip().partition(" ")
            for part in filter(None, (p.strip() for p in body.split(","))):
                if verb == "REMOVE":
                    after.pop(names.get(part, part), None)
                elif (match := _ASSIGNMENT.match(part)) and match.group(2) in values:
                    after[names.get(match.group(1), match.group(1))] = values[match.group(2)]
        return after

    def _write(self, kind: str, params: dict[str, Any]) -> tuple[int, tuple[str, str], dict[str, Any] | None]:
        """(billable bytes, key, the item after the write: None for a delete)."""
        if kind in ("Put", "PutItem"):
            key = self._key(params["Item"])
            after: dict[str, Any] | None = params["Item"]
        else:
            key = self._key(params["Key"])
            after = self._updated(params) if kind in ("Update", "UpdateItem") else None
            if kind == "ConditionCheck":
                after = self.shadow.get(key)
        size = max(item_size(self.shadow.get(key)), item_size(after), item_size(dict(zip(("pk", "sk"), (
            {"S": key[0]}, {"S": key[1]}), strict=True))))
        return size, key, after

    def _before(self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        name = model.name
        writes: list[tuple[int, tuple[str, str], dict[str, Any] | None, int]] = []
        if name in ("PutItem", "UpdateItem", "DeleteItem"):
            writes.append((*self._write(name, params), 1))
        elif name == "TransactWriteItems":
            for entry in params.get("TransactItems", []):
                (kind, body), = entry.items()
                size, key, after = self._write(kind, body)
                writes.append((size, key, self.shadow.get(key) if kind == "ConditionCheck" else after, 2))
        elif name == "BatchWriteItem":
            for requests in params.get("RequestItems", {}).values():
                for request in requests:
                    (kind, body), = request.items()
                    writes.append((*self._write("PutItem" if kind == "PutRequest" else "DeleteItem", body), 1))
        else:
            return
        context["write_meter"] = (name, writes)

    def _after(self, http_response: Any, context: dict[str, Any], **_: Any) -> None:
        name, writes = context.pop("write_meter", (None, []))
        if name is None:
            return
        self.requests[name] += 1
        self.units[name] += sum(factor * max(1, math.ceil(size / 1024)) for size, _, _, factor in writes)
        if getattr(http_response, "status_code", 500) < 300:
            for _, key, after, _ in writes:
                if after is None:
                    self.shadow.pop(key, None)
                else:
                    self.shadow[key] = after


async def dedup_figures(world: AWSWorld) -> None:
    """Requests and billable write units of a keyed send, a keyed batch of 10 and their acknowledgements, next
    to the same without keys. ``world`` must be fresh and have no poller of its own."""
    meter = WriteMeter(world)
    consumer = world.sqs_queue.consumer(PREFIX)
    rows: list[tuple[str, float, Counter[str], Counter[str], int]] = []

    async def row(label: str, per: float, action: Callable[[], Awaitable[Any]]) -> None:
        before = world.stats.snapshot()
        requests, units = meter.snapshot()
        await action()
        after_requests, after_units = meter.snapshot()
        sqs = (world.stats.snapshot() - before).total("sqs")
        rows.append((label, per, after_requests - requests, after_units - units, sqs))

    async def ack_all(count: int) -> None:
        done = 0
        while done < count:
            for outcome in await consumer.poll(10, 1):
                if isinstance(outcome, Delivery):
                    await consumer.ack(outcome)
                    done += 1

    n = 20
    keyed = [{"payload": {"runId": "wrun_01JBENCHBENCHBENCHBENCHBENC", "stepId": f"step_{i:04d}"},
              "idempotencyKey": f"wrun_01JBENCHBENCHBENCHBENCHBENC:step_{i:04d}:1"} for i in range(10 * n)]
    await row("queue(), no key", n, lambda: asyncio.gather(*(world.queue(QUEUE, m["payload"]) for m in keyed[:n])))
    await row("  ack", n, lambda: ack_all(n))
    await row("queue() with a key", n, lambda: asyncio.gather(*(
        world.queue(QUEUE, m["payload"], idempotency_key=m["idempotencyKey"]) for m in keyed[:n])))
    await row("  the same again (dropped: key held)", n, lambda: asyncio.gather(*(
        world.queue(QUEUE, m["payload"], idempotency_key=m["idempotencyKey"]) for m in keyed[:n])))
    await row("  ack", n, lambda: ack_all(n))
    batches = [keyed[i : i + 10] for i in range(0, len(keyed), 10)]
    await row("queue_batch() of 10, no keys", n, lambda: asyncio.gather(*(
        world.queue_batch(QUEUE, [{"payload": m["payload"]} for m in b]) for b in batches)))
    await row("  ack (per batch of 10)", n, lambda: ack_all(10 * n))
    await row("queue_batch() of 10 with keys", n, lambda: asyncio.gather(*(world.queue_batch(QUEUE, b)
                                                                          for b in batches)))
    await row("  the same again (all dropped)", n, lambda: asyncio.gather(*(world.queue_batch(QUEUE, b)
                                                                           for b in batches)))
    await row("  ack (per batch of 10)", n, lambda: ack_all(10 * n))

    print(f"\nQueue dedup: DynamoDB requests and billable WRU by item size (mean of {n}; SQS requests beside)")
    print(f"  {'':<40} {'WRU':>6} {'DynamoDB':>9} {'SQS':>6}   DynamoDB requests by operation")
    for label, per, requests, units, sqs in rows:
        ops = ", ".join(f"{op} {count / per:g} ({units[op] / per:g} WRU)" for op, count in sorted(requests.items()))
        print(f"  {label:<40} {sum(units.values()) / per:>6.2f} {sum(requests.values()) / per:>9.2f} "
              f"{sqs / per:>6.2f}   {ops or '-'}")
    send, ack = rows[2][3], rows[4][3]
    batch, batch_ack = rows[7][3], rows[9][3]
    print(f"  a keyed send, sent and acknowledged: {(sum(send.values()) + sum(ack.values())) / n:.2f} WRU;"
          f" a keyed batch of 10: {(sum(batch.values()) + sum(batch_ack.values())) / n:.2f} WRU")


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
    the first buffered chunk, see awsworld.aws.streams.streams), so the step rows depend on how many writes fall in a
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
        # The queue figures get Worlds of their own: local.world's queue has the local poller consuming it.
        if "dedup" in sys.argv[1:]:  # python bench/queue_streams.py dedup: only what dedup costs (seconds)
            await dedup_figures(await local.new_world())
            return
        await queue_figures(await local.new_world())
        await dedup_figures(await local.new_world())
        await stream_figures(world)
    print(f"\n(total {time.perf_counter() - started:.1f}s)")


if __name__ == "__main__":
    asyncio.run(main())
