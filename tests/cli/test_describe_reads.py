"""What ``awsworld describe`` reads of a run's steps, log, streams and children
(``cli.describe.describe_document``, the document the CLI prints; on the memory World, and counted on the AWS
World): the steps, the log and the
streams at once (they were read one after another, each waiting for the last); each child's run is read once,
``client.client.RUN_READS_AT_ONCE`` at a time, as the run viewer reads them (``client.client.run_views``). Read
one after another, a run that started 100 children cost 100 round trips in a row (``bench/describe.py`` prints
the requests and times on ``awsworld dev``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from awsworld import workflow
from awsworld.cli.describe import describe_document
from awsworld.client.client import RUN_READS_AT_ONCE
from awsworld.testing import WorkflowTestEnv

CHILDREN = 40


@workflow(name="describe_reads.kid")
async def kid(i: int) -> int:
    return i


@workflow(name="describe_reads.parent")
async def parent(n: int) -> int:
    return sum(await asyncio.gather(*(kid(i) for i in range(n))))


async def test_a_runs_children_are_read_once_each_together(monkeypatch: pytest.MonkeyPatch) -> None:
    async with WorkflowTestEnv() as env:
        run = await env.client.start(parent, CHILDREN)
        assert await run.result() == sum(range(CHILDREN))
        gets: list[str] = []
        open_now = [0, 0]  # (in flight, most at once)
        get = env.world.runs.get

        async def counted(run_id: str, **kwargs: Any) -> Any:
            gets.append(run_id)
            open_now[0] += 1
            open_now[1] = max(open_now)
            try:
                await asyncio.sleep(0)  # a World's read yields (the memory World's does not): let the others start
                return await get(run_id, **kwargs)
            finally:
                open_now[0] -= 1

        monkeypatch.setattr(env.world.runs, "get", counted)
        document = await describe_document(env.client, run.run_id)
    children = document["children"]
    assert len(children) == CHILDREN and {c["status"] for c in children} == {"completed"}
    assert {c["workflow"] for c in children} == {"describe_reads.kid"}
    assert sorted(gets) == sorted([run.run_id, *(c["runId"] for c in children)]), "each run read once"
    assert open_now[1] == RUN_READS_AT_ONCE, "read together, at most RUN_READS_AT_ONCE at a time"


async def test_the_steps_the_log_and_the_streams_are_read_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    async with WorkflowTestEnv() as env:
        run = await env.client.start(kid, 1)
        await run.result()
        open_reads: set[str] = set()
        together: list[set[str]] = []

        def watched(name: str, read: Any) -> Any:
            async def call(*args: Any, **kwargs: Any) -> Any:
                open_reads.add(name)
                together.append(set(open_reads))
                try:
                    await asyncio.sleep(0)  # (the memory World's reads do not yield)
                    return await read(*args, **kwargs)
                finally:
                    open_reads.discard(name)
            return call

        for api, method in ((env.world.steps, "list"), (env.world.events, "list"), (env.world.streams, "list")):
            monkeypatch.setattr(api, method, watched(f"{type(api).__name__}.{method}", getattr(api, method)))
        document = await describe_document(env.client, run.run_id)
    assert document["steps"]["total"] == 0 and document["streams"] == []
    assert max(len(reads) for reads in together) == 3, together


async def test_describes_requests_on_aws_do_not_grow_with_its_steps() -> None:
    """``describe`` of a run of 3 steps and of one of 120 on the AWS World (the embedded emulator), counted: the
    same 8 requests (the run: 1 ``BatchGetItem`` and 1 ``GetItem``; the steps: 1 ``Query`` per 1,000; the log: 1
    ``GetItem`` and 1 ``Query`` per 1,000 events; the streams: 1 ``Query``). Neither a step's values nor the
    run's result are read (``bench/describe.py`` prints the same on ``awsworld dev``)."""
    from awsworld.client.client import Client
    from awsworld.local import LocalAWS

    counts = []
    async with LocalAWS(run_workflows=False) as local:  # (no poller: its long polls counted beside describe's)
        world = local.world
        for steps in (3, 120):
            created = await world.events.create(None, {"eventType": "run_created",
                                                       "eventData": {"workflowName": "describe_reads.steps"}})
            assert created.run is not None
            run_id = created.run.run_id
            await world.events.create(run_id, {"eventType": "run_started"})
            for kind, data in (("step_created", {"stepName": "describe_reads.one", "input": "i" * 2000}),
                               ("step_completed", {"result": 1})):  # (a batch holds one event a step)
                for first in range(1, steps + 1, 40):  # (and at most 40)
                    await world.events.create_batch(run_id, [{"eventType": kind, "correlationId": f"step_{i}",
                                                              "eventData": data}
                                                             for i in range(first, min(first + 40, steps + 1))])
            await world.events.create(run_id, {"eventType": "run_completed", "eventData": {"output": "r" * 100_000}})
            world.stats.reset()
            document = await describe_document(Client(world), run_id)
            assert document["status"] == "completed" and document["steps"]["byStatus"] == {"completed": steps}
            counts.append(dict(world.stats.requests))
    assert counts[0] == counts[1] == {"dynamodb.BatchGetItem": 1, "dynamodb.GetItem": 2, "dynamodb.Query": 3}, counts
