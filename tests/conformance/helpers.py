"""Small builders and probes shared by the storage conformance tests.

Every storage test runs on each backend of the World protocol: the AWS World on moto and on DynamoDB Local, and
the in-memory World (``[memory]``). A test that asserts how the AWS World lays out its storage (items, requests,
S3 objects) rather than what the contract says calls ``aws_world(world)``, which skips it on the in-memory
World; a test that mixes the two guards its AWS-only lines with ``on_aws(world)``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from awsworld._memory import MemoryWorld
from awsworld._memory.records import State
from awsworld.aws import AWSWorld
from awsworld.local import LocalAWS
from awsworld.world import Event, EventResult, slot_to_event_id
from conftest import LOCAL_FIXTURES, LOCALSTACK, STORAGE_BACKENDS  # tests/conftest.py (tests/ is on sys.path)

WORKFLOW = "wf-conformance"
MEMORY = "memory"
BACKENDS = STORAGE_BACKENDS
# A module about values in S3 or S3 objects adds the LocalStack backend (its S3 is not moto's).
WITH_LOCALSTACK = [*BACKENDS, LOCALSTACK]
AnyWorld = AWSWorld | MemoryWorld
AWS_LAYOUT = "asserts the AWS World's storage layout, not the contract"


def aws_world(world: AnyWorld) -> AWSWorld:
    """``world`` as the AWS World, or skip: for a test of the AWS World's storage layout (items, requests, S3
    objects), which the in-memory World does not have."""
    if not isinstance(world, AWSWorld):
        pytest.skip(AWS_LAYOUT)
    return world


def on_aws(world: AnyWorld) -> AWSWorld | None:
    """``world`` when it is the AWS World, else None: guards the AWS-layout lines of a contract test."""
    return world if isinstance(world, AWSWorld) else None


def module_world(backends: list[str] = BACKENDS) -> Any:
    """A ``world`` fixture shared by one module's tests: one World per backend (on its own table and bucket).

    Assign it to ``world`` in a module whose tests each work on runs of their own (and so do not need an empty
    table): the tests still run on every backend, with the same ids, but skip provisioning resources and
    opening clients per test. Table-wide assertions compare before/after, which holds because tests run one at
    a time. Tests that need an empty table take ``storage_world_factory`` instead.
    """

    @pytest.fixture(scope="module", params=backends, ids=backends, name="module_local_aws")
    def module_local_aws(request: pytest.FixtureRequest) -> LocalAWS | None:
        # A sync fixture: the session's LocalAWS fixtures are async and can only be requested from one.
        if request.param == MEMORY:
            return None
        return request.getfixturevalue(LOCAL_FIXTURES[request.param])

    @pytest.fixture(scope="module", name="world")
    async def world(module_local_aws: LocalAWS | None) -> AsyncIterator[AnyWorld]:
        if module_local_aws is None:
            memory = MemoryWorld()
            yield memory
            await memory.close()
            return
        config = await module_local_aws.new_config()
        shared = AWSWorld(config)
        yield shared
        await shared.close()
        await module_local_aws.drop(config)

    return module_local_aws, world


def per_test_world() -> Any:
    """A ``world`` fixture for a module whose tests each need empty storage: a fresh World per test, on every
    backend (``storage_world`` of tests/conftest.py)."""

    @pytest.fixture(name="world")
    async def world(storage_world: AnyWorld) -> AnyWorld:
        return storage_world

    return world


def another_process(world: AnyWorld) -> AnyWorld:
    """Another World on ``world``'s storage with its own clients and caches: what another process looks like
    to the store (for the in-memory World, another MemoryWorld sharing its storage). Close it after use."""
    if isinstance(world, AWSWorld):
        return AWSWorld(world.config)
    return MemoryWorld(storage=world.storage)


def module_peers(count: int = 8) -> Any:
    """A module-scoped ``peers`` fixture: ``count`` more Worlds on ``world``'s storage (``another_process``)."""

    @pytest.fixture(scope="module", name="peers")
    async def peers(world: AnyWorld) -> AsyncIterator[list[AnyWorld]]:
        made = [another_process(world) for _ in range(count)]
        yield made
        for other in made:
            await other.close()

    return peers


