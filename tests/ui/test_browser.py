"""End to end in a real headless Chromium (the OS package, driven by Playwright): the demo-like run's page shows
every step on the timeline, and a running run's page follows it live until it completes. Screenshots go to the
test's tmp_path. The docs' pictures of the run viewer are real runs of the demo's workflow (``order.process``),
taken here: ``AWSWORLD_UI_SCREENSHOT=docs/images`` writes them there (``ui-run.png``, ``ui-runs.png``).

Skips only when no Chromium binary exists (``apt-get install -y chromium``; .ci/run tries it).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from awsworld import create_hook, step, workflow
from awsworld.examples.order import process_order
from awsworld.settings import SETTINGS
from awsworld.testing import WorkflowTestEnv
from awsworld.ui import create_app, serve

from .conftest import Demo, live_flow, ordered

CHROMIUM = next((p for p in ("/usr/bin/chromium", "/usr/bin/chromium-browser", shutil.which("chromium") or "")
                 if p and os.path.exists(p)), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium binary (/usr/bin/chromium): "
                                "apt-get install -y chromium to run the browser test")


@contextlib.asynccontextmanager
async def served(world: Any, *, allow_writes: bool = False) -> AsyncIterator[str]:
    """The UI on ``world`` served by uvicorn on 127.0.0.1 at a free port, on this test's event loop (the
    MemoryWorld is used from one loop only); yields its base URL."""
    server = serve(create_app(world, allow_writes=allow_writes), port=0, signals=False)
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 (uvicorn offers a flag, no event)
        await asyncio.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    pytest.importorskip("playwright", reason="Playwright is not installed: pip install -e '.[test]'")
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        chromium = await p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            await chromium.close()


async def test_demo_run_page_shows_every_step(demo: Demo, browser: Any, tmp_path: Path) -> None:
    steps = await demo.env.client.get_run(demo.run_id).steps()
    async with served(demo.env.world) as base:
        page = await browser.new_page(viewport={"width": 1280, "height": 900})
        console: list[str] = []
        page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
        response = await page.goto(f"{base}/runs/{demo.run_id}")
        assert response.status == 200
        lanes = page.locator("#timeline .lane[data-kind=step]")
        assert await lanes.count() == len(steps) == 5
        names = sorted(await lanes.evaluate_all("els => els.map(e => e.dataset.name)"))
        assert names == sorted(s.step_name if s.step_name != "awsworld.start_child" else "child run" for s in steps)
        for lane in await lanes.all():  # every step has a visible bar
            assert await lane.locator(".bar").count() >= 1
        assert await page.locator("#timeline .lane[data-kind=wait]").count() == 1
        assert await page.locator("#status").text_content() == "completed"
        dialogs: list[str] = []
        page.on("dialog", lambda d: dialogs.append(d.message))
        await page.click("button[data-stream=progress]")
        await page.wait_for_selector("#stream-progress")
        assert "<script>alert(1)</script>" in (await page.text_content("#stream-progress") or "")
        assert dialogs == []  # the payload stayed text
        await page.click("button[data-error]")  # the retried attempt's error: its traceback on demand
        traceback = await page.wait_for_selector("#events pre.tb")
        text = await traceback.text_content() or ""
        assert text.startswith("ConnectionError: payment API timed out\nTraceback (most recent call last):")
        assert 'raise ConnectionError("payment API timed out")' in text
        shot = tmp_path / "run.png"
        await page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
        await page.goto(base)
        assert await page.locator(f"a[href='/runs/{demo.run_id}']").count() == 1
        assert console == []  # (each page's request of /favicon.ico was a 404 there)


async def test_running_run_page_follows_live(browser: Any, tmp_path: Path) -> None:
    async with WorkflowTestEnv() as env:
        run = await env.client.start(live_flow)
        await run.wait_for_hook("live:go")
        async with served(env.world) as base:
            page = await browser.new_page()
            await page.goto(f"{base}/runs/{run.run_id}")
            assert await page.locator("main").get_attribute("data-live") == "1"
            assert await page.locator("#timeline .lane[data-kind=hook]").get_attribute("data-status") == "waiting"
            await page.click("button[data-stream=log]")
            await page.wait_for_function("document.getElementById('stream-log')?.textContent.includes('before')")
            await env.client.resume_hook("live:go", {"go": True})
            assert await run.result() == {"go": True}
            # the page's poll (every 2 s) picks up the new events and re-renders the timeline
            await page.wait_for_function("document.getElementById('status').textContent === 'completed'",
                                         timeout=10_000)
            assert await page.locator("#timeline .lane[data-kind=step]").count() == 3
            await page.wait_for_function("document.getElementById('stream-log').dataset.closed === '1'")
            assert await page.text_content("#stream-log") == "before the hook\nafter the hook\n"
            assert await page.locator("#timeline .lane[data-kind=hook]").get_attribute("data-status") == "received"
            assert await page.locator("#events tr", has_text="run_completed").count() == 1
            await page.screenshot(path=str(tmp_path / "live.png"))


@step(name="ui.burst.tick")
async def burst_tick(i: int) -> int:
    return i


@workflow(name="ui.burst")  # waits on a hook, then writes more than one events page (1,000) at once and ends
async def burst(n: int) -> int:
    async with create_hook(token="burst:go") as hook:
        await hook
    return sum(await asyncio.gather(*(burst_tick(i) for i in range(n))))


async def rows_of(page: Any) -> dict[str, str]:
    """The run page's summary table, label -> text (a label shown twice keeps its last text)."""
    cells = await page.locator("main > table").first.locator("tr").evaluate_all(
        "rows => rows.map(r => [r.querySelector('th').textContent, r.querySelector('td').textContent])")
    return dict(cells)


