"""The worker's half of a workflow's ``resume_hook`` (``authoring/resume.py``): the body of the built-in
``awsworld.resume_hook`` step.

It is ``Client.resume_hook``'s own code (``run_control.resume_hook``) with the World the step runs against (the
test environment's in-memory one, ``awsworld dev``'s emulator, the AWS World of the flow function: no client, no
credentials or IAM beyond what the flow already uses to report a child's end to its parent) and an idempotency key
derived from the call (``durable.hook_calls.resume_key``). So the payload is recorded once per call however often
the body runs: a retry after a crash between the target's ``hook_received`` and this step's end finds its key
(``HookAlreadyReceivedError``, or a disposed hook's repeat) and records nothing; a replay reads the step's end from
the log and runs no body at all.

The key is the hook's, though: the World refuses a repeat per hook. If the hook an earlier attempt resumed was
disposed and a new hook (another run's, or this one's later) claimed the token before the retry, the retry would
find the new hook and record the payload there too. So a retry resumes only a hook that provably held the token
when the earlier attempts ran (created before the first of them started), or one that already holds this call's
payload (the write is then refused as a repeat); any other is refused (``_replaced``). The first attempt, and a
poll's look after looks that all found no hook, cannot have a delivering attempt before them: they read and write
exactly what ``Client.resume_hook`` does (the step runner tells the latter: ``StepContext.after_rejections_only``).
A look that found no hook after an attempt that raised or was cut off proves nothing about that attempt (the hook
it resumed may be gone since with its run's data): such a look's successor is vetted as any retry.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, cast

from ..authoring.definitions import StepDef
from ..authoring.errors import FatalError, RetryableError
from ..authoring.poll_spec import POLL_NOT_READY
from ..authoring.retry import RetryPolicy
from ..authoring.step_context import StepMetadata, current_step
from ..durable import serde
from ..durable.hook_calls import REFUSED, RESUME_HOOK, resume_key
from ..world.entities import Hook
from ..world.errors import HookClosedError, HookNotFoundError, InvalidInputError
from ..world.events import Event
from ..world.pages import collect_pages
from ..world.protocol import World
from .run_control import resume_hook

CLOCK_MARGIN = timedelta(seconds=1)
"""How much earlier than an attempt's start a hook must have been created to count as holding the token then:
the two times are written by different processes (the sender's and the target's), whose clocks may differ by
this much. A hook created inside the margin is checked for this call's payload instead (``_replaced``)."""


class _Replaced(HookNotFoundError):
    """The hook holding the token may not be the one an earlier attempt of this call resumed (``_vet``)."""


async def _resume_hook_call(token: str, payload: Any, waits: bool) -> bool | dict[str, Any]:
    """Resume the hook holding ``token`` with ``payload`` and wake its run: True once recorded (by this attempt or
    an earlier one). A refusal that would be the same on every try (no such hook, its run ended) is the call's
    answer, recorded as this step's result (``durable.hook_calls.REFUSED``), not a failure to retry. ``waits``
    (the call gave ``wait=``): a hook no run has created yet answers False, so the call's poll
    (``authoring/resume.py``) looks again later."""
    context = current_step.get()
    assert context is not None, "awsworld.resume_hook runs as a step"
    key = resume_key(context.metadata.run_id, context.metadata.step_id)
    try:
        encoded = serde.dumps(payload)
    except serde.SerializationError as error:  # (the call's input was serialized already: only a codec can do this)
        raise TypeError(f"the hook payload cannot be serialized: {error}") from None
    call = f"resume_hook({token!r})"  # (the token is in this run's log already: the step's first argument)
    metadata, world = context.metadata, context.world

    async def vet(hook: Hook, resume_id: str) -> None:
        await _vet(world, metadata, hook, resume_id)

    wrote: list[bool] = []
    try:
        fresh = metadata.attempt <= 1 or context.after_rejections_only  # (no earlier attempt can have delivered)
        await resume_hook(world, token, encoded, idempotency_key=key, vet=None if fresh else vet,
                          writing=lambda: wrote.append(True))
    except _Replaced as replaced:
        return {REFUSED: "not-found", "disposedHook": None, "message": f"{call}: {replaced}"}
    except HookClosedError as closed:  # the run that held the hook ended: its message names the run and how
        return {REFUSED: "closed", "message": f"{call}: {closed}; nothing was recorded", "runId": closed.run_id,
                "runStatus": closed.run_status}
    except HookNotFoundError as missing:
        if missing.disposed_hook is not None:
            return {REFUSED: "not-found", "disposedHook": list(missing.disposed_hook), "message":
                    f"{call}: {missing}: the run that held it left its `async with create_hook(...)` (or its timeout "
                    "passed) before this resume; nothing was recorded"}
        if waits:
            return False
        return {REFUSED: "not-found", "disposedHook": None, "message": (  # (find_hook's advice is a client's)
            f"{call}: no hook holds that token yet: no run has reached create_hook with it. Pass wait= to wait for "
            "it (await resume_hook(token, payload, wait=\"5m\")), or resume only once the other run holds the "
            "hook; nothing was recorded")}
    except (InvalidInputError, FatalError):  # (not retried: the step fails at once, as the error's own type)
        raise
    except Exception as error:  # retried; one that wrote nothing says so in this step's log (``_delivering_since``)
        if wrote:
            raise
        raise NotSentError(f"{type(error).__name__}: {error}: nothing was sent (the look-up of the hook or a "
                           "check before the write failed); the call is retried", error) from error
    return True


