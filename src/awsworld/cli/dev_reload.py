"""``awsworld dev`` when the code changes under it: no edit destroys a run.

Code changes two ways under ``dev``: a **restart** (stop dev, edit, start it again with the same ``--state DIR``),
and a **reload**: dev watches the files of the modules it imported from the project (``UserCode``) and, when one
changes, imports the new code in the same process. A reload keeps the emulator, its queue and every run (with or
without ``--state``) and the exported settings; deliveries running when the files change finish on the code they
started with, as on Lambda during a deploy, and every later delivery runs the new code. A file that does not import
(a half-saved edit, a syntax error) is reported and the previous code goes on serving.

Why reload in the process rather than restart it: what a person editing code expects is that the next delivery
runs what they saved, without losing the runs in flight or the ``export`` lines pasted elsewhere. A restart would
need ``--state`` (without it every run is lost), snapshot and restore the whole table, and could move the ports.

A run keeps the code it started on (``cli.dev_code``: the code from before a reload stays loaded, as a published
Lambda version does), so a reload touches only the runs that are not pinned to code dev keeps: runs pinned to no
deployment (``pinned=False``, started on ``latest``), runs pinned to code dev no longer has (after a restart: a
snapshot lives as long as dev's process; those are moved to the current code, with a line saying so), and parked
runs (resumed on the new code if it replays them: a revert). For those, before they meet the new code, dev replays
them against it (``client.replay``, what ``awsworld replay`` does, writing nothing), and:

- a run that replays is woken (on a restart every such run, since the queue was not saved; on a reload only a
  parked one, whose next redelivery may be an hour away: the others' messages are still queued), and its flow
  carries on and clears its parked mark (``_worker.endings``);
- a run whose replay diverges is marked parked (``_engine.parking``) and not woken, and dev prints one line: where,
  what the log has, what the code called, and the ways out. A revert (or a ``patched()`` branch) followed by the
  next reload wakes it;
- a run that has started and whose workflow is not registered any more (renamed, its module dropped) is parked the
  same way, with that reason; any other run that cannot be replayed is printed and woken as before (its delivery
  decides).

``dev`` sets ``AWSWORLD_ON_DIVERGENCE=park`` unless it is set, so a run that diverges between reloads (a workflow
that reads something that changes between replays) is parked by its flow too, never failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import os
import sys
import traceback
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from .._deployments.pins import pin_change, pin_of
from .._engine.parking import mark, missing_code, parked_from, parked_run, ways_out
from .._http.push import sdk_run
from .._worker.child_runs import cancel_run as cancel_child
from ..authoring.definitions import REGISTRY, Registry, WorkflowNotRegisteredError
from ..client.replay import ReplayResult, replay_run
from ..schedules.declared import DECLARED
from ..world.entities import Run
from ..world.errors import EntityConflictError, RunGoneError, RunNotFoundError
from ..world.messages import OPERATOR_WAKE, RESTART_WAKE, FlowMessage, queue_name_for
from ..world.protocol import World

WATCH_SECONDS = 0.5
"""How often dev looks at the files of the user's modules (a stat of each: a few files, microseconds)."""


@dataclass(frozen=True)
class Pins:
    """Which deployments dev has the code of (``loaded``: snapshots kept since they started runs), and the one that
    takes new runs (``here``): a run pinned to a loaded one keeps its code and is not replayed; one pinned to a
    deployment whose code is gone (dev restarted) is replayed against ``here``'s and moved to it (``cli.dev_code``)."""

    here: str
    loaded: frozenset[str]


