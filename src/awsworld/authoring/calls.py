"""The functions workflow and step code calls: ``sleep``, hooks, ``now``, ``random``, ``uuid4``, ``time_ns``,
``patched``, step metadata, streams, a webhook's URL."""

from __future__ import annotations

import random as _random
import time as _time
import uuid as _uuid
from collections.abc import AsyncIterator, Generator
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, Generic, TypeVar, overload

from ..durable.codecs import Codec
from ..settings import SETTINGS, Settings
from ..world.clock import clock_of
from .durations import Duration, When
from .runtime import HookHandle, WorkflowMetadata, current_runtime, noted, outside_any_run, require_runtime
from .step_context import StepMetadata, StreamWriter, current_step
from .webhook_requests import WebhookRequest
from .webhook_responses import RespondWith, stored_respond_with

_stdlib_time_ns = _time.time_ns
_stdlib_uuid4 = _uuid.uuid4
"""The standard library's own, taken at import: while workflow code runs, the engine's determinism guard puts
replay-stable functions in ``time`` and ``uuid`` (``_engine/determinism.py``), and outside a workflow these answer
as the standard library does."""


@noted("awsworld.sleep()")
async def sleep(duration: When, *, name: str | None = None) -> None:
    """Sleep durably: seconds, a timedelta, a string (``"500ms"``, ``"10s"``, ``"5m"``, ``"2h"``, ``"1d"``,
    ``"1h30m"``), or until an aware datetime. A relative duration counts from the workflow's ``now()``, so
    replays agree on when it ends. No compute runs while it waits. ``name``: what the log shows for this
    sleep (display only, ``authoring.names``)."""
    runtime = require_runtime("awsworld.sleep()")
    await runtime.sleep_until(runtime.resume_at(duration), name=name)


def now() -> datetime:
    """Inside a workflow: the time of the last event replayed (the same on every replay). Inside a step: the
    World's clock (a test environment's virtual time). Elsewhere: now."""
    runtime = current_runtime.get()
    if runtime is not None:
        return runtime.current_time()
    step = current_step.get()
    return clock_of(step.world).now() if step is not None else datetime.now(UTC)


def random() -> float:
    """Inside a workflow: a replay-stable pseudo-random float in [0, 1). Elsewhere: ``random.random()``."""
    runtime = current_runtime.get()
    return runtime.rng.random() if runtime is not None else _random.random()


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def time_ns() -> int:
    """Inside a workflow: the time of the last event replayed, in nanoseconds since the epoch (replay-stable).
    Elsewhere: ``time.time_ns()``."""
    runtime = current_runtime.get()
    if runtime is None:
        return _stdlib_time_ns()
    return (runtime.current_time() - _EPOCH) // timedelta(microseconds=1) * 1000


def uuid4() -> _uuid.UUID:
    """Inside a workflow: a random UUID drawn from the run's seeded generator (replay-stable). Elsewhere:
    ``uuid.uuid4()``."""
    runtime = current_runtime.get()
    if runtime is None:
        return _stdlib_uuid4()
    return _uuid.UUID(int=runtime.rng.getrandbits(128), version=4)


def patched(change_id: str) -> bool:
    """Branch on a code change without diverging in-flight runs::

        if patched("charge-with-tax"):
            await charge(order_id, amount * 1.2)   # runs that reach this point on the new code
        else:
            await charge(order_id, amount)         # runs whose history was recorded before the change

    True for a run that reaches the call on new code, False while replaying history recorded before the change.
    A run's first call for a change id fixes the answer for all its later calls; a True answer is recorded
    durably (one small write per change id per run, none for runs that never call it), so it never flips.
    ``change_id``: 1-200 characters, no whitespace; keep it unique per change."""
    return require_runtime("awsworld.patched()").patched(change_id)


__all__ = ["Hook", "create_hook", "create_webhook", "get_writable", "now", "patched", "random", "sleep",
           "step_metadata", "time_ns", "uuid4"]


T = TypeVar("T")


