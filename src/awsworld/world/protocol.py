"""The ``World`` protocol: what the runtime and the Client may call, and nothing else.

Members are namespaced like the spec (``world.runs``, ``world.steps``, ``world.events``, ``world.hooks``);
queue and streams join in their own protocols. Everything is ``async``: a World does I/O. awsworld's own
extensions are declared here too (``clock``, ``watch``, ``schedules``), so no caller discovers a member by
looking for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from .clock import Clock
from .deployments import DeploymentStore
from .entities import Capabilities, HookRecord, ResolveData, Run, Step
from .events import AttributeChange, CreateEventRequest, EventBatchResult, EventResult
from .limiters import LimiterStore
from .pages import EventPage, HookPage, RunPage, StepPage
from .published import PublishedNames
from .queue import QueueAPI
from .schedules import ScheduleStore
from .streams import StreamsAPI
from .watch import WatchAPI

EventInput = CreateEventRequest | Mapping[str, Any]


class RunsAPI(Protocol):
    async def get(self, run_id: str, *, resolve_data: ResolveData = "all") -> Run: ...

    async def list(
        self,
        *,
        workflow_name: str | None = None,
        status: str | Sequence[str] | None = None,
        cursor: str | None = None,
        limit: int = 50,
        resolve_data: ResolveData = "none",
    ) -> RunPage: ...

    async def wait_for_terminal_status(
        self, run_id: str, *, timeout: float = 30.0, resolve_data: ResolveData = "all"
    ) -> Run: ...

    async def set_attributes(
        self, run_id: str, changes: Sequence[AttributeChange | Mapping[str, Any]]
    ) -> EventResult: ...


class StepsAPI(Protocol):
    async def get(self, run_id: str, step_id: str, *, resolve_data: ResolveData = "all") -> Step: ...

    async def list(
        self, run_id: str, *, cursor: str | None = None, limit: int = 100, resolve_data: ResolveData = "all"
    ) -> StepPage: ...


class EventsAPI(Protocol):
    async def create(
        self,
        run_id: str | None,
        event: EventInput,
        *,
        event_count: int | None = None,
        in_band: bool = False,
        expected_seq_in_band: int | None = None,
        resolve_data: ResolveData = "all",
        after_step_body: bool = False,
    ) -> EventResult: ...

    async def create_batch(
        self,
        run_id: str,
        events: Sequence[EventInput],
        *,
        in_band: bool = False,
        expected_seq_in_band: int | None = None,
        resolve_data: ResolveData = "all",
        atomic: bool = False,
        stamp: datetime | None = None,
        expect_seq: int | None = None,
    ) -> EventBatchResult:
        """awsworld's extensions: ``atomic`` (all events land or none, the first refusal raised), ``stamp`` (an
        in-band writer's time for the batch's events, never in the future) and ``expect_seq`` (land right after
        that many events or raise ``LogMovedError``)."""
        ...

    async def list(
        self,
        run_id: str,
        *,
        cursor: str | None = None,
        limit: int = 1000,
        resolve_data: ResolveData = "all",
    ) -> EventPage: ...

    async def list_by_correlation_id(
        self,
        run_id: str,
        correlation_id: str,
        *,
        cursor: str | None = None,
        limit: int = 1000,
        resolve_data: ResolveData = "all",
    ) -> EventPage: ...


class HooksAPI(Protocol):
    async def get(self, hook_id: str, *, run_id: str | None = None,
                  resolve_data: ResolveData = "all") -> HookRecord: ...

    async def get_by_token(self, token: str, *, resolve_data: ResolveData = "all") -> HookRecord: ...

    async def list(
        self, run_id: str, *, cursor: str | None = None, limit: int = 100, resolve_data: ResolveData = "all"
    ) -> HookPage: ...

    async def resumed_by(self, resume_id: str) -> tuple[str, str] | None:
        """awsworld's extension: the (run id, hook id) of the hook that recorded ``resume_id`` as a ``resumeOnce``
        id (``world/rules/hooks.py``), or None. Kept World-wide beyond that hook's run and token, so a retried
        resume whose token no hook holds any more can still tell that its payload was delivered."""
        ...


@runtime_checkable
class Storage(Protocol):
    # Read-only (properties): an implementation's own API classes satisfy them (a plain attribute would be
    # mutable, hence invariant, and only the protocol classes themselves would do).
    @property
    def runs(self) -> RunsAPI: ...

    @property
    def steps(self) -> StepsAPI: ...

    @property
    def events(self) -> EventsAPI: ...

    @property
    def hooks(self) -> HooksAPI: ...


@runtime_checkable
class World(Storage, QueueAPI, Protocol):
    """Storage, the Queue's publishing side (``queue``, ``queue_batch``, ``get_deployment_id``) and the
    Streamer (``streams``). Consuming deliveries is the transport's business (see ``awsworld.aws``).

    awsworld's extensions: ``clock`` (where the World's timestamps come from: the runtime compares them with its
    "now", so both must be one clock), ``watch`` (the watchdog's index, ``world/watch.py``), ``schedules``
    (the schedule store the tick fires, ``world/schedules.py``), ``published`` (the workflow names the queue's
    consumers publish, ``world/published.py``), ``deployments`` (the code's deployments, ``world/deployments.py``)
    and ``limiters`` (the pools and waiters of limits across runs, ``world/limiters.py``), and ``max_value_bytes``
    (the largest value it takes, when known here).
    A World without one of these says so with None (``HttpWorld``, a client's view of a World served over
    HTTP, has no watch index, schedules, deployments or limits): then there is no watchdog, ``client.schedules`` is
    refused, a start is never refused for its name, no deployment is registered or retired, and a limited start
    is refused (``_worker.limiter.NoLimiterStoreError``)."""

    @property
    def spec_version(self) -> int: ...

    @property
    def capabilities(self) -> Capabilities: ...

    @property
    def streams(self) -> StreamsAPI: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def watch(self) -> WatchAPI | None: ...

    @property
    def schedules(self) -> ScheduleStore | None: ...

    @property
    def published(self) -> PublishedNames | None: ...

    @property
    def deployments(self) -> DeploymentStore | None: ...

    @property
    def limiters(self) -> LimiterStore | None: ...

    @property
    def max_value_bytes(self) -> int | None:
        """The largest value this World takes (``world/limits.py``), or None when it is not known in this process
        (``HttpWorld``: the server's). A writer that knows it refuses a larger value before it copies it
        (``limits.oversized``); the World refuses it all the same."""
        ...

    async def delete_run(self, run_id: str) -> bool:
        """awsworld's extension: delete an ended run's data now (a right-to-erasure request), rather than at the
        end of its retention: True when it was deleted, False when there was no such run (deleted already: a
        retry succeeds). An unfinished run is refused with ``EntityConflictError`` and nothing is deleted. What
        goes and what stays is ``world/rules/erasure.py``'s decision, the same for every World."""
        ...

    async def close(self) -> None: ...
