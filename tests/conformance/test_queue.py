"""The Queue: names, delays, idempotency-key dedup, batches, large payloads.

The contract's rules run on moto, on LocalStack and on the in-memory World (``queue_world``); the consumer side is
driven with the consumer's ``poll`` the way the local poller drives it. What SQS, S3 and DynamoDB are asked
(request counts, hops, dedup markers, payloads in S3) is checked on the AWS World alone, on both SQS/S3 engines
(``sqs_s3_world``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from awsworld._http.push import push_envelope
from awsworld._memory.queue import MemoryQueue
from awsworld.aws import AWSWorld
from awsworld.aws.clients import AWSClients
from awsworld.aws.dynamodb.items import to_ddb
from awsworld.aws.dynamodb.reads import get_item
from awsworld.aws.keys import dedup_key
from awsworld.aws.queue.dedup import Claim, DedupInDoubtError
from awsworld.aws.queue.deliveries import Deferred, Outcome, Refused
from awsworld.aws.queue.sqs_queue import SqsQueue
from awsworld.aws.retention import expiry_tagging
from awsworld.world import Delivery, InvalidInputError
from awsworld.world.errors import WorldSetupError

from .conftest import activity, consumer_for, is_memory

QUEUE = "__wkf_workflow_orders"
PREFIX = "__wkf_workflow_"


async def drain(consumer: Any, want: int, timeout: float = 5.0) -> list[Delivery]:
    """Poll until ``want`` deliveries arrived (hops are handled on the way) or the time is up."""
    found: list[Delivery] = []
    deadline = time.monotonic() + timeout
    while len(found) < want and time.monotonic() < deadline:
        found += [o for o in await consumer.poll(10, 1) if isinstance(o, Delivery)]
    return found


async def poll_outcomes(consumer: Any, seconds: float) -> list[Outcome]:
    outcomes: list[Outcome] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        outcomes += await consumer.poll(10, 0)
        await asyncio.sleep(0.05)
    return outcomes


def sqs_requests(world: AWSWorld) -> dict[str, int]:
    return {k: v for k, v in world.stats.requests.items() if k.startswith("sqs.")}


# -- one message ------------------------------------------------------------------------------------------------


async def test_queue_delivers_with_stable_metadata(queue_world: Any) -> None:
    world = queue_world
    now = world.clock.now if is_memory(world) else lambda: datetime.now(UTC)
    before = now()
    message_id = await world.queue(QUEUE, {"runId": "wrun_1", "n": 1}, deployment_id="dpl_7")
    assert message_id.startswith("msg_")

    [delivery] = await drain(consumer_for(world, PREFIX), 1)
    assert delivery.message_id == message_id
    assert delivery.queue_name == QUEUE
    assert delivery.payload == {"runId": "wrun_1", "n": 1}
    assert (delivery.attempt, delivery.delivery_count) == (1, 1)
    assert before.replace(microsecond=0) <= delivery.created_at <= now()
    assert delivery.deployment_id == "dpl_7"
    assert delivery.transport_message_id != message_id, "the stable id is ours, not SQS's"
    assert delivery.meta()["messageId"] == message_id


async def test_a_send_without_a_key_is_one_sqs_request(sqs_s3_world: AWSWorld) -> None:
    sqs_s3_world.stats.reset()
    await sqs_s3_world.queue(QUEUE, {"runId": "wrun_1", "n": 1})
    assert sqs_s3_world.stats.requests == {"sqs.SendMessage": 1}, "one SQS request, nothing else"


async def test_deployment_id_defaults_to_the_config(queue_world: Any) -> None:
    if is_memory(queue_world):
        queue: Any = MemoryQueue(queue_world.clock, deployment_id="dpl_cfg")
    else:
        queue = SqsQueue(AWSClients(dataclasses.replace(queue_world.config, deployment_id="dpl_cfg")))
    try:
        assert await queue.get_deployment_id() == "dpl_cfg"
        await queue.queue(QUEUE, 1)
        [delivery] = await drain(queue.consumer(PREFIX), 1)
        assert delivery.deployment_id == "dpl_cfg"
    finally:
        if not is_memory(queue_world):
            await queue.clients.close()


async def test_namespaced_names_travel_whole_and_other_prefixes_are_refused(queue_world: Any) -> None:
    world = queue_world
    agent_queue = "__agent_wkf_workflow_session"
    message_id = await world.queue(agent_queue, {"turn": 1})

    workflow_consumer = consumer_for(world, PREFIX)
    outcomes = [o for o in await workflow_consumer.poll(10, 1)]
    assert [o.kind for o in outcomes] == ["refused"]
    refused = outcomes[0]
    assert isinstance(refused, Refused) or is_memory(world)
    assert (refused.message_id, refused.queue_name) == (message_id, agent_queue)
    assert refused.failure is not None, "reported failed, so it is retried for its own consumer"
    await workflow_consumer.release(refused)  # back on the queue at once, for its own consumer

    [delivery] = await drain(consumer_for(world, "__agent_wkf_workflow_"), 1)
    assert (delivery.message_id, delivery.queue_name) == (message_id, agent_queue)
    assert delivery.attempt == 2, "the refused receive counted as a delivery attempt"


BAD_NAMES: list[Any] = [
    "", "orders", "wkf_workflow_x", "__wkf_workflow_", "__wkf_step_x", "__Agent_wkf_workflow_x", "__1a_wkf_workflow_x",
    "__wkf_workflow_a b", "__wkf_workflow_\x00", "__wkf_workflow_" + "x" * 600, 42, None,
]


async def test_bad_queue_names_are_400(queue_world: Any) -> None:
    before = activity(queue_world)
    for name in BAD_NAMES:
        with pytest.raises(InvalidInputError) as raised:
            await queue_world.queue(name, {})
        assert raised.value.status == 400 and raised.value.field == "queueName", name
        with pytest.raises(InvalidInputError):
            await queue_world.queue_batch(name, [{"payload": 1}])
    assert activity(queue_world) == before, "a refused name sends nothing"


async def test_good_queue_names(queue_world: Any) -> None:
    for name in ["__wkf_workflow_a", "__wkf_workflow_workflow//./src/x.ts//fn@1.2", "__a1_wkf_workflow_x_y-z"]:
        assert (await queue_world.queue(name, None)).startswith("msg_")


def test_consumer_prefix_is_validated(queue_world: Any) -> None:
    for prefix in ["__wkf_workflow", "__wkf_workflow_x", "__X_wkf_workflow_", ""]:
        with pytest.raises(InvalidInputError):
            consumer_for(queue_world, prefix)


async def test_bad_options_are_400(queue_world: Any) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"delay_seconds": -1}, "delaySeconds"),
        ({"delay_seconds": float("nan")}, "delaySeconds"),
        ({"delay_seconds": "5"}, "delaySeconds"),
        ({"idempotency_key": 5}, "idempotencyKey"),
        ({"idempotency_key": ""}, "idempotencyKey"),
        ({"idempotency_key": "k" * 513}, "idempotencyKey"),
    ]
    before = activity(queue_world)
    for kwargs, field in cases:
        with pytest.raises(InvalidInputError) as raised:
            await queue_world.queue(QUEUE, {}, **kwargs)
        assert raised.value.field == field, kwargs
    assert activity(queue_world) == before


async def test_payload_that_is_not_json_is_400(queue_world: Any) -> None:
    before = activity(queue_world)
    for payload in ({"when": object()}, float("nan"), {"n": float("inf")}):
        with pytest.raises(InvalidInputError) as raised:
            await queue_world.queue(QUEUE, payload)
        assert raised.value.field == "payload"
    assert activity(queue_world) == before


# -- delays ---------------------------------------------------------------------------------------------------------


async def test_short_delay_waits(queue_world: Any) -> None:
    world = queue_world
    consumer = consumer_for(world, PREFIX)
    sent = time.monotonic()
    message_id = await world.queue(QUEUE, "later", delay_seconds=2)
    await asyncio.sleep(0.5)
    assert await consumer.poll(10, 0) == [], "not visible before its delay"
    [delivery] = await drain(consumer, 1, timeout=10)
    assert delivery.message_id == message_id
    assert time.monotonic() - sent >= 1.9, "not before its delay"
    # not late either, counted rather than timed (a loaded emulator is late by seconds): one send, no hop, and the
    # one delivery this drain took
    assert delivery.attempt == 1
    if is_memory(world):
        assert world.memory_queue.sends == 1, "one send: no hop"
    else:
        assert sqs_requests(world).get("sqs.SendMessage", 0) == 1, sqs_requests(world)


async def test_fractional_delay_is_honoured(queue_world: Any) -> None:
    consumer = consumer_for(queue_world, PREFIX)
    sent = time.monotonic()
    await queue_world.queue(QUEUE, "soon", delay_seconds=0.4)
    early = await consumer.poll(10, 0)
    # Due 0.4 s after the send reached the queue, so never before ``sent + 0.4``: a poll that ended before then
    # must find nothing. On a loaded machine the send and the poll may take longer than that (CI 108), and the
    # message may rightly be there already: it is then the one delivery.
    if time.monotonic() - sent < 0.4:
        assert early == [], "visible before its delay"
    delivered = early or await drain(consumer, 1, timeout=3)
    assert [d.payload for d in delivered] == ["soon"]
    assert time.monotonic() - sent >= 0.4


async def test_long_delay_hops_until_due_and_never_arrives_early(sqs_s3_world: AWSWorld) -> None:
    """SQS hides a message for *at least* its DelaySeconds (AWS's "message timers"; LocalStack shows it up to a
    second late, moto on time), so the number of hops depends on the engine: what holds everywhere is that every
    send waits at most one hop and every early arrival is re-sent, until the due time."""
    queue = SqsQueue(sqs_s3_world.clients, max_hop_seconds=1)
    consumer = queue.consumer(PREFIX)
    delays: list[int] = []
    sqs_s3_world.clients.register_handler("provide-client-params.sqs.SendMessage",
                                          lambda params, **_: delays.append(params.get("DelaySeconds", 0)))
    sent = time.time()
    message_id = await queue.queue(QUEUE, {"wake": True}, delay_seconds=3.5)

    deferred: list[Deferred] = []
    delivery: Delivery | None = None
    while delivery is None and time.time() - sent < 8:
        for outcome in await consumer.poll(10, 1):
            if isinstance(outcome, Deferred):
                deferred.append(outcome)
            elif isinstance(outcome, Delivery):
                delivery = outcome
    assert delivery is not None, "a long delay is never lost"
    arrived = time.time()
    assert arrived >= sent + 3.5, "never delivered before the due time"
    assert arrived <= sent + 6.5
    assert deferred, "the first hop (one second) arrives before the due time (3.5 s) and is deferred"
    assert len(delays) == 1 + len(deferred), "every early arrival was re-sent once"
    assert set(delays) == {1}, f"every send waits one hop (one second) at most: {delays}"
    assert {d.message_id for d in deferred} == {message_id}
    assert delivery.message_id == message_id
    assert delivery.attempt == 1, "hops are not delivery attempts"
    assert abs(delivery.created_at.timestamp() - sent) < 1, "created_at is the first send"
    assert delivery.payload == {"wake": True}


async def test_long_delay_uses_one_hop_on_the_first_send(sqs_s3_world: AWSWorld) -> None:
    queue = SqsQueue(sqs_s3_world.clients, max_hop_seconds=2)
    consumer = queue.consumer(PREFIX)
    await queue.queue(QUEUE, 1, delay_seconds=3600)
    await asyncio.sleep(0.5)
    assert await consumer.poll(10, 0) == [], "the first hop is an SQS delay, not an immediate message"


def test_hop_size_is_bounded(sqs_s3_world: AWSWorld) -> None:
    for bad in (0, 901):
        with pytest.raises(ValueError):
            SqsQueue(sqs_s3_world.clients, max_hop_seconds=bad)


# -- dedup ----------------------------------------------------------------------------------------------------------


async def test_dedup_while_queued_in_flight_and_free_after_ack(queue_world: Any) -> None:
    world = queue_world
    consumer = consumer_for(world, PREFIX)
    first = await world.queue(QUEUE, {"v": 1}, idempotency_key="step_1")
    if not is_memory(world):
        world.stats.reset()
    sent = world.memory_queue.sends if is_memory(world) else 0
    assert await world.queue(QUEUE, {"v": 2}, idempotency_key="step_1") == first, "dropped while queued"
    if is_memory(world):
        assert world.memory_queue.sends == sent, "a duplicate sends nothing"
    else:
        assert sqs_requests(world) == {}, "a duplicate sends nothing"

    [delivery] = await drain(consumer, 1)
    assert (delivery.message_id, delivery.payload, delivery.idempotency_key) == (first, {"v": 1}, "step_1")
    assert await world.queue(QUEUE, {"v": 3}, idempotency_key="step_1") == first, "dropped while in flight"
    assert await consumer.poll(10, 0) == []

    await consumer.ack(delivery)
    again = await world.queue(QUEUE, {"v": 4}, idempotency_key="step_1")
    assert again != first, "the key is free once the delivery is acknowledged"
    [second] = await drain(consumer, 1)
    assert (second.message_id, second.payload) == (again, {"v": 4})


async def test_dedup_is_per_queue_name(queue_world: Any) -> None:
    a = await queue_world.queue("__wkf_workflow_a", 1, idempotency_key="same")
    b = await queue_world.queue("__wkf_workflow_b", 2, idempotency_key="same")
    assert a != b
    assert len(await drain(consumer_for(queue_world, PREFIX), 2)) == 2


async def test_concurrent_sends_with_one_key_send_once(queue_world: Any) -> None:
    ids = await asyncio.gather(*(queue_world.queue(QUEUE, i, idempotency_key="race") for i in range(8)))
    assert len(set(ids)) == 1
    consumer = consumer_for(queue_world, PREFIX)
    [delivery] = await drain(consumer, 1)
    assert delivery.message_id == ids[0]
    assert await consumer.poll(10, 0) == []


async def test_failed_send_frees_the_key(sqs_s3_world: AWSWorld) -> None:
    world = sqs_s3_world
    broken = SqsQueue(world.clients, queue_url=world.config.queue_url + "-missing")
    with pytest.raises(WorldSetupError, match=r"-missing' does not exist"):  # (as the request named it)
        await broken.queue(QUEUE, 1, idempotency_key="k")
    sent = await world.queue(QUEUE, 2, idempotency_key="k")
    [delivery] = await drain(world.sqs_queue.consumer(PREFIX), 1)
    assert (delivery.message_id, delivery.payload) == (sent, 2), "the failed send left no marker behind"


async def _plant_marker(world: AWSWorld, key: str, message_id: str, live_until: float,
                        sent: bool | None = None) -> None:
    """The marker a sender leaves: ``sent=False`` is a claim whose send never happened (a crash after the
    claim), ``None`` a marker from before markers had a state."""
    item: dict[str, Any] = {**dedup_key(QUEUE, key), "messageId": message_id, "queueName": QUEUE,
                            "liveUntil": int(live_until)}
    if sent is not None:
        item["sent"] = sent
    ddb = await world.clients.dynamodb()
    await ddb.put_item(TableName=world.config.table_name, Item=to_ddb(item))


async def _marker(world: AWSWorld, key: str) -> dict[str, Any] | None:
    return await get_item(world.clients, dedup_key(QUEUE, key))


async def test_a_delayed_message_holds_its_key_until_acknowledged(queue_world: Any) -> None:
    world = queue_world
    sent = await world.queue(QUEUE, 1, idempotency_key="life", delay_seconds=2)
    assert await world.queue(QUEUE, 2, idempotency_key="life") == sent
    consumer = consumer_for(world, PREFIX)
    [delivery] = await drain(consumer, 1, timeout=10)
    assert await world.queue(QUEUE, 3, idempotency_key="life") == sent, "in flight: still held"
    await consumer.ack(delivery)
    assert await world.queue(QUEUE, 4, idempotency_key="life") != sent


async def test_a_sent_message_holds_its_key_for_its_whole_life(sqs_s3_world: AWSWorld) -> None:
    world = sqs_s3_world
    before = time.time()
    sent = await world.queue(QUEUE, 1, idempotency_key="life", delay_seconds=5)
    marker = await _marker(world, "life")
    assert marker is not None and marker["messageId"] == sent and marker["sent"] is True
    horizon = world.sqs_queue.dedup.horizon
    assert before + 5 + horizon <= marker["liveUntil"] <= time.time() + 7 + horizon, "confirmed: due + horizon"
    assert await world.queue(QUEUE, 2, idempotency_key="life") == sent
    [delivery] = await drain(world.sqs_queue.consumer(PREFIX), 1, timeout=10)
    await world.sqs_queue.consumer(PREFIX).ack(delivery)
    assert await _marker(world, "life") is None


async def test_a_claim_whose_send_never_happened_blocks_its_key_only_for_its_lease(sqs_s3_world: AWSWorld) -> None:
    """A crash between the claim and the send leaves a pending marker: the next sender is told to retry (never
    "already queued") while its lease runs, and gets through as soon as it lapses — not days later."""
    world = sqs_s3_world
    await _plant_marker(world, "crashed", "msg_never_sent", time.time() + 30, sent=False)
    started = time.monotonic()
    with pytest.raises(DedupInDoubtError) as doubt:
        await world.queue(QUEUE, 1, idempotency_key="crashed")
    assert doubt.value.status == 429 and doubt.value.retry_after is not None and doubt.value.retry_after > 20
    assert time.monotonic() - started < 5, "the sender waits briefly, not for the whole lease"
    [result] = await world.queue_batch(QUEUE, [{"payload": 1, "idempotencyKey": "crashed"}])
    assert result.retryable and not result.ok, "a batch entry says the same, per entry"

    await _plant_marker(world, "lapsing", "msg_never_sent", time.time() + 1, sent=False)
    fresh = await world.queue(QUEUE, 2, idempotency_key="lapsing")
    assert fresh != "msg_never_sent", "once the lease lapses the key is free again"
    [delivery] = await drain(world.sqs_queue.consumer(PREFIX), 1)
    assert (delivery.message_id, delivery.payload) == (fresh, 2)
    await _plant_marker(world, "crashed", "gone", time.time() - 1, sent=False)  # leave the key free


async def test_a_pending_claim_that_gets_confirmed_answers_its_message_id(sqs_s3_world: AWSWorld) -> None:
    """Another sender mid-send: the second one waits for the confirmation and sends nothing."""
    world = sqs_s3_world
    await _plant_marker(world, "midsend", "msg_other", time.time() + 30, sent=False)

    async def confirm_soon() -> None:
        await asyncio.sleep(0.3)
        await _plant_marker(world, "midsend", "msg_other", time.time() + 3600, sent=True)

    answer, _ = await asyncio.gather(world.queue(QUEUE, 1, idempotency_key="midsend"), confirm_soon())
    assert answer == "msg_other"
    assert await world.sqs_queue.consumer(PREFIX).poll(10, 0) == []


async def test_a_delivery_acknowledged_before_the_confirmation_frees_its_key(sqs_s3_world: AWSWorld) -> None:
    """The consumer may release the key before the sender confirms: the late confirmation must not bring
    the marker back (it would block the key for days)."""
    world = sqs_s3_world
    queue = world.sqs_queue
    claim = Claim(QUEUE, "fast", "msg_fast", time.time())
    assert await queue.dedup.claim(claim) is None
    await queue.dedup.release(QUEUE, "fast", "msg_fast")
    await queue.dedup.confirm([claim])
    assert await _marker(world, "fast") is None


async def test_marker_orphaned_by_a_crash_is_free_after_its_horizon(sqs_s3_world: AWSWorld) -> None:
    world = sqs_s3_world
    await _plant_marker(world, "old", "msg_orphan", time.time() - 1)
    await _plant_marker(world, "young", "msg_live", time.time() + 3600)
    fresh = await world.queue(QUEUE, 1, idempotency_key="old")
    assert fresh != "msg_orphan", "a marker past queue retention + visibility cannot hold a message any more"
    assert await world.queue(QUEUE, 2, idempotency_key="young") == "msg_live"
    [delivery] = await drain(world.sqs_queue.consumer(PREFIX), 1)
    assert delivery.message_id == fresh


# -- large payloads -------------------------------------------------------------------------------------------------


async def test_large_payloads_are_delivered_whole(queue_world: Any) -> None:
    big = {"runId": "wrun_big", "blob": "x" * (300 * 1024)}
    message_id = await queue_world.queue(QUEUE, big)
    [delivery] = await drain(consumer_for(queue_world, PREFIX), 1)
    assert (delivery.message_id, delivery.payload) == (message_id, big)


async def test_large_payload_rides_in_s3(sqs_s3_world: AWSWorld) -> None:
    world = sqs_s3_world
    big = {"runId": "wrun_big", "blob": "x" * (300 * 1024)}
    world.stats.reset()
    message_id = await world.queue(QUEUE, big)
    assert world.stats.requests["s3.PutObject"] == 1
    s3 = await world.clients.s3()
    listed = await s3.list_objects_v2(Bucket=world.config.bucket_name, Prefix="runs/wrun_big/queue/")
    assert [o["Key"] for o in listed.get("Contents", [])] == [f"runs/wrun_big/queue/{message_id}.json"]

    await world.queue(QUEUE, ["y" * (300 * 1024)])  # no run id: under queue/
    listed = await s3.list_objects_v2(Bucket=world.config.bucket_name, Prefix="queue/")
    assert len(listed.get("Contents", [])) == 1

    deliveries = {d.message_id: d for d in await drain(world.sqs_queue.consumer(PREFIX), 2)}
    assert deliveries[message_id].payload == big


async def test_a_large_payload_is_stored_under_the_run_it_names(sqs_s3_world: AWSWorld) -> None:
    """Where a payload over the inline limit lands (``world.queue.named_run``): under the run's prefix, tagged with
    its expiry class, when it names its run by ``runId`` or ``workflowRunId`` (the Workflow SDK's step message), or
    its push envelope's message does (the World server's ``deliverTo``); under ``queue/``, untagged (a lifecycle rule
    of its own expires those), when it names none or names an id no key may hold. Each comes back whole."""
    world = sqs_s3_world
    blob = "x" * (210 * 1024)
    step_message = {"workflowName": "order", "workflowRunId": "wrun_step", "workflowStartedAt": 1,
                    "stepId": "step_1", "blob": blob}
    pushed = push_envelope("__wkf_step_order", {"runId": "wrun_pushed", "blob": blob}, "http://localhost:3000")
    expected = {"wrun_step": step_message, "wrun_pushed": pushed, "queue-a": {"blob": blob},
                "queue-b": {"runId": "../wrun_other", "blob": blob}, "queue-c": [blob]}
    sent = {name: await world.queue(QUEUE, payload) for name, payload in expected.items()}

    s3 = await world.clients.s3()
    bucket = world.config.bucket_name
    keys = {o["Key"] for o in (await s3.list_objects_v2(Bucket=bucket)).get("Contents", [])}
    tagging = expiry_tagging(world.clients.retention.object_expiry("wrun_step"))
    for name, message_id in sent.items():
        key = (f"queue/{message_id}.json" if name.startswith("queue-") else
               f"runs/{name}/queue/{message_id}.json")
        assert key in keys, (name, sorted(keys))
        tags = (await s3.get_object_tagging(Bucket=bucket, Key=key))["TagSet"]
        assert "&".join(f"{t['Key']}={t['Value']}" for t in tags) == ("" if name.startswith("queue-") else tagging)
    deliveries = {d.message_id: d.payload for d in await drain(world.sqs_queue.consumer(PREFIX), len(sent))}
    assert deliveries == {sent[name]: payload for name, payload in expected.items()}


# -- batches --------------------------------------------------------------------------------------------------------


def _batch_of_25() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"payload": {"i": i}, "idempotencyKey": f"k{i}"} for i in range(25)]
    messages[3]["delaySeconds"] = -5                                  # rejected: bad delay
    messages[9]["payload"] = {"i": 9, "blob": "z" * (260 * 1024)}     # rejected: over the size cap
    messages[12]["payload"] = {"i": 12, "blob": "w" * (210 * 1024)}   # accepted (rides in S3 on AWS)
    messages[17] = {"payload": {"i": 17}, "idempotency_key": "k5"}    # same key as entry 5: one message
    messages[20] = {"message": {"i": 20}, "delay_seconds": 1}         # snake_case, "message" alias
    return messages


async def test_batch_results_one_per_input_in_order_on_any_queue(queue_world: Any) -> None:
    if is_memory(queue_world):
        queue: Any = MemoryQueue(queue_world.clock, max_payload_bytes=250 * 1024)
    else:
        queue = SqsQueue(AWSClients(dataclasses.replace(queue_world.config, max_value_bytes=250 * 1024)))
    try:
        results = await queue.queue_batch(QUEUE, _batch_of_25())
        assert len(results) == 25
        rejected = {i for i, r in enumerate(results) if r.error is not None}
        assert rejected == {3, 9}
        assert not results[3].retryable and not results[9].retryable
        assert "delay" in (results[3].error or "")
        assert results[17].message_id == results[5].message_id
        ids = [r.message_id for i, r in enumerate(results) if i not in rejected | {17}]
        assert len(set(ids)) == len(ids) == 22
        deliveries = await drain(queue.consumer(PREFIX), 22)
        by_id = {d.message_id: d.payload for d in deliveries}
        assert len(by_id) == 22
        for i, result in enumerate(results):
            if i not in rejected and i != 17:
                assert by_id[result.message_id]["i"] == i, "each id belongs to its own input"
    finally:
        if not is_memory(queue_world):
            await queue.clients.close()


async def test_a_batch_costs_few_requests(sqs_s3_world: AWSWorld) -> None:
    clients = AWSClients(dataclasses.replace(sqs_s3_world.config, max_value_bytes=250 * 1024))
    queue = SqsQueue(clients)
    try:
        clients.stats.reset()
        results = await queue.queue_batch(QUEUE, _batch_of_25())
        assert {i for i, r in enumerate(results) if r.error is not None} == {3, 9}
        assert clients.stats.requests["sqs.SendMessageBatch"] == 3, "22 messages in batches of at most ten"
        # each key claimed by a plain conditional put, but entry 9's: a payload over the bound with a few values
        # is refused before its key is claimed (and before its JSON is made: limits.json_size_over)
        assert clients.stats.requests["dynamodb.PutItem"] == 21, "each key claimed by a plain conditional put"
        assert clients.stats.requests["dynamodb.UpdateItem"] == 21, "confirmed once sent (entry 9 never was)"
        assert clients.stats.transaction_items == 0, "no marker write is transactional"
    finally:
        await clients.close()


async def test_batch_drops_keys_already_queued(queue_world: Any) -> None:
    world = queue_world
    original = await world.queue(QUEUE, "first", idempotency_key="dup")
    results = await world.queue_batch(QUEUE, [{"payload": "a", "idempotencyKey": "new"},
                                              {"payload": "b", "idempotencyKey": "dup"}])
    assert results[1].message_id == original and results[1].error is None
    consumer = consumer_for(world, PREFIX)
    deliveries = await drain(consumer, 2)
    assert sorted(d.payload for d in deliveries) == ["a", "first"]
    assert await consumer.poll(10, 0) == []


async def test_batch_fan_out_of_256(queue_world: Any) -> None:
    world = queue_world
    if not is_memory(world):
        world.stats.reset()
    results = await world.queue_batch(QUEUE, [{"payload": {"branch": i}, "idempotencyKey": f"step_{i}"}
                                              for i in range(256)])
    assert all(r.ok for r in results) and len({r.message_id for r in results}) == 256
    if not is_memory(world):  # what it costs on AWS
        assert world.stats.requests["sqs.SendMessageBatch"] == 26
        assert world.stats.requests["dynamodb.PutItem"] == 256 and world.stats.transaction_items == 0
    # Publishing the same batch again (the runtime's recovery) sends nothing new.
    again = await world.queue_batch(QUEUE, [{"payload": {"branch": i}, "idempotencyKey": f"step_{i}"}
                                            for i in range(256)])
    assert [r.message_id for r in again] == [r.message_id for r in results]


async def test_batch_request_level_failure_raises_and_frees_keys(sqs_s3_world: AWSWorld) -> None:
    world = sqs_s3_world
    broken = SqsQueue(world.clients, queue_url=world.config.queue_url + "-missing")
    with pytest.raises(WorldSetupError, match=r"-missing' does not exist"):  # (as the request named it)
        await broken.queue_batch(QUEUE, [{"payload": i, "idempotencyKey": f"b{i}"} for i in range(12)])
    results = await world.queue_batch(QUEUE, [{"payload": i, "idempotencyKey": f"b{i}"} for i in range(12)])
    assert all(r.ok for r in results)
    assert len(await drain(world.sqs_queue.consumer(PREFIX), 12)) == 12


async def test_empty_batch(queue_world: Any) -> None:
    before = activity(queue_world)
    assert await queue_world.queue_batch(QUEUE, []) == []
    assert activity(queue_world) == before


async def test_batch_of_large_payloads_is_split_by_size(sqs_s3_world: AWSWorld) -> None:
    world = sqs_s3_world
    world.stats.reset()
    results = await world.queue_batch(QUEUE, [{"payload": "p" * (150 * 1024)} for _ in range(4)])
    assert all(r.ok for r in results)
    assert world.stats.requests["sqs.SendMessageBatch"] == 4, "SQS takes at most 256 KiB per batch"
    assert len(await drain(world.sqs_queue.consumer(PREFIX), 4)) == 4

