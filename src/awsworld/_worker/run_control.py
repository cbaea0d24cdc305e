"""What any party does to a run from outside its flow: start it, wake it, cancel it, resume one of its hooks.

One copy of each, public, for everyone who does it: the ``Client`` (``client/client.py``), a schedule's tick and
``client.schedules`` (``schedules/effects.py``), a parent's child call (the built-in start step,
``_worker/child_runs.py``) and a child's report to its parent. Every start goes through ``RunStarter.start``, so
the checks a start makes (the workflow's name against this process's registry or the deployment's published
names, the arguments against the workflow's parameters: ``_published.model``, ``authoring.arguments``) are made
on every path that has what they need.

Starting is two writes: ``run_created`` (idempotent by the run id), then the flow message that runs it (a wake,
keyed by the run id and why, so a repeated start sends one message while the first is queued).
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from .._deployments.model import newest_holding, refusal
from .._deployments.pins import LATEST, DeploymentUnavailableError, pin_of, pinned_attributes
from .._http.push import sdk_run
from .._published.model import judge
from ..authoring.definitions import REGISTRY, Registry, WorkflowDef, workflow_definition
from ..authoring.errors import RunStartError
from ..durable import codecs, serde
from ..durable.codecs import Place
from ..durable.hook_payloads import is_envelope
from ..world.entities import TERMINAL_RUN_STATUSES, HookRecord
from ..world.entities import Run as RunView
from ..world.errors import (
    CodecPayloadError,
    EntityConflictError,
    HookAlreadyReceivedError,
    HookClosedError,
    HookNotFoundError,
    HookResumedElsewhereError,
    PayloadTooLargeError,
    RunGoneError,
    RunIdTakenError,
    RunNotFoundError,
    SdkRunHookError,
)
from ..world.events import MAX_RESUME_ID_LENGTH, Event, EventResult
from ..world.ids import new_run_id
from ..world.limits import oversized, too_large_text
from ..world.messages import FlowMessage, queue_name_for
from ..world.protocol import World
from ..world.published import Publication
from ..world.rules.hooks import closed_hook_error, recorded_elsewhere
from ..world.rules.lifetime import creation_context
from .limiter import require_store
from .run_limits import Admitted, admit, slot_of, start_context

POLL_FIRST = 0.005  # waiting for a hook (resume_hook(wait=), wait_for_hook): the first pause, doubled up to POLL_MAX
POLL_MAX = 0.05
MAX_CANCEL_REASON = 512  # run_cancelled's cancelReason (world.events.RunCancelledData)


async def wake_run(world: World, run_id: str, workflow: str, reason: str, *, deployment: str | None = None) -> None:
    """Queue a flow message for run ``run_id`` (of ``workflow``), keyed by why (``start``, ``cancel``, a hook's
    payload...): while one such message is queued, a second wake for the same reason sends nothing.
    ``deployment``: the run's, when the waker knows it (``_deployments.routing``: handed over unread)."""
    await world.queue(queue_name_for(workflow), FlowMessage(run_id, workflow, deployment=deployment).to_payload(),
                      idempotency_key=f"{run_id}:{reason}")


@dataclass(frozen=True)
class StartedRun:
    """What ``RunStarter.start`` did: the run as recorded (a run that existed already, for an id given twice), and
    the workflow's definition when this process has it (its result's codec)."""

    run: RunView
    definition: WorkflowDef | None


async def refuse_deployment(world: World, deployment: str, workflow: str) -> None:
    """Raise ``DeploymentUnavailableError`` (nothing written) for a start that names a deployment runs of
    ``workflow`` cannot be pinned to (``_deployments.model.refusal``). A World that keeps no deployments, or has none
    registered yet (a stack whose flow function has not loaded), cannot tell: the start goes ahead. One read of the
    deployments' records, for a start that names one only."""
    store = world.deployments
    if store is None:
        return
    deployments = await store.read()
    refused = refusal(deployments, deployment, workflow) if deployments else None
    if refused is not None:
        raise DeploymentUnavailableError(deployment, f"{refused}; `awsworld deployments` lists them, and nothing "
                                                     "was started")


