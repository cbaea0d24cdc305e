"""SnapStart: initialise before the snapshot, and re-make after each restore what restored copies must not share.

With SnapStart (template parameter ``SnapStart``, on by default) Lambda initialises a function when a version
is published, snapshots the microVM, and starts new environments by restoring that snapshot: every restored
copy begins with the same memory. Lambda's Python runtime calls the hooks registered with
``snapshot_restore_py`` (preinstalled in the runtime; absent elsewhere, where nothing here is registered):

before the snapshot (``prime``), so a restored environment starts warm:
    the workflow modules (``AWSWORLD_MODULES``) imported, the World and Worker built, botocore imported and
    the service models of the clients a delivery uses loaded (``AWSClients.get`` makes a client without a
    request), and every contract model's validator built (they are built on first use otherwise). One
    request is made, first: the version's workflow names are published (``_published.model``: this is before
    the ``live`` alias sends the version any delivery, which is what lets a client refuse a name no version
    registers); its client is then dropped (``AWSClients.renew``), so no connection is carried into the
    snapshot. A version that cannot publish fails its initialisation, and the deploy with it: clients would
    otherwise refuse its new workflows on the previous version's names.

after each restore (``renew``), what would otherwise be shared by every copy:
    - connections and credentials: the World's clients are dropped with their connection pools and the
      credentials they resolved (``AWSClients.renew``); the next request opens its own connection and
      resolves credentials anew, keeping the service models already loaded;
    - random seeds: the ``random`` module's generator (retry jitter here and in botocore) is reseeded from
      the OS, or every copy would draw the same "random" delays;
    - state derived from the container's clock: botocore's adaptive retry rate limiter (measured send rates
      and timestamps) goes with the clients. awsworld keeps no other clock- or entropy-derived id per
      container: run, message and stream ids are drawn per call (ULIDs from ``os.urandom`` and the current
      millisecond, run seeds from ``secrets``), never at import.

Both hooks are plain functions of a container, so tests call them in-process (tests/deploy).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from types import ModuleType

from ..world.wire_model import WireModel
from .container import Container

log = logging.getLogger("awsworld.lambda")

#: The clients a delivery uses; S3 holds large values and stream chunks, KMS is primed only when configured.
PRIMED_SERVICES = ("dynamodb", "sqs", "s3")

_hooks: ModuleType | None
try:
    import snapshot_restore_py as _hooks
except ImportError:  # not in Lambda's runtime (or a runtime without SnapStart): nothing is ever snapshotted
    _hooks = None


def _models(base: type[WireModel]) -> list[type[WireModel]]:
    found: list[type[WireModel]] = []
    for sub in base.__subclasses__():
        found += [sub, *_models(sub)]
    return found


def prime(container: Container) -> None:
    """Everything a first delivery would do before its first request, done before the snapshot."""
    world = container.world  # imports AWSWORLD_MODULES and builds the World
    container.worker  # noqa: B018 - built on first use
    container.run(container.publish_names(ahead=True))
    world.clients.renew()  # the publication's connection and credentials stay out of the snapshot
    services = PRIMED_SERVICES + (("kms",) if world.config.kms_key_id else ())
    for service in services:
        container.run(world.clients.get(service))
    for model in _models(WireModel):
        if not model.__pydantic_complete__:
            model.model_rebuild(force=True)
    log.info("primed for the snapshot: %s clients, %d models", ", ".join(services), len(_models(WireModel)))


def renew(container: Container) -> None:
    """After a restore: new connections, credentials and retry state; a reseeded ``random``."""
    world = container.built_world
    if world is not None:
        world.clients.renew()
    random.seed()


_installed: set[Callable[[], Container]] = set()


def install(container: Callable[[], Container]) -> bool:
    """Register ``prime`` and ``renew`` for the container ``container()`` returns (the handler modules' default
    one), when the runtime offers SnapStart hooks; returns whether they are registered. Once per factory:
    both handler modules install the same default container."""
    if _hooks is None:
        return False
    if container not in _installed:
        _installed.add(container)
        _hooks.register_before_snapshot(lambda: prime(container()))
        _hooks.register_after_restore(lambda: renew(container()))
    return True
