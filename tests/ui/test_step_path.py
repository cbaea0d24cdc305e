"""Whether each step attempt ran inline (in the flow's replay loop) or queued (from a step message of its own):
recorded on ``step_started`` by the runtime, kept by the World (memory, and the AWS World on moto, where the
event is read back from DynamoDB), and shown on the run page and in its JSON."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from awsworld import step, step_metadata, workflow
from awsworld.local import LocalAWS, MotoServer
from awsworld.testing import WorkflowTestEnv
from awsworld.ui import create_app


@step(name="ui.path.one")
async def one(i: int) -> int:
    return i


@step(name="ui.path.flaky", max_retries=1, retry_delay=0.5)
async def flaky() -> str:
    if step_metadata().attempt == 1:
        raise ConnectionError("the first attempt fails on purpose")
    return "ok"


@workflow(name="ui.path")
async def paths() -> int:
    first = await one(0)  # the only pending step: the flow runs it (declared born running)
    fan = await asyncio.gather(one(1), one(2), one(3))  # the flow runs one, queues two step messages
    await flaky()  # attempt 1 inline; it fails, and its retry is a step message
    return first + sum(fan)


@pytest.fixture(params=["memory", "moto"])
async def ran(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Any, str]]:
    """A finished ``paths`` run: its World (memory, or an AWSWorld on moto with the local poller) and run id."""
    if request.param == "memory":
        async with WorkflowTestEnv() as env:
            run = await env.client.start(paths)
            assert await run.result() == 6
            yield env.world, run.run_id
        return
    moto: MotoServer = request.getfixturevalue("moto_server")
    async with LocalAWS("moto", moto=moto) as local:
        assert local.client is not None
        run = await local.client.start(paths)
        assert await run.result(timeout=60) == 6
        yield local.world, run.run_id


async def test_each_attempt_is_labelled_inline_or_queued(ran: tuple[Any, str]) -> None:
    world, run_id = ran
    page = await world.events.list(run_id)
    names = {e.correlation_id: (e.event_data or {}).get("stepName") for e in page.data
             if e.event_type == "step_created"}
    starts = [(names[e.correlation_id], (e.event_data or {}).get("inline")) for e in page.data
              if e.event_type == "step_started"]
    # The mark round-trips through the World; a queued attempt carries none (it costs no bytes).
    assert Counter(starts) == Counter({("ui.path.one", True): 2, ("ui.path.one", None): 2,
                                       ("ui.path.flaky", True): 1, ("ui.path.flaky", None): 1})
    app = create_app(world)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        data = (await http.get(f"/api/runs/{run_id}")).json()
        html = (await http.get(f"/runs/{run_id}")).text
    lanes = [lane for lane in data["lanes"] if lane["kind"] == "step"]
    assert Counter((lane["name"], lane["path"]) for lane in lanes) == Counter(
        {("ui.path.one", "inline"): 2, ("ui.path.one", "queued"): 2, ("ui.path.flaky", "mixed"): 1})
    retried = next(lane for lane in lanes if lane["name"] == "ui.path.flaky")
    assert [(a["outcome"], a["inline"]) for a in retried["attempts"]] == [("retrying", True), ("completed", False)]
    assert html.count("data-path='inline'") == 2 and html.count("data-path='queued'") == 2
    assert html.count("data-path='mixed'") == 1
    assert html.count("bar b-completed inl") == 2 and html.count("bar b-retrying inl") == 1  # the marked bars
    assert "ran inline, in the flow's replay loop" in html  # the legend says what the stripe means
