"""End-to-end fixtures: every workflow runs through the real delivery path (``Invoker``/``DeliveryPath``/
``Worker``), on one of two backends, behind one ``e2e`` helper (start runs, wait for hooks, wait until nothing
is running, count the deliveries one scenario took):

- ``memory`` (the default): a fresh ``awsworld.testing.WorkflowTestEnv`` per test: the World in memory, a
  driver that runs deliveries in-process, and a virtual clock that skips to the next due wait or retry while
  the test awaits ``run.result()`` / a hook / ``e2e.sleep()``. So waits and retries cost no wall time, and a
  test that shows a delay was honoured reads the log's timestamps (virtual time), not ``time.monotonic()``.
- ``aws``: one ``LocalAWS`` per module (moto's server, its SQS queue and a local poller), for tests that assert
  what AWS does (request counts, DynamoDB/S3 layout, SQS specifics, the CLI on a deployed-style config).
- ``dynamodb-local``: the same with AWS's DynamoDB Local for DynamoDB (moto for S3 and SQS), for modules that
  run on every backend (``ALL_BACKENDS``); it starts Java on first use.

A module picks its backend by overriding ``e2e_backend`` (module scope); a test runs on both with
``@pytest.mark.parametrize("e2e_backend", BOTH)``. A module that needs a different runtime configuration
overrides ``local_env`` (module scope): the variables are set before either backend builds its ``Worker``
and restored when the module ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from awsworld import Client, Run
from awsworld._worker.delivery import RecordResult
from awsworld._worker.tick import run_tick
from awsworld.authoring.definitions import REGISTRY, WorkflowDef, workflow_name
from awsworld.authoring.errors import RunEndedError
from awsworld.client.http_client import HttpClient
from awsworld.local import DynamoDBLocal, LocalAWS, MotoServer
from awsworld.testing import WorkflowTestEnv
from awsworld.world.entities import TERMINAL_RUN_STATUSES
from awsworld.world.errors import HookNotFoundError, RunNotFoundError
from serving import start_serve, stop_serve  # tests/serving.py (tests/ is on sys.path)

RESULT_TIMEOUT = 30.0
MEMORY = "memory"
AWS = "aws"
DYNAMODB_LOCAL = "dynamodb-local"
HTTP_MEMORY = "http-memory"
HTTP_EMULATOR = "http-emulator"
BOTH = [MEMORY, AWS]
ALL_BACKENDS = [MEMORY, AWS, DYNAMODB_LOCAL]
OVER_HTTP = [HTTP_MEMORY, HTTP_EMULATOR]
"""``awsworld serve --world memory|emulator`` as a process, importing the test's module (so its workflows run
there), and an ``HttpClient`` on it: a module's Client tests run over HTTP too."""


@contextmanager
def deployed(workflow: Any, code: Callable[..., Coroutine[Any, Any, Any]]) -> Iterator[None]:
    """Inside the block, runs of ``workflow`` replay on ``code`` (a deploy of changed code); after it, on the
    original again (the rollback), however the block ends."""
    name = workflow_name(workflow)
    original = REGISTRY.workflows[name]
    REGISTRY.workflows[name] = WorkflowDef(name, code)
    try:
        yield
    finally:
        REGISTRY.workflows[name] = original


@asynccontextmanager
async def ticking(local: LocalAWS, every: float) -> AsyncIterator[LocalAWS]:
    """``local`` with its watchdog ticking every ``every`` s (every minute in the stack: a test on small time
    scales it down with the watch horizon), stopped on the way out."""

    async def ticks() -> None:
        while True:
            await run_tick(local.world)
            await asyncio.sleep(every)

    ticker = asyncio.create_task(ticks())
    try:
        yield local
    finally:
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker


