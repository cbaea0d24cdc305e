"""An idempotency key's marker: the rule (``world/queue_keys.py``) as pure functions, and every World keeping it.

The unit tests pin the decisions; the conformance case walks one keyed message through send, redelivery, a
stale acknowledgement and its own acknowledgement on each World, reading the marker each World stored after every
step and comparing it with what the rule says it must be, so a World whose markers drift from the rule (a
different horizon, an extension that shortens, an ack that frees another message's key) fails here.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from awsworld.world import Delivery
from awsworld.world.clock import clock_of
from awsworld.world.queue import QUEUE_RETENTION_SECONDS, QUEUE_VISIBILITY_TIMEOUT_SECONDS, key_horizon_seconds
from awsworld.world.queue_keys import KeyMarker, confirmed, extended, frees, holder, live_until

from .conftest import consumer_for, is_memory

QUEUE = "__wkf_workflow_keys"
PREFIX = "__wkf_workflow_"
HORIZON = key_horizon_seconds(QUEUE_RETENTION_SECONDS, QUEUE_VISIBILITY_TIMEOUT_SECONDS)


# -- the rule ------------------------------------------------------------------------------------------------------


def test_a_marker_holds_its_key_through_its_live_until_and_not_after() -> None:
    marker = KeyMarker("msg_a", 100.0)
    assert holder(marker, 99.0) is marker
    assert holder(marker, 100.0) is marker, "live_until itself still holds"
    assert holder(marker, 100.5) is None, "lapsed: the key is free without anyone deleting the marker"
    assert holder(None, 0.0) is None


def test_a_pending_marker_holds_its_key_too() -> None:
    pending = KeyMarker("msg_a", 130.0, sent=False)
    assert holder(pending, 120.0) is pending, "who decides what to answer (wait, in doubt) is the sender's business"


def test_a_marker_lives_its_message_due_time_plus_the_horizon() -> None:
    assert live_until(1_000.0, HORIZON) == 1_000.0 + QUEUE_RETENTION_SECONDS + QUEUE_VISIBILITY_TIMEOUT_SECONDS


def test_only_the_holder_frees_its_key() -> None:
    marker = KeyMarker("msg_a", 100.0)
    assert frees(marker, "msg_a")
    assert not frees(marker, "msg_b"), "a later message took the key over: its marker stays"
    assert not frees(None, "msg_a")


def test_a_redelivery_extends_and_never_shortens() -> None:
    marker = KeyMarker("msg_a", 100.0)
    assert extended(marker, "msg_a", 150.0) == KeyMarker("msg_a", 150.0)
    assert extended(marker, "msg_a", 100.0) is None, "as long already: nothing to write"
    assert extended(marker, "msg_a", 50.0) is None, "never shortened"
    assert extended(marker, "msg_b", 150.0) is None, "another message's marker is left alone"
    assert extended(None, "msg_a", 150.0) is None, "a freed key is not taken again by a redelivery"


def test_a_confirmation_sets_the_marker_live_only_while_its_claim_holds() -> None:
    pending = KeyMarker("msg_a", 130.0, sent=False)
    assert confirmed(pending, "msg_a", 90.0) == KeyMarker("msg_a", 90.0, sent=True), "the message's life, not the lease"
    assert confirmed(pending, "msg_b", 90.0) is None
    assert confirmed(None, "msg_a", 90.0) is None, "acknowledged before the confirmation: stays free"


# -- every World keeps it --------------------------------------------------------------------------------------------


async def stored(world: Any, key: str) -> KeyMarker | None:
    if is_memory(world):
        return world.memory_queue.marker(QUEUE, key)
    marker: KeyMarker | None = await world.sqs_queue.dedup.read(QUEUE, key)
    return marker


def near(marker: KeyMarker | None, want: KeyMarker | None, low: float, high: float) -> bool:
    """``marker`` is ``want`` with a live_until between the rule's for ``low`` and for ``high`` (DynamoDB holds
    whole seconds, rounded up: one more second at most)."""
    if marker is None or want is None:
        return marker is want
    return (marker.message_id, marker.sent) == (want.message_id, want.sent) and (
        live_until(low, HORIZON) <= marker.live_until <= live_until(high, HORIZON) + 1)


def now(world: Any) -> float:
    """The World's own now (the in-memory World's virtual clock is not ``time.time``)."""
    return clock_of(world).now().timestamp()


async def next_delivery(consumer: Any, timeout: float = 10.0) -> Delivery:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for outcome in await consumer.poll(10, 1):
            if isinstance(outcome, Delivery):
                return outcome
    raise AssertionError("no delivery arrived")


async def test_every_world_keeps_the_marker_rule(queue_world: Any) -> None:
    world = queue_world
    consumer = consumer_for(world, PREFIX)
    before = now(world)
    sent = await world.queue(QUEUE, {"v": 1}, idempotency_key="k", delay_seconds=1)
    marker = await stored(world, "k")
    assert near(marker, KeyMarker(sent, 0.0), before + 1, now(world) + 1), marker
    assert marker is not None and holder(marker, now(world)) is not None
    assert await world.queue(QUEUE, {"v": 2}, idempotency_key="k") == sent, "held: answers with its holder"

    first = await next_delivery(consumer)
    asked = now(world)
    await consumer.redeliver_after(first, 600)
    kept = await stored(world, "k")
    assert kept is not None
    want = extended(marker, sent, live_until(asked + 600, HORIZON))
    assert near(kept, want, asked + 600, now(world) + 600), (kept, want)

    await consumer.redeliver_after(first, 1)  # a shorter redelivery never shortens the marker
    assert await stored(world, "k") == kept

    stale = dataclasses.replace(first, message_id="msg_another")
    await consumer.ack(stale, delete_message=False)
    assert await stored(world, "k") == kept, "an ack frees the key only for the message holding it"

    second = await next_delivery(consumer)
    assert second.message_id == sent
    await consumer.ack(second)
    assert await stored(world, "k") is None, "frees: the holder's ack deletes the marker"
    assert await world.queue(QUEUE, {"v": 3}, idempotency_key="k") != sent
