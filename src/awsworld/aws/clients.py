"""One set of aioboto3 clients per World, opened lazily, closed together, and counted.

Counting every request (and the capacity DynamoDB reports) lets tests assert round-trip bounds and lets
benchmarks print requests and billable units instead of timings.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import aioboto3
from botocore.config import Config

from .config import AWSConfig
from .encryption.run_keys import RunKeys
from .retention import Retention


@dataclass
class RequestStats:
    """Requests made, by ``service.Operation``; DynamoDB capacity consumed (as the endpoint reports it); and
    items written by transactions (deterministic: a transactional write bills at least 2 units per item)."""

    requests: Counter[str] = field(default_factory=Counter)
    read_units: float = 0.0
    write_units: float = 0.0
    transaction_items: int = 0

    def reset(self) -> None:
        self.requests.clear()
        self.read_units = 0.0
        self.write_units = 0.0
        self.transaction_items = 0

    def total(self, service: str | None = None) -> int:
        return sum(n for key, n in self.requests.items() if service is None or key.startswith(service + "."))

    def snapshot(self) -> RequestStats:
        return RequestStats(Counter(self.requests), self.read_units, self.write_units, self.transaction_items)

    def __sub__(self, other: RequestStats) -> RequestStats:
        return RequestStats(self.requests - other.requests, self.read_units - other.read_units,
                            self.write_units - other.write_units, self.transaction_items - other.transaction_items)

    def record_capacity(self, operation: str, consumed: Any) -> None:
        """Add what DynamoDB reports (``CapacityUnits`` per table) to read or write units by operation."""
        entries = consumed if isinstance(consumed, list) else [consumed]
        units = sum(float(e.get("CapacityUnits", 0) or 0) for e in entries if isinstance(e, dict))
        if operation in _WRITE_OPERATIONS:
            self.write_units += units
        else:
            self.read_units += units


_WRITE_OPERATIONS = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})


class AWSClients:
    def __init__(self, config: AWSConfig) -> None:
        self.config = config
        self.stats = RequestStats()
        self.retention = Retention(config.retention_seconds, config.max_run_seconds)
        self.keys = RunKeys(self)
        self._session = aioboto3.Session()
        self._stack = AsyncExitStack()
        self._clients: dict[str, Any] = {}
        self._handlers: list[tuple[str, Callable[..., Any]]] = []
        self._lock = asyncio.Lock()
        self._botocore_config = Config(
            retries={"max_attempts": 8, "mode": "adaptive"},
            max_pool_connections=64,
            connect_timeout=5,
            read_timeout=30,
            # Requests are built by this package, not typed by users: botocore's client-side validation only
            # costs CPU (about a tenth of it per request, measured); the service still validates.
            parameter_validation=False,
        )

    def _endpoint(self, service: str) -> str | None:
        if service == "dynamodb" and self.config.dynamodb_endpoint_url:
            return self.config.dynamodb_endpoint_url
        return self.config.endpoint_url

    async def get(self, service: str) -> Any:
        client = self._clients.get(service)
        if client is not None:
            return client
        async with self._lock:
            client = self._clients.get(service)
            if client is None:
                client = await self._stack.enter_async_context(
                    self._session.client(
                        service,
                        region_name=self.config.region_name or "us-east-1",
                        endpoint_url=self._endpoint(service),
                        config=self._botocore_config,
                        **self.config.client_options,  # type: ignore[arg-type]
                    )
                )
                client.meta.events.register(f"before-call.{service}", self._count)
                if service == "dynamodb":
                    client.meta.events.register("after-call.dynamodb", self._capacity)
                    client.meta.events.register("before-parameter-build.dynamodb.TransactWriteItems",
                                                self._transaction_items)
                for event_name, handler in self._handlers:
                    client.meta.events.register(event_name, handler)
                self._clients[service] = client
        return client

    def register_handler(self, event_name: str, handler: Callable[..., Any]) -> None:
        """Register a botocore event handler (``"before-call"``, ``"after-call.s3"``, ...) on every client of
        this World, those already open and those opened later: clients open lazily, so whoever observes or
        perturbs every request (tracing, fault injection) cannot know in advance which ones a code path uses."""
        self._handlers.append((event_name, handler))
        for client in self._clients.values():
            client.meta.events.register(event_name, handler)

    def _count(self, model: Any, **_: Any) -> None:
        self.stats.requests[f"{model.service_model.service_name}.{model.name}"] += 1

    def _transaction_items(self, params: Any = None, **_: Any) -> None:
        if isinstance(params, dict):
            self.stats.transaction_items += len(params.get("TransactItems") or ())

    def _capacity(self, model: Any, parsed: Any = None, **_: Any) -> None:
        if isinstance(parsed, dict) and parsed.get("ConsumedCapacity"):
            self.stats.record_capacity(model.name, parsed["ConsumedCapacity"])

    async def dynamodb(self) -> Any:
        return await self.get("dynamodb")

    async def s3(self) -> Any:
        return await self.get("s3")

    async def sqs(self) -> Any:
        return await self.get("sqs")

    async def kms(self) -> Any:
        return await self.get("kms")

    async def close(self) -> None:
        self._clients.clear()
        await self._stack.aclose()
