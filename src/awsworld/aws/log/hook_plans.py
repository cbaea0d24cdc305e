"""Hook writes as DynamoDB items: the hook, its global id pointer, its token item and resume markers.

The rulebook (``world/rules/hooks.py``) says when a token is free, who holds it and what a run's end or a
``hook_disposed`` does to it; these functions turn each hook write into the items and conditions that re-check
those facts at commit (``conditions.render``), so a race only makes the write retry. The token item lives for
the token's whole life: claimed by ``hook_created``, released (still naming its last hook) by ``hook_disposed``
or by its run's end (with how the run ended), until a new hook claims it or it expires.
"""

from __future__ import annotations

from datetime import UTC, datetime

from ...world.errors import (
    HookNotFoundError,
)
from ...world.events import CreateEventRequest, HookCreatedData, HookReceivedData
from ...world.rules.hooks import HOOK_CLOSED, TOKEN_FREE, hook_fate, token_held_by, token_owned_by
from ...world.rules.requests import check_hook_token, data_as
from ..dynamodb.items import Item
from ..dynamodb.transactions import TxOp, put
from ..keys import (
    HOOK_PREFIX,
    hook_key,
    hook_pointer_key,
    resume_marker_key,
    token_key,
)
from ..resources import TTL_ATTRIBUTE
from ..retention import epoch
from .conditions import render
from .plan import Plan, PlannedEvent, RunChange, SlotRef, State, planned_event

# A transaction holds at most 100 items: the run, the event, and 3 per hook released in it.
HOOKS_RELEASED_IN_COMMIT = 30


# The token item's record of how its run ended, once the run released it (``world/rules/hooks.py``).
END_STATUS = "endStatus"


# The role of a hook_received's resume marker in its transaction (the writer stores the event's slot in it).
RESUME_MARKER_ROLE = "resume"


def release_hooks(plan: Plan, state: State, status: str, ttl: int) -> None:
    """A run's end closes its hooks (``world/rules/hooks.py``): it removes the live ones and frees their tokens,
    except tokens still under retention; each token item stays as the memory that its run ended (``status``)."""
    batches: list[list[TxOp]] = [[]]
    for index, hook in enumerate(state.hooks):
        ops = _hook_release_ops(state.run_id, hook, state.now, status, ttl)
        if index < HOOKS_RELEASED_IN_COMMIT:
            plan.ops.extend(ops)
        else:
            if len(batches[-1]) + len(ops) > 99:
                batches.append([])
            batches[-1].extend(ops)
    plan.after_commit = [b for b in batches if b]


def _hook_release_ops(run_id: str, hook: Item, now: str, status: str, ttl: int) -> list[TxOp]:
    """The token item is kept, marked released with its run's end status (``endStatus``): a new hook may claim it
    at once (or once its retention passes), and until then a resume of it says the run ended. It expires with
    the run's partition (``ttl``, which already outlasts any retention). A retained hook stays, closed; any other
    is deleted with its pointer."""
    token_op = TxOp("Update", "hook-token", key=token_key(hook["token"]))
    e = token_op.expr
    token_op.condition = render(token_owned_by(hook_id_of(hook)), e, now)
    token_op.update = (f"SET {e.n('released')} = {e.v(True)}, {e.n(END_STATUS)} = {e.v(status)}, "
                       f"{e.n(TTL_ATTRIBUTE)} = {e.v(ttl)}")
    if hook_retained(hook, now):
        closed = TxOp("Update", "hook-release", key=hook_key(run_id, hook_id_of(hook)))
        closed.update = f"SET {closed.expr.n('status')} = {closed.expr.v(HOOK_CLOSED)}"
        closed.condition = "attribute_exists(pk)"
        return [token_op, closed]
    return [
        TxOp("Delete", "hook-release", key=hook_key(run_id, hook_id_of(hook))),
        TxOp("Delete", "hook-release", key=hook_pointer_key(hook_id_of(hook))),
        token_op,
    ]


def hook_id_of(hook: Item) -> str:
    return str(hook["sk"]).removeprefix(HOOK_PREFIX)


def hook_retained(hook: Item, now: str) -> bool:
    until = hook.get("tokenRetentionUntil")
    return hook_fate(datetime.fromisoformat(str(until)) if until else None, datetime.fromisoformat(now)) == "retained"


