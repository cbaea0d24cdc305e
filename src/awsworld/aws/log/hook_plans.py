"""Hook writes as DynamoDB items: the hook, its global id pointer, its token item and resume markers.

The rulebook (``world/rules/hooks.py``) decides every hook write (when a token is free, who holds it, what a run's
end or a ``hook_disposed`` does to it); ``plan_hook`` turns its decision into the items and the conditions that
re-check at commit what it decided on (``Check.TOKEN_FREE`` and the others as ``conditions.render`` writes them),
so a race only makes the write retry. The token item lives for the token's whole life: claimed by
``hook_created``, released (still naming its last hook) by ``hook_disposed`` or by its run's end (with how the
run ended), until a new hook claims it or it expires.
"""

from __future__ import annotations

from ...world.rules import Check, Decision, HookEnd, View
from ...world.rules.hooks import HOOK_CLOSED, TOKEN_FREE, token_held_by, token_owned_by
from ..dynamodb.transactions import TxOp, put
from ..keys import hook_key, hook_pointer_key, resume_marker_key, resume_once_key, token_key
from ..resources import TTL_ATTRIBUTE
from .conditions import render
from .item_states import END_STATUS, item_of, token_item
from .plan import Plan, State

# A transaction holds at most 100 items: the run, the event, and 3 per hook released in it.
HOOKS_RELEASED_IN_COMMIT = 30


# The role of a hook_received's resume marker in its transaction (the writer stores the event's slot in it).
RESUME_MARKER_ROLE = "resume"
# The role of a resumeOnce id's table-wide marker (the hook that recorded the id).
RESUME_ONCE_ROLE = "resume-once"


def release_hooks(plan: Plan, state: State, ends: tuple[HookEnd, ...], ttl: int) -> None:
    """A run's end closes its hooks (``world/rules/hooks.py``): it removes the released ones and frees their
    tokens, keeps the retained ones closed; each token item stays as the memory of how its run ended."""
    batches: list[list[TxOp]] = [[]]
    for index, end in enumerate(ends):
        ops = _hook_release_ops(state.run_id, end, state.now, ttl)
        if index < HOOKS_RELEASED_IN_COMMIT:
            plan.ops.extend(ops)
        else:
            if len(batches[-1]) + len(ops) > 99:
                batches.append([])
            batches[-1].extend(ops)
    plan.after_commit = [b for b in batches if b]


def _hook_release_ops(run_id: str, end: HookEnd, now: str, ttl: int) -> list[TxOp]:
    """The token item is kept, marked released with its run's end status (``endStatus``), where this hook still
    holds it: a new hook may claim it at once (or once its retention passes), and until then a resume of it says
    the run ended. It expires with the run's partition (``ttl``, which already outlasts any retention). A
    retained hook stays, closed; a released one is deleted with its pointer."""
    hook_id = end.hook.hook_id
    token_op = TxOp("Update", "hook-token", key=token_key(end.token.token))
    e = token_op.expr
    token_op.condition = render(token_owned_by(hook_id), e, now)
    token_op.update = (f"SET {e.n('released')} = {e.v(True)}, {e.n(END_STATUS)} = {e.v(end.token.end_status)}, "
                       f"{e.n(TTL_ATTRIBUTE)} = {e.v(ttl)}")
    if end.fate == "retained":
        closed = TxOp("Update", "hook-release", key=hook_key(run_id, hook_id))
        closed.update = f"SET {closed.expr.n('status')} = {closed.expr.v(HOOK_CLOSED)}"
        closed.condition = "attribute_exists(pk)"
        return [token_op, closed]
    return [
        TxOp("Delete", "hook-release", key=hook_key(run_id, hook_id)),
        TxOp("Delete", "hook-release", key=hook_pointer_key(hook_id)),
        token_op,
    ]


def plan_hook(plan: Plan, decision: Decision, state: State, view: View) -> None:
    """A hook write's items, each condition re-checking one of the decision's checks."""
    hook_id = decision.entity_id
    checks = decision.checks
    if decision.event_type == "hook_created":
        if decision.token_holder is not None:
            # The token is held by another hook: hook_conflict, in the same commit as a check that it still is
            # (if it was freed meanwhile, the hook is created instead on the next attempt).
            held = TxOp("ConditionCheck", "token-held", key=token_key(str(decision.events[0].data["token"])))
            held.condition = render(token_held_by(decision.token_holder), held.expr, state.now)
            plan.ops = [held]
            return
        hook, token = decision.hook, decision.token
        assert hook is not None and token is not None
        item = {**hook_key(state.run_id, hook_id), **item_of(hook), "ver": 1}
        claim = put("token", {**token_key(token.token), **token_item(token)})
        claim.condition = render(TOKEN_FREE, claim.expr, state.now)
        plan.ops = [put("entity", item, if_absent=Check.ABSENT in checks),
                    put("hook-pointer", {**hook_pointer_key(hook_id), "runId": state.run_id},
                        if_absent=Check.HOOK_ID_FREE in checks),
                    claim]
        plan.run.hooks_created, plan.new_hook = 1, item
    elif decision.event_type == "hook_received":
        plan.ops = [TxOp("ConditionCheck", "entity", key=hook_key(state.run_id, hook_id),
                         condition="attribute_exists(pk)")]
        if decision.resume_id is not None:
            # Keys and the event's slot only (the writer fills it in at commit): a repeat reads the slot back from
            # the cancellation's ALL_OLD item. About 150 bytes, so the marker adds 2 WRU to the transaction.
            plan.ops.append(put(RESUME_MARKER_ROLE, resume_marker_key(state.run_id, hook_id, decision.resume_id),
                                if_absent=True))
        if decision.resume_once and decision.resume_id is not None:
            # Check.RESUME_ONCE: absent, or naming this hook (a repeat, which the marker above refuses). About 150
            # bytes too: 2 WRU more in the transaction.
            once = put(RESUME_ONCE_ROLE, {**resume_once_key(decision.resume_id), "runId": state.run_id,
                                          "hookId": hook_id})
            once.condition = f"attribute_not_exists(pk) OR {once.expr.n('hookId')} = {once.expr.v(hook_id)}"
            plan.ops.append(once)
    else:  # hook_disposed
        hook, old = view.hook, state.entity
        assert hook is not None and old is not None
        delete = TxOp("Delete", "entity", key=hook_key(state.run_id, hook_id))
        delete.condition = f"{delete.expr.n('ver')} = {delete.expr.v(old['ver'])}"
        plan.ops = [delete, TxOp("Delete", "hook-pointer", key=hook_pointer_key(hook_id))]
        if decision.token is not None:
            # Released, not deleted (the same write units): free at once, still naming this hook, so a repeat of a
            # resume it took is answered as the first was, until a new hook claims the token or the record
            # expires (by then the run's own data has: a run ends within max_run).
            token = TxOp("Update", "token", key=token_key(decision.token.token))
            e = token.expr
            token.condition = render(token_owned_by(hook_id), e, state.now)
            token.update = (f"SET {e.n('released')} = {e.v(True)}, "
                            f"{e.n(TTL_ATTRIBUTE)} = {e.v(state.item_ttl())} "
                            f"REMOVE {e.n('retentionUntil')}, {e.n(END_STATUS)}")
            plan.ops.append(token)
