"""What hosts deployments: how a delivery is handed from the deployment that received it to the run's.

A hand-over passes the queue **record itself**, with the receive that holds it, to the target deployment, which
runs it through the same delivery path and acknowledges, redelivers or backs it off as if it had received it.
The deployment that received it reports it failed to its event source without touching it (no back-off), so the
queue neither deletes it nor hands it to anyone else while the receive's visibility lasts. What that buys: no new
message and no new failure semantics. A target that crashes leaves the record to come back after the visibility
timeout, as any crashed delivery does, and a record that keeps failing reaches the dead-letter queue through the
redrive policy, as any other.

The hosts:

- ``lambda_host.versions.LambdaHost``: an asynchronous ``Invoke`` of the target's published version (qualifier), the
  record in the event; the version's flow handler runs it (``awsworld.lambda_host.flow.handle``).
- ``_deployments.local_host.LocalHost``: several deployments' code in one process (``awsworld dev`` keeps the code
  a run started on when modules are reloaded; ``WorkflowTestEnv.deploy``), each with its own worker; a hand-over
  is a task running the target's delivery path on the record, as an asynchronous invocation would.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class DeploymentHost(Protocol):
    """Reaches deployments other than the one a delivery path runs."""

    async def hand_over(self, deployment: str, record: Mapping[str, Any], reroutes: int) -> None:
        """Have ``deployment`` run ``record`` (re-routed ``reroutes`` times with this hand-over), then return at
        once: the target acknowledges it. ``DeploymentUnavailableError`` when the deployment cannot be reached
        (gone: retired, deleted); any other error is transient (the record is retried with back-off)."""
        ...


__all__ = ["DeploymentHost"]