def plan_hook_created(req: CreateEventRequest, state: State) -> Plan:
    data = data_as(req, HookCreatedData)
    hook_id = req.correlation_id or ""
    retention = data.token_retention_until
    retention_iso = retention.astimezone(UTC).isoformat(timespec="microseconds") if retention else None
    check_hook_token(data.token, retention, datetime.fromisoformat(state.now))
    hook = {
        **hook_key(state.run_id, hook_id),
        "token": data.token,
        "in": SlotRef(0) if state.stored is not None else None,  # the metadata stays in the event
        "isWebhook": bool(data.is_webhook),
        "tokenRetentionUntil": retention_iso,
        "createdAt": state.now,
        "updatedAt": state.now,
        "specVersion": req.spec_version,
        "ver": 1,
    }
    token = put("token", {**token_key(hook["token"]), "token": hook["token"], "runId": state.run_id,
                          "hookId": hook_id, "released": False, "retentionUntil": retention_iso})
    token.condition = render(TOKEN_FREE, token.expr, state.now)
    ops = [
        put("entity", hook, if_absent=True),
        put("hook-pointer", {**hook_pointer_key(hook_id), "runId": state.run_id}, if_absent=True),
        token,
    ]
    return Plan([planned_event(req, state)], RunChange(require_alive=True, hooks_created=1), ops, new_hook=hook)


def hook_conflict_plan(req: CreateEventRequest, state: State, owner_run_id: str) -> Plan:
    """The token is held by another hook: record hook_conflict, in the same commit as a check that the
    token is still held (if it was freed meanwhile, the hook is created instead on the next attempt)."""
    token = data_as(req, HookCreatedData).token
    event = PlannedEvent("hook_conflict", req.correlation_id, {"token": token, "conflictingRunId": owner_run_id},
                         None, None, req.spec_version)
    held = TxOp("ConditionCheck", "token-held", key=token_key(token))
    held.condition = render(token_held_by(owner_run_id), held.expr, state.now)
    return Plan([event], RunChange(require_alive=True), [held])


def plan_hook_received(req: CreateEventRequest, state: State) -> Plan:
    hook_id = req.correlation_id or ""
    check = TxOp("ConditionCheck", "entity", key=hook_key(state.run_id, hook_id), condition="attribute_exists(pk)")
    ops = [check]
    resume_id = data_as(req, HookReceivedData).resume_id
    if resume_id is not None:
        # Keys and the event's slot only (the writer fills it in at commit): a repeat reads the slot back from
        # the cancellation's ALL_OLD item. About 150 bytes, so the marker adds 2 WRU to the transaction.
        ops.append(put(RESUME_MARKER_ROLE, resume_marker_key(state.run_id, hook_id, resume_id), if_absent=True))
    return Plan([planned_event(req, state)], RunChange(require_alive=True), ops)


def plan_hook_disposed(req: CreateEventRequest, state: State) -> Plan:
    hook = state.entity
    if hook is None:
        raise HookNotFoundError(f"hook {req.correlation_id} not found in run {state.run_id}")
    delete = TxOp("Delete", "entity", key=hook_key(state.run_id, hook_id_of(hook)))
    delete.condition = f"{delete.expr.n('ver')} = {delete.expr.v(hook['ver'])}"
    ops = [delete, TxOp("Delete", "hook-pointer", key=hook_pointer_key(hook_id_of(hook)))]
    if not state.token_not_owned:
        # Released, not deleted (the same write units): free at once, still naming this hook, so a repeat of a
        # resume it took is answered as the first was (``world/rules/hooks.py``), until a new hook claims the
        # token or the record expires (by then the run's own data has: a run ends within max_run).
        token = TxOp("Update", "token", key=token_key(hook["token"]))
        e = token.expr
        token.condition = render(token_owned_by(hook_id_of(hook)), e, state.now)
        token.update = (f"SET {e.n('released')} = {e.v(True)}, "
                        f"{e.n(TTL_ATTRIBUTE)} = {e.v(epoch(state.now) + state.run_retention() + state.max_run)} "
                        f"REMOVE {e.n('retentionUntil')}, {e.n(END_STATUS)}")
        ops.append(token)
    return Plan([planned_event(req, state, token=hook["token"])], RunChange(), ops)