class NotSentError(RetryableError):
    """An attempt of the resume step failed before its write (``run_control.resume_hook``'s ``writing``): its
    ``step_retrying`` tells a later attempt that this one resumed no hook, as a poll's rejected look does, so a
    hook created just before the call is not refused for it (``_vet``). It wraps the error (``cause``), keeping a
    ``RetryableError``'s ``retry_after`` for the step's back-off."""

    def __init__(self, message: str, cause: Exception) -> None:
        super().__init__(message)
        self.cause = cause
        self.retry_after = cause.retry_after if isinstance(cause, RetryableError) else None


async def _vet(world: World, metadata: StepMetadata, hook: Hook, resume_id: str) -> None:
    """A retry's check of the hook holding the token (attempt 2 or later: an earlier attempt of this call may have
    resumed a hook, then died before its answer was recorded). Passes a hook that held the token since before the
    earliest attempt that may have delivered: the earlier attempts found it too (a token has one holder at a time
    and this one is still there), so the World's repeat check per hook covers them. Passes a hook that holds this
    call's resume already (a repeat: nothing is recorded, its run is woken). Raises ``_Replaced`` for any other:
    it claimed the token after such an attempt started, which may have resumed the hook that held it then.

    Costs nothing when the hook was created before the step's first start (a retry of a call whose hook was
    there: the usual one); otherwise one read of this step's events (this run's log) and, if an earlier attempt
    may have delivered, one read of the hook's events (the target run's log). Never a write."""
    first_start = metadata.started_at
    if first_start is not None and hook.created_at < first_start - CLOCK_MARGIN:
        return
    since = await _delivering_since(world, metadata)
    if since is None or hook.created_at < since - CLOCK_MARGIN:
        return
    events = await collect_pages(lambda cursor: world.events.list_by_correlation_id(
        hook.run_id, hook.hook_id, cursor=cursor, resolve_data="none"))
    if any(e.event_type == "hook_received" and (e.event_data or {}).get("resumeId") == resume_id for e in events):
        return
    raise _Replaced(
        f"not resumed: the hook holding that token now (hook {hook.hook_id} of run {hook.run_id}) was created "
        f"after an earlier attempt of this call started, and that attempt may have resumed the hook that held the "
        f"token then before it was cut off (its hook since disposed, the token claimed again), so this payload "
        f"is not given to another hook. Whether the earlier hook got it, its run's log says; nothing was recorded "
        f"on hook {hook.hook_id}")


async def _delivering_since(world: World, metadata: StepMetadata) -> datetime | None:
    """When the earliest attempt of this step that may have resumed a hook started, or None when no earlier
    attempt may have. Every earlier attempt may have, except one whose own end is a ``step_retrying`` named
    ``POLL_NOT_READY`` (a poll's look that found no hook) or ``NotSentError`` (it failed before its write): it
    resumed nothing. An attempt that raised once it was writing (its wake failed, say) or was cut off (no end
    recorded: the next ``step_started`` follows its own) may have, whatever later looks found: a later look that
    finds no hook only speaks for itself (the hook an earlier attempt resumed may be gone since, its run expired
    with the token's record)."""
    events: list[Event] = await collect_pages(lambda cursor: world.events.list_by_correlation_id(
        metadata.run_id, metadata.step_id, cursor=cursor, resolve_data="skip-step-inputs"))
    may_have: list[datetime] = []
    open_start: Event | None = None  # the earlier attempt whose end is not read yet
    for event in events:
        if event.event_type == "step_started":
            if open_start is not None:  # the attempt before it recorded no end: cut off
                may_have.append(open_start.created_at)
            attempt = (event.event_data or {}).get("attempt")
            open_start = event if not isinstance(attempt, int) or attempt < metadata.attempt else None
        elif event.event_type == "step_retrying" and open_start is not None:
            if _error_name(event) not in _SENT_NOTHING:
                may_have.append(open_start.created_at)
            open_start = None
    if open_start is not None:
        may_have.append(open_start.created_at)
    return min(may_have, default=None)


_SENT_NOTHING = (POLL_NOT_READY, NotSentError.__name__)
"""The names of a failed attempt's error (its ``step_retrying``) that say it resumed no hook."""


def _error_name(event: Event) -> object:
    error = (event.event_data or {}).get("error")
    return cast("dict[str, Any]", error).get("name") if isinstance(error, dict) else None


RESUME_HOOK_STEP = StepDef(RESUME_HOOK, _resume_hook_call, retry=RetryPolicy(
    max_attempts=11, initial_delay=1.0, backoff=2.0, max_delay=60.0,
    # A payload the hook refuses (a codec's, too large) meets the same answer again: the workflow gets it at once,
    # as the error's own type (``rebuilt_errors``). (A run that ended between the look-up and the write is retried:
    # the next look-up answers that its hook is closed.)
    no_retry_on=(InvalidInputError,)))


__all__ = ["RESUME_HOOK_STEP"]