class Hook(Generic[T]):
    """A durable hook: ``await hook`` takes one payload, ``async for payload in hook`` takes them in order,
    ``async with create_hook() as hook`` disposes it (frees its token) on exit. ``T``: what a payload is (the
    codec's type with ``create_hook(codec=...)``; a ``WebhookRequest`` for ``create_webhook()``; else ``Any``)."""

    def __init__(self, handle: HookHandle) -> None:
        self._op = handle

    @property
    def token(self) -> str:
        """The token the other side resumes this hook with (``client.resume_hook(token, payload)``); a webhook's
        is the 64 hex digits at the end of its URL."""
        return self._op.token

    @property
    def id(self) -> str:
        """The hook's id in the run's log (its ``hook_created`` event's correlation id)."""
        return self._op.id

    def __await__(self) -> Generator[Any, None, T]:
        return self._op.next_payload().__await__()

    def __aiter__(self) -> AsyncIterator[T]:
        return self

    async def __anext__(self) -> T:
        payload: T = await self._op.next_payload()
        return payload

    def dispose(self) -> None:
        """Release the token (recorded durably by the flow). Payloads already received stay readable."""
        self._op.dispose()

    async def __aenter__(self) -> Hook[T]:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.dispose()


@overload
def create_hook(token: str | None = None, metadata: Any = None, *, timeout: When | None = None,
                heartbeat_timeout: Duration | None = None, name: str | None = None,
                codec: Codec[T]) -> Hook[T]: ...


@overload
def create_hook(token: str | None = None, metadata: Any = None, *, timeout: When | None = None,
                heartbeat_timeout: Duration | None = None, name: str | None = None,
                codec: None = None) -> Hook[Any]: ...


def create_hook(token: str | None = None, metadata: Any = None, *, timeout: When | None = None,
                heartbeat_timeout: Duration | None = None, name: str | None = None,
                codec: Codec[Any] | None = None) -> Hook[Any]:
    """Declare a hook. Without a token one is derived from the run (long, unguessable, replay-stable).

    ``timeout`` (a duration such as ``"1h"``, seconds or a timedelta, counted from this call; or an aware
    datetime): once it passes, awaiting the hook (``await hook`` or the next ``async for`` payload) raises
    ``HookTimeoutError`` after any payloads received before, and the hook is disposed. Durable: whichever of
    the payload and the deadline the log records first decides, on every replay. It bounds the whole hook,
    not each payload. Adds a wait to the run's history (so adding a timeout to a deployed ``create_hook``
    call is a change to branch with ``patched()``). ``name``: what the log shows for it (display only).

    ``heartbeat_timeout`` (a duration): the sender must be heard from at least that often, by a heartbeat
    (``Client.heartbeat_hook``, ``awsworld heartbeat-hook``, ``POST /webhooks/<token>/heartbeat``) or a payload;
    counted from this call, then from the last one heard. Else awaiting the hook raises
    ``HookHeartbeatTimeoutError`` (a ``HookTimeoutError``) after any payloads received before, and the hook is
    disposed. It adds a wait to the run's history, as ``timeout`` does.

    ``codec``: the payloads are the codec's text or bytes (``resume_hook(token, text)``), and the workflow gets
    what it decodes (a ``Hook[T]`` for a ``Codec[T]``); a payload it cannot decode raises ``CodecError`` at the
    await that takes it (the hook takes later payloads)."""
    return Hook(require_runtime("awsworld.create_hook()").create_hook(
        token, metadata, is_webhook=False, codec=codec, name=name, timeout=timeout,
        heartbeat_timeout=heartbeat_timeout))


