"""End-to-end fixtures: one ``LocalAWS`` (moto, with its local poller driving ``Runtime.execute``) per test
module, on the session's moto server, and an ``e2e`` helper to start runs, wait for hooks, wait until the
poller is idle and count the deliveries one scenario took.

A module that needs a different runtime configuration overrides ``local_env`` (module scope): the variables
are set before its ``LocalAWS`` builds its ``Runtime`` and restored when the module ends.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from awsworld import Run
from awsworld.local import LocalAWS, MotoServer
from awsworld.runtime.delivery import RecordResult
from awsworld.world.entities import TERMINAL_RUN_STATUSES
from awsworld.world.errors import HookNotFoundError

RESULT_TIMEOUT = 30.0


@pytest.fixture(scope="module")
def local_env() -> dict[str, str]:
    """Environment variables for this module's runtime (override in a module to change them)."""
    return {}


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
    def __init__(self, local: LocalAWS) -> None:
        self.local = local

    @property
    def client(self) -> Any:
        assert self.local.client is not None
        return self.local.client

    @property
    def poller(self) -> Any:
        assert self.local.poller is not None
        return self.local.poller

    async def start(self, workflow: Any, *args: Any, run_id: str | None = None, **kwargs: Any) -> Run:
        return await self.client.options(run_id=run_id).start(workflow, *args, **kwargs)

    async def run(self, workflow: Any, *args: Any, timeout: float = RESULT_TIMEOUT, **kwargs: Any) -> Any:
        """Start a run and return its result (raising its error)."""
        run = await self.start(workflow, *args, **kwargs)
        return await run.result(timeout=timeout)

    async def queue_depth(self) -> int:
        sqs = await self.local.world.clients.sqs()
        attributes = (await sqs.get_queue_attributes(
            QueueUrl=self.local.world.config.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                            "ApproximateNumberOfMessagesDelayed"]))["Attributes"]
        return sum(int(v) for v in attributes.values())

    async def idle(self, quiet: float = 0.5, timeout: float = 30.0) -> None:
        """Wait until no delivery is in flight and the queue is empty, continuously for ``quiet`` seconds."""
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
        """Wait until ``run`` holds the hook ``token`` (fails early if the run ends first)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                hook = await self.local.world.hooks.get_by_token(token, resolve_data="none")
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
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(e.event_type == event_type for e in await run.events()):
                return
            await asyncio.sleep(0.05)
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
def e2e(local: LocalAWS) -> E2E:
    return E2E(local)
