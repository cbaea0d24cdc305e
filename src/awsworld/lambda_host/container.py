"""What one Lambda execution environment keeps between invocations: an event loop, a World, a Worker.

Lambda reuses an environment ("container") for many invocations and freezes it in between. The World's
asyncio state (its clients' lock, the event writer's group commits, pending futures) belongs to the event loop
it was first used on, so the loop must outlive the invocation: ``asyncio.run`` per invocation would close it
and leave the next invocation holding a World bound to a dead loop. Hence one loop per container, created with
the container, and ``run`` drives each invocation's coroutine on it with ``run_until_complete``.

The World and Worker are built lazily on first use (the cold start), from the environment the SAM template
sets (``AWSConfig.from_env``), after importing the user's workflow modules named by ``AWSWORLD_MODULES`` so
that their ``@workflow``/``@step`` decorators have registered them.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from .._deployments.host import DeploymentHost
from .._deployments.identity import lambda_deployment, register
from .._deployments.model import DEPLOYMENTS_OF_LAMBDA
from .._published.model import publish
from .._worker.cut_off import steps_outliving_the_function
from .._worker.dispatch import Worker
from ..authoring.definitions import MODULES_ENV, REGISTRY
from ..aws.config import AWSConfig
from ..aws.world import AWSWorld
from ..client.client import Client
from ..schedules.declared import declared_in
from ..settings import SETTINGS, module_names
from .versions import LambdaHost, version_target

log = logging.getLogger("awsworld.lambda")

T = TypeVar("T")


def import_modules(value: str | None) -> list[str]:
    """Import every module named in ``value``; an import error stops the cold start with the module's name
    (a function that cannot load its workflows should fail loudly, not run deliveries it cannot handle). A step
    whose ``timeout`` the function's own timeout cuts short is warned about here, once per cold start
    (``_worker/cut_off.py`` says why not at the call)."""
    names = module_names(value)
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as error:
            raise ImportError(f"{MODULES_ENV} names {name!r}, which cannot be imported: {error}") from error
    for warning in steps_outliving_the_function(REGISTRY.steps.values()):
        log.warning("%s", warning)
    if not names:  # (a stack that only serves TypeScript apps: awsworld init --world-server, no -m)
        log.warning("%s is empty: no Python workflow is registered, so a delivery of one is reported as failed (and "
                    "reaches the dead-letter queue through the redrive policy); pushed deliveries, the messages the "
                    "World server queues for TypeScript apps, are delivered as usual", MODULES_ENV)
    return names


class Container:
    """One loop, and lazily one World, Worker and Client, for the life of an execution environment."""

    def __init__(self, world_factory: Callable[[], AWSWorld] | None = None,
                 worker_factory: Callable[..., Worker] = Worker,
                 host_factory: Callable[[AWSWorld], DeploymentHost] | None = None,
                 version: str | None = None) -> None:
        """``host_factory``: how this version reaches the others (default: ``versions.LambdaHost``, an
        asynchronous invoke of a qualified version). The deployment is this version (``identity.lambda_deployment``:
        ``version``, else ``AWS_LAMBDA_FUNCTION_VERSION``, read when the worker is built)."""
        self.version = version
        self.loop = asyncio.new_event_loop()
        self._world_factory = world_factory or (lambda: AWSWorld(AWSConfig.from_env()))
        self._worker_factory = worker_factory
        self._host_factory = host_factory or (lambda world: LambdaHost(world.clients))
        self._host: DeploymentHost | None = None
        self._world: AWSWorld | None = None
        self._worker: Worker | None = None
        self._client: Client | None = None
        self.modules: list[str] | None = None
        self.published = False  # this environment's workflow names are in the World (``publish_names``)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run one invocation's work on the container's loop (never ``asyncio.run``: see the module doc)."""
        return self.loop.run_until_complete(coroutine)

    def _build(self) -> AWSWorld:
        if self.modules is None:
            self.modules = import_modules(SETTINGS.modules)
        world = self._world_factory()
        world.schedules.declared = declared_in(self.modules)  # what this deployment's ticks create and fire
        self._world = world
        return world

    @property
    def world(self) -> AWSWorld:
        return self._world if self._world is not None else self._build()

    @property
    def built_world(self) -> AWSWorld | None:
        """The World if it has been built, without building it."""
        return self._world

    @property
    def worker(self) -> Worker:
        if self._worker is None:
            self._worker = self._worker_factory(self.world, deployment=lambda_deployment(self.version))
        return self._worker

    @property
    def host(self) -> DeploymentHost:
        """How a delivery of a run pinned to another version is handed to it (``_deployments.host``)."""
        if self._host is None:
            self._host = self._host_factory(self.world)
        return self._host

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = Client(self.world)
        return self._client

    async def publish_names(self, *, ahead: bool) -> None:
        """Publish this function's workflow names into the World (``_published.model``) and register its version as a
        deployment (``_deployments.model``), once per environment:
        ``ahead`` when it is done before the function takes deliveries (SnapStart's initialisation of a version,
        ``snapstart.prime``), not at a plain cold start (the flow handler's first invocation). Two PutItems."""
        if self.published:
            return
        await publish(self.world, self.worker.registry, host="the flow function", ahead=ahead)
        deployment = self.worker.deployment
        if deployment is not None:  # this version, as a deployment runs can be pinned to (``_deployments.model``)
            await register(self.world, deployment, self.worker.registry, host=DEPLOYMENTS_OF_LAMBDA,
                           target=version_target(deployment))
        self.published = True

    def reset(self) -> None:
        """Close the World and forget it, so the next use rebuilds it from the environment (tests use this to
        point a container at fresh resources; Lambda never needs it)."""
        world, self._world, self._worker, self._client, self._host = self._world, None, None, None, None
        self.modules = None
        self.published = False
        if world is not None and not self.loop.is_closed():
            self.loop.run_until_complete(world.close())


_default: Container | None = None


def default_container() -> Container:
    """The container the module-level handlers use, created on first call (once per environment)."""
    global _default
    if _default is None:
        _default = Container()
    return _default
