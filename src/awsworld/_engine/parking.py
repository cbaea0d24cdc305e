"""A parked run: one whose replay diverged from its log, kept running until code that replays it comes back.

Under ``AWSWORLD_ON_DIVERGENCE=park`` (the default of ``awsworld dev`` and of the SAM template's ``OnDivergence``) a
run whose replay keeps diverging is not failed: it waits, and the first delivery that replays it without a
divergence (after a revert, or a ``patched()`` branch) carries on where it stopped. The contract's run statuses are
fixed (pending, running, completed, failed, cancelled), so *parked* is awsworld's own mark on a running run: the
reserved run attribute ``$awsworld.parked`` (the contract reserves ``$``-prefixed keys: a client's
``set_attributes`` cannot write them), set and cleared by ``attr_set`` events in the run's log. It is as durable as
the log, every World returns it with the run (``runs.get``, ``runs.list``), and every reader (``awsworld runs``,
``describe``, the UI, ``--json``) reads it through this module, so all of them say the same.

Its value is JSON: ``since`` (when the run was first parked; a later divergence elsewhere keeps it), ``position``
and ``event`` (where), ``change`` (the kind of difference) and ``divergence``, the divergence's *outline*: its
sentence with every argument list written ``(…)``, because run attributes stay in plain text when payloads are
encrypted (``_engine.divergence``). The arguments are one ``awsworld replay RUN`` away.

Who writes it: the flow, when a run diverges past its recoveries under the park policy (``_worker.endings``); the
delivery path, when a started run's workflow is missing past its window under that policy (``_worker.delivery``);
and ``awsworld dev``, when its replay of an unfinished run against reloaded code diverges (``cli.dev_reload``). Who
clears it: the flow, on the first delivery that replays the run without a divergence, before anything else that
delivery writes. A run that ends keeps its last attributes; a mark on an ended run is not shown as parked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from ..world.entities import TERMINAL_RUN_STATUSES
from ..world.events import Event

PARKED_ATTRIBUTE = "$awsworld.parked"
PARKED = "parked"
"""What ``awsworld runs`` and the UI show as the status of a running run that is parked."""
MISSING = "missing"
"""The ``change`` of a run parked because its workflow is not registered where it was delivered (``missing_code``)."""


@dataclass(frozen=True)
class Parked:
    since: datetime
    divergence: str
    position: str | None = None
    event: int | None = None
    change: str | None = None

    def value(self) -> str:
        """The attribute's value: compact JSON."""
        return json.dumps(self.to_json(), separators=(",", ":"), ensure_ascii=False)

    def to_json(self) -> dict[str, Any]:
        return {"since": self.since.isoformat(), "position": self.position, "event": self.event,
                "change": self.change, "divergence": self.divergence}

    def same_place(self, other: Parked | None) -> bool:
        """Whether ``other`` says the same (a delivery parking a run parked already writes nothing)."""
        return other is not None and (other.position, other.event, other.change, other.divergence) == (
            self.position, self.event, self.change, self.divergence)

    def kept_since(self, earlier: Parked | None) -> Parked:
        """This mark, parked since ``earlier``'s time when the run was parked already."""
        if earlier is None:
            return self
        return Parked(earlier.since, self.divergence, self.position, self.event, self.change)


class Divergence(Protocol):
    """What a mark is made from: a ``ReplayDivergenceError``, or a ``client.replay.ReplayResult`` that diverged."""

    @property
    def position(self) -> str | None: ...

    @property
    def slot(self) -> int | None: ...

    @property
    def change(self) -> str | None: ...

    @property
    def outline(self) -> str | None: ...


def parked_from(divergence: Divergence, now: datetime) -> Parked:
    return Parked(now, divergence.outline or "its replay diverged", divergence.position, divergence.slot,
                  divergence.change)


def missing_code(what: str, now: datetime) -> Parked:
    """The mark of a started run whose workflow (or step) this deployment lacks: ``what`` names it and the modules
    loaded (no payload)."""
    return Parked(now, what, change=MISSING)


