"""The AWS World's items as the rulebook's states, and a decided state back as item attributes.

The rulebook (``world/rules/``) decides from typed states (``RunState``, ``StepState``, ``WaitState``,
``HookState``); the AWS World stores them as DynamoDB items with camel-case attributes, times as the ISO text
``now_iso`` writes, and values as the slot of the event that holds them. This module is that translation and
nothing else: ``view`` builds what a rule reads from the items read before the write, ``changes`` turns the
state a rule decided into the attributes an update sets and removes, ``item_of`` into a new item. A value the
write itself brings (an ``EventRef``) becomes a ``SlotRef``, filled in when the writer places the events.
"""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime
from typing import Any

from ...world.events import CreateEventRequest
from ...world.rules.book import read_token, reads
from ...world.rules.state import EventRef, HookState, RunState, StepState, TokenState, View, WaitState
from ..dynamodb.items import Item
from ..keys import HOOK_PREFIX
from .plan import SlotRef, State

# state field -> item attribute, per kind (the fields not named here are the entity's id, in its key).
STEP_ATTRS = {"step_name": "stepName", "status": "status", "created_at": "createdAt", "updated_at": "updatedAt",
              "spec_version": "specVersion", "attempt": "attempt", "input": "in", "output": "out", "error": "err",
              "retry_after": "retryAfter", "started_at": "startedAt", "completed_at": "completedAt",
              "owner": "owner", "lease_until": "leaseUntil"}
WAIT_ATTRS = {"status": "status", "resume_at": "resumeAt", "created_at": "createdAt", "updated_at": "updatedAt",
              "spec_version": "specVersion", "completed_at": "completedAt"}
HOOK_ATTRS = {"token": "token", "created_at": "createdAt", "updated_at": "updatedAt", "spec_version": "specVersion",
              "is_webhook": "isWebhook", "metadata": "in", "retention_until": "tokenRetentionUntil",
              "payload_codec": "payloadCodec"}
_ATTRS: dict[type, dict[str, str]] = {StepState: STEP_ATTRS, WaitState: WAIT_ATTRS, HookState: HOOK_ATTRS}
_TIMES = {"created_at", "updated_at", "retry_after", "started_at", "completed_at", "lease_until", "resume_at",
          "retention_until"}
_FLAGS = {"is_webhook", "payload_codec"}  # bools: an absent attribute reads as False
_STORED_IF_TRUE = {"payload_codec"}  # (added later: a plain hook's item does not grow by it)


END_STATUS = "endStatus"
"""The token item's record of how its run ended, once the run released it (``world/rules/hooks.py``)."""


def iso(at: datetime) -> str:
    """A time as items hold it (``now_iso``'s form), so a decided time written back reads the same."""
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def _time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) and value else None


def _state(cls: type[Any], entity_id: str, item: Item) -> Any:
    attrs = _ATTRS[cls]
    values: dict[str, Any] = {}
    for f in fields(cls):
        name = f.name
        if name not in attrs:
            values[name] = entity_id
            continue
        raw = item.get(attrs[name])
        if name in _TIMES:
            raw = _time(raw)
        elif raw is not None and name in ("attempt", "spec_version", "input", "output", "error", "metadata"):
            raw = int(raw)
        if raw is not None or (name != "attempt" and name not in _FLAGS):
            values[name] = raw
    return cls(**values)


def step_state(step_id: str, item: Item) -> StepState:
    return _state(StepState, step_id, item)


def wait_state(wait_id: str, item: Item) -> WaitState:
    return _state(WaitState, wait_id, item)


def hook_state(item: Item) -> HookState:
    return _state(HookState, str(item["sk"]).removeprefix(HOOK_PREFIX), item)


def token_state(item: Item) -> TokenState:
    """A token item as the rulebook's state: who holds it, whether released, until when reserved, how its run
    ended."""
    return TokenState(str(item.get("token", "")), str(item.get("runId", "")), str(item.get("hookId", "")),
                      _time(item.get("retentionUntil")), bool(item.get("released")), item.get(END_STATUS))


def token_item(token: TokenState) -> Item:
    """A claimed token's attributes (without its key), as ``token_state`` reads them back."""
    return {"token": token.token, "runId": token.run_id, "hookId": token.hook_id, "released": token.released,
            "retentionUntil": iso(token.retention_until) if token.retention_until else None}


def _attr(name: str, value: Any) -> Any:
    if isinstance(value, EventRef):
        return SlotRef(value.index)
    if isinstance(value, datetime):
        return iso(value)
    if name in _FLAGS:
        return bool(value)
    return value


def changes(before: Any, after: Any) -> dict[str, Any]:
    """The attributes an update of ``before``'s item to ``after`` sets (None: removes), in field order."""
    attrs = _ATTRS[type(after)]
    return {attrs[name]: _attr(name, getattr(after, name)) for name in attrs
            if getattr(after, name) != getattr(before, name)}


def item_of(state: Any) -> Item:
    """A new entity's attributes (without its key or version); None values are not stored, nor a false flag that
    is stored only when true (``_STORED_IF_TRUE``)."""
    return {attr: _attr(name, value) for name, attr in _ATTRS[type(state)].items()
            if (value := getattr(state, name)) is not None and (value or name not in _STORED_IF_TRUE)}


def view_of(req: CreateEventRequest, state: State, *, entity: bool) -> View:
    """What the rule of ``req`` reads, from the items read before it (``entity``: the rule reads the entity).
    A hook token's holder is known only from a commit that found it held by another hook (``token_holder``):
    the token item is not read before a write, the commit's condition re-checks it."""
    run = state.run
    run_state = RunState(state.run_id, str(run["status"]), _time(run.get("startedAt"))) if run is not None else None
    kind = req.event_type.split("_")[0]
    item = state.entity if entity else None
    cid = req.correlation_id or ""
    hook = hook_state(item) if item is not None and kind == "hook" else None
    name = read_token(req, hook)
    token: TokenState | None = None
    if state.token_holder is not None and name is not None:
        token = TokenState(name, state.token_holder, "")  # held by a hook that is not this one
    return View(
        state.run_id, datetime.fromisoformat(state.now), run_state,
        step=step_state(cid, item) if item is not None and kind == "step" else None,
        wait=wait_state(cid, item) if item is not None and kind == "wait" else None,
        hook=hook, token=token,
        hooks=tuple(hook_state(h) for h in state.hooks) if reads(req.event_type, "hooks") else (),
        token_read=token is not None or name is None,
        carries_value=state.stored is not None, deployment_id=state.deployment_id, run_read=run is not None)
