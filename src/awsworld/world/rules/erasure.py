"""Deleting one run's data on request (a right-to-erasure request: GDPR art. 17, CCPA), for every World.

``World.delete_run`` (``world/protocol.py``) deletes what a run stored; this module decides when it may and which
of the World's global records go with it, so the in-memory World (``_memory/storage.py``) and the AWS World
(``aws/log/erasure.py``) delete the same things (``HttpWorld`` asks its server's World: ``DELETE /v1/runs/{id}``,
``_http/app.py``):

- **Only an ended run** (completed, failed, cancelled) is deleted (``check_erasable``): an unfinished one still
  has deliveries, a watchdog due, leases and limiter holds that would write to it again, or find half of it. It
  is refused with ``EntityConflictError`` (409: its state forbids this), and nothing is deleted; the message says
  to cancel or fail it first.
- **A run that does not exist** (never did, or was deleted already) is not an error: ``delete_run`` answers False
  and deletes nothing. A deletion is a retry loop's work (a batch of erasure requests, a crash halfway through):
  a retry after a success, or after a crash that left nothing to find, must not fail. Each World deletes the run's
  head (what ``runs.get`` reads) last, so a deletion cut short is found again and finished by its retry.
- **Everything of the run itself**: its head, events, attributes, steps, hooks, waits, streams and their chunks,
  its encrypted data key, every stored value (on AWS every item of ``RUN#<id>`` and every S3 object under
  ``runs/<id>/``).
- **Its global records that name it** (``erased_globals``), each deleted only where it still names this run:
  its hook tokens (released ones too: their item names the run and its hook), its hook ids' pointers and the
  ``resumeOnce`` markers its hooks recorded (the digest of a sender's key and the hook that took it: once the
  run is gone, a retried sender's resume finds the token free, as after the run's retention).
- **Not deleted**: queue idempotency markers (``DEDUP#<queue>#<key>``, ``aws/queue/dedup.py``): they hold a
  message id and a key the runtime derives from run and step ids, no payload, are freed when their message is
  acknowledged (an ended run's are) and expire within the queue's retention; finding them would mean scanning the
  table. A start's idempotency is the run id itself: once the run is deleted, a start with that id makes a new
  run. Child runs are runs of their own (their input was their parent's step value, but they are not deleted with
  it): delete each (``Run.children()`` lists them before the parent goes).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..entities import TERMINAL_RUN_STATUSES
from ..errors import EntityConflictError
from ..events import Event


def check_erasable(run_id: str, status: str) -> None:
    """Refuse to delete a run that has not ended (``EntityConflictError``); nothing was deleted."""
    if status not in TERMINAL_RUN_STATUSES:
        raise EntityConflictError(
            f"run {run_id} is {status}: only an ended run (completed, failed or cancelled) can be deleted; cancel "
            "it (awsworld cancel, Client.cancel) or fail it (awsworld fail, Client.fail) first, then delete it",
            run_id=run_id, status=status)


@dataclass(slots=True)
class ErasedGlobals:
    """The World-wide records a run's log says it made: each is deleted only where it still names the run."""

    tokens: set[str] = field(default_factory=set[str])
    hook_ids: set[str] = field(default_factory=set[str])
    resume_once_ids: set[str] = field(default_factory=set[str])


def erased_globals(events: Iterable[Event]) -> ErasedGlobals:
    """The tokens and hook ids of the run's ``hook_created`` events and the resume ids of its ``resumeOnce``
    ``hook_received`` events (read without values: none of these is a value field)."""
    found = ErasedGlobals()
    for event in events:
        data = event.event_data or {}
        if event.event_type == "hook_created":
            if isinstance(token := data.get("token"), str):
                found.tokens.add(token)
            if event.correlation_id is not None:
                found.hook_ids.add(event.correlation_id)
        elif (event.event_type == "hook_received" and data.get("resumeOnce")
              and isinstance(resume_id := data.get("resumeId"), str)):
            found.resume_once_ids.add(resume_id)
    return found
