"""Stream state of the in-memory World: per run and name, the chunks (a list: index = position) and the done flag.

An append is decided (``rules.streams.append_refusal``) and applied in one synchronous step, so chunks of one
append are contiguous, appends never interleave, and a reader never sees a hole; its chunks' sizes were checked
by whoever took them (``world/shared/streams.py``, a write session). Every append or close wakes the stream's live
readers (``signal``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..world.rules.streams import append_refusal
from .signal import Signal


class RunStatuses(Protocol):
    """What streams need of storage: a run's status, None when there is no such run."""

    def run_status(self, run_id: str) -> str | None: ...


@dataclass
class StreamState:
    chunks: list[bytes] = field(default_factory=list)
    done: bool = False


class MemoryStreamStore:
    def __init__(self, storage: RunStatuses) -> None:
        self.storage = storage
        self._runs: dict[str, dict[str, StreamState]] = {}
        self._signals: dict[tuple[str, str], Signal] = {}

    def get(self, run_id: str, name: str) -> StreamState | None:
        streams = self._runs.get(run_id)
        return streams.get(name) if streams is not None else None

    async def meta(self, run_id: str, name: str) -> tuple[int, bool]:
        """(chunk count, done); (0, False) for a stream never written."""
        state = self.get(run_id, name)
        return (len(state.chunks), state.done) if state is not None else (0, False)

    def chunks(self, run_id: str, name: str, start: int, stop: int) -> list[bytes]:
        """The chunks ``start .. stop-1`` (fewer past the stream's end; none for a stream never written)."""
        state = self.get(run_id, name)
        return state.chunks[start:stop] if state is not None else []

    async def names(self, run_id: str) -> list[str]:
        """The run's stream names in name order."""
        return sorted(self._runs.get(run_id, ()))

    async def run_status(self, run_id: str) -> str | None:
        return self.storage.run_status(run_id)

    def forget(self, run_id: str) -> None:
        """Drop the run's streams and their chunks (``World.delete_run``: the run has ended, so no writer is left)."""
        self._runs.pop(run_id, None)

    def append(self, run_id: str, name: str, chunks: Sequence[bytes]) -> int:
        """Append in order; return the first chunk's index."""
        existing = self.get(run_id, name)
        refused = append_refusal(run_id, name, self.storage.run_status(run_id), existing is not None and existing.done)
        if refused is not None:
            raise refused
        state = self._state(run_id, name)
        first = len(state.chunks)
        state.chunks.extend(chunks)
        self._wake(run_id, name)
        return first

    async def close(self, run_id: str, name: str) -> None:
        """Mark the stream done. Idempotent; allowed on a finished run (``rules.streams``)."""
        state = self._state(run_id, name)
        if not state.done:
            state.done = True
            self._wake(run_id, name)

    def signal(self, run_id: str, name: str) -> Signal:
        """What a live reader of the stream waits on (kept apart from the state: waiting creates no stream)."""
        key = (run_id, name)
        signal = self._signals.get(key)
        if signal is None:
            signal = self._signals[key] = Signal()
        return signal

    def forget_signal(self, run_id: str, name: str) -> None:
        signal = self._signals.get((run_id, name))
        if signal is not None and not signal.waiting:
            del self._signals[(run_id, name)]

    def wake_run(self, run_id: str) -> None:
        """Wake every live reader of the run's streams (its status may have changed)."""
        for (run, _name), signal in list(self._signals.items()):
            if run == run_id:
                signal.notify()

    def wake_all(self) -> None:
        for signal in list(self._signals.values()):
            signal.notify()

    def _state(self, run_id: str, name: str) -> StreamState:
        return self._runs.setdefault(run_id, {}).setdefault(name, StreamState())

    def _wake(self, run_id: str, name: str) -> None:
        signal = self._signals.get((run_id, name))
        if signal is not None:
            signal.notify()
