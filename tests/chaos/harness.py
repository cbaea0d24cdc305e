"""Crash injection through the real Lambda handlers: one failure at the k-th AWS call of a run, then Lambda goes on.

A trial starts the reference workflow (``chaos.reference``) on its own freshly provisioned table, bucket and
queue, and drives it exactly as a deployment would: an event source mapping stand-in receives batches from
the emulator's queue and invokes ``awsworld.lambda_host.flow.handle`` (wrapped as the deployed entry point is) in
a thread with a Lambda context; a webhook sender POSTs to ``awsworld.lambda_host.webhook.handle``; a client
resumes the plain hook. Each handler invocation runs in an execution environment (a ``Container``) that is
reused while warm and thrown away when its process dies; the next invocation cold-starts a new one.

Every AWS call the handlers' containers make is counted, in order, across the whole trial (the client's and
the harness's own calls are not: they stand for the outside world). A trial injects one fault at call k:

- ``raise``: that call fails with a transient server error (it never lands), once;
- ``die-before``: the process dies instead of making the call;
- ``die-after``: the call lands, then the process dies before reading the answer.

A dead process sends nothing: from then on every call of that container raises ``ProcessDied`` too, so
cleanup code in ``finally`` or ``except BaseException`` cannot reach AWS, as it could not after a real crash
or a Lambda timeout. Its records are neither deleted nor reported as failed; they come back after the
visibility timeout, which the stand-in passes to ``ReceiveMessage`` exactly as the queue would apply it.

Then deliveries continue until the run ends (or a bound passes), the queue drains, and the trial checks what
a user and an operator would: the exact output, one ``step_completed`` per step, no duplicated event, an
empty queue, no dedup marker still live (it would swallow the next send of its key), and no S3 object under
the run's prefix that no item references (it would never be read, only paid for).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import os
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Literal, cast

from botocore.exceptions import ClientError

from awsworld._deployments.pins import PIN_ATTRIBUTE, DeploymentUnavailableError
from awsworld.aws import AWSWorld
from awsworld.aws.config import AWSConfig
from awsworld.client.client import Client, Run
from awsworld.lambda_host import flow, webhook
from awsworld.lambda_host import observability as obs
from awsworld.lambda_host.container import Container
from awsworld.lambda_host.versions import hand_over_event
from awsworld.local import LocalAWS
from awsworld.world.entities import TERMINAL_RUN_STATUSES
from awsworld.world.errors import WorldError
from awsworld.world.events import Event
from conformance.helpers import table_items
from deploy.lambda_env import EventSourceMapping, LambdaContext, lambda_record
from deploy.test_webhook_handler import url_event

from . import reference
from .loss import LOSS_MODES, RECOVERIES, Loss, LossMode, Recovery

Mode = Literal["raise", "die-before", "die-after", "lost", "redriven"]
MODES: tuple[Mode, ...] = ("raise", "die-before", "die-after")
"""The crash modes; ``lost`` and ``redriven`` (``loss.LOSS_MODES``) die after call k too, and lose the records
the dead invocation held (see ``loss``)."""
Outcome = Literal["completed", "stranded", "wrong output", "duplicated", "leaked", "harness error"]

# The process environment every handler reads (set once for the whole process: handlers read os.environ).
# The flow budget is long enough that a delivery never runs out of it in a trial, even with the emulator
# loaded by parallel trials: a run out of budget takes other paths (continuations), which would make the
# k-th call differ from one trial to the next. Running out of budget has a test of its own.
ENVIRONMENT = {
    "AWSWORLD_MODULES": reference.__name__,
    # Pinning on, as on Lambda: the flow function is published version 1, so each run is pinned to v1 by its first
    # flow, and every flow checks the pin in the log it loads (README "Runs stay on the code that started them").
    "AWS_LAMBDA_FUNCTION_VERSION": "1",
    "AWS_LAMBDA_FUNCTION_NAME": "awsworld-chaos-flow",
    "AWSWORLD_FLOW_BUDGET_MS": "5000",
    "AWSWORLD_FAILURE_BACKOFF_SECONDS": "1",
    "AWSWORLD_DEDUP_LEASE_SECONDS": "2",
}
VISIBILITY_TIMEOUT_SECONDS = 4
"""How long the records of a crashed invocation stay invisible. Lambda wants the queue's visibility to be at
least the function's timeout so that a record is not handed to a second invocation while the first still
runs; the stand-in invokes one batch at a time per trial, so that cannot happen here, and the visibility
only sets how soon a crash is retried: short, to keep trials fast."""
FUNCTION_TIMEOUT_MS = 8000
"""The flow function's timeout: an invocation still running a second after it is killed (see ``invoke``)."""
COMPLETION_SECONDS = 60.0
"""How long a run may take to complete after its start, crash included, before it counts as stranded."""
DRAIN_SECONDS = 20.0
"""How long after the run ends the queue may take to empty (late redeliveries, hops, crashed records)."""
WEBHOOK_RETRY_SECONDS = 0.5
BATCH_SIZE = 10

