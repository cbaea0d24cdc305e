"""``world.deployments`` in memory: the records in the World's storage (``State.deployments``, shared by Worlds that
share storage, as processes share a table)."""

from __future__ import annotations

from ..world.deployments import Deployment, by_registration


class MemoryDeployments:
    def __init__(self, records: dict[str, Deployment]) -> None:
        """``records``: the storage's deployments, by id."""
        self.records = records

    async def register(self, deployment: Deployment) -> bool:
        if deployment.deployment_id in self.records:
            return False
        self.records[deployment.deployment_id] = deployment
        return True

    async def read(self) -> list[Deployment]:
        return by_registration(list(self.records.values()))

    async def put(self, deployment: Deployment) -> None:
        self.records[deployment.deployment_id] = deployment
