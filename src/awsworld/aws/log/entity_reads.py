"""Runs, steps and hooks as the contract shows them, assembled from thin items and the events they point at.

Each value is stored once, in the event that introduced it; entity items keep only status and the slots of
those events (a run's input is always the run_created event at slot 1). Reading an entity with its values is
therefore its item plus the blocks that hold those slots; events a writer has just written are passed in as
``known`` so answering a write never reads back what it wrote.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from ...world.entities import TERMINAL_RUN_STATUSES, HookRecord, ResolveData, Run, Step, values_shown
from ...world.errors import WorldError
from ...world.rules.state import Slot
from ...world.shared.answers import hook_answer, hook_value_slots, step_answer, step_value_slots
from ..clients import AWSClients
from ..dynamodb.items import Item, attributes_of, run_from_head
from ..dynamodb.reads import batch_get
from ..encryption.run_keys import EncryptionKeyError, data_key_key, unreadable_error
from ..keys import LAYOUT_VERSION, STEP_PREFIX, attrs_key, event_key, run_key
from ..resources import GSI_RUN_KEY
from ..values import ValueStore
from .blocks import END_BLOCK, BlockEvent, block_events
from .event_reader import EventReader
from .item_states import hook_state, step_state

Known = Mapping[int, BlockEvent]
_NONE: dict[int, BlockEvent] = {}


class UnknownLayoutError(WorldError):
    """The run was written in a storage layout this version of awsworld cannot read."""

    status = 500
    code = "unknown-layout"


def _key(key: dict[str, str]) -> tuple[str, str]:
    return key["pk"], key["sk"]


def _end_read(head: Item, resolve: ResolveData) -> bool:
    """Whether a run's answer shows its end event's value: an ended run's error, or its output with values."""
    if not head.get("endSlot") or head["status"] not in TERMINAL_RUN_STATUSES:
        return False
    return not (head["status"] == "completed" and resolve == "none")


