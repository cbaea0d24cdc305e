"""Retention (issue 13, item 4): every DynamoDB item of a run carries its TTL from the moment it is written
(``written + R + H``), and the run's end sets the head's TTL to ``end + R`` (later when a token of the run
stays reserved). moto and DynamoDB Local store ``expiresAt`` but expire nothing on this clock, so these tests
read the values back; that the items vanish is DynamoDB's promise, not ours.

The run's S3 objects follow the same rule through an expiry-class tag (``aws/resources.py``: one lifecycle rule
per class): these tests read each object's tag back from moto and the class's rule from the bucket LocalAWS
provisioned as the template does.

The in-memory World keeps every run for the life of the process (nothing observable expires there): its test
checks that the retention a run was created with comes back in its execution context, as on AWS.
"""

from __future__ import annotations

import time
from typing import Any

from awsworld.authoring.definitions import RETENTION_CONTEXT_KEY as RUNTIME_RETENTION_KEY
from awsworld.aws import AWSWorld
from awsworld.aws.resources import EXPIRY_RATIO, EXPIRY_TAG, TTL_ATTRIBUTE, run_prefix
from awsworld.aws.retention import RETENTION_ATTRIBUTE, RETENTION_CONTEXT_KEY, expiry_class

from .helpers import (
    WITH_LOCALSTACK,
    AnyWorld,
    another_process,
    attr_set,
    aws_world,
    future,
    hook_created,
    hook_received,
    module_world,
    run_completed,
    run_created,
    run_started,
    step_completed,
    step_created,
    step_started,
    table_items,
    unique,
    wait_created,
)

module_local_aws, world = module_world(WITH_LOCALSTACK)  # every test reads only its own run's items

DAY = 24 * 3600
SLACK = 120  # seconds between the writes and the checks
LARGE = "x" * (20 * 1024)  # over the inline limit: an S3 object
QUEUE = "__wkf_workflow_retention"


def _ttl(item: dict[str, Any]) -> int | None:
    value = item.get(TTL_ATTRIBUTE)
    return None if value is None else int(value["N"])


async def _run_items(world: AnyWorld, run_id: str, tokens: list[str], hook_ids: list[str]) -> dict[str, Any]:
    """Every item of the run: its partition, its tokens and its hook pointers, by (pk, sk)."""
    keys = {f"RUN#{run_id}", *(f"TOKEN#{t}" for t in tokens), *(f"HOOKID#{h}" for h in hook_ids)}
    return {(i["pk"]["S"], i["sk"]["S"]): i for i in await table_items(aws_world(world)) if i["pk"]["S"] in keys}


async def test_every_item_carries_its_ttl_from_the_first_write_and_the_end_sets_the_heads(
        world: AnyWorld) -> None:
    world = aws_world(world)
    retention, horizon = 2 * DAY, world.config.max_run_seconds
    created = await world.events.create(None, run_created(
        input={"x": 1}, attributes={"team": "a"}, executionContext={"seed": "s", RETENTION_CONTEXT_KEY: retention}))
    assert created.run is not None
    run_id = created.run.run_id
    kept, freed = unique("tok-kept"), unique("tok-freed")
    hook_kept, hook_freed, step_id, wait_id = unique("hk"), unique("hf"), unique("st"), unique("wt")
    await world.events.create(run_id, run_started())
    await world.events.create(run_id, step_created(step_id))
    await world.events.create(run_id, step_started(step_id))
    await world.events.create(run_id, step_completed(step_id, {"y": 2}))
    await world.events.create(run_id, attr_set(stage="two", extra="new"))
    retained_until = future(7 * DAY)
    await world.events.create(run_id, hook_created(hook_kept, kept, retention_until=retained_until))
    await world.events.create(run_id, hook_created(hook_freed, freed))
    await world.events.create(run_id, {"eventType": "hook_received", "correlationId": hook_freed,
                                       "eventData": {"payload": {"ok": True}, "resumeId": "delivery-1"}})
    await world.events.create(run_id, wait_created(wait_id))
    await world.streams.write(run_id, "log", "a line")
    await world.streams.close(run_id, "log")

    now = int(time.time())
    running = await _run_items(world, run_id, [kept, freed], [hook_kept, hook_freed])
    kinds = {sk.split("#")[0] if pk.startswith("RUN#") else pk.split("#")[0] for pk, sk in running}
    assert kinds >= {"RUN", "EVT", "ATTRS", "STEP", "HOOK", "WAIT", "RESUME", "STREAM", "SEG", "TOKEN", "HOOKID"}
    for key, item in running.items():  # nothing of a running run expires before it could end and be kept R
        ttl = _ttl(item)
        assert ttl is not None, key
        assert now + retention + horizon - SLACK <= ttl <= now + retention + horizon + SLACK, key
    assert int(running[(f"RUN#{run_id}", "RUN")][RETENTION_ATTRIBUTE]["N"]) == retention

    await world.events.create(run_id, run_completed({"done": True}))
    end = int(time.time())
    ended = await _run_items(world, run_id, [kept, freed], [hook_kept, hook_freed])
    head = ended.pop((f"RUN#{run_id}", "RUN"))
    # The head outlives the token it keeps reserved (the contract: the owner stays available meanwhile).
    assert _ttl(head) == int(retained_until.timestamp()) + 1
    assert _ttl(ended.pop((f"TOKEN#{kept}", "TOKEN"))) == int(retained_until.timestamp()) + 1
    # A freed token's item stays as the record that its run ended (a resume says so), until the run expires.
    freed_token = ended.pop((f"TOKEN#{freed}", "TOKEN"))
    assert freed_token["released"] == {"BOOL": True} and freed_token["endStatus"] == {"S": "completed"}
    assert _ttl(freed_token) == _ttl(head)
    assert (f"HOOKID#{hook_freed}", "HOOKID") not in ended
    for key, item in ended.items():  # untouched by the end: each item keeps the TTL it was written with
        if key in running:
            assert _ttl(item) == _ttl(running[key]), key
        else:  # the terminal event's block, written by the end like any other item
            assert abs((_ttl(item) or 0) - (end + retention + horizon)) <= SLACK, key
        assert (_ttl(item) or 0) >= end + retention, key


