"""``awsworld skip`` and ``awsworld dev --time-scale``, as an operator runs them: commands as processes against an
``awsworld dev`` process. A skipped 1-day sleep, 1-hour retry back-off and 1-day hook timeout each let the run
finish now, ``events`` shows the operator's act, ``replay`` of the run is ok; the ordinary mistakes are one line
with the documented exit code. Under ``--time-scale`` a 1-day sleep ends in seconds, as the log records, and
``describe`` shows the wait's real end."""

from __future__ import annotations

import json
import re
import textwrap
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from .test_cli import Dev, Runner, _start

SKIPCLI = '''
import asyncio

from awsworld import (HookHeartbeatTimeoutError, HookTimeoutError, RetryableError, create_hook, sleep, step,
                      workflow)

ATTEMPTS = {}


@workflow(name="skipcli.nap")
async def nap(order: str) -> str:
    await sleep("1d", name="cool-off")
    return f"shipped {order}"


@step(name="skipcli.charge", max_retries=3)
async def charge(order: str) -> str:
    ATTEMPTS[order] = ATTEMPTS.get(order, 0) + 1
    if ATTEMPTS[order] == 1:
        raise RetryableError("card service down", retry_after="1h")
    return f"receipt {order}"


@workflow(name="skipcli.pay")
async def pay(order: str) -> str:
    return await charge(order)


@workflow(name="skipcli.approve")
async def approve(order: str) -> str:
    try:
        async with create_hook(token=f"skipcli:{order}", timeout="1d") as hook:
            return f"approved {await hook}"
    except HookTimeoutError:
        return "no answer: cancelled"


@workflow(name="skipcli.beat")
async def beat(order: str) -> str:
    try:
        async with create_hook(token=f"skipcli-beat:{order}", timeout="1d", heartbeat_timeout="1h") as hook:
            return f"approved {await hook}"
    except HookHeartbeatTimeoutError:
        return "the approver went quiet"
    except HookTimeoutError:
        return "no answer: cancelled"


@workflow(name="skipcli.forever")
async def forever(order: str) -> str:
    async with create_hook(token=f"skipcli-forever:{order}") as hook:
        return str(await hook)


@workflow(name="skipcli.two")
async def two(order: str) -> str:
    await asyncio.gather(sleep("1d", name="first"), sleep("2d", name="second"))
    return "rested"


@workflow(name="skipcli.month")
async def month(order: str) -> str:
    await sleep("30d")
    return "a month later"
'''


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("skip-project")
    (root / "src").mkdir()
    (root / "src" / "skipcli.py").write_text(textwrap.dedent(SKIPCLI))
    return root


@pytest.fixture(scope="module")
def runners(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Runner]]:
    started = [Runner(tmp_path_factory.mktemp("skip-runner"))]
    yield started
    for runner in started:
        runner.close()


@pytest.fixture(scope="module")
def dev(project: Path, runners: list[Runner]) -> Iterator[Dev]:
    server = Dev(project, project / "state", runners, module="skipcli")
    yield server
    server.stop()


def _events(dev: Dev, run_id: str) -> list[dict[str, Any]]:
    result = dev("events", run_id, "--json")
    assert result.code == 0, result
    rows: list[dict[str, Any]] = json.loads(result.out)
    return rows


def _until(dev: Dev, run_id: str, event_type: str, count: int = 1, timeout: float = 30) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = _events(dev, run_id)
        if [r["eventType"] for r in rows].count(event_type) >= count:
            return rows
        time.sleep(0.1)
    raise AssertionError(f"run {run_id} has no {event_type} after {timeout} s: {_events(dev, run_id)}")


def _finishes(dev: Dev, run_id: str, expected: str) -> None:
    result = dev("result", run_id, "--wait", "30")
    assert result.code == 0 and json.loads(result.out) == expected, result
    replayed = dev("replay", run_id)
    assert replayed.code == 0 and "ok" in replayed.out, replayed


def test_skip_ends_a_day_long_sleep_now_and_events_show_the_operator(dev: Dev) -> None:
    run_id = _start(dev, "skipcli.nap", '["A-1"]')
    _until(dev, run_id, "wait_created")
    skipped = dev("skip", run_id)
    assert skipped.code == 0 and "skipped wait wait_1 'cool-off': until " in skipped.out, skipped
    # The due time as describe shows it (the day's date, the time of day in UTC, how far), not a bare ISO string.
    assert re.search(r": until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC \(in (1 d|23 h)", skipped.out), skipped
    _finishes(dev, run_id, "shipped A-1")
    [row] = [r for r in _events(dev, run_id) if r["eventType"] == "wait_completed"]
    assert row["detail"].startswith("wait skipped by operator (was due "), row
    assert "wait skipped by operator" in dev("events", run_id).out


def test_skip_ends_an_hours_retry_back_off(dev: Dev) -> None:
    run_id = _start(dev, "skipcli.pay", '["B-1"]')
    _until(dev, run_id, "step_retrying")
    skipped = dev("skip", run_id, "--wait", "skipcli.charge", "--json")
    assert skipped.code == 0, skipped
    answer = json.loads(skipped.out)
    assert answer["skipped"] is True and answer["wait"]["kind"] == "retry" and answer["wait"]["attempt"] == 2
    due = datetime.fromisoformat(answer["wait"]["due"])
    assert due > datetime.now(UTC) + timedelta(minutes=55)
    _finishes(dev, run_id, "receipt B-1")
    rows = _events(dev, run_id)
    assert any(r["eventType"] == "step_retrying" and r["detail"].startswith("back-off skipped by operator")
               for r in rows), rows
    [second] = [r for r in rows if r["eventType"] == "step_started" and "attempt 2" in r["detail"]]
    assert datetime.fromisoformat(second["createdAt"]) < due - timedelta(minutes=55)


