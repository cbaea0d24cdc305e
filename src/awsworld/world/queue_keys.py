"""An idempotency key's marker: the one rule for when a repeated key answers with an earlier message's id.

A keyed send leaves a marker for (queue name, key): the message that holds the key, and until when. Every World
decides with these functions, so "is this key still taken?" has one answer:

- ``holder``: a marker holds its key while ``now <= live_until``; after that the key is free (the marker lapsed),
  whether or not anyone deleted it. A send whose key is held sends nothing and answers with the holder's id.
- ``live_until``: a marker lives as long as its message can still be delivered, its due time plus the key horizon
  (``world.queue.key_horizon_seconds``: the queue's retention plus one visibility timeout in flight).
- ``frees``: an acknowledgement frees the key only if its message still holds it (after a lapse, a later message
  may have taken the key over, and its marker must stay).
- ``extended``: a redelivery keeps the key past the re-sent message's new due time, and never shortens it.
- ``confirmed``: a claim's send went out, so its marker now lives as long as the message (a store that cannot
  claim and send in one step claims first, as *pending*, see below).

The in-memory World applies these to its dict of markers; its send is one synchronous step, so its markers are
born confirmed. The AWS World (``aws/queue/dedup.py``) writes each decision as the condition of its DynamoDB
request (``holder`` is the claim's ``attribute_not_exists(pk) OR liveUntil < :now``, ``frees`` the release's
``messageId = :id``, ``extended`` the extension's ``messageId = :id AND liveUntil < :live``) and adds what a
claim, send and confirm in three requests needs: a *pending* claim lives only a short lease, and a second sender
waits briefly for it to be confirmed. DynamoDB holds whole seconds, so that World rounds ``live_until`` up and
``now`` down: a key can stay held up to two seconds longer there, never shorter.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class KeyMarker:
    """A key's marker as read: the message holding the key, until when (epoch seconds), and whether its send is
    confirmed (False only while an AWS sender's claim is pending)."""

    message_id: str
    live_until: float
    sent: bool = True


def live_until(due_epoch: float, horizon_seconds: float) -> float:
    """Until when a marker holds its key: its message's due time plus the key horizon."""
    return due_epoch + horizon_seconds


def holder(marker: KeyMarker | None, now: float) -> KeyMarker | None:
    """The marker holding the key at ``now``; None when the key is free (no marker, or one that lapsed)."""
    return marker if marker is not None and marker.live_until >= now else None


def frees(marker: KeyMarker | None, message_id: str) -> bool:
    """Whether acknowledging (or failing to send) ``message_id`` deletes the marker: only while it holds it."""
    return marker is not None and marker.message_id == message_id


def extended(marker: KeyMarker | None, message_id: str, until: float) -> KeyMarker | None:
    """The marker once a redelivery of ``message_id`` needs it held ``until`` (``live_until`` of the new due
    time): None when it does not change (another message holds the key, or it lives at least that long already)."""
    if not frees(marker, message_id) or marker is None or marker.live_until >= until:
        return None
    return KeyMarker(message_id, until, sent=True)


def confirmed(marker: KeyMarker | None, message_id: str, until: float) -> KeyMarker | None:
    """The marker once ``message_id``'s send went out: confirmed, live ``until``; None when the claim is gone
    (released, because the message was delivered and acknowledged first, or taken over after a lapse)."""
    return KeyMarker(message_id, until, sent=True) if frees(marker, message_id) else None
