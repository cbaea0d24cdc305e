"""``world.published`` in memory: the publications in the World's storage (``State.published``, shared by Worlds
that share storage, as processes share a table)."""

from __future__ import annotations

from typing import Any

from .model import Publication


class MemoryPublished:
    def __init__(self, state: Any) -> None:
        """``state``: the storage's ``State`` (its ``published`` dict holds the publications by key)."""
        self.records: dict[str, Publication] = state.published

    async def publish(self, publication: Publication) -> None:
        self.records[publication.key] = publication

    async def read(self) -> list[Publication]:
        return [self.records[key] for key in sorted(self.records)]
