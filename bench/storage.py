"""Storage benchmarks on the local emulators: ``python bench/storage.py`` (about a minute).

Section ``transaction_latency``: milliseconds per ``TransactWriteItems`` as the table fills, for moto as
shipped (it deep-copies the whole table on every transaction), moto with awsworld's journaling patch, and
AWS's DynamoDB Local. The transaction is the one every ``events.create`` makes: a conditional Update of the
run item (``seq``), a Put of the event at the next slot with ``attribute_not_exists``, and a Put of the entity.
Needs DynamoDB Local (``npm ci``) and Java.

Section ``index_query_latency``: milliseconds per Query of the runs-by-status index (``awsworld runs --status``,
the watchdog's due-runs index is queried the same way every few seconds under ``dev``), for moto as shipped (it
sorts the whole table first) and with awsworld's patch (the index's candidates alone, unsorted). Only moto.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3

from awsworld.local import DUMMY_CREDENTIALS, DynamoDBLocal, MotoServer, moto_patch
from awsworld.local.moto_server import moto_table
from awsworld.local.provision import create_table_parameters

SIZES = (100, 1_000, 10_000)
EVENTS_PER_RUN = 100
PAYLOAD = "x" * 200  # a small step result, as most events carry


def client(endpoint_url: str) -> Any:
    return boto3.client("dynamodb", endpoint_url=endpoint_url, region_name="us-east-1",
                        **DUMMY_CREDENTIALS)  # type: ignore[arg-type]


def filler_item(i: int) -> dict[str, Any]:
    """The i-th background item: events of finished runs, EVENTS_PER_RUN per run partition."""
    return {"pk": {"S": f"RUN#filler-{i // EVENTS_PER_RUN:06d}"}, "sk": {"S": f"EVT#{i % EVENTS_PER_RUN:026d}"},
            "type": {"S": "step_completed"}, "data": {"S": PAYLOAD}, "createdAt": {"S": "2030-01-01T00:00:00Z"}}


def fill_moto(table: str, start: int, stop: int) -> None:
    moto = moto_table(table)  # in-process: HTTP would take far longer than the measurement itself
    for i in range(start, stop):
        moto.put_item(filler_item(i))


def fill_over_http(ddb: Any, table: str, start: int, stop: int) -> None:
    def write(batch_start: int) -> None:
        requests = [{"PutRequest": {"Item": filler_item(i)}} for i in range(batch_start, min(batch_start + 25, stop))]
        pending: dict[str, Any] = {table: requests}
        while pending:
            pending = ddb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(write, range(start, stop, 25)))


class Writer:
    """Appends events to one run with the 3-item transaction ``events.create`` makes."""

    def __init__(self, ddb: Any, table: str) -> None:
        self.ddb, self.table, self.seq = ddb, table, 0
        self.run = f"RUN#bench-{uuid.uuid4().hex[:8]}"
        self.items = 0  # items this writer added to the table

    def write(self) -> None:
        seq = self.seq
        self.ddb.transact_write_items(TransactItems=[
            {"Update": {
                "TableName": self.table, "Key": {"pk": {"S": self.run}, "sk": {"S": "RUN"}},
                "UpdateExpression": "SET seq = :next, updatedAt = :now",
                "ConditionExpression": "attribute_not_exists(seq) OR seq = :seq",
                "ExpressionAttributeValues": {":seq": {"N": str(seq)}, ":next": {"N": str(seq + 1)},
                                              ":now": {"S": "2030-01-01T00:00:00Z"}},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }},
            {"Put": {
                "TableName": self.table, "ConditionExpression": "attribute_not_exists(pk)",
                "Item": {"pk": {"S": self.run}, "sk": {"S": f"EVT#{seq + 1:026d}"}, "type": {"S": "step_completed"},
                         "correlationId": {"S": f"step-{seq}"}, "data": {"S": PAYLOAD}},
            }},
            {"Put": {
                "TableName": self.table,
                "Item": {"pk": {"S": self.run}, "sk": {"S": f"STEP#step-{seq}"}, "status": {"S": "completed"},
                         "result": {"S": PAYLOAD}},
            }},
        ])
        self.items += 3 if seq == 0 else 2
        self.seq += 1


def median_ms(action: Callable[[], None], budget_s: float, min_reps: int = 3, max_reps: int = 25) -> float:
    samples: list[float] = []
    deadline = time.perf_counter() + budget_s
    while len(samples) < max_reps and (len(samples) < min_reps or time.perf_counter() < deadline):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000




def scratch_table_parameters(table: str) -> dict[str, Any]:
    """awsworld's table (``create_table_parameters``) without its deletion protection: the bench deletes it."""
    return create_table_parameters(table)


