"""Replay stored runs against the current code, writing nothing: the check to run before deploying new code.

``replay_run(world, run_id)`` reads a run's log (with step inputs, so a changed argument is shown in full) from any
World — a deployed table, the local emulator — and ``replay_events(events)`` replays a log already in hand, such
as a file ``awsworld export RUN_ID`` wrote (``load_export``). Each answers a :class:`ReplayResult`: ``ok``, or the
divergence with its position, what the log holds and what the code did. In pytest::

    from awsworld.client.replay import load_export, replay_events

    def test_new_code_replays_last_weeks_runs():
        for events in load_export("tests/histories/checkout.jsonl"):
            result = replay_events(events)
            assert result.ok, result.describe()

A divergence of an unfinished run pinned to a deployment (``_deployments.pins``) is said with its pin: such a run
goes on on its deployment's code whatever is deployed next, so the divergence tells whether ``awsworld upgrade``
could move it to this code, not that a deploy would break it.

A run whose log ends (completed) is also checked at its end: the code must make no call the log lacks and return
what the log recorded. (What the code declared in the replay that ended its body is no such call: the flow writes
the run's end instead, ``_engine/execution.py``'s ``new_ops``.) ``patched()`` answers as it would in production (True
at the end of the log); nothing is recorded.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._deployments.pins import pinned_in_log
from .._engine import divergence as dv
from .._engine.execution import LogGapError, WorkflowExecution
from ..authoring.definitions import REGISTRY, Registry
from ..authoring.errors import CodecError, DeterminismError, ReplayDivergenceError
from ..durable import codecs, serde
from ..durable.codecs import Place
from ..world.events import RUN_END_EVENT_TYPES, Event
from ..world.protocol import World


@dataclass
class ReplayResult:
    run_id: str
    workflow_name: str | None
    events: int
    status: str  # "ok", "diverged" or "error" (the code could not be replayed at all)
    position: str | None = None
    slot: int | None = None
    log: str | None = None
    code: str | None = None
    change: str | None = None
    message: str | None = None
    outline: str | None = None  # the message without argument values (``_engine.divergence``)
    pinned: str | None = None
    """The deployment an unfinished run is pinned to (``_deployments.pins``): a deploy does not bring it this code."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def pinned_divergence(self) -> bool:
        """A divergence of an unfinished run pinned to its deployment: a deploy leaves that run on its own code, so
        this code diverging from it breaks nothing at the deploy (``awsworld replay`` does not count it unless
        asked with ``--include-pinned``); it means ``awsworld upgrade`` could not move the run here."""
        return self.status == "diverged" and self.pinned is not None

    def describe(self) -> str:
        """One line. A divergence of a pinned run says what it means for that run: nothing at a deploy (it goes on
        on its deployment's code), only that ``awsworld upgrade`` would not move it to this code. It read as a run
        a deploy would break, which with pinning on (the default) it is not."""
        name = self.workflow_name or "?"
        if self.ok:
            return f"run {self.run_id} ({name}): ok, {self.events} events replayed"
        label = "DIVERGED" if self.status == "diverged" else "ERROR"
        said = f"run {self.run_id} ({name}): {label} {self.message}"
        if self.status == "diverged" and self.pinned is not None:
            said += (f" [pinned to deployment {self.pinned}: it goes on on that code, which a deploy does not "
                     f"change; `awsworld upgrade {self.run_id}` would not move it to this code]")
        return said


