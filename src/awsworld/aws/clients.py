"""One set of botocore clients per World, opened lazily, closed together, and counted.

The clients are botocore's own, awaited through a thread pool (``threaded``: why, and what callers see);
botocore itself is imported with the first client (``sdk``: why, and which botocore).

Counting every request (and the capacity DynamoDB reports) lets tests assert round-trip bounds and lets
benchmarks print requests and billable units instead of timings. Handlers run on the worker threads, so the
counters take a lock.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from .config import AWSConfig
from .encryption.run_keys import RunKeys
from .request_errors import no_region, refused_on_loopback, translated
from .retention import Retention
from .threaded import AsyncClient, Errors

WORKER_THREADS = 64
"""Requests in flight at once per World (botocore's connection pool is as large)."""
WORKER_THREAD_PREFIX = "awsworld-aws"
"""The names of the request threads begin so: the ``awsworld`` process ends without waiting for them
(``cli/__init__.py``'s ``_end_now``)."""


def _sdk() -> ModuleType:
    """``awsworld.aws.sdk``, imported by the first client (see its doc). A leaf: it imports only botocore."""
    from . import sdk

    return sdk


@dataclass
class RequestStats:
    """Requests made, by ``service.Operation``; DynamoDB capacity consumed (as the endpoint reports it); and
    items written by transactions (deterministic: a transactional write bills at least 2 units per item)."""

    requests: Counter[str] = field(default_factory=Counter)
    read_units: float = 0.0
    write_units: float = 0.0
    transaction_items: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

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
        with self.lock:
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
        self._session: Any = None
        self._executor: ThreadPoolExecutor | None = None
        self._clients: dict[str, AsyncClient] = {}
        self._handlers: list[tuple[str, Callable[..., Any]]] = []
        self._open_lock = threading.Lock()  # opening a client (``_open``), on any thread

    def _endpoint(self, service: str) -> str | None:
        if service == "dynamodb" and self.config.dynamodb_endpoint_url:
            return self.config.dynamodb_endpoint_url
        return self.config.endpoint_url

    @property
    def executor(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(WORKER_THREADS, thread_name_prefix=WORKER_THREAD_PREFIX)
        return self._executor

    def _create(self, service: str) -> Any:
        """A botocore client: made on a worker, since importing botocore (the first time) and loading a
        service's model take tens of milliseconds that the event loop's other tasks need not wait for."""
        sdk = _sdk()
        if self._session is None:
            self._session = sdk.new_session()
        endpoint_url = self._endpoint(service)
        # The region: AWS_REGION / AWS_DEFAULT_REGION (``config.region_name``), else the AWS profile's, as boto3
        # reads it (docs/get-started/deploy.md promises "credentials and region come from your usual AWS
        # environment or profile"; a fixed us-east-1 here sent a profile in eu-west-1 to another region's table).
        # None of them: refused, not guessed (a guess reaches another region's missing table). The emulators
        # (``local/``) choose their own region and endpoint, and give it in the config.
        region = self.config.region_name or self._session.get_config_variable("region")
        if not region:
            raise no_region(service)
        return self._session.create_client(
            service,
            region_name=region,
            endpoint_url=endpoint_url,
            config=sdk.client_config(WORKER_THREADS, loopback=sdk.is_loopback(endpoint_url)),
            **self.config.client_options,  # type: ignore[arg-type]
        )

    async def get(self, service: str) -> AsyncClient:
        client = self._clients.get(service)
        if client is not None:
            return client
        executor = self.executor
        return await asyncio.get_running_loop().run_in_executor(executor, self._open, service, executor)

    def _open(self, service: str, executor: ThreadPoolExecutor) -> AsyncClient:
        """The service's client, made once (on a worker). The lock is a thread lock, not an asyncio one: a World
        may be used from more than one event loop (a test fixture's and a test's, ``asyncio.run`` after
        ``asyncio.run``), and an asyncio lock taken by a task of a loop that is not running now was never given
        back, so every other loop's first request waited for ever."""
        with self._open_lock:
            client = self._clients.get(service)
            if client is None:
                made = self._create(service)
                events = made.meta.events
                events.register(f"before-call.{service}", self._count)
                if _sdk().is_loopback(made.meta.endpoint_url):
                    events.register_first(f"needs-retry.{service}", refused_on_loopback)
                if service == "dynamodb":
                    events.register("after-call.dynamodb", self._capacity)
                    events.register("before-parameter-build.dynamodb.TransactWriteItems", self._transaction_items)
                for event_name, handler in self._handlers:
                    events.register(event_name, handler)
                client = self._clients[service] = AsyncClient(made, executor, self._errors_of(made, service))
            return client

    def _errors_of(self, made: Any, service: str) -> Errors:
        """What ``service``'s client raises instead of a failure: awsworld's error for one that means the World is
        not where its configuration says (``request_errors``: cut off from ``awsworld dev``, no credentials, no
        such table), with where it looked."""
        config, endpoint, region = self.config, made.meta.endpoint_url, made.meta.region_name
        return lambda operation, params, error: translated(config, service, endpoint, region, operation, params,
                                                           error)

    def register_handler(self, event_name: str, handler: Callable[..., Any]) -> None:
        """Register a botocore event handler (``"before-call"``, ``"after-call.s3"``, ...) on every client of
        this World, those already open and those opened later: clients open lazily, so whoever observes or
        perturbs every request (tracing, fault injection) cannot know in advance which ones a code path uses.
        Handlers run on the worker thread that makes the request, in the requesting task's context."""
        with self._open_lock:  # (a client being opened now gets it too)
            self._handlers.append((event_name, handler))
            for client in self._clients.values():
                client.meta.events.register(event_name, handler)

    def _count(self, model: Any, **_: Any) -> None:
        with self.stats.lock:
            self.stats.requests[f"{model.service_model.service_name}.{model.name}"] += 1

    def _transaction_items(self, params: Any = None, **_: Any) -> None:
        if isinstance(params, dict):
            with self.stats.lock:
                self.stats.transaction_items += len(params.get("TransactItems") or ())

    def _capacity(self, model: Any, parsed: Any = None, **_: Any) -> None:
        if isinstance(parsed, dict) and parsed.get("ConsumedCapacity"):
            self.stats.record_capacity(model.name, parsed["ConsumedCapacity"])

    @property
    def opened(self) -> dict[str, AsyncClient]:
        """The clients open now, by service (a copy)."""
        return dict(self._clients)

    async def dynamodb(self) -> AsyncClient:
        return await self.get("dynamodb")

    async def s3(self) -> AsyncClient:
        return await self.get("s3")

    async def sqs(self) -> AsyncClient:
        return await self.get("sqs")

    async def kms(self) -> AsyncClient:
        return await self.get("kms")

    def renew(self) -> None:
        """Forget the clients and the credentials they resolved, keeping the service models already loaded:
        the next request opens new connections with credentials resolved anew. For an environment restored
        from a SnapStart snapshot (``lambda_host.snapstart``), whose sockets and credentials belong to the
        environment the snapshot was taken in."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()
        if self._session is not None:
            self._session = _sdk().new_session()

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False)
