"""Ending a run's wait now, as an operator (``Client.skip_wait``, ``awsworld skip``): a sleep, a hook's timeout, a
retry's back-off.

A 1-day sleep under ``awsworld dev`` takes a day; this ends it and records that an operator did
(``world.rules.skips``), so a replay of the log gives what a normal wake gives. Which waits a run has is read from
its log and its steps (no workflow code needed, so it works against a deployed stack too): every ``wait_created``
without its ``wait_completed`` (a sleep, a hook's timeout, a heartbeat wait; not a hook's waits once the hook is
disposed, nor a heartbeat wait a later one replaced: void, never completed, as ``describe`` reads them), and every
step pending with a ``retryAfter`` (a retry's back-off, a poll between polls). A wait is named by its id
(``wait_3``, ``step_2``) or its name (``sleep(name=...)``, ``with_name``, a step's name) as ``describe`` and
``events`` show them.

Without a name the run's one wait is skipped; with several, none is (``AmbiguousWaitError`` lists them): ending a
hook's timeout sends the workflow down its timeout path, which should be chosen, not hit by a default. The
caller (``Client.skip_wait``) then wakes the run, so it goes on at once rather than when its own delayed message
comes; that message finds nothing left to do when it does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from .._engine.divergence import call_order
from .._engine.ops import DISPLAY_NAME_FIELD
from .._http.push import refuse_wake
from .._timeline import hook_wait_label, hook_waits
from ..world.entities import TERMINAL_RUN_STATUSES, Step
from ..world.errors import EntityConflictError, RunGoneError
from ..world.events import Event
from ..world.pages import MAX_ENTITIES_PAGE, collect_pages
from ..world.protocol import World
from ..world.rules.skips import skip_request

WaitKind = Literal["wait", "retry"]


@dataclass(frozen=True)
class OpenWait:
    """One wait of a run that an operator can end now. ``kind``: ``wait`` (a sleep, a hook's timeout or heartbeat
    wait: a ``wait_created`` not completed) or ``retry`` (a step's back-off before its next attempt). ``id``: the
    wait's or the step's id; ``name``: its display name, and for a retry the step's name; ``due``: when it ends on
    its own."""

    kind: WaitKind
    id: str
    due: datetime | None
    display_name: str | None = None
    step_name: str | None = None
    attempt: int | None = None
    hook_wait: str | None = None
    """For a hook's own wait, which it is (``timeout of hook approve:7``, ``heartbeat deadline of hook ...``), as
    ``events`` labels it: a run waiting on a hook with both has two waits, and skipping the wrong one sends the
    workflow down the other path."""

    def named(self, name: str) -> bool:
        return name in (self.id, self.display_name, self.step_name)

    def __str__(self) -> str:
        return self.described()

    def described(self, when: Callable[[datetime], str] = datetime.isoformat) -> str:
        """The wait in one line, its due time as ``when`` writes it (ISO, unless a reader's form is given: the CLI
        writes it as ``describe`` does)."""
        shown = f" {self.display_name!r}" if self.display_name else ""
        due = f"until {when(self.due)}" if self.due is not None else "due"
        if self.kind == "retry":
            return f"{self.id}{shown} ({self.step_name}): back-off before attempt {self.attempt}, {due}"
        role = f" ({self.hook_wait})" if self.hook_wait else ""
        return f"{self.id}{shown}{role}: {due}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "id": self.id, "displayName": self.display_name, "stepName": self.step_name,
                "due": None if self.due is None else self.due.isoformat(), "attempt": self.attempt,
                "hookWait": self.hook_wait}


@dataclass(frozen=True)
class SkippedWait:
    """What ``Client.skip_wait`` did: the wait, and the event that records its skip (None: it ended by itself
    first, a moment before the skip, and the run goes on without it)."""

    run_id: str
    wait: OpenWait
    event: Event | None

    def to_json(self) -> dict[str, Any]:
        return {"runId": self.run_id, "wait": self.wait.to_json(), "skipped": self.event is not None,
                "eventId": None if self.event is None else self.event.event_id}


class WaitNotFoundError(LookupError):
    """The run has no wait to skip (``name`` None), or none by that name; ``waits`` are the ones it has."""

    def __init__(self, run_id: str, name: str | None, waits: Sequence[OpenWait]) -> None:
        self.run_id = run_id
        self.name = name
        self.waits = list(waits)
        super().__init__(self.text())

    def text(self, when: Callable[[datetime], str] = datetime.isoformat) -> str:
        """The message, the waits' due times as ``when`` writes them (the CLI: as ``describe`` does)."""
        if self.name is None:
            return f"run {self.run_id} waits on no sleep, timeout or retry back-off: there is nothing to skip"
        listed = "; ".join(w.described(when) for w in self.waits) or "none"
        return f"run {self.run_id} has no wait named {self.name!r} (its waits: {listed})"


class AmbiguousWaitError(ValueError):
    """More than one wait fits (the run's waits, without a name; a name several share): name one by its id."""

    def __init__(self, run_id: str, name: str | None, waits: Sequence[OpenWait]) -> None:
        self.run_id = run_id
        self.name = name
        self.waits = list(waits)
        super().__init__(self.text())

    def text(self, when: Callable[[datetime], str] = datetime.isoformat) -> str:
        """The message, the waits' due times as ``when`` writes them (the CLI: as ``describe`` does)."""
        listed = "; ".join(w.described(when) for w in self.waits)
        if self.name is None:
            return f"run {self.run_id} has {len(self.waits)} waits: {listed}; name the one to skip"
        return (f"{len(self.waits)} waits of run {self.run_id} are named {self.name!r}: {listed}; name the one to "
                "skip by its id")


async def open_waits(world: World, run_id: str) -> list[OpenWait]:
    """The run's waits an operator can end, in call order (one metadata-only read of the log and of its steps)."""
    events = await collect_pages(lambda cursor: world.events.list(run_id, cursor=cursor, resolve_data="none"))
    steps: list[Step] = await collect_pages(lambda cursor: world.steps.list(run_id, cursor=cursor,
                                                                            limit=MAX_ENTITIES_PAGE,
                                                                            resolve_data="none"))
    return waits_of(events, steps)


def waits_of(events: Sequence[Event], steps: Sequence[Step]) -> list[OpenWait]:
    """``open_waits`` from what was read."""
    found: dict[str, OpenWait] = {}
    shown: dict[str, str] = {}
    tokens = {e.correlation_id or "": str((e.event_data or {}).get("token") or e.correlation_id)
              for e in events if e.event_type == "hook_created"}  # a timeout's wait comes before its hook
    of_hooks = hook_waits(events)
    for event in events:
        data = event.event_data or {}
        key = event.correlation_id or ""
        name = data.get(DISPLAY_NAME_FIELD)
        if event.event_type.endswith("_created") and isinstance(name, str):
            shown[key] = name
        if event.event_type == "wait_created":
            resume = data.get("resumeAt")
            hook, role = of_hooks.get(key, (None, None))
            if hook is not None:  # a re-armed heartbeat deadline replaces the one before (never completed)
                for earlier in [w for w in found if of_hooks.get(w) == (hook, role)]:
                    found.pop(earlier)
            found[key] = OpenWait("wait", key, datetime.fromisoformat(resume) if isinstance(resume, str) else None,
                                  shown.get(key), hook_wait=None if hook is None or role is None else
                                  hook_wait_label(role, tokens.get(hook, hook)))
        elif event.event_type == "wait_completed":
            found.pop(key, None)
        elif event.event_type == "hook_disposed":  # its timeout and heartbeat waits are void (never completed)
            for void in [w for w in found if of_hooks.get(w, ("",))[0] == key]:
                found.pop(void)
    for step in steps:
        if step.status == "pending" and step.retry_after is not None:
            found[step.step_id] = OpenWait("retry", step.step_id, step.retry_after, shown.get(step.step_id),
                                           step.step_name, step.attempt + 1)
    return [found[key] for key in sorted(found, key=call_order)]


def choose(run_id: str, waits: Sequence[OpenWait], name: str | None) -> OpenWait:
    """The one wait ``name`` names (or the run's only one): ``WaitNotFoundError`` / ``AmbiguousWaitError``."""
    fitting = [w for w in waits if name is None or w.named(name)]
    if not fitting:
        raise WaitNotFoundError(run_id, name, waits)
    if len(fitting) > 1:
        exact = [w for w in fitting if w.id == name]  # an id names one, whatever names others share
        if len(exact) == 1:
            return exact[0]
        raise AmbiguousWaitError(run_id, name, fitting)
    return fitting[0]


async def skip(world: World, run_id: str, name: str | None) -> tuple[str, SkippedWait]:
    """Record the skip of the wait ``name`` names (the run's one wait without it); returns the run's workflow
    (for its wake) and what was done. A finished run: ``RunGoneError``."""
    run = await world.runs.get(run_id, resolve_data="none")
    if run.status in TERMINAL_RUN_STATUSES:
        raise RunGoneError(f"run {run_id} is {run.status}: it waits on nothing any more")
    refuse_wake(run, "skip")  # (a run of the TypeScript runtime: its app skips its sleeps)
    wait = choose(run_id, await open_waits(world, run_id), name)
    if wait.kind == "wait":
        request: dict[str, Any] = {"eventType": "wait_completed", "correlationId": wait.id,
                                   "eventData": skip_request()}
    else:
        # The step stays at its attempt with its error (read whole: the event repeats it), and may start now.
        step = await world.steps.get(run_id, wait.id)
        error = step.error.model_dump(by_alias=True, exclude_none=True) if step.error is not None else \
            {"message": "retrying"}
        request = {"eventType": "step_retrying", "correlationId": wait.id,
                   "eventData": {"error": error, **skip_request()}}
    try:
        result = await world.events.create(run_id, request, resolve_data="none")
    except EntityConflictError:  # it ended by itself (completed, or the attempt started) in the meantime
        return run.workflow_name, SkippedWait(run_id, wait, None)
    return run.workflow_name, SkippedWait(run_id, wait, result.event)
