"""A mistyped workflow name fails fast where the World can know it (``_published.model``): the consumer of the queue
publishes its names; a ``Client`` without workflow code reads them once and refuses a name no consumer registers
(``WorkflowNotRegisteredError``, naming the modules and the nearest names), nothing written; a name any publication
holds starts; a publication that may lag its consumer (a plain cold start's) never refuses, and then the delivery
records what it found, which the pending run carries (``describe`` shows it: ``awsworld describe`` as a process on
the emulator); a run that reached the queue unchecked fails at its first delivery when the publications are certain.
In memory and on LocalAWS, through the real delivery path."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from awsworld import WorkflowRunFailedError, workflow
from awsworld._published.model import DEV, publish
from awsworld._worker.delivery import BACKOFF_ENV, DELIVERY_FINDING, UNKNOWN_WINDOW_ENV
from awsworld.authoring.definitions import Registry, WorkflowNotRegisteredError
from awsworld.authoring.errors import UNKNOWN_WORKFLOW
from awsworld.cli.dev import environment
from awsworld.client.client import Client

from .conftest import BOTH, E2E, on_backends

e2e_backend = on_backends(BOTH)

GOOD = "pubnames.checkout"
TYPO = "pubnames.chekout"  # what the user meant: GOOD; registered nowhere
LEGACY = "pubnames.legacy_refund"


@workflow(name=GOOD)
async def checkout(order: str) -> str:
    return f"checked out {order}"


@workflow(name=LEGACY)
async def legacy_refund(order: str) -> str:
    return f"refunded {order}"


@workflow(name="pubnames.unpublished")
async def unpublished(order: str) -> str:
    """Registered in this process, published by no consumer (its module is not loaded where runs run)."""
    return order


def deployed(*definitions: Any) -> Registry:
    """The registry of a consumer whose modules register these workflows."""
    registry = Registry()
    for fn in definitions:
        registry.add_workflow(fn.__awsworld_workflow__)
    return registry


def reads_of(world: Any, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How often the World's publications are read from now on (the store's own method, counted)."""
    store = world.published
    real = store.read
    count = [0]

    async def counted() -> Any:
        count[0] += 1
        return await real()

    monkeypatch.setattr(store, "read", counted)
    return count


@pytest.fixture
async def clean(e2e: E2E) -> AsyncIterator[E2E]:
    """The test's World without publications, before and after (on aws the module's LocalAWS is shared)."""
    await _forget_publications(e2e)
    yield e2e
    await _forget_publications(e2e)


async def _forget_publications(e2e: E2E) -> None:
    if e2e.memory:
        e2e.world.storage.state.published.clear()
        return
    ddb = await e2e.world.clients.dynamodb()
    table = e2e.world.config.table_name
    items = (await ddb.query(TableName=table, KeyConditionExpression="pk = :pk",
                             ExpressionAttributeValues={":pk": {"S": "PUBLISHED"}}))["Items"]
    for item in items:
        await ddb.delete_item(TableName=table, Key={"pk": item["pk"], "sk": item["sk"]})


async def runs_named(e2e: E2E, name: str) -> list[Any]:
    return (await e2e.world.runs.list(workflow_name=name, limit=100)).data


async def test_a_start_refuses_a_name_no_consumer_registers(clean: E2E, monkeypatch: pytest.MonkeyPatch) -> None:
    e2e = clean
    await publish(e2e.world, deployed(checkout), host="awsworld dev", ahead=True, key=DEV)
    reads = reads_of(e2e.world, monkeypatch)
    client = Client(e2e.world)  # a client of dev from Python: no workflow code of its own

    assert await (await client.start(GOOD, "A-1")).result(timeout=30) == "checked out A-1"
    assert await (await client.start(checkout, "A-2")).result(timeout=30) == "checked out A-2"
    assert reads[0] == 1, "read once, then cached"

    await e2e.idle()
    deliveries = e2e.poller.deliveries
    with pytest.raises(WorkflowNotRegisteredError) as refused:
        await client.start(TYPO, "A-3")
    text = str(refused.value)
    assert f"no workflow named {TYPO!r} is registered by awsworld dev, which consumes this World's queue" in text
    assert f"(loaded: workflows from {__name__})" in text and f"did you mean {GOOD!r}?" in text, text
    assert refused.value.suggestions == [GOOD]
    assert reads[0] == 2, "a refusal reads once more first (the consumer may have published since)"
    with pytest.raises(WorkflowNotRegisteredError, match=r"pubnames\.unpublished"):
        await client.start(unpublished, "A-4")  # a @workflow whose module the consumer does not load
    assert await runs_named(e2e, TYPO) == [] and await runs_named(e2e, "pubnames.unpublished") == []
    await e2e.idle()
    assert await e2e.queue_depth() == 0 and e2e.poller.deliveries == deliveries, "nothing queued or delivered"

    # The consumer publishes again (dev restarted with the module): the same client takes the name now.
    await publish(e2e.world, deployed(checkout, unpublished), host="awsworld dev", ahead=True, key=DEV)
    assert await (await client.start(unpublished, "A-5")).result(timeout=30) == "A-5"


