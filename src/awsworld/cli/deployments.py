"""``awsworld deployments`` and ``awsworld upgrade``: the versions of the code a World's runs are pinned to.

``awsworld deployments`` lists every registered deployment with its unfinished runs
(pending, running, parked): the newest is ``live`` (new runs start on it), an older one holding runs is
``draining``, one holding none is ``drained`` (safe to retire), and a retired one runs nothing. Runs pinned to no
deployment (``@workflow(pinned=False)``, runs from before pinning) are counted on a line of their own.

``awsworld deployments retire D`` retires a drained deployment: its record is marked, and when it is a version of
the flow function, that version is deleted (``lambda:DeleteFunction`` with its qualifier: the operator's
credentials). It refuses the newest deployment and one that still holds runs (move them first with
``awsworld upgrade --deployment D``, or let them finish), and writes nothing then. ``awsworld deployments prune``
retires every drained deployment but the newest ``--keep`` (3): what a deploy pipeline runs after ``sam deploy``,
so the versions Lambda keeps (until deleted) stay bounded.

``awsworld upgrade RUN... | --deployment D [--to latest|DEPLOYMENT]`` moves runs to another deployment on purpose:
each is first replayed against the code on this machine (``-m MODULE``, or ``AWSWORLD_MODULES``, as
``awsworld replay`` does), which must be the target's (the digest of the modules defining its workflows and steps
is compared with the one the target registered), and moved only if its replay matches; a run that diverges stays
where it is and is printed with where and what differs (exit 1). A run pinned to no deployment (``pinned=False``,
started on ``latest``, or before pinning) is replayed and woken but stays unpinned: it follows the newest code.
"""

from __future__ import annotations

import argparse
import asyncio
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .errors import CliError, usage
from .output import print_json, print_table, remote, when
from .replay import load_modules

if TYPE_CHECKING:
    from .._deployments.upgrade import Holding, Upgrade
    from ..world.deployments import Deployment

DEFAULT_KEEP = 3
SHOWN_RUNS = 5