class RunStarter:
    """Starts runs on ``world``. ``registry``: the workflows this process has; with one, a workflow named by a
    string that it lacks is refused at the start. Without one, a start reads the names the deployment consuming
    the queue published (``_published.model``: one read, cached by this starter) and refuses a name no consumer
    registers, when that is certain; ``check_published=False`` skips that read (a schedule's tick, which runs
    inside the consumer)."""

    def __init__(self, world: World, *, registry: Registry | None = None, check_published: bool = True) -> None:
        self.world = world
        self.registry = registry
        self.check_published = check_published
        self._published: list[Publication] | None = None  # the deployment's publications, read once

    async def refuse_unpublished(self, name: str) -> None:
        """Raise ``WorkflowNotRegisteredError`` if the publications of the deployment consuming this World's
        queue make ``name`` certainly unknown (``_published.model.judge``). The first call reads them and caches
        them; a refusal reads them once more first (the consumer may have published since: dev restarted with
        another module, a deploy). A World that keeps no publications, or a starter with a registry of its own,
        never refuses here."""
        store = self.world.published
        if store is None or self.registry is not None or not self.check_published:
            return
        if self._published is None:
            self._published = await store.read()
        if not judge(name, self._published).sure:
            return
        self._published = await store.read()
        verdict = judge(name, self._published)
        if verdict.sure:
            raise verdict.error(name)

    async def start(self, workflow: Callable[..., Coroutine[Any, Any, Any]] | str, args: tuple[Any, ...],
                    kwargs: dict[str, Any], *, run_id: str | None = None,
                    context: dict[str, Any] | None = None, deployment: str | None = None,
                    concurrency_key: str | None = None, priority: int | None = None,
                    stored_input: Any = None) -> StartedRun:
        """Record the run, then queue the message that runs it. Arguments that do not fit a workflow this
        process knows are a ``TypeError`` here, and nothing is written (``authoring.arguments``); a run id given
        again returns that run (and wakes it again), or raises ``RunIdTakenError`` if that run is of another
        workflow. ``context``: more of the run's executionContext (a schedule's start says which schedule and
        tick). ``deployment``: pin the run to this deployment from the
        start (``DeploymentUnavailableError`` for one it cannot be pinned to: ``refuse_deployment``), or
        ``"latest"``: never pin it (its deliveries take the newest code); default: the deployment its
        first delivery runs on (``_deployments.pins``), or for a limited run the newest deployment now
        (``_deployments.model.newest_holding``: it may wait for its slot with no delivery). ``RunStartError``
        when the run was recorded and its message could not be queued (start it again with
        ``run_id=error.run_id``).

        A workflow with a concurrency limit takes its run's slot between the two (``run_limits``;
        ``concurrency_key``: this run's key instead of its key function's, ``priority``: its place among the
        waiters, higher first): a run that must wait gets no message (the write that frees its slot sends it),
        so a key's runs start in the order their starts were made.

        ``stored_input``: the input another run was recorded with (``Client.rerun``), recorded as it is, byte for
        byte, instead of ``args`` and ``kwargs``; read back into arguments only where this process has the
        workflow's code, to check them and find the run's slot."""
        definition = None if isinstance(workflow, str) else workflow_definition(workflow)
        name = workflow if isinstance(workflow, str) else workflow_definition(workflow).name
        if self.registry is not None and isinstance(workflow, str):
            definition = self.registry.workflow(name)  # LookupError naming the workflow and how to register it
        await self.refuse_unpublished(name)  # (a @workflow too: its module may not be loaded where runs run)
        if stored_input is not None and definition is not None:
            call = codecs.load_call(stored_input, definition.args_codec, Place("input", f"workflow {name!r}", run_id),
                                    definition.fn)
            args, kwargs = tuple(call.args), dict(call.kwargs)
        slot = None
        if definition is not None:
            try:
                definition.check_arguments(args, kwargs)
                slot = slot_of(definition, args, kwargs, key=concurrency_key)
            except TypeError:
                # Starting a recorded run again by its id (to finish a start, see RunStartError) needs no
                # arguments: the run keeps the ones it was recorded with (and its slot: its first delivery takes
                # it).
                if run_id is None or not await _recorded(self.world, run_id, name):
                    raise
        if slot is not None:
            require_store(self.world)  # (before anything is recorded: a World without limits cannot hold them)
            if deployment is None and definition is not None and definition.pinned:
                # It may wait for its slot with no delivery: pinned now, it starts on the code it was started on.
                deployment = await newest_holding(self.world.deployments, name)
        elif concurrency_key is not None and definition is None:
            raise TypeError(f"concurrency_key= needs the workflow's code here to check its limit: start {name!r} "
                            "by its function, or from a client with its registry")
        if deployment is not None and deployment != LATEST:
            await refuse_deployment(self.world, deployment, name)
        run_id = run_id or new_run_id()
        # The workflow's retention rides in the execution context (started by name without a registry: the
        # deployment's default); so do its slot and priority.
        context = {**(definition.execution_context() if definition is not None else {}), **(context or {}),
                   **start_context(slot, priority)}
        coding = definition or (self.registry or REGISTRY).workflows.get(name) or REGISTRY.workflows.get(name)
        args_codec = coding.args_codec if coding else None
        try:
            if stored_input is None and args_codec is None:  # (over the World's bound: refused before it is dumped)
                too_large = oversized({"args": list(args), "kwargs": kwargs}, "eventData.input",
                                      self.world.max_value_bytes)
                if too_large is not None:
                    raise too_large
            try:  # through the workflow's args_codec when this process knows it (a CodecError: nothing written)
                payload = stored_input if stored_input is not None else codecs.store_call(
                    args, kwargs, args_codec, coding.fn if coding else _no_body,
                    Place("input", f"workflow {name!r}", run_id))
            except serde.SerializationError as error:
                raise TypeError(f"the workflow's arguments cannot be serialized: {error}") from None
            result = await create_run(self.world, run_id, name, payload, context,
                                      attributes=pinned_attributes(deployment))
        except PayloadTooLargeError as too_large:  # named as the caller knows it, not by the run_created field
            raise PayloadTooLargeError(too_large_text(f"the arguments of workflow {name!r}", too_large.message,
                                                      plural=True), field=too_large.field) from None
        assert result.run is not None
        if result.event is None and result.run.workflow_name != name:
            # The id is another workflow's run: returning it would say this one started (it never will).
            raise RunIdTakenError(f"run id {run_id!r} is taken by a run of {result.run.workflow_name} "
                                  f"({result.run.status}), so {name} was not started: a run id names one run, "
                                  f"whatever its workflow; start {name} with an id of its own",
                                  run_id=run_id, workflow_name=result.run.workflow_name, requested=name)
        if result.event is not None or result.run.status not in TERMINAL_RUN_STATUSES:
            try:
                deployment = pin_of(result.run.attributes)
                if slot is not None and definition is not None and result.run.status not in TERMINAL_RUN_STATUSES:
                    admitted = await admit(self.world, definition, slot, result.run.run_id, priority=priority or 0,
                                           arrival=result.run.created_at, deployment=deployment)
                    await cancel_for_limit(self.world, admitted)
                    if admitted.kind != "go":
                        return StartedRun(result.run, definition)  # waits (its message comes with its slot)
                await wake_run(self.world, result.run.run_id, result.run.workflow_name, "start", deployment=deployment)
            except Exception as error:
                raise RunStartError(result.run.run_id, error, workflow=result.run.workflow_name) from error
        return StartedRun(result.run, definition)