@dataclass
class Verdict:
    """What a replay of the unfinished runs against new code found, by run id."""

    matched: list[str] = field(default_factory=list[str])
    woken: list[str] = field(default_factory=list[str])
    resumed: list[str] = field(default_factory=list[str])  # woken, and parked before: their flow clears the mark
    parked: list[str] = field(default_factory=list[str])
    unreplayable: list[str] = field(default_factory=list[str])
    kept: dict[str, list[str]] = field(default_factory=dict[str, list[str]])  # by deployment: its code is loaded
    here: str | None = None  # the deployment of the code loaded now (``Pins.here``)
    moved: list[str] = field(default_factory=list[str])  # pinned to code that is gone: moved to the current code
    sdk: list[str] = field(default_factory=list[str])  # the Workflow SDK's TypeScript runtime's: left to it
    cancelled: list[str] = field(default_factory=list[str])  # children of a cancelled parent: cancelled (a restart)
    said: Counter[str] = field(default_factory=Counter[str])  # lines printed (or not) for each kind of outcome

    def say(self, kind: str, line: str) -> None:
        """Print ``line``, one of ``kind``'s (moved, parked, resumed, unreplayable), up to ``LINES_EACH`` of a
        kind; ``more`` counts the rest."""
        self.said[kind] += 1
        if self.said[kind] <= LINES_EACH:
            print(line, flush=True)

    def more(self) -> list[str]:
        """A line for each kind whose lines were cut, with where the rest is listed."""
        return [f"  ... and {n - LINES_EACH} more {kind} run(s) ({WHERE_LISTED[kind]})"
                for kind, n in self.said.items() if n > LINES_EACH]

    def summary(self) -> str:
        total = len(self.matched) + len(self.parked) + len(self.unreplayable)
        kept = "".join(f"; {len(ids)} on {deployment}" + (" (the code loaded now)" if deployment == self.here else
                                                          ", whose code is kept")
                       for deployment, ids in sorted(self.kept.items()))
        if not total:
            return "no unfinished run to replay against it" + kept
        text = f"{total} unfinished run(s) replayed against it: {len(self.matched)} match"
        if self.resumed:
            text += f" ({len(self.resumed)} parked before: resumed)"
        if self.parked:
            text += f", {len(self.parked)} parked (`awsworld runs --parked`)"
        if self.unreplayable:
            text += f", {len(self.unreplayable)} could not be replayed"
        if self.moved:
            text += f" ({len(self.moved)} of them moved here from code dev no longer has)"
        return text + kept


LINES_EACH = 10
"""A replay prints a line per run it moves, parks, resumes or cannot replay, up to this many of each, then how many
more: a restart of dev with 600 unfinished runs on code it no longer had printed 600 lines above its banner."""
WHERE_LISTED = {"moved": "`awsworld deployments` lists the runs on each deployment",
                "parked": "`awsworld runs --parked` lists them, `awsworld describe RUN` says why and the ways out",
                "resumed": "parked before, their replay now matches",
                "unreplayable": "`awsworld describe RUN` shows each one's log"}

PROGRESS_EVERY = 100
"""A restart with many unfinished runs says how far its replay got every this many runs (each is a read of its log,
a replay and a wake: 600 took two minutes here, one at a time, and said nothing until the banner)."""
AT_ONCE = 8
"""Runs replayed at the same time: each waits mostly for the emulator's answers, which overlap."""