def register(sub: Any) -> None:
    listing = sub.add_parser("deployments", help="the deployments runs are pinned to, with their unfinished runs; "
                             "retire or prune drained ones", description=__doc__,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    listing.add_argument("--json", action="store_true", help="print JSON for scripts (stable keys)")
    listing.set_defaults(handler=_list)
    actions = listing.add_subparsers(dest="action", metavar="ACTION")
    retiring = actions.add_parser("retire", help="retire a drained deployment (and delete its Lambda version)")
    retiring.add_argument("deployment", metavar="DEPLOYMENT")
    retiring.set_defaults(handler=_retire)
    pruning = actions.add_parser("prune", help="retire every drained deployment but the newest --keep")
    pruning.add_argument("--keep", type=int, default=DEFAULT_KEEP,
                         help=f"how many of the newest deployments to keep whatever they hold (default {DEFAULT_KEEP})")
    pruning.set_defaults(handler=_prune)

    upgrade = sub.add_parser("upgrade", help="move runs to another deployment on purpose, after replaying them "
                             "against its code", description=__doc__,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    upgrade.add_argument("run_ids", nargs="*", metavar="RUN")
    upgrade.add_argument("--deployment", metavar="DEPLOYMENT", help="move every unfinished run of this deployment")
    upgrade.add_argument("--to", metavar="DEPLOYMENT",  # None: _deployments.pins.LATEST, read where it is used
                         help="the deployment to move them to (default: latest, the newest)")
    upgrade.add_argument("--module", "-m", action="append", default=[],
                         help="a module defining the target's workflows (default: AWSWORLD_MODULES)")
    upgrade.add_argument("--json", action="store_true", help="print JSON for scripts (stable keys)")
    upgrade.set_defaults(handler=_upgrade)


# -- listing ---------------------------------------------------------------------------------------------------

def status_of(deployment: Deployment, newest: Deployment | None, held: int) -> str:
    if deployment.retired:
        return "retired"
    if newest is not None and deployment.deployment_id == newest.deployment_id:
        return "live"
    return "draining" if held else "drained"


def _document(deployments: list[Deployment], held: dict[str, Holding]) -> dict[str, Any]:
    from .._deployments.model import latest
    from .._deployments.upgrade import UNPINNED, Holding

    newest = latest(deployments)
    rows = []
    for deployment in deployments:
        runs = held.get(deployment.deployment_id, Holding(deployment.deployment_id)).runs
        rows.append({"deploymentId": deployment.deployment_id, "status": status_of(deployment, newest, len(runs)),
                     "host": deployment.host, "registeredAt": when(deployment.registered_at),
                     "retiredAt": when(deployment.retired_at), "unfinishedRuns": len(runs),
                     "runs": [run.run_id for run in runs[:SHOWN_RUNS]], "workflows": list(deployment.workflows),
                     "code": deployment.code, "target": deployment.target})
    known = {d.deployment_id for d in deployments}
    unknown = {key: len(h.runs) for key, h in held.items() if key not in known and key != UNPINNED}
    return {"deployments": rows, "unpinnedRuns": len(held.get(UNPINNED, Holding(UNPINNED)).runs),
            "unregistered": unknown}


def _list(args: argparse.Namespace) -> int:
    from .._deployments.upgrade import holdings

    async def go() -> dict[str, Any]:
        async with remote() as client:
            store = client.world.deployments
            assert store is not None
            return _document(await store.read(), await holdings(client.world))

    document = asyncio.run(go())
    if args.json:
        print_json(document)
        return 0
    rows = [[row["deploymentId"], row["status"], _short(row["registeredAt"]), str(row["unfinishedRuns"]),
             ", ".join(row["runs"]) + (" ..." if row["unfinishedRuns"] > SHOWN_RUNS else ""), row["host"]]
            for row in document["deployments"]]
    if rows:
        print_table(["DEPLOYMENT", "STATUS", "REGISTERED", "UNFINISHED", "RUNS", "HOST"], rows)
    else:
        print("no deployment is registered in this World (runs are pinned once a deployment takes them)")
    if document["unpinnedRuns"]:
        print(f"{document['unpinnedRuns']} unfinished run(s) pinned to no deployment (pinned=False, or started "
              "before pinning): they run on the newest code")
    for deployment, count in document["unregistered"].items():
        print(f"{count} unfinished run(s) pinned to {deployment}, which is not registered: their deliveries fail "
              "them with DeploymentMismatchError unless a host still runs it (awsworld upgrade moves them)")
    return 0


def _short(moment: str | None) -> str:
    return "" if moment is None else datetime.fromisoformat(moment).strftime("%Y-%m-%d %H:%M:%S")


# -- retiring --------------------------------------------------------------------------------------------------

async def _retire_one(client: Any, deployment: str) -> Deployment:
    from .._deployments.upgrade import UpgradeError, retire

    store = client.world.deployments
    assert store is not None
    try:
        retired = await retire(store, client.world, deployment)
    except UpgradeError as refused:
        raise CliError(str(refused), "nothing was written") from None
    if retired.target is not None:
        # Imported here: the Lambda host needs botocore, and `awsworld --help` or a memory-only install must not
        # (tests/deploy/test_packaging.py runs the CLI where the aws-sdk extra is not installed).
        from ..lambda_host.versions import delete_version
        await delete_version(client.world.clients, retired.target)
    return retired


def _retire(args: argparse.Namespace) -> int:
    async def go() -> Deployment:
        async with remote() as client:
            return await _retire_one(client, args.deployment)

    retired = asyncio.run(go())
    print(f"retired {retired.deployment_id}" + (f" (deleted {retired.target})" if retired.target else ""))
    return 0


def _prune(args: argparse.Namespace) -> int:
    from .._deployments.upgrade import holdings

    if args.keep < 1:
        raise usage("--keep must be at least 1 (the newest deployment takes new runs)")

    async def go() -> list[Deployment]:
        async with remote() as client:
            store = client.world.deployments
            assert store is not None
            deployments = [d for d in await store.read() if not d.retired]
            kept = {d.deployment_id for d in deployments[-args.keep:]}
            held = await holdings(client.world)
            drained = [d for d in deployments if d.deployment_id not in kept and d.deployment_id not in held]
            return [await _retire_one(client, d.deployment_id) for d in drained]

    retired = asyncio.run(go())
    for deployment in retired:
        print(f"retired {deployment.deployment_id}" + (f" (deleted {deployment.target})" if deployment.target else ""))
    print(f"{len(retired)} drained deployment(s) retired; the newest {args.keep} kept")
    return 0


# -- upgrading -------------------------------------------------------------------------------------------------

def _upgrade(args: argparse.Namespace) -> int:
    from .._deployments.identity import registry_digest
    from .._deployments.model import refusal
    from .._deployments.pins import LATEST
    from .._deployments.upgrade import UpgradeError, runs_on, target_deployment, upgrade_run
    from ..authoring.definitions import REGISTRY

    if bool(args.run_ids) == bool(args.deployment):
        raise usage("name RUNs or --deployment DEPLOYMENT (one of them)", "awsworld upgrade --help")
    load_modules(args.module)
    if not REGISTRY.workflows:
        raise usage("no workflow is registered: the runs are replayed against the target's code first",
                    "pass -m MODULE (the modules of the deployment you move them to), or set AWSWORLD_MODULES")

    async def go() -> tuple[Deployment, list[Upgrade]]:
        async with remote() as client:
            store = client.world.deployments
            assert store is not None
            try:
                target = await target_deployment(store, LATEST if args.to is None else args.to)
            except UpgradeError as refused:
                raise CliError(str(refused), "`awsworld deployments` lists them") from None
            here = registry_digest(REGISTRY)
            if target.code is not None and target.code != here:
                raise CliError(f"the modules loaded here are not deployment {target.deployment_id}'s code (their "
                               f"digest {here[:12]} differs from its {target.code[:12]}): a replay against them "
                               "would prove nothing, and nothing was written",
                               "check out the code of that deployment, or name the deployment of this code with "
                               "--to")
            run_ids = list(args.run_ids) or await runs_on(client.world, args.deployment)
            if not run_ids and (unknown := refusal(await store.read(), args.deployment)) is not None \
                    and unknown.startswith("no deployment"):  # a typo moved nothing and said "0 of 0 moved"
                raise CliError(f"{unknown}, and no unfinished run is pinned to it: nothing was moved",
                               "`awsworld deployments` lists them, with the runs each holds")
            return target, [await upgrade_run(client.world, run_id, target.deployment_id, REGISTRY)
                            for run_id in run_ids]

    target, results = asyncio.run(go())
    if args.json:
        print_json({"to": target.deployment_id, "runs": [
            {"runId": r.run_id, "workflow": r.workflow, "outcome": r.outcome, "from": r.source, "to": r.target,
             "detail": r.detail} for r in results]})
    else:
        for result in results:
            print(_said(result))
        moved = sum(r.outcome == "moved" for r in results)
        unpinned = sum(r.outcome == "unpinned" for r in results)
        print(f"{moved} of {len(results)} run(s) moved to {target.deployment_id}"
              + (f"; {unpinned} unpinned run(s) replayed and woken, left unpinned" if unpinned else ""))
        if any(r.outcome == "diverged" for r in results):  # where it differs is above; what to do is here
            print("a run that stays goes on, on the code it is pinned to; to move it, branch the calls the new code "
                  "changed with patched() so that its log replays (docs/how-to/changing-code.md), or, where the "
                  "divergence says what to change (a value the code cannot read, an input its parameters do not "
                  "take), change that; then upgrade again")
    return 0 if all(r.ok for r in results) else 1


def _said(result: Upgrade) -> str:
    source = result.source or "no deployment"
    if result.outcome == "moved":
        return f"moved {result.run_id} ({result.workflow}) from {source} to {result.target}: replayed, and woken there"
    if result.outcome == "current":
        return f"{result.run_id} ({result.workflow}) is on {result.target} already: woken there"
    if result.outcome == "unpinned":
        return (f"{result.run_id} ({result.workflow}) replays on {result.target}'s code and was woken; not moved: "
                f"{result.detail}")
    if result.outcome == "ended":
        return f"{result.run_id} ({result.workflow}): {result.detail}; not moved"
    what = "its replay differs" if result.outcome == "diverged" else "it could not be replayed"
    where = f"on {source}" if result.source else "unpinned"
    return (f"{result.run_id} ({result.workflow}) stays {where}: {what} against {result.target}'s code at "
            f"{result.detail}")