async def create_run(world: World, run_id: str, workflow: str, call_input: Any, context: dict[str, Any], *,
                     attributes: dict[str, str] | None = None) -> EventResult:
    """Record run ``run_id`` of ``workflow`` with its stored input (``durable.codecs.store_call``) and ``context``
    in its executionContext, beside the seed its replays draw from and the lifetime it is created under
    (``world/rules/lifetime.py``); ``attributes``: the run's first (a pin:
    ``_deployments.pins``). Idempotent: an id that exists returns that run and writes nothing (``result.event`` is
    None then)."""
    data: dict[str, Any] = {"workflowName": workflow, "input": call_input,
                            "executionContext": {"seed": secrets.token_hex(32), **creation_context(), **context}}
    if attributes:
        data["attributes"] = attributes
    return await world.events.create(run_id, {"eventType": "run_created", "eventData": data}, resolve_data="none")


def _no_body(*args: Any) -> None:
    """The body ``store_call`` binds to when the workflow is unknown here: never bound (no codec then)."""


async def _recorded(world: World, run_id: str, name: str) -> bool:
    """Whether run ``run_id`` of workflow ``name`` is recorded already (one read, on a refused start only)."""
    try:
        run = await world.runs.get(run_id, resolve_data="none")
    except RunNotFoundError:
        return False
    return run.workflow_name == name