def unique(prefix: str) -> str:
    """An id no other test uses (hook ids and tokens are global, not per run)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def run_created(workflow_name: str = WORKFLOW, input: Any = None, **extra: Any) -> dict[str, Any]:
    return {"eventType": "run_created", "eventData": {"workflowName": workflow_name, "input": input, **extra}}


def run_started(**data: Any) -> dict[str, Any]:
    return {"eventType": "run_started", "eventData": data}


def run_completed(output: Any = None) -> dict[str, Any]:
    return {"eventType": "run_completed", "eventData": {"output": output}}


def run_failed(message: str = "boom", **error: Any) -> dict[str, Any]:
    return {"eventType": "run_failed", "eventData": {"error": {"message": message, **error}}}


def run_cancelled(reason: str | None = None) -> dict[str, Any]:
    return {"eventType": "run_cancelled", "eventData": {"cancelReason": reason} if reason else {}}


_DEFAULT: Any = object()


def step_created(step_id: str, name: str = "add", input: Any = _DEFAULT) -> dict[str, Any]:
    return {"eventType": "step_created", "correlationId": step_id,
            "eventData": {"stepName": name, "input": [1, 2] if input is _DEFAULT else input}}


def step_started(step_id: str) -> dict[str, Any]:
    return {"eventType": "step_started", "correlationId": step_id}


def step_completed(step_id: str, result: Any = 3) -> dict[str, Any]:
    return {"eventType": "step_completed", "correlationId": step_id, "eventData": {"result": result}}


def step_failed(step_id: str, message: str = "step broke") -> dict[str, Any]:
    return {"eventType": "step_failed", "correlationId": step_id, "eventData": {"error": {"message": message}}}


def step_retrying(step_id: str, retry_after: datetime | None = None, message: str = "retry me") -> dict[str, Any]:
    data: dict[str, Any] = {"error": {"message": message}}
    if retry_after is not None:
        data["retryAfter"] = retry_after.isoformat()
    return {"eventType": "step_retrying", "correlationId": step_id, "eventData": data}


def hook_created(hook_id: str, token: str, metadata: Any = None, retention_until: datetime | None = None
                 ) -> dict[str, Any]:
    data: dict[str, Any] = {"token": token}
    if metadata is not None:
        data["metadata"] = metadata
    if retention_until is not None:
        data["tokenRetentionUntil"] = retention_until.isoformat()
    return {"eventType": "hook_created", "correlationId": hook_id, "eventData": data}


def hook_received(hook_id: str, payload: Any = None) -> dict[str, Any]:
    return {"eventType": "hook_received", "correlationId": hook_id, "eventData": {"payload": payload}}


def hook_disposed(hook_id: str) -> dict[str, Any]:
    return {"eventType": "hook_disposed", "correlationId": hook_id}


def wait_created(wait_id: str, resume_at: datetime | None = None) -> dict[str, Any]:
    resume_at = resume_at or datetime.now(UTC) + timedelta(minutes=5)
    return {"eventType": "wait_created", "correlationId": wait_id, "eventData": {"resumeAt": resume_at.isoformat()}}


def wait_completed(wait_id: str) -> dict[str, Any]:
    return {"eventType": "wait_completed", "correlationId": wait_id}


def attr_set(**changes: str | None) -> dict[str, Any]:
    return {"eventType": "attr_set", "eventData": {"changes": [{"key": k, "value": v} for k, v in changes.items()]}}


def future(seconds: float = 600) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def past(seconds: float = 600) -> datetime:
    return datetime.now(UTC) - timedelta(seconds=seconds)


async def new_run(world: AnyWorld, *, start: bool = False, input: Any = None, workflow_name: str = WORKFLOW) -> str:
    """A fresh run (pending, or running when ``start``); returns its id."""
    result = await world.events.create(None, run_created(workflow_name, input))
    assert result.run is not None
    run_id = result.run.run_id
    if start:
        await world.events.create(run_id, run_started())
    return run_id


async def all_events(world: AnyWorld, run_id: str, *, limit: int = 1000, resolve_data: Any = "all") -> list[Event]:
    """The run's whole log, following cursors."""
    events: list[Event] = []
    cursor = None
    while True:
        page = await world.events.list(run_id, cursor=cursor, limit=limit, resolve_data=resolve_data)
        events.extend(page.data)
        cursor = page.cursor
        if not page.has_more:
            return events


def assert_dense(events: list[Event]) -> None:
    """Slots run 1..n with no hole and no duplicate, and every id is the slot-numbered form."""
    assert [e.slot for e in events] == list(range(1, len(events) + 1))
    assert [e.event_id for e in events] == [slot_to_event_id(i) for i in range(1, len(events) + 1)]


def types(events: list[Event]) -> list[str]:
    return [e.event_type for e in events]


async def stored(world: AnyWorld) -> list[dict[str, Any]] | State:
    """Everything the World stores, to assert that a refused write changed nothing: the AWS World's table
    items, or a deep copy of the in-memory World's state."""
    if isinstance(world, MemoryWorld):
        return world.storage.dump()
    return await table_items(world)


async def table_items(world: AWSWorld) -> list[dict[str, Any]]:
    """Every item in the AWS World's table, sorted (a layout test reads them; contract tests use ``stored``)."""
    ddb = await world.clients.dynamodb()
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": world.config.table_name, "ConsistentRead": True}
    while True:
        response = await ddb.scan(**kwargs)
        items.extend(response.get("Items", []))
        if not response.get("LastEvaluatedKey"):
            break
        kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
    return sorted(items, key=lambda i: (i["pk"]["S"], i["sk"]["S"]))


async def bucket_keys(world: AnyWorld) -> list[str]:
    """The AWS World's S3 object keys (the in-memory World keeps no objects: none)."""
    if not isinstance(world, AWSWorld):
        return []
    s3 = await world.clients.s3()
    keys: list[str] = []
    paginator = s3.get_paginator("list_objects_v2")
    async for page in paginator.paginate(Bucket=world.config.bucket_name):
        keys.extend(o["Key"] for o in page.get("Contents", []))
    return sorted(keys)


def written(result: EventResult) -> Event:
    assert result.event is not None, "the write should have appended an event"
    return result.event