async def replay_unfinished(world: World, registry: Registry, *, wake: Literal["all", "parked"],
                            tag: str, pins: Pins | None = None, progress: bool = False) -> Verdict:
    """Replay every pending and running run against the code registered now, mark the ones that diverge parked and
    print a line for each, and wake the ones that replay (``wake="all"``: all of them, after a restart; ``"parked"``:
    the parked ones only, after a reload). ``tag`` makes the wakes' queue keys this check's own. With ``pins``, a
    run pinned to a deployment whose code dev keeps is left on it (woken after a restart); one pinned to code that
    is gone is replayed and, parked or not, moved to ``pins.here``, which is what runs it from now on. Up to
    ``AT_ONCE`` runs at a time (their lines come in the order they end); with ``progress``, a line every
    ``PROGRESS_EVERY`` runs."""
    verdict = Verdict(here=pins.here if pins is not None else None)
    kind = RESTART_WAKE if wake == "all" else OPERATOR_WAKE
    slots = asyncio.Semaphore(AT_ONCE)
    done = 0

    async def one(run: Run) -> None:
        nonlocal done
        async with slots:
            pin = pin_of(run.attributes)
            if sdk_run(run) is not None:  # the TypeScript runtime's: its app replays it, not dev
                verdict.sdk.append(run.run_id)
                return
            if wake == "all" and await _cancelled_with_parent(world, run):
                verdict.cancelled.append(run.run_id)
                return
            if pins is not None and pin is not None and pin in pins.loaded and pin != pins.here \
                    and parked_run(run.status, run.attributes) is not None:
                # Parked on the code it is pinned to: if the new code replays it, it resumes there (a revert).
                await _check(world, registry, run, verdict, wake, kind, tag, pins.here, matched_only=True)
            elif pins is not None and pin is not None and pin in pins.loaded:
                verdict.kept.setdefault(pin, []).append(run.run_id)
                if wake == "all":
                    await _wake(world, run, kind, tag, verdict, pin)
            else:
                moving = pins.here if pins is not None and pin is not None else None
                await _check(world, registry, run, verdict, wake, kind, tag, moving)
        done += 1
        if progress and done % PROGRESS_EVERY == 0:
            print(f"  {done} unfinished runs replayed so far...", flush=True)

    cursor: str | None = None
    while True:
        page = await world.runs.list(status=["pending", "running"], limit=100, cursor=cursor, resolve_data="none")
        await asyncio.gather(*(one(run) for run in page.data))
        if not page.has_more:
            for line in verdict.more():
                print(line, flush=True)
            return verdict
        cursor = page.cursor


async def _cancelled_with_parent(world: World, run: Run) -> bool:
    """Cancel ``run`` if it is a child (not detached) whose parent is cancelled, and say so: after a restart.

    A cancelled parent cancels its children from the delivery that sees its end (``_worker/child_runs.py``'s
    ``on_run_end``), one child after another. A stop in the middle of it (kill -9, or Ctrl-C once its 5 s of grace
    are out) loses that delivery with the queue, and the restart wakes only unfinished runs: the parent, ended, was
    never looked at again, and the children it had not reached yet ran on for good, owned by no one (100 children
    cancelled, dev killed 6 s later: 29 of them went on running). One read of the parent per unfinished child, at a
    restart only."""
    context = run.execution_context or {}
    parent = context.get("parentRunId")
    if not isinstance(parent, str) or context.get("detached"):
        return False
    try:
        head = await world.runs.get(parent, resolve_data="none")
    except RunNotFoundError:
        return False
    if head.status != "cancelled":
        return False  # a parent that completed or failed leaves its children running (docs: Child workflows)
    await cancel_child(world, run.run_id, run.workflow_name, f"its parent run {parent} was cancelled")
    return True


