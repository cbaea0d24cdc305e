"""The SnapStart hooks (``awsworld.lambda_host.snapstart``), called in-process as Lambda's runtime calls them: the
default container primed before the snapshot with one request (the version's workflow names published) and no
connection left open, and after a "restore" the connections, credentials and random seed renewed, with deliveries
working on the new clients."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from typing import Any

import pytest
import snapshot_restore_py

from awsworld.lambda_host import snapstart
from awsworld.lambda_host.container import default_container
from awsworld.local import LocalAWS
from awsworld.world.wire_model import WireModel

from . import app
from .conftest import Handlers
from .lambda_env import EventSourceMapping
from .test_flow_handler import terminal


def _botocore_clients(container: Any) -> dict[str, Any]:
    return {service: client.client for service, client in container.world.clients.opened.items()}


async def test_the_hooks_are_registered_once_with_the_runtime(handlers: Handlers) -> None:
    before = [hook for hook, _, _ in snapshot_restore_py.get_before_snapshot()]
    after = [hook for hook, _, _ in snapshot_restore_py.get_after_restore()]
    assert len(before) == len(after) == 1, "flow and webhook install the same default container once"
    assert snapstart.install(default_container) is True
    assert [hook for hook, _, _ in snapshot_restore_py.get_before_snapshot()] == before, "installing is idempotent"


async def test_prime_loads_what_a_delivery_needs_and_publishes_the_names_without_a_connection_left(
        local: LocalAWS, handlers: Handlers, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_VERSION", "7")  # what Lambda sets while it initialises version 7
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "awsworld-snap-flow")
    container = default_container()
    await asyncio.to_thread(container.reset)
    assert container.built_world is None
    # As the runtime does before the snapshot: call every registered hook with its arguments.
    for hook, args, kwargs in snapshot_restore_py.get_before_snapshot():
        await asyncio.to_thread(hook, *args, **kwargs)
    world = container.built_world
    assert world is not None and container.modules == [app.__name__], "the workflow modules are imported"
    assert set(world.clients.opened) == {"dynamodb", "sqs", "s3"}, "clients made, service models loaded"
    assert world.stats.requests == Counter({"dynamodb.PutItem": 2}), \
        "two requests: the names, published, and the version, registered as a deployment runs are pinned to"
    for client in _botocore_clients(container).values():
        assert not client._endpoint.http_session._manager.pools, "no connection is carried into the snapshot"
    [published] = [p for p in await local.world.published.read() if "deploy.quick" in p.workflows]
    assert published.ahead and published.host == "the flow function" and app.__name__ in published.modules
    [registered] = [d for d in await local.world.deployments.read() if d.deployment_id == "v7"]
    assert registered.target == "awsworld-snap-flow:7" and "deploy.quick" in registered.workflows
    assert container.worker.deployment == "v7"
    unbuilt = [m.__name__ for m in snapstart._models(WireModel) if not m.__pydantic_complete__]
    assert not unbuilt, f"contract models left to build after restore: {unbuilt}"


async def test_after_restore_connections_credentials_and_seed_are_new(
        local: LocalAWS, esm: EventSourceMapping, handlers: Handlers) -> None:
    container = default_container()
    await asyncio.to_thread(snapstart.prime, container)
    run = await local.client.start(app.quick, "before the snapshot")
    await esm.run_until(terminal(run))
    assert await run.result(timeout=5) == "before the snapshot"
    used = _botocore_clients(container)
    sessions = container.world.clients._session

    # Two environments restored from one snapshot start with the same memory, hence the same generator state.
    snapshot_state = random.getstate()
    draws = []
    for _ in range(2):
        random.setstate(snapshot_state)
        for hook, args, kwargs in snapshot_restore_py.get_after_restore():
            await asyncio.to_thread(hook, *args, **kwargs)
        draws.append([random.random() for _ in range(4)])
    assert draws[0] != draws[1], "each restored copy reseeds random from the OS"

    assert container.world.clients.opened == {}, "the clients (and their connection pools) are dropped"
    for client in used.values():
        assert not client._endpoint.http_session._manager.pools, "their sockets are closed"
    assert container.world.clients._session is not sessions, "credentials are resolved anew"

    before = container.world.stats.snapshot()
    again = await local.client.start(app.quick, "after the restore")
    await esm.run_until(terminal(again))
    assert await again.result(timeout=5) == "after the restore"
    renewed = _botocore_clients(container)
    assert renewed and all(renewed[s] is not used.get(s) for s in renewed), "deliveries run on new clients"
    assert (container.world.stats.snapshot() - before).total("dynamodb") > 0


def test_without_the_runtime_hooks_nothing_is_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapstart, "_hooks", None)
    assert snapstart.install(default_container) is False