# Codes an AWS service answers when it fails on its side; the SDK would retry them, so seeing one means its
# retries ran out (what a real transient outage looks like to the code).
_TRANSIENT = {"dynamodb": ("InternalServerError", 500), "sqs": ("ServiceUnavailable", 503),
              "s3": ("ServiceUnavailable", 503)}

# Events that happen at most once per run, or once per correlation id (step, hook or wait).
_ONCE_PER_RUN = ("run_created", "run_started", "run_completed", "run_failed", "run_cancelled")
_ONCE_PER_ENTITY = ("step_created", "step_completed", "step_failed", "hook_created", "hook_disposed",
                    "wait_created", "wait_completed")


@contextlib.contextmanager
def chaos_environment(**overrides: str) -> Iterator[None]:
    """``ENVIRONMENT`` (with ``overrides``) in ``os.environ`` for the block, the previous values restored
    after."""
    values = {**ENVIRONMENT, **overrides}
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class ProcessDied(BaseException):
    """The execution environment's process is gone. A BaseException, so that no ``except Exception`` in the
    code under test can swallow it and carry on as a live process would."""


@dataclass(frozen=True)
class Fault:
    k: int
    mode: Mode
    recovery: Recovery | None = None  # a loss mode's: what brings the run back (``loss.RECOVERIES``)
    after_charge: bool = False
    """``k`` counts from the trial's own charge (``k`` calls after the last one made before the at-most-once step's
    body first ran in this trial, ``CallLog.charged_at``), not from the trial's start: a trial's calls before it can
    be more or fewer than the clean run's (tasks interleave differently under load), so a fault aimed by the clean
    run's count can miss the attempt it is meant to cut off."""

    def __str__(self) -> str:
        return f"k={'charge+' if self.after_charge else ''}{self.k} {self.mode}" + (
            f" {self.recovery}" if self.recovery else "")


@dataclass
class CallLog:
    """Every AWS call the trial's handler containers made, in order, and what the fault did."""

    fault: Fault | None = None
    calls: list[str] = field(default_factory=list)
    fired: bool = False
    silenced: int = 0
    """Calls a dead process tried to make (its cleanup code): refused, not counted."""
    stored_by_the_dead: set[str] = field(default_factory=set)
    """S3 keys written by containers that later died: an object one of them wrote before the commit that
    would have referenced it is orphaned by the death itself (no code runs to delete it)."""
    charged_at: list[int] = field(default_factory=list)
    """How many calls had been made each time the at-most-once step's body ran (``reference.charge``)."""

    @property
    def at(self) -> int | None:
        """The call the fault fires at (None: no fault, or one aimed after a charge that has not happened): a fault
        ``after_charge`` counts from the body's first run in this trial."""
        if self.fault is None:
            return None
        if not self.fault.after_charge:
            return self.fault.k
        return self.charged_at[0] + self.fault.k if self.charged_at else None

    @property
    def faulted_call(self) -> str | None:
        at = self.at
        if at is None or len(self.calls) < at:
            return None
        return self.calls[at - 1]


class Probe:
    """The botocore event handlers of one container: count calls, inject the fault, and keep a dead process
    silent. Registered on every client of the container's World (``AWSClients.register_handler``)."""

    def __init__(self, log: CallLog) -> None:
        self.log = log
        self.dead = False
        self.stored: set[str] = set()

    def attach(self, world: AWSWorld) -> AWSWorld:
        world.clients.register_handler("before-call", self.before_call)
        world.clients.register_handler("after-call", self.after_call)
        world.clients.register_handler("before-parameter-build.s3.PutObject", self.put_object)
        return world

    def put_object(self, params: dict[str, Any] | None = None, **_: Any) -> None:
        if params and isinstance(params.get("Key"), str):
            self.stored.add(params["Key"])

    def before_call(self, model: Any, context: dict[str, Any] | None = None, **_: Any) -> None:
        if self.dead:
            self.log.silenced += 1
            raise ProcessDied("the process is dead")
        self.log.calls.append(f"{model.service_model.service_name}.{model.name}")
        index = len(self.log.calls)
        if context is not None:
            context["chaos_index"] = index
        fault = self.log.fault
        if fault is None or index != self.log.at:
            return
        if fault.mode == "raise":
            self.log.fired = True
            service = model.service_model.service_name
            code, status = _TRANSIENT.get(service, ("InternalError", 500))
            raise ClientError({"Error": {"Code": code, "Message": "injected transient failure"},
                               "ResponseMetadata": {"HTTPStatusCode": status}}, model.name)
        if fault.mode == "die-before":
            self._die()

    def after_call(self, model: Any, context: dict[str, Any] | None = None, **_: Any) -> None:
        if self.dead:  # a call that was in flight when another task of this process died: nobody reads it
            raise ProcessDied("the process is dead")
        fault = self.log.fault
        if fault is not None and fault.mode in ("die-after", *LOSS_MODES) \
                and (context or {}).get("chaos_index") == self.log.at:
            self._die()

    def _die(self) -> None:
        self.log.fired = True
        self.dead = True
        self.log.stored_by_the_dead.update(self.stored)
        raise ProcessDied(f"the process died at call {self.log.fault}")


