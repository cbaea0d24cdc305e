"""The run viewer's page load for a 1,000-step run: ``python bench/ui.py`` (about four minutes, nearly all of it
building the fan-out run on the emulator).

Two 1,000-step runs, each built for real by the runtime: a fan-out (``asyncio.gather``: 999 steps queued as step
messages, one inline; 3,003 events in about 230 blocks) and a serial run (each step inline, each write one
block: 3,003 events in about 1,000 blocks, the most items a 1,000-step log reads). Each on the emulator
(``LocalAWS``: moto's server, in this process as under ``awsworld dev``) and on the in-memory World. Then the
UI's app (``awsworld.ui.create_app``, called in-process through httpx's ASGI transport) serves:

* first view: ``GET /runs/ID`` on a fresh app (nothing remembered), best of ``--repeat`` fresh apps;
* again: the same page once more on the same app (what a reload costs);
* refresh: the live page's poll, ``GET /api/runs/ID/events?since=N``.

For each it prints wall seconds and this process's CPU seconds (moto's work included: on a busy machine the CPU
figure is the steadier one), the World requests the app made (``CountingWorld``) and, on the emulator, the AWS
requests under them and the DynamoDB items they returned (what moto spends its time serializing, and what a
Query's size grows with). ``--profile`` prints a cProfile of one first view of each run on the emulator (this
thread only: moto's thread shows as the time spent waiting in ``select``).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from awsworld import step, workflow
from awsworld.local import LocalAWS
from awsworld.testing import WorkflowTestEnv
from awsworld.testing.counting import CountingWorld
from awsworld.ui import create_app

STEPS = 1000


@step(name="bench.ui.tick")
async def tick(i: int) -> int:
    return i


@workflow(name="bench.ui.fanout")
async def fanout(n: int) -> int:
    return sum(await asyncio.gather(*(tick(i) for i in range(n))))


@workflow(name="bench.ui.serial")
async def serial(n: int) -> int:
    return sum([await tick(i) for i in range(n)])


SHAPES = {"fanout": fanout, "serial": serial}


@dataclass
class Load:
    label: str
    seconds: float
    cpu: float  # this process's CPU seconds: the app's and, on the emulator, moto's (it runs in-process)
    world: Counter[str]
    aws: Counter[str]
    size: int

    def line(self) -> str:
        world = ", ".join(f"{k} {v}" for k, v in sorted(self.world.items()))
        aws = ", ".join(f"{k.removeprefix('dynamodb.')} {v}" for k, v in sorted(self.aws.items()))
        tail = f"\n  {'':<12} AWS: {aws}" if aws else ""
        return (f"  {self.label:<12} {self.seconds:6.3f} s (CPU {self.cpu:.3f} s)  {self.size:>9,} bytes  "
                f"World: {world}{tail}")


class AWSCounts:
    """The AWS requests an AWSWorld makes, and the DynamoDB items its Queries and reads return (what the
    emulator spends its time serializing, and what DynamoDB bills reads by): counted from botocore's events."""

    def __init__(self, world: Any) -> None:
        self.items = 0
        self.stats = getattr(world, "stats", None)
        clients = getattr(world, "clients", None)
        if clients is not None:
            clients.register_handler("after-call.dynamodb", self._returned)

    def _returned(self, parsed: Any = None, **_: Any) -> None:
        if isinstance(parsed, dict):
            self.items += len(parsed.get("Items") or ()) + (1 if parsed.get("Item") else 0)
            self.items += sum(len(v) for v in (parsed.get("Responses") or {}).values())

    def now(self) -> Counter[str]:
        counts = Counter(self.stats.requests) if self.stats is not None else Counter[str]()
        if self.stats is not None:
            counts["items returned"] = self.items
        return counts


async def timed(label: str, counting: CountingWorld, aws: AWSCounts,
                fetch: Callable[[], Awaitable[httpx.Response]]) -> Load:
    counting.counts.clear()
    before = aws.now()
    started, cpu = time.perf_counter(), time.process_time()
    response = await fetch()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert response.status_code == 200, response.text[:500]
    return Load(label, seconds, cpu, Counter(counting.counts), aws.now() - before, len(response.content))


def client(counting: CountingWorld) -> httpx.AsyncClient:
    app = create_app(counting)  # pyright: ignore[reportArgumentType]
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


async def measure(world: Any, run_id: str, repeat: int) -> list[Load]:
    counting = CountingWorld(world)
    aws = AWSCounts(world)
    firsts: list[Load] = []
    for _ in range(repeat):
        async with client(counting) as http:
            firsts.append(await timed("first view", counting, aws, lambda: http.get(f"/runs/{run_id}")))
    first = min(firsts, key=lambda load: load.seconds)
    steps_shown = 0
    async with client(counting) as http:
        page = await http.get(f"/runs/{run_id}")
        steps_shown = page.text.count("data-kind='step'")
        again = await timed("again", counting, aws, lambda: http.get(f"/runs/{run_id}"))
        refresh = await timed("refresh", counting, aws,
                              lambda: http.get(f"/api/runs/{run_id}/events", params={"since": "0"}))
    assert steps_shown == STEPS, f"the page shows {steps_shown} steps, not {STEPS}"
    return [first, again, refresh]


async def profile(world: Any, run_id: str) -> str:
    counting = CountingWorld(world)
    async with client(counting) as http:
        profiler = cProfile.Profile()
        profiler.enable()
        await http.get(f"/runs/{run_id}")
        profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(35)
    return out.getvalue()


async def on_emulator(shapes: list[str], repeat: int, show_profile: bool) -> None:
    async with LocalAWS() as local:
        assert local.client is not None and local.poller is not None
        runs = {}
        for shape in shapes:
            started = time.perf_counter()
            run = await local.client.start(SHAPES[shape], STEPS)
            assert await run.result(timeout=900) == sum(range(STEPS))
            runs[shape] = run
            print(f"emulator (moto), {shape}: built a {STEPS:,}-step run ({len(await run.events()):,} events) in "
                  f"{time.perf_counter() - started:.1f} s")
        await local.poller.stop()  # nothing left to run: its long polls would share the CPU and the counts
        for shape, run in runs.items():
            print(f"emulator (moto), {shape}:")
            for load in await measure(local.world, run.run_id, repeat):
                print(load.line())
            if show_profile:
                print(await profile(local.world, run.run_id))


async def in_memory(shapes: list[str], repeat: int) -> None:
    async with WorkflowTestEnv() as env:
        for shape in shapes:
            run = await env.client.start(SHAPES[shape], STEPS)
            assert await run.result() == sum(range(STEPS))
            print(f"in memory, {shape}: {STEPS:,}-step run, {len(await run.events()):,} events")
            for load in await measure(env.world, run.run_id, repeat):
                print(load.line())


async def main_async(shapes: list[str], repeat: int, show_profile: bool, memory_only: bool) -> None:
    await in_memory(shapes, repeat)
    if not memory_only:
        await on_emulator(shapes, repeat, show_profile)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="fresh apps for the first view (best of)")
    parser.add_argument("--profile", action="store_true", help="cProfile one first view on the emulator")
    parser.add_argument("--memory-only", action="store_true", help="skip the emulator")
    parser.add_argument("--shape", choices=sorted(SHAPES), action="append",
                        help="only this run (repeatable; default: both)")
    args = parser.parse_args(argv)
    asyncio.run(main_async(args.shape or list(SHAPES), args.repeat, args.profile, args.memory_only))


if __name__ == "__main__":
    main()
