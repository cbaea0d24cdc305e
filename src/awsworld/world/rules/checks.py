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
    (``Decision.checked_token``), None when there is none; ``resume_holder``: the (run id, hook id) that recorded
    the decision's ``resumeOnce`` resume id, None when none did."""

    run_status: str | None = None
    entity: bool = False
    entity_as_read: bool = True
    run_as_read: bool = True
    resumed: bool = False
    resume_slot: int | None = None
    hook_id_taken: bool = False
    token: TokenState | None = None
    resume_holder: tuple[str, str] | None = None


def failed(decision: Decision, found: Found, now: datetime, *, examined: Collection[Check] | None = None) -> Failed:
    """The decision's checks that fail for ``found`` at ``now`` (the write's time; only those in ``examined``,
    when a World could look at no more: the others held), with what the refusal reads: the run's status, the
    resume's slot when the resume id was taken, the token's record when the token was not free.

    Every write pays for this, so it is one loop (no call per check), the checks most writes carry first."""
    bad: list[Check] | None = None
    for check in decision.checks:
        if examined is not None and check not in examined:
            continue
        if check is Check.RUN_ALIVE:
            ok = found.run_status not in TERMINAL_RUN_STATUSES
        elif check is Check.AS_READ:
            ok = found.entity_as_read
        elif check is Check.ABSENT:
            ok = not found.entity
        elif check is Check.RUN_AS_READ:
            ok = found.run_as_read
        elif check is Check.EXISTS:
            ok = found.entity
        elif check is Check.RESUME_NEW:
            ok = not found.resumed
        elif check is Check.TOKEN_FREE:
            ok = token_free(found.token, now)
        elif check is Check.HOOK_ID_FREE:
            ok = not found.hook_id_taken
        elif check is Check.RESUME_ONCE:  # the hook that recorded the resume id, if any, is this one
            ok = found.resume_holder is None or found.resume_holder[1] == decision.entity_id
        elif check is Check.TOKEN_HELD:  # the run a hook_conflict names still holds the token
            ok = holds(token_held_by(decision.token_holder or ""), found.token, now)
        else:  # TOKEN_OWNED: the disposed or ended hook still holds its token
            ok = holds(token_owned_by(decision.entity_id), found.token, now)
        if not ok:
            if bad is None:
                bad = []
            bad.append(check)
    if bad is None:
        return NOTHING_FAILED
    return Failed(frozenset(bad), found.run_status, found.resume_slot if Check.RESUME_NEW in bad else None,
                  found.token if Check.TOKEN_FREE in bad else None,
                  found.resume_holder if Check.RESUME_ONCE in bad else None)