@dataclass
class Environment:
    """One Lambda execution environment: a container and the probe on its clients."""

    container: Container
    probe: Probe
    invocations: int = 0


class Functions:
    """The trial's Lambda functions' execution environments (flow and webhook): warm ones are reused, dead
    ones are buried and replaced by a cold start, as Lambda does."""

    def __init__(self, config: AWSConfig, log: CallLog, executor: ThreadPoolExecutor) -> None:
        self.config = config
        self.log = log
        self.executor = executor
        self.warm: dict[str, list[Environment]] = {"flow": [], OLD_VERSION: [], "webhook": []}
        self.cold_starts = 0
        self.crashes = 0
        self.errors: list[str] = []
        """Exceptions a handler let escape (Lambda reports a function error; the batch is retried whole)."""
        self._pending: list[Future[Any]] = []
        self.loop = asyncio.get_running_loop()
        self.handed: list[Future[Any]] = []
        """Hand-overs to the old version (``OLD_VERSION``), invoked and not yet waited for (``settle``)."""

    def acquire(self, function: str) -> Environment:
        pool = self.warm[function]
        if pool:
            return pool.pop()
        self.cold_starts += 1
        probe = Probe(self.log)
        version = OLD_DEPLOYMENT[1:] if function == OLD_VERSION else None  # "flow": ENVIRONMENT's version
        return Environment(Container(world_factory=lambda: probe.attach(AWSWorld(self.config)),
                                     host_factory=lambda world: Invoking(self, probe), version=version), probe)

    async def settle(self) -> None:
        """Wait for the hand-overs invoked so far (their invocations end, or die)."""
        while self.handed:
            await asyncio.wrap_future(self.handed.pop(0))

    def release(self, function: str, environment: Environment) -> None:
        self.warm[function].append(environment)

    async def invoke(self, function: str, entry: Callable[..., Any], event: dict[str, Any],
                     timeout_ms: int) -> Any:
        """Run ``entry(event, context, container)`` in a thread as Lambda runs a handler; None when the process
        died (the injected fault, or the function timing out, which Lambda enforces by killing it)."""
        environment = self.acquire(function)
        environment.invocations += 1
        context = LambdaContext(timeout_ms, f"awsworld-chaos-{function}")
        loop = asyncio.get_running_loop()
        call = functools.partial(entry, event, context, environment.container)
        future = loop.run_in_executor(self.executor, call)
        future.add_done_callback(_retrieve)
        response: Any = None
        try:
            response = await asyncio.wait_for(asyncio.shield(future), timeout_ms / 1000 + 1.0)
        except ProcessDied:
            pass
        except TimeoutError:
            environment.probe.dead = True  # Lambda kills it: whatever it still tries is never sent
        except Exception as error:  # a function error: nothing is deleted, the records come back
            self.errors.append(f"the {function} handler raised {type(error).__name__}: {error}")
            self.release(function, environment)
            return None
        if environment.probe.dead:
            self.crashes += 1
            if future.done():
                self._pending.append(self.executor.submit(_bury, environment.container))
            else:
                future.add_done_callback(lambda _: self._pending.append(
                    self.executor.submit(_bury, environment.container)))
            return None
        self.release(function, environment)
        return response

    async def close(self) -> None:
        """Shut down the warm environments (no AWS call: closing clients only closes connections)."""
        with contextlib.suppress(BaseException):
            await self.settle()
        environments = [e for pool in self.warm.values() for e in pool]
        self.warm = {"flow": [], "webhook": []}
        loop = asyncio.get_running_loop()
        for environment in environments:
            environment.probe.dead = True
            await loop.run_in_executor(self.executor, _bury, environment.container)
        for pending in self._pending:
            with contextlib.suppress(BaseException):
                await asyncio.wrap_future(pending)


OLD_VERSION = "flow-v0"
"""The flow function's older published version (``Functions``' name for its environments): a run pinned to it is
delivered to the live version first, which hands each of its records over (``Invoking``)."""
OLD_DEPLOYMENT = "v0"


