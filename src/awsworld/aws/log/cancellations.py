"""What a cancelled TransactWriteItems says, decoded into each write's answer or a retry.

DynamoDB names, per item, the condition that failed (and returns the item as it was): the resume marker of a
repeated resume id, the run head that moved or ended, an entity that exists or changed, a token another hook
holds. This module turns those reasons into the contract's errors, in the contract's order (a repeated resume
id first, then the run, then each write's own), or into what the next attempt must re-read.
"""

from __future__ import annotations

from ...world.entities import TERMINAL_RUN_STATUSES
from ...world.errors import (
    EntityConflictError,
    HookAlreadyReceivedError,
    HookNotFoundError,
    InBandSupersededError,
    RunGoneError,
    RunNotFoundError,
    WorldError,
)
from ...world.ids import slot_to_event_id
from ...world.rules.requests import failed_outcome
from ..dynamodb.transactions import TxCancelled
from .group_commit import Member, Unit
from .hook_plans import RESUME_MARKER_ROLE
from .write_caches import Attempt, WriterCaches, entity_cache_key


class CancellationDecoding(WriterCaches):
    def _on_cancel(self, run_id: str, c: TxCancelled, writers: list[Member], writing: list[Unit],
                   att: Attempt) -> None:
        """What a cancelled commit says: per unit (its entity's condition) and for the run (the head that won,
        from the ALL_OLD item). A member is refused whole only where its request is (a single event, an atomic
        batch) or where the run refuses it (not found, ended, the fence moved)."""
        owner = {u.index: m for m in writers for u in m.units}
        lead = writers[0]
        # A repeated resume id is decided first: the retry of a request already recorded is answered as such
        # even when the run has ended since (which would otherwise be the 410 of the run condition).
        for unit in writing:
            marker = c.failed(f"{RESUME_MARKER_ROLE}:{unit.index}")
            if marker is not None:
                slot = (marker.item or {}).get("slot")
                refuse(owner[unit.index], unit, HookAlreadyReceivedError(
                    f"hook {unit.req.correlation_id} already received this resume id",
                    hook_id=unit.req.correlation_id or "",
                    event_id=slot_to_event_id(int(slot)) if slot is not None else None))
        run_reason = c.reason_for("run")
        if run_reason is not None and run_reason.code == "ConditionalCheckFailed":
            old = run_reason.item
            if old is None or int(old.get("hookGen", 0)) != att.hooks_gen:
                att.hooks = None  # hooks were created since they were listed
            creating = any(u.plan and u.plan.run.create_item for u in writing)
            if old is None and not creating:
                self.forget(run_id)
                raise RunNotFoundError(f"run {run_id} not found")
            if old is not None:
                att.run, att.run_stale, att.run_cached, att.seq = old, False, False, int(old["seq"])
                self._hint(run_id, att.seq)
                self._remember_head(run_id, old)
                if lead.in_band and lead.expected is not None and int(old["seqInBand"]) != lead.expected:
                    raise InBandSupersededError(
                        f"run {run_id} moved on: in-band count is {old['seqInBand']}, not {lead.expected}",
                        seq=int(old["seq"]), seq_in_band=int(old["seqInBand"]))
                if old["status"] in TERMINAL_RUN_STATUSES:
                    for m in writers:
                        if any(u.plan and u.plan.run.require_alive for u in m.units if u.index not in m.outcomes):
                            m.fail(RunGoneError(f"run {run_id} is {old['status']}"))
            else:
                att.run_stale = True
        for unit in writing:
            if not owner[unit.index].settled:
                self._on_unit_cancel(run_id, c, owner[unit.index], unit)
        # A taken slot means our seq was stale; the ALL_OLD run item (when the run condition failed too, as it
        # does on every lost race) already names the next free slot, so only re-read when it did not come back.
        fresh = run_reason is not None and run_reason.code == "ConditionalCheckFailed" and run_reason.item
        if c.failed("event") is not None and not fresh:
            att.run_stale = True
            att.seq = None

    def _on_unit_cancel(self, run_id: str, c: TxCancelled, member: Member, unit: Unit) -> None:
        i = unit.index
        kind = unit.req.event_type
        entity = c.failed(f"entity:{i}")
        error: WorldError | None = None
        if entity is not None:
            if kind == "hook_received":
                error = HookNotFoundError(f"hook {unit.req.correlation_id} not found in run {run_id}")
            elif kind.endswith("_created"):
                error = EntityConflictError(f"{kind.split('_')[0]} {unit.req.correlation_id} already exists")
            else:
                unit.entity_stale = True
                self._entities.pop(entity_cache_key(run_id, unit.req), None)
        token = c.failed(f"token:{i}")
        if c.failed(f"hook-pointer:{i}") is not None and kind == "hook_created" and token is None:
            error = EntityConflictError(f"hook {unit.req.correlation_id} already exists")
        if token is not None:
            owner = token.item or {}
            if kind == "hook_disposed":
                unit.token_owner = owner.get("runId", "?")
            elif owner.get("runId") == run_id and owner.get("hookId") == unit.req.correlation_id:
                error = EntityConflictError(f"hook {unit.req.correlation_id} already exists")
            else:
                unit.token_owner = owner.get("runId")
        if c.failed(f"token-held:{i}") is not None:
            unit.token_owner = None
        if error is not None:
            refuse(member, unit, error)


def refuse(member: Member, unit: Unit, error: WorldError) -> None:
    """A refused event: its whole request fails where the request is strict, else the event answers alone."""
    if member.strict:
        member.fail(error)
    else:
        member.outcomes[unit.index] = failed_outcome(error)
