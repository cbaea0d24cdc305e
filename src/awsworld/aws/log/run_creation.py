"""run_created: the only write that makes a run head. A client-given run id is idempotent: creating it
again returns the existing run unchanged and writes nothing."""

from __future__ import annotations

from datetime import datetime

from ...world.entities import ResolveData, event_value_shown
from ...world.events import CreateEventRequest, EventResult
from ...world.ids import IN_BAND_SEQ_AT_RUN_CREATION
from ...world.limits import encode_value
from ...world.rules.requests import carried_value, event_data
from ...world.rules.runs import run_created
from ..clients import AWSClients
from ..dynamodb.items import event_from_block, now_iso
from ..dynamodb.transactions import TxCancelled, TxOp, transact
from ..keys import run_key
from ..resources import TTL_ATTRIBUTE
from ..retention import retention_of
from ..values import ValueStore
from .blocks import build_blocks
from .entity_reads import EntityReads
from .plan import PlannedEvent, payload_of
from .transitions import attrs_put, run_head


class RunCreator:
    def __init__(self, clients: AWSClients, values: ValueStore, reads: EntityReads) -> None:
        self.clients = clients
        self.values = values
        self.reads = reads

    async def create(self, run_id: str, req: CreateEventRequest, resolve: ResolveData) -> EventResult:
        """``run_id``: checked, or made (``rules.runs.created_run_id``, by ``world/shared/storage.py``)."""
        # The input as given (``requests.carried_value``): one that is not JSON is refused before anything is
        # written (its data key included), not stored as pydantic's rendering of it (NaN as null).
        _carried, given = carried_value(req)
        # (and one over AWSWORLD_MAX_VALUE_BYTES: measured once, the encoding stored as it is)
        encoded = encode_value(given, "eventData.input", self.clients.config.max_value_bytes)
        retention = self.clients.retention
        kept = retention_of(event_data(req).get("executionContext"), retention.default_seconds)
        await self.clients.keys.create(run_id, kept)
        # The input's object expires with the run's items, by the retention the run is created with.
        stored = await self.values.store(run_id, given, "eventData.input",
                                         expiry=retention.object_expiry(run_id, kept), encoded=encoded)
        payload = payload_of(req)  # as the answer shows it
        now = now_iso()
        made, first = run_created(run_id, req, datetime.fromisoformat(now), self.clients.config.deployment_id)
        head = run_head(made, now, retention=retention.default_seconds, max_run=retention.max_run_seconds)
        retention.remember(run_id, head)
        planned = PlannedEvent(first.event_type, None, first.data, stored, payload, first.spec_version)
        [block] = build_blocks(run_id, 1, [planned.record()], now)
        block[TTL_ATTRIBUTE] = head[TTL_ATTRIBUTE]  # the run's items all carry their TTL (aws/retention.py)
        attrs = attrs_put(run_id, made.attributes)
        for op in attrs:
            if op.item is not None:
                op.item[TTL_ATTRIBUTE] = head[TTL_ATTRIBUTE]
        try:
            await transact(self.clients, [
                TxOp("Put", "run", item=head, condition="attribute_not_exists(pk)"),
                TxOp("Put", "event", item=block, condition="attribute_not_exists(pk)"),
                *attrs,
            ])
        except TxCancelled as cancelled:  # the id exists: answer the run as it is, write nothing
            await self.values.discard(stored)  # the run references its own input, not this one
            raced = cancelled.reason_for("run")
            fetched = await self.reads.run_items(run_id)
            existing = (raced.item if raced and raced.item else None) or fetched.get(
                (run_key(run_id)["pk"], run_key(run_id)["sk"]))
            if existing is None:
                raise
            return EventResult(run=await self.reads.run(existing, resolve, fetched=fetched))
        event = planned.as_block_event(run_id, 1, now)
        return EventResult(
            event=event_from_block(event, payload, with_payload=event_value_shown("run_created", resolve)),
            run=await self.reads.run(head, resolve, known={1: event},
                                     fetched={(op.item["pk"], op.item["sk"]): op.item for op in attrs if op.item}),
            seq_in_band=IN_BAND_SEQ_AT_RUN_CREATION,
        )