async def test_the_end_of_a_run_without_reserved_tokens_keeps_it_for_its_retention(world: AnyWorld
                                                                                 ) -> None:
    world = aws_world(world)
    created = await world.events.create(None, run_created(executionContext={RETENTION_CONTEXT_KEY: 3600}))
    assert created.run is not None
    await world.events.create(created.run.run_id, run_started())
    await world.events.create(created.run.run_id, run_completed(1))
    [head] = [i for i in await table_items(world) if i["pk"]["S"] == f"RUN#{created.run.run_id}" and
              i["sk"]["S"] == "RUN"]
    assert abs((_ttl(head) or 0) - (int(time.time()) + 3600)) <= SLACK


async def test_a_run_without_a_retention_takes_the_deployments(world: AnyWorld) -> None:
    world = aws_world(world)
    created = await world.events.create(None, run_created())
    assert created.run is not None
    [head] = [i for i in await table_items(world) if i["pk"]["S"] == f"RUN#{created.run.run_id}" and
              i["sk"]["S"] == "RUN"]
    assert int(head[RETENTION_ATTRIBUTE]["N"]) == world.config.retention_seconds
    expected = int(time.time()) + world.config.retention_seconds + world.config.max_run_seconds
    assert abs((_ttl(head) or 0) - expected) <= SLACK


async def test_the_retention_a_run_was_created_with_is_in_its_execution_context(world: AnyWorld) -> None:
    assert RETENTION_CONTEXT_KEY == RUNTIME_RETENTION_KEY  # the runtime writes what the World reads
    created = await world.events.create(None, run_created(
        executionContext={"seed": "s", RETENTION_CONTEXT_KEY: 30 * DAY}))
    assert created.run is not None
    run = await world.runs.get(created.run.run_id)
    assert run.execution_context == {"seed": "s", RETENTION_CONTEXT_KEY: 30 * DAY}


# ------------------------------------------------------------------------------------------ S3 objects


async def _object_classes(world: AWSWorld, run_id: str) -> dict[str, int]:
    """Every S3 object of the run (its prefix) and the expiry class its tag names, checked against the bucket's
    lifecycle rule for that class (as LocalAWS provisioned it from ``resources.bucket_lifecycle_rules``)."""
    s3 = await world.clients.s3()
    bucket = world.config.bucket_name
    rules = (await s3.get_bucket_lifecycle_configuration(Bucket=bucket))["Rules"]
    expires = {r["Filter"]["And"]["Tags"][0]["Value"]: r["Expiration"]["Days"] for r in rules
               if "And" in r["Filter"] and r["Filter"]["And"]["Prefix"] == "runs/"}
    listed = await s3.list_objects_v2(Bucket=bucket, Prefix=run_prefix(run_id))
    classes = {}
    for key in (o["Key"] for o in listed.get("Contents", [])):
        tags = {t["Key"]: t["Value"] for t in (await s3.get_object_tagging(Bucket=bucket, Key=key))["TagSet"]}
        assert expires[tags[EXPIRY_TAG]] == int(tags[EXPIRY_TAG]), key  # a rule expires that class, that late
        classes[key.removeprefix(run_prefix(run_id)).split("/")[0]] = int(tags[EXPIRY_TAG])
    return classes


