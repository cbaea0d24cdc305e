"""Several deployments' code in one process, each with its own worker: the stand-in for published Lambda
versions that the test environment (``WorkflowTestEnv.deploy``) and ``awsworld dev`` (a reload keeps the code a
run started on) run, behind the same routing code the flow function runs (``_worker.delivery``,
``_worker.rerouting``).

Records are received by the live deployment's invoker, as the ``live`` alias receives them from the event source
mapping. A hand-over to another deployment is what Lambda's asynchronous ``Invoke`` of a qualified version is: it
returns at once, and the target's invocation runs the record through its own delivery path on the same queue,
then deletes it unless it failed (``Invoker``). ``spawn`` is the owner's way to run that invocation in the
background (the driver or poller tracks it as a delivery in flight). A deployment that is not loaded here, or was
retired, cannot be reached (``DeploymentUnavailableError``), as a deleted Lambda version cannot.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

from .._worker.delivery import RecordResult
from .._worker.dispatch import Worker
from .._worker.invoker import DeletingConsumer, Invoker
from .pins import DeploymentUnavailableError

Spawn = Callable[[Coroutine[Any, Any, Any]], Any]


class LocalHost:
    def __init__(self, consumer: DeletingConsumer, spawn: Spawn, *, timeout: float | None = None,
                 reachable: Callable[[str], Awaitable[bool]] | None = None) -> None:
        """``reachable``: asked before a hand-over whether the deployment is still there (the registry's answer:
        an operator may have retired it from another process); default: every deployment loaded here is."""
        self.consumer = consumer
        self.spawn = spawn
        self.timeout = timeout
        self.reachable = reachable
        self.invokers: dict[str | None, Invoker] = {}
        self.live: str | None = None
        self.handed_over = 0
        self.results: list[RecordResult] = []  # every deployment's, in order

    def deploy(self, worker: Worker) -> Invoker:
        """Load ``worker``'s code as a deployment (its ``deployment`` id) and make it the live one: it takes every
        record from now on; the others stay loaded for the runs pinned to them. A deployment loaded already (the
        same id) is replaced."""
        if worker.deployment is None and self.invokers:
            raise ValueError("a host of several deployments needs each worker's deployment id (Worker(deployment=))")
        invoker = Invoker(worker, self.consumer, timeout=self.timeout, host=self)
        invoker.results = self.results
        self.invokers[worker.deployment] = invoker
        self.live = worker.deployment
        return invoker

    @property
    def live_invoker(self) -> Invoker:
        return self.invokers[self.live]

    def loaded(self) -> list[str]:
        """The deployments loaded here, oldest first."""
        return [key for key in self.invokers if key is not None]

    def retire(self, deployment: str) -> bool:
        """Unload a deployment (not the live one): its runs' deliveries cannot reach it any more. False when it was
        not loaded."""
        if deployment == self.live:
            raise ValueError(f"deployment {deployment!r} is the live one: deploy another before retiring it")
        return self.invokers.pop(deployment, None) is not None

    async def hand_over(self, deployment: str, record: Mapping[str, Any], reroutes: int) -> None:
        invoker = self.invokers.get(deployment)
        if invoker is None:
            raise DeploymentUnavailableError(deployment, "it is not loaded here (retired, or from another process)")
        if self.reachable is not None and not await self.reachable(deployment):
            self.invokers.pop(deployment, None)
            raise DeploymentUnavailableError(deployment, "it was retired")
        self.handed_over += 1
        self.spawn(invoker.invoke(record, handed=reroutes))

    @property
    def deliveries(self) -> int:
        return sum(invoker.deliveries for invoker in self.invokers.values())

    @property
    def timed_out(self) -> int:
        return sum(invoker.timed_out for invoker in self.invokers.values())


__all__ = ["LocalHost", "Spawn"]
