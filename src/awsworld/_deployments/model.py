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


def refusal(deployments: list[Deployment], deployment_id: str, workflow: str | None = None) -> str | None:
    """Why runs (of ``workflow``) cannot be pinned to ``deployment_id`` (one no deployment of ``deployments`` is, one
    retired: it runs nothing, or one whose code does not register ``workflow``), or None. What ``awsworld upgrade
    --to`` and a start naming its deployment (``Client.options(deployment=...)``) both refuse, before they write
    anything: such a run would be re-routed until it failed with ``DEPLOYMENT_MISMATCH`` ("could not be reached ...
    retired, or its Lambda version deleted", of a name that was only mistyped), or wait out the unknown-workflow
    window before failing with ``UNKNOWN_WORKFLOW``."""
    named = next((d for d in deployments if d.deployment_id == deployment_id), None)
    if named is None:
        known = ", ".join(d.deployment_id for d in deployments if not d.retired) or "none"
        return f"no deployment {deployment_id!r} is registered (registered: {known})"
    if named.retired:
        return f"deployment {deployment_id!r} was retired: it runs nothing"
    if workflow is not None and named.workflows and workflow not in named.workflows:
        return (f"deployment {deployment_id!r} does not register workflow {workflow!r} (its workflows: "
                f"{', '.join(named.workflows)})")
    return None


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


__all__ = ["DEPLOYMENTS_OF_DEV", "DEPLOYMENTS_OF_LAMBDA", "latest", "newest_holding", "refusal"]
