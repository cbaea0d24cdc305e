"""``world.watch`` in memory: the watch index (``State.watch``, a dict of the unfinished runs' dues) and its
two corrections, by ``world.watch``'s rules; each commit sets the due (``log.py``).

The index holds only the runs that have a due (never a walk over all runs), and ``next_due`` gives the test
environment's driver the soonest one, so its skipping clock can reach a watchdog tick.
"""

from __future__ import annotations

from datetime import datetime

from ..world.rules.lifetime import lifetime_end
from ..world.watch import DueRun, due_key, now_key, parse_key, snooze_due
from .records import RunRecord, State, WatchEntry


def set_due(state: State, run: RunRecord, due: datetime | None) -> None:
    """A commit's due for ``run`` (None: it leaves the index). A write is activity: the wake count restarts."""
    if due is None:
        state.watch.pop(run.run_id, None)
    else:
        state.watch[run.run_id] = WatchEntry(due_key(due))


def _lifetime_end(record: RunRecord) -> datetime:
    """The end of the run's lifetime, by its ``run_created``'s executionContext (``world/rules/lifetime.py``)."""
    context = None if record.context is None else record.context.get()
    return lifetime_end(record.created_at, context if isinstance(context, dict) else None)


class MemoryWatch:
    reach_seconds: float | None = None
    """The memory queue delays a message any time exactly (no hops): every timer gets its message."""

    def __init__(self, state: State) -> None:
        self.state = state

    def next_due(self, *, lifetimes: bool = True) -> datetime | None:
        """The soonest due in the index (the test environment's next watchdog tick), or None. ``lifetimes=False``
        leaves out a run whose due is the end of its lifetime (``world/rules/lifetime.py``: a run resting on hooks
        alone): a test that awaits such a run's result is told what it waits on (``RunStalledError``) rather than
        have its clock skip a year to end it."""
        dues = (entry.due for run_id, entry in self.state.watch.items()
                if lifetimes or entry.due != self._lifetime_due(run_id))
        soonest = min(dues, default=None)
        return None if soonest is None else parse_key(soonest)

    def _lifetime_due(self, run_id: str) -> str | None:
        record = self.state.runs.get(run_id)
        return None if record is None else due_key(_lifetime_end(record))

    async def due(self, now: datetime, *, limit: int = 1000) -> list[DueRun]:
        cutoff = now_key(now)
        found = [DueRun(run_id, self.state.runs[run_id].workflow_name, entry.due, entry.wakes)
                 for run_id, entry in self.state.watch.items() if entry.due <= cutoff]
        return sorted(found, key=lambda r: r.due)[:limit]

    async def snooze(self, run: DueRun, now: datetime) -> datetime | None:
        entry = self.state.watch.get(run.run_id)
        record = self.state.runs.get(run.run_id)
        if entry is None or entry.due != run.due or record is None or record.terminal:
            return None
        due = snooze_due(now, entry.wakes, _lifetime_end(record))
        self.state.watch[run.run_id] = WatchEntry(due_key(due), entry.wakes + 1)
        return due

    async def correct(self, run_id: str, due: datetime | None, *, seq: int) -> bool:
        record = self.state.runs.get(run_id)
        if record is None or record.terminal or record.seq != seq:
            return False
        set_due(self.state, record, due)
        return True
