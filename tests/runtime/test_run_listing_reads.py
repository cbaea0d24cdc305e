"""What a listing of runs reads on the AWS World (moto): a failed run's error is in its ``run_failed`` event, and
the run's item keeps the block that event is in (``aws/log/blocks.END_BLOCK``), so a listing reads every failed
run's error in the one ``BatchGetItem`` it makes for the runs' first blocks. It made one Query per failed run
(``bench/run_listing.py``: 57 DynamoDB requests for 100 runs, 50 failed; 8 now). A run failed before the item kept
it is read as before; the errors a listing shows are the ones ``runs.get`` shows."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from awsworld import FatalError, Run, WorkflowRunFailedError, workflow
from awsworld.aws import AWSWorld
from awsworld.aws.keys import run_key
from awsworld.aws.log.blocks import END_BLOCK
from awsworld.local import LocalAWS
from awsworld.world.entities import ResolveData, StructuredError


@workflow(name="listingreads.fails")
async def fails(i: int) -> None:
    raise FatalError(f"run {i} refused")


@workflow(name="listingreads.ok")
async def ok(i: int) -> int:
    return i


async def _ended(runs: list[Run[Any]]) -> None:
    for run in runs:
        with contextlib.suppress(WorkflowRunFailedError):
            await run.result(timeout=60)


async def _listing(world: AWSWorld, workflow_name: str = "listingreads.fails",
                   resolve: ResolveData = "none") -> tuple[Counter[str], dict[str, object]]:
    """The DynamoDB requests of a listing of ``workflow_name``'s runs, and what each shows of its end (its error;
    a completed run's output, with values)."""
    before = world.stats.snapshot()
    page = await world.runs.list(workflow_name=workflow_name, limit=100, resolve_data=resolve)
    used = (world.stats.snapshot() - before).requests
    return (Counter({k: n for k, n in used.items() if k.startswith("dynamodb.")}),
            {run.run_id: run.error if run.status == "failed" else run.output for run in page.data})


async def _forget_the_end_block(world: AWSWorld, run_id: str) -> None:
    """Remove ``END_BLOCK`` from the run's item: a run ended before its item kept it."""
    ddb = await world.clients.dynamodb()
    await ddb.update_item(TableName=world.config.table_name, Key={k: {"S": v} for k, v in run_key(run_id).items()},
                          UpdateExpression="REMOVE #b", ExpressionAttributeNames={"#b": END_BLOCK})


@pytest.fixture
async def world(local: LocalAWS) -> AsyncIterator[AWSWorld]:
    """A World of the listings' own on ``local``'s stack: the background worker's requests (its polls, the
    watchdog's Queries) land on ``local.world``'s counters, and under load they fell inside a listing's window
    (CI 102: 16 Queries, not 4)."""
    own = AWSWorld(local.world.config)
    try:
        yield own
    finally:
        await own.close()


async def test_a_listing_reads_failed_runs_errors_without_a_query_each(local: LocalAWS, world: AWSWorld) -> None:
    assert local.client is not None
    await _ended([await local.client.start(fails, 0), await local.client.start(ok, 0)])
    one, _ = await _listing(world)
    await _ended([await local.client.start(fails, i) for i in range(1, 6)])
    six, errors = await _listing(world)
    assert len(errors) == 6
    assert six == one, (one, six)  # (five more failed runs: five more Queries before)
    for run_id, error in errors.items():
        shown = (await world.runs.get(run_id, resolve_data="none")).error
        assert isinstance(error, StructuredError) and error == shown, (error, shown)
        assert error.message.endswith("refused"), error

    # A run failed before its item kept the block: its error is read with a Query of its own, as before.
    await _forget_the_end_block(world, next(iter(errors)))
    fresh = AWSWorld(world.config)  # (no run item cached)
    try:
        again, errors_again = await _listing(fresh)
    finally:
        await fresh.close()
    assert errors_again == errors
    assert again["dynamodb.Query"] == six["dynamodb.Query"] + 1, (six, again)


async def test_a_listing_with_values_reads_completed_runs_outputs_without_a_query_each(local: LocalAWS,
                                                                                       world: AWSWorld) -> None:
    """A completed run's item keeps the block of its ``run_completed`` too (written in the write that ends it), so
    a listing with values reads every output in its one ``BatchGetItem``: it made one Query per completed run
    (``bench/run_listing.py``). A listing without values reads no output, and no such block. A run completed
    before the item kept it is read with its Query, as before."""
    assert local.client is not None
    await _ended([await local.client.start(ok, 0)])
    one, _ = await _listing(world, "listingreads.ok", "all")
    one_unread, _ = await _listing(world, "listingreads.ok", "none")
    await _ended([await local.client.start(ok, i) for i in range(1, 6)])
    six, outputs = await _listing(world, "listingreads.ok", "all")
    six_unread, _ = await _listing(world, "listingreads.ok", "none")
    assert set(range(6)) <= set(outputs.values()), outputs  # (the module's other test ran one too)
    assert six == one, (one, six)  # (five more completed runs: five more Queries before)
    assert six_unread == one_unread, (one_unread, six_unread)
    for run_id, output in outputs.items():
        assert output == (await world.runs.get(run_id)).output

    await _forget_the_end_block(world, next(iter(outputs)))
    fresh = AWSWorld(world.config)  # (no run item cached)
    try:
        again, outputs_again = await _listing(fresh, "listingreads.ok", "all")
    finally:
        await fresh.close()
    assert outputs_again == outputs
    assert again["dynamodb.Query"] == six["dynamodb.Query"] + 1, (six, again)
