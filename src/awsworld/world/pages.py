"""Paginated responses. Cursors are opaque strings; ``events.list`` returns one even on its final page."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from pydantic import Field

from .base import WireModel
from .entities import Hook, Run, Step
from .events import Event, LogSnapshot

T = TypeVar("T")


class Page(WireModel, Generic[T]):
    data: list[T] = Field(default_factory=list[Any])
    cursor: str | None = None
    has_more: bool = False


class RunPage(Page[Run]):
    pass


class StepPage(Page[Step]):
    pass


class HookPage(Page[Hook]):
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