async def cancel_run(world: World, run_id: str, *, reason: str | None = None) -> None:
    """Cancel the run, recording ``reason`` (up to 512 characters) on its ``run_cancelled`` event, and wake it.
    ``RunNotFoundError`` for an unknown run, ``EntityConflictError`` for one that completed or failed. A run
    cancelled already is left as it is (``world/rules/runs.py``): nothing is written, its first reason stays, and
    the wake's key finds the first cancel's wake while that one is queued; once that one was delivered, the run is
    woken again (a first cancel whose wake failed is mended by a second), and its flow wakes none of its children,
    which the first cancel woke (``child_runs.cancel_run``)."""
    if reason is not None and len(reason) > MAX_CANCEL_REASON:
        raise ValueError(f"a cancel reason is at most {MAX_CANCEL_REASON} characters, got {len(reason)}")
    run = await world.runs.get(run_id, resolve_data="none")
    event: dict[str, Any] = {"eventType": "run_cancelled"}
    if reason is not None:
        event["eventData"] = {"cancelReason": reason}
    # The write's run without its values: only when it started is read, and a run whose values cannot be read (an
    # encrypted run whose key KMS refuses) is cancelled all the same, and woken, instead of the cancel landing and
    # the read after it failing the call (the wake unsent).
    result = await world.events.create(run_id, event, resolve_data="none")
    # The wake lets a delivery see the end (cancel children, tell a parent). A run that never started has a
    # start message already, which finds the cancel in the log whenever it comes: the wake reuses its key, so
    # while that message is queued (backing off, say: its workflow unknown here) no second one is sent. A run
    # that started gets a wake of its own (the message that started it may be long gone).
    never_started = result.run is not None and result.run.started_at is None
    await wake_run(world, run_id, run.workflow_name, "start" if never_started else "cancel")


async def cancel_for_limit(world: World, admitted: Admitted) -> None:
    """Cancel the runs an admission names (a skipped start itself, the holders a ``cancel`` start replaces): each
    as ``cancel_run`` does; one that ended meanwhile is left as it is."""
    for run_id in admitted.cancel:
        try:
            await cancel_run(world, run_id, reason=admitted.reason[:MAX_CANCEL_REASON])
        except (RunGoneError, RunNotFoundError, EntityConflictError):
            continue


@dataclass(frozen=True)
class HookResumed:
    """What ``resume_hook`` did: the event holding the payload, and whether this call recorded it (False: an
    earlier call with the same idempotency key did; this one only woke the run again)."""

    event: Event
    recorded: bool


async def find_hook(world: World, token: str, wait: float | None) -> HookRecord:
    """The hook holding ``token``; with ``wait``, ``HookNotFoundError`` only once it has not appeared in that
    many seconds. A token no hook has held yet is the usual mistake of a resume sent before its run reached
    ``create_hook``: the error says how to wait for it (the token itself stays out of the message), after the
    World's reason (kept alone in its ``details["reason"]``), which also names a run deleted after its retention
    where that can be the cause (``world/rules/hooks.py``, ``unknown_token_reason``)."""
    deadline = None if wait is None else time.monotonic() + wait
    pause = POLL_FIRST
    while True:
        try:
            return await world.hooks.get_by_token(token, resolve_data="none")
        except HookNotFoundError as missing:
            remaining = 0.0 if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                if isinstance(missing, HookClosedError) or missing.disposed_hook is not None:
                    raise
                reason = missing.details.get("reason")
                if wait is not None:
                    raise HookNotFoundError(f"{missing} (looked for {wait:g} s)", reason=reason) from None
                raise HookNotFoundError(
                    f"{missing}; if its run has not reached it yet, wait for the hook before resuming it "
                    "(await run.wait_for_hook(token)), or pass wait=SECONDS to wait for it", reason=reason) from None
        await asyncio.sleep(min(pause, remaining))
        pause = min(pause * 2, POLL_MAX)


