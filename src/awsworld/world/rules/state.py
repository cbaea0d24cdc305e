"""What a rule reads, and what a decision hands back: typed views of a run, a step, a hook, a wait and a token.

Each World builds these from what it stores (the AWS World from the items it read or last committed, the
in-memory World from its records) and the rules of this package decide from them alone, so the same state gets
the same decision on every World. A decision returns an entity's state after the write in the same types; a
value the write itself brings (a step's input or result, a hook's metadata, a run's output) is named by an
``EventRef`` (the slot of one of the decision's own events, known once the World places them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from operator import attrgetter
from typing import Any, TypeVar, cast, dataclass_transform

from ..entities import TERMINAL_RUN_STATUSES

T = TypeVar("T")


@dataclass_transform(frozen_default=True)
def frozen(cls: type[T]) -> type[T]:
    """A rulebook value type: frozen for the type checker (pyright refuses any assignment to a field, and strict
    mode covers the rulebook), a plain slotted dataclass at run time, with the hash and equality a frozen one has.

    Why not ``@dataclass(frozen=True)``: its ``__init__`` sets each field with ``object.__setattr__``, a call per
    field, and a write builds several of these states (a step's 15 fields made that a tenth of an in-memory
    step's cost). Nothing changes a state after it is built: a decision builds new ones (``evolve``), and the
    records and views that share one only read it (the one exception: ``placed`` fills in a decision's own
    event slots before any record holds it)."""
    return dataclass(slots=True, unsafe_hash=True)(cls)


@frozen
class EventRef:
    """The slot of the decision's ``index``-th event, known only when the World places the events."""

    index: int


FIRST_EVENT = EventRef(0)
"""The slot of a decision's first event: one shared instance (a ref is a value; nothing changes one), not one a
write."""

Slot = int | EventRef | None
"""Where a value lives: the slot of the event that holds it (an ``EventRef`` before that slot is known)."""


@frozen
class RunState:
    run_id: str
    status: str
    started_at: datetime | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_RUN_STATUSES


@frozen
class StepState:
    step_id: str
    step_name: str
    status: str
    created_at: datetime
    updated_at: datetime
    spec_version: int | None = None
    attempt: int = 0
    input: Slot = None
    output: Slot = None
    error: Slot = None
    retry_after: datetime | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None
    owner: str | None = None
    """The message id of the delivery running the current attempt (``leases.start_verdict``)."""
    lease_until: datetime | None = None


@frozen
class HookState:
    hook_id: str
    token: str
    created_at: datetime
    updated_at: datetime
    spec_version: int | None = None
    is_webhook: bool = False
    metadata: Slot = None
    retention_until: datetime | None = None
    payload_codec: bool = False  # its payloads are a codec's text or bytes (``HookCreatedData.payload_codec``)


@frozen
class WaitState:
    wait_id: str
    status: str
    resume_at: datetime
    created_at: datetime
    updated_at: datetime
    spec_version: int | None = None
    completed_at: datetime | None = None


@frozen
class TokenState:
    """Who holds a hook token, for the whole of the token's life (``hooks.py`` says how it moves):

    - claimed: ``run_id``/``hook_id`` hold it (``released`` False), reserved until ``retention_until`` past
      their run's end;
    - released by its run's end (``end_status``: how the run ended): free, or still reserved while its retention
      runs; a resume of it says the run ended;
    - released by ``hook_disposed`` (``end_status`` None, no retention): free at once, and still naming the last
      hook that held it, so a repeat of a resume that hook already took can be answered as the first was.

    The record stays until a new hook claims the token, or the run's data expires."""

    token: str
    run_id: str
    hook_id: str
    retention_until: datetime | None = None
    released: bool = False
    end_status: str | None = None

    @property
    def disposed(self) -> bool:
        """Released by its hook's ``hook_disposed`` (not by its run's end)."""
        return self.released and self.end_status is None


@frozen
class View:
    """What a decision sees: the state of the write's run and entity just before it, as the World knows it.

    ``token``: for hook_created, who holds the token (None: nobody, or not read yet: the commit re-checks that it
    is free); for hook_disposed, who holds the hook's token when ``token_read`` (when it is not, the hook is
    assumed to hold it, and the commit re-checks that too). ``carries_value``: the request carries its event
    type's value field (even a null). ``deployment_id``: the World's own, for a run created without one.
    ``run_read``: ``run`` is what the World knows (None: there is no such run); a World that did not read the run
    for a write that does not need it leaves this False, and its commit finds a missing run."""

    run_id: str
    now: datetime
    run: RunState | None = None
    step: StepState | None = None
    hook: HookState | None = None
    wait: WaitState | None = None
    hooks: tuple[HookState, ...] = ()
    token: TokenState | None = None
    token_read: bool = True
    carries_value: bool = False
    deployment_id: str | None = None
    run_read: bool = True


S = TypeVar("S")
_FIELDS: dict[type, tuple[dict[str, int], Callable[[Any], tuple[Any, ...]]]] = {}


def evolve(state: S, **changes: Any) -> S:
    """``dataclasses.replace`` for these states, without its per-call work (it looks up the fields and builds
    keyword arguments on every call; a write makes a few states: on the in-memory World that was a tenth of a
    step's cost). The fields are read in one ``attrgetter`` call and passed to the constructor by position.
    Unknown names are refused."""
    cls = type(state)
    index, read = _FIELDS.get(cls) or _fields_of(cls)
    values = list(read(state))
    try:
        for name, value in changes.items():
            values[index[name]] = value
    except KeyError as unknown:
        raise TypeError(f"{cls.__name__} has no field {unknown}") from None
    return cls(*values)


def _fields_of(cls: type) -> tuple[dict[str, int], Callable[[Any], tuple[Any, ...]]]:
    names = tuple(f.name for f in fields(cast(Any, cls)))
    known = _FIELDS[cls] = ({name: i for i, name in enumerate(names)}, attrgetter(*names))
    return known


E = TypeVar("E", StepState, HookState)
_SLOT_FIELDS: dict[type, tuple[str, ...]] = {StepState: ("input", "output", "error"), HookState: ("metadata",)}


def placed(state: E, slots: Sequence[int]) -> E:
    """``state`` with each ``EventRef`` replaced by the slot the World placed that event at, in place.

    Why in place (the one write to a built state): a state holding an ``EventRef`` is a decision's own, built
    fresh by its rule (a World's records and views never hold one, so no one else has it), and nothing reads
    its refs once the World has placed the events; a copy cost a second state per write. A state without refs
    (one a record may share) is returned untouched."""
    for name in _SLOT_FIELDS[type(state)]:
        ref = getattr(state, name)
        if type(ref) is EventRef:
            object.__setattr__(state, name, slots[ref.index])
    return state
