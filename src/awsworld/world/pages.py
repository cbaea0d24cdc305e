"""Paginated responses and the largest page of each listing, the same on every World. Cursors are opaque strings;
``events.list`` returns one even on its final page."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from pydantic import Field

from .entities import HookRecord, Run, Step
from .events import Event, LogSnapshot
from .wire_model import WireModel

T = TypeVar("T")

MAX_EVENTS_PAGE = 1000
"""``events.list`` / ``list_by_correlation_id``: events per page at most."""
MAX_RUNS_PAGE = 100
"""``runs.list``: runs per page at most (the run viewer's ``/api/runs?limit=`` is held to it too: it allowed 200,
and 101 to 200 were refused with a 400)."""
MAX_ENTITIES_PAGE = 1000
"""``steps.list`` / ``hooks.list``."""
MAX_CHUNKS_PAGE = 1000
"""``streams.get_chunks``: chunks per page at most."""
CHUNKS_PAGE_BYTES = 8 * 1024 * 1024
"""A stream page (and a live reader's read) holds about this many bytes at most, and at least one chunk."""


class Page(WireModel, Generic[T]):
    data: list[T] = Field(default_factory=list[Any])
    cursor: str | None = None
    has_more: bool = False


class RunPage(Page[Run]):
    pass


class StepPage(Page[Step]):
    pass


class HookPage(Page[HookRecord]):
    pass


class EventPage(Page[Event]):
    snapshot: LogSnapshot | None = None


async def collect_pages(fetch: Callable[[str | None], Awaitable[Page[T]]]) -> list[T]:
    """Every item of a paginated listing: ``fetch(cursor)`` is called until a page says there is no more."""
    items: list[T] = []
    cursor: str | None = None
    while True:
        page = await fetch(cursor)
        items.extend(page.data)
        cursor = page.cursor
        if not page.has_more:
            return items