async def test_a_page_open_when_its_run_ends_says_how_it_ended_and_shows_every_event(browser: Any) -> None:
    """The page of a run waiting on a hook, left open while the run is resumed and ends with 1,500 more events:
    the live refresh reads every page of them (it stopped at the first once the run was over, leaving 500 out),
    and the summary says how the run ended (it kept "waits on hook burst:go" and an empty "completed" until a
    reload), as does the hook's row."""
    async with WorkflowTestEnv() as env:
        run = await env.client.start(burst, 500)
        await run.wait_for_hook("burst:go")
        async with served(env.world) as base:
            page = await browser.new_page()
            await page.goto(f"{base}/runs/{run.run_id}")
            before = await rows_of(page)
            assert before["waits on"].startswith("hook burst:go") and before["completed"] == ""
            await env.client.resume_hook("burst:go", {})
            assert await run.result() == sum(range(500))
            await page.wait_for_selector("main[data-live='0']", state="attached", timeout=15_000)  # its last poll
            after = await rows_of(page)
            assert "waits on" not in after and after["completed"] != "" and after["status"] == "completed"
            assert await page.locator("#hooks td", has_text="open").count() == 0
            whole = await browser.new_page()
            await whole.goto(f"{base}/runs/{run.run_id}")
            assert await whole.locator("#events tr").count() > 1500
            assert await page.locator("#events tr").count() == await whole.locator("#events tr").count()


async def test_a_run_cancelled_from_its_page_shows_its_reason_and_no_more_buttons(browser: Any) -> None:
    async with WorkflowTestEnv() as env:
        run = await env.client.start(burst, 1)
        await run.wait_for_hook("burst:go")
        async with served(env.world, allow_writes=True) as base:
            page = await browser.new_page()
            await page.goto(f"{base}/runs/{run.run_id}")
            assert await page.locator("button[data-write]").count() == 2  # cancel, and the hook's resume
            await page.click("button[data-write=cancel]")
            await page.wait_for_selector("main[data-live='0']", state="attached", timeout=15_000)  # its last poll
            after = await rows_of(page)
            assert after["status"] == "cancelled" and after["reason"] == "cancelled from awsworld ui"
            assert "waits on" not in after and after["completed"] != ""
            assert await page.locator("button[data-write]").count() == 0  # a cancelled run takes no more writes


async def test_a_codec_hooks_resume_box_sends_the_typed_json_object_as_the_codecs_text(browser: Any) -> None:
    """What a user types in the resume box of a ``create_hook(codec=PydanticCodec(Order))`` hook, a JSON object,
    reaches the codec as its text: the run completes with the decoded model (parsed, it was a dict the codec
    refused, failing the run)."""
    async with WorkflowTestEnv() as env:
        run = await env.client.start(ordered)
        await run.wait_for_hook("ui-order:1")
        async with served(env.world, allow_writes=True) as base:
            page = await browser.new_page()
            await page.goto(f"{base}/runs/{run.run_id}")
            await page.fill("textarea[id^=payload-]", '{"sku": "tea", "quantity": 1}')
            await page.click("button[data-write=resume]")
            await page.wait_for_function("document.querySelector('button[data-write=resume]').textContent === 'done'")
            assert await run.result() == {"sku": "tea", "quantity": 1}


async def test_the_docs_screenshots_are_real_runs_of_the_demo(browser: Any, tmp_path: Path) -> None:
    """The demo's ``order.process`` as a user runs it (three orders: two shipped, one waiting for its address), its
    run page and the run list, as the docs show them (``docs/how-to/run-viewer.md``)."""
    async with WorkflowTestEnv() as env:
        runs = []
        for order_id, items in (("A-17", ["kettle", "mugs", "tea"]), ("A-18", ["teapot"]), ("A-19", ["cups"])):
            run = await env.client.start(process_order, order_id, items, 42.5)
            await run.wait_for_hook(f"address:{order_id}")
            runs.append(run)
        for order_id, run in zip(("A-17", "A-18"), runs, strict=False):
            await env.client.resume_hook(f"address:{order_id}", {"address": "1 Main St"})
            assert (await run.result())["tracking"] == f"tracking-{order_id}"
        async with served(env.world) as base:
            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            await page.goto(f"{base}/runs/{runs[0].run_id}")
            assert await page.locator("#status").text_content() == "completed"
            names = await page.locator("#timeline .lane[data-kind=step]").evaluate_all(
                "els => els.map(e => e.dataset.name)")
            assert sorted(names) == sorted(["order.reserve"] * 3 + ["order.charge", "order.pack", "order.ship"])
            run_page = tmp_path / "ui-run.png"
            await page.screenshot(path=str(run_page), full_page=True)
            await page.goto(base)
            assert await page.locator("a[href^='/runs/wrun_']").count() >= 3
            run_list = tmp_path / "ui-runs.png"
            await page.set_viewport_size({"width": 1280, "height": 260})
            await page.screenshot(path=str(run_list))
    for shot in (run_page, run_list):
        assert shot.stat().st_size > 10_000
        if SETTINGS.ui_screenshot is not None:
            shutil.copy(shot, SETTINGS.ui_screenshot / shot.name)
