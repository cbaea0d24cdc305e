"""``Client.rerun``: a failed run is final, and once its cause is fixed a new run of its workflow starts with the
input the failed one was recorded with, as stored (a typed value and one above the inline limit included), and
names the run it reruns. A run still running is refused, an unknown one is not found. In memory and on the
emulator (moto); a rerun through ``HttpClient`` over ``awsworld serve --world memory`` too."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from awsworld import FatalError, RunNotEndedError, create_hook, step, workflow
from awsworld.world import RunNotFoundError

from .conftest import BOTH, HTTP_MEMORY, on_backends

e2e_backend = on_backends(BOTH)

PARTNER_UP: set[str] = set()
BIG = "é" * 20_000  # 40 KB of UTF-8: over the 16 KiB a value stays inline


@step(name="rerun_test.charge")
async def charge(order: str, when: datetime, note: str) -> str:
    if order not in PARTNER_UP:
        raise FatalError(f"partner down for {order}")
    return f"{order} at {when.isoformat()} ({len(note)} characters)"


@workflow(name="rerun_test.checkout")
async def checkout(order: str, when: datetime, *, note: str) -> str:
    return await charge(order, when, note)


@workflow(name="rerun_test.waits")
async def waits(order: str) -> object:
    async with create_hook(token=f"rerun-test:{order}") as hook:
        return await hook


async def test_a_failed_run_reruns_with_its_recorded_input_once_the_cause_is_fixed(e2e) -> None:
    order, when = uuid.uuid4().hex, datetime(2026, 12, 5, 19, 30, tzinfo=UTC)
    failed = await e2e.start(checkout, order, when, note=BIG)
    with pytest.raises(Exception, match="partner down"):
        await failed.result(timeout=30)
    PARTNER_UP.add(order)  # the cause is fixed

    again = await e2e.client.rerun(failed.run_id)
    assert again.run_id != failed.run_id
    assert await again.result(timeout=30) == f"{order} at 2026-12-05T19:30:00+00:00 (20000 characters)"
    old, new = await failed.get(), await again.get()
    assert old.status == "failed" and new.workflow_name == "rerun_test.checkout"
    assert new.input == old.input  # as stored: the datetime's envelope, the keyword argument, the 40 KB note
    assert (new.execution_context or {}).get("rerunOf") == failed.run_id

    chosen = f"wrun_{uuid.uuid4().hex}"
    first = await e2e.client.rerun(failed.run_id, new_run_id=chosen)
    second = await e2e.client.rerun(failed.run_id, new_run_id=chosen)  # idempotent, as a start with run_id
    assert first.run_id == second.run_id == chosen
    await first.result(timeout=30)


async def test_a_run_that_has_not_ended_is_not_rerun_and_an_unknown_one_is_not_found(e2e) -> None:
    run = await e2e.start(waits, uuid.uuid4().hex)
    with pytest.raises(RunNotEndedError, match=f"run {run.run_id} is (pending|running): .*awsworld cancel"):
        await e2e.client.rerun(run.run_id)
    before = len((await e2e.client.list_runs(workflow=waits, limit=100)).data)
    with pytest.raises(RunNotFoundError):
        await e2e.client.rerun("wrun_01NOSUCHRUN00000000000000")
    assert len((await e2e.client.list_runs(workflow=waits, limit=100)).data) == before  # nothing was started
    await e2e.client.cancel(run.run_id)


@workflow(name="rerun_test.echo")
async def echo(value: object, *, when: datetime) -> list[object]:
    return [value, when.isoformat()]


@pytest.mark.parametrize("e2e_backend", [HTTP_MEMORY], scope="module")
async def test_over_http_a_run_reruns_with_its_recorded_input(e2e) -> None:
    """``HttpClient`` is a ``Client`` on ``awsworld serve``: its rerun reads the run and starts the new one there."""
    when = datetime(2026, 12, 5, tzinfo=UTC)
    done = await e2e.start(echo, {"big": BIG}, when=when)
    first = await done.result(timeout=30)
    again = await e2e.client.rerun(done.run_id)
    assert again.run_id != done.run_id and await again.result(timeout=30) == first
    assert ((await again.get()).execution_context or {}).get("rerunOf") == done.run_id
