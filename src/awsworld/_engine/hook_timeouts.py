"""Hooks that end without a payload: a timeout (``create_hook(..., timeout=...)``) and a failure sent by an outside
party (``Client.fail_hook``).

A timeout is a durable wait declared with the hook, at the position right after it, so every replay declares the
same pair. The hook's fate is decided by the log alone: whichever of a ``hook_received`` and the wait's
``wait_completed`` comes first. Payloads received before the time passed are returned first; once they are
drained every await raises ``HookTimeoutError``. The timeout bounds the whole hook (a deadline counted from
``create_hook``), not each payload of an ``async for``: one wait per hook keeps the log short, and a deadline is
what "approve within a day" means. A timed-out hook is disposed, so a late sender finds no hook (an error at
the sender) instead of a payload silently dropped.

A failure is a ``hook_received`` whose payload is a failure envelope (``durable/hook_payloads.py``): it closes
the hook as a timeout does, with ``HookFailedError``.

A heartbeat (``Client.heartbeat_hook``, for ``create_hook(..., heartbeat_timeout=...)``) is a ``hook_received``
with another such envelope, so it is refused exactly as a payload is (an unknown, disposed or ended hook: one
rule, ``world.rules.hooks.hook_received``, in both Worlds) and costs one conditional write; it wakes nobody. The
hook declares a heartbeat wait due ``heartbeat_timeout`` after its creation. Replaying any ``hook_received`` (a
payload counts as a heartbeat) abandons the current heartbeat wait and declares the next one, due
``heartbeat_timeout`` after that event: its time and its id (``<first wait>_hb<n>``) come from the log, so every
replay re-arms the same way. The flow writes the new wait the next time it runs (at the latest when the old one
falls due, which the watch index and the watchdog enforce as any wait's), and the hook fails with
``HookHeartbeatTimeoutError`` when a heartbeat wait completes first.
"""

from __future__ import annotations

from datetime import datetime

from ..authoring.durations import Duration, When, parse_duration, resolve
from ..authoring.errors import HookHeartbeatTimeoutError, HookTimeoutError
from .ops import HOOK_HEARTBEAT, HOOK_TIMEOUT, HookOp, OpDeclarer, WaitOp


def arm(execution: OpDeclarer, op: HookOp, timeout: When) -> None:
    """Declare ``op``'s timeout wait (the position right after the hook) and close the hook when it completes.
    ``timeout``: any duration (``"1h"``, seconds, a timedelta; from the workflow's ``now()``) or a deadline."""
    wait = execution.declare_wait(resolve(timeout, execution.current_time(), what="create_hook(timeout=...)"))
    wait.hook = (op.id, HOOK_TIMEOUT)  # recorded on its wait_created: shown as the hook's deadline, not a sleep
    op.timeout = wait
    token = op.token

    def passed(_: object) -> None:
        # Runs on the replay loop right after the wait_completed is applied, before the next event: a payload
        # recorded after it finds the hook closed, one recorded before it was delivered already.
        if wait.future.cancelled():
            return
        deadline = wait.resume_at.isoformat()
        op.close(lambda: HookTimeoutError(token, deadline))

    wait.future.add_done_callback(passed)


def arm_heartbeat(execution: OpDeclarer, op: HookOp, heartbeat_timeout: Duration) -> None:
    """Declare ``op``'s first heartbeat wait (the next position), due ``heartbeat_timeout`` from now."""
    every = parse_duration(heartbeat_timeout, what="create_hook(heartbeat_timeout=...)")
    if every.total_seconds() <= 0:
        raise ValueError(f"create_hook(heartbeat_timeout=...) must be positive, got {heartbeat_timeout!r}")
    op.heartbeat_every = every
    _watch(op, execution.declare_wait(execution.current_time() + every))


def heard(execution: OpDeclarer, op: HookOp, at: datetime) -> None:
    """A ``hook_received`` (a heartbeat or a payload) recorded at ``at`` was replayed: re-arm the heartbeat wait
    from it. The abandoned wait is never completed nor waited for; the new one is written by this delivery
    (unless it is abandoned in turn before the delivery writes)."""
    current, every = op.heartbeat, op.heartbeat_every
    if current is None or every is None or op.closed is not None or current.done or current.abandoned:
        return  # no heartbeat timeout, or the hook is over (timed out, failed, disposed): nothing to re-arm
    current.abandoned = True
    op.heartbeats += 1
    first = current.id.split("_hb", 1)[0]
    _watch(op, execution.declare_rearmed_wait(f"{first}_hb{op.heartbeats}", at + every))


def _watch(op: HookOp, wait: WaitOp) -> None:
    wait.hook = (op.id, HOOK_HEARTBEAT)
    op.heartbeat = wait
    token = op.token
    every = op.heartbeat_every.total_seconds() if op.heartbeat_every is not None else 0.0
    wait.every = every or None  # recorded on its wait_created, for describe (``ops.HEARTBEAT_EVERY_FIELD``)

    def passed(_: object) -> None:
        if wait.future.cancelled() or op.heartbeat is not wait:
            return  # superseded by a later heartbeat
        op.close(lambda: HookHeartbeatTimeoutError(token, wait.resume_at.isoformat(), every))

    wait.future.add_done_callback(passed)
