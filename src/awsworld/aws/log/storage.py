"""``DynamoStorage``: the AWS World's storage engine under ``world/shared/storage.py``'s ``WorldStorage``.

Every contract method (its checks, its order, its pages and cursors) is ``WorldStorage``'s; this is the engine it
runs on, assembled from one object per job: the ``EventWriter`` stores values and commits writes (DynamoDB
transactions, S3 for large values), the ``EventReader`` reads the log's blocks, ``EntityReads`` answers runs,
steps and hooks from their items, ``EntityLookups`` finds a step or hook item, and ``RunIndex`` lists runs over
the two run GSIs. Its clock is the system clock: every item's time is the writer's ``now``.
"""

from __future__ import annotations

import asyncio

from ...world.clock import SYSTEM_CLOCK, Clock
from ...world.entities import ResolveData, Run
from ...world.rules.runs import run_missing
from ..clients import AWSClients
from ..dynamodb.reads import batch_get
from ..keys import run_key
from ..resources import GSI_RUN_KEY
from ..values import ValueStore
from .entities_api import EntityLookups
from .entity_reads import EntityReads
from .event_reader import EventReader
from .event_writer import EventWriter
from .run_index import RunIndex

POLL_SECONDS = 0.05
MAX_POLL_SECONDS = 1.0
"""How often ``wait_for_terminal_status`` reads the run again: from 50 ms, half as often again each time, up to a
second."""


class DynamoStorage:
    expires_runs = True
    """A run's items expire once its retention after its end passes (``aws/retention.py``), its tokens' too."""

    def __init__(self, clients: AWSClients, values: ValueStore) -> None:
        self.clients = clients
        self.clock: Clock = SYSTEM_CLOCK
        self.reader = reader = EventReader(clients, values)
        self.reads = reads = EntityReads(clients, values, reader)
        self.writer = writer = EventWriter(clients, values, reader, reads)
        lookups = EntityLookups(clients, reads)
        # The engine's primitives are its parts' own bound methods (no wrapper between a call and them).
        self.store_value, self.store_values = writer.store_value, writer.store_values
        self.create_run = writer.create_run
        self.write_event, self.write_batch = writer.write_event, writer.write_batch
        self.recorded_event, self.events_between = writer.recorded_event, reader.between
        self.events, self.correlated_events = reader.events, reader.correlated_events
        self.run_ids = RunIndex(clients).run_ids
        self.step, self.steps, self.hook = lookups.step, lookups.steps, lookups.hook
        self.hook_by_token, self.hooks = lookups.hook_by_token, lookups.hooks
        self.resume_holder = lookups.resume_holder

    async def run(self, run_id: str, resolve: ResolveData) -> Run:
        fetched = await self.reads.run_items(run_id)
        head = fetched.get((run_key(run_id)["pk"], run_key(run_id)["sk"]))
        if head is None:
            raise run_missing(run_id)
        return await self.reads.run(head, resolve, fetched=fetched)

    async def runs(self, run_ids: list[str], resolve: ResolveData) -> list[Run]:
        """One BatchGetItem of the run heads, then their runs (a run that expired since it was listed is left
        out)."""
        items = {i[GSI_RUN_KEY]: i for i in await batch_get(self.clients, [run_key(r) for r in run_ids])}
        return await self.reads.runs([items[r] for r in run_ids if r in items], resolve)

    async def await_change(self, run_id: str, seconds: float, polls: int) -> None:
        """Nothing tells this process when a run ends: wait a poll interval (``POLL_SECONDS``, growing)."""
        await asyncio.sleep(min(POLL_SECONDS * 1.5 ** polls, MAX_POLL_SECONDS, seconds))