def parse(value: str | None) -> Parked | None:
    """A mark's value read back; a value that is not ours (written by hand) still reads as parked, with the text
    as its divergence."""
    if not value:
        return None
    try:
        data = json.loads(value)
        since = datetime.fromisoformat(str(data["since"]))
        return Parked(since if since.tzinfo else since.replace(tzinfo=UTC), str(data.get("divergence") or ""),
                      data.get("position"), data.get("event"), data.get("change"))
    except (ValueError, TypeError, KeyError):
        return Parked(datetime.fromtimestamp(0, UTC), value)


def parked_run(status: str, attributes: Mapping[str, str] | None) -> Parked | None:
    """The mark of a run that is still going (a mark left on an ended run is history, not a state)."""
    if status in TERMINAL_RUN_STATUSES:
        return None
    return parse((attributes or {}).get(PARKED_ATTRIBUTE))


def shown_status(status: str, attributes: Mapping[str, str] | None) -> str:
    """The status as people read it: ``parked`` for a parked running run, the contract's status otherwise."""
    return PARKED if parked_run(status, attributes) is not None else status


def parked_in_log(events: Sequence[Event]) -> Parked | None:
    """The mark as the run's log leaves it (the last ``attr_set`` that touched it): what a flow reads, having the
    log in hand."""
    found: str | None = None
    for event in events:
        if event.event_type == "attr_set":
            for change in (event.event_data or {}).get("changes") or ():
                if change.get("key") == PARKED_ATTRIBUTE:
                    found = change.get("value")
    return parse(found)


def park_key(run_id: str, now: datetime, period_seconds: float) -> str:
    """The idempotency key of the message that brings a parked run back after ``period_seconds``
    (``AWSWORLD_PARK_SECONDS``): one per period, so every delivery of the run in one period (a duplicate, its
    redelivery and a hook's delivery racing it) sends one, and the next period's is a new key (the delivery that
    sends it comes a whole period after the last)."""
    return f"{run_id}:parked:{int(now.timestamp() // period_seconds)}"


def mark(parked: Parked | None) -> dict[str, Any]:
    """The ``attr_set`` change that sets the mark (or, for None, clears it)."""
    return {"key": PARKED_ATTRIBUTE, "value": None if parked is None else parked.value()}


def why(change: str | None) -> str:
    """How a reader is told why a run is parked, before its mark's ``divergence``: where its replay differs from its
    log, or that its code is missing (a mark of ``missing_code`` names no place in the log)."""
    return "its code is missing: " if change == MISSING else "its replay differs from its log at "


UNREADABLE = "value"
"""The ``change`` of a run parked because its code cannot read a value its log recorded (``divergence.unreadable``)."""
UNBOUND = "parameters"
"""The ``change`` of a run parked because its workflow does not take its recorded input (``divergence.parameters``)."""


def ways_out(run_id: str, change: str | None = None, pinned: str | None = None) -> str:
    """What an operator can do about a parked run, in one sentence. A run parked for a value its code cannot read,
    or an input its workflow does not take, is not helped by a ``patched()`` branch (the value is read, the
    workflow called, before any branch): the code must take what was recorded.

    ``pinned``: the deployment the run is pinned to (``_deployments.pins``). Such a run diverged on that
    deployment's own code (a workflow that reads something that changes between replays), and its deliveries keep
    going there: a deploy of a fix does not reach it, so the way out is to move it to the fix with ``awsworld
    upgrade`` (which replays it there first). ``awsworld dev``'s reload moves it by itself (``cli.dev_reload``)."""
    fail = f"`awsworld fail {run_id}` ends it instead"
    if change == MISSING:
        return f"restore the workflow (its name, its module) and the run resumes; {fail}"
    if pinned is not None:
        fix = ("code that takes what the log recorded, as its divergence says" if change in (UNREADABLE, UNBOUND)
               else "code that replays it (a patched() branch around what differs, docs/how-to/changing-code.md)")
        return (f"it is pinned to deployment {pinned}, whose own code it diverges on, and stays there: deploy {fix} "
                f"and move it to that code with `awsworld upgrade {run_id}` (`awsworld dev` moves it by itself at "
                f"the reload that brings it); {fail}")
    if change in (UNREADABLE, UNBOUND):
        return f"make the code take what the log recorded, as its divergence says (or revert it), and the run " \
               f"resumes; {fail}"
    return (f"revert the code, or branch the change with awsworld.patched() (docs/how-to/changing-code.md), "
            f"and the run resumes; {fail}")
