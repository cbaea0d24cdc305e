"""A parked run (``_engine.parking``) comes back every ``AWSWORLD_PARK_SECONDS`` (an hour), further away than one
SQS message reaches (15 minutes): it costs one delivery each time, the watchdog's wake at the due its park left
(``world.watch.park_due``), not a message that hops three times on the way (four deliveries an hour); and it still
comes back when a message or the wake is lost.

On the emulator (``LocalAWS``: moto's SQS, the poller that runs the Lambda handler's delivery code) with time made
small, as in ``test_e2e_far_timers``: one message reaches 1 s (``SqsQueue.max_hop_seconds``, SQS's 900 s), a run
parks for 2.5 s (``AWSWORLD_PARK_SECONDS``, an hour), the watch horizon is 2 s and its bucket half a second, and
the tick (the watchdog, every minute in the stack) runs every quarter second. Before the fix each park cost two
hops (deliveries that re-send the message, status ``deferred``) and the delivery that came back. The counts are
the poller's deliveries, not timings.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from awsworld import create_hook, step, workflow
from awsworld._engine.parking import MISSING, PARKED_ATTRIBUTE, parked_run
from awsworld.local import LocalAWS, MotoServer
from awsworld.world.messages import WATCHDOG_WAKE

from .conftest import deployed, ticking
from .test_e2e_parked import lost, marks

pytestmark = pytest.mark.asyncio

REACH_SECONDS = 1
PARK_SECONDS = 2.5


@step(name="parkfar.confirm")
async def confirm(payload: str) -> str:
    return f"confirmed {payload}"


@step(name="parkfar.new_first_step")
async def new_first_step() -> str:
    return "new"


@workflow(name="parkfar.approval")
async def approval(token: str) -> str:
    payload = await create_hook(token=token)
    return await confirm(payload)


async def broken_deploy(token: str) -> str:
    """A deploy that calls a step first: a run that waited on the hook diverges at its first event past it."""
    await new_first_step()
    payload = await create_hook(token=token)
    return await confirm(payload)


@pytest.fixture
async def local(moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[LocalAWS]:
    for name, value in {"AWSWORLD_WATCH_HORIZON_SECONDS": "2", "AWSWORLD_WATCH_BUCKET_SECONDS": "0.5",
                        "AWSWORLD_ON_DIVERGENCE": "park", "AWSWORLD_PARK_SECONDS": str(PARK_SECONDS),
                        "AWSWORLD_UNKNOWN_WORKFLOW_WINDOW_SECONDS": "0"}.items():
        monkeypatch.setenv(name, value)
    async with LocalAWS("moto", moto=moto_server) as made:
        made.world.sqs_queue.max_hop_seconds = REACH_SECONDS
        async with ticking(made, 0.25):
            yield made


def statuses(local: LocalAWS) -> list[str]:
    assert local.poller is not None
    return [r.status for r in local.poller.results]


async def until(what: str, check: Callable[[], Any], timeout: float = 30.0) -> float:
    """Wait until ``check()`` holds; the monotonic time it was first seen to."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not {what} within {timeout} s"
        await asyncio.sleep(0.02)
    return time.monotonic()


async def hook_held(local: LocalAWS, token: str) -> None:
    async def held() -> bool:
        with contextlib.suppress(Exception):
            await local.world.hooks.get_by_token(token, resolve_data="none")
            return True
        return False

    deadline = time.monotonic() + 30
    while not await held():
        assert time.monotonic() < deadline, f"no hook {token!r}"
        await asyncio.sleep(0.05)


def parks(local: LocalAWS) -> int:
    return statuses(local).count("parked")


async def test_a_run_parked_for_a_divergence_comes_back_by_one_wake_not_a_hopping_message(
        local: LocalAWS) -> None:
    assert local.client is not None
    token = f"far-{uuid.uuid4().hex}"
    run = await local.client.start(approval, token)
    await hook_held(local, token)
    with deployed(approval, broken_deploy):  # reverted when the block ends
        await local.client.resume_hook(token, "yes")
        parked_at = await until("parked", lambda: parks(local) >= 1)
        first = statuses(local).index("parked")
        back_at = await until("parked again", lambda: parks(local) >= 2)
        # One delivery brought it back: the watchdog's wake at its due (before the fix: "deferred", "deferred",
        # "parked", the hourly message hopping on its way)
        assert statuses(local)[first + 1:] == ["parked"], statuses(local)
        assert back_at - parked_at >= PARK_SECONDS * 0.9, "it came back sooner than AWSWORLD_PARK_SECONDS"
        view = await local.world.runs.get(run.run_id, resolve_data="none")
        assert parked_run(view.status, view.attributes) is not None
    assert await run.result(timeout=30) == "confirmed yes"  # the next wake replays it on the reverted code
    assert "deferred" not in statuses(local), statuses(local)
    events = await run.events()
    assert marks(events)[1:] == [None], "parked once, cleared once"


async def test_a_run_parked_for_missing_code_comes_back_by_one_wake_not_a_hopping_message(local: LocalAWS) -> None:
    assert local.client is not None
    token = f"far-{uuid.uuid4().hex}"
    run = await local.client.start(approval, token)
    await hook_held(local, token)
    with lost(approval):  # the deploy lacks the workflow; the code comes back when the block ends
        await local.client.resume_hook(token, "yes")
        await until("parked", lambda: parks(local) >= 1)
        first = statuses(local).index("parked")
        await until("parked again", lambda: parks(local) >= 2)
        assert statuses(local)[first + 1:] == ["parked"], statuses(local)
        view = await local.world.runs.get(run.run_id, resolve_data="none")
        mark = parked_run(view.status, view.attributes)
        assert mark is not None and mark.change == MISSING
    assert await run.result(timeout=30) == "confirmed yes"
    assert "deferred" not in statuses(local), statuses(local)
    view = await local.world.runs.get(run.run_id, resolve_data="none")
    assert PARKED_ATTRIBUTE not in view.attributes


@pytest.mark.parametrize("lose", ["the message that parks it", "the watchdog's wake"])
async def test_a_parked_run_whose_message_is_lost_still_comes_back(local: LocalAWS, lose: str) -> None:
    """A message on the parked run's way is lost (dropped at the World's ``queue``, as a purge or a recreated queue
    loses it): the follow-up of its third recovery, whose delivery would park it, or the watchdog's wake that is
    its redelivery. The watchdog still brings it back: at the due its last write left, or at the due it snoozed the
    run to before waking it; and the reverted code resumes it."""
    assert local.client is not None
    world = local.world
    send = world.queue
    lost_payloads: list[object] = []

    def lost_here(payload: object) -> bool:
        if not isinstance(payload, dict):
            return False
        if lose == "the message that parks it":
            return payload.get("replayDivergenceCount") == 3
        return payload.get("wake") == WATCHDOG_WAKE

    async def losing(queue_name: str, payload: object, **options: object) -> object:
        if not lost_payloads and lost_here(payload):
            lost_payloads.append(payload)
            return None  # dropped: never reaches SQS
        return await send(queue_name, payload, **options)  # type: ignore[arg-type]

    token = f"far-{uuid.uuid4().hex}"
    run = await local.client.start(approval, token)
    await hook_held(local, token)
    world.queue = losing  # type: ignore[method-assign,assignment]
    try:
        with deployed(approval, broken_deploy):
            await local.client.resume_hook(token, "yes")
            await until("parked", lambda: parks(local) >= 1)
        assert await run.result(timeout=30) == "confirmed yes"
    finally:
        world.queue = send  # type: ignore[method-assign]
    assert len(lost_payloads) == 1
    assert "deferred" not in statuses(local), statuses(local)