def hook_payload(world: World, token: str, payload: object) -> Any:
    """A resume's ``payload`` as the log stores it (``serde.dumps``: ``SerializationError``), or, over the World's
    bound, the ``PayloadTooLargeError`` ``resume_hook`` raises for it, before it is dumped (``limits.oversized``)."""
    too_large = oversized(payload, "eventData.payload", world.max_value_bytes)
    if too_large is not None:
        raise _payload_too_large(token, too_large)
    return serde.dumps(payload)


def _payload_too_large(token: str, refusal: PayloadTooLargeError) -> PayloadTooLargeError:
    """A payload's refusal, named as the caller knows it (not by the ``hook_received`` field)."""
    return PayloadTooLargeError(too_large_text(f"the payload for hook {token!r}", refusal.message),
                                field=refusal.field)


async def resume_hook(world: World, token: str, encoded: Any, *, idempotency_key: str | None = None,
                      wait: float | None = None, wake: bool = True, marks: dict[str, Any] | None = None,
                      once: bool = False, retried: bool = False) -> HookResumed:
    """Record ``encoded`` (a serialized payload, or a failure or heartbeat envelope: ``durable.hook_payloads``) on
    the hook holding ``token`` and wake its run (unless ``wake`` is false). ``marks``: more of the event's data
    (a heartbeat's mark, for the log's readers). ``Client.resume_hook`` says what ``idempotency_key`` and
    ``wait`` do. ``once`` (with a key): the resume id is one hook's only (``resumeOnce``: a workflow's resume,
    ``_worker/resume_calls.py``); if another hook recorded it, that hook's run is woken again (its first wake may
    have been lost) and the World's ``HookResumedElsewhereError`` is raised: nothing is recorded here. ``retried``
    (with ``once``): an earlier attempt of this call may have recorded the id; if no hook holds the token any more
    (its run expired, say), the World's record of the id answers (one read, ``hooks.resumed_by``): the same
    ``HookResumedElsewhereError`` when a hook took it, else the look-up's ``HookNotFoundError``."""
    try:
        hook = await find_hook(world, token, wait)
    except HookNotFoundError as missing:
        if idempotency_key is None:
            raise
        if missing.disposed_hook is None:
            if once and retried:
                resume_id = _resume_id(idempotency_key)
                holder = await world.hooks.resumed_by(resume_id)
                if holder is not None:
                    elsewhere = recorded_elsewhere(holder)
                    await _wake_holder(world, elsewhere, resume_id, wake)
                    raise elsewhere from None
            raise
        return await _repeat_on_disposed(world, missing, encoded, _resume_id(idempotency_key), once)
    if hook.payload_codec:
        check_codec_payload(hook, encoded)
    run = await world.runs.get(hook.run_id, resolve_data="none")
    check_own_run(hook, run)
    ended = run.status in TERMINAL_RUN_STATUSES
    if ended and idempotency_key is None:  # with a key, storage tells a repeat (answered) from a new one (410)
        raise closed_hook_error(run.run_id, run.status)  # a retained hook: closed with its run
    data: dict[str, Any] = {"payload": encoded, **(marks or {})}
    resume_id = None if idempotency_key is None else _resume_id(idempotency_key)
    if resume_id is not None:
        data["resumeId"] = resume_id
        if once:
            data["resumeOnce"] = True
    try:
        result = await world.events.create(hook.run_id, {"eventType": "hook_received", "correlationId": hook.hook_id,
                                                         "eventData": data}, resolve_data="none")
        event, recorded = result.event, True
    except HookResumedElsewhereError as elsewhere:
        assert resume_id is not None
        await _wake_holder(world, elsewhere, resume_id, wake)
        raise
    except HookAlreadyReceivedError as repeat:
        if not isinstance(repeat.event, Event):  # a World that cannot read the first event back: the caller decides
            raise
        event, recorded = repeat.event, False
    except PayloadTooLargeError as too_large:  # named as the caller knows it, not by the hook_received field
        raise _payload_too_large(token, too_large) from None
    assert event is not None
    if not ended and wake:
        reason = f"hook:{event.event_id}" if resume_id is None else f"hook:{hook.hook_id}:{_digest(resume_id)[:32]}"
        await wake_run(world, hook.run_id, run.workflow_name, reason)
    return HookResumed(event, recorded)


