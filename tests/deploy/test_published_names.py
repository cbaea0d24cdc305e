"""The flow function publishes its workflow names (``_published.model``) on the paths Lambda takes: at a plain cold
start, once per execution environment and after it already takes deliveries (so a client never refuses on it),
and with SnapStart while the version is initialised, before any delivery (so a client refuses a name no version
registers, and a run that reached the queue unchecked fails at its first delivery). The real handler
(``handlers/flow.py``), fed by the emulated event source mapping."""

from __future__ import annotations

import asyncio

import pytest

from awsworld import WorkflowRunFailedError
from awsworld.authoring.definitions import WorkflowNotRegisteredError
from awsworld.authoring.errors import UNKNOWN_WORKFLOW
from awsworld.client.client import Client
from awsworld.lambda_host import snapstart
from awsworld.lambda_host.container import default_container
from awsworld.local import LocalAWS

from . import app
from .conftest import Handlers
from .lambda_env import EventSourceMapping
from .test_flow_handler import terminal

TYPO = "deploy.quik"


async def forget_publications(local: LocalAWS) -> None:
    ddb = await local.world.clients.dynamodb()
    table = local.config.table_name
    items = (await ddb.query(TableName=table, KeyConditionExpression="pk = :pk",
                             ExpressionAttributeValues={":pk": {"S": "PUBLISHED"}}))["Items"]
    for item in items:
        await ddb.delete_item(TableName=table, Key={"pk": item["pk"], "sk": item["sk"]})


async def test_a_plain_cold_start_publishes_once_and_a_client_does_not_refuse_on_it(
        local: LocalAWS, esm: EventSourceMapping, handlers: Handlers) -> None:
    await forget_publications(local)
    container = default_container()
    await asyncio.to_thread(container.reset)  # a new execution environment, without SnapStart
    assert local.client is not None
    first = await local.client.start(app.quick, "first")
    await esm.run_until(terminal(first))
    [published] = await local.world.published.read()
    assert not published.ahead and "deploy.quick" in published.workflows and app.__name__ in published.modules
    before = container.world.stats.snapshot()
    second = await local.client.start(app.quick, "second")
    await esm.run_until(terminal(second))
    assert (container.world.stats.snapshot() - before).requests["dynamodb.PutItem"] == 0, "once per environment"

    # Published after the alias already sent this environment work: a newer version may be running unpublished,
    # so a name missing here starts, and its delivery decides (the window).
    client = Client(local.world)
    run = await client.start("deploy.qiuck", "x")
    assert await run.status() == "pending"
    await client.cancel(run.run_id)


async def test_with_snapstart_a_client_refuses_a_name_no_version_registers(
        local: LocalAWS, esm: EventSourceMapping, handlers: Handlers) -> None:
    await forget_publications(local)
    container = default_container()
    await asyncio.to_thread(container.reset)
    await asyncio.to_thread(snapstart.prime, container)  # the version's initialisation, before the alias moves
    [published] = await local.world.published.read()
    assert published.ahead

    client = Client(local.world)  # a web app's client: no workflow code
    with pytest.raises(WorkflowNotRegisteredError) as refused:
        await client.start(TYPO, "x")
    text = str(refused.value)
    # The refusal names at most 12 of the modules the version loaded: in a test process, which has imported every
    # test module, the app's own may fall past the cut, so the publication is checked for it instead.
    assert "by the flow function, which consumes this World's queue" in text and app.__name__ in published.modules
    assert "did you mean 'deploy.quick'" in text, text
    assert (await local.world.runs.list(workflow_name=TYPO)).data == [], "nothing written"
    run = await client.start("deploy.quick", "by name")
    await esm.run_until(terminal(run))
    assert await run.result(timeout=5) == "by name"

    unchecked = await Client(local.world, check_published=False).start(TYPO, "x")  # an older client, say
    invocations = len(esm.invocations)
    await esm.run_until(terminal(unchecked))
    with pytest.raises(WorkflowRunFailedError) as failed:
        await unchecked.result(timeout=5)
    assert failed.value.code == UNKNOWN_WORKFLOW and "did you mean 'deploy.quick'" in str(failed.value)
    assert len(esm.invocations) - invocations == 1, "failed at its first delivery, not after the window"
