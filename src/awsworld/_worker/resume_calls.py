"""The worker's half of a workflow's ``resume_hook`` (``authoring/resume.py``): the body of the built-in
``awsworld.resume_hook`` step.

It is ``Client.resume_hook``'s own code (``run_control.resume_hook``) with the World the step runs against (the
test environment's in-memory one, ``awsworld dev``'s emulator, the AWS World of the flow function: no client, no
credentials or IAM beyond what the flow already uses to report a child's end to its parent) and an idempotency key
derived from the call (``durable.hook_calls.resume_key``). So the payload is recorded once per call however often
the body runs: a retry after a crash between the target's ``hook_received`` and this step's end finds its key
(``HookAlreadyReceivedError``, or a disposed hook's repeat) and records nothing; a replay reads the step's end from
the log and runs no body at all.

The key alone is per hook, though: if the hook an earlier attempt resumed was disposed and a new hook (another
run's, or this one's later) claimed the token before a retry, or while an attempt cut off from its step still ran
beside the take-over, the new hook would take the payload too. So every attempt sends it as ``resumeOnce``: the
World records the key on one hook only, World-wide, and refuses it on any other (``world/rules/hooks.py``,
``HookResumedElsewhereError``), in the same write, whatever became of the first hook, its token or its run since.
That refusal means the payload was recorded (on the hook it names, whose run is woken again): the call answers as
the attempt that recorded it would have. The same holds when no hook holds the token any more (the run whose hook
took the payload has expired, its token's record with it): a retry (an attempt after the first, the only kind an
earlier attempt can have delivered before) asks the World's record of the key (``hooks.resumed_by``), which
outlives that run, and answers "delivered" rather than "no hook holds that token yet". No clock is compared; the
write holds one more small item on AWS, and a retry's look that finds no hook one more read (``bench/bill.py
--only resumehook``).
"""

from __future__ import annotations

from typing import Any

from ..authoring.definitions import StepDef
from ..authoring.retry import RetryPolicy
from ..authoring.step_context import current_step
from ..durable import serde
from ..durable.hook_calls import REFUSED, RESUME_HOOK, resume_key
from ..world.errors import HookClosedError, HookNotFoundError, HookResumedElsewhereError, InvalidInputError
from .run_control import hook_payload, resume_hook


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
        encoded = hook_payload(context.world, token, payload)
    except serde.SerializationError as error:  # (the call's input was serialized already: only a codec can do this)
        raise TypeError(f"the hook payload cannot be serialized: {error}") from None
    call = f"resume_hook({token!r})"  # (the token is in this run's log already: the step's first argument)
    try:
        await resume_hook(context.world, token, encoded, idempotency_key=key, once=True,
                          retried=context.metadata.attempt > 1)
    except HookResumedElsewhereError:  # an earlier attempt of this call recorded it, on the hook that held the token
        return True
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
        why = missing.details.get("reason") or "no run has reached create_hook with it yet"  # (the World's reason:
        # find_hook's advice is a client's)
        return {REFUSED: "not-found", "disposedHook": None, "message": (
            f"{call}: no hook holds that token: {why}; if its run has not reached it yet, pass wait= to wait for it "
            "(await resume_hook(token, payload, wait=\"5m\")), or resume only once the other run holds the hook; "
            "nothing was recorded")}
    return True


RESUME_HOOK_STEP = StepDef(RESUME_HOOK, _resume_hook_call, retry=RetryPolicy(
    max_attempts=11, initial_delay=1.0, backoff=2.0, max_delay=60.0,
    # A payload the hook refuses (a codec's, too large) meets the same answer again: the workflow gets it at once,
    # as the error's own type (``rebuilt_errors``). (A run that ended between the look-up and the write is retried:
    # the next look-up answers that its hook is closed.)
    no_retry_on=(InvalidInputError,)))


__all__ = ["RESUME_HOOK_STEP"]
