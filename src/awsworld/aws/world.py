"""``AWSWorld``: the contract on DynamoDB, SQS and S3, assembled from one module per job."""

from __future__ import annotations

from ..world.clock import SYSTEM_CLOCK
from ..world.events import Event
from ..world.pages import collect_pages
from ..world.shared.world import WorldBase
from .clients import AWSClients, RequestStats
from .config import AWSConfig
from .deployment_store import DynamoDeployments
from .limiter_store import DynamoLimiters
from .log.erasure import RunEraser
from .log.storage import DynamoStorage
from .log.watch_api import WatchAPI
from .published_store import DynamoPublished
from .queue.sqs_queue import SqsQueue
from .schedule_store import DynamoSchedules
from .streams.streams import StreamsAPI
from .values import ValueStore


class AWSWorld(WorldBase):
    def __init__(self, config: AWSConfig | None = None) -> None:
        super().__init__()
        self.config = config or AWSConfig.from_env()
        self.clock = SYSTEM_CLOCK  # the World's timestamps are the system clock's
        self.clients = AWSClients(self.config)
        self._init_storage()
        self._init_queue_streams()

    def _init_storage(self) -> None:
        self.values = ValueStore(self.clients)
        self.storage = DynamoStorage(self.clients, self.values)
        self._store_with(self.storage)  # the contract's storage methods, over DynamoDB and S3
        # the watchdog's index (world.watch): awsworld's extension; it reaches as far as one SQS message's delay
        self.watch = WatchAPI(self.clients, reach=lambda: self.sqs_queue.max_hop_seconds)
        self.schedules = DynamoSchedules(self.clients)  # the schedules the tick fires: awsworld's extension too
        self.published = DynamoPublished(self.clients)  # the consumers' workflow names (published.model): likewise
        self.deployments = DynamoDeployments(self.clients)  # the code's versions (world/deployments.py): likewise
        self.limiters = DynamoLimiters(self.clients)  # limits across runs' pools and waiters: likewise

    def _init_queue_streams(self) -> None:
        """The Queue (``queue``, ``queue_batch``, ``get_deployment_id``; consumers from ``sqs_queue.consumer``)
        and the Streamer (``streams``)."""
        self.sqs_queue = SqsQueue(self.clients)
        self._publish_with(self.sqs_queue)
        self.streams = StreamsAPI(self.clients)

    @property
    def max_value_bytes(self) -> int:
        """The largest value this World takes (its configuration's: ``AWSWORLD_MAX_VALUE_BYTES``)."""
        return self.config.max_value_bytes

    @property
    def stats(self) -> RequestStats:
        return self.clients.stats

    async def delete_run(self, run_id: str) -> bool:
        """Delete an ended run's items, objects and the global items naming it (``aws/log/erasure.py``)."""
        deleted = await RunEraser(self.clients).delete_run(run_id, self._log_without_values)
        self.storage.writer.caches.forget(run_id)  # (a run made again with this id starts from its new head)
        return deleted

    async def _log_without_values(self, run_id: str) -> list[Event]:
        return await collect_pages(lambda cursor: self.events.list(run_id, cursor=cursor, resolve_data="none"))

    async def close(self) -> None:
        """Close the aiobotocore clients."""
        await self.clients.close()