def replay_events(events: Sequence[Event | dict[str, Any]], *, registry: Registry | None = None,
                  max_value_bytes: int | None = None) -> ReplayResult:
    """Replay one run's log (its events in order, from slot 1) against the code registered in this process.
    ``max_value_bytes``: the bound of the World the run was recorded in (``World.max_value_bytes``), for the
    calls it refused (``WorkflowExecution``); None: this process's."""
    log = [e if isinstance(e, Event) else Event.model_validate(e) for e in events]
    log.sort(key=lambda e: e.slot)
    run_id = log[0].run_id if log else "?"
    if not log or log[0].event_type != "run_created":
        return ReplayResult(run_id, None, len(log), "error", message="the log does not start with run_created")
    created = log[0].event_data or {}
    name = created.get("workflowName")
    registry = registry or REGISTRY
    try:
        definition = registry.workflow(str(name))
    except LookupError as missing:
        return ReplayResult(run_id, name, len(log), "error", message=str(missing).strip("'\""))
    seed = str((created.get("executionContext") or {}).get("seed") or run_id)
    execution = WorkflowExecution(run_id, definition, registry, seed, max_value_bytes=max_value_bytes)
    try:
        execution.append(log)
        execution.advance()
        _check_end(execution)
    except ReplayDivergenceError as divergence:
        ended = any(e.event_type in RUN_END_EVENT_TYPES for e in log)
        return ReplayResult(run_id, name, len(log), "diverged", position=divergence.position, slot=divergence.slot,
                            log=divergence.log, code=divergence.code, change=divergence.change,
                            message=str(divergence), outline=divergence.outline,
                            pinned=None if ended else pinned_in_log(log))
    except (LogGapError, DeterminismError) as error:
        return ReplayResult(run_id, name, len(log), "error", message=f"{type(error).__name__}: {error}")
    finally:
        execution.close()
    return ReplayResult(run_id, name, len(log), "ok")


def _check_end(execution: WorkflowExecution) -> None:
    """A completed log must end where the code ends: no call beyond it, the same return value."""
    end = next((e for e in reversed(execution.log) if e.event_type == "run_completed"), None)
    if end is None:
        return
    extra = execution.new_ops()
    if extra:
        raise dv.divergence("end", "the end of the log", end, "the run completed",
                            f"called {dv.code_call(extra[0])}", " (a call beyond the log's end)",
                            outline=("the run completed", f"called {dv.code_call(extra[0], values=False)}"))
    task = execution.task
    if task is None or not task.done():
        raise dv.divergence("end", "the end of the log", end, "the run completed", "is still waiting")
    if task.cancelled() or task.exception() is not None:
        error = task.exception() if not task.cancelled() else None
        raise dv.divergence("result", "the end of the log", end, "the run completed",
                            f"raised {type(error).__name__}: {str(error)[:200]}" if error else "was cancelled",
                            outline=("the run completed",
                                     f"raised {type(error).__name__}" if error else "was cancelled"))
    logged = (end.event_data or {}).get("output")
    try:
        returned = codecs.store(task.result(), execution.definition.codec,
                                Place("result", f"workflow {execution.definition.name!r}", execution.run_id))
    except (serde.SerializationError, CodecError):
        return  # the production run would have failed the same way; nothing to compare
    if "output" in (end.event_data or {}) and dv.input_digest(logged) != dv.input_digest(returned):
        raise dv.divergence("result", "the end of the log", end, f"the result {_value(logged)}",
                            f"returned {_value(returned)}", outline=("a result", "returned another"))


def _value(structure: Any) -> str:
    try:
        return dv.short_repr(serde.loads(structure))
    except Exception:
        return json.dumps(structure, default=str)[:200]


async def read_run(world: World, run_id: str) -> list[Event]:
    """A run's whole log, with every payload (step inputs included)."""
    events: list[Event] = []
    cursor: str | None = None
    while True:
        page = await world.events.list(run_id, cursor=cursor, resolve_data="all")
        events.extend(page.data)
        cursor = page.cursor or cursor
        if not page.has_more:
            return events


async def replay_run(world: World, run_id: str, *, registry: Registry | None = None) -> ReplayResult:
    """Read a stored run from ``world`` and replay it against the current code. Writes nothing."""
    return replay_events(await read_run(world, run_id), registry=registry, max_value_bytes=world.max_value_bytes)


def export_lines(events: Iterable[Event]) -> list[str]:
    """One JSON line per event (the wire shape), as ``awsworld export`` writes them."""
    return [json.dumps(e.model_dump(mode="json", by_alias=True, exclude_none=True), ensure_ascii=False)
            for e in events]


def load_export(path: str | Path) -> list[list[Event]]:
    """The runs in a file ``awsworld export`` wrote (one event per line; several runs may share a file)."""
    runs: dict[str, list[Event]] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            event = Event.model_validate(json.loads(line))
            runs.setdefault(event.run_id, []).append(event)
    return list(runs.values())