async def holder_of_hook(world: Any, token: str, timeout: float = 30.0) -> str:
    """The id of the run that holds hook ``token``, once one does (a child run a test did not start itself)."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(HookNotFoundError):
            return str((await world.hooks.get_by_token(token, resolve_data="none")).run_id)
        if time.monotonic() > deadline:
            raise TimeoutError(f"no run held hook {token!r} within {timeout:g} s")
        await asyncio.sleep(0.02)


def on_backends(backends: list[str]) -> Any:
    """A module's ``e2e_backend`` that runs each of its tests once per backend: ``e2e_backend = on_backends(BOTH)``."""

    @pytest.fixture(scope="module", params=backends)
    def e2e_backend(request: pytest.FixtureRequest) -> str:
        return str(request.param)

    return e2e_backend


def with_env(env: dict[str, str]) -> Any:
    """A module's ``local_env``: ``local_env = with_env({"AWSWORLD_...": "..."})``."""

    @pytest.fixture(scope="module")
    def local_env() -> dict[str, str]:
        return dict(env)

    return local_env


@pytest.fixture(scope="module")
def local_env() -> dict[str, str]:
    """Environment variables for this module's runtime (override in a module to change them)."""
    return {}


@pytest.fixture(scope="module")
def e2e_backend() -> str:
    """Where this module's workflows run: ``memory`` (WorkflowTestEnv), ``aws`` (LocalAWS on moto) or
    ``dynamodb-local`` (LocalAWS with DynamoDB Local)."""
    return MEMORY


@pytest.fixture(scope="module")
def _runtime_env(local_env: dict[str, str]) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        for name, value in local_env.items():
            patch.setenv(name, value)
        yield


@pytest.fixture(scope="module")
async def local(moto_server: MotoServer, _runtime_env: None) -> AsyncIterator[LocalAWS]:
    """A LocalAWS for this module: fresh table, bucket and queue; its poller runs every delivery."""
    async with LocalAWS("moto", moto=moto_server) as aws:
        yield aws


@pytest.fixture(scope="module")
async def local_dynamodb(moto_server: MotoServer, dynamodb_local: DynamoDBLocal,
                         _runtime_env: None) -> AsyncIterator[LocalAWS]:
    """A LocalAWS on DynamoDB Local (S3 and SQS on moto) for this module, with its poller."""
    async with LocalAWS("dynamodb-local", moto=moto_server, dynamodb_local=dynamodb_local) as aws:
        yield aws


@pytest.fixture
async def memory_env(_runtime_env: None) -> AsyncIterator[WorkflowTestEnv]:
    """A fresh in-memory environment per test (its Worker built with the module's ``local_env`` set)."""
    async with WorkflowTestEnv() as env:
        yield env


@dataclass
class Deliveries:
    """What the poller did between ``e2e.counting()`` entry and exit (the poller idle at both ends)."""

    before: int = 0
    results_before: int = 0
    count: int = 0
    results: list[RecordResult] = field(default_factory=list)

    @property
    def statuses(self) -> list[str]:
        return [r.status for r in self.results if not r.failed]

    @property
    def errors(self) -> list[str]:
        """The records the delivery path reported as failed (left in the queue to come back)."""
        return [r.status for r in self.results if r.failed]


