"""run_created: the only write that makes a run item. A client-given run id is idempotent: creating it
again returns the existing run unchanged and writes nothing."""

from __future__ import annotations

from ..world.entities import ResolveData
from ..world.events import CreateEventRequest, EventResult
from ..world.ids import check_entity_id, new_run_id
from .clients import AWSClients
from .items import event_from_item, event_payload_wanted, now_iso, run_from_item
from .keys import event_key, run_key
from .plan import split_payload
from .reads import get_item
from .transactions import TxCancelled, TxOp, transact
from .transitions import new_run_item
from .values import ValueStore


class RunCreator:
    def __init__(self, clients: AWSClients, values: ValueStore) -> None:
        self.clients = clients
        self.values = values

    async def create(self, run_id: str | None, req: CreateEventRequest, resolve: ResolveData) -> EventResult:
        run_id = check_entity_id(run_id, "runId") if run_id else new_run_id()
        data = req.data().model_dump(mode="json", by_alias=True, exclude_none=True)
        rest, _name, payload = split_payload("run_created", data)
        stored = await self.values.store(run_id, payload, "eventData.input")
        now = now_iso()
        run_item = new_run_item(run_id, data, stored, now, req.spec_version, self.clients.config.deployment_id)
        event_item = {
            **event_key(run_id, 1),
            "runId": run_id,
            "eventType": "run_created",
            "data": _json(rest),
            "val": stored,
            "createdAt": now,
            "specVersion": run_item["specVersion"],
        }
        try:
            await transact(self.clients, [
                TxOp("Put", "run", item=run_item, condition="attribute_not_exists(pk)"),
                TxOp("Put", "event", item=event_item, condition="attribute_not_exists(pk)"),
            ])
        except TxCancelled as cancelled:  # the id exists: answer the run as it is, write nothing
            raced = cancelled.reason_for("run")
            existing = raced.item if raced and raced.item else await self._existing(run_id)
            if existing is None:
                raise
            await self.values.discard(stored)  # the run item references its own input, not this one
            return EventResult(run=await run_from_item(existing, self.values, resolve))
        return EventResult(
            event=event_from_item(event_item, payload, with_payload=event_payload_wanted("run_created", resolve)),
            run=await run_from_item(run_item, self.values, resolve),
            seq_in_band=1,
        )

    async def _existing(self, run_id: str) -> dict | None:
        return await get_item(self.clients, run_key(run_id))


def _json(value: dict) -> str | None:
    import json

    return json.dumps(value, ensure_ascii=False, separators=(",", ":")) if value else None
