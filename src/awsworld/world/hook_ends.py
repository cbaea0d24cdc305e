"""What a run's end does to its hooks, for every World: they close.

The contract: when a run ends, its live hooks are removed and their tokens freed, unless a token is under
retention (``tokenRetentionUntil`` in the future), which stays reserved until then. awsworld adds what a person
needs to see that it happened:

- ``hook_fate`` decides, per hook, ``"released"`` (the hook goes; its token is free for any new hook at once) or
  ``"retained"`` (the hook stays readable, ``status="closed"``; its token stays reserved).
- Either way the World remembers, with the token, that its run ended and how (``closed_hook_error``): a resume of
  that token raises ``HookClosedError`` naming the run and its status, instead of "no hook owns that token". The
  memory of it goes when the token is claimed again by a new hook, or with the run's own data (its retention).
- ``hook_state`` is how a listing built from the event log (``awsworld hooks``, the run viewer) shows a hook:
  ``open``, ``disposed`` (the workflow disposed it) or ``closed`` (its run ended with it open).

Both Worlds call these; neither restates the rule.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from .entities import TERMINAL_RUN_STATUSES
from .errors import HookClosedError

HookFate = Literal["released", "retained"]
HookState = Literal["open", "disposed", "closed"]
HOOK_OPEN = "open"
HOOK_CLOSED = "closed"


def hook_fate(retention_until: datetime | None, now: datetime) -> HookFate:
    """At its run's end (``now``): a hook whose token is under retention is retained, every other one released."""
    return "retained" if retention_until is not None and retention_until > now else "released"


def closed_hook_error(run_id: str, run_status: str | None) -> HookClosedError:
    """What resuming (or failing) a hook of an ended run raises: the run, and how it ended."""
    status = run_status or "ended"
    return HookClosedError(f"the hook holding that token was closed when its run {run_id} ended ({status}): it "
                           "takes no more payloads", run_id=run_id, run_status=status)


def hook_status(run_status: str | None) -> str:
    """A hook entity's ``status``: ``closed`` once its run has ended (a retained hook), else ``open``."""
    return HOOK_CLOSED if run_status in TERMINAL_RUN_STATUSES else HOOK_OPEN


def hook_state(disposed: bool, run_status: str | None) -> HookState:
    """How a listing shows a hook the log holds: disposed by its workflow, closed by its run's end, or open."""
    if disposed:
        return "disposed"
    return "closed" if run_status in TERMINAL_RUN_STATUSES else "open"