class E2E:
    """One API on both backends: ``client``, ``world``, ``poller`` (the LocalPoller or the env's driver: both
    have ``deliveries`` and ``results``), ``idle``, ``sleep``, ``counting``, ``hook_ready``, ..."""

    def __init__(self, *, env: WorkflowTestEnv | None = None, local: LocalAWS | None = None,
                 client: HttpClient | None = None, backend: str | None = None) -> None:
        assert [env, local, client].count(None) == 2
        self.env = env
        self.local = local
        self.http_client = client
        self.backend = backend or (MEMORY if env is not None else AWS)

    @property
    def memory(self) -> bool:
        return self.env is not None

    @property
    def client(self) -> Any:
        if self.http_client is not None:
            return self.http_client
        if self.env is not None:
            return self.env.client
        assert self.local is not None and self.local.client is not None
        return self.local.client

    @property
    def world(self) -> Any:
        if self.http_client is not None:
            return self.http_client.world
        if self.env is not None:
            return self.env.world
        assert self.local is not None
        return self.local.world

    @property
    def poller(self) -> Any:
        if self.env is not None:
            return self.env.driver
        assert self.local is not None and self.local.poller is not None
        return self.local.poller

    async def start(self, workflow: Any, *args: Any, run_id: str | None = None, **kwargs: Any) -> Run:
        return await self.client.options(run_id=run_id).start(workflow, *args, **kwargs)

    async def run(self, workflow: Any, *args: Any, timeout: float = RESULT_TIMEOUT, **kwargs: Any) -> Any:
        """Start a run and return its result (raising its error)."""
        run = await self.start(workflow, *args, **kwargs)
        return await run.result(timeout=timeout)

    async def sleep(self, seconds: float) -> None:
        """Let ``seconds`` pass: virtual time on memory (every delivery falling due on the way runs), real time
        on aws."""
        if self.env is not None:
            await self.env.sleep(seconds)
        else:
            await asyncio.sleep(seconds)

    async def queue_depth(self) -> int:
        """Messages not deleted yet: visible, delayed or in flight."""
        if self.env is not None:
            return self.env.world.memory_queue.pending_count()
        sqs = await self.world.clients.sqs()
        attributes = (await sqs.get_queue_attributes(
            QueueUrl=self.world.config.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                            "ApproximateNumberOfMessagesDelayed"]))["Attributes"]
        return sum(int(v) for v in attributes.values())

    async def idle(self, quiet: float = 0.5, timeout: float = 30.0) -> None:
        """Wait until no delivery is in flight and none is due. On memory this is exact (the driver knows; a
        message delayed into the future is not waited for, time does not skip); on aws, until the queue is
        empty (delayed messages too) and nothing runs, continuously for ``quiet`` seconds."""
        if self.env is not None:
            await self.env.idle(timeout)
            return
        deadline = time.monotonic() + timeout
        quiet_since: float | None = None
        while time.monotonic() < deadline:
            busy = bool(self.poller._inflight) or await self.queue_depth() > 0
            now = time.monotonic()
            if busy:
                quiet_since = None
            elif quiet_since is None:
                quiet_since = now
            elif now - quiet_since >= quiet:
                return
            await asyncio.sleep(0.05)
        raise TimeoutError(f"the local poller did not go idle within {timeout} s")

    def counting(self) -> _Counting:
        """``async with e2e.counting() as d:`` — the deliveries of what runs inside (waits for idle on both
        sides, so only this scenario's deliveries are counted)."""
        return _Counting(self)

    async def hook_ready(self, token: str, run: Run, timeout: float = 15.0) -> None:
        """Wait until ``run`` holds the hook ``token`` (fails early if the run ends first). On memory, time
        skips to the next due wait or retry meanwhile, as ``Run.wait_for_hook`` lets it."""
        if self.env is not None:
            try:
                await run.wait_for_hook(token, timeout=timeout)
            except RunEndedError as ended:
                raise AssertionError(str(ended)) from ended
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                hook = await self.world.hooks.get_by_token(token, resolve_data="none")
                if hook.run_id == run.run_id:
                    return
            except HookNotFoundError:
                pass
            status = await run.status()
            if status in TERMINAL_RUN_STATUSES:
                raise AssertionError(f"run {run.run_id} ended ({status}) before it held hook {token!r}")
            await asyncio.sleep(0.05)
        raise TimeoutError(f"run {run.run_id} did not create hook {token!r} within {timeout} s")

    async def wait_for_event(self, run: Run, event_type: str, timeout: float = 15.0) -> None:
        """Wait (in real time: time does not skip) until the run's log has an ``event_type``."""
        pause = 0.005 if self.env is not None else 0.05
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(e.event_type == event_type for e in await run.events()):
                return
            await asyncio.sleep(pause)
        raise TimeoutError(f"run {run.run_id} has no {event_type} after {timeout} s")

    async def event_types(self, run: Run) -> list[tuple[str, str | None]]:
        return [(e.event_type, e.correlation_id) for e in await run.events()]