async def _check(world: World, registry: Registry, run: Run, verdict: Verdict, wake: str, kind: str,
                 tag: str, moving: str | None = None, *, matched_only: bool = False) -> None:
    """``moving``: the deployment a run pinned to code dev no longer has is moved to (with its verdict; with
    ``matched_only``, a parked run on code dev keeps, only if the new code replays it)."""
    result = await _replay(world, registry, run)
    if matched_only and not result.ok:
        return  # still parked where it is: its next redelivery finds the same
    if moving is not None and not matched_only:
        verdict.moved.append(run.run_id)
        verdict.say("moved", f"run {run.run_id} ({run.workflow_name}) started on {pin_of(run.attributes)}, whose code "
                    f"dev no longer has (a snapshot lives as long as dev's process): it is replayed against {moving}'s "
                    "and moved to it")
    was = parked_run(run.status, run.attributes)
    if result.ok:
        verdict.matched.append(run.run_id)
        if moving is not None:
            await _mark(world, run, [pin_change(moving)])
        if wake == "all" or was is not None or moving is not None:
            await _wake(world, run, kind, tag, verdict, moving)
            if was is not None:
                verdict.resumed.append(run.run_id)
                verdict.say("resumed", f"run {run.run_id} ({run.workflow_name}) replays again: it was parked, and "
                            "resumes")
        return
    now = datetime.now(UTC)
    if result.status == "diverged":
        parked = parked_from(result, now)
        verdict.say("parked", f"run {run.run_id} ({run.workflow_name}) is parked: its replay differs from its log at "
                    f"{result.message}; {ways_out(run.run_id, result.change)}")
    elif run.started_at is not None and _missing_workflow(registry, run.workflow_name):
        parked = missing_code(f"no workflow named {run.workflow_name!r} is registered here (renamed, or its module "
                              "is not imported)", now)
        verdict.say("parked", f"run {run.run_id} is parked: {parked.divergence}; restore the name (or pass "
                    f"name={run.workflow_name!r} to @workflow) and the run resumes; `awsworld fail {run.run_id}` ends "
                    "it instead")
    else:
        verdict.unreplayable.append(run.run_id)
        verdict.say("unreplayable", f"run {run.run_id} ({run.workflow_name}) could not be replayed: {result.message}")
        if moving is not None:
            await _mark(world, run, [pin_change(moving)])
        if wake == "all" or moving is not None:
            await _wake(world, run, kind, tag, verdict, moving)
        return
    verdict.parked.append(run.run_id)
    parked = parked.kept_since(was)
    changes = [] if parked.same_place(was) else [mark(parked)]
    await _mark(world, run, changes + ([pin_change(moving)] if moving is not None else []))


async def _replay(world: World, registry: Registry, run: Run) -> ReplayResult:
    try:
        return await replay_run(world, run.run_id, registry=registry)
    except Exception as error:  # a log the code cannot even read (a class that moved, say): its delivery decides
        return ReplayResult(run.run_id, run.workflow_name, 0, "error", message=f"{type(error).__name__}: {error}")


async def _mark(world: World, run: Run, changes: list[dict[str, Any]]) -> None:
    if changes:
        with contextlib.suppress(RunGoneError, EntityConflictError):  # it ended meanwhile: nothing to mark
            await world.events.create(run.run_id, {"eventType": "attr_set", "eventData": {"changes": changes}})


async def _wake(world: World, run: Run, kind: str, tag: str, verdict: Verdict, deployment: str | None = None) -> None:
    await world.queue(queue_name_for(run.workflow_name), FlowMessage(run.run_id, run.workflow_name, wake=kind,
                                                                     deployment=deployment)
                      .to_payload(), idempotency_key=f"{run.run_id}:dev-{tag}")
    verdict.woken.append(run.run_id)


def _missing_workflow(registry: Registry, name: str) -> bool:
    try:
        registry.workflow(name)
    except WorkflowNotRegisteredError:
        return True
    return False


_SCRIPT_MODULES = frozenset({"__main__", "__mp_main__"})
"""The names the running script is imported under: ``__mp_main__`` is multiprocessing's alias of ``__main__``."""


_VENV_FOLDERS = ("bin", "Scripts", "lib", "lib64", "Lib", "include")
"""What a virtual environment holds of its own: its scripts and installed packages (a project made a venv itself,
``python3 -m venv .``, keeps its modules beside these)."""


def _venv_folders() -> tuple[Path, ...]:
    """The folders of the virtual environment this process runs from (none outside one: never the base Python's
    prefix, under which a project may live, as ``/usr/src/app`` lies under ``/usr``). Resolved once per
    ``UserCode``, not per module at every look for edits."""
    if sys.prefix == sys.base_prefix:
        return ()
    prefix = Path(sys.prefix).resolve()
    return tuple(prefix / folder for folder in _VENV_FOLDERS)


