"""Paginated responses. Cursors are opaque strings; ``events.list`` returns one even on its final page."""

from __future__ import annotations

from typing import Generic, TypeVar

from pydantic import Field

from .base import WireModel
from .entities import Hook, Run, Step
from .events import Event, LogSnapshot

T = TypeVar("T")


class Page(WireModel, Generic[T]):
    data: list[T] = Field(default_factory=list)
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
