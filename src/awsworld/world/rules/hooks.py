"""Hooks and their tokens, for every World: creating, receiving, disposing, what a run's end does, and lookups.

A token is unique: ``hook_created`` claims it when it is free (``TOKEN_FREE``) and otherwise records a
``hook_conflict`` naming the run that holds it. What frees a token:

- ``hook_disposed`` frees it at once, even under retention. The token's record stays, released and still
  naming the hook, so that a repeated resume (the same idempotency key) of the hook it disposed can be answered
  as the first was (``lookup_refusal`` names that hook); a new hook may claim the token at any time.
- a run's end closes its live hooks (``hook_fate``): each is ``released`` (the hook goes; its token is free at
  once) or, while its ``tokenRetentionUntil`` is in the future, ``retained`` (the hook stays readable, closed;
  its token stays reserved until then). Either way the token's record keeps how its run ended: a resume of it
  raises ``HookClosedError`` naming the run and its status, instead of "no hook owns that token" (and naming
  the hook, so that a repeated resume of it is answered as the first was, as for a disposed one).

The record goes when a new hook claims the token, or with the run's own data (its retention). ``hook_state``
is how a listing built from the event log (``awsworld hooks``, the run viewer) shows a hook.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from ..entities import TERMINAL_RUN_STATUSES, HookStatus
from ..errors import HookClosedError, HookNotFoundError, HookResumedElsewhereError, InvalidInputError, WorldError
from ..events import MAX_RESUME_ID_LENGTH, CreateEventRequest, HookCreatedData, HookReceivedData
from ..ids import check_path_id
from .conditions import AllOf, AnyOf, Condition, Earlier, Equals, Missing, Not, Unset, holds
from .decision import Check, Decision, HookEnd, NewEvent, hook_missing
from .requests import check_hook_token, data_as, event_data
from .state import FIRST_EVENT, HookState, TokenState, View

HookFate = Literal["released", "retained"]
HookListing = Literal["open", "disposed", "closed"]
HOOK_OPEN: HookStatus = "open"
HOOK_CLOSED: HookStatus = "closed"

TOKEN_FREE: Condition = AnyOf((
    Missing(),
    AllOf((Equals("released", True), AnyOf((Unset("retention_until"), Earlier("retention_until"))))),
))
"""A token may be claimed: nobody ever held it, or it was released and no retention still reserves it."""


def token_free(token: TokenState | None, now: datetime) -> bool:
    return holds(TOKEN_FREE, token, now)


def token_held_by(run_id: str) -> Condition:
    """The token is held (not free) by a hook of ``run_id``: what a hook_conflict naming that run re-checks."""
    return AllOf((Equals("run_id", run_id), Not(TOKEN_FREE)))


def token_owned_by(hook_id: str) -> Condition:
    """The token's record names ``hook_id``: only then may that hook's end write it."""
    return Equals("hook_id", hook_id)


def hook_fate(retention_until: datetime | None, now: datetime) -> HookFate:
    """At its run's end (``now``): a hook whose token is under retention is retained, every other one released."""
    return "retained" if retention_until is not None and retention_until > now else "released"


def closed_hook_error(run_id: str, run_status: str | None, hook_id: str | None = None) -> HookClosedError:
    """What resuming (or failing) a hook of an ended run raises: the run, and how it ended; with ``hook_id``
    (the hook its end released), which hook it was, so that a repeat of a resume it took is answered as the
    first was, as for a disposed hook."""
    status = run_status or "ended"
    return HookClosedError(f"the hook holding that token was closed when its run {run_id} ended ({status}): it "
                           "takes no more payloads", run_id=run_id, run_status=status,
                           disposed_hook=None if hook_id is None else (run_id, hook_id))