class _Counting:
    def __init__(self, e2e: E2E) -> None:
        self.e2e = e2e
        self.result = Deliveries()

    async def __aenter__(self) -> Deliveries:
        await self.e2e.idle()
        poller = self.e2e.poller
        self.result.before = poller.deliveries
        self.result.results_before = len(poller.results)
        return self.result

    async def __aexit__(self, *exc: object) -> None:
        if exc[0] is not None:
            return
        await self.e2e.idle()
        poller = self.e2e.poller
        self.result.count = poller.deliveries - self.result.before
        self.result.results = poller.results[self.result.results_before:]


@pytest.fixture(scope="module")
def served_url(request: pytest.FixtureRequest, e2e_backend: str, tmp_path_factory: pytest.TempPathFactory,
               _runtime_env: None) -> Iterator[str]:
    """``awsworld serve`` for this module: its World (``memory`` or ``emulator``, by the backend), the module's
    workflows imported into it (under the module's own name: the server runs from ``tests/``, as pytest imports
    it), on 127.0.0.1 port 0. Stopped (SIGTERM, then killed) when the module ends."""
    world = "memory" if e2e_backend == HTTP_MEMORY else "emulator"
    process, url = start_serve(tmp_path_factory.mktemp("serve"), request.module.__name__, "--world", world,
                               cwd=Path(__file__).resolve().parent.parent)
    yield url
    stop_serve(process)


@pytest.fixture
def e2e(request: pytest.FixtureRequest, e2e_backend: str) -> E2E:
    """The test's helper on its backend: a fresh WorkflowTestEnv (memory) or the module's LocalAWS (aws)."""
    if e2e_backend == MEMORY:
        return E2E(env=request.getfixturevalue("memory_env"))
    if e2e_backend == AWS:
        return E2E(local=request.getfixturevalue("local"))
    if e2e_backend in OVER_HTTP:
        return E2E(client=HttpClient(request.getfixturevalue("served_url")), backend=e2e_backend)
    if e2e_backend == DYNAMODB_LOCAL:
        return E2E(local=request.getfixturevalue("local_dynamodb"), backend=DYNAMODB_LOCAL)
    raise ValueError(f"e2e_backend must be one of {ALL_BACKENDS}, not {e2e_backend!r}")


@dataclass
class Env:
    """One backend of a test that runs on both the memory World and the emulator (the ``env`` fixture): a client
    and the World under it."""

    name: str
    client: Client
    world: Any

    async def child_runs(self, parent: Run[Any]) -> list[Any]:
        """The runs whose ids derive from ``parent``'s (its children), from the World's run listing."""
        runs, cursor = [], None
        while True:
            page = await self.world.runs.list(cursor=cursor, limit=100)
            runs.extend(r for r in page.data if r.run_id.startswith(f"{parent.run_id}."))
            cursor = page.cursor
            if not page.has_more:
                return runs

    async def child_hook(self, child_id: str, token: str, timeout: float = 60.0) -> None:
        """Wait until the child run exists (its parent's start step created it) and holds hook ``token``."""
        await self.wait_for_status(child_id, {"pending", "running", *TERMINAL_RUN_STATUSES})
        await self.client.get_run(child_id).wait_for_hook(token, timeout=timeout)

    async def wait_for_status(self, run_id: str, statuses: set[str], timeout: float = 30.0) -> str:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            try:
                status = await self.client.get_run(run_id).status()
            except RunNotFoundError:
                status = "not created"
            if status in statuses:
                return status
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"run {run_id} is still {status}")
            await asyncio.sleep(0.05)


@pytest.fixture(params=["memory", "local"])
def env(request: pytest.FixtureRequest) -> Iterator[Env]:
    if request.param == "memory":
        test_env: WorkflowTestEnv = request.getfixturevalue("awsworld_env")
        yield Env("memory", test_env.client, test_env.world)
    else:
        local = request.getfixturevalue("local")
        yield Env("local", local.client, local.world)
