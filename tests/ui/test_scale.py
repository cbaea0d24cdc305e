"""What a page costs in World requests, counted (``CountingWorld``) and bounded: a 1,000-step run's page reads its
log once and a live refresh costs two requests whatever the run's length; a parent's page reads the status of at
most ``LINKED_STATUSES`` children. How long the pages take is ``bench/ui.py``'s business (it prints the figures,
on the in-memory World and on the emulator)."""

from __future__ import annotations

import asyncio
import re

import httpx

from awsworld import workflow
from awsworld.testing import WorkflowTestEnv
from awsworld.testing.counting import CountingWorld
from awsworld.ui import create_app
from awsworld.ui.api import LINKED_STATUSES

from .conftest import child, many

STEPS = 1000
CHILDREN = LINKED_STATUSES + 5


@workflow(name="ui.parent")
async def parent(n: int) -> int:
    return sum(await asyncio.gather(*(child(i) for i in range(n))))


def http_on(world: CountingWorld) -> httpx.AsyncClient:
    app = create_app(world)  # pyright: ignore[reportArgumentType]
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


async def test_a_thousand_step_run_page() -> None:
    async with WorkflowTestEnv() as env:
        run = await env.client.start(many, STEPS)
        assert await run.result() == sum(range(STEPS))
        world = CountingWorld(env.world)
        async with http_on(world) as http:
            page = await http.get(f"/runs/{run.run_id}")
            assert page.status_code == 200 and page.text.count("data-kind='step'") == STEPS
            events = len(await run.events())
            # runs.get, streams.list, and one events.list per 1,000 events (about 3 events per step)
            assert dict(world.counts) == {"runs.get": 1, "streams.list": 1, "events.list": -(-events // 1000)}
            world.counts.clear()
            refresh = await http.get(f"/api/runs/{run.run_id}/events", params={"since": "0"})
            assert refresh.status_code == 200
            assert dict(world.counts) == {"runs.get": 1, "events.list": 1}


async def test_a_parents_page_reads_a_bounded_number_of_child_statuses() -> None:
    async with WorkflowTestEnv() as env:
        run = await env.client.start(parent, CHILDREN)
        assert await run.result() == sum(2 * i for i in range(CHILDREN))
        children = [c.run_id for c in await run.children()]
        world = CountingWorld(env.world)
        async with http_on(world) as http:
            html = (await http.get(f"/runs/{run.run_id}")).text
            # its own runs.get, and one per child whose status the page shows: LINKED_STATUSES, not CHILDREN
            assert dict(world.counts) == {"runs.get": 1 + LINKED_STATUSES, "streams.list": 1, "events.list": 1}
            linked = re.search(r"<th>children</th><td>(.*?)</td>", html)
            assert linked is not None
            assert all(f"/runs/{c}'" in linked.group(1) for c in children)  # every child linked
            assert linked.group(1).count("<span class='status s-completed'>completed</span>") == LINKED_STATUSES
            assert f"status shown for the first {LINKED_STATUSES}" in linked.group(1)
            world.counts.clear()
            data = (await http.get(f"/api/runs/{run.run_id}")).json()
            assert dict(world.counts) == {"runs.get": 1 + LINKED_STATUSES, "events.list": 1}
            assert sorted(data["children"]) == sorted(children) and len(data["childStatuses"]) == LINKED_STATUSES
            world.counts.clear()
            child_page = await http.get(f"/runs/{children[-1]}")
            assert f"/runs/{run.run_id}'>{run.run_id}</a> <span class='status s-completed'>" in child_page.text
            assert world.counts["runs.get"] == 2  # the child, and its parent's status