def lookup_refusal(token: TokenState | None, *, expires_runs: bool) -> WorldError:
    """What ``hooks.get_by_token`` raises when no hook answers for the token (``token``: its record, if any): the
    run's end that closed it, or "not found", naming the hook a disposed token last belonged to; for a token with
    no record, why (``unknown_token_reason``, also in the error's ``details["reason"]`` for callers that add their
    own advice to it)."""
    if token is not None and token.released and token.end_status is not None:
        return closed_hook_error(token.run_id, token.end_status, token.hook_id)
    if token is not None and token.disposed:
        return HookNotFoundError(disposed_message(token.run_id),
                                 disposed_hook=(token.run_id, token.hook_id))
    reason = unknown_token_reason(expires_runs)
    return HookNotFoundError(f"no hook owns that token: {reason}", reason=reason)


def unknown_token_reason(expires_runs: bool) -> str:
    """Why no hook answers for a token the World has no record of: no run has created a hook with it yet, or, on a
    World that deletes an ended run and its tokens' records once its retention passes (``expires_runs``: DynamoDB's
    TTL), the run that held it ended and was deleted; the World cannot tell those apart. Where it deletes nothing
    (in memory), the first is the only one, and the reason says just that."""
    if not expires_runs:
        return "no run has reached create_hook with it yet"
    return ("either no run has reached create_hook with it yet, or the run that held it ended and was deleted once "
            "its retention passed")


def disposed_message(run_id: str) -> str:
    """Why a disposed hook's token takes nothing, for the sender who answers late (an approval after its
    timeout): not a typo, the hook is gone, and its run says what became of it."""
    return (f"no hook owns that token: the hook of run {run_id} that held it was disposed by its "
            "workflow, which left the hook's `async with` (after its payload, or once its timeout or heartbeat "
            "timeout passed): it takes no more payloads")


HOOK_OWNER = "awsworld"


def hook_owner(project: str, deployment_id: str) -> dict[str, str]:
    """A hook's ``ownerId``, ``projectId`` and ``environment`` as the Workflow SDK's hooks carry them (strings its
    schema requires): awsworld owns the token space, the project is the World's stack (its table), and the
    environment is the deployment the World delivers to."""
    return {"ownerId": HOOK_OWNER, "projectId": project, "environment": deployment_id}


def hook_status(run_status: str | None) -> HookStatus:
    """A hook entity's ``status``: ``closed`` once its run has ended (a retained hook), else ``open``."""
    return HOOK_CLOSED if run_status in TERMINAL_RUN_STATUSES else HOOK_OPEN


def hook_state(disposed: bool, run_status: str | None) -> HookListing:
    """How a listing shows a hook the log holds: disposed by its workflow, closed by its run's end, or open."""
    if disposed:
        return "disposed"
    return "closed" if run_status in TERMINAL_RUN_STATUSES else "open"


def hook_ends(view: View, status: str) -> tuple[HookEnd, ...]:
    """What a run's end (to ``status``) does to each of its live hooks."""
    return tuple(HookEnd(hook, hook_fate(hook.retention_until, view.now),
                         TokenState(hook.token, view.run_id, hook.hook_id, hook.retention_until, released=True,
                                    end_status=status))
                 for hook in view.hooks)


def hook_created(req: CreateEventRequest, view: View) -> Decision:
    """A new hook claims its token; a token held by another hook gets a hook_conflict naming its run instead.
    The token must fit a key and its retention be at most 30 days ahead (400s, before anything else)."""
    data = data_as(req, HookCreatedData)
    hook_id = check_path_id(req.correlation_id or "", "correlationId")
    retention = data.token_retention_until.astimezone(UTC) if data.token_retention_until else None
    check_hook_token(data.token, retention, view.now)
    held = view.token
    if held is not None and not token_free(held, view.now) and (held.run_id, held.hook_id) != (view.run_id, hook_id):
        conflict = NewEvent("hook_conflict", hook_id, {"token": data.token, "conflictingRunId": held.run_id},
                            spec_version=req.spec_version)
        return Decision(req.event_type, hook_id, [conflict], (Check.RUN_ALIVE, Check.TOKEN_HELD),
                        token_holder=held.run_id)
    hook = HookState(hook_id, data.token, view.now, view.now, req.spec_version, bool(data.is_webhook),
                     FIRST_EVENT if view.carries_value else None, retention, bool(data.payload_codec))
    event = NewEvent(req.event_type, hook_id, event_data(req), view.carries_value, req.spec_version)
    return Decision(req.event_type, hook_id, [event],
                    (Check.RUN_ALIVE, Check.ABSENT, Check.TOKEN_FREE, Check.HOOK_ID_FREE), shows="hook", hook=hook,
                    token=TokenState(data.token, view.run_id, hook_id, retention))


