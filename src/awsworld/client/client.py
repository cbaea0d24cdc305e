"""``Client``: start runs, read them, resume hooks, cancel — from outside any workflow."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, Protocol, TypeVar, overload

from .._engine.parking import MISSING, parked_run
from .._http.push import refuse_wake, sdk_run
from .._timeline import as_told, read_events, read_steps
from .._worker.run_control import (
    MAX_CANCEL_REASON,
    POLL_FIRST,
    POLL_MAX,
    HookResumed,
    RunStarter,
    StartedRun,
    cancel_run,
    hook_payload,
    resume_hook,
    wake_run,
)
from ..authoring.definitions import REGISTRY, Registry, Workflow, workflow_name
from ..authoring.errors import (
    CORRUPTED_EVENT_LOG,
    FAILED_ON_REQUEST,
    UNKNOWN_WORKFLOW,
    HookFailedError,
    RunEndedError,
    RunNotEndedError,
    WorkflowRunCancelledError,
    WorkflowRunFailedError,
    original_error,
    stored_tracebacks,
)
from ..authoring.rebuilt_errors import rebuild
from ..durable import codecs, serde
from ..durable.child_calls import START_CHILD, child_run_id
from ..durable.codecs import Codec, Place
from ..durable.hook_payloads import HEARTBEAT_FIELD, failure_payload, heartbeat_payload
from ..world.entities import TERMINAL_RUN_STATUSES, ErrorBytes, HookRecord, Step, error_name_and_message
from ..world.entities import Run as RunView
from ..world.errors import HookNotFoundError, NotFoundError, RunGoneError, SdkRunError
from ..world.events import Event
from ..world.messages import OPERATOR_WAKE, FlowMessage, queue_name_for
from ..world.pages import RunPage, collect_pages
from ..world.protocol import World
from ..world.rules.limiters import check_priority
from ..world.rules.streams import missing_stream
from .limits import LimitsClient
from .skips import SkippedWait, skip
from .waits import waits_text

if TYPE_CHECKING:
    from ..schedules.client import ScheduleClient

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)



class Run(Generic[R_co]):
    """A handle on one run; ``R_co`` is the workflow's return type (``Any`` for a run named by id or by a
    workflow's name)."""

    def __init__(self, client: Client, run_id: str, workflow: str | None = None, *,
                 codec: Codec[Any] | None = None) -> None:
        self.client = client
        self.run_id = run_id
        self.workflow_name = workflow
        self.codec = codec  # the workflow's result codec (else looked up by the run's workflow name)

    def __repr__(self) -> str:
        return f"Run({self.run_id!r})"

    async def get(self) -> RunView:
        """The run's record, with its input and output (``awsworld.world.Run``: status, times, error, ...)."""
        return await self.client.world.runs.get(self.run_id)

    async def status(self) -> str:
        """``pending``, ``running``, ``completed``, ``failed`` or ``cancelled`` (one read, without values)."""
        return (await self.client.world.runs.get(self.run_id, resolve_data="none")).status

    async def result(self, timeout: float | None = 60.0) -> R_co:
        """The workflow's return value; raises its error if it failed, ``TimeoutError`` after ``timeout`` seconds,
        whose message says what the run waits on (``awsworld describe``'s words: a hook, a sleep, a step, a limit)."""
        with self.client.waiting(self.run_id):
            return await self._result(timeout)

    async def _result(self, timeout: float | None) -> R_co:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = 30.0 if deadline is None else deadline - time.monotonic()
            wait = max(0.0, min(30.0, remaining))
            run = await self.client.world.runs.wait_for_terminal_status(self.run_id, timeout=wait)
            if run.status == "completed":
                codec = self.codec or _result_codec(self.client, run.workflow_name)
                place = Place("result", f"workflow {run.workflow_name!r}", self.run_id)
                try:
                    return codecs.load(run.output, codec, place)
                except serde.SerializationError as error:  # a class it names is not importable in this process
                    raise serde.SerializationError(error.path, (
                        f"{error.reason}; reading {place} of run {self.run_id}: this process needs the classes "
                        f"the value names importable, as the workflow's own code has them (import its module), or "
                        f"reads the stored JSON without them: (await run.get()).output, `awsworld result "
                        f"{self.run_id}`")) from error
            if run.status == "failed":
                raise failed_run_error(run)
            if run.status == "cancelled":
                raise WorkflowRunCancelledError(self.run_id, await self._cancel_reason())
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"run {self.run_id} is still {run.status} after {timeout} s"
                                   f"{await self._waiting_on(run)}")

    async def _waiting_on(self, view: RunView | None = None) -> str:
        """``; it waits on: hook approve:7 (no payload yet)``: what a wait that timed out adds to its message
        (``client.waits.waits_text``; ``view``: the run as the wait last read it), or nothing when reading it
        fails: the timeout is the error to raise, the wait's detail only helps read it."""
        try:
            return f"; it waits on: {await waits_text(self.client.world, self.run_id, view)}"
        except Exception:  # any read failure: the TimeoutError must still be raised, with what is known
            return ""

    async def _cancel_reason(self) -> str | None:
        """The reason ``Client.cancel`` recorded: the run record does not hold it, its run_cancelled event does
        (the log's last event; read without values, once per cancelled run's result)."""
        return cancel_reason(await collect_pages(lambda cursor: self.client.world.events.list(
            self.run_id, cursor=cursor, resolve_data="none")))

    async def cancel(self, *, reason: str | None = None) -> None:
        """Cancel this run: ``Client.cancel(run_id, reason=...)``, on the handle as Temporal's ``handle.cancel()``
        and the Workflow SDK's ``run.cancel()`` have it."""
        await self.client.cancel(self.run_id, reason=reason)

    async def wait_for_hook(self, token: str, *, timeout: float = 30.0) -> HookRecord:
        """Return the hook ``token`` once this run holds it (the workflow has reached ``create_hook(token)``), so
        a ``resume_hook`` that follows finds it. Raises ``RunEndedError`` if the run ends first, and
        ``TimeoutError`` after ``timeout`` seconds."""
        with self.client.waiting(self.run_id, hook_token=token):
            return await self._wait_for_hook(token, timeout)

    async def _wait_for_hook(self, token: str, timeout: float) -> HookRecord:
        deadline = time.monotonic() + timeout
        pause = POLL_FIRST
        while True:
            try:
                hook: HookRecord = await self.client.world.hooks.get_by_token(token, resolve_data="none")
                if hook.run_id == self.run_id:
                    return hook
            except HookNotFoundError:
                pass
            status = await self.status()
            if status in TERMINAL_RUN_STATUSES:
                raise RunEndedError(self.run_id, status, f"before it held hook {token!r}{await self._hooks_made()}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"run {self.run_id} did not hold hook {token!r} within {timeout} s"
                                   f"{await self._hooks_made(failing_quietly=True)}{await self._waiting_on()}")
            await asyncio.sleep(min(pause, remaining))
            pause = min(pause * 2, POLL_MAX)

    async def _hooks_made(self, *, failing_quietly: bool = False) -> str:
        """`` (the hooks it created: 'a', 'b')``, read from its log without values: a test waiting for a token the
        run never made (a typo, another key) sees the ones it did make, whether the run ended first or the wait
        timed out. ``failing_quietly``: a failed read adds nothing (a timeout's message: the TimeoutError is the
        error to raise)."""
        try:
            events = await collect_pages(lambda cursor: self.client.world.events.list(
                self.run_id, cursor=cursor, resolve_data="none"))
        except Exception:
            if not failing_quietly:
                raise
            return ""
        tokens = [str((e.event_data or {}).get("token")) for e in events
                  if e.event_type == "hook_created" and (e.event_data or {}).get("token")]
        return f" (the hooks it created: {', '.join(map(repr, tokens))})" if tokens else " (it created no hook)"

    async def events(self) -> list[Event]:
        """The run's whole event log, in order, with values: what ``awsworld events`` shows."""
        return await read_events(self.client.world, self.run_id)

    async def children(self) -> list[Run[Any]]:
        """The child runs this run has started (``await child_wf(...)``, ``start_child``), in call order: read
        from its own steps, so no listing of other runs is needed."""
        return [Run(self.client, child) for child in child_runs(self.run_id, await self.steps())]

    async def steps(self, *, decoded: bool = False) -> list[Step]:
        """The run's steps in call order (a World lists them by id, where ``step_10`` sorts before ``step_2``).

        Their ``input`` and ``output`` are as the log stores them (JSON, with awsworld's envelopes for a
        dataclass, a ``datetime``, a ``Decimal``...: ``{"$t": "dataclass", ...}``), which any process can read.
        ``decoded=True`` gives the values instead, as the workflow saw them (through the step's codecs where this
        process has its definition): ``output`` the value the step returned, ``input`` ``{"args": [...],
        "kwargs": {...}}`` of the arguments it was called with. That is what a test asserts on
        (docs/get-started/first-test.md); a class the log names must be importable here.

        A step still open when the run ended (cancelled, or failed while a poll waited for its next check) reads
        ``cancelled``: the end stopped it, as ``awsworld describe`` says (``_timeline.step_status``, one rule for
        both); the World's record keeps the status it had then."""
        world = self.client.world
        view, steps = await asyncio.gather(world.runs.get(self.run_id, resolve_data="none"),
                                           read_steps(world, self.run_id))
        steps = as_told(steps, view.status)
        return [self._decoded(step) for step in steps] if decoded else steps

    def _decoded(self, step: Step) -> Step:
        definition = (self.client.registry or REGISTRY).steps.get(step.step_name) or REGISTRY.steps.get(step.step_name)
        of = f"step {step.step_name!r}"  # the places the step's own run gave its codecs (step_runner, execution)
        update: dict[str, Any] = {}
        if step.input is not None:
            call = codecs.load_call(step.input, definition.args_codec if definition else None,
                                    Place("arguments", of, self.run_id, step.step_id),
                                    definition.fn if definition else None)
            update["input"] = {"args": list(call.args), "kwargs": dict(call.kwargs)}
        if step.output is not None:
            update["output"] = codecs.load(step.output, definition.codec if definition else None,
                                           Place("result", of, self.run_id, step.step_id))
        return step.model_copy(update=update)

    async def stream(self, name: str = "default", start_index: int = 0) -> AsyncIterator[bytes]:
        """The chunks of the run's stream ``name`` from ``start_index``, as written (one ``bytes`` each), live: it
        waits for new chunks until the stream closes or the run ends.

        Waiting for the next chunk is waiting for the run, as ``result`` is: in ``WorkflowTestEnv`` the clock skips
        to the run's next sleep or retry meanwhile (a step that writes, a ``sleep("1h")``, a step that writes again
        is read to its end at once, where it would wait an hour of wall time), and a run nothing can move raises
        ``RunStalledError``. Only the wait for a chunk skips, not the time the caller spends on one.

        A reader started before the stream's first chunk waits for it, so a name no step writes (a typo) waits
        until the run ends, then raises ``StreamNotFoundError`` naming the run's streams (``streams()`` lists them
        meanwhile). Checking costs one listing, and only for a read that got no chunk."""
        chunks = aiter(self.client.world.streams.get(self.run_id, name, start_index=start_index))
        read = False
        while True:
            with self.client.waiting(self.run_id):
                try:
                    chunk = await anext(chunks)
                except StopAsyncIteration:
                    break
            read = True
            yield chunk
        if not read and name not in (names := await self.streams()):  # ended (or closed): never written
            raise missing_stream(self.run_id, name, names)

    async def streams(self) -> list[str]:
        """The names of the run's streams, those its steps wrote (or closed) so far, as the World lists them
        (``awsworld streams RUN``): what to give ``stream()``."""
        return await self.client.world.streams.list(self.run_id)


