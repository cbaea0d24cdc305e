"""The registry of deployments: which versions of the code exist, what they hold, which is the newest, which retired.

Every deployment registers itself when it loads (the flow function's version at its SnapStart initialisation, or
at its first cold start; ``awsworld dev`` for each snapshot of the modules; a test environment's versions): one
small record per deployment in the World (``world.deployments``, awsworld's extension like ``world.published``),
kept until it is retired, so ``awsworld deployments`` can list the deployments with their unfinished runs,
``awsworld upgrade --to latest`` knows the newest, and a host knows not to hand a delivery to a retired one.

``code`` is a digest of the deployment's workflow modules (``identity.code_digest``): ``awsworld upgrade`` replays
runs against the code on the operator's machine and refuses to move them to a deployment whose code it is not (a
replay against other code would prove nothing).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

DEPLOYMENTS_OF_DEV = "awsworld dev"
DEPLOYMENTS_OF_LAMBDA = "the flow function"


@dataclass(frozen=True)
class Deployment:
    """One deployment: ``deployment_id`` (``v7``, ``dev-1a2b3c4d``); ``host``: who runs it, for people;
    ``target``: how another host reaches it (the flow function's qualified ARN; None in one process);
    ``code``: the digest of its modules; ``retired_at``: when it was retired (None while it is invokable)."""

    deployment_id: str
    host: str
    registered_at: datetime
    workflows: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    code: str | None = None
    target: str | None = None
    retired_at: datetime | None = None

    @property
    def retired(self) -> bool:
        return self.retired_at is not None

    def retire(self, at: datetime) -> Deployment:
        return replace(self, retired_at=at)

    def to_json(self) -> str:
        return json.dumps({"deploymentId": self.deployment_id, "host": self.host,
                           "registeredAt": self.registered_at.isoformat(), "workflows": list(self.workflows),
                           "modules": list(self.modules), "code": self.code, "target": self.target,
                           "retiredAt": None if self.retired_at is None else self.retired_at.isoformat()},
                          separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Deployment:
        data = json.loads(text)
        retired = data.get("retiredAt")
        return cls(str(data["deploymentId"]), str(data["host"]), datetime.fromisoformat(data["registeredAt"]),
                   tuple(data.get("workflows") or ()), tuple(data.get("modules") or ()), data.get("code"),
                   data.get("target"), None if retired is None else datetime.fromisoformat(retired))


class DeploymentStore(Protocol):
    """``world.deployments``: every deployment's record."""

    async def register(self, deployment: Deployment) -> bool:
        """Store ``deployment`` unless one with its id is registered already (a second cold start of a version
        keeps the first record); True when it was stored."""
        ...

    async def read(self) -> list[Deployment]:
        """Every record, oldest registration first (strongly consistent)."""
        ...

    async def put(self, deployment: Deployment) -> None:
        """Replace the record with its id (a retirement)."""
        ...


def deployments_of(world: object) -> DeploymentStore | None:
    """The World's store of deployments, or None (a World that keeps none: ``HttpWorld``)."""
    return getattr(world, "deployments", None)


def latest(deployments: list[Deployment]) -> Deployment | None:
    """The newest deployment not retired (the one new runs start on), or None."""
    live = [d for d in deployments if not d.retired]
    return max(live, key=lambda d: d.registered_at) if live else None


def by_registration(deployments: list[Deployment]) -> list[Deployment]:
    return sorted(deployments, key=lambda d: (d.registered_at, d.deployment_id))


__all__ = ["DEPLOYMENTS_OF_DEV", "DEPLOYMENTS_OF_LAMBDA", "Deployment", "DeploymentStore", "by_registration",
           "deployments_of", "latest"]
