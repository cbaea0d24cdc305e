"""What every World is besides its parts: the spec version, the capabilities, the storage namespaces over its
engine, the Queue's publishing calls, and closing (also as an async context manager).

Each World is assembled from one module per job (``aws/world.py``, ``_memory/world.py``); this is the part of the
assembly that is the same for all of them, so a capability or the way a World closes is stated once. Both
Worlds implement the same contract and the same optional features, hence one ``Capabilities``.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self

from ..entities import Capabilities
from ..ids import SPEC_VERSION_CURRENT
from ..queue import QueueAPI
from .storage import StorageEngine, WorldStorage


class WorldBase:
    spec_version: int = SPEC_VERSION_CURRENT

    def __init__(self) -> None:
        self.capabilities = Capabilities(hook_retention={"active": True}, in_band_fence=True)

    def _store_with(self, engine: StorageEngine[Any]) -> None:
        """The contract's storage namespaces (``runs``, ``steps``, ``events``, ``hooks``) are ``WorldStorage``'s over
        the World's storage ``engine`` (``world/shared/storage.py``)."""
        front = WorldStorage(engine)
        self.runs, self.steps, self.events, self.hooks = front.runs, front.steps, front.events, front.hooks

    def _publish_with(self, queue: QueueAPI) -> None:
        """The contract's publishing calls (``queue``, ``queue_batch``, ``get_deployment_id``) are ``queue``'s
        own bound methods: no wrapper between a send and its queue."""
        self.queue = queue.queue
        self.queue_batch = queue.queue_batch
        self.get_deployment_id = queue.get_deployment_id

    async def close(self) -> None:
        """Release what the World holds (clients, stream sessions); a World's own ``close`` says what."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
