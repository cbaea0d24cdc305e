"""Durable operations a workflow declares: steps, waits (sleep) and hooks.

Each gets an id from the run's counter in call order, so a replay declares the same ids in the same order.
An op is "created" once its ``*_created`` event is in the log; until then it is new work for the flow.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from ..authoring.errors import CodecError
from ..authoring.poll_spec import PollSpec
from ..authoring.runtime import StepEnd, StepRef, WorkflowRef
from ..authoring.webhook_responses import RESPOND_WITH_FIELD
from ..durable.codecs import Codec
from ..durable.json_data import JSONValue
from ..world.errors import PayloadTooLargeError


@dataclass
class StepOp:
    id: str
    definition: StepRef
    input: JSONValue  # serialized {"args": [...], "kwargs": {...}}
    future: asyncio.Future[Any]
    created: bool = False
    started: bool = False
    done: bool = False
    attempt: int = 0
    retry_after: datetime | None = None
    owner: str | None = None  # the message id of the delivery that started the current attempt
    lease_until: datetime | None = None  # when that delivery's lease on the attempt ends (world.rules.leases)
    started_at: datetime | None = None  # when the current attempt's step_started landed
    declared_at: datetime | None = None  # when its step_created landed (a step never started is overdue later)
    digest: str | None = None  # of ``input`` (recorded as step_created's inputDigest, checked on replay)
    kind: str = "step"
    poll: PollSpec | None = None  # a poll_until: its attempts are polls, run only by flows (see ``poll``)
    name: str | None = None  # the display name recorded on step_created (``authoring.names``; never compared)
    wakes_on: frozenset[StepEnd] = frozenset()  # ends that continue the workflow at once (``authoring.runtime``)


@dataclass
class WaitOp:
    id: str
    resume_at: datetime
    future: asyncio.Future[Any]
    created: bool = False
    done: bool = False
    declared_at: datetime | None = None  # the workflow's now() when it called sleep (for messages)
    abandoned: bool = False  # nothing will await it (a disposed hook's timeout): the flow neither wakes for nor
    # completes it. A sleep whose future was cancelled counts as abandoned too (``live``).
    kind: str = "wait"
    name: str | None = None  # the display name recorded on wait_created
    hook: tuple[str, str] | None = None  # (hook id, HOOK_TIMEOUT or HOOK_HEARTBEAT) for a hook's own wait
    every: float | None = None  # a heartbeat wait's heartbeat_timeout in seconds (recorded: HEARTBEAT_EVERY_FIELD)
    rearmed: bool = False  # a hook's heartbeat wait declared by replaying a heartbeat (not at a code position)

    @property
    def live(self) -> bool:
        """Still worth waking the run for. Decided by workflow code at a log position, so replay-stable."""
        return not self.abandoned and not self.future.cancelled()


@dataclass(frozen=True)
class _Undecodable:
    """A hook payload its codec refused, held in order with the others: the await that takes it raises."""

    error: BaseException


@dataclass
class HookOp:
    id: str
    token: str
    metadata: JSONValue  # serialized
    loop: asyncio.AbstractEventLoop
    is_webhook: bool = False
    created: bool = False
    disposed: bool = False
    dispose_requested: bool = False
    conflict: BaseException | None = None
    payloads: collections.deque[Any] = field(default_factory=collections.deque[Any])
    waiters: collections.deque[asyncio.Future[Any]] = field(default_factory=collections.deque[asyncio.Future[Any]])
    closed: Callable[[], BaseException] | None = None  # timed out or failed: what every later await raises
    timeout: WaitOp | None = None  # the wait declared with the hook (``create_hook(timeout=...)``)
    heartbeat: WaitOp | None = None  # the current heartbeat wait (``heartbeat_timeout=``), re-armed per heartbeat
    heartbeat_every: timedelta | None = None
    heartbeats: int = 0  # heartbeats (and payloads) replayed so far: names the next re-armed wait
    kind: str = "hook"
    codec: Codec[Any] | None = None  # the payloads' (``create_hook(codec=...)``): decoded as they are replayed
    name: str | None = None  # the display name recorded on hook_created
    respond_with: JSONValue = None  # a webhook's answer, recorded on hook_created (``RESPOND_WITH_FIELD``)

    def deliver_failure(self, error: BaseException) -> None:
        """A payload that could not be decoded: the await that would have taken it raises ``error``."""
        self.deliver(_Undecodable(error))

    def deliver(self, payload: Any) -> None:
        if self.closed is not None:
            return  # recorded after the hook timed out or failed: the first of the two in the log decided
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                if isinstance(payload, _Undecodable):
                    waiter.set_exception(payload.error)
                else:
                    waiter.set_result(payload)
                return
        self.payloads.append(payload)

    def fail(self, error: BaseException) -> None:
        self.conflict = error
        self._abandon_waits()  # the hook never held its token: its deadlines decide nothing
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_exception(error)

    def close(self, error: Callable[[], BaseException]) -> None:
        """The hook timed out or was failed: payloads received before stay readable, then every await raises
        ``error()``. The hook is disposed (its token freed) and its timeout wait is dropped."""
        if self.closed is not None:
            return
        self.closed = error
        self.dispose()
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_exception(error())

    def dispose(self) -> None:
        self.dispose_requested = True
        self._abandon_waits()  # nobody will be told they passed: no wake-up for them

    def _abandon_waits(self) -> None:
        for wait in (self.timeout, self.heartbeat):
            if wait is not None and not wait.done:
                wait.abandoned = True

    def next_payload(self) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = self.loop.create_future()
        if self.conflict is not None:
            future.set_exception(self.conflict)
        elif self.payloads:
            payload = self.payloads.popleft()
            if isinstance(payload, _Undecodable):
                future.set_exception(payload.error)
            else:
                future.set_result(payload)
        elif self.closed is not None:
            future.set_exception(self.closed())
        else:
            self.waiters.append(future)
        return future


Op = StepOp | WaitOp | HookOp

DISPLAY_NAME_FIELD = "displayName"
"""Where a ``*_created`` event records its call's display name (``authoring.names``)."""


