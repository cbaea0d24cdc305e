"""What a step body can see while it runs: its metadata, and streams of its run."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class StepMetadata:
    run_id: str
    step_id: str
    step_name: str
    attempt: int
    started_at: datetime | None


class StreamWriter:
    """Writes chunks to one of the run's streams. Chunks are durable when ``write`` returns."""

    def __init__(self, world: Any, run_id: str, name: str) -> None:
        self._world = world
        self.run_id = run_id
        self.name = name

    async def write(self, chunk: str | bytes) -> None:
        await self._world.streams.write(self.run_id, self.name, chunk)

    async def write_many(self, chunks: list[str | bytes]) -> None:
        await self._world.streams.write_multi(self.run_id, self.name, chunks)

    async def close(self) -> None:
        await self._world.streams.close(self.run_id, self.name)


@dataclass
class StepContext:
    world: Any
    metadata: StepMetadata
    writers: dict[str, StreamWriter] = field(default_factory=dict)

    def writer(self, name: str) -> StreamWriter:
        if name not in self.writers:
            self.writers[name] = StreamWriter(self.world, self.metadata.run_id, name)
        return self.writers[name]