class Invoking:
    """Lambda's asynchronous ``Invoke`` of the old version, as the live version's host (``_deployments.host``): one AWS
    call of the live environment, counted and faultable like every other (``raise``: the invoke failed, so the record
    is backed off; ``die-before``: the live process died before invoking; ``die-after``: the invoke was accepted,
    then the live process died), and an invocation of the old version's handler for the hand-over event, run as
    any invocation of the trial (it can die too; its record then comes back after the visibility timeout)."""

    def __init__(self, functions: Functions, probe: Probe) -> None:
        self.functions = functions
        self.probe = probe

    async def hand_over(self, deployment: str, record: Any, reroutes: int) -> None:
        if deployment != OLD_DEPLOYMENT:
            raise DeploymentUnavailableError(deployment, "no such version in the trial")
        model = SimpleNamespace(name="Invoke", service_model=SimpleNamespace(service_name="lambda"))
        context: dict[str, Any] = {}
        self.probe.before_call(model, context)
        event = json.loads(json.dumps(hand_over_event(record, reroutes, deployment)))
        functions = self.functions
        self.functions.handed.append(asyncio.run_coroutine_threadsafe(
            functions.invoke(OLD_VERSION, _hand_over_entry, event, FUNCTION_TIMEOUT_MS), functions.loop))
        self.probe.after_call(model, context)


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a handler's exception as seen: a timed-out invocation's is never awaited, and ProcessDied is the
    expected end of a faulted one, not something for asyncio to log."""
    if not future.cancelled():
        future.exception()


def _bury(container: Container) -> None:
    """Free a dead container's loop and connections. Its probe refuses every AWS call, so the tasks it still
    had (cancelled here) and its ``finally`` blocks run without reaching AWS, as after a real crash."""
    loop = container.loop
    if loop.is_closed():
        return
    with contextlib.suppress(BaseException):
        tasks = asyncio.all_tasks(loop)
        for task in tasks:
            task.cancel()
        if tasks:
            loop.run_until_complete(asyncio.wait(tasks, timeout=2))
    with contextlib.suppress(BaseException):
        container.reset()
    with contextlib.suppress(BaseException):
        loop.close()


_flow_entry = obs.instrument(flow.handle)
_webhook_entry = obs.instrument(webhook.handle)
_hand_over_entry = obs.instrument(flow.handle_hand_over)


class CrashingEventSource(EventSourceMapping):
    """The SQS event source mapping of the flow function, honouring visibility as Lambda's does: records
    reported in ``batchItemFailures`` stay in the queue (the handler set their visibility), the others are
    deleted, and the records of an invocation whose process died are left alone: they reappear on their own
    when the visibility timeout the receive set runs out."""

    def __init__(self, world: AWSWorld, functions: Functions) -> None:
        super().__init__(world, flow.handle, batch_size=BATCH_SIZE, timeout_ms=FUNCTION_TIMEOUT_MS,
                         visibility_timeout=VISIBILITY_TIMEOUT_SECONDS)
        self.functions = functions
        self.crashed = 0
        self.failed_records = 0
        self._arn: str | None = None
        self.loss: Loss | None = None
        self.batches: list[tuple[bool, list[tuple[str, str]]]] = []
        """(crashed, [(message id, body)]) of every invocation, in order: where a stranded run stands."""

    async def poll_once(self, wait_seconds: int = 1) -> bool:
        """Receive one batch and invoke the function with it; False when the queue had nothing."""
        messages = await self.receive(wait_seconds)
        if not messages:
            return False
        if self._arn is None:
            self._arn = await self.queue_arn()
        event = {"Records": [lambda_record(m, self._arn) for m in messages]}
        json.dumps(event)
        fired = self.functions.log.fired
        response = await self.functions.invoke("flow", _flow_entry, event, self.timeout_ms)
        await self.functions.settle()  # one invocation at a time: the order of calls, and so call k, stays put
        self.batches.append((response is None, [(m["MessageId"], m["Body"]) for m in messages]))
        if response is None:
            self.crashed += 1
            if self.loss is not None and not fired and self.functions.log.fired:
                await self.loss.lose(self.world, messages)  # the loss fault fired in this invocation
            return True
        failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
        self.failed_records += len(failed)
        sqs = await self.world.clients.sqs()
        for message in messages:
            if message["MessageId"] not in failed:
                with contextlib.suppress(ClientError):
                    await sqs.delete_message(QueueUrl=self.world.config.queue_url,
                                             ReceiptHandle=message["ReceiptHandle"])
        return True


@dataclass
class WebhookSender:
    """An HTTP sender that retries a request until it gets a final answer, with one idempotency key for all
    of its attempts (what a well-behaved webhook provider does)."""

    functions: Functions
    key: str = field(default_factory=lambda: uuid.uuid4().hex)
    attempts: int = 0
    answers: list[int | None] = field(default_factory=list)
    done: bool = False
    _last: float = 0.0

    async def attempt(self, token: str) -> None:
        if self.done or time.monotonic() - self._last < WEBHOOK_RETRY_SECONDS:
            return
        self._last = time.monotonic()
        self.attempts += 1
        event = url_event("POST", f"/webhooks/{token}", reference.WEBHOOK_BODY,
                          headers={"idempotency-key": self.key})
        response = await self.functions.invoke("webhook", _webhook_entry, event, 10_000)
        status = None if response is None else int(response["statusCode"])
        self.answers.append(status)
        # No answer (the function died or timed out), a 5xx or a 429: try again. Anything else is final, as
        # for any HTTP client: a 2xx delivered it, a 4xx says it is gone or refused (an earlier attempt may
        # have got through: then the run goes on; if none did, the run is left waiting and the trial says so).
        self.done = status is not None and status < 500 and status != 429


@dataclass
class TrialResult:
    fault: Fault | None
    call: str | None
    """The AWS call at k in this trial (service.Operation), or None when the run made fewer calls."""
    outcome: Outcome
    seconds: float
    problems: list[str]
    calls: list[str]
    """Every AWS call of the handlers, in order (service.Operation)."""
    invocations: int
    crashes: int
    run_id: str
    extra_bodies: int = 0
    """Step bodies run beyond one per attempt of a clean run: at-least-once after a crash or a lost message."""
    lost: int = 0
    """Records a loss mode took from the queue."""
    wakes: int = 0
    """Wakes the operator sent (``operator`` recovery), or ticks sent (``watchdog``)."""
    charged_at: list[int] = field(default_factory=list)
    """``CallLog.charged_at``: the calls made before each run of the at-most-once step's body."""
    interrupted: int = 0
    """Attempts of the at-most-once step the log records as cut off (``StepInterruptedError``)."""

    @property
    def ok(self) -> bool:
        return self.outcome == "completed"


