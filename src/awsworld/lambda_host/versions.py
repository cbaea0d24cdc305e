"""The flow function's published versions as deployments: handing a delivery to one, and deleting a retired one.

Why an asynchronous ``Invoke`` of the run's version, and not a queue and event source mapping per version: every
deployment already publishes a version behind the ``live`` alias (SnapStart), and SAM keeps the versions it
publishes (``DeletionPolicy: Retain``), so an old version is invokable by its qualifier with nothing created per
deploy. A queue and mapping per version would have to be created by the function at its initialisation (with the
rights to create queues and mappings), would poll while idle (a few hundred thousand ``ReceiveMessage`` requests a
month per retained version), and would multiply ``MaximumConcurrency``. The price of the invoke: every delivery of
a run on an old version passes through ``live`` first (one ``Invoke`` request, and a few milliseconds of the live
function), which is what docs/concepts/costs.md, "A delivery re-routed to its run's version", measures.

The event carries the SQS **record** itself, receipt handle included (``_deployments.host``): the target version
runs it through the same delivery path as the batch handler, then deletes it, changes its visibility (a back-off)
or re-sends it (a redelivery) exactly as it would a record of its own batch, while ``live`` reports the record
failed to the event source mapping so the mapping neither deletes it nor backs it off. A target that crashes (or is
throttled past the visibility timeout) leaves the record to reappear, as any crashed delivery does, and a record
that keeps failing reaches the dead-letter queue through the redrive policy. Lambda's own retries of an
asynchronous event (two, by default) only repeat a delivery the queue would repeat anyway; a retry that comes after
the record reappeared holds a stale receipt, so its delete does nothing, and the run's fences make the second
delivery harmless.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from botocore.exceptions import ClientError

from .._deployments.identity import lambda_version
from .._deployments.pins import DeploymentUnavailableError
from ..aws.clients import AWSClients

HAND_OVER = "awsworldHandOver"
"""The key of a hand-over event (``{"awsworldHandOver": {"record": ..., "reroutes": n, "to": "v7"}}``)."""
GONE = ("ResourceNotFoundException",)


def hand_over_event(record: Mapping[str, Any], reroutes: int, deployment: str) -> dict[str, Any]:
    return {HAND_OVER: {"record": dict(record), "reroutes": reroutes, "to": deployment}}


def is_hand_over(event: object) -> bool:
    return isinstance(event, dict) and isinstance(event.get(HAND_OVER), dict)


def function_name() -> str | None:
    """This function's name (Lambda sets ``AWS_LAMBDA_FUNCTION_NAME``), or None off Lambda."""
    return os.environ.get("AWS_LAMBDA_FUNCTION_NAME") or None


def version_target(deployment: str) -> str | None:
    """How a deployment of this function is reached and deleted: ``name:version`` (a partial ARN Lambda takes as
    ``FunctionName``), or None off Lambda."""
    name, version = function_name(), lambda_version(deployment)
    return None if name is None or version is None else f"{name}:{version}"


class LambdaHost:
    """Hands a record to another published version of this function (``_deployments.host``)."""

    def __init__(self, clients: AWSClients, name: str | None = None) -> None:
        self.clients = clients
        self.name = name or function_name()

    async def hand_over(self, deployment: str, record: Mapping[str, Any], reroutes: int) -> None:
        version = lambda_version(deployment)
        if version is None or self.name is None:
            raise DeploymentUnavailableError(deployment, "it is not a published version of this function")
        client = await self.clients.get("lambda")
        try:
            await client.invoke(FunctionName=self.name, Qualifier=version, InvocationType="Event",
                                Payload=json.dumps(hand_over_event(record, reroutes, deployment)).encode())
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in GONE:
                raise DeploymentUnavailableError(deployment, "its Lambda version was deleted") from None
            raise


async def delete_version(clients: AWSClients, target: str) -> bool:
    """Delete a retired deployment's Lambda version (``name:version``); False when it was gone already."""
    name, _, version = target.rpartition(":")
    client = await clients.get("lambda")
    try:
        await client.delete_function(FunctionName=name, Qualifier=version)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") in GONE:
            return False
        raise
    return True


__all__ = ["HAND_OVER", "LambdaHost", "delete_version", "function_name", "hand_over_event", "is_hand_over",
           "version_target"]
