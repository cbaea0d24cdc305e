"""What ``awsworld dev --state`` pays to answer a resume only once its copy of the state holds the payload
(``cli/dev_state.Snapshots.keep``, called by ``local/moto_server.py``'s ``kept_first``): ``python
bench/dev_resume_keep.py [--runs 100 10000] [--resumes 10]``.

For each count of runs waiting on a hook (one real run, waiting on its hook under the embedded emulator and a
worker, then cloned: its items copied under new run ids and tokens, so the table holds what that many waiting runs
hold), it prints the table's items and the copy's size on disk, then ``--resumes`` resumes timed as a client
sees them (``client.resume_hook``) with the keep off and on (alternating, so load falls on both alike), with the
median and the slowest, and the copy's own time (after a change). Wall times: on a shared machine say the load
(it is printed).

Measured 2026-12-07 on 2 shared cores: 100 runs (700 items, 0.2 MB): a resume 70-77 ms with the keep off, 114 ms
with it (load 4 and 7), the copy 32-35 ms. 10,000 runs (70,000 items, 25 MB): the copy took 4.2 s at load 3.5 and
13.3 s at load 7, and a resume waiting for it 3.5 s (median, slowest 5.4 s, load 3.5, before ``KEEP_SECONDS``):
too long for every resume to wait, so past ``KEEP_SECONDS`` they do not, and ``dev`` says so once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from awsworld import create_hook, workflow
from awsworld.aws import AWSWorld
from awsworld.cli import dev_state
from awsworld.cli.dev_state import Snapshots, decode_value, item_lines
from awsworld.client.client import Client
from awsworld.local import LocalAWS, MotoServer


@workflow(name="bench.kept")
async def kept(token: str) -> object:
    return await create_hook(token=token)


def clones(lines: list[str], run_id: str, token: str, count: int) -> list[dict[str, object]]:
    """``count`` copies of one run's items (``lines``), each under a run id and token of its own."""
    made: list[dict[str, object]] = []
    for n in range(count):
        for line in lines:
            text = line.replace(run_id, f"{run_id[:-6]}{n:06d}").replace(token, f"{token}-{n}")
            made.append({k: decode_value(v) for k, v in json.loads(text).items()})
    return made


async def measure(count: int, resumes: int) -> None:
    moto = MotoServer().start()
    try:
        async with LocalAWS(moto=moto) as local:
            assert local.client is not None and isinstance(local.world, AWSWorld)
            world = local.world
            run = await local.client.start(kept, "bench-token")
            await run.wait_for_hook("bench-token")
            table = world.config.table_name
            lines = [line for line in moto.read_table(table, item_lines) if run.run_id in line or "bench-token" in line]
            moto.put_items(table, clones(lines, run.run_id, "bench-token", count - 1))
            client = Client(world)
            with tempfile.TemporaryDirectory() as directory:
                snapshots = Snapshots(world, Path(directory), lambda: moto.changes, read_table=moto.read_table)
                await snapshots.save()
                size = (Path(directory) / dev_state.TABLE_FILE).stat().st_size
                print(f"{count} runs waiting on a hook: {snapshots.items} items, copy {size / 1e6:.1f} MB")
                timed: dict[bool, list[float]] = {False: [], True: []}
                for n in range(resumes * 2):
                    on = n % 2 == 1
                    moto.keep_first(snapshots.keep if on else None)
                    started = time.perf_counter()
                    await client.resume_hook(f"bench-token-{n}", {"n": n})
                    timed[on].append(time.perf_counter() - started)
                moto.keep_first(None)
                copies = []
                for n in range(3):
                    await client.resume_hook(f"bench-token-{resumes * 2 + n}", {"n": n})  # a change to copy
                    started = time.perf_counter()
                    assert await snapshots.save()
                    copies.append(time.perf_counter() - started)
                for on, times in timed.items():
                    print(f"  resume, keep {'on ' if on else 'off'}: median {statistics.median(times) * 1000:.0f} ms, "
                          f"slowest {max(times) * 1000:.0f} ms ({len(times)} resumes)")
                waited = min(copies) <= dev_state.KEEP_SECONDS
                print(f"  the copy alone: {min(copies) * 1000:.0f} ms quickest of {len(copies)}: resumes "
                      + ("wait for it" if waited else f"do not wait (over KEEP_SECONDS, {dev_state.KEEP_SECONDS:g} s)"))
    finally:
        moto.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description="what a resume's answer waits for under awsworld dev --state")
    parser.add_argument("--runs", type=int, nargs="+", default=[100, 10_000])
    parser.add_argument("--resumes", type=int, default=10)
    args = parser.parse_args()
    print(f"load: {os.getloadavg()[0]:.1f} (1 min), {os.cpu_count()} cores")
    for count in args.runs:
        asyncio.run(measure(count, args.resumes))


if __name__ == "__main__":
    main()