def create_webhook(metadata: Any = None, *, timeout: When | None = None, heartbeat_timeout: Duration | None = None,
                   name: str | None = None, respond_with: RespondWith = None) -> Hook[WebhookRequest]:
    """A hook resumed over HTTP (``POST /webhooks/<token>``); each payload is the request, a ``WebhookRequest``
    (``{"method", "headers", "body", "query"}``: ``authoring/webhook_requests.py``). ``timeout``,
    ``heartbeat_timeout`` (heartbeats: ``POST /webhooks/<token>/heartbeat``) and ``name``: as ``create_hook``'s.

    ``respond_with``: what the sender is answered. None: ``202`` with a JSON status body. A ``WebhookResponse``:
    that response, once the request is recorded. ``"manual"``: the workflow answers each request from a step,
    ``await respond(request, status=..., body=...)``, and the route waits for it (``authoring/webhook_responses.py``).
    Anything else raises ``InvalidWebhookResponseError`` here."""
    runtime = require_runtime("awsworld.create_webhook()")
    stored = stored_respond_with(respond_with)
    return Hook(runtime.create_hook(None, metadata, is_webhook=True, name=name, timeout=timeout,
                                    heartbeat_timeout=heartbeat_timeout, respond_with=stored))


WEBHOOK_ROUTE = "webhooks"
"""The path the webhook route serves, under its base URL: ``<base>/webhooks/<token>`` (``lambda_host/webhook.py``)."""


def webhook_address(base: str, token: str) -> str:
    """The URL of the webhook ``token`` under the route's ``base`` URL: the one rule, for ``webhook_url`` and
    ``awsworld hooks``. ``base`` may be the function URL (``https://....on.aws/``, as the stack gives the flow
    function and ``awsworld dev`` prints) or the stack's ``WebhookUrl`` output, which ends in ``webhooks/``
    already: an operator sets either, and the URL must not read ``.../webhooks/webhooks/<token>`` (a 404)."""
    root = base.rstrip("/")
    if root.endswith("/" + WEBHOOK_ROUTE):
        root = root[: -len(WEBHOOK_ROUTE) - 1]
    return f"{root}/{WEBHOOK_ROUTE}/{token}"


def webhook_url(token: str) -> str:
    """The URL a sender calls to resume the webhook ``token`` (``create_webhook()``'s ``hook.token``): Vercel's
    ``webhook.url``. Call it in the step that hands the URL out (or in a client), not in the workflow body: the
    URL is the deployment's (its webhook function's address, ``AWSWORLD_WEBHOOK_URL``), not the run's, so a
    body that passed it on would replay differently once the address changed (a new stack, ``dev`` on another
    port). The stack sets the variable for the flow function that runs the steps, and ``awsworld dev`` for its
    deliveries; a test or a client sets it itself (the stack's ``ClientEnvironment`` output carries it)."""
    if current_runtime.get() is not None:
        raise RuntimeError("webhook_url() is the deployment's address, not the run's: call it in the step that "
                           "hands the URL out (pass the step hook.token), not in the workflow body, whose "
                           "calls must replay the same however the address changes")
    base = SETTINGS.webhook_url
    if not base:
        raise RuntimeError(f"webhook_url(): {Settings.webhook_url.env} is not set. The stack sets it for the flow "
                           "function and `awsworld dev` for its deliveries; elsewhere (a test, a client) set it to "
                           "the webhook route's base URL (the stack's ClientEnvironment output has it; in a test: "
                           f"monkeypatch.setenv(\"{Settings.webhook_url.env}\", \"https://hooks.example\"))")
    return webhook_address(base, token)


def workflow_metadata() -> WorkflowMetadata:
    """Inside a workflow: its run's id, its workflow's name, when the run was recorded, and the parent run of a
    child (``WorkflowMetadata``), the same on every replay. In a step, ``step_metadata().run_id`` names the run."""
    return require_runtime("awsworld.workflow_metadata()").workflow_metadata()


def step_metadata() -> StepMetadata:
    """The running step's id, attempt and start time."""
    context = current_step.get()
    if context is None:
        raise RuntimeError(f"step_metadata() can only be used inside a @step running in a workflow{outside_any_run()}")
    return context.metadata


def get_writable(name: str = "default") -> StreamWriter:
    """A writer for the run's stream ``name``, inside a step."""
    context = current_step.get()
    if context is None:
        raise RuntimeError(f"get_writable() can only be used inside a @step running in a workflow{outside_any_run()}")
    return context.writer(name)
