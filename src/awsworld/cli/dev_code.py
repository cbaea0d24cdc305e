"""``awsworld dev``'s deployments: each version of your code it loads is one, and a run keeps the code it started on.

The id of a version is ``dev-`` and the digest of your project's module files (``_deployments.identity``), so an edit
makes a new one and its revert is the old one again. When a reload loads new code (``dev_reload``), the code from
before stays loaded as its deployment, from a snapshot of the registry (``Registry.snapshot``: the same function
objects, with the module globals they were imported with), behind the poller's host (``_deployments.local_host``):
new runs start on the new code, and every delivery of a run started before runs the old code, handed to it as a
published Lambda version's would be. A reload retires the versions that no unfinished run is pinned to any more
(unloaded, and marked retired in the World's registry), so dev keeps only what its runs need.

Where that cannot be done, dev says so and falls back to the divergence handling: a snapshot lives as long as
dev's process, so after a restart (``--state``) a run pinned to code dev no longer has is replayed against the
current code and moved to it, matching or parked (``dev_reload.replay_unfinished``), instead of failing with
``DeploymentMismatchError`` as a run of a deleted Lambda version would. A caveat of snapshots: code that imports a
module while it runs (an ``import`` inside a function) gets the module as it is now, not as it was.

An operator's ``awsworld deployments retire`` in another shell is seen at the next hand-over (the host asks the
registry), so a retired version's runs fail as they would on AWS.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from .._deployments.identity import code_digest, definition_files, dev_deployment, register
from .._deployments.local_host import LocalHost
from .._deployments.model import DEPLOYMENTS_OF_DEV, latest
from .._deployments.upgrade import holdings
from .._worker.dispatch import Worker
from ..authoring.definitions import Registry
from ..world.clock import clock_of
from ..world.protocol import World
from .dev_reload import Pins


class DevCode:
    def __init__(self, world: World, files: Callable[[], dict[str, Path]]) -> None:
        """``files``: the project's module files as loaded now (``dev_reload.UserCode.modules``)."""
        self.world = world
        self.files = files
        self.host: LocalHost | None = None

    def current(self, registry: Registry) -> str:
        """The deployment id of the code loaded now: the project's module files and those defining ``registry``'s
        workflows and steps (an installed package's, say)."""
        return dev_deployment(code_digest({**definition_files(registry), **self.files()}))

    async def first(self, registry: Registry) -> Worker:
        """The worker of the code dev starts with, registered as a deployment."""
        worker = Worker(self.world, registry, deployment=self.current(registry))
        await self._register(worker)
        return worker

    def attach(self, host: LocalHost) -> None:
        """The poller's host: where the versions are loaded; it asks the registry before a hand-over."""
        self.host = host
        host.reachable = self.reachable

    async def reachable(self, deployment: str) -> bool:
        store = self.world.deployments
        if store is None:
            return True
        found = next((d for d in await store.read() if d.deployment_id == deployment), None)
        return found is None or not found.retired

    def pins(self) -> Pins:
        assert self.host is not None and self.host.live is not None
        return Pins(self.host.live, frozenset(self.host.loaded()))

    async def reloaded(self, previous: Registry, registry: Registry) -> Pins:
        """After a reload into ``registry``: the code from before keeps running the runs it started, from
        ``previous`` (a snapshot taken before the reload), and the new code takes new runs; versions no unfinished
        run needs any more are retired. Prints what it did; returns the pins for the replay that follows. The swap
        is done before anything here awaits, so no delivery starts on a half-swapped host."""
        host = self.host
        assert host is not None and host.live is not None
        before, now = host.live, self.current(registry)
        kept = None
        if now != before:
            host.invokers[before].path.worker.registry = previous  # the old code, as it was
            kept = host.invokers.get(now)
            if kept is not None:  # a revert: that version again (its runs never left it)
                kept.path.worker.registry = registry
                host.live = now
                await self._register(kept.path.worker)  # the newest again (it read draining, the edit live)
            else:
                worker = Worker(self.world, registry, deployment=now)
                host.deploy(worker)
                await self._register(worker)
        reverted = now != before and kept is not None
        retired = await self._retire_drained()
        said = f"; retired {', '.join(retired)} (no unfinished run on it)" if retired else ""
        if now == before:
            print(f"the code is unchanged ({now}){said}", flush=True)
        elif reverted:
            print(f"the code is {now} again: new runs start on it, and its runs go on with it{said}", flush=True)
        else:
            print(f"new runs start on {now}; runs started before stay on the code they started on (`awsworld "
                  f"upgrade RUN` moves one to it, once it replays there: a fix for a step that keeps failing, "
                  f"say){said}", flush=True)
        return self.pins()

    async def _retire_drained(self) -> list[str]:
        host = self.host
        assert host is not None
        held = await holdings(self.world)
        drained = [d for d in host.loaded() if d != host.live and d not in held]
        store = self.world.deployments
        records = {d.deployment_id: d for d in await store.read()} if store is not None else {}
        for deployment in drained:
            host.retire(deployment)
            record = records.get(deployment)
            if store is not None and record is not None and not record.retired:
                await store.put(record.retire(clock_of(self.world).now()))
        return drained

    async def _register(self, worker: Worker) -> None:
        """Register the version dev runs new runs on now, as the newest (``_deployments.model.latest``: what
        ``deployments`` shows ``live`` and a limited start is pinned to). A version registered before and loaded
        again (an edit reverted, in this process or across a restart on ``--state``) is registered afresh: its
        first record is older than the edit's, which read ``live`` while dev ran this code and this code read
        ``draining``; one retired earlier (its runs had all ended) no longer reads as retired while it runs."""
        assert worker.deployment is not None
        if await register(self.world, worker.deployment, worker.registry, host=DEPLOYMENTS_OF_DEV):
            return
        store = self.world.deployments
        records = await store.read() if store is not None else []
        found = next((d for d in records if d.deployment_id == worker.deployment), None)
        newest = latest(records)
        if store is not None and found is not None and (found.retired or newest is None
                                                         or newest.deployment_id != found.deployment_id):
            await store.put(replace(found, registered_at=clock_of(self.world).now(), retired_at=None))
