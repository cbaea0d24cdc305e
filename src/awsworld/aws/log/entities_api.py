"""``world.steps`` and ``world.hooks``: reads of a run's step and hook entities."""

from __future__ import annotations

import asyncio

from ...world.cursors import entities_page_after, key_cursor
from ...world.entities import Hook, ResolveData, Step
from ...world.pages import HookPage, StepPage
from ...world.rules.decision import hook_missing
from ...world.rules.hooks import lookup_refusal
from ...world.rules.steps import step_missing
from ..clients import AWSClients
from ..dynamodb.reads import get_item, query_prefix
from ..keys import HOOK_PREFIX, STEP_PREFIX, hook_key, hook_pointer_key, run_key, run_pk, step_key, token_key
from .entity_reads import EntityReads
from .item_states import token_state
from .transitions import step_from_head


class StepsAPI:
    def __init__(self, clients: AWSClients, reads: EntityReads) -> None:
        self.clients = clients
        self.reads = reads

    async def get(self, run_id: str, step_id: str, *, resolve_data: ResolveData = "all") -> Step:
        for _ in range(3):
            item = await get_item(self.clients, step_key(run_id, step_id))
            if item is not None:
                return await self.reads.step(run_id, item, resolve_data)
            # A step born running in a fenced writer's batch lives in the run head until it ends.
            head = await get_item(self.clients, run_key(run_id), ProjectionExpression="inl")
            held = step_from_head(run_id, head, step_id)
            if held is not None:
                return await self.reads.step(run_id, held, resolve_data)
            if head is None or not head.get("inl"):
                break
            # The head holds another step: ours may have ended between the two reads; read again.
        raise step_missing(run_id, step_id)

    async def list(self, run_id: str, *, cursor: str | None = None, limit: int = 100,
                   resolve_data: ResolveData = "all") -> StepPage:
        after = entities_page_after(cursor, limit, STEP_PREFIX)
        head, (items, more) = await asyncio.gather(
            get_item(self.clients, run_key(run_id), ProjectionExpression="inl"),
            query_prefix(self.clients, run_pk(run_id), STEP_PREFIX, after_sk=after, limit=limit))
        held = step_from_head(run_id, head, ((head or {}).get("inl") or {}).get("id", ""))
        # Read before the page, the head's step is either still held (no item yet) or already in the page.
        if held is not None and (after is None or held["sk"] > after) and (not more or held["sk"] < items[-1]["sk"]) \
                and all(i["sk"] != held["sk"] for i in items):
            items = sorted([*items, held], key=lambda i: i["sk"])
            if len(items) > limit:
                items, more = items[:limit], True
        steps = await self.reads.steps(run_id, items, resolve_data)
        next_cursor = key_cursor([i["sk"] for i in items[-1:]], more)
        return StepPage(data=steps, cursor=next_cursor, has_more=more)


class HooksAPI:
    def __init__(self, clients: AWSClients, reads: EntityReads) -> None:
        self.clients = clients
        self.reads = reads

    async def get(self, hook_id: str, *, run_id: str | None = None, resolve_data: ResolveData = "all") -> Hook:
        if run_id is None:
            pointer = await get_item(self.clients, hook_pointer_key(hook_id))
            if pointer is None:
                raise hook_missing(hook_id)
            owner: str = pointer["runId"]
            run_id = owner
        item = await get_item(self.clients, hook_key(run_id, hook_id))
        if item is None:
            raise hook_missing(hook_id)
        return await self.reads.hook(run_id, item, resolve_data)

    async def get_by_token(self, token: str, *, resolve_data: ResolveData = "all") -> Hook:
        """The active hook owning ``token``, or the retained hook of a finished run still holding it (closed). A
        token whose run ended and released it: ``HookClosedError`` naming the run (``world/rules/hooks.py``)."""
        owner = await get_item(self.clients, token_key(token))
        for _ in range(3):
            if owner is None:
                raise lookup_refusal(None)
            item = await get_item(self.clients, hook_key(owner["runId"], owner["hookId"]))
            if item is not None:
                return await self.reads.hook(owner["runId"], item, resolve_data)
            # A hook goes in the transaction that releases its token (hook_disposed, its run's end), which may have
            # committed after the token was read: read it again, so the refusal says what that write recorded (a
            # disposed hook, whose keyed repeats are answered) rather than the claim it replaced.
            again = await get_item(self.clients, token_key(token))
            if again is None or (again["runId"], again["hookId"]) == (owner["runId"], owner["hookId"]):
                owner = again
                break
            owner = again  # a new hook claimed the token meanwhile: look that one up
        if owner is None:
            raise lookup_refusal(None)
        raise lookup_refusal(token_state(owner))

    async def list(self, run_id: str, *, cursor: str | None = None, limit: int = 100,
                   resolve_data: ResolveData = "all") -> HookPage:
        after = entities_page_after(cursor, limit, HOOK_PREFIX)
        items, more = await query_prefix(self.clients, run_pk(run_id), HOOK_PREFIX, after_sk=after, limit=limit)
        hooks = await self.reads.hooks(run_id, items, resolve_data)
        next_cursor = key_cursor([i["sk"] for i in items[-1:]], more)
        return HookPage(data=hooks, cursor=next_cursor, has_more=more)