class Trial:
    """One run of the reference workflow on its own World, with at most one fault."""

    def __init__(self, local: LocalAWS, executor: ThreadPoolExecutor, fault: Fault | None = None, *,
                 encrypted: bool = False, handed: bool = False) -> None:
        """``handed``: the run is pinned to the old version (``OLD_DEPLOYMENT``), so each of its deliveries is
        handed over by the live version (``Invoking``)."""
        self.local = local
        self.executor = executor
        self.encrypted = encrypted
        self.handed = handed
        self.log = CallLog(fault)
        self.label = uuid.uuid4().hex[:12]

    async def run(self) -> TrialResult:
        config = await self.local.new_config(encrypt_payloads=self.encrypted)
        world = AWSWorld(config)
        functions = Functions(config, self.log, self.executor)
        log = self.log
        reference.on_charge(self.label, lambda: log.charged_at.append(len(log.calls)))
        try:
            return await self._run(world, functions)
        finally:
            reference.on_charge(self.label, None)
            await functions.close()
            await world.close()
            await self.local.drop(config)

    async def _run(self, world: AWSWorld, functions: Functions) -> TrialResult:
        client = Client(world)
        source = CrashingEventSource(world, functions)
        fault = self.log.fault
        if fault is not None and fault.mode in LOSS_MODES:
            source.loss = Loss(cast(LossMode, fault.mode), fault.recovery or "watchdog")
        sender = WebhookSender(functions)
        started = time.monotonic()
        pin = OLD_DEPLOYMENT if self.handed else None
        run = await client.options(deployment=pin).start(reference.reference, self.label)
        problems: list[str] = []
        status = await self._drive(world, client, run, source, sender, started + COMPLETION_SECONDS)
        seconds = time.monotonic() - started
        outcome: Outcome = "completed"
        if status not in TERMINAL_RUN_STATUSES:
            outcome = "stranded"
            problems.append(f"run is {status} after {COMPLETION_SECONDS:.0f} s: "
                            f"{await self._where_stuck(world, run, sender)}")
        elif status != "completed":
            outcome = "wrong output"
            try:
                await run.result(timeout=1)
            except Exception as error:  # the run's stored error, as the client sees it
                problems.append(f"run {status}: {error}")
        else:
            drained = await self._drain(world, source, time.monotonic() + DRAIN_SECONDS)
            output = await run.result(timeout=1)
            if output != reference.expected_output(self.label):
                outcome = "wrong output"
                problems.append(f"output {output!r}")
            duplicates = duplicated_events(await run.events(), pinned_at_creation=self.handed)
            if duplicates:
                problems.extend(duplicates)
                outcome = "duplicated" if outcome == "completed" else outcome
            leaks = ([] if drained else [f"queue not drained {DRAIN_SECONDS:.0f} s after the run ended: "
                                         f"{await queue_counts(world)}"])
            markers = await live_dedup_markers(world)
            # A lost keyed message leaves its marker until it expires: it holds back only its own key, which the
            # runtime never sends again for the run (a lost step is re-queued under a fresh key; a lost wake-up's
            # wait is completed by the flow itself). Reported, not counted as a leak; any other live one is one.
            lost = set(source.loss.lost_ids) if source.loss else set()
            problems.extend(f"held by a lost message: {text}" for message, text in markers if message in lost)
            leaks += [text for message, text in markers if message not in lost]
            orphans = await orphan_objects(world, run.run_id)
            # A process that dies between writing a value to S3 and the commit that references it leaves the
            # object behind: nothing can delete it, and it expires with the run's retention (the bucket's
            # lifecycle rule). Reported, not counted as a leak; any other unreferenced object is one.
            by_death = [key for key in orphans if key in self.log.stored_by_the_dead]
            problems.extend(f"orphaned by the process death: S3 object {key.removeprefix(f'runs/{run.run_id}/')}"
                            for key in by_death)
            leaks += [f"unreferenced S3 object {key.removeprefix(f'runs/{run.run_id}/')}"
                      for key in orphans if key not in self.log.stored_by_the_dead]
            leaks += await stream_problems(world, run.run_id, self.label)
            if leaks:
                problems.extend(leaks)
                outcome = "leaked" if outcome == "completed" else outcome
        events = await run.events()
        extra, overrun = body_counts(events, run.run_id)
        interrupted = sum(1 for e in events if e.event_type in ("step_retrying", "step_failed")
                          and ((e.event_data or {}).get("error") or {}).get("name") == "StepInterruptedError")
        if overrun:
            problems.extend(overrun)
            outcome = "duplicated" if outcome == "completed" else outcome
        problems.extend(functions.errors)
        if self.log.fault is not None and not self.log.fired:
            problems.append(f"the fault never fired: the run made {len(self.log.calls)} calls")
        loss = source.loss
        return TrialResult(self.log.fault, self.log.faulted_call, outcome, seconds, problems, list(self.log.calls),
                           functions.cold_starts, functions.crashes, run.run_id, extra,
                           loss.lost if loss else 0, (loss.wakes + loss.ticks) if loss else 0,
                           list(self.log.charged_at), interrupted)

    async def _drive(self, world: AWSWorld, client: Client, run: Run, source: CrashingEventSource,
                     sender: WebhookSender, deadline: float) -> str:
        """Deliver, send the webhook request, resume the plain hook: one at a time, so that the order of the
        handlers' AWS calls (and so what call k is) is the same from one trial to the next."""
        resumed = False
        while True:
            status = await run.status()
            if status in TERMINAL_RUN_STATUSES or time.monotonic() > deadline:
                return status
            if source.loss is not None and self.log.fired:
                queued = sum((await queue_counts(world)).values()) if source.loss.recovery == "operator" else 0
                await source.loss.recover(world, client, run, queued)
            await source.poll_once(wait_seconds=1)
            if sender.done and resumed:
                continue
            hooks = (await world.hooks.list(run.run_id, resolve_data="none")).data
            hook = next((h for h in hooks if h.is_webhook), None)
            if hook is not None and not sender.done:
                await sender.attempt(hook.token)
            token = reference.plain_token(self.label)
            if not resumed and any(h.token == token for h in hooks):
                await client.resume_hook(token, reference.approval_payload(self.label))
                resumed = True

    async def _drain(self, world: AWSWorld, source: CrashingEventSource, deadline: float) -> bool:
        """Keep delivering after the run ended until the queue is empty (True) or the deadline passes."""
        while time.monotonic() < deadline:
            if not await source.poll_once(wait_seconds=1) and sum((await queue_counts(world)).values()) == 0:
                return True
        return False

    async def _where_stuck(self, world: AWSWorld, run: Run, sender: WebhookSender) -> str:
        """What a stranded run waits on: its unfinished steps, waits and hooks, and the queue."""
        events = await run.events()
        types = Counter(e.event_type for e in events)
        finished = {e.correlation_id for e in events if e.event_type in ("step_completed", "step_failed")}
        open_steps = sorted({f"{e.correlation_id}" for e in events
                             if e.event_type == "step_created" and e.correlation_id not in finished})
        step_names = {s.step_id: f"{s.step_name}[{s.status}, attempt {s.attempt}]" for s in await run.steps()}
        waits = [e.correlation_id for e in events if e.event_type == "wait_created"]
        done_waits = {e.correlation_id for e in events if e.event_type == "wait_completed"}
        last = events[-1].event_type if events else "none"
        parts = [f"last event {last}", f"{sum(types.values())} events"]
        if open_steps:
            parts.append("open steps " + ", ".join(step_names.get(s, s) for s in open_steps))
        if set(waits) - done_waits:
            parts.append(f"{len(set(waits) - done_waits)} open wait(s)")
        if types["hook_created"] > types["hook_disposed"]:
            parts.append(f"{types['hook_created'] - types['hook_disposed']} live hook(s), "
                         f"{types['hook_received']} received, webhook answers {sender.answers}")
        parts.append(f"queue {await queue_counts(world)}")
        return "; ".join(parts)


