"""The worker's half of a workflow's ``resume_hook`` (``authoring/resume.py``): the body of the built-in
``awsworld.resume_hook`` step.

It is ``Client.resume_hook``'s own code (``run_control.resume_hook``) with the World the step runs against (the
test environment's in-memory one, ``awsworld dev``'s emulator, the AWS World of the flow function: no client, no
credentials or IAM beyond what the flow already uses to report a child's end to its parent) and an idempotency key
derived from the call (``durable.hook_calls.resume_key``). So the payload is recorded once per call however often
the body runs: a retry after a crash between the target's ``hook_received`` and this step's end finds its key
(``HookAlreadyReceivedError``, or a disposed hook's repeat) and records nothing; a replay reads the step's end from
the log and runs no body at all.
"""

from __future__ import annotations

from typing import Any

from ..authoring.definitions import StepDef
from ..authoring.retry import RetryPolicy
from ..authoring.step_context import current_step
from ..durable import serde
from ..durable.hook_calls import RESUME_HOOK, resume_key
from ..world.errors import HookClosedError, HookNotFoundError, InvalidInputError, RunGoneError
from .run_control import resume_hook


async def _resume_hook_call(token: str, payload: Any, waits: bool) -> bool:
    """Resume the hook holding ``token`` with ``payload`` and wake its run; True once recorded (by this attempt or
    an earlier one). ``waits`` (the call gave ``wait=``): a hook no run has created yet answers False, so the
    call's poll (``authoring/resume.py``) looks again later; without it that is ``HookNotFoundError`` at once."""
    context = current_step.get()
    assert context is not None, "awsworld.resume_hook runs as a step"
    key = resume_key(context.metadata.run_id, context.metadata.step_id)
    try:
        encoded = serde.dumps(payload)
    except serde.SerializationError as error:  # (the call's input was serialized already: only a codec can do this)
        raise TypeError(f"the hook payload cannot be serialized: {error}") from None
    try:
        await resume_hook(context.world, token, encoded, idempotency_key=key)
    except HookClosedError:
        raise  # the run that held the hook ended: its message names the run and how it ended
    except HookNotFoundError as missing:
        if missing.disposed_hook is not None:
            raise HookNotFoundError(
                f"{missing}: the run that held it left its `async with create_hook(...)` (or its timeout passed) "
                "before this resume; nothing was recorded", disposed_hook=missing.disposed_hook) from None
        if waits:
            return False
        raise HookNotFoundError(  # (find_hook's own advice is a client's: run.wait_for_hook)
            "no hook holds that token yet: no run has reached create_hook with it. Pass wait= to wait for it "
            "(await resume_hook(token, payload, wait=\"5m\")), or resume only once the other run holds the "
            "hook; nothing was recorded") from None
    return True


RESUME_HOOK_STEP = StepDef(RESUME_HOOK, _resume_hook_call, retry=RetryPolicy(
    max_attempts=11, initial_delay=1.0, backoff=2.0, max_delay=60.0,
    # A missing or closed hook, an ended run, a payload the hook refuses (a codec's, too large): the same call
    # meets the same answer again, so the workflow gets it at once (as the error's own type: ``rebuilt_errors``).
    no_retry_on=(HookNotFoundError, RunGoneError, InvalidInputError)))


__all__ = ["RESUME_HOOK_STEP"]
