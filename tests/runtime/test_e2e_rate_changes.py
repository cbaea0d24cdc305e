"""A step rate set too low, then raised while steps wait for their tokens (the walk of issue "walkflow": a
``RateLimit("2/m")`` meant as ``"2/s"``), on the in-memory World and on the emulator, through the ``Client``.

Three runs ask a ``1/m`` bucket at once: the first starts, the others reserve their starts a minute and two
minutes ahead. What a run waiting that way reads (``client.limits.limit_waits``, what ``awsworld describe`` and the
run viewer show) names the bucket's next free start, past every reserved one (it once said one interval from now
for every waiter). ``client.limits.set(rate="100/s")`` counts the reserved starts again at the new rate, so a start
asked after it goes at once (the backlog kept as a time once held it two minutes behind the old reservations, the
raise giving no token at all), and ``client.wake`` brings a waiting run's step forward (its flow asks again)."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest

from awsworld import RateLimit, step, workflow
from awsworld.client.limits import limit_waits
from awsworld.world.clock import clock_of

from .conftest import BOTH, E2E, on_backends

pytestmark = pytest.mark.asyncio
e2e_backend = on_backends(BOTH)

INTERVAL = 60.0  # seconds between the starts the code's rate allows


@step(name="ratechange.call", rate=RateLimit("1/m"))
async def call(n: int) -> int:
    return n


@workflow(name="ratechange.one")
async def one(n: int) -> int:
    return await call(n)


async def admitted_at(e2e: E2E, run_id: str) -> datetime:
    [started] = [e for e in await e2e.client.get_run(run_id).events() if e.event_type == "step_started"]
    return datetime.fromisoformat((started.event_data or {})["limit"]["admittedAt"])


async def asked(e2e: E2E, run_ids: list[str]) -> None:
    """Until each run's step is created (its ask made: started, or its start reserved)."""
    for _ in range(600):
        if e2e.env is not None:
            await e2e.env.idle()
        logs = [await e2e.client.get_run(r).events() for r in run_ids]
        if all(any(e.event_type == "step_created" for e in log) for log in logs):
            view = (await e2e.client.limits.describe(call)).key("")
            if view is not None and view.tokens is not None and view.tokens < 1:
                return
        await asyncio.sleep(0.05)
    raise AssertionError("the steps did not ask for their tokens")


async def test_a_raised_rate_lets_new_starts_in_at_once_and_a_wake_brings_a_waiting_step_forward(e2e: E2E) -> None:
    first, second, third = [await e2e.client.start(one, n) for n in range(3)]
    await asked(e2e, [first.run_id, second.run_id, third.run_id])
    assert await first.result(timeout=30) == 0

    now = clock_of(e2e.world).now()
    [wait] = await limit_waits(e2e.world, third.run_id, "running", None, await third.events())
    assert wait["kind"] == "token" and wait["rate"] == "1/m burst 1", wait
    next_free = datetime.fromisoformat(wait["nextTokenAt"])
    # Two starts reserved (at about +60 s and +120 s): the bucket's next free start is past both.
    assert (next_free - now).total_seconds() > 2 * INTERVAL - 10, (now, wait)

    raised_at = clock_of(e2e.world).now()
    view = (await e2e.client.limits.set(call, rate="100/s")).key("")
    assert view is not None and view.tokens is not None and view.tokens >= 1, view  # the raise gives tokens now
    fourth = await e2e.client.start(one, 3)
    assert await fourth.result(timeout=45) == 3
    assert (await admitted_at(e2e, fourth.run_id) - raised_at).total_seconds() < INTERVAL, \
        "a start asked after the raise goes at the new rate, not behind the old reservations"

    await e2e.client.wake(third.run_id)  # its flow asks again, at the new rate
    assert await third.result(timeout=45) == 2
    assert (await admitted_at(e2e, third.run_id) - raised_at).total_seconds() < INTERVAL
    await e2e.client.wake(second.run_id)
    assert await second.result(timeout=45) == 1
    await e2e.client.limits.reset(call)
