"""``@workflow(retention=...)``: the run's ``run_created`` carries the workflow's retention (the World sets the
TTL of the run's items from it: tests/conformance/test_retention.py); a workflow without one leaves it to the
deployment's default."""

from __future__ import annotations

import pytest

from awsworld import Client, workflow
from awsworld._memory import MemoryWorld
from awsworld.authoring.definitions import RETENTION_CONTEXT_KEY, workflow_definition


@workflow(name="tests.retention.kept_a_month", retention="30d")
async def kept_a_month() -> int:
    return 1


@workflow(name="tests.retention.default")
async def kept_by_default() -> int:
    return 1


async def test_a_workflows_retention_rides_in_its_runs_execution_context() -> None:
    world = MemoryWorld()
    try:
        client = Client(world)
        run = await client.start(kept_a_month)
        view = await world.runs.get(run.run_id)
        assert (view.execution_context or {})[RETENTION_CONTEXT_KEY] == 30 * 24 * 3600
        plain = await client.start(kept_by_default)
        assert RETENTION_CONTEXT_KEY not in ((await world.runs.get(plain.run_id)).execution_context or {})
    finally:
        await world.close()


def test_retention_takes_any_duration_and_refuses_nonsense() -> None:
    assert workflow_definition(kept_a_month).execution_context() == {RETENTION_CONTEXT_KEY: 2592000}
    with pytest.raises(ValueError):
        workflow(retention=0)
    with pytest.raises((ValueError, TypeError)):
        workflow(retention="soon")


@pytest.mark.parametrize("number", [30, 2.5])
def test_a_retention_without_a_unit_is_refused_asking_for_one(number: float) -> None:
    """A number is seconds to a duration and days to ``RunRetentionDays``: ``retention=30`` meant as a month kept
    the run 30 s after its end (before: accepted as seconds)."""
    with pytest.raises(TypeError) as refused:
        workflow(retention=number)
    assert str(refused.value) == (f"a workflow's retention takes a unit: retention={number!r} would be {number!r} "
                                  f"seconds (a number is days in RunRetentionDays); write '{number:g}d' for days, "
                                  f"'{number:g}s' for seconds, or a timedelta")
