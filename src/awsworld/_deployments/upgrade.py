"""Moving runs to another deployment on purpose, after proving the new code replays them; and what each
deployment still holds.

``upgrade_run`` reads the run's log, replays it against the target deployment's code (``client.replay``: what
``awsworld replay`` does, writing nothing) and, only if the replay matches, writes one ``attr_set`` that pins the
run to the target. That write is fenced like a flow's (in-band, with the count the replayed log had): if the run
moved on meanwhile (its flow wrote something), the write is refused and the replay is done again on the newer
log, so the run is never moved past events its new code has not been checked against. Then the run is woken on the
target. A run pinned there already is woken there too, so an upgrade cut off between its write and its wake (a
crash, a lost connection) is finished by running it again: without that the moved run, parked say, waited for its
next delivery of its own (a parked run's hourly one), the operator told it was on the target already. A run whose
replay diverges stays where it is, and the answer says where and what differs. A run that
follows the newest code for good (``routing.unpinned_for_good``: ``pinned=False``, started on ``latest``, or from
before pinning) is replayed and woken the same way but never pinned: pinned, it would stay behind on the target's
code when the next deployment comes, which is what its user declared it should not do.

A flow still running the run on the old deployment loses its next write to the fence, and its follow-up is handed
to the target by the flow's pin check (``_deployments.routing``). A step message queued before the move (a retry of
a step that keeps failing) is handed to the target by whichever deployment receives it, the live one included (a
move back to an older deployment), which reads the run's pin before the body runs (``routing.reads_step_pin``);
only an attempt running at the move ends its body on the old code (a step's body, unlike the workflow's calls, is
free to change: the replay uses its recorded result).

An upgrade and a retirement of its target racing each other (two operators, ``upgrade --to v7`` and ``deployments
retire v7`` or ``prune``) each write first and look after: the upgrade reads the target's record after pinning the
run and, found retired, puts the run back where it was (``error``, unwoken); the retirement lists the target's runs
after marking it and, finding one, puts the record back and refuses. Whichever looks last sees the other's write, so
no run is left pinned to a retired deployment (whose Lambda version ``retire``'s caller deletes next), unless the
run listing lags the move (DynamoDB's index, typically under a second) in the one interleaving where the upgrade
looked before the retirement wrote.

``holdings`` lists the unfinished runs (pending, running, parked) by the deployment they are pinned to: what
``awsworld deployments`` shows and what a retirement must find empty.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..authoring.definitions import Registry
from ..client.replay import replay_events
from ..world.clock import clock_of
from ..world.deployments import Deployment, DeploymentStore
from ..world.entities import TERMINAL_RUN_STATUSES, Run
from ..world.errors import InBandSupersededError, RunGoneError
from ..world.events import Event
from ..world.messages import OPERATOR_WAKE, FlowMessage, queue_name_for
from ..world.protocol import World
from .model import latest, refusal
from .pins import LATEST, pin_change, pin_of
from .routing import unpinned_for_good

UNPINNED = "(unpinned)"
"""How listings name the runs pinned to no deployment (``pinned=False``, started before pinning)."""
FENCE_RETRIES = 3


class UpgradeError(ValueError):
    """An upgrade or retirement that cannot be done as asked (no such deployment, a retired one, runs still on
    it): nothing was written."""


@dataclass(frozen=True)
class Upgrade:
    """What became of one run: ``moved``, ``diverged`` (its replay differs: ``detail`` says where), ``current``
    (pinned there already: woken there, in case an upgrade that moved it was cut off before its wake),
    ``unpinned`` (a run that follows the newest code for good: replayed against the target's code and woken, but
    not pinned, so the next deployment still takes it), ``ended``, or ``error`` (the code could not replay it:
    ``detail``)."""

    run_id: str
    workflow: str
    outcome: str
    source: str | None
    target: str
    detail: str | None = None

    @property
    def ok(self) -> bool:
        return self.outcome in ("moved", "current", "unpinned", "ended")


async def target_deployment(store: DeploymentStore, to: str) -> Deployment:
    """The deployment ``to`` names (``latest``: the newest not retired); ``UpgradeError`` for none or a retired one."""
    deployments = await store.read()
    if to == LATEST:
        found = latest(deployments)
        if found is None:
            raise UpgradeError("no deployment is registered in this World: nothing to move runs to")
        return found
    refused = refusal(deployments, to)
    if refused is not None:
        raise UpgradeError(refused)
    return next(d for d in deployments if d.deployment_id == to)


async def upgrade_run(world: World, run_id: str, target: str, registry: Registry) -> Upgrade:
    """Replay run ``run_id`` against ``registry`` (the target's code) and, if it matches, pin it to ``target`` and
    wake it there (see the module)."""
    for _ in range(FENCE_RETRIES):
        run = await world.runs.get(run_id, resolve_data="none")
        source = pin_of(run.attributes)
        if run.status in TERMINAL_RUN_STATUSES:
            return Upgrade(run_id, run.workflow_name, "ended", source, target, f"the run is {run.status}")
        if source == target:  # woken all the same: an upgrade cut off between its pin and its wake is finished
            await _wake(world, run, target, target)
            return Upgrade(run_id, run.workflow_name, "current", source, target)
        events, in_band = await read_log(world, run_id)
        definition = registry.workflows.get(run.workflow_name)
        unpinned = source is None and unpinned_for_good(events, pinned_workflow=definition is None or
                                                         definition.pinned)
        replayed = replay_events(events, registry=registry)
        if not replayed.ok:
            return Upgrade(run_id, run.workflow_name, "diverged" if replayed.status == "diverged" else "error",
                           source, target, replayed.message)
        if unpinned:
            await _wake(world, run, None, f"{target}:unpinned")
            return Upgrade(run_id, run.workflow_name, "unpinned", None, target,
                           "it is pinned to no deployment (pinned=False, started on latest, or before pinning): it "
                           "runs on the newest code and stays unpinned")
        try:
            await world.events.create(run_id, {"eventType": "attr_set",
                                               "eventData": {"changes": [pin_change(target)]}},
                                      event_count=len(events), in_band=True, expected_seq_in_band=in_band,
                                      resolve_data="none")
        except InBandSupersededError:
            continue  # the run moved on meanwhile: replay the newer log
        except RunGoneError:
            return Upgrade(run_id, run.workflow_name, "ended", source, target, "the run ended meanwhile")
        if await _retired(world, target):  # retired while the run was replayed: back where it was, not woken
            await world.events.create(run_id, {"eventType": "attr_set", "eventData": {"changes": [pin_change(source)]}},
                                      resolve_data="none")
            return Upgrade(run_id, run.workflow_name, "error", source, target,
                           f"deployment {target!r} was retired while the run was moved to it: it stays on "
                           f"{source or 'no deployment'}")
        await _wake(world, run, target, target)
        return Upgrade(run_id, run.workflow_name, "moved", source, target)
    return Upgrade(run_id, "?", "error", None, target, f"the run kept moving on while it was replayed "
                                                        f"({FENCE_RETRIES} tries): try again")


async def _retired(world: World, deployment: str) -> bool:
    """Whether ``deployment``'s record says it was retired (read after a move's write: see ``retire``)."""
    store = world.deployments
    if store is None:
        return False
    return any(d.deployment_id == deployment and d.retired for d in await store.read())


async def _wake(world: World, run: Run, address: str | None, key: str) -> None:
    """Wake ``run`` on deployment ``address`` (None: wherever its deliveries go, the newest code)."""
    stamp = int(clock_of(world).now().timestamp())
    await world.queue(queue_name_for(run.workflow_name), FlowMessage(
        run.run_id, run.workflow_name, wake=OPERATOR_WAKE, deployment=address).to_payload(),
        idempotency_key=f"{run.run_id}:upgrade:{key}:{stamp}")


async def read_log(world: World, run_id: str) -> tuple[list[Event], int]:
    """The run's whole log (with the values a replay compares) and its in-band count as of that read."""
    events: list[Event] = []
    cursor: str | None = None
    in_band: int | None = None
    while True:
        page = await world.events.list(run_id, cursor=cursor, resolve_data="all")
        if in_band is None and page.snapshot is not None:
            in_band = page.snapshot.seq_in_band
        events.extend(page.data)
        cursor = page.cursor or cursor
        if not page.has_more:
            return events, in_band or 0