def child_runs(run_id: str, steps: Sequence[Step]) -> list[str]:
    """The ids of the child runs ``run_id`` started, in call order, from its steps (``Run.children``, ``awsworld
    describe``): each completed start step names one."""
    return [child_run_id(run_id, s.step_id) for s in steps if s.step_name == START_CHILD and s.status == "completed"]


RUN_READS_AT_ONCE = 16
"""How many runs ``run_views`` reads at the same time (each a metadata-only ``runs.get``: a World has no batch
read of runs). Read one after another, ``awsworld describe`` of a run that started 100 children made 100 round
trips in a row (``bench/describe.py`` prints them); the bound keeps a fan-out of thousands from opening thousands
of requests at once."""


async def run_views(world: World, run_ids: Sequence[str]) -> dict[str, RunView | None]:
    """Each of ``run_ids``' runs without values, by id, ``RUN_READS_AT_ONCE`` reads at a time; None for one no
    longer stored (``NotFoundError``: its retention ended). Another error is raised: a refused or throttled read
    is not a status. What ``awsworld describe`` reads its children with and the run viewer its parent and
    children (``ui/api.py``'s ``linked_statuses``)."""
    gate = asyncio.Semaphore(RUN_READS_AT_ONCE)

    async def one(run_id: str) -> RunView | None:
        async with gate:
            try:
                return await world.runs.get(run_id, resolve_data="none")
            except NotFoundError:
                return None

    unique = list(dict.fromkeys(run_ids))
    return dict(zip(unique, await asyncio.gather(*(one(run_id) for run_id in unique)), strict=True))


