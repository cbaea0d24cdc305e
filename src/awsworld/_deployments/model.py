"""The registry of deployments: which versions of the code exist, what they hold, which is the newest, which retired.

Every deployment registers itself when it loads (the flow function's version at its SnapStart initialisation, or
at its first cold start; ``awsworld dev`` for each snapshot of the modules; a test environment's versions): one
small record per deployment in the World (``world.deployments``, awsworld's extension like ``world.published``:
the record and the store are the contract's, ``world/deployments.py``),
kept until it is retired, so ``awsworld deployments`` can list the deployments with their unfinished runs,
``awsworld upgrade --to latest`` knows the newest, and a host knows not to hand a delivery to a retired one.

``code`` is a digest of the deployment's workflow modules (``identity.code_digest``): ``awsworld upgrade`` replays
runs against the code on the operator's machine and refuses to move them to a deployment whose code it is not (a
replay against other code would prove nothing).
"""

from __future__ import annotations

from ..world.deployments import Deployment, DeploymentStore

DEPLOYMENTS_OF_DEV = "awsworld dev"
DEPLOYMENTS_OF_LAMBDA = "the flow function"


def latest(deployments: list[Deployment]) -> Deployment | None:
    """The newest deployment not retired (the one new runs start on), or None."""
    live = [d for d in deployments if not d.retired]
    return max(live, key=lambda d: d.registered_at) if live else None


async def newest_holding(store: DeploymentStore | None, workflow: str) -> str | None:
    """The deployment a start of ``workflow`` that may wait for a concurrency slot is pinned to at creation: the
    newest one (the code new runs start on), if it registers ``workflow``; None (the run's first delivery pins it,
    as any start's) when the World keeps no deployments, none is registered, or the newest lacks the workflow
    (a roll-out under way). Why at creation: a run waiting for its slot has no delivery until the slot is granted,
    minutes or days later, and a pin written then would name whatever code is live by then, which may have
    renamed the workflow or changed its parameters: the run would fail at once (``UNKNOWN_WORKFLOW``, a
    ``TypeError``) where a sleeping run of the same code goes on (docs/how-to/flow-control.md). One read of the
    deployments' records per limited start (``run_control.RunStarter.start``)."""
    if store is None:
        return None
    newest = latest(await store.read())
    return newest.deployment_id if newest is not None and workflow in newest.workflows else None


__all__ = ["DEPLOYMENTS_OF_DEV", "DEPLOYMENTS_OF_LAMBDA", "latest", "newest_holding"]