async def test_a_name_any_publication_holds_starts_and_no_publication_refuses_nothing(
        clean: E2E, monkeypatch: pytest.MonkeyPatch) -> None:
    e2e = clean
    assert await (await Client(e2e.world).start(GOOD, "B-0")).result(timeout=30) == "checked out B-0", \
        "nothing published (a stack from before this): nothing is refused"
    # The version before (rolled back to, or finishing a delivery) registered LEGACY; the newest does not.
    await publish(e2e.world, deployed(checkout, legacy_refund), host="the flow function", ahead=True)
    await publish(e2e.world, deployed(checkout), host="the flow function", ahead=True)
    assert len(await e2e.world.published.read()) == 2
    client = Client(e2e.world)
    assert await (await client.start(LEGACY, "B-1")).result(timeout=30) == "refunded B-1"
    with pytest.raises(WorkflowNotRegisteredError, match="by the flow function"):
        await client.start(TYPO, "B-2")


async def test_a_publication_that_may_lag_its_consumer_never_refuses_and_the_delivery_says_what_it_found(
        clean: E2E, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    e2e = clean
    if not e2e.memory:
        monkeypatch.setenv(UNKNOWN_WINDOW_ENV, "300")  # outlasts the describe processes; cancelled after them
        monkeypatch.setenv(BACKOFF_ENV, "1")
    # A flow function without SnapStart publishes at its first delivery: a newer version may be taking deliveries
    # before it has published, so a name missing from its publication is not certainly unknown.
    await publish(e2e.world, deployed(checkout), host="the flow function", ahead=False)
    run = await Client(e2e.world).start(TYPO, "C-1")
    await e2e.sleep(1.5)  # the first deliveries, backed off
    view = await run.get()
    assert view.status == "pending"
    found = view.attributes[DELIVERY_FINDING]
    assert f"no workflow named {TYPO!r} is registered here" in found and f"did you mean {GOOD!r}" in found, found
    assert "retried until " in found and found.endswith(f"then the run fails with {UNKNOWN_WORKFLOW}")
    if e2e.memory:
        await e2e.sleep(3600)  # past the window (virtual time)
        with pytest.raises(WorkflowRunFailedError) as failed:
            await run.result(timeout=30)
        assert failed.value.code == UNKNOWN_WORKFLOW and f"did you mean {GOOD!r}" in str(failed.value)
    else:
        await describe_says_what_was_found(e2e, run.run_id, tmp_path)
        await Client(e2e.world).cancel(run.run_id)
    events = await run.events()
    findings = [e for e in events if e.event_type == "attr_set"]
    assert len(findings) == 1, "recorded once, not at every delivery"
    assert sum(r.status == "error" for r in e2e.poller.results) >= 2, "delivered more than once meanwhile"


async def describe_says_what_was_found(e2e: E2E, run_id: str, cwd: Path) -> None:
    """``awsworld describe RUN`` (a process, configured as ``awsworld dev``'s exports configure a shell)."""
    assert e2e.local is not None
    env = {**environment(e2e.local.config, "http://127.0.0.1:9"), "PATH": "/usr/bin:/bin"}

    def describe(*more: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "awsworld.cli", "describe", run_id, *more], env=env, cwd=cwd,
                              capture_output=True, text=True, timeout=120)

    text, as_json = await asyncio.gather(asyncio.to_thread(describe), asyncio.to_thread(describe, "--json"))
    assert text.returncode == 0 and as_json.returncode == 0, (text, as_json)
    [line] = [line for line in text.stdout.splitlines() if line.startswith("waits on")]
    assert line.startswith("waits on  code this deployment lacks (its delivery at "), line
    assert f"no workflow named {TYPO!r}" in line and f"did you mean {GOOD!r}" in line, line
    [wait] = json.loads(as_json.stdout)["waitingOn"]
    assert wait["kind"] == "code" and f"did you mean {GOOD!r}" in wait["found"]


async def test_a_run_that_reached_the_queue_unchecked_fails_at_its_first_delivery(clean: E2E) -> None:
    e2e = clean
    await publish(e2e.world, deployed(checkout), host="awsworld dev", ahead=True, key=DEV)
    unchecked = Client(e2e.world, check_published=False)  # an older client, say: it does not read the names
    async with e2e.counting() as deliveries:
        run = await unchecked.start(TYPO, "D-1")
    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result(timeout=30)
    assert failed.value.code == UNKNOWN_WORKFLOW
    assert "by awsworld dev, which consumes this World's queue" in str(failed.value)
    assert f"did you mean {GOOD!r}?" in str(failed.value)
    assert deliveries.count == 1 and deliveries.statuses == ["unknown-workflow-failed"], deliveries


def test_the_rule_never_refuses_a_name_a_consumer_may_know() -> None:
    """``judge`` on its own: the cases the module lists."""
    from datetime import UTC, datetime, timedelta

    from awsworld._published.model import judge, publication

    now = datetime(2025, 1, 1, tzinfo=UTC)
    old = publication(deployed(checkout, legacy_refund), host="the flow function", ahead=True, now=now)
    new = publication(deployed(checkout), host="the flow function", ahead=True, now=now + timedelta(hours=1))
    lagging = publication(deployed(checkout), host="the flow function", ahead=False, now=now + timedelta(hours=2))
    assert not judge(TYPO, []).sure, "nothing published: unsure"
    assert judge(LEGACY, [old, new]).known, "any publication's name is known"
    assert judge(TYPO, [old, new]).sure, "the newest was published ahead of its deliveries"
    assert not judge(TYPO, [old, new, lagging]).sure, "the newest may lag its consumer"
    assert old.key != new.key and new.key == lagging.key  # a flow function's key: a digest of its names
