"""What a cancelled TransactWriteItems says, decoded into each write's answer or a retry.

DynamoDB names, per item, the condition that failed (and returns the item as it was): the resume marker of a
repeated resume id, the run head that moved or ended, an entity that exists or changed, a token another hook
holds. This module reads those items as what the commit found (``world.rules.checks.Found``, for the checks whose
conditions failed: the others held) and lets the rulebook say which checks failed (``checks.failed``) and which
contract error that is, in the contract's order (``world.rules.refusal``), or that the state only moved: then it
marks what the next attempt must re-read. What it learns of the run (the head that won, a run gone, an entity
moved) goes into the writer's caches (``write_caches.WriterCaches``), which it is handed.
"""

from __future__ import annotations

from datetime import datetime

from ...world.entities import TERMINAL_RUN_STATUSES
from ...world.errors import WorldError
from ...world.rules import Check, Decision, refusal
from ...world.rules.checks import Found, failed
from ...world.rules.log import check_fence
from ...world.rules.requests import failed_outcome
from ...world.rules.runs import run_missing
from ..dynamodb.transactions import TxCancelled
from .group_commit import Member, Unit
from .hook_plans import RESUME_MARKER_ROLE, RESUME_ONCE_ROLE
from .item_states import token_state
from .write_caches import Attempt, WriterCaches


class CancellationDecoder:
    def __init__(self, caches: WriterCaches) -> None:
        self.caches = caches

    def decode(self, run_id: str, c: TxCancelled, writers: list[Member], writing: list[Unit],
               att: Attempt, now: datetime) -> None:
        """What a cancelled commit (made at ``now``) says: per unit (its entity's condition) and for the run (the
        head that won, from the ALL_OLD item). A member is refused whole only where its request is (a single
        event, an atomic batch) or where the run refuses it (not found, ended, the fence moved)."""
        owner = {u.index: m for m in writers for u in m.units}
        lead = writers[0]
        # A repeated resume id is decided first: the retry of a request already recorded is answered as such
        # even when the run has ended since (which would otherwise be the 410 of the run condition).
        for unit in writing:
            marker = c.failed(f"{RESUME_MARKER_ROLE}:{unit.index}")
            if marker is not None:
                slot = (marker.item or {}).get("slot")
                found = Found(resumed=True, resume_slot=int(slot) if slot is not None else None)
                decision = _decision(unit)
                error = refusal(decision, run_id, failed(decision, found, now, examined=(Check.RESUME_NEW,)))
                assert error is not None
                refuse(owner[unit.index], unit, error)
                continue
            elsewhere = c.failed(f"{RESUME_ONCE_ROLE}:{unit.index}")
            if elsewhere is not None:  # (another hook recorded this resumeOnce id: as early as a repeat)
                held = elsewhere.item or {}
                found = Found(resume_holder=(str(held.get("runId", "?")), str(held.get("hookId", "?"))))
                decision = _decision(unit)
                error = refusal(decision, run_id, failed(decision, found, now, examined=(Check.RESUME_ONCE,)))
                assert error is not None
                refuse(owner[unit.index], unit, error)
        run_reason = c.reason_for("run")
        if run_reason is not None and run_reason.code == "ConditionalCheckFailed":
            old = run_reason.item
            if old is None or int(old.get("hookGen", 0)) != att.hooks_gen:
                att.hooks = None  # hooks were created since they were listed
            creating = any(u.plan and u.plan.run.create_item for u in writing)
            if old is None and not creating:
                self.caches.forget(run_id)
                raise run_missing(run_id)
            if old is not None:
                att.run, att.run_stale, att.run_cached, att.seq = old, False, False, int(old["seq"])
                self.caches.hint(run_id, att.seq)
                self.caches.remember_head(run_id, old)
                if lead.in_band and lead.expected is not None:
                    check_fence(run_id, int(old["seq"]), int(old["seqInBand"]), lead.expected)
                if old["status"] in TERMINAL_RUN_STATUSES:
                    ended = Found(run_status=str(old["status"]))
                    for m in writers:
                        alive = [u for u in m.units if u.index not in m.outcomes and u.plan is not None
                                 and u.plan.decision is not None and Check.RUN_ALIVE in u.plan.decision.checks]
                        if alive:
                            decision = _decision(alive[0])
                            error = refusal(decision, run_id,
                                            failed(decision, ended, now, examined=(Check.RUN_ALIVE,)))
                            assert error is not None
                            m.fail(error)
            else:
                att.run_stale = True
        for unit in writing:
            if not owner[unit.index].settled:
                self._decode_unit(run_id, c, owner[unit.index], unit, now)
        # A taken slot means our seq was stale; the ALL_OLD run item (when the run condition failed too, as it
        # does on every lost race) already names the next free slot, so only re-read when it did not come back.
        fresh = run_reason is not None and run_reason.code == "ConditionalCheckFailed" and run_reason.item
        if c.failed("event") is not None and not fresh:
            att.run_stale = True
            att.seq = None

    def _decode_unit(self, run_id: str, c: TxCancelled, member: Member, unit: Unit, now: datetime) -> None:
        """A unit's failed conditions as what its commit found (each condition re-checks one of the decision's
        checks); the rulebook says which failed and which error that is, or (None) that the state only moved, and
        this marks what the next attempt reads again."""
        i = unit.index
        decision = _decision(unit)
        checks = decision.checks
        examined: list[Check] = []
        found = Found()
        if c.failed(f"entity:{i}") is not None:
            # The entity's condition re-checks that it is absent, that it exists, or its version as read.
            check = next((k for k in (Check.ABSENT, Check.EXISTS) if k in checks), Check.AS_READ)
            examined.append(check)
            found.entity, found.entity_as_read = check is Check.ABSENT, check is not Check.AS_READ
            if check is Check.AS_READ:
                unit.entity_stale = True
                self.caches.drop_entity(run_id, unit.req)
        if c.failed(f"hook-pointer:{i}") is not None:
            examined.append(Check.HOOK_ID_FREE)
            found.hook_id_taken = True
        token = c.failed(f"token:{i}") or c.failed(f"token-held:{i}")
        if token is not None:
            found.token = token_state(token.item) if token.item else None
            examined.extend(k for k in (Check.TOKEN_FREE, Check.TOKEN_OWNED, Check.TOKEN_HELD) if k in checks)
            holder = found.token
            if Check.TOKEN_HELD in checks:
                unit.token_owner = None
            elif Check.TOKEN_OWNED in checks:  # hook_disposed: another hook holds the token now, leave it
                unit.token_owner = holder.run_id if holder is not None else "?"
            elif holder is None or (holder.run_id, holder.hook_id) != (run_id, decision.entity_id):
                unit.token_owner = holder.run_id if holder is not None else None
        error: WorldError | None = refusal(decision, run_id, failed(decision, found, now, examined=examined))
        if error is not None:
            refuse(member, unit, error)


def _decision(unit: Unit) -> Decision:
    assert unit.plan is not None and unit.plan.decision is not None
    return unit.plan.decision


def refuse(member: Member, unit: Unit, error: WorldError) -> None:
    """A refused event: its whole request fails where the request is strict, else the event answers alone."""
    if member.strict:
        member.fail(error)
    else:
        member.outcomes[unit.index] = failed_outcome(error)
