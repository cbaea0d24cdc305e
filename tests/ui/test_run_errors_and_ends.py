"""The run viewer shows what a failure needs to be fixed (the failing step or child run, the original type and
message, the tracebacks, escaped) and a run's end as it is: hooks closed by a cancel, streams ended (httpx on the
ASGI app over a WorkflowTestEnv, no sockets)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest

from awsworld import WorkflowRunFailedError, create_hook, get_writable, step, workflow
from awsworld.testing import WorkflowTestEnv
from awsworld.ui import create_app

XSS = "<img src=x onerror=alert(1)>"


@step(name="ui_errors.fetch", max_retries=1, retry_delay=1.0)
async def fetch(key: str) -> str:
    stock = {"kettle": "3"}
    return stock[key]


@workflow(name="ui_errors.fails")
async def fails(key: str) -> str:
    return await fetch(key)


LONG = "E" * 5000  # a message without a space: a token, a blob, a long JSON


@step(name="ui_errors.long", max_retries=1, retry_delay=1.0)
async def long_error() -> None:
    raise ValueError(LONG)


@workflow(name="ui_errors.long_flow")
async def long_flow() -> None:
    await long_error()


@workflow(name="ui_errors.parent")
async def parent(key: str) -> str:
    return await fails(key)  # a child run: its failure, not caught, is the parent's


@step(name="ui_errors.note", max_retries=0)
async def note() -> None:
    await get_writable("log").write("waiting for approval\n")


@workflow(name="ui_errors.waits")
async def waits() -> object:
    await note()
    return await create_hook(token="ui-errors:approve")


@dataclass
class Runs:
    env: WorkflowTestEnv
    failed: str
    cancelled: str


@pytest.fixture
async def runs() -> AsyncIterator[Runs]:
    async with WorkflowTestEnv() as env:
        failed = await env.client.start(fails, XSS)
        with pytest.raises(WorkflowRunFailedError):
            await failed.result()
        cancelled = await env.client.start(waits)
        await cancelled.wait_for_hook("ui-errors:approve")
        await env.client.cancel(cancelled.run_id, reason=f"customer left {XSS}")
        await env.world.runs.wait_for_terminal_status(cancelled.run_id, timeout=10)
        yield Runs(env, failed.run_id, cancelled.run_id)


@pytest.fixture
async def http(runs: Runs) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(runs.env.world)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        yield client


async def test_the_runs_error_names_the_step_the_type_and_the_traceback(http: httpx.AsyncClient, runs: Runs) -> None:
    data = (await http.get(f"/api/runs/{runs.failed}")).json()
    assert data["error"] == f"StepError: step 'ui_errors.fetch' failed after 2 attempts: KeyError: '{XSS}'"
    details = data["errorDetails"]
    assert (details["stepName"], details["attempt"], details["cause"]["type"]) == ("ui_errors.fetch", 2, "KeyError")
    assert "return stock[key]" in details["cause"]["stack"]

    page = (await http.get(f"/runs/{runs.failed}")).text
    assert XSS not in page, "every stored value is escaped"
    assert "<th>failed step</th>" in page and "<code>ui_errors.fetch</code>" in page
    assert "KeyError: &#x27;&lt;img src=x onerror=alert(1)&gt;&#x27;" in page
    assert "<th>traceback</th>" in page and "<pre class=tb>" in page and "return stock[key]" in page
    assert f"<th>re-run</th><td>once the cause is fixed, `awsworld rerun {runs.failed}` starts a new run" in page


async def test_the_runs_list_says_why_each_failed_run_failed(http: httpx.AsyncClient, runs: Runs) -> None:
    """The list said a run failed and nothing of why: each failed run meant opening its page. It has the error's
    short line (where, the original type and message), escaped; ``/api/runs`` the error's summary and code."""
    listed = {r["runId"]: r for r in (await http.get("/api/runs")).json()["runs"]}
    assert (listed[runs.failed]["error"], listed[runs.failed]["errorCode"]) == (
        f"StepError: step 'ui_errors.fetch' failed after 2 attempts: KeyError: '{XSS}'", "USER_ERROR")
    assert listed[runs.cancelled]["error"] is None
    page = (await http.get("/", params={"status": "failed"})).text
    assert XSS not in page and "<th>error</th>" in page
    assert ("<span class=err>step ui_errors.fetch: KeyError: &#x27;&lt;img src=x onerror=alert(1)&gt;&#x27;"
            "</span>") in page, page


