"""How long a run may stay running (its *lifetime*), for every World: one rule, read by the engine and the flow.

On AWS every item of a run expires ``retention + MaxRunDays`` after it was written (``aws/retention.py``), so a
run still running ``MaxRunDays`` after its creation would start losing its oldest items (its ``run_created``, its
first events) a retention later, and fail at its next delivery with nothing left to say why. So:

- A run's lifetime ends ``MaxRunDays`` after its ``run_created`` (``lifetime_end``). The limit is the one its
  creator wrote its first items under (``AWSWORLD_MAX_RUN_DAYS`` there, which is what that writer's TTLs used),
  recorded in its ``executionContext`` (``maxRunSeconds``, by ``creation_context``), so changing the setting later
  neither ends a running run sooner nor lets it run past what its first items were written for; a run created
  before the record existed (or by another runtime) is measured by the reader's setting.
- A wait the workflow makes that would end after it is refused where it is made (``_engine/execution.py``,
  ``WorkflowExecution._within_lifetime``).
- A run still running at it is ended by awsworld (``_worker/inline_loop.py``, ``Flow._run`` and its loop; a run
  parked for code its deployment lacks: ``_worker/delivery.py``): the first delivery at or after its end fails it
  with ``RunLifetimeError`` (``lifetime_failure``) before its code runs again, as a cancel ends a run where it is.
  A resting run's due (``_worker/recovery.py``, ``resting_due``) is never later than its lifetime's end, so even
  a run waiting on hooks alone is woken for it: one watchdog wake per such run, and nothing more per tick (the
  index query is the one the watchdog makes anyway). A run that cannot rest (a pending run waiting for a
  concurrency slot, a step waiting for one) is due by the watchdog's snoozes, which stop at its lifetime's end
  (``world/watch.py``, ``snooze_due``). The wake comes within the tick's period and the due's bucket
  (a minute each in the stack), and the items a run writes while it runs count a retention of a day at least
  (``aws/retention.py``, ``running_retention``), so the run ends before any of its items can expire whatever its
  retention.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from ...authoring.durations import duration_text
from ...authoring.errors import RunLifetimeError
from ...settings import SETTINGS

MAX_RUN_CONTEXT_KEY = "maxRunSeconds"
"""The ``run_created`` executionContext key recording the lifetime (whole seconds) the run was created under."""
_DAY = 24 * 3600


def creation_context() -> dict[str, int]:
    """What a new run's ``run_created`` executionContext records of its lifetime: this process's limit."""
    return {MAX_RUN_CONTEXT_KEY: round(SETTINGS.max_run_days * _DAY)}


def max_run_seconds(context: Mapping[str, Any] | None) -> float:
    """The lifetime a run's executionContext records, else this process's ``AWSWORLD_MAX_RUN_DAYS``."""
    value = (context or {}).get(MAX_RUN_CONTEXT_KEY)
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return SETTINGS.max_run_days * _DAY


def lifetime_end(created_at: datetime, context: Mapping[str, Any] | None) -> datetime:
    """When the run created at ``created_at`` with this executionContext must have ended."""
    return created_at + timedelta(seconds=max_run_seconds(context))


def context_of(created_data: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The executionContext of a ``run_created``'s data (None when it has none)."""
    context = (created_data or {}).get("executionContext")
    return cast(Mapping[str, Any], context) if isinstance(context, Mapping) else None


def limit_text(context: Mapping[str, Any] | None) -> str:
    """The limit for people, naming where it comes from: ``365 d: the stack's MaxRunDays, AWSWORLD_MAX_RUN_DAYS,
    when the run was created`` (a test's small limit: ``43 s``, not a fraction of a day)."""
    return (f"{duration_text(max_run_seconds(context))}: the stack's MaxRunDays, AWSWORLD_MAX_RUN_DAYS, when the run "
            "was created")


def ended_at_lifetime(run_id: str, created_at: datetime, context: Mapping[str, Any] | None) -> str:
    """The message of the ``RunLifetimeError`` a run still running at its lifetime's end fails with."""
    end = lifetime_end(created_at, context)
    return (f"run {run_id} was still running at the end of its lifetime, {end.astimezone(UTC):%Y-%m-%d %H:%M:%S} "
            f"UTC ({limit_text(context)}), after which its oldest records expire: awsworld ended it there, as a "
            "cancel would (its code did not run again, so no finally or except block ran). A workflow that runs "
            "longer must go on in a new run: start it with child_options(successor=True) and return (or raise "
            "MaxRunDays for runs created from then on)")


def lifetime_failure(run_id: str, created_at: datetime, context: Mapping[str, Any] | None) -> dict[str, Any]:
    """The stored error (``run_failed``'s ``error``) of a run ended at its lifetime: a ``RunLifetimeError`` that a
    client's ``Run.result()`` raises as that type (its qualified name: ``authoring/rebuilt_errors.py``)."""
    return {"message": ended_at_lifetime(run_id, created_at, context), "name": RunLifetimeError.__name__,
            "type": f"{RunLifetimeError.__module__}.{RunLifetimeError.__qualname__}"}
