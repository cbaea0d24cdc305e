"""What each of a decision's checks means over the state a commit finds, written once for every World.

A decision carries the ``checks`` its commit must still find true (``decision.Check``). Each World looks at the
state its own way (the in-memory World at its records, with no ``await`` since the decision; the AWS World at
the items a cancelled transaction returns), puts what it found in a ``Found``, and asks ``failed`` which checks
failed and what the refusal needs to know (the run's status, the slot of the first hook_received with the resume
id, the token's holder). Which contract error that is stays ``decision.refusal``'s choice.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from ..entities import TERMINAL_RUN_STATUSES
from .conditions import holds
from .decision import NOTHING_FAILED, Check, Decision, Failed
from .hooks import token_free, token_held_by, token_owned_by
from .state import TokenState


@dataclass(slots=True)
class Found:
    """The state a commit finds for one decision, as far as its checks look.

    ``run_status``: the run's status now; ``entity``: the decision's step, hook or wait exists; ``entity_as_read``:
    it is as the decision read it (``run_as_read``: so is the run's status); ``resumed``: a hook_received of the
    hook already recorded the decision's resume id (at ``resume_slot``, when known); ``hook_id_taken``: a hook of
    any run has the decision's hook id; ``token``: the record of the token the checks are about
    (``Decision.checked_token``), None when there is none."""

    run_status: str | None = None
    entity: bool = False
    entity_as_read: bool = True
    run_as_read: bool = True
    resumed: bool = False
    resume_slot: int | None = None
    hook_id_taken: bool = False
    token: TokenState | None = None


def check_holds(check: Check, decision: Decision, found: Found, now: datetime) -> bool:
    """Whether ``check`` of ``decision`` holds for what the commit found at ``now`` (the write's time)."""
    if check is Check.RUN_ALIVE:
        return found.run_status not in TERMINAL_RUN_STATUSES
    if check is Check.ABSENT:
        return not found.entity
    if check is Check.EXISTS:
        return found.entity
    if check is Check.AS_READ:
        return found.entity_as_read
    if check is Check.RUN_AS_READ:
        return found.run_as_read
    if check is Check.RESUME_NEW:
        return not found.resumed
    if check is Check.TOKEN_FREE:
        return token_free(found.token, now)
    if check is Check.HOOK_ID_FREE:
        return not found.hook_id_taken
    if check is Check.TOKEN_HELD:
        return holds(token_held_by(decision.token_holder or ""), found.token, now)
    return holds(token_owned_by(decision.entity_id), found.token, now)  # TOKEN_OWNED


def failed(decision: Decision, found: Found, now: datetime, *, examined: Collection[Check] | None = None) -> Failed:
    """The decision's checks that fail for ``found`` (only those in ``examined``, when a World could look at no
    more: the others held), with what the refusal reads: the run's status, the resume's slot when the resume id
    was taken, the token's record when the token was not free."""
    bad = [check for check in decision.checks
           if (examined is None or check in examined) and not check_holds(check, decision, found, now)]
    if not bad:
        return NOTHING_FAILED
    return Failed(frozenset(bad), found.run_status, found.resume_slot if Check.RESUME_NEW in bad else None,
                  found.token if Check.TOKEN_FREE in bad else None)
