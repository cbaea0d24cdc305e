"""``MemoryWorld``: the third backend of the ``World`` protocol, assembled from one module per job.

Storage (``storage.py``), the queue (``queue.py``) and streams (``streams.py``) live in this process's memory;
storage and the queue keep time by one clock (``clock``, a ``VirtualClock`` unless given), so the runtime and
the test environment see the same "now" as the log's timestamps. Everything one operation changes is changed without
an ``await`` in between, so a commit is atomic on the event loop without locks.

Retention: a run's retention (``executionContext.retentionSeconds``) is kept in its execution context, as on
AWS, but nothing here expires: a run lives as long as the process (or ``dev --state``). On AWS a finished run
disappears after its retention (``aws/retention.py``); nothing a test can observe within a run's life differs.
"""

from __future__ import annotations

from ..world.clock import Clock
from ..world.limits import max_value_bytes as default_max_value_bytes
from ..world.shared.world import WorldBase
from .clock import VirtualClock
from .deployments import MemoryDeployments
from .limiters import MemoryLimiters
from .published import MemoryPublished
from .queue import MemoryQueue
from .schedules import MemorySchedules
from .storage import MemoryStorage
from .streams import MemoryStreams
from .watch import MemoryWatch


class MemoryWorld(WorldBase):
    def __init__(self, *, clock: Clock | None = None, deployment_id: str | None = None,
                 storage: MemoryStorage | None = None, max_value_bytes: int | None = None) -> None:
        """``storage``: share another World's storage (and its clock), as separate processes share one table.
        ``max_value_bytes``: the largest value, queue payload and stream chunk (with its frame) taken (default:
        ``AWSWORLD_MAX_VALUE_BYTES``, else 64 MiB; ``world/limits.py``)."""
        super().__init__()
        limit = max_value_bytes if max_value_bytes is not None else default_max_value_bytes()
        self.max_value_bytes: int = limit
        self.clock: Clock = clock or (storage.clock if storage is not None else VirtualClock())
        self.storage = storage or MemoryStorage(self.clock, deployment_id=deployment_id, max_value_bytes=limit)
        self._store_with(self.storage)  # the contract's storage methods, over these records
        self.watch = MemoryWatch(self.storage.state)  # the watchdog's index (world.watch): awsworld's extension
        self.schedules = MemorySchedules(self.storage.state.schedules, self.clock)  # awsworld's extension too
        self.published = MemoryPublished(self.storage.state.published)  # the consumers' workflow names
        self.deployments = MemoryDeployments(self.storage.state.deployments)  # the code's versions
        self.limiters = MemoryLimiters(self.storage.state.limiters)  # limits across runs: awsworld's extension
        self.memory_queue = MemoryQueue(self.clock, deployment_id=deployment_id, max_payload_bytes=limit)
        self._publish_with(self.memory_queue)
        self.streams = MemoryStreams(self.storage, max_value_bytes=limit)

    async def delete_run(self, run_id: str) -> bool:
        """Delete an ended run's records and streams (``world/rules/erasure.py``; ``MemoryStorage.delete_run``)."""
        deleted = self.storage.delete_run(run_id)
        self.streams.store.forget(run_id)
        return deleted

    async def close(self) -> None:
        """Close the stream sessions still open."""
        await self.streams.aclose()