async def test_a_childs_failure_the_parent_let_through_names_the_child_run_and_its_type() -> None:
    async with WorkflowTestEnv() as env:
        run = await env.client.start(parent, XSS)
        with pytest.raises(KeyError):  # the child's step's type, through the child and the parent
            await run.result()
        app = create_app(env.world)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
            page = (await client.get(f"/runs/{run.run_id}")).text
    child = f"{run.run_id}.step_1"
    assert XSS not in page, "every stored value is escaped"
    assert f"<th>failed child</th><td><a href='/runs/{child}'>{child}</a> (ui_errors.fails): " in page, page
    assert "KeyError: &#x27;&lt;img src=x onerror=alert(1)&gt;&#x27;" in page and "return stock[key]" in page


async def test_a_long_error_is_cut_in_the_event_rows_and_whole_a_click_away() -> None:
    """Each error event's row, each attempt's bar and the summary held the message whole: a 32 KB message on every
    attempt made a page of hundreds of KB, screens of it above the waterfall, and a message without spaces widened
    the table past the window. A row cuts it as a value is, with a button that loads it whole (and the
    traceback); the summary cuts it with the whole under a fold; a long token wraps."""
    async with WorkflowTestEnv() as env:
        run = await env.client.start(long_flow)
        with pytest.raises(ValueError):
            await run.result()
        app = create_app(env.world)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
            page = (await client.get(f"/runs/{run.run_id}")).text
            events = await run.events()
            retried = next(e for e in events if e.event_type == "step_retrying")
            whole = (await client.get(f"/api/runs/{run.run_id}/events/{retried.event_id}/value")).json()
    cut = f"<span class=err>ValueError: {LONG[:300 - len('ValueError: ')]}…</span>"
    assert page.count(cut) == 3, "step_retrying, step_failed and the summary's failed step: cut to 300 characters"
    assert f"<button data-error='{retried.event_id}'>whole error and traceback (5,012 chars)</button>" in page
    assert whole["error"] == f"ValueError: {LONG}" and whole["traceback"].startswith("Traceback")
    assert f"{cut}<details><summary>whole message (5,012 chars)</summary><pre class=tb>ValueError: {LONG}</pre>" \
           "</details>" in page, "the summary's failed step: whole under a fold"
    assert page.count(LONG) == 2, "whole only under the summary's folds: the message's and the traceback's"
    assert "#1 ValueError: EEE" in page and "; #2 ValueError: EEE" in page, "the lane: each attempt's, cut"
    assert ".err{color:#a11;overflow-wrap:anywhere}" in page, "a long token wraps rather than widen the page"


async def test_an_error_event_shows_its_traceback_on_demand(http: httpx.AsyncClient, runs: Runs) -> None:
    events = (await runs.env.client.get_run(runs.failed).events())
    retried = next(e for e in events if e.event_type == "step_retrying")
    page = (await http.get(f"/runs/{runs.failed}")).text
    assert f"<button data-error='{retried.event_id}'>traceback</button>" in page
    whole = (await http.get(f"/api/runs/{runs.failed}/events/{retried.event_id}/value")).json()
    assert whole["error"] == f"KeyError: '{XSS}'"
    assert whole["errorDetails"]["type"] == "KeyError"
    assert whole["traceback"].startswith("Traceback (most recent call last):")
    assert "return stock[key]" in whole["traceback"] and whole["traceback"].endswith(f"KeyError: '{XSS}'")


async def test_a_cancelled_runs_hook_shows_closed_and_its_stream_ended(http: httpx.AsyncClient, runs: Runs) -> None:
    data = (await http.get(f"/api/runs/{runs.cancelled}")).json()
    assert [(h["token"], h["state"], h["disposed"]) for h in data["hooks"]] == [("ui-errors:approve", "closed", False)]
    hook_lane = next(lane for lane in data["lanes"] if lane["kind"] == "hook")
    assert hook_lane["status"] == "closed" and hook_lane["endedAt"] is not None
    assert (await http.get(f"/api/runs/{runs.cancelled}/streams")).json() == [
        {"name": "log", "chunks": 1, "closed": True}]
    page = (await http.get(f"/runs/{runs.cancelled}")).text
    assert "<td><code>ui-errors:approve</code></td><td>hook</td><td>closed</td>" in page
    # The reason `cancel --reason` gave, in the summary as describe's "reason" line (it was only in an event row).
    assert data["cancelReason"] == f"customer left {XSS}"
    assert "<tr><th>reason</th><td>customer left &lt;img src=x onerror=alert(1)&gt;</td></tr>" in page, page