PAYLOAD_CODEC_FIELD = "payloadCodec"
"""Where a codec hook's ``hook_created`` records that it decodes its payloads with a codec (``True``; absent for
a plain hook, so its bytes do not grow). Never compared on replay, like the display name: a run recorded before
the field replays unchanged. The World keeps it on the hook (``world/rules/hooks.py``: ``Hook.payload_codec``), so
a sender checks a payload is the codec's text before recording it (``_worker/run_control.py``'s ``resume_hook``)
and ``awsworld resume`` sends its PAYLOAD as that text."""


HOOK_ID_FIELD = "hookId"
HOOK_WAIT_FIELD = "hookWait"
"""Where a ``wait_created`` of a hook's own wait (``_engine.hook_timeouts``) records the hook's id and what the
wait is for: ``HOOK_TIMEOUT`` (``create_hook(timeout=...)``) or ``HOOK_HEARTBEAT`` (``heartbeat_timeout``).
Display only, like the display name (replay never compares them): ``awsworld events``/``describe`` and the run
viewer show such a wait as the hook's deadline instead of a sleep, and drop it once the hook is disposed."""
HOOK_TIMEOUT = "timeout"
HOOK_HEARTBEAT = "heartbeat"
HEARTBEAT_EVERY_FIELD = "heartbeatSeconds"
"""Where a heartbeat wait's ``wait_created`` records ``heartbeat_timeout`` (seconds; display only too): a heartbeat
moves the deadline to its own time plus this at once, while the flow writes the next wait only when it next runs,
so ``describe`` reads the deadline from the last heartbeat rather than from a wait the heartbeat superseded."""


def named(op: Op, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` of ``op``'s ``*_created`` event with its display name, when it has one (none: no bytes), for a
    hook with a codec, that mark (``PAYLOAD_CODEC_FIELD``), for a webhook that does not answer 202, its answer
    (``RESPOND_WITH_FIELD``: never compared on replay either), and for a hook's own wait, the hook it belongs to."""
    if op.name is not None:
        data[DISPLAY_NAME_FIELD] = op.name
    if isinstance(op, HookOp) and op.codec is not None:
        data[PAYLOAD_CODEC_FIELD] = True
    if isinstance(op, HookOp) and op.respond_with is not None:
        data[RESPOND_WITH_FIELD] = op.respond_with
    if isinstance(op, WaitOp) and op.hook is not None:
        data[HOOK_ID_FIELD], data[HOOK_WAIT_FIELD] = op.hook
        if op.every is not None:
            data[HEARTBEAT_EVERY_FIELD] = op.every
    return data


class OpDeclarer(Protocol):
    """What the engine's helpers that declare ops for a call (``hook_timeouts``, ``children``) ask of the execution
    they declare them in (``WorkflowExecution``): the positions, the run's identity and clock, the loop."""

    @property
    def run_id(self) -> str: ...

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    def current_time(self) -> datetime: ...

    def recorded_call(self, definition: StepRef, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool: ...

    def declare_step(self, definition: StepRef, args: tuple[Any, ...], kwargs: dict[str, Any], *,
                     poll: PollSpec | None = None, name: str | None = None,
                     refusal: PayloadTooLargeError | None = None) -> StepOp: ...

    def oversized_child_input(self, definition: WorkflowRef, args: tuple[Any, ...], kwargs: dict[str, Any],
                              start_args: tuple[Any, ...], start_kwargs: dict[str, Any]) -> PayloadTooLargeError | None:
        ...

    def declare_wait(self, resume_at: datetime, *, name: str | None = None) -> WaitOp: ...

    def declare_rearmed_wait(self, op_id: str, resume_at: datetime) -> WaitOp: ...

    def declare_hook(self, token: str | None, metadata: Any, is_webhook: bool, codec: Codec[Any] | None = None, *,
                     name: str | None = None) -> HookOp: ...

    def note_undecoded(self, place: str, error: CodecError) -> None: ...
