"""A deployment's id and the digest of its code, and its registration (``model``).

- On Lambda the id is the flow function's published version: ``v7`` (``AWS_LAMBDA_FUNCTION_VERSION``, which
  Lambda sets to the version an invocation runs). ``$LATEST`` is no deployment: a function invoked unqualified
  (no published versions) pins nothing.
- ``awsworld dev``'s id is derived from the code it loaded: ``dev-`` and the first ten hex digits of the digest of
  the project's module files and of those defining its workflows and steps, so a revert of an edit is the same
  deployment again.
- A test environment names its versions (``WorkflowTestEnv(deployment="v1")``).

The digest (``code_digest``) is SHA-256 over each module's name and file bytes, in name order: what
``awsworld upgrade`` compares with the code it replays against.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from ..authoring.definitions import Registry
from ..world.deployments import Deployment
from ..world.protocol import World

LATEST_VERSION = "$LATEST"
DIGEST_CHARS = 10


def lambda_deployment(version: str | None = None) -> str | None:
    """The deployment id of the flow function's version this process runs (``v7``), or None (``$LATEST``, or not
    on Lambda)."""
    version = version if version is not None else os.environ.get("AWS_LAMBDA_FUNCTION_VERSION")
    if not version or version == LATEST_VERSION:
        return None
    return f"v{version}"


def lambda_version(deployment: str) -> str | None:
    """The published version a Lambda deployment id names (``v7`` -> ``7``), or None for another kind of id."""
    return deployment[1:] if deployment.startswith("v") and deployment[1:].isdigit() else None


def code_digest(files: Mapping[str, Path]) -> str:
    """SHA-256 (hex) over each module's name and file bytes, in name order (a file that cannot be read counts as
    empty: its name still counts)."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0")
        with contextlib.suppress(OSError):
            digest.update(files[name].read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def definition_files(registry: Registry) -> dict[str, Path]:
    """The files of the modules that define ``registry``'s workflows and steps, by module name."""
    files: dict[str, Path] = {}
    for definition in [*registry.workflows.values(), *registry.steps.values()]:
        file = getattr(sys.modules.get(definition.fn.__module__), "__file__", None)
        if file:
            files[definition.fn.__module__] = Path(file)
    return files


def registry_digest(registry: Registry) -> str:
    """The digest of the modules that define ``registry``'s workflows and steps: the ``code`` every host records for
    its deployment, and what ``awsworld upgrade`` computes for the code it replays against, the same way."""
    return code_digest(definition_files(registry))


def dev_deployment(digest: str) -> str:
    return f"dev-{digest[:DIGEST_CHARS]}"


async def register(world: World, deployment_id: str, registry: Registry, *, host: str, code: str | None = None,
                   target: str | None = None) -> bool:
    """Record the deployment in the World (once: a later registration of the same id keeps the first record).
    False when the World keeps no deployments or knew it already."""
    store = world.deployments
    if store is None:
        return False
    return await store.register(Deployment(deployment_id, host, world.clock.now(),
                                           tuple(sorted(registry.workflows)), tuple(registry.modules()),
                                           code or registry_digest(registry), target))


__all__ = ["code_digest", "definition_files", "dev_deployment", "lambda_deployment", "lambda_version", "register",
           "registry_digest"]
