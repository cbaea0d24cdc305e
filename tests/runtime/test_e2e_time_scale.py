"""``AWSWORLD_TIME_SCALE`` (``awsworld dev --time-scale``): every wait of a run ends that many times sooner (a
1-day sleep, a 1-hour retry back-off, a 1-day hook timeout, a poll's hourly schedule and 1-day timeout), on the
in-memory World and on the emulator. Asserted on what the log records (the real end of each wait and the factor),
never on wall time; the same log replays with the setting and without it, and code whose duration changed still
diverges."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest

from awsworld import (
    HookTimeoutError,
    PollTimeoutError,
    RetryableError,
    create_hook,
    poll_until,
    sleep,
    step,
    workflow,
)
from awsworld.client.replay import read_run, replay_events
from awsworld.world.events import Event

from .conftest import BOTH, E2E, deployed, on_backends, with_env

FACTOR = 86_400.0  # a day takes a second
e2e_backend = on_backends(BOTH)
local_env = with_env({"AWSWORLD_TIME_SCALE": f"{FACTOR:g}"})

CALLS: dict[str, int] = {}


@step(name="scale_e2e.charge", max_retries=2)
async def charge(order: str) -> str:
    CALLS[order] = CALLS.get(order, 0) + 1
    if CALLS[order] == 1:
        raise RetryableError("card service down", retry_after="1h")
    return f"receipt {order}"


@step(name="scale_e2e.shipped")
async def shipped(order: str) -> bool:
    CALLS[f"poll:{order}"] = CALLS.get(f"poll:{order}", 0) + 1
    return CALLS[f"poll:{order}"] >= 3


@workflow(name="scale_e2e.order")
async def order_flow(order: str) -> str:
    await sleep("1d")
    receipt = await charge(order)
    # (A queue delays by whole seconds, so under this factor a poll comes at most once a logical day.)
    await poll_until(shipped, order, interval="1d", backoff=1, max_interval=None, timeout="30d")
    try:
        async with create_hook(token=f"scale-approve:{order}", timeout="1d") as hook:
            await hook
    except HookTimeoutError:
        return f"{receipt}, shipped, not approved"
    return "approved"


@step(name="scale_e2e.never")
async def never(order: str) -> bool:
    CALLS[f"never:{order}"] = CALLS.get(f"never:{order}", 0) + 1
    return False


@workflow(name="scale_e2e.gives_up")
async def gives_up(order: str) -> str:
    try:
        await poll_until(never, order, interval="12h", backoff=1, max_interval=None, timeout="2d")
    except PollTimeoutError:
        return "gave up"
    return "impossible"


async def _sleep_two_days(order: str) -> str:
    await sleep("2d")
    return "changed"


def _data(event: Event) -> dict[str, Any]:
    return event.event_data or {}


def _at(value: Any) -> datetime:
    return datetime.fromisoformat(str(value))


async def test_every_wait_of_a_run_is_scaled_and_recorded(e2e: E2E, monkeypatch: pytest.MonkeyPatch) -> None:
    order = f"T-{uuid.uuid4().hex[:6]}"
    run = await e2e.start(order_flow, order)
    assert await run.result(timeout=60) == f"receipt {order}, shipped, not approved"
    events = await run.events()
    waits = [e for e in events if e.event_type == "wait_created"]
    assert [e.correlation_id for e in waits] == ["wait_1", "wait_5"]  # the sleep, the hook's timeout
    for wait in waits:
        assert _data(wait)["timeScale"] == FACTOR
        # The real end, as describe shows it: a day's wait a second after the call (and never before the write).
        assert timedelta(0) < _at(_data(wait)["resumeAt"]) - wait.created_at <= timedelta(seconds=1)
    completed = {e.correlation_id: e.created_at for e in events if e.event_type == "wait_completed"}
    for wait in waits:
        ended = completed[wait.correlation_id]
        assert ended >= _at(_data(wait)["resumeAt"])  # at its (scaled) time, not skipped
        assert ended - wait.created_at < timedelta(minutes=10)  # not the day its code asked for
    retries = [e for e in events if e.event_type == "step_retrying"]
    assert [e.correlation_id for e in retries] == ["step_2", "step_3", "step_3"]  # the back-off, two polls
    for retry in retries:
        assert _data(retry)["timeScale"] == FACTOR
        assert _at(_data(retry)["retryAfter"]) - retry.created_at <= timedelta(seconds=1)
    log = await read_run(e2e.world, run.run_id)
    assert replay_events(log).ok  # with the setting
    monkeypatch.delenv("AWSWORLD_TIME_SCALE")
    assert replay_events(log).ok  # and without: the log says what the waits were
    with deployed(order_flow, _sleep_two_days):
        changed = replay_events(log)
    assert changed.status == "diverged" and changed.change == "duration", changed.describe()
    assert "under time scale 86400" in (changed.log or "")


async def test_a_polls_timeout_is_scaled_too(e2e: E2E) -> None:
    order = f"P-{uuid.uuid4().hex[:6]}"
    run = await e2e.start(gives_up, order)
    assert await run.result(timeout=60) == "gave up"  # two days of polling, in seconds
    events = await run.events()
    [failed] = [e for e in events if e.event_type == "step_failed"]
    assert _data(failed)["error"]["name"] == "PollTimeoutError"
    started = [e.created_at for e in events if e.event_type == "step_started"]
    assert 2 <= CALLS[f"never:{order}"] == len(started) <= 5  # every 12 h, for 2 days, at most a poll a second
    assert failed.created_at - started[0] < timedelta(minutes=5)
