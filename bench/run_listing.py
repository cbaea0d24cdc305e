"""What a listing of runs costs in DynamoDB requests: ``RunsAPI.list`` (what ``awsworld runs`` and the run viewer's
list read) of ``--runs`` ended runs (100), ``--failed`` of them failed (50), on the embedded emulator (moto), each
run a real one through the delivery path (``LocalAWS``). Prints the requests by operation (the World's own
``RequestStats``) and the read units moto reports, for a listing without values (``awsworld runs``, the viewer)
and one with them (``runs.list``'s default).

A failed run's error is in its ``run_failed`` event, in the block of events its failure wrote: the listing read
that block with a Query of its own, one per failed run (the block's key is its first slot, which the run's item
did not hold: 52 requests for this listing, 50 of them those Queries, measured 2026-12-07). The run's item keeps
that slot now (``endBlock``, written with the failure: a dozen bytes), so the blocks are read in the listing's one
``BatchGetItem`` with the runs' first blocks: 2 requests. A completed run's item keeps the block of its
``run_completed`` the same way (written with its completion), so the listing with values reads the outputs there
too: 58 requests (55 Queries, one per completed run) became 8 (5 Queries, the index's partitions), 305 read units
both (measured 2026-12-07). ``bench/bill.py --quick``'s run-item writes are unchanged (the largest run head any
write left: 534 bytes both, under the 1 KB a write bills).

Run: ``python bench/run_listing.py`` (about a minute: the runs are made first).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
from collections import Counter

from awsworld import FatalError, Run, WorkflowRunFailedError, workflow
from awsworld.local import LocalAWS


@workflow(name="listingbench.ok")
async def ok(i: int) -> int:
    return i


@workflow(name="listingbench.fails")
async def fails(i: int) -> int:
    raise FatalError(f"run {i} refused: " + "why " * 40)


async def world_runs_end(run: Run[int]) -> None:
    with contextlib.suppress(WorkflowRunFailedError):
        await run.result(timeout=120)


async def measure(runs: int, failed: int) -> None:
    async with LocalAWS() as local:
        assert local.client is not None
        started = [await local.client.start(fails if i < failed else ok, i) for i in range(runs)]
        for run in started:
            await world_runs_end(run)
        world = local.world
        for resolve in ("none", "all"):
            before = world.stats.snapshot()
            page = await world.runs.list(limit=runs, resolve_data=resolve)
            used = world.stats.snapshot() - before
            statuses = Counter(run.status for run in page.data)
            errors = sum(1 for run in page.data if run.status == "failed" and run.error is not None)
            requests = Counter({name.removeprefix("dynamodb."): n for name, n in used.requests.items()
                                if name.startswith("dynamodb.")})  # (not the poller's idle receives)
            print(f"runs.list(limit={runs}, resolve_data={resolve!r}): {dict(statuses)}, {errors} errors shown; "
                  f"{requests.total()} DynamoDB requests {dict(sorted(requests.items()))}, "
                  f"{used.read_units:g} read units")


def main() -> None:
    logging.getLogger("awsworld").setLevel(logging.CRITICAL)  # (each failed run's report, 50 times)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--failed", type=int, default=50)
    args = parser.parse_args()
    asyncio.run(measure(args.runs, args.failed))


if __name__ == "__main__":
    main()