def body_counts(events: Sequence[Event], run_id: str) -> tuple[int, list[str]]:
    """(extra, overruns): step bodies run beyond a clean run's count, and every step whose body ran more often
    than it was started (a body runs only after its step_started lands: more would mean two deliveries ran one
    attempt)."""
    started = Counter(e.correlation_id for e in events if e.event_type == "step_started")
    ran = reference.body_runs(run_id)
    overruns = [f"step {step} ran its body {n} times in {started[step]} attempts" for step, n in sorted(ran.items())
                if n > started[step]]
    # The at-most-once step: never twice in one attempt, and never in an attempt the log does not hold.
    attempts = {(e.correlation_id, (e.event_data or {}).get("attempt")) for e in events
                if e.event_type == "step_started"}
    overruns += [f"at-most-once step {step} ran attempt {attempt}'s body {n} times"
                 for (step, attempt), n in sorted(reference.charges(run_id).items())
                 if n > 1 or (step, attempt) not in attempts]
    # ... and never started over an unfinished attempt: each start follows the previous attempt's end.
    charge_ids = {e.correlation_id for e in events if e.event_type == "step_created"
                  and (e.event_data or {}).get("stepName") == "chaos.charge"}
    for step_id in sorted(i for i in charge_ids if i):
        kinds = [e.event_type for e in events if e.correlation_id == step_id and e.event_type != "step_created"]
        starts = sum(1 for a, b in itertools.pairwise(kinds) if a == b == "step_started")
        if starts:
            overruns.append(f"at-most-once step {step_id} was started {starts} time(s) over an unfinished attempt")
    return sum(ran.values()) - reference.CLEAN_BODY_RUNS, overruns


