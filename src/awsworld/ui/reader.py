"""What the UI reads from the World, and the one thing it remembers: each recently viewed run's event log.

A run's log only grows (events are appended, never changed), so the reader keeps the events it has read and the
World's cursor after them; a refresh asks for the events after that cursor, one page (up to ``PAGE`` events). A
live page therefore costs the World two requests per refresh (``runs.get`` without values and one
``events.list`` page), however long the run is. The memory is bounded: the last ``max_runs`` runs viewed.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass, field

from ..world.events import Event
from ..world.protocol import World

PAGE = 1000  # events per events.list request (the World's own maximum page)


@dataclass
class RunLog:
    events: list[Event] = field(default_factory=list[Event])
    cursor: str | None = None
    ids: set[str] = field(default_factory=set[str])
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class Reader:
    def __init__(self, world: World, *, max_runs: int = 16) -> None:
        self.world = world
        self.max_runs = max_runs
        self._logs: OrderedDict[str, RunLog] = OrderedDict()

    def _log(self, run_id: str) -> RunLog:
        log = self._logs.get(run_id)
        if log is None:
            log = self._logs[run_id] = RunLog()
            while len(self._logs) > self.max_runs:
                self._logs.popitem(last=False)
        self._logs.move_to_end(run_id)
        return log

    async def refresh(self, run_id: str, *, pages: int | None = 1) -> tuple[list[Event], bool]:
        """The run's events, after reading at most ``pages`` pages past what is remembered (None: all of them).
        Returns the events and whether the World holds more than were read."""
        log = self._log(run_id)
        async with log.lock:
            read = 0
            while pages is None or read < pages:
                page = await self.world.events.list(run_id, cursor=log.cursor, limit=PAGE, resolve_data="all")
                read += 1
                for event in page.data:
                    if event.event_id not in log.ids:  # a World without a final cursor re-reads from the start
                        log.ids.add(event.event_id)
                        log.events.append(event)
                if page.cursor is not None:
                    log.cursor = page.cursor
                if not page.has_more:
                    return log.events, False
            return log.events, True

    async def events(self, run_id: str) -> list[Event]:
        """Every event of the run (what a page's first render needs)."""
        events, _ = await self.refresh(run_id, pages=None)
        return events

    async def events_without_values(self, run_id: str) -> list[Event]:
        """Every event of the run without its values (``resolve_data="none"``), remembered by nothing: for a run
        whose values the World cannot read (``app.run_view``), whose events with values ``refresh`` never has."""
        events: list[Event] = []
        cursor: str | None = None
        while True:
            page = await self.world.events.list(run_id, cursor=cursor, limit=PAGE, resolve_data="none")
            events.extend(page.data)
            cursor = page.cursor
            if not page.has_more or cursor is None:
                return events