def cancel_reason(events: Sequence[Event]) -> str | None:
    """The reason a cancelled run's log holds (its ``run_cancelled`` event, the last one), if any."""
    cancelled = next((e for e in reversed(events) if e.event_type == "run_cancelled"), None)
    data: dict[str, Any] = (cancelled.event_data or {}) if cancelled is not None else {}
    reason = data.get("cancelReason")
    return reason if isinstance(reason, str) else None


class Waiting(Protocol):
    """What ``Client(waiting=...)`` takes: a context for one wait on ``run_id`` (for its hook ``hook_token``
    when given, else for its end); ``run_id`` None: for whichever run comes to hold ``hook_token`` (a resume's
    ``wait``)."""

    def __call__(self, run_id: str | None, *, hook_token: str | None = None) -> AbstractContextManager[None]: ...


def failed_run_error(run: RunView) -> WorkflowRunFailedError:
    """What ``Run.result()`` raises for a failed run: a ``WorkflowRunFailedError`` carrying the stored error that is
    also an instance of the type the run failed with (the body's own exception, or for a step's or a child run's
    failure the run let through, the step's or the child's original one, a grandchild's innermost), where that type
    can be rebuilt (``authoring/rebuilt_errors.py``, as a workflow's
    ``StepError`` and ``ChildWorkflowError`` are): ``pytest.raises(Declined)`` holds around ``await run.result()``."""
    error = run.error
    name, message = error_name_and_message(error)
    details = error.model_dump(by_alias=True, exclude_none=True) if error else None
    original = original_error(details or {})
    error = rebuild(WorkflowRunFailedError, lambda kind: kind(run.run_id, message, code=run.error_code,
                                                              error_type=name, details=details,
                                                              workflow_name=run.workflow_name),
                    original.get("type"), original.get("name"))
    if isinstance(error, HookFailedError):  # its sender's code, as the class says (the run's is USER_ERROR always)
        sender_code = original.get("code")
        error.code = sender_code if isinstance(sender_code, str) else None
    error.__cause__ = stored_tracebacks(details or {}, run.workflow_name)  # where the run's code raised, shown
    return error