def measure(name: str, ddb: Any, fill: Callable[[str, int, int], None], sizes: tuple[int, ...],
            budget_s: float) -> list[float]:
    """ms per transaction on a fresh table as it grows through ``sizes`` (the writes themselves count)."""
    table = f"bench-{uuid.uuid4().hex[:8]}"
    ddb.create_table(**scratch_table_parameters(table))
    writer, filled, figures = Writer(ddb, table), 0, []
    try:
        for size in sizes:
            target = max(filled, size - writer.items)
            fill(table, filled, target)
            filled = target
            if writer.seq == 0:
                writer.write()  # creates the run item
            start = filled + writer.items
            figures.append(median_ms(writer.write, budget_s))
            print(f"    {name}: {figures[-1]:.1f} ms ({start:,} items before, {filled + writer.items:,} after)",
                  flush=True)
    finally:
        ddb.delete_table(TableName=table)
    return figures


def warm_up(ddb: Any, calls: int = 60) -> None:
    """Run the transaction on a throwaway table first, so no figure includes JIT compilation or first calls."""
    table = f"warm-{uuid.uuid4().hex[:8]}"
    ddb.create_table(**scratch_table_parameters(table))
    writer = Writer(ddb, table)
    for _ in range(calls):
        writer.write()
    ddb.delete_table(TableName=table)


def transaction_latency(sizes: tuple[int, ...] = SIZES, budget_s: float = 1.5) -> None:
    print("\nTransactWriteItems, 3 items (conditional Update of the run, Put of the event with "
          "attribute_not_exists, Put of the step): median ms per call, sync boto3 over loopback HTTP")
    rows: dict[str, list[float]] = {}
    with MotoServer() as moto, DynamoDBLocal() as ddb_local:
        moto_ddb, local_ddb = client(moto.endpoint_url), client(ddb_local.endpoint_url)
        for name, enabled in (("moto (as shipped)", False), ("moto (journaling patch)", True)):
            with moto_patch.enabled(enabled):
                warm_up(moto_ddb)
                rows[name] = measure(name, moto_ddb, fill_moto, sizes, budget_s)
        warm_up(local_ddb, calls=300)  # the JVM needs a few hundred calls before its figures settle
        rows["DynamoDB Local"] = measure("DynamoDB Local", local_ddb,
                                         lambda table, a, b: fill_over_http(local_ddb, table, a, b), sizes, budget_s)
    header = "items in the table"
    print(f"  {header:<28}" + "".join(f"{size:>10,}" for size in sizes))
    for name, values in rows.items():
        print(f"  {name:<28}" + "".join(f"{value:>10.1f}" for value in values))


def index_query_latency(sizes: tuple[int, ...] = SIZES, budget_s: float = 1.5) -> None:
    print("\nQuery of the byStatus index (a page of 20 running runs, 1 run item in 20 of the table's items): median ms"
          " per call on moto")
    rows: dict[str, list[float]] = {}
    with MotoServer() as moto:
        ddb = client(moto.endpoint_url)
        table = f"bench-{uuid.uuid4().hex[:8]}"
        ddb.create_table(**scratch_table_parameters(table))
        query = {"TableName": table, "IndexName": "byStatus", "KeyConditionExpression": "gsiStatus = :s",
                 "ExpressionAttributeValues": {":s": {"S": "running"}}, "Limit": 20}
        filled = 0
        try:
            for size in sizes:
                fill_moto(table, filled, size)
                runs = moto_table(table)
                for i in range(filled // 20, size // 20):
                    runs.put_item({"pk": {"S": f"RUN#r{i:06d}"}, "sk": {"S": "RUN"}, "gsiRunId": {"S": f"wrun_{i:06d}"},
                                   "gsiStatus": {"S": ("running", "pending", "completed")[i % 3]},
                                   "gsiWorkflow": {"S": "app.w"}})
                filled = size
                for name, enabled in (("moto (as shipped)", False), ("moto (index patch)", True)):
                    with moto_patch.enabled(enabled):
                        rows.setdefault(name, []).append(median_ms(lambda: ddb.query(**query), budget_s))
        finally:
            ddb.delete_table(TableName=table)
    header = "items in the table"
    print(f"  {header:<28}" + "".join(f"{size:>10,}" for size in sizes))
    for name, values in rows.items():
        print(f"  {name:<28}" + "".join(f"{value:>10.1f}" for value in values))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)),
                        help="comma-separated table sizes (default: %(default)s)")
    args = parser.parse_args(argv)
    sizes = tuple(int(size) for size in args.sizes.split(","))
    transaction_latency(sizes)
    index_query_latency(sizes)
    asyncio.run(_event_costs())


async def _event_costs() -> None:
    """Per-event-type requests and billable units, on DynamoDB Local (it reports consumed capacity)."""
    from awsworld.local import LocalAWS
    from event_costs import event_costs

    async with LocalAWS(dynamodb="dynamodb-local", run_workflows=False) as local:
        await event_costs(local.world)


if __name__ == "__main__":
    main()
