"""``world.published`` in memory: the publications in the World's storage (``State.published``, shared by Worlds
that share storage, as processes share a table)."""

from __future__ import annotations

from ..world.published import Publication


class MemoryPublished:
    def __init__(self, records: dict[str, Publication]) -> None:
        """``records``: the storage's publications, by key."""
        self.records = records

    async def publish(self, publication: Publication) -> None:
        self.records[publication.key] = publication

    async def read(self) -> list[Publication]:
        return [self.records[key] for key in sorted(self.records)]