def check_delivery_loop(delivering_on: asyncio.AbstractEventLoop | None, owner: str) -> None:
    """Refuse a wait made on another event loop than the one ``owner``'s deliveries run on (as a task of that loop,
    which does not run while this one does): the wait could only time out, or wait for ever. A session-scoped test
    fixture with function-scoped tests, pytest-asyncio's default, is the usual way there; a user's async fixture on
    ``awsworld_env`` under ``asyncio_default_fixture_loop_scope = "session"`` (the fixture on the session's loop, the
    environment on the test's) is another. ``owner``: what the
    message names (``"this WorkflowTestEnv"``, ``"this LocalAWS"``)."""
    if delivering_on is not None and asyncio.get_running_loop() is not delivering_on:
        raise RuntimeError(
            f"{owner} was started on another event loop: its deliveries run on that one, which is not running now, "
            "so no run would move. Give it and the tests that use it one loop: with pytest-asyncio, a "
            "session-scoped fixture needs @pytest_asyncio.fixture(scope=\"session\", loop_scope=\"session\") and its "
            "tests @pytest.mark.asyncio(loop_scope=\"session\") (or asyncio_default_test_loop_scope = \"session\" in "
            "your pytest configuration); awsworld_env and awsworld_local start on the test's loop, so an async "
            "fixture of yours that waits on them needs that loop too: a loop scope equal to the tests' "
            "(asyncio_default_fixture_loop_scope as asyncio_default_test_loop_scope, or "
            "@pytest_asyncio.fixture(loop_scope=...))")


def _not_waiting(run_id: str | None, *, hook_token: str | None = None) -> AbstractContextManager[None]:
    return contextlib.nullcontext()


