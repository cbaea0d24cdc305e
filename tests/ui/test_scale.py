"""A 1,000-step run's page: the World requests it costs are counted (and bounded), and it renders fast; a live
refresh costs two World requests whatever the run's length."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import httpx

from awsworld.testing import WorkflowTestEnv
from awsworld.ui import create_app

from .conftest import many

STEPS = 1000


class Counting:
    """A World wrapper counting the calls the UI makes (``runs.get``, ``events.list``, ...)."""

    def __init__(self, inner: Any, counts: Counter[str] | None = None, prefix: str = "") -> None:
        self._inner, self.counts, self._prefix = inner, counts if counts is not None else Counter[str](), prefix

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name in ("runs", "steps", "events", "hooks", "streams"):
            return Counting(value, self.counts, f"{name}.")
        if callable(value) and self._prefix:
            self.counts[self._prefix + name] += 1
        return value


async def test_a_thousand_step_run_page() -> None:
    async with WorkflowTestEnv() as env:
        run = await env.client.start(many, STEPS)
        assert await run.result() == sum(range(STEPS))
        world = Counting(env.world)
        app = create_app(world)  # pyright: ignore[reportArgumentType]
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
            started = time.perf_counter()
            page = await http.get(f"/runs/{run.run_id}")
            elapsed = time.perf_counter() - started
            assert page.status_code == 200 and page.text.count("data-kind='step'") == STEPS
            events = len(await run.events())
            # runs.get, streams.list, and one events.list per 1,000 events (about 4 events per step)
            assert dict(world.counts) == {"runs.get": 1, "streams.list": 1, "events.list": -(-events // 1000)}
            print(f"{STEPS} steps, {events} events: page {elapsed * 1000:.0f} ms, {len(page.content):,} bytes")
            assert elapsed < 1.0, f"the page took {elapsed:.2f} s"
            world.counts.clear()
            refresh = await http.get(f"/api/runs/{run.run_id}/events", params={"since": "0"})
            assert refresh.status_code == 200
            assert dict(world.counts) == {"runs.get": 1, "events.list": 1}