class EntityReads:
    def __init__(self, clients: AWSClients, values: ValueStore, reader: EventReader) -> None:
        self.clients = clients
        self.values = values
        self.reader = reader

    async def run_items(self, run_id: str) -> dict[tuple[str, str], Item]:
        """The head, the run_created block and the attributes item of one run, in one BatchGetItem; and, the
        first time this process reads the run, its data key item (``aws/encryption/run_keys.py``)."""
        keys = [run_key(run_id), event_key(run_id, 1), attrs_key(run_id)]
        learn = not self.clients.keys.knows(run_id)
        if learn:
            keys.append(data_key_key(run_id))
        found = {(i["pk"], i["sk"]): i for i in await batch_get(self.clients, keys)}
        if learn and _key(run_key(run_id)) in found:
            self.clients.keys.learn(run_id, found.get(_key(data_key_key(run_id))))
        return found

    async def runs(self, heads: Sequence[Item], resolve: ResolveData, *, known: Mapping[str, Known] | None = None,
                   fetched: Mapping[tuple[str, str], Item] | None = None) -> list[Run]:
        known = known or {}
        have: dict[tuple[str, str], Item] = dict(fetched or {})
        keys: list[dict[str, str]] = []
        for head in heads:
            if head.get("lv", LAYOUT_VERSION) != LAYOUT_VERSION:
                raise UnknownLayoutError(f"run {head.get(GSI_RUN_KEY)} was written in storage layout {head['lv']}; "
                                         f"this awsworld reads layout {LAYOUT_VERSION}")
            run_id = head[GSI_RUN_KEY]
            # What this process writes for the run next (a stream's chunks, a value) expires with its retention.
            self.clients.retention.remember(run_id, head)
            wanted = [event_key(run_id, 1)] if 1 not in known.get(run_id, _NONE) else []
            ended = _end_read(head, resolve) and head.get(END_BLOCK)
            if ended and int(head["endSlot"]) not in known.get(run_id, _NONE):
                wanted.append(event_key(run_id, int(head[END_BLOCK])))  # (its error or output: ``END_BLOCK``)
            if head.get("attrs"):
                wanted.append(attrs_key(run_id))
            keys.extend(key for key in wanted if _key(key) not in have and key not in keys)
        if keys:
            have.update((_key(i), i) for i in await batch_get(self.clients, keys))

        async def end_of(head: Item) -> BlockEvent | None:
            if not _end_read(head, resolve):
                return None
            run_id, slot = head[GSI_RUN_KEY], int(head["endSlot"])
            mine = known.get(run_id, _NONE)
            if slot in mine:
                return mine[slot]
            block = have.get(_key(event_key(run_id, int(head[END_BLOCK])))) if head.get(END_BLOCK) else None
            if block is not None:
                found = next((event for event in block_events(block) if event.slot == slot), None)
                if found is not None:
                    return found
            return (await self.reader.events_at(run_id, [slot])).get(slot)

        ends = await asyncio.gather(*(end_of(h) for h in heads))
        runs = []
        for head, end in zip(heads, ends, strict=True):
            run_id = head[GSI_RUN_KEY]
            first = known.get(run_id, _NONE).get(1)
            if first is None:
                block = have.get(_key(event_key(run_id, 1)))
                first = block_events(block)[0] if block else None
            attributes = attributes_of(have.get(_key(attrs_key(run_id)))) if head.get("attrs") else {}
            runs.append(await run_from_head(head, self.values, resolve, first=first, end=end, attributes=attributes))
        return runs

    async def run(self, head: Item, resolve: ResolveData, *, known: Known | None = None,
                  fetched: Mapping[tuple[str, str], Item] | None = None) -> Run:
        return (await self.runs([head], resolve, known={head[GSI_RUN_KEY]: known or _NONE}, fetched=fetched))[0]

    async def _values(self, run_id: str, slots: list[Slot], known: Known) -> dict[Slot, Any]:
        """The values the events at ``slots`` hold (those a writer just wrote are in ``known``), by slot."""
        wanted = sorted({s for s in slots if isinstance(s, int) and s})
        missing = [s for s in wanted if s not in known]
        events = {**known, **await self.reader.events_at(run_id, missing)} if missing else known
        found = [s for s in wanted if s in events]
        loaded = await self.values.load_many([events[s].val for s in found], run_id)
        return dict(zip(found, loaded, strict=True))

    async def steps(self, run_id: str, items: Sequence[Item], resolve: ResolveData,
                    known: Known | None = None) -> list[Step]:
        states = [step_state(str(item["sk"]).removeprefix(STEP_PREFIX), item) for item in items]
        slots = [s for state in states for s in step_value_slots(state, resolve)]
        values: dict[Slot, Any]
        try:
            values = await self._values(run_id, slots, known or _NONE)
        except EncryptionKeyError as error:
            if values_shown(resolve):
                raise
            unreadable = unreadable_error(error)  # (only the steps' errors are shown)
            values = {slot: unreadable for slot in slots if isinstance(slot, int) and slot}  # (as _values reads)
        return [step_answer(run_id, state, resolve, values.get) for state in states]

    async def step(self, run_id: str, item: Item, resolve: ResolveData, known: Known | None = None) -> Step:
        return (await self.steps(run_id, [item], resolve, known))[0]

    async def hooks(self, run_id: str, items: Sequence[Item], resolve: ResolveData,
                    known: Known | None = None) -> list[HookRecord]:
        states = [hook_state(item) for item in items]
        values = await self._values(run_id, [s for state in states for s in hook_value_slots(state, resolve)],
                                    known or _NONE)
        return [hook_answer(run_id, state, item.get("status") or "open", resolve, values.get)
                for item, state in zip(items, states, strict=True)]

    async def hook(self, run_id: str, item: Item, resolve: ResolveData, known: Known | None = None) -> HookRecord:
        return (await self.hooks(run_id, [item], resolve, known))[0]