def test_skip_ends_a_hooks_timeout(dev: Dev) -> None:
    run_id = _start(dev, "skipcli.approve", '["C-1"]')
    _until(dev, run_id, "wait_created")
    skipped = dev("skip", run_id)  # its one wait: the hook's timeout
    assert skipped.code == 0 and "skipped wait wait_2" in skipped.out, skipped
    _finishes(dev, run_id, "no answer: cancelled")


def test_a_hooks_timeout_and_heartbeat_deadline_are_told_apart(dev: Dev) -> None:
    """A hook with a timeout and a heartbeat timeout has two waits: the refusal to pick one says which is which
    (and when each is due, as `describe` says it), since skipping one sends the workflow down its own path."""
    run_id = _start(dev, "skipcli.beat", '["E-1"]')
    _until(dev, run_id, "wait_created", count=2)
    several = dev("skip", run_id).one_line_error(2)
    assert "wait_2 (timeout of hook skipcli-beat:E-1): until " in several, several
    assert "wait_3 (heartbeat deadline of hook skipcli-beat:E-1): until " in several, several
    # describe's times, not ISO ones (an hour away less the moments since the hook: "1 h" when under half a second)
    assert re.search(r"wait_3 \(heartbeat deadline of hook skipcli-beat:E-1\): until (\d{4}-\d\d-\d\d )?"
                     r"\d\d:\d\d:\d\d\.\d{3} UTC \(in (59 min|1 h)", several), several
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:", several), several
    skipped = dev("skip", run_id, "--wait", "wait_3")
    assert skipped.code == 0 and "wait_3 (heartbeat deadline of hook skipcli-beat:E-1)" in skipped.out, skipped
    _finishes(dev, run_id, "the approver went quiet")


def test_what_cannot_be_skipped_is_one_line_with_its_exit_code(dev: Dev) -> None:
    two = _start(dev, "skipcli.two", '["D-1"]')
    _until(dev, two, "wait_created", count=2)
    several = dev("skip", two).one_line_error(2)
    assert "has 2 waits: wait_1 'first'" in several and "wait_2 'second'" in several and "--wait ID" in several
    unknown = dev("skip", two, "--wait", "third").one_line_error(2)
    assert "no wait named 'third'" in unknown and "wait_1 'first'" in unknown
    assert dev("skip", two, "--wait", "second").code == 0 and dev("skip", two, "--wait", "wait_1").code == 0
    _finishes(dev, two, "rested")
    assert "is completed: it waits on nothing any more" in dev("skip", two).one_line_error(1)
    hooked = _start(dev, "skipcli.forever", '["D-2"]')
    _until(dev, hooked, "hook_created")
    assert "waits on no sleep, timeout or retry back-off" in dev("skip", hooked).one_line_error(1)
    assert dev("cancel", hooked).code == 0
    assert "no such run" in dev("skip", "wrun_nope").one_line_error(1)
    assert dev("skip").code == 2  # argparse: RUN is required


def test_dev_time_scale_runs_a_day_long_sleep_in_a_second(project: Path, runners: list[Runner]) -> None:
    scaled = Dev(project, project / "scaled-state", runners, "--time-scale", "86400", module="skipcli")
    try:
        assert any(line.startswith("time scale 86400: ") for line in scaled.banner), scaled.banner
        run_id = _start(scaled, "skipcli.nap", '["E-1"]')
        result = scaled("result", run_id, "--wait", "30")
        assert result.code == 0 and json.loads(result.out) == "shipped E-1", result
        exported = scaled("export", run_id)
        assert exported.code == 0, exported
        log = [json.loads(line) for line in exported.out.splitlines()]
        [created] = [e for e in log if e["eventType"] == "wait_created"]
        [completed] = [e for e in log if e["eventType"] == "wait_completed"]
        resume = datetime.fromisoformat(created["eventData"]["resumeAt"])
        assert created["eventData"]["timeScale"] == 86400
        assert resume - datetime.fromisoformat(created["createdAt"]) <= timedelta(seconds=1)
        assert resume <= datetime.fromisoformat(completed["createdAt"]) < resume + timedelta(minutes=5)
        assert "skipped" not in (completed.get("eventData") or {})  # it ended on its own, scaled
        assert scaled("replay", run_id).code == 0  # in a process without the setting

        month = _start(scaled, "skipcli.month", '["E-2"]')
        _until(scaled, month, "wait_created")
        described = json.loads(scaled("describe", month, "--json").out)
        [on_sleep] = described["waitingOn"]
        until = datetime.fromisoformat(on_sleep["until"])  # the real end: 30 days scaled, not a month away
        assert until - datetime.fromisoformat(described["startedAt"]) < timedelta(seconds=60)
        assert scaled("skip", month).code == 0
        assert json.loads(scaled("result", month, "--wait", "30").out) == "a month later"
    finally:
        scaled.stop()
