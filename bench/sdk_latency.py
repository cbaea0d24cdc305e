"""Request latency of the AWS World's client plumbing against the emulator: botocore through a thread pool
(``awsworld.aws.threaded``, what the World uses) beside aioboto3 (what it used before), on the same moto server.

For each: one GetItem at a time (the inline loop's serial shape: each step's write waits for the one before)
and 10 at a time (a batch of records, a fan-out's queue_batch), after a warm-up; milliseconds per request,
median and p90, and the process CPU per request. aioboto3 is no longer a dependency: pass ``--aioboto3-path``
a folder that has it (an old build of the flow function, say) to include it.

Run: ``python bench/sdk_latency.py [--requests 300] [--aioboto3-path DIR]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from awsworld.aws.clients import AWSClients
from awsworld.local import DUMMY_CREDENTIALS, LocalAWS


async def measure(label: str, get: Callable[[], Awaitable[Any]], requests: int) -> None:
    for _ in range(20):
        await get()
    for width in (1, 10):
        latencies: list[float] = []
        cpu = time.process_time()

        async def one(into: list[float] = latencies) -> None:
            start = time.perf_counter()
            await get()
            into.append(time.perf_counter() - start)

        for _ in range(requests // width):
            await asyncio.gather(*(one() for _ in range(width)))
        cpu = time.process_time() - cpu
        latencies.sort()
        print(f"  {label:28s} {width:2d} at a time: {statistics.median(latencies) * 1000:6.2f} ms median, "
              f"p90 {latencies[int(len(latencies) * 0.9)] * 1000:6.2f} ms; process CPU "
              f"{cpu / len(latencies) * 1000:5.2f} ms/request (the emulator's included)")


async def main_async(requests: int, aioboto3_path: str | None) -> None:
    async with LocalAWS("moto", run_workflows=False) as local:
        config = local.config
        key = {"pk": {"S": "bench"}, "sk": {"S": "item"}}
        clients = AWSClients(config)
        ddb = await clients.dynamodb()
        await ddb.put_item(TableName=config.table_name, Item={**key, "v": {"S": "x" * 200}})
        print(f"GetItem on moto, {requests} requests per shape:")
        await measure("botocore + thread pool", lambda: ddb.get_item(TableName=config.table_name, Key=key,
                                                                        ConsistentRead=True), requests)
        await clients.close()
        if aioboto3_path:
            sys.path.append(aioboto3_path)
            import aioboto3  # type: ignore[import-not-found]

            session = aioboto3.Session()
            async with session.client("dynamodb", region_name="us-east-1", endpoint_url=config.endpoint_url,
                                      **DUMMY_CREDENTIALS) as old:
                await measure("aioboto3", lambda: old.get_item(TableName=config.table_name, Key=key,
                                                               ConsistentRead=True), requests)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--aioboto3-path", help="a folder holding aioboto3 (and aiobotocore, aiohttp)")
    args = parser.parse_args(argv)
    asyncio.run(main_async(args.requests, args.aioboto3_path))


if __name__ == "__main__":
    main()
