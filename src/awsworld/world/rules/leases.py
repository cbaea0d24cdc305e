"""A started step's lease: who may start it again, and from when anyone may.

``step_started`` records two things about the attempt it begins: the delivery that runs it (its message id,
``ownerMessageId``) and how long that delivery can possibly take to report (``leaseSeconds``; the World stores
the deadline as ``leaseUntil``). While the lease runs, only a redelivery of the owner's message may start the
step again (after a crash, SQS hands the same message back): any other delivery is a duplicate and is refused
with ``StepRunningElsewhereError``. Once the lease has passed, the owner cannot still be running (the lease is
what its invocation has left, plus a grace), so the first delivery that asks takes the step over as a new
attempt. The lost attempt counts, exactly as one lost to a crash does: the body may have run (at least once),
the attempt number goes up, and the retry policy sees that number.

Both Worlds decide with ``start_verdict`` (one copy of the rule); the runtime computes the lease it asks for
with ``lease_seconds`` and decides whether a started step is a take-over candidate with ``lease_expired``.

The numbers (``lease_seconds``): a step with a ``timeout`` is cancelled after it (plus the runtime's one-second
cancel grace), so its lease is that or what is left of the delivery's budget, whichever is shorter; a step
without one runs until it returns or its invocation is killed, so its lease is what is left of the budget. Both
get ``AWSWORLD_LEASE_GRACE_SECONDS`` (30 s) more: the 10 s margin a Lambda delivery keeps after its budget,
the outcome's write, and clock skew. A step_started that asks for no lease (an older runtime) gets
``DEFAULT_LEASE_SECONDS``: the default budget (110 s) plus the grace.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any, Literal

from ...settings import SETTINGS, Settings
from ..errors import InvalidInputError, StepRunningElsewhereError
from .state import frozen

DELIVERY_MARGIN_SECONDS = 10.0
"""What a delivery keeps of its invocation after its budget (``_worker.dispatch.budget_deadline``): room to write a
continuation before the flow function's timeout stops it."""
LEASE_GRACE_ENV = Settings.lease_grace_seconds.env
DEFAULT_LEASE_GRACE_SECONDS = Settings.lease_grace_seconds.default
DEFAULT_LEASE_SECONDS = 110.0 + DEFAULT_LEASE_GRACE_SECONDS
MAX_LEASE_SECONDS = 24 * 3600.0
LEASE_SECONDS_FIELD = "leaseSeconds"
"""step_started's request field: the lease the starting delivery asks for."""
LEASE_UNTIL_FIELD = "leaseUntil"
"""step_started's stored field (and the step item's attribute): when the lease ends."""

OWNER_FIELD = "ownerMessageId"
"""step_started's request field: the message id of the delivery starting the step."""

StartVerdict = Literal["start", "take-over"]


@frozen
class StartAsk:
    """What a step_started asks for: its delivery (None when it names none, or not as a string) and its lease."""

    owner: str | None
    lease_seconds: float


def start_ask(data: dict[str, Any] | None) -> StartAsk:
    """A step_started's ``ownerMessageId`` and ``leaseSeconds`` (its unknown fields), checked."""
    owner = (data or {}).get(OWNER_FIELD)
    return StartAsk(owner if isinstance(owner, str) else None, requested_lease(data))


def lease_grace_seconds() -> float:
    return SETTINGS.lease_grace_seconds


def lease_seconds(*, step_timeout: float | None, budget_left: float, cancel_grace: float) -> float:
    """The lease a delivery asks for when it starts a step: how long it may still report about it."""
    left = max(0.0, budget_left)
    if step_timeout is not None:
        left = min(left, step_timeout + cancel_grace)
    return math.ceil((left + lease_grace_seconds()) * 1000) / 1000


def requested_lease(data: dict[str, Any] | None) -> float:
    """The lease a step_started request asks for (its ``leaseSeconds``), the default when it names none, or a
    400 for one that is not a number from 0 to a day."""
    value = (data or {}).get(LEASE_SECONDS_FIELD)
    if value is None:
        return DEFAULT_LEASE_SECONDS
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or not 0 <= value <= MAX_LEASE_SECONDS:
        raise InvalidInputError(f"leaseSeconds must be a number of seconds from 0 to {MAX_LEASE_SECONDS:g}",
                                field=f"eventData.{LEASE_SECONDS_FIELD}")
    return float(value)


def lease_end(now: datetime, seconds: float) -> datetime:
    return now + timedelta(seconds=seconds)


def lease_expired(lease_until: datetime | None, now: datetime) -> bool:
    """Whether a lease has passed (a step started without one has none to pass: see ``start_verdict``)."""
    return lease_until is not None and now >= lease_until


def start_verdict(*, status: str, holder: str | None, owner: str | None, lease_until: datetime | None,
                  started: datetime | None, now: datetime, step_id: str | None) -> StartVerdict:
    """May the delivery ``owner`` start this step now? ``start`` (a new attempt as ever: the step is not
    running, or runs under this same message, or someone without a message id asks), ``take-over`` (it runs
    under another message whose lease has passed), or ``StepRunningElsewhereError``. ``started``: when the
    current attempt began, for a step recorded before leases (its lease is the default from then)."""
    if status != "running" or not owner or not holder or holder == owner:
        return "start"
    if lease_until is None and started is not None:
        lease_until = lease_end(started, DEFAULT_LEASE_SECONDS)
    if lease_expired(lease_until, now):
        return "take-over"
    raise StepRunningElsewhereError(f"step {step_id} is running under another delivery (its lease ends "
                                    f"{lease_until.isoformat() if lease_until else 'never'})")
