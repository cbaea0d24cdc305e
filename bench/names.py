"""What a display name costs (issue 26 item 5): the same map of N one-step items, one at a time (no write
races, so the runs differ only by their names), with no names, with everyday labels (``map(name=...,
item_name=...)`` and ``with_name``: ``charge cards / order-000017 / charge card``, 40 bytes), and with the
longest names allowed (128-character item labels and call names: a 280-character display name), billed by
``bill.py``'s meter (every DynamoDB, SQS and S3 request of the real runs on the embedded emulator, priced by the
byte).

A name is written once, on its call's ``*_created`` event; the figures show what that does to the writes' WRU
(DynamoDB bills per started KB of each item, so a name costs a unit only where it pushes an item over a KB).

Run: ``python bench/names.py`` (``--n 20`` for a quicker run).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from awsworld import map as durable_map
from awsworld import step, with_name, workflow
from awsworld.local import LocalAWS


def _load_bill() -> ModuleType:
    """bench/ is scripts, not a package: load bill.py by path (it declares workflows: once per process)."""
    name = "awsworld_bench_bill"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parent / "bill.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


bill = _load_bill()
LONG = "n" * 128


@step(name="names_bench.charge")
async def charge(i: int) -> int:
    return i


async def plain(i: int) -> int:
    return await charge(i)


async def named(i: int) -> int:
    return await with_name("charge card").call(charge, i)


async def longest(i: int) -> int:
    return await with_name(LONG).call(charge, i)


@workflow(name="names_bench.batch")
async def batch(n: int, mode: str) -> int:
    if mode == "none":
        result = await durable_map(plain, range(n), max_concurrency=1)
    elif mode == "everyday":
        result = await durable_map(named, range(n), max_concurrency=1, name="charge cards",
                                   item_name=lambda i, _: f"order-{i:06d}")
    else:
        result = await durable_map(longest, range(n), max_concurrency=1, name="l" * 20,
                                   item_name=lambda i, _: f"{i:06d}".ljust(128, "i"))
    return sum(result.values())


async def measure(n: int) -> list[Any]:
    results: list[Any] = []
    async with LocalAWS("moto") as local:
        harness = bill.Harness(local)
        try:
            for mode in ("none", "everyday", "longest"):
                async def body(mode: str = mode) -> None:
                    assert await harness.result(await harness.client.start(batch, n, mode)) == n * (n - 1) // 2
                results.append(await harness.measure(f"map, names: {mode}", "step", n, body))
        finally:
            await harness.close()
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=64, help="items in the fan-out (default 64)")
    args = parser.parse_args(argv)
    results = asyncio.run(measure(args.n))
    print(bill.report(results, "moto"))


if __name__ == "__main__":
    main()
