"""When a run's DynamoDB items expire (TTL on ``expiresAt``), decided so that ending a run rewrites one item.

A run's retention ``R`` (how long a finished run stays readable: ``@workflow(retention=...)``, carried by its
``run_created`` in ``executionContext.retentionSeconds``, else the stack's ``AWSWORLD_RETENTION_DAYS``) is known
from the run's first write on. The rule:

* **Every item written for a run carries its TTL from the moment it is written**: ``written + R + H``, where
  ``H`` is the longest a run may stay running (``AWSWORLD_MAX_RUN_DAYS``). An item written while the run runs
  therefore outlives the run's end by at least ``R`` as long as the run lasts less than ``H``; nothing is
  rewritten later, so a step's commit carries the same items as before, each about 15 bytes larger (within
  the KB a write is billed by, measured with ``bench/bill.py``). ``R`` there is a day at least
  (``running_retention``): a run still running at ``H`` is ended by the watchdog's wake a tick and a due's bucket
  later (``world/rules/lifetime.py``), and a shorter retention would let its first items expire before that
  wake. The run's end still counts the retention asked for (below), so nothing of the run is readable longer.
* **The run's end sets the head's TTL to ``end + R``** (in the terminal commit, which rewrites the head
  anyway), or later if a hook token of the run stays reserved longer (the contract keeps the owning run
  available while its token is). From then on the run is gone as a whole: every read starts at the head.
  The partition's other items are unreachable and follow within ``H`` (DynamoDB deletes them for free);
  a retained token's item expires when its retention ends.
* The head of a running run carries ``created + R + H`` like every other item, so an abandoned partition is
  collected too.

Rewriting every item at the end instead would bill each item again by its size (event blocks reach 48 KB);
refreshing TTLs while a run runs cannot help a run that sleeps (it writes nothing while it waits). So ``H`` is
the one limit: a run that stays running longer than ``R + H`` loses its oldest items (docs/how-to/retention.md says so).

**S3 objects of a run follow the same rule**: every object written under ``runs/<runId>/`` (large values,
stream chunks, large queue payloads) is tagged with the expiry class covering ``R + H`` (``resources.py``: the
bucket has one lifecycle rule per class, and S3 counts from the object's creation), so an object outlives every
item written with or after it that can still be read. A writer that does not know the run's retention uses the
stack's default, as it does for its items; the event writer, whose commit reads the head, retags a value it
stored before it knew (``ValueStore.retag``).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from datetime import datetime
from typing import Any

from .resources import EXPIRY_CLASSES_DAYS, EXPIRY_TAG

RETENTION_CONTEXT_KEY = "retentionSeconds"
"""The ``run_created`` executionContext key carrying the workflow's retention (whole seconds)."""
RETENTION_ATTRIBUTE = "ret"
"""The run head's attribute holding the run's retention in seconds, so the terminal write knows it."""
_KNOWN = 4096
_DAY = 24 * 3600


LIFETIME_WAKE_SECONDS = 24 * 3600
"""The shortest retention an item written while its run runs is given (``running_retention``): how late after the
end of a run's lifetime the wake that ends it may come and still find every item of the run. The wake comes within
the tick's period (``WatchdogRate``: a minute by default) and the due's bucket (a minute); a day also covers a
tick set to hours, and the watchdog's longest snooze (``world.watch.MAX_SNOOZE_SECONDS``)."""


def epoch(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp())


def running_retention(retention: int) -> int:
    """The retention the TTL of an item written while its run runs counts (``written + this + H``): the run's,
    but never less than ``LIFETIME_WAKE_SECONDS``. Only the head's TTL at the run's end (``end_ttl``) decides
    how long a finished run stays readable, and it counts the run's own retention."""
    return max(retention, LIFETIME_WAKE_SECONDS)


def running_ttl(now: str, retention: int, max_run: int) -> int:
    """The TTL of an item of a run with this retention written at ``now`` (ISO) while the run runs."""
    return epoch(now) + running_retention(retention) + max_run


def retention_of(context: Any, default: int) -> int:
    """The retention a ``run_created`` asks for (its executionContext), else ``default``."""
    value = context.get(RETENTION_CONTEXT_KEY) if isinstance(context, dict) else None
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return int(value)
    return default


def expiry_class(lifetime_seconds: int) -> int:
    """The shortest expiry class (days) that keeps an object ``lifetime_seconds``; the longest class when none
    does (a retention plus ``H`` over ten years: docs/how-to/retention.md names the limit)."""
    needed = math.ceil(lifetime_seconds / _DAY)
    return next((days for days in EXPIRY_CLASSES_DAYS if days >= needed), EXPIRY_CLASSES_DAYS[-1])


def expiry_tagging(days: int) -> str:
    """The class ``days`` as PutObject's ``Tagging`` parameter (URL-encoded query syntax)."""
    return f"{EXPIRY_TAG}={days}"


def expiry_tag_set(days: int) -> dict[str, Any]:
    """The class ``days`` as PutObjectTagging's ``Tagging`` parameter."""
    return {"TagSet": [{"Key": EXPIRY_TAG, "Value": str(days)}]}


class Retention:
    """The TTL rule above, with the retention of the runs this process has seen (a writer that did not read a
    run's head, such as a stream append, uses the stack's default for it)."""

    def __init__(self, default_seconds: int, max_run_seconds: int) -> None:
        self.default_seconds = default_seconds
        self.max_run_seconds = max_run_seconds
        self._known: OrderedDict[str, int] = OrderedDict()

    def remember(self, run_id: str, head: dict[str, Any] | None) -> None:
        value = (head or {}).get(RETENTION_ATTRIBUTE)
        if value is None:
            return
        self._known[run_id] = int(value)
        self._known.move_to_end(run_id)
        while len(self._known) > _KNOWN:
            self._known.popitem(last=False)

    def of(self, run_id: str) -> int:
        return self._known.get(run_id, self.default_seconds)

    def item_ttl(self, run_id: str, now: str, retention: int | None = None) -> int:
        """The TTL of an item of ``run_id`` written at ``now`` (ISO)."""
        return running_ttl(now, retention if retention is not None else self.of(run_id), self.max_run_seconds)

    def object_expiry(self, run_id: str, retention: int | None = None) -> int:
        """The expiry class (days) of an S3 object of ``run_id`` written now: it lives as long as an item."""
        return expiry_class(running_retention(retention if retention is not None else self.of(run_id))
                            + self.max_run_seconds)


def end_ttl(retention: int, now: str, reserved_until: list[str]) -> int:
    """The head's TTL at the run's end: ``end + R``, or when the last reserved token of the run frees."""
    return max([epoch(now) + retention, *(epoch(until) + 1 for until in reserved_until)])
