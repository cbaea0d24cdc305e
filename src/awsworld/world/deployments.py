"""Deployments in the contract: the record each deployment of the code keeps in the World (``Deployment``), and the
store every World gives (``DeploymentStore``, ``world.deployments``: awsworld's extension, like
``world.published``).

What a deployment records and when, which is the newest, and how runs are pinned to one are
``awsworld._deployments``'s; each World keeps the records in its own store (``_memory/deployments.py``,
``aws/deployment_store.py``), and reads them back oldest registration first (``by_registration``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol


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


def by_registration(deployments: list[Deployment]) -> list[Deployment]:
    return sorted(deployments, key=lambda d: (d.registered_at, d.deployment_id))
