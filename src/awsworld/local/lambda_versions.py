"""Published versions of the flow function in one process, for tests and benches on the emulator: moto's Lambda does
not run functions here, so each version is modelled by execution environments (``lambda_host.container.Container``)
running the real flow handler, and Lambda's asynchronous ``Invoke`` of a qualified version by ``hand_over``.

Everything a deployed function does is the real code: the event source mapping's batches go to ``flow.handle`` on
the live version's container; a hand-over (``_deployments.host``) passes the event through JSON and runs
``flow.handle_hand_over`` on an idle environment of the target version (a new one when all are busy, as Lambda
scales out), in a thread of its own, and returns at once, as an ``Event`` invocation does. Only the ``invoke`` call of
``lambda_host.versions.LambdaHost`` is not exercised; a deleted version answers as Lambda does, with
``DeploymentUnavailableError`` (``ResourceNotFoundException``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from .._deployments.pins import DeploymentUnavailableError
from .._worker.dispatch import Worker
from ..authoring.definitions import Registry
from ..aws.world import AWSWorld
from ..lambda_host import flow
from ..lambda_host.container import Container
from ..lambda_host.versions import hand_over_event


class InvocationContext:
    """The attributes of Lambda's context object the handlers read, with a real deadline."""

    def __init__(self, timeout_ms: int = 120_000, version: str = "$LATEST") -> None:
        self._deadline = time.monotonic() + timeout_ms / 1000
        self.function_name = "awsworld-local-flow"
        self.function_version = version
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:awsworld-local-flow:{version}"
        self.memory_limit_in_mb = 1024
        self.aws_request_id = "local"
        self.log_group_name = "/aws/lambda/awsworld-local-flow"
        self.log_stream_name = "local"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


class FunctionVersions:
    def __init__(self, world_factory: Callable[[], AWSWorld], pool: ThreadPoolExecutor) -> None:
        """``world_factory``: a World on the stack's resources (one per execution environment, as deployed)."""
        self.world_factory = world_factory
        self.pool = pool
        self.registries: dict[str, Registry] = {}
        self.idle: dict[str, list[Container]] = {}
        self.every: list[Container] = []
        self.deleted: set[str] = set()
        self.invokes: list[dict[str, Any]] = []
        self.pending: list[Future[Any]] = []
        self._lock = threading.Lock()

    def publish(self, version: str, registry: Registry) -> Container:
        """Publish ``version`` (its deployment is ``v<version>``) with ``registry``'s code; returns an environment of
        it (the one the event source mapping invokes while it is live)."""
        self.registries[f"v{version}"] = registry
        return self._environment(f"v{version}")

    def delete(self, version: str) -> None:
        """What ``awsworld deployments retire`` does to a Lambda version: it cannot be invoked any more."""
        self.deleted.add(f"v{version}")

    def _environment(self, deployment: str) -> Container:
        with self._lock:
            idle = self.idle.setdefault(deployment, [])
            if idle:
                return idle.pop()
        registry = self.registries[deployment]

        def make_worker(world: AWSWorld, *, deployment: str | None) -> Worker:
            return Worker(world, registry, deployment=deployment)

        container = Container(world_factory=self.world_factory, worker_factory=make_worker,
                              host_factory=lambda world: self, version=deployment[1:])
        self.every.append(container)
        return container

    def _release(self, deployment: str, container: Container) -> None:
        with self._lock:
            self.idle.setdefault(deployment, []).append(container)

    async def hand_over(self, deployment: str, record: Any, reroutes: int) -> None:
        """Lambda's ``Invoke(InvocationType="Event", Qualifier=...)``: accepted at once, run in an environment of
        the target version."""
        if deployment not in self.registries or deployment in self.deleted:
            raise DeploymentUnavailableError(deployment, "its Lambda version was deleted")
        event = json.loads(json.dumps(hand_over_event(record, reroutes, deployment)))  # the wire: plain JSON
        self.invokes.append(event)
        container = self._environment(deployment)

        def invoke() -> Any:
            try:
                return flow.handle_hand_over(event, InvocationContext(version=deployment[1:]), container)
            finally:
                self._release(deployment, container)

        self.pending.append(self.pool.submit(invoke))

    def settle(self, timeout: float = 60) -> None:
        """Wait for every hand-over invoked so far to finish (raising what one raised)."""
        while self.pending:
            self.pending.pop(0).result(timeout=timeout)

    def close(self) -> None:
        self.settle()
        for container in self.every:
            container.reset()
            container.loop.close()


__all__ = ["FunctionVersions", "InvocationContext"]