def hook_received(req: CreateEventRequest, view: View) -> Decision:
    """A payload for a live hook; with a ``resumeId``, once per hook (a repeat is refused, before the run's
    status is, with the first one's event). With ``resumeOnce`` too, the resume id is one hook's only, World-wide:
    a hook other than the one that recorded it refuses it (``HookResumedElsewhereError``, naming that hook), whatever
    became of that hook, its token or its run since. That is what makes a workflow's retried ``resume_hook`` exact
    (``_worker/resume_calls.py``): an attempt cut off after its write, or one still running beside a take-over,
    cannot give the payload to a hook that claimed the token after the first got it."""
    data = data_as(req, HookReceivedData)
    hook_id = req.correlation_id or ""
    once = data.resume_id is not None and bool(data.resume_once)
    if data.resume_id is None:
        checks = (Check.RUN_ALIVE, Check.EXISTS)
    elif once:
        checks = (Check.RESUME_NEW, Check.RESUME_ONCE, Check.RUN_ALIVE, Check.EXISTS)
    else:
        checks = (Check.RESUME_NEW, Check.RUN_ALIVE, Check.EXISTS)
    event = NewEvent(req.event_type, hook_id, event_data(req), view.carries_value, req.spec_version)
    return Decision(req.event_type, hook_id, [event], checks, resume_id=data.resume_id, resume_once=once)


def check_resume_id(resume_id: object) -> str:
    """A resume id as ``hook_received`` takes it (``HookReceivedData.resume_id``): a non-empty str of at most
    ``MAX_RESUME_ID_LENGTH`` characters; anything else is refused before anything is read."""
    if not isinstance(resume_id, str) or not 1 <= len(resume_id) <= MAX_RESUME_ID_LENGTH:
        raise InvalidInputError(f"a resume id is a non-empty string of at most {MAX_RESUME_ID_LENGTH} characters",
                                field="resumeId")
    return resume_id


def recorded_elsewhere(holder: tuple[str, str]) -> HookResumedElsewhereError:
    """What a ``resumeOnce`` resume of a token no hook holds any more answers when the World's record of its
    resume id (``hooks.resumed_by``) names the hook that took it: the refusal a write on any other hook gets
    (``HookResumedElsewhereError``), so a retry whose first attempt delivered answers as that attempt did, also
    once that hook's run and token are gone."""
    run_id, hook_id = holder
    return HookResumedElsewhereError(
        f"no hook holds that token any more, and hook {hook_id} of run {run_id} recorded this resume id already "
        "(resumeOnce): the payload was delivered there; nothing was written", hook_id=hook_id, run_id=run_id)


def hook_disposed(req: CreateEventRequest, view: View) -> Decision:
    """The workflow is done with the hook: it goes, and its token is freed at once (even under retention),
    its record still naming the hook (a repeated resume of it is answered as the first was)."""
    hook_id = req.correlation_id or ""
    hook = view.hook
    if hook is None:
        raise hook_missing(hook_id, view.run_id)
    owned = not view.token_read or (view.token is not None and view.token.hook_id == hook_id)
    event = NewEvent(req.event_type, hook_id, event_data(req, token=hook.token), spec_version=req.spec_version)
    if not owned:  # another hook holds the token now: leave it
        return Decision(req.event_type, hook_id, [event], (Check.AS_READ,), hook_gone=True)
    return Decision(req.event_type, hook_id, [event], (Check.AS_READ, Check.TOKEN_OWNED), hook_gone=True,
                    token=TokenState(hook.token, view.run_id, hook_id, None, released=True))