class UserCode:
    """The user's modules as ``dev`` imported them, watched for edits. A module is the user's when its file lies in
    the project (the current directory and its ``src/``, where ``dev`` imports from) and outside any installed
    package (``site-packages``), the virtual environment ``dev`` runs from and awsworld itself: the named modules
    and every project module they import. The venv counts apart because ``python3 -m venv .venv`` in the project
    is the usual layout, and its ``bin/awsworld`` script is a module too (``__main__``, and ``__mp_main__`` once
    multiprocessing is imported): taken for the user's, it would make the first reload a new deployment even when
    nothing changed (its digest, ``cli.dev_code``), and be deleted from ``sys.modules`` at every reload."""

    def __init__(self, names: list[str], roots: list[Path]) -> None:
        self.names = names
        self.roots = [root.resolve() for root in roots]
        self.venv = _venv_folders()
        self._folders: dict[str, Path] = {}
        self.stamps = self._stamps()

    def modules(self) -> dict[str, Path]:
        found: dict[str, Path] = {}
        for name, module in list(sys.modules.items()):
            file = getattr(module, "__file__", None)
            if not file or name == "awsworld" or name.startswith("awsworld.") or name in _SCRIPT_MODULES:
                continue
            path = self._users(file)
            if path is not None:
                found[name] = path
        return found

    def _users(self, file: str) -> Path | None:
        """``file`` resolved when it is the user's (in the project, outside installed packages and the venv), else
        None."""
        if file.startswith("<"):  # <frozen importlib._bootstrap>, <string>
            return None
        path = self._resolved(file)
        if "site-packages" in path.parts or "dist-packages" in path.parts \
                or any(path.is_relative_to(folder) for folder in self.venv):
            return None
        return path if any(path.is_relative_to(root) for root in self.roots) else None

    def _resolved(self, file: str) -> Path:
        """``Path(file).resolve()``, through its folder's resolution, kept: ``dev``'s 1,800 modules sit in a few hundred
        folders, and resolving each file walked every component of its path (0.14 s a pass over 1,000 modules; two
        passes as dev starts, one at each reload). A file that is itself a symbolic link, or a relative path, is
        resolved whole, as before."""
        if os.path.islink(file) or not os.path.isabs(file):
            return Path(file).resolve()
        folder, name = os.path.split(file)
        resolved = self._folders.get(folder)
        if resolved is None:
            resolved = self._folders[folder] = Path(folder).resolve()
        return resolved / name

    def _stamps(self) -> dict[Path, tuple[int, int]]:
        stamps: dict[Path, tuple[int, int]] = {}
        for path in self.modules().values():
            with contextlib.suppress(OSError):
                stat = path.stat()
                stamps[path] = (stat.st_mtime_ns, stat.st_size)
        return stamps

    def changed(self) -> list[Path]:
        """The files edited (or removed) since the last load."""
        now = self._stamps_of(self.stamps)
        return [path for path, stamp in self.stamps.items() if now.get(path) != stamp]

    @staticmethod
    def _stamps_of(paths: dict[Path, tuple[int, int]]) -> dict[Path, tuple[int, int]]:
        found: dict[Path, tuple[int, int]] = {}
        for path in paths:
            with contextlib.suppress(OSError):
                stat = path.stat()
                found[path] = (stat.st_mtime_ns, stat.st_size)
        return found

    def loaded(self) -> dict[str, ModuleType]:
        """The module objects of the user's modules as imported now (before a reload replaces them)."""
        return {name: sys.modules[name] for name in self.modules() if name in sys.modules}

    def reload(self, registry: Registry = REGISTRY) -> str | None:
        """Import the named modules afresh (and the project modules they import): their workflows, steps and
        schedules replace the old ones. Returns None, or why the new code could not be imported (then everything is
        as it was: the previous code goes on serving). Synchronous: no delivery sees a half-swapped registry."""
        old = self.modules()
        saved = {name: sys.modules[name] for name in old}
        workflows, steps, declared = dict(registry.workflows), dict(registry.steps), dict(DECLARED)
        mine = set(old)
        for name in old:
            del sys.modules[name]
            with contextlib.suppress(NotImplementedError, ValueError, OSError):
                # A .pyc from an edit in the same second with the same size would be taken for the new source.
                os.unlink(importlib.util.cache_from_source(str(old[name])))
        for table in (registry.workflows, registry.steps):
            for key, definition in list(table.items()):
                if definition.fn.__module__ in mine:
                    del table[key]
        for key, declaration in list(DECLARED.items()):
            if declaration.module in mine:
                del DECLARED[key]
        importlib.invalidate_caches()
        try:
            for name in self.names:
                importlib.import_module(name)
        except BaseException as error:  # a syntax error, an import error, an exception at import: keep the old
            if not isinstance(error, Exception):
                raise
            for name in self.modules():
                sys.modules.pop(name, None)
            sys.modules.update(saved)
            registry.workflows.clear()
            registry.workflows.update(workflows)
            registry.steps.clear()
            registry.steps.update(steps)
            DECLARED.clear()
            DECLARED.update(declared)
            self.stamps = self._stamps_of(self.stamps) | self._stamps()  # wait for the next edit
            # Where in the user's code; importlib's frames and awsworld's say nothing (a module not found at all).
            frames = traceback.extract_tb(error.__traceback__) if error.__traceback__ else []
            where = [frame for frame in frames if self._users(frame.filename) is not None][-1:]
            at = f" ({where[0].filename}, line {where[0].lineno})" if where and not isinstance(error, SyntaxError) \
                else ""
            return f"{type(error).__name__}: {error}{at}"
        self.stamps = self._stamps()
        return None


