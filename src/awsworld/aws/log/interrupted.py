"""Values stored before a commit that was interrupted: delete the S3 object only when no event took it.

A large value is written to S3 before the transaction that references it. When the transaction is refused,
nothing references the object and the writer deletes it. When the write fails *without* an answer (a read
before the commit failed, or the commit itself raised a transient error), the transaction may not have been
sent, or may have been sent and committed: the object is deleted only if no event stands at the slots the
transaction would have filled with a reference to it. A process that dies in between leaves the object to
the bucket's lifecycle rules (a run's objects expire with its items, by their expiry-class tag, see
``aws/retention.py``): nothing can run then.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..values import StoredValue, ValueStore
from .event_reader import EventReader


async def discard_unless_recorded(reader: EventReader, values: ValueStore, run_id: str, stored: StoredValue | None,
                                  slots: Iterable[int]) -> None:
    """Delete ``stored``'s S3 object unless an event at one of ``slots`` (every slot a transaction carrying
    it was sent for) references it. Best effort: when the check itself fails, the object is kept."""
    if not stored or "r" not in stored:
        return
    wanted = sorted(set(slots))
    if wanted:
        try:
            events = await reader.events_at(run_id, wanted)
        except Exception:
            return  # cannot tell: keeping an object costs storage, deleting a referenced one loses a value
        if any((e.val or {}).get("r") == stored["r"] for e in events.values()):
            return
    await values.discard(stored)