def duplicated_events(events: Sequence[Event], *, pinned_at_creation: bool = False) -> list[str]:
    """What the log records more often than it may: run transitions more than once, a step/hook/wait
    transition more than once per entity, or more than one payload per hook (each hook is sent one); and a run
    pinned other than once (by its first flow, to ENVIRONMENT's version; or at creation, to the old version)."""
    problems = []
    types = Counter(e.event_type for e in events)
    for kind in _ONCE_PER_RUN:
        if types[kind] > 1:
            problems.append(f"{types[kind]} {kind} events")
    per_entity = Counter((e.event_type, e.correlation_id) for e in events
                         if e.event_type in (*_ONCE_PER_ENTITY, "hook_received"))
    for (kind, correlation), count in sorted(per_entity.items(), key=lambda item: str(item[0])):
        if count > 1:
            problems.append(f"{count} {kind} events for {correlation}")
    completed = {e.correlation_id for e in events if e.event_type == "step_completed"}
    if len(completed) != reference.STEP_COUNT:
        problems.append(f"{len(completed)} steps completed, not {reference.STEP_COUNT}")
    pins = [change.get("value") for e in events if e.event_type == "attr_set"
            for change in (e.event_data or {}).get("changes") or () if change.get("key") == PIN_ATTRIBUTE]
    created = (events[0].event_data or {}).get("attributes") or {} if events else {}
    wanted = ([], OLD_DEPLOYMENT) if pinned_at_creation else (["v1"], None)
    if (pins, created.get(PIN_ATTRIBUTE)) != wanted:  # pinned once: by its first flow, or at its creation
        problems.append(f"the run's pin was written as {pins} (at creation: {created.get(PIN_ATTRIBUTE)}), "
                        f"not as {wanted}")
    return problems


async def queue_counts(world: AWSWorld) -> dict[str, int]:
    sqs = await world.clients.sqs()
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
             "ApproximateNumberOfMessagesDelayed"]
    response = await sqs.get_queue_attributes(QueueUrl=world.config.queue_url, AttributeNames=names)
    attributes = response.get("Attributes", {})
    short = {"ApproximateNumberOfMessages": "visible", "ApproximateNumberOfMessagesNotVisible": "in flight",
             "ApproximateNumberOfMessagesDelayed": "delayed"}
    return {short[name]: int(attributes.get(name, 0)) for name in names}