class Client:
    """Start runs, read them, resume and fail hooks, cancel and wake runs: from outside any workflow, on any World
    (``Client(AWSWorld())`` on a deployed stack; ``env.client`` in tests; ``local.client`` on the emulator)."""

    def __init__(self, world: World, *, registry: Registry | None = None,
                 waiting: Waiting | None = None, check_published: bool = True) -> None:
        """``registry``: the workflows this process has (the local emulator passes its worker's). With one, a
        workflow named by a string that it lacks is refused at ``start`` instead of becoming a run that no
        delivery can run. Without one (a client of a deployed stack, or of ``awsworld dev``, has no workflow code
        of its own) a start reads the names the deployment that consumes the queue published (``_published.model``:
        one read, cached by this client) and refuses a name no consumer registers, when that is certain; when it
        is not, the run starts and its delivery decides. ``check_published=False`` skips that read (a schedule's
        tick, which runs inside the consumer).

        ``waiting``: entered while this client waits for a run to move on (``Run.result``, and
        ``Run.wait_for_hook`` with the token it waits for); the test environment lets its virtual clock skip
        ahead while one is held and what it waits for has not happened yet."""
        self.world = world
        self.registry = registry
        self.waiting: Waiting = waiting or _not_waiting
        self.check_published = check_published
        self.starter = RunStarter(world, registry=registry, check_published=check_published)
        """Every start of this client's (``_worker/run_control.py``: the start path the schedules and child runs
        take too)."""

    async def refuse_unpublished(self, name: str) -> None:
        """Raise ``WorkflowNotRegisteredError`` if the publications of the deployment consuming this World's
        queue make ``name`` certainly unknown (``RunStarter.refuse_unpublished``)."""
        await self.starter.refuse_unpublished(name)

    # The Workflow overload comes last: pyright explains a call no overload matches by the last one, so a step
    # passed here is told it has no __awsworld_workflow__ (tests/typing/test_typing.py), not that it is no str.
    @overload
    async def start(self, workflow: str, /, *args: Any, **kwargs: Any) -> Run[Any]: ...

    @overload
    async def start(self, workflow: Workflow[P, R], /, *args: P.args,
                    **kwargs: P.kwargs) -> Run[R]: ...

    async def start(self, workflow: Callable[..., Coroutine[Any, Any, Any]] | str, /, *args: Any,
                    **kwargs: Any) -> Run[Any]:
        """Start a run of ``workflow`` (a ``@workflow``, whose arguments and return type the type checker
        knows, or a workflow's registered name) with these arguments; ``run.result()`` is its return value.

        Arguments that do not fit the workflow's parameters raise ``TypeError`` here, and nothing is recorded or
        queued: the message Python gives for a call that does not bind, or one naming the parameter, the type its
        annotation declares and the value for an argument that is not of that type (pydantic, strict mode; see
        ``authoring.arguments``), whenever the workflow is known (a ``@workflow``, or a name in this client's
        registry). A name this client cannot check is checked by the run's first delivery, which fails the run
        with that ``TypeError`` before its body runs. What is stored is the arguments as passed.

        For an idempotent start, ``client.options(run_id=...).start(workflow, ...)``: the same id returns the
        same run (and wakes it again if it never started), or raises ``RunIdTakenError`` if it is another
        workflow's run."""
        return _handle(self, await self.starter.start(workflow, args, kwargs))

    def options(self, *, run_id: str | None = None, deployment: str | None = None,
                concurrency_key: str | None = None, priority: int | None = None) -> StartOptions:
        """``start`` with options: ``await client.options(run_id="order-17").start(workflow, *args)``.

        With ``run_id`` the start is idempotent: the same id returns the same run (and wakes it again if it
        never started), with the input its first start recorded: a later start's arguments are not compared or
        stored (``await run.get()`` shows the run's); an id a run of another workflow holds is ``RunIdTakenError``
        (``awsworld.world.errors``), and nothing starts. It is 1-200 letters, digits and ``_.:@=+-``, and not
        ``.`` or ``..`` (a URL path drops such a segment: ``world.ids.check_path_id``); another is
        ``InvalidInputError`` naming ``runId``.
        Starting is two writes: the run is recorded, then the message that runs it is queued.
        If the second fails, ``RunStartError`` carries the recorded run's id: starting again with
        ``run_id=error.run_id`` queues the message and nothing runs twice, whereas a retry without the id
        would leave the first run pending for good.

        ``deployment``: ``"latest"`` starts a run that is never pinned (every delivery takes the newest code, as
        for a ``@workflow(pinned=False)``); a deployment's id (``awsworld deployments``) pins the run to it from
        the start (one that is not registered, was retired, or whose code lacks the workflow raises
        ``DeploymentUnavailableError``, a ``LookupError``, and nothing is recorded: ``_worker.run_control``).
        Default: the run is pinned to the deployment its first delivery runs on (a run of a workflow
        with a concurrency limit, to the newest deployment at its start: it may wait for its slot with no delivery).
        ``concurrency_key``: the key of the workflow's concurrency limit for this run, instead of its key
        function's (``@workflow(concurrency=...)``; a workflow without one refuses it: ``TypeError``).
        ``priority``: where the run waits for a slot (higher first; default 0), inherited by its steps' waits."""
        return StartOptions(self, run_id, deployment, concurrency_key, priority)

    def get_run(self, run_id: str) -> Run[Any]:
        """A handle on the run ``run_id`` (nothing is read until you ask it something: ``await run.status()``,
        ``await run.result()``); its result is typed ``Any``, as the run's workflow is not known here."""
        return Run(self, run_id)

    async def list_runs(self, *, workflow: Workflow[..., Any] | str | None = None,
                        status: str | Sequence[str] | None = None, limit: int = 50,
                        cursor: str | None = None) -> RunPage:
        """One page of runs, newest first (run ids are ULIDs: their order is their creation time's).

        - ``workflow``: a ``@workflow`` or its registered name; only its runs. None: every workflow's.
        - ``status``: ``"pending"``, ``"running"``, ``"completed"``, ``"failed"``, ``"cancelled"``, or a list of them
          (an empty list matches nothing). None: any status.
        - ``limit``: 1 to 100 runs a page (``awsworld.world.InvalidInputError`` otherwise).
        - ``cursor``: the ``cursor`` of the page before, to read the next one (a cursor this listing did not issue
          is an ``InvalidInputError`` too).

        The ``RunPage`` holds ``data`` (run records without their values: ``run_id``, ``workflow_name``,
        ``status``, the times, ``error``, ``execution_context``; read a run's input and output with
        ``get_run(run_id)``), ``has_more`` and ``cursor``. On AWS a listing reads the table's ``byWorkflow`` or
        ``byStatus`` index, which are eventually consistent: a run may show its previous status for a moment,
        while ``Run.get()`` is always consistent. Docs: *How-to: Find runs* (``docs/how-to/list-runs.md``)."""
        name = None if workflow is None else (workflow if isinstance(workflow, str) else workflow_name(workflow))
        return await self.world.runs.list(workflow_name=name, status=status, limit=limit, cursor=cursor)

    async def resume_hook(self, token: str, payload: Any, *, idempotency_key: str | None = None,
                          wait: float | None = None) -> Event:
        """Deliver ``payload`` to the hook holding ``token`` and wake its run; return the hook_received event.

        With ``idempotency_key`` (the webhook route passes the request's), a repeat of the key on this hook
        records nothing: it returns the event the first call recorded and wakes the run again, because the
        first call may have recorded the payload and then failed to wake it (that call raised, so its caller
        retries). The wake's own queue key is derived from the idempotency key, so the repeat's wake is
        dropped while the first one's message is still queued. A repeat is recognised even after the run has
        ended (then nothing is woken); a new key on an ended run raises ``RunGoneError`` as usual. Keys longer
        than ``MAX_RESUME_ID_LENGTH`` are replaced by their SHA-256. ``resume_hook_outcome`` also says
        whether this call was the one that recorded the payload.

        With ``wait`` (seconds), a hook that does not exist yet (its run has not reached ``create_hook``) is
        waited for that long before ``HookNotFoundError`` is raised; without it, it is raised at once. A hook whose
        run has ended was closed by that end: ``HookClosedError`` (a ``HookNotFoundError`` and a ``RunGoneError``)
        names the run and its status.
        """
        return (await self.resume_hook_outcome(token, payload, idempotency_key=idempotency_key, wait=wait)).event

    async def resume_hook_outcome(self, token: str, payload: Any, *, idempotency_key: str | None = None,
                                  wait: float | None = None) -> HookResumed:
        """``resume_hook``, telling a first delivery from a repeat of its idempotency key."""
        try:
            encoded = hook_payload(self.world, token, payload)
        except serde.SerializationError as error:
            raise TypeError(f"the hook payload cannot be serialized: {error}") from None
        with self._resuming(token, wait):
            return await resume_hook(self.world, token, encoded, idempotency_key=idempotency_key, wait=wait)

    def _resuming(self, token: str, wait: float | None) -> AbstractContextManager[None]:
        """A resume that waits for its hook is a wait for a run to move on, as ``Run.wait_for_hook`` is: in the test
        environment, time skips to the sleep or retry before the run's ``create_hook`` instead of ``wait`` passing
        in real seconds."""
        return contextlib.nullcontext() if wait is None else self.waiting(None, hook_token=token)

    async def fail_hook(self, token: str, error: str | BaseException, *, code: str | None = None,
                        idempotency_key: str | None = None, wait: float | None = None) -> Event:
        """Fail the hook holding ``token``: the workflow awaiting it raises ``HookFailedError`` with ``error``'s
        message (and ``code``), after any payloads received before. The hook is then disposed. Recorded like a
        payload (a ``hook_received`` holding an envelope no ``resume_hook`` payload can produce), with the same
        ``idempotency_key`` and ``wait`` semantics as ``resume_hook``; returns the recorded event."""
        return (await self.fail_hook_outcome(token, error, code=code, idempotency_key=idempotency_key,
                                             wait=wait)).event

    async def fail_hook_outcome(self, token: str, error: str | BaseException, *, code: str | None = None,
                                idempotency_key: str | None = None, wait: float | None = None) -> HookResumed:
        """``fail_hook``, telling a first delivery from a repeat of its idempotency key (whose first use may have
        been a ``resume_hook``: the repeat records nothing, and the event is what that first use recorded)."""
        message = str(error) if not isinstance(error, BaseException) else (str(error) or type(error).__name__)
        with self._resuming(token, wait):
            return await resume_hook(self.world, token, failure_payload(message, code),
                                     idempotency_key=idempotency_key, wait=wait)

    async def heartbeat_hook(self, token: str, *, wait: float | None = None) -> Event:
        """Tell the hook holding ``token`` that its sender is still working: for ``create_hook(...,
        heartbeat_timeout=...)``, the time it may go unheard from starts again from this call. Any hook takes
        one (a hook without a heartbeat timeout ignores it). Refused as ``resume_hook`` is (``HookNotFoundError``
        for an unknown or disposed hook, ``HookClosedError`` for one its run's end closed), with its ``wait``
        semantics. One conditional write (a ``hook_received`` holding a heartbeat envelope), and no wake-up: the
        run re-arms its heartbeat wait when it next replays. Returns the recorded event."""
        with self._resuming(token, wait):
            return (await resume_hook(self.world, token, heartbeat_payload(), wait=wait, wake=False,
                                      marks={HEARTBEAT_FIELD: True})).event

    async def cancel(self, run_id: str, *, reason: str | None = None) -> None:
        """Cancel the run; ``reason`` (up to 512 characters) is recorded on its ``run_cancelled`` event and
        carried by the ``WorkflowRunCancelledError`` that ``Run.result()`` raises. Cancelling a cancelled run
        (twice, or racing another cancel) succeeds and changes nothing: the first cancel's reason stays.
        ``RunNotFoundError`` for an unknown run, ``EntityConflictError`` for one that completed or failed."""
        await cancel_run(self.world, run_id, reason=reason)

    async def rerun(self, run_id: str, *, new_run_id: str | None = None) -> Run[Any]:
        """Start a new run of the workflow run ``run_id`` ran, with the input that run was recorded with (as
        stored, byte for byte, typed values and an ``args_codec``'s text included): what is left to do once the
        cause of a failure is fixed (a bug, now deployed; a partner that was down), since a failed run is final.
        The new run starts from the beginning, on the newest code, so every step runs again, those the old run
        completed included (a step whose effect must not repeat needs a key of its own, see docs/how-to/errors.md);
        the old run stays as it ended, and the new one's ``executionContext`` names it (``rerunOf``).
        ``new_run_id`` makes the rerun idempotent, as ``options(run_id=...)`` does a start. ``RunNotFoundError``
        for an unknown run, ``RunNotEndedError`` for one still pending or running (cancel it first), and
        ``SdkRunError`` for a run of the Workflow SDK's TypeScript runtime (``_http.push.sdk_run``), whose app
        starts its runs: started here, the new run had no app behind it and was parked or failed."""
        old = await self.world.runs.get(run_id)
        if old.status not in TERMINAL_RUN_STATUSES:
            raise RunNotEndedError(run_id, old.status)
        if (core := sdk_run(old)) is not None:
            raise SdkRunError(
                f"run {run_id} is a run of the Workflow SDK's TypeScript runtime (@workflow/core {core}): its app "
                "runs its code and starts its runs, so start it again from the app, with start(workflow, args) from "
                "'workflow/api' (a run started here would have no app to run it). Nothing was started",
                field="runId", run_id=run_id)
        return _handle(self, await self.starter.start(old.workflow_name, (), {}, run_id=new_run_id,
                                                      context={"rerunOf": run_id}, stored_input=old.input))

    async def wake(self, run_id: str) -> RunView:
        """Send an unfinished run a flow message, as an operator does for a run whose own message was lost (it
        sits ``running`` and nothing happens). Its flow takes over steps whose lease has passed, queues again
        steps that never started, completes due waits, and comes back by itself when a step's lease is still
        running (``_worker.recovery``); waking a run that was fine costs one delivery that finds nothing to do.
        The watchdog does the same on its own after the run's due (docs/operate/lost-messages.md). Returns the run as it
        was; raises ``RunGoneError`` for a finished one, and ``SdkRunError`` for a run of the Workflow SDK's
        TypeScript runtime, which only its app can wake (``_http.push.refuse_wake``: nothing is sent)."""
        run = await self.world.runs.get(run_id, resolve_data="none")
        if run.status in TERMINAL_RUN_STATUSES:
            raise RunGoneError(f"run {run_id} is {run.status}: there is nothing to wake")
        refuse_wake(run, "wake")
        message = FlowMessage(run_id, run.workflow_name, wake=OPERATOR_WAKE)
        await self.world.queue(queue_name_for(run.workflow_name), message.to_payload())
        return run

    async def fail(self, run_id: str, *, reason: str | None = None) -> RunView:
        """Fail an unfinished run on request (``awsworld fail``): one ``run_failed`` event, as if its workflow had
        failed, so ``Run.result()`` raises ``WorkflowRunFailedError`` and a parent awaiting it as a child sees the
        failure (a wake's delivery tells it, as for a cancel). A parked run (``_engine.parking``) fails as the
        spec's divergence rule would have failed it: ``ReplayDivergenceError``, code ``CORRUPTED_EVENT_LOG``,
        naming where it diverged and since when it was parked (one parked because its workflow is missing:
        ``UnknownWorkflowError``, code ``UNKNOWN_WORKFLOW``); any other run with ``FailedOnRequest``, code
        ``FAILED_ON_REQUEST``. ``reason`` (up to 512 characters) ends the message. A run of the TypeScript runtime
        (``_http.push.sdk_run``) gets that error as its runtime's bytes (``ErrorBytes.of_error``): its
        ``run.returnValue`` hydrates bytes, and awsworld's JSON failed it there. Raises ``RunGoneError`` for a run
        that has ended and ``RunNotFoundError`` for an unknown id; returns the run as the write left it, without its
        values (its input; its error is shown). A run whose KMS key is lost is failed too, its error stored
        unsealed (``world.events.RunFailedData``)."""
        if reason is not None and len(reason) > MAX_CANCEL_REASON:
            raise ValueError(f"a fail reason is at most {MAX_CANCEL_REASON} characters, got {len(reason)}")
        run = await self.world.runs.get(run_id, resolve_data="none")
        if run.status in TERMINAL_RUN_STATUSES:
            raise RunGoneError(f"run {run_id} is {run.status}: only a pending or running run can be failed")
        parked = parked_run(run.status, run.attributes)
        said = f": {reason}" if reason else ""
        error: dict[str, Any]
        if parked is not None:
            missing = parked.change == MISSING
            error = {"name": "UnknownWorkflowError" if missing else "ReplayDivergenceError",
                     "message": f"failed on request while parked (since "
                                f"{parked.since.isoformat(timespec='seconds')}): {parked.divergence}{said}"}
            code = UNKNOWN_WORKFLOW if missing else CORRUPTED_EVENT_LOG
        else:
            error, code = {"name": "FailedOnRequest", "message": f"failed on request{said}"}, FAILED_ON_REQUEST
        if sdk_run(run) is not None:  # its runtime reads bytes (``run.returnValue``), not awsworld's structure
            error = ErrorBytes.of_error(error["name"], error["message"]).to_wire()
        # The error is the operator's words: a World that seals values stores it unsealed when the run's key is lost
        # (``RunFailedData.unsealed_if_key_lost``), and the write's run is read without its values (the input of
        # such a run cannot be read), so the run is failed and woken all the same, as ``cancel`` does.
        result = await self.world.events.create(run_id, {"eventType": "run_failed", "eventData": {
            "error": error, "errorCode": code, "unsealedIfKeyLost": True}}, resolve_data="none")
        never_started = result.run is not None and result.run.started_at is None
        await wake_run(self.world, run_id, run.workflow_name, "start" if never_started else "failed")
        return result.run if result.run is not None else await self.world.runs.get(run_id, resolve_data="none")

    async def delete_run(self, run_id: str) -> bool:
        """Delete an ended run's data now, rather than at the end of its retention: what a right-to-erasure request
        (GDPR art. 17, CCPA) asks of a run whose input, step values or hook payloads hold someone's personal data.
        Its log, steps, hooks, waits, streams and stored values go, with its hook tokens (a resume of one is then
        answered as for a token no hook holds), and a start with its run id makes a new run; what stays is said in
        docs/how-to/retention.md ("Erasing a run on request") and ``world/rules/erasure.py``. Its child runs are
        runs of their own: delete each (``get_run(run_id).children()`` lists them; read them first). Returns
        True when the run was deleted, False when there was no such run (deleted already: a retry succeeds).
        Raises ``EntityConflictError`` for a run still pending or running, and deletes nothing: cancel or fail it
        first."""
        return await self.world.delete_run(run_id)

    async def skip_wait(self, run_id: str, wait: str | None = None) -> SkippedWait:
        """End a wait of the run now, as an operator: a sleep, a hook's timeout (the hook then raises
        ``HookTimeoutError``) or a step's retry back-off (the next attempt starts now). ``wait``: its id or its
        name as ``awsworld describe`` and ``events`` show them (``wait_3``, ``sleep(name=...)``, a step's id or
        name); without it, the run's only wait. The log records the skip as an operator's (``skipped`` on the
        ``wait_completed`` or ``step_retrying``, with when it was due), so a replay gives what a normal wake
        gives, and the run is woken to go on at once (the delayed message it had, when it comes, finds nothing
        to do).

        Raises ``RunGoneError`` for a finished run, ``WaitNotFoundError`` when it has no such wait, and
        ``AmbiguousWaitError`` when several fit (both list the run's waits), ``SdkRunError`` for a run of the
        Workflow SDK's TypeScript runtime, whose sleeps its app ends (``_http.push.refuse_wake``: nothing is
        recorded). A wait that ends by itself at the same moment is not skipped again: the answer's ``event`` is
        None then."""
        workflow, done = await skip(self.world, run_id, wait)
        if done.event is not None:
            await wake_run(self.world, run_id, workflow, f"skip:{done.event.event_id}")
        return done

    @property
    def limits(self) -> LimitsClient:
        """Limits across runs at run time: list, describe, set, pause, resume, reset (``client.limits``)."""
        return LimitsClient(self.world)

    @property
    def schedules(self) -> ScheduleClient:
        """Schedules at run time: create, list, describe, pause, resume, trigger, backfill, delete."""
        from ..schedules.client import ScheduleClient  # (it does not import this module)

        return ScheduleClient(self.starter)


