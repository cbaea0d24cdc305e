"""``resume_hook`` inside a workflow: one run answers a hook another run (or this one) waits on, durably.

Temporal's ``workflow.get_external_workflow_handle(id).signal(...)``, DBOS's ``DBOS.send`` from a workflow. It is
a **built-in step** (``durable.hook_calls``; its body: ``_worker/resume_calls.py``), not an event of its own: the
contract's step rules already give what a send needs, on every World, with nothing to migrate:

- *A replay does not send again*: the step's end is in the log, so a replay (a later delivery, a code edit that
  kept the call) reads it and runs no body.
- *A crash between the send and its record sends once*: the body resumes under an idempotency key derived from
  the call (the run's id and the step's id: the same on every attempt), and the target's World records at most one
  payload per key and hook (``resumeId``, as ``Client.resume_hook(..., idempotency_key=...)``); the retried attempt
  finds the first one's payload, records nothing and wakes the target again. The key is also the first hook's
  only (``resumeOnce``): a hook that claimed the token after an attempt recorded the payload elsewhere refuses it
  (``_worker/resume_calls.py``), so the payload reaches one hook, the one that held the token when it was sent.
- *Transient failures* (a throttled write) are retried with back-off, as the start of a child run is; the answers
  that would repeat are not: no such hook and an ended run are the step's recorded result, raised here as the
  World's own errors (with their attributes, as ``Client.resume_hook`` raises them), on every replay; a payload
  the hook's codec refuses fails the step.
- *Waiting for the hook* (``wait=``) is a poll of that step (``poll_until``'s machinery): between looks no compute
  runs and the run holds a timer, so a test environment skips the time and a crash loses nothing.

The token and payload are the step's arguments, recorded in this run's log like any step's (a webhook's token is
a credential: resume a webhook from a workflow only where that log is as private as the token).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

from ..durable import serde
from ..durable.hook_calls import REFUSED, RESUME_HOOK, RESUME_HOOK_CALL
from ..durable.json_data import SerializationError
from ..world.errors import HookClosedError, HookNotFoundError
from .durations import Duration, seconds
from .errors import StepError
from .poll_spec import TIMED_OUT, PollSpec
from .runtime import current_runtime, noted

WAIT_INTERVAL = 1.0  # seconds between the first looks for the hook, doubling ...
WAIT_MAX_INTERVAL = 30.0  # ... up to this


@noted("awsworld.resume_hook()")
async def resume_hook(token: str, payload: Any, *, wait: Duration | None = None, name: str | None = None) -> None:
    """Inside a workflow: deliver ``payload`` to the hook holding ``token`` (another run's ``create_hook(token)``)
    and wake its run, exactly once for this call. Returns once the payload is recorded on the hook.

    Durable: the send is a step (``awsworld.resume_hook`` in the log) whose idempotency key is the call's, so a
    replay never sends again and a retry after a crash does not send twice. ``payload``: any value a step
    argument can be (it is recorded in this run's log); a hook created with a codec takes its codec's text.

    ``wait`` (a duration: ``"5m"``, seconds, a timedelta): a hook no run has created yet is looked for again
    (1 s apart, doubling up to 30 s, durably: no compute runs in between) until it appears or ``wait`` has passed
    from this call. Without it, a hook that does not exist yet fails the call at once.

    Raises the World's errors (from ``awsworld.world``), as ``Client.resume_hook`` does: ``HookNotFoundError`` when
    no hook holds the token (after ``wait``; ``disposed_hook`` set when the hook that held it was disposed), and
    ``HookClosedError`` (a ``HookNotFoundError`` and a ``RunGoneError``; ``run_id``, ``run_status``) when the run
    that held it has ended. A retry after a cut-off attempt that recorded the payload returns as that attempt would
    have, also when another hook holds the token by then: that hook does not get it (the World records the call's
    key on one hook only). A payload
    the hook refuses (``CodecPayloadError``: a codec's hook takes its codec's text) fails the call's step: a
    ``StepError`` that is also a ``CodecPayloadError``. ``name``: what this run's log shows for the call (display
    only). Outside a workflow, use ``Client.resume_hook``."""
    runtime = current_runtime.get()
    if runtime is None:
        raise RuntimeError("awsworld.resume_hook() can only be used inside a @workflow body; elsewhere (a step, a "
                           "script, a test) resume a hook with a Client: await client.resume_hook(token, payload)")
    if not isinstance(token, str) or not token:  # pyright: ignore[reportUnnecessaryIsInstance]  (untyped callers)
        raise TypeError(f"resume_hook needs the hook's token, a non-empty str, got {token!r}")
    try:  # checked here, so the error names the payload, not the built-in step's second argument
        serde.dumps(payload)
    except SerializationError as error:
        where = error.path[len("value"):] if error.path.startswith("value") else f" at {error.path}"
        raise SerializationError(f"resume_hook({token!r}) payload{where}", error.reason) from None
    if wait is None:
        _raise_refusal(await runtime.call_step(RESUME_HOOK_CALL, (token, payload, False), {}, name=name))
        return
    span = seconds(wait, what="wait")
    deadline = runtime.current_time() + timedelta(seconds=span)  # (replay-stable: the workflow's now())
    poll = PollSpec(_answered, WAIT_INTERVAL, 2.0, WAIT_MAX_INTERVAL, deadline, step_name=RESUME_HOOK,
                    not_ready="no run holds the hook yet")
    try:
        answer = await runtime.call_step(RESUME_HOOK_CALL, (token, payload, True), {}, poll=poll, name=name)
    except StepError as error:
        if error.error_type != TIMED_OUT:
            raise
        answer = None
    if answer is None:
        raise HookNotFoundError(f"resume_hook({token!r}): no hook held that token within wait={wait!r}: no run "
                                "reached create_hook with it in that time, or, on a World that deletes ended runs "
                                "(AWS), the run that held it had ended and been deleted once its retention passed; "
                                "nothing was recorded")
    _raise_refusal(answer)


def _answered(answer: object) -> bool:
    """A look the poll takes: a recorded resume (True) or a refusal; not False (no hook yet: look again)."""
    return answer is not False


def _raise_refusal(answer: object) -> None:
    """The World's error a recorded refusal stands for (``durable.hook_calls.REFUSED``); nothing for a resume."""
    if not isinstance(answer, dict):
        return
    refusal = cast("dict[str, Any]", answer)
    kind, message = refusal.get(REFUSED), str(refusal.get("message") or "the hook refused the resume")
    if kind == "closed":
        raise HookClosedError(message, run_id=str(refusal.get("runId")), run_status=str(refusal.get("runStatus")))
    if kind == "not-found":
        held = refusal.get("disposedHook")
        disposed = (str(held[0]), str(held[1])) if isinstance(held, list) and len(held) == 2 else None
        raise HookNotFoundError(message, disposed_hook=disposed)


__all__ = ["resume_hook"]