async def _run_with_objects(world: AWSWorld, retention: int | None) -> str:
    """A run with an object of every kind: a large input, a large step result, a hook payload, a stream's chunks
    and a large queue payload naming it."""
    context = {RETENTION_CONTEXT_KEY: retention} if retention else {}
    created = await world.events.create(None, run_created(input=LARGE, executionContext=context))
    assert created.run is not None
    run_id = created.run.run_id
    step_id, hook_id = unique("st"), unique("hk")
    await world.events.create(run_id, run_started())
    await world.events.create(run_id, step_created(step_id))
    await world.events.create(run_id, step_started(step_id))
    await world.events.create(run_id, step_completed(step_id, LARGE))
    await world.events.create(run_id, hook_created(hook_id, unique("tok")))
    await world.events.create(run_id, hook_received(hook_id, LARGE))
    await world.streams.write(run_id, "log", "a line")
    await world.queue(QUEUE, {"runId": run_id, "blob": "q" * (300 * 1024)})
    return run_id


async def test_every_s3_object_of_a_run_carries_the_expiry_class_of_its_retention(world: AnyWorld) -> None:
    world = aws_world(world)
    horizon = world.config.max_run_seconds
    for retention in (2 * DAY, None):  # a workflow's retention="2d", and the stack's default
        kept = retention or world.config.retention_seconds
        run_id = await _run_with_objects(world, retention)
        classes = await _object_classes(world, run_id)
        assert set(classes) == {"values", "streams", "queue"}, classes
        assert set(classes.values()) == {expiry_class(kept + horizon)}, (retention, classes)
        # As long as the items written with it (written + R + H), and at most 25% longer (in whole days).
        days = classes["values"]
        assert days * DAY >= kept + horizon
        assert days <= EXPIRY_RATIO * -(-(kept + horizon) // DAY)
    assert expiry_class(2 * DAY + horizon) < expiry_class(world.config.retention_seconds + horizon)


async def test_a_run_sleeping_past_the_stacks_retention_keeps_its_s3_objects_until_it_ends_and_is_kept(
        world: AnyWorld) -> None:
    """The data loss the single ``runs/`` rule had: with ``ExpirationInDays: RunRetentionDays`` the input of a
    run sleeping longer than that was gone while the run still pointed at it."""
    world = aws_world(world)
    retention, horizon = world.config.retention_seconds, world.config.max_run_seconds
    created = await world.events.create(None, run_created(input=LARGE))
    assert created.run is not None
    run_id = created.run.run_id
    await world.events.create(run_id, run_started())
    wake = future(horizon - DAY)  # asleep for longer than RunRetentionDays, shorter than MaxRunDays
    assert horizon - DAY > retention
    await world.events.create(run_id, wait_created(unique("wt"), resume_at=wake))
    s3 = await world.clients.s3()
    [stored] = (await s3.list_objects_v2(Bucket=world.config.bucket_name, Prefix=run_prefix(run_id)))["Contents"]
    days = (await _object_classes(world, run_id))["values"]
    written = int(stored["LastModified"].timestamp())
    # S3 deletes an object at the first midnight (UTC) after creation + days: no sooner than this.
    assert written + days * DAY >= int(wake.timestamp()) + retention, "readable until the run ends + its retention"
    assert days * DAY > retention + DAY, "longer than the one rule of RunRetentionDays would keep it"


async def test_a_value_stored_before_its_process_knew_the_runs_retention_is_retagged_by_its_commit(
        world: AnyWorld) -> None:
    """A queued step's result on a fresh container: the value is stored before the commit reads the run head,
    so it is tagged with the stack default's class; the commit learns the run's and retags it (one request)."""
    world = aws_world(world)
    created = await world.events.create(None, run_created(executionContext={RETENTION_CONTEXT_KEY: 2 * DAY}))
    assert created.run is not None
    run_id, step_id = created.run.run_id, unique("st")
    await world.events.create(run_id, run_started())
    await world.events.create(run_id, step_created(step_id))
    await world.events.create(run_id, step_started(step_id))
    fresh = another_process(world)
    assert isinstance(fresh, AWSWorld)
    try:
        await fresh.events.create(run_id, step_completed(step_id, LARGE))
        assert fresh.stats.requests["s3.PutObjectTagging"] == 1
        assert fresh.stats.requests["s3.PutObject"] == 1
    finally:
        await fresh.close()
    assert await _object_classes(world, run_id) == {"values": expiry_class(2 * DAY + world.config.max_run_seconds)}
