"""How many copies of the state ``awsworld dev --state`` makes while a run waits on a hook that its sender
heartbeats (``Client.heartbeat_hook``), and how long each heartbeat's answer takes: ``python
bench/dev_heartbeat_copies.py [--seconds 30] [--every 1 10]``.

One run waits on ``create_hook(heartbeat_timeout=...)`` under the embedded emulator; ``dev``'s ``Snapshots`` copies
the state every ``SNAPSHOT_SECONDS`` when something changed, and before the answer of a write that records a hook's
payload (``local/moto_server.py``'s ``kept_first``, ``Snapshots.keep``). For ``--seconds`` of real time a heartbeat
is sent every ``--every`` seconds; the copies are counted (``dev_state.copy_state``'s calls) and scaled to an hour.
It runs on whichever code is imported, so the same script measures a checkout from before a change.

Measured 2026-12-07 on 2 shared cores (30 s each, scaled to an hour): a heartbeat every second, 3,600 copies an hour
before (30 in 30 s: every heartbeat's answer waited for one; answers 26 ms median, 345 ms slowest at load 6), 600
after (5 in 30 s: the periodic copy's; 21 ms median, 40 ms slowest at load 3.8); a heartbeat every 10 s, 360 an
hour before and after (each heartbeat is a change the periodic copy saves), none holding an answer now.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from awsworld import create_hook, workflow
from awsworld.aws import AWSWorld
from awsworld.cli import dev_state
from awsworld.cli.dev_state import Snapshots
from awsworld.local import LocalAWS, MotoServer


@workflow(name="bench.heartbeated")
async def heartbeated(token: str) -> object:
    return await create_hook(token=token, heartbeat_timeout="1h")


async def measure(seconds: float, every: float) -> None:
    copies: list[float] = []
    copy_state = dev_state.copy_state

    def counted(*args: Any, **kwargs: Any) -> int:
        copies.append(time.monotonic())
        return copy_state(*args, **kwargs)

    dev_state.copy_state = counted  # type: ignore[assignment]
    moto = MotoServer().start()
    try:
        async with LocalAWS(moto=moto) as local:
            assert local.client is not None and isinstance(local.world, AWSWorld)
            run = await local.client.start(heartbeated, "bench-beat")
            await run.wait_for_hook("bench-beat")
            with tempfile.TemporaryDirectory() as directory:
                snapshots = Snapshots(local.world, Path(directory), lambda: moto.changes, read_table=moto.read_table)
                await snapshots.save()
                copies.clear()
                moto.keep_first(snapshots.keep)
                await snapshots.start()
                answers: list[float] = []
                ends = time.monotonic() + seconds
                try:
                    while time.monotonic() < ends:
                        started = time.monotonic()
                        await local.client.heartbeat_hook("bench-beat")
                        answers.append(time.monotonic() - started)
                        await asyncio.sleep(max(0.0, every - (time.monotonic() - started)))
                finally:
                    await snapshots.stop()
                    moto.keep_first(None)
                hour = len(copies) * 3600 / seconds
                print(f"a heartbeat every {every:g} s for {seconds:g} s: {len(answers)} heartbeats, {len(copies)} "
                      f"copies ({hour:,.0f} an hour); a heartbeat's answer {statistics.median(answers) * 1000:.0f} ms "
                      f"median, {max(answers) * 1000:.0f} ms slowest")
    finally:
        dev_state.copy_state = copy_state  # type: ignore[assignment]
        moto.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description="copies of dev's state while a hook is heartbeated")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--every", type=float, nargs="+", default=[1.0, 10.0])
    args = parser.parse_args()
    print(f"load: {os.getloadavg()[0]:.1f} (1 min), {os.cpu_count()} cores")
    for every in args.every:
        asyncio.run(measure(args.seconds, every))


if __name__ == "__main__":
    main()
