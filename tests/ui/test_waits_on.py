"""The run page says what a live run waits on, in ``awsworld describe``'s words (one implementation:
``client.waits.describe_waits``): a hook with its timeout, a sleep, a step's retry. The page once said nothing while
``describe`` said "waits on hook approve:7 (no payload yet), times out ..."."""

from __future__ import annotations

from datetime import timedelta
from html import escape
from typing import Any

import httpx

from awsworld import RetryableError, create_hook, sleep, step, step_metadata, workflow
from awsworld.client.waits import waits_text
from awsworld.testing import WorkflowTestEnv
from awsworld.ui import create_app


@step(name="ui_waits.busy", max_retries=2, retry_delay=3600)
async def busy() -> str:
    if step_metadata().attempt == 1:
        raise RetryableError("warehouse busy")
    return "ok"


@workflow(name="ui_waits.approval")
async def approval(order: str) -> str:
    async with create_hook(token=f"approve:{order}", timeout=timedelta(days=7)) as hook:
        await hook
    await sleep(timedelta(days=30))
    return await busy()


async def test_the_run_page_says_what_describe_says_the_run_waits_on() -> None:
    async with WorkflowTestEnv() as env:
        run = await env.client.start(approval, "7")
        await run.wait_for_hook("approve:7")
        app = create_app(env.world)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:

            async def shown() -> tuple[str, dict[str, Any]]:
                described = await waits_text(env.world, run.run_id)  # describe's text, "; "-joined
                page = (await http.get(f"/runs/{run.run_id}")).text
                api = (await http.get(f"/api/runs/{run.run_id}")).json()
                for line in described.split("; "):
                    assert f"<th>waits on</th><td>{escape(line)}</td>" in page, (line, page)
                return described, api

            described, api = await shown()
            assert described.startswith("hook approve:7 (no payload yet), times out ")
            assert [w["kind"] for w in api["waitingOn"]] == ["hook"]

            await env.client.resume_hook("approve:7", "yes")
            await env.idle()
            described, api = await shown()
            assert described.startswith("a sleep until ")
            assert [w["kind"] for w in api["waitingOn"]] == ["sleep"]

            await env.sleep("30d")
            await env.idle()
            described, api = await shown()
            assert described.startswith("a retry of step ui_waits.busy at ")
            assert [w["kind"] for w in api["waitingOn"]] == ["retry"]

            assert await run.result() == "ok"
            page = (await http.get(f"/runs/{run.run_id}")).text
            assert "waits on" not in page