@dataclass
class Holding:
    """One deployment's unfinished runs (``UNPINNED`` for runs pinned to none)."""

    deployment: str
    runs: list[Run] = field(default_factory=list[Run])


async def holdings(world: World) -> dict[str, Holding]:
    """Every unfinished run (pending or running, parked included), by the deployment it is pinned to. Reads the
    run listing page by page (as ``awsworld runs --parked`` does)."""
    found: dict[str, Holding] = {}
    cursor: str | None = None
    while True:
        page = await world.runs.list(status=["pending", "running"], limit=100, cursor=cursor, resolve_data="none")
        for run in page.data:
            key = pin_of(run.attributes) or UNPINNED
            found.setdefault(key, Holding(key)).runs.append(run)
        if not page.has_more:
            return found
        cursor = page.cursor


async def runs_on(world: World, deployment: str) -> list[str]:
    """The ids of the unfinished runs pinned to ``deployment``."""
    holding = (await holdings(world)).get(deployment)
    return [] if holding is None else [run.run_id for run in holding.runs]


async def retire(store: DeploymentStore, world: World, deployment: str) -> Deployment:
    """Mark ``deployment`` retired, once it holds no unfinished run and is not the newest; ``UpgradeError`` (nothing
    written) otherwise. Deleting what runs it (a Lambda version) is the caller's: ``cli.deployments``."""
    deployments = await store.read()
    found = next((d for d in deployments if d.deployment_id == deployment), None)
    if found is None:
        raise UpgradeError(f"no deployment {deployment!r} is registered")
    if found.retired:
        return found
    newest = latest(deployments)
    if newest is not None and newest.deployment_id == deployment:
        raise UpgradeError(f"deployment {deployment!r} is the newest: new runs start on it")
    left = await runs_on(world, deployment)
    if left:
        raise UpgradeError(f"deployment {deployment!r} still holds {len(left)} unfinished run(s) ({_some(left)}): "
                           f"move them first with `awsworld upgrade --deployment {deployment}`, or let them finish")
    retired = found.retire(clock_of(world).now())
    await store.put(retired)
    moved = await runs_on(world, deployment)
    if moved:  # an upgrade moved runs to it meanwhile: the record as it was
        await store.put(found)
        raise UpgradeError(f"deployment {deployment!r} was given {len(moved)} run(s) while it was retired "
                           f"({_some(moved)}, by `awsworld upgrade`): it was not retired")
    return retired


def _some(ids: Sequence[str], shown: int = 3) -> str:
    return ", ".join(ids[:shown]) + (f" and {len(ids) - shown} more" if len(ids) > shown else "")


__all__ = ["UNPINNED", "Holding", "Upgrade", "UpgradeError", "holdings", "retire", "runs_on", "target_deployment",
           "upgrade_run"]