def check_own_run(hook: HookRecord, run: RunView) -> None:
    """Refuse (``SdkRunHookError``, before anything is recorded) a resume, failure or heartbeat of a hook whose run
    is the Workflow SDK's TypeScript runtime's (``_http.push.sdk_run``). That runtime reads a payload as its own
    serialized bytes and is woken only through its app (the pushes its runtime queues: ``_http/push.py``), so
    ``awsworld resume`` recorded JSON, said "delivered", and the run went on waiting; its next replay (the app's
    own resume of the hook) then failed it with the runtime's ``Error: Invalid input``."""
    core = sdk_run(run)
    if core is None:
        return
    raise SdkRunHookError(
        f"hook {hook.hook_id} belongs to run {run.run_id} of the Workflow SDK's TypeScript runtime "
        f"(@workflow/core {core}): that runtime reads a hook's payload as its own serialized bytes and only its "
        "app wakes the run, so resume the hook from the app, with resumeHook(token, payload) from 'workflow/api' "
        "(a payload recorded here would never wake the run, and would fail it at its next replay). Nothing was "
        "recorded", field="token", run_id=run.run_id, hook_id=hook.hook_id)


def check_codec_payload(hook: HookRecord, encoded: Any) -> None:
    """A codec hook (``create_hook(codec=...)``) takes its codec's text or bytes: any other payload is refused
    here, before it is recorded (``CodecPayloadError``), since recorded, the codec would refuse it at the
    workflow's await and fail the run. A failure's or heartbeat's envelope passes: the workflow never decodes it."""
    if is_envelope(encoded):
        return
    held = codecs.undecodable_payload(encoded)
    if held is not None:
        raise CodecPayloadError(
            f"hook {hook.hook_id} of run {hook.run_id} decodes its payloads with a codec (create_hook(codec=...)), "
            f"so a payload is the codec's text or bytes, not a {held}: send the encoded text, e.g. "
            f"resume_hook(token, order.model_dump_json()), or from the shell `awsworld resume TOKEN '<the text>'`, "
            f"which sends its PAYLOAD as the text for such a hook. Nothing was recorded",
            field="payload", run_id=hook.run_id, hook_id=hook.hook_id)


async def _wake_holder(world: World, elsewhere: HookResumedElsewhereError, resume_id: str, wake: bool) -> None:
    """Wake the run whose hook recorded a ``resumeOnce`` id (as a repeat on the same hook does: the wake of the
    attempt that recorded it may have been lost), unless it has ended or is gone."""
    if not wake:
        return
    try:
        run = await world.runs.get(elsewhere.run_id, resolve_data="none")
    except RunNotFoundError:
        return
    if run.status not in TERMINAL_RUN_STATUSES:
        await wake_run(world, run.run_id, run.workflow_name, f"hook:{elsewhere.hook_id}:{_digest(resume_id)[:32]}")


async def _repeat_on_disposed(world: World, missing: HookNotFoundError, encoded: Any, resume_id: str,
                              once: bool = False) -> HookResumed:
    """A keyed resume of a token whose hook is gone, disposed or released by its run's end (``world/rules/hooks.py``):
    a repeat of a resume that hook took is answered as the first was (the write is refused as a repeat, with the
    first event, before anything says the hook is gone); any other is the lookup's ``HookNotFoundError`` (a
    ``HookClosedError`` after the run's end). Nothing new is recorded or woken. ``once``: as ``resume_hook``'s
    (the refusal of an id another hook recorded is raised as it is)."""
    assert missing.disposed_hook is not None
    run_id, hook_id = missing.disposed_hook
    data: dict[str, Any] = {"payload": encoded, "resumeId": resume_id, **({"resumeOnce": True} if once else {})}
    try:
        await world.events.create(run_id, {"eventType": "hook_received", "correlationId": hook_id,
                                           "eventData": data}, resolve_data="none")
    except HookResumedElsewhereError as elsewhere:
        await _wake_holder(world, elsewhere, resume_id, True)
        raise
    except HookAlreadyReceivedError as repeat:
        if isinstance(repeat.event, Event):
            return HookResumed(repeat.event, False)
        raise missing from None
    except (HookNotFoundError, RunGoneError):
        raise missing from None
    raise missing  # the hook is gone, so the World refuses a new resume id


def _resume_id(key: str) -> str:
    """The resume id stored for an idempotency key: the key itself, or its digest when it is too long."""
    return key if len(key) <= MAX_RESUME_ID_LENGTH else "sha256:" + _digest(key)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
