"""The AWS World's step and hook lookups (``world.steps``, ``world.hooks`` under ``world/shared/storage.py``): where a
step or hook item is (a step born running may live in the run head until it ends; a hook is found by its
pointer or its token's item), read, and answered through ``entity_reads``."""

from __future__ import annotations

import asyncio

from ...world.entities import HookRecord, ResolveData, Step
from ...world.rules.state import TokenState
from ..clients import AWSClients
from ..dynamodb.reads import get_item, query_prefix
from ..keys import (
    HOOK_PREFIX,
    STEP_PREFIX,
    hook_key,
    hook_pointer_key,
    resume_once_key,
    run_key,
    run_pk,
    step_key,
    token_key,
)
from .entity_reads import EntityReads
from .item_states import token_state
from .transitions import step_from_head


class EntityLookups:
    def __init__(self, clients: AWSClients, reads: EntityReads) -> None:
        self.clients = clients
        self.reads = reads

    async def step(self, run_id: str, step_id: str, resolve: ResolveData) -> Step | None:
        for _ in range(3):
            item = await get_item(self.clients, step_key(run_id, step_id))
            if item is not None:
                return await self.reads.step(run_id, item, resolve)
            # A step born running in a fenced writer's batch lives in the run head until it ends.
            head = await get_item(self.clients, run_key(run_id), ProjectionExpression="inl")
            held = step_from_head(run_id, head, step_id)
            if held is not None:
                return await self.reads.step(run_id, held, resolve)
            if head is None or not head.get("inl"):
                break
            # The head holds another step: ours may have ended between the two reads; read again.
        return None

    async def steps(self, run_id: str, after: str | None, limit: int, resolve: ResolveData) -> tuple[list[Step], bool]:
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
        return await self.reads.steps(run_id, items, resolve), more

    async def hook(self, hook_id: str, run_id: str | None, resolve: ResolveData) -> HookRecord | None:
        if run_id is None:
            pointer = await get_item(self.clients, hook_pointer_key(hook_id))
            if pointer is None:
                return None
            owner: str = pointer["runId"]
            run_id = owner
        item = await get_item(self.clients, hook_key(run_id, hook_id))
        return await self.reads.hook(run_id, item, resolve) if item is not None else None

    async def hook_by_token(self, token: str, resolve: ResolveData) -> tuple[HookRecord | None, TokenState | None]:
        """The hook holding ``token`` (live, or retained by its finished run), else the token's record as read."""
        owner = await get_item(self.clients, token_key(token))
        for _ in range(3):
            if owner is None:
                return None, None
            item = await get_item(self.clients, hook_key(owner["runId"], owner["hookId"]))
            if item is not None:
                return await self.reads.hook(owner["runId"], item, resolve), None
            # A hook goes in the transaction that releases its token (hook_disposed, its run's end), which may have
            # committed after the token was read: read it again, so the refusal says what that write recorded (a
            # disposed hook, whose keyed repeats are answered) rather than the claim it replaced.
            again = await get_item(self.clients, token_key(token))
            if again is None or (again["runId"], again["hookId"]) == (owner["runId"], owner["hookId"]):
                owner = again
                break
            owner = again  # a new hook claimed the token meanwhile: look that one up
        return None, token_state(owner) if owner is not None else None

    async def resume_holder(self, resume_id: str) -> tuple[str, str] | None:
        """The ``RESUMEONCE#`` item of the id (``keys.resume_once_key``): one strongly consistent read of a small
        item (1 RRU)."""
        item = await get_item(self.clients, resume_once_key(resume_id))
        return None if item is None else (str(item["runId"]), str(item["hookId"]))

    async def hooks(self, run_id: str, after: str | None, limit: int,
                    resolve: ResolveData) -> tuple[list[HookRecord], bool]:
        items, more = await query_prefix(self.clients, run_pk(run_id), HOOK_PREFIX, after_sk=after, limit=limit)
        return await self.reads.hooks(run_id, items, resolve), more
