"""Idempotency-key markers of the in-memory queue, with the AWS World's rules (aws/queue/dedup.py).

A keyed send holds its key while its message can still be delivered: a repeated key answers with the holder's
message id and sends nothing; acknowledging the delivery frees the key (only if that message still holds it);
a redelivery pushes the marker's life out to its new due time. A marker also lapses on its own
``horizon`` after its message's due time (queue retention plus visibility timeout on SQS), so a message that
is never acknowledged (dead-lettered, say) does not hold its key for ever.

The AWS World needs claim, send and confirm as three writes because a sender may die in between. Here a send
is one synchronous step, so a marker is born confirmed: there is no "pending" state and no in-doubt answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from ...world.clock import Clock


@dataclass
class _Marker:
    message_id: str
    live_until: datetime


class DedupMarkers:
    def __init__(self, clock: Clock, *, horizon_seconds: float) -> None:
        self.clock = clock
        self.horizon = timedelta(seconds=horizon_seconds)
        self._markers: dict[tuple[str, str], _Marker] = {}

    def holder(self, queue_name: str, key: str) -> str | None:
        """The id of the message holding the key, or None when it is free (never held, released, lapsed)."""
        marker = self._markers.get((queue_name, key))
        if marker is None:
            return None
        if marker.live_until < self.clock.now():
            del self._markers[(queue_name, key)]
            return None
        return marker.message_id

    def hold(self, queue_name: str, key: str, message_id: str, due: datetime) -> None:
        self._markers[(queue_name, key)] = _Marker(message_id, due + self.horizon)

    def release(self, queue_name: str, key: str, message_id: str) -> None:
        """Free the key, but only if ``message_id`` still holds it (a later message may have taken it over)."""
        marker = self._markers.get((queue_name, key))
        if marker is not None and marker.message_id == message_id:
            del self._markers[(queue_name, key)]

    def extend(self, queue_name: str, key: str, message_id: str, due: datetime) -> None:
        """Keep the marker live past a redelivery's new due time."""
        marker = self._markers.get((queue_name, key))
        if marker is not None and marker.message_id == message_id:
            marker.live_until = max(marker.live_until, due + self.horizon)

    def __len__(self) -> int:
        return len(self._markers)