async def watch(world: World, code: UserCode, registry: Registry,
                reloaded: Callable[[Registry], Awaitable[Pins | None]]) -> None:
    """Until cancelled: when a file of the user's modules changes, load the new code (``UserCode.reload``), then
    replay the unfinished runs against it (``replay_unfinished``); ``reloaded`` refreshes what else dev derives from
    the modules (their declared schedules, the names it publishes for clients: ``_published.model``; the deployment
    the new code is, given a snapshot of the code before the reload: ``cli.dev_code``) and says which deployments'
    code dev keeps. Every outcome is one line on dev's terminal."""
    reloads = 0
    while True:
        await asyncio.sleep(WATCH_SECONDS)
        changed = code.changed()
        if not changed:
            continue
        await asyncio.sleep(WATCH_SECONDS)  # an editor's save (or a burst of them) finishes first
        shown = ", ".join(_shown(path) for path in changed)
        print(f"reloading: {shown} changed", flush=True)
        # The code runs started on keeps running them (``cli.dev_code``), with its modules: the values it stores and
        # reads are of its own classes, not of the edited module's (a model given a required field, say).
        previous = registry.snapshot(code.loaded())
        problem = code.reload(registry)
        if problem is not None:
            print(f"reload failed, the previous code goes on serving: {problem}", flush=True)
            continue
        reloads += 1
        try:
            pins = await reloaded(previous)
            verdict = await replay_unfinished(world, registry, wake="parked", tag=f"reload:{os.getpid()}:{reloads}",
                                              pins=pins)
        except Exception as error:  # the emulator going away at the end, say: the next edit tries again
            print(f"reloaded, but replaying the unfinished runs failed: {type(error).__name__}: {error}", flush=True)
            continue
        print(f"reloaded {', '.join(code.names)}: {len(registry.workflows)} workflow(s), {len(registry.steps)} "
              f"step(s); {verdict.summary()}", flush=True)


def _shown(path: Path) -> str:
    with contextlib.suppress(ValueError):
        return str(path.relative_to(Path.cwd().resolve()))
    return str(path)
