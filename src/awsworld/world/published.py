"""Publications in the contract: the record a queue's consumer writes of the workflow names it registers
(``Publication``), and the store every World gives (``PublishedNames``, ``world.published``: awsworld's extension,
like ``world.schedules``).

What is published and when, and the rule that decides whether a start may refuse a name, are
``awsworld._published.model``'s; each World keeps the records in its own store (``_memory/published.py``,
``aws/published_store.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class Publication:
    """One consumer's names. ``key``: which consumer (``DEV``, or a digest of a flow function's names); ``host``:
    who, for people (``awsworld dev``, ``the flow function``); ``ahead``: published before the consumer took any
    delivery, so no consumer registering more names can be running unpublished (see the module)."""

    key: str
    host: str
    workflows: tuple[str, ...]
    modules: tuple[str, ...]
    published_at: datetime
    ahead: bool

    def to_json(self) -> str:
        return json.dumps({"key": self.key, "host": self.host, "workflows": list(self.workflows),
                           "modules": list(self.modules), "publishedAt": self.published_at.isoformat(),
                           "ahead": self.ahead}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Publication:
        data = json.loads(text)
        return cls(str(data["key"]), str(data["host"]), tuple(data["workflows"]), tuple(data["modules"]),
                   datetime.fromisoformat(data["publishedAt"]), bool(data["ahead"]))


class PublishedNames(Protocol):
    """``world.published``: every consumer's publication."""

    async def publish(self, publication: Publication) -> None:
        """Store ``publication``, replacing the one under its key."""
        ...

    async def read(self) -> list[Publication]:
        """Every publication (strongly consistent: a consumer's write is seen by the next read)."""
        ...
