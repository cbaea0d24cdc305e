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

from ..world.deployments import Deployment

DEPLOYMENTS_OF_DEV = "awsworld dev"
DEPLOYMENTS_OF_LAMBDA = "the flow function"


def latest(deployments: list[Deployment]) -> Deployment | None:
    """The newest deployment not retired (the one new runs start on), or None."""
    live = [d for d in deployments if not d.retired]
    return max(live, key=lambda d: d.registered_at) if live else None


__all__ = ["DEPLOYMENTS_OF_DEV", "DEPLOYMENTS_OF_LAMBDA", "latest"]