async def live_dedup_markers(world: AWSWorld) -> list[tuple[str, str]]:
    """Dedup markers still live once the run ended and the queue is empty, as (message id, description). Each
    one names a message that no longer exists, yet makes the next send with its key return that id and send
    nothing: a blocker."""
    now = time.time()
    found = []
    for item in await table_items(world):
        pk = item["pk"]["S"]
        if not pk.startswith("DEDUP#"):
            continue
        live_until = float(item.get("liveUntil", {}).get("N", "0"))
        if live_until > now:
            message = item.get("messageId", {}).get("S")
            found.append((str(message), f"live dedup marker {pk.removeprefix('DEDUP#')} (message {message}, "
                                        f"live for {live_until - now:.0f} s more)"))
    return found


def _strings(value: Any) -> Iterable[str]:
    """Every string inside a DynamoDB-JSON value (S3 keys sit in nested maps: ``{"r": key}``, segment keys)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for inner in value.values():
            yield from _strings(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _strings(inner)


async def orphan_objects(world: AWSWorld, run_id: str) -> list[str]:
    """The keys of S3 objects under the run's prefix that no item references. Queue payload objects
    (``queue/``) are left out: they are referenced by messages, not items, kept on purpose for duplicate
    deliveries, and expired by the bucket's lifecycle rule."""
    s3 = await world.clients.s3()
    prefix = f"runs/{run_id}/"
    keys: list[str] = []
    kwargs: dict[str, Any] = {"Bucket": world.config.bucket_name, "Prefix": prefix}
    while True:
        page = await s3.list_objects_v2(**kwargs)
        keys.extend(o["Key"] for o in page.get("Contents", []))
        if not page.get("IsTruncated"):
            break
        kwargs["ContinuationToken"] = page["NextContinuationToken"]
    referenced = {s for item in await table_items(world) for s in _strings(item) if s.startswith(prefix)}
    return [key for key in keys if key not in referenced and not key.startswith(f"{prefix}queue/")]


async def stream_problems(world: AWSWorld, run_id: str, label: str) -> list[str]:
    """The stream is closed and holds ``report``'s group of chunks, once or (a re-run step) several times."""
    chunks: list[bytes] = []
    cursor = None
    done = False
    while True:
        try:
            page = await world.streams.get_chunks(run_id, reference.STREAM, cursor=cursor)
        except WorldError as error:
            return [f"stream unreadable: {error}"]
        chunks.extend(c.data for c in page.data)
        cursor, done = page.cursor, page.done
        if not page.has_more:
            break
    group = [c.encode() if isinstance(c, str) else c for c in reference.stream_group(label)]
    problems = [] if done else ["stream not closed"]
    if not chunks or len(chunks) % len(group) or chunks != group * (len(chunks) // len(group)):
        problems.append(f"stream holds {chunks!r}")
    return problems


# -- sweeps ----------------------------------------------------------------------------------------------------


def new_executor(parallel: int) -> ThreadPoolExecutor:
    """Threads for handler invocations: each trial runs one at a time, plus dead ones being buried."""
    return ThreadPoolExecutor(max_workers=4 * parallel + 8, thread_name_prefix="chaos-lambda")


async def run_trials(local: LocalAWS, faults: Sequence[Fault | None], *, parallel: int,
                     executor: ThreadPoolExecutor,
                     on_result: Callable[[TrialResult], Awaitable[None] | None] | None = None,
                     encrypted: bool = False, handed: bool = False) -> list[TrialResult]:
    """Run trials, ``parallel`` at a time, each on its own World (with per-run payload encryption when
    ``encrypted``; with the run on the old version, every delivery handed over, when ``handed``); results in the
    order of ``faults``."""
    slots = asyncio.Semaphore(parallel)

    async def one(fault: Fault | None) -> TrialResult:
        async with slots:
            trial = Trial(local, executor, fault, encrypted=encrypted, handed=handed)
            try:
                result = await trial.run()
            except Exception as error:  # the harness's own calls failed: say so, and let the other trials go on
                result = TrialResult(fault, trial.log.faulted_call, "harness error", 0.0,
                                     [f"{type(error).__name__}: {error}"], list(trial.log.calls), 0, 0, "")
        if on_result is not None:
            maybe = on_result(result)
            if maybe is not None:
                await maybe
        return result

    try:
        return list(await asyncio.gather(*(one(f) for f in faults)))
    finally:
        obs.metrics.clear_metrics()  # nothing of the trials' counts is left for another test's flush


def faults_for(n: int, *, every: int = 1, modes: Sequence[Mode] = MODES) -> list[Fault]:
    """Faults at k = 1, 1 + every, ... up to n, each in every mode (a loss mode once per recovery)."""
    return [Fault(k, mode, recovery) for k in range(1, n + 1, every) for mode in modes
            for recovery in (RECOVERIES if mode in LOSS_MODES else (None,))]
