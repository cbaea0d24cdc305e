"""The UI says what waits for a limit across runs: a pending run's start (its place, who holds the slots) and a
step waiting for a slot of its step's limit, on the run page and in the JSON API (httpx on the app)."""

from __future__ import annotations

import asyncio

import httpx

from awsworld import Concurrency, Run, create_hook, step, workflow
from awsworld.testing import WorkflowTestEnv
from awsworld.ui import create_app

RELEASE: dict[str, asyncio.Event] = {}


@workflow(name="ui.limited", concurrency=Concurrency(1, key=lambda key: key))
async def limited(key: str) -> str:
    async with create_hook(token=f"ui-limited:{key}") as hook:
        await hook
    return key


@step(name="ui.exclusive", concurrency=1)
async def exclusive(n: int) -> int:
    await RELEASE.setdefault("exclusive", asyncio.Event()).wait()
    return n


@workflow(name="ui.exclusives")
async def exclusives(n: int) -> int:
    return await exclusive(n)


async def test_the_run_page_and_api_say_what_waits_for_a_limit() -> None:
    async with WorkflowTestEnv() as env:
        holder = await env.client.start(limited, "k")
        await holder.wait_for_hook("ui-limited:k")
        waiting = await env.client.start(limited, "k")
        RELEASE["exclusive"] = asyncio.Event()
        running = await env.client.start(exclusives, 1)
        second = await env.client.start(exclusives, 2)
        app = create_app(env.world)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
            waits = (await http.get(f"/api/runs/{waiting.run_id}")).json()["limitWaits"]
            assert waits == [{"kind": "slot", "limit": "workflow:ui.limited", "key": "k", "place": 1, "of": 1,
                              "heldBy": [f"r:{holder.run_id}"], "concurrency": 1, "total": None,
                              "paused": False}]
            page = (await http.get(f"/runs/{waiting.run_id}")).text
            # describe's words (client.waits.describe_waits): "waits on  its start: a slot of ..."
            assert ("<th>waits on</th><td>its start: a slot of workflow:ui.limited key &#x27;k&#x27; (place 1 of 1"
                    in page)
            blocked: list[Run[int]] = []
            for _ in range(500):  # (until the second step has asked for the slot the first holds: its body runs)
                blocked = [r for r in (running, second)
                           if (await http.get(f"/api/runs/{r.run_id}")).json()["limitWaits"]]
                if blocked:
                    break
                await asyncio.sleep(0.01)
            assert len(blocked) == 1  # one step runs, the other waits for the step's one slot
            blocked_id = blocked[0].run_id
            [step_wait] = (await http.get(f"/api/runs/{blocked_id}")).json()["limitWaits"]
            assert (step_wait["kind"], step_wait["limit"], step_wait["name"], step_wait["place"]) == (
                "slot", "step:ui.exclusive", "ui.exclusive", 1)
            assert "step ui.exclusive, not started: it waits for a slot of step:ui.exclusive" in (
                await http.get(f"/runs/{blocked_id}")).text
        RELEASE["exclusive"].set()
        await env.client.resume_hook("ui-limited:k", "go")
        assert sorted([await running.result(), await second.result()]) == [1, 2]
        assert await holder.result() == "k"


async def test_the_run_list_says_which_pending_run_is_queued_behind_its_limit() -> None:
    """The run list showed a run waiting for its slot as a plain ``pending``: it says ``queued`` and for which
    limit (the JSON API: ``queued``, the status staying ``pending``)."""
    async with WorkflowTestEnv() as env:
        holder = await env.client.start(limited, "q")
        await holder.wait_for_hook("ui-limited:q")
        waiting = await env.client.start(limited, "q")
        app = create_app(env.world)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
            listed = {r["runId"]: r for r in (await http.get("/api/runs")).json()["runs"]}
            assert listed[waiting.run_id]["status"] == "pending"
            assert listed[waiting.run_id]["queued"] == {
                "limit": "workflow:ui.limited", "key": "q", "place": 1, "of": 1, "held": 1, "concurrency": 1,
                "heldInAll": None, "total": None, "paused": False}
            assert listed[holder.run_id]["queued"] is None
            page = (await http.get("/")).text
            assert "queued: workflow:ui.limited key &#x27;q&#x27; (1/1 held, place 1 of 1)" in page
            assert page.count("queued: ") == 1
        await env.client.resume_hook("ui-limited:q", "go")
        assert await waiting.wait_for_hook("ui-limited:q") is not None
        await env.client.resume_hook("ui-limited:q", "go")
        assert await waiting.result() == "q"