class StartOptions:
    """``Client.options(...)``: ``start`` with options (a run id). Typed as ``Client.start``: the arguments are
    checked against the workflow's parameters and the run's result has its return type."""

    def __init__(self, client: Client, run_id: str | None, deployment: str | None = None,
                 concurrency_key: str | None = None, priority: int | None = None) -> None:
        self.client = client
        self.run_id = run_id
        self.deployment = deployment
        self.concurrency_key = concurrency_key
        self.priority = None if priority is None else check_priority(priority)

    def __repr__(self) -> str:
        more = "".join(f", {name}={value!r}" for name, value in (("deployment", self.deployment),
                                                                  ("concurrency_key", self.concurrency_key),
                                                                  ("priority", self.priority)) if value is not None)
        return f"StartOptions(run_id={self.run_id!r}{more})"

    @overload
    async def start(self, workflow: str, /, *args: Any, **kwargs: Any) -> Run[Any]: ...

    @overload
    async def start(self, workflow: Workflow[P, R], /, *args: P.args,
                    **kwargs: P.kwargs) -> Run[R]: ...

    async def start(self, workflow: Callable[..., Coroutine[Any, Any, Any]] | str, /, *args: Any,
                    **kwargs: Any) -> Run[Any]:
        """``Client.start`` with these options (with a ``run_id``: idempotent, see ``Client.options``)."""
        return _handle(self.client, await self.client.starter.start(
            workflow, args, kwargs, run_id=self.run_id, deployment=self.deployment,
            concurrency_key=self.concurrency_key, priority=self.priority))


def _handle(client: Client, started: StartedRun) -> Run[Any]:
    """The handle on a run ``client`` started (its result read through the workflow's codec)."""
    definition = started.definition
    return Run(client, started.run.run_id, started.run.workflow_name,
               codec=definition.codec if definition is not None else None)


def _result_codec(client: Client, workflow: str) -> Codec[Any] | None:
    """The codec of a workflow this process has (the client's registry, else the decorators' own), by name."""
    definition = (client.registry or REGISTRY).workflows.get(workflow) or REGISTRY.workflows.get(workflow)
    return definition.codec if definition is not None else None
