"""The log's own rules, for every World: the in-band fence, ``expect_seq``, and the in-band count a write leaves.

The fence is decided before anything else a write does: a stale in-band writer (its ``expected_seq_in_band`` is
not the run's count) hears 412 and touches nothing, whatever its write would otherwise get. An
``expect_seq`` batch lands right after that many events or not at all (``LogMovedError``). An accepted in-band
write advances the in-band count by the positions it takes (a resilient start made in-band counts both of its
events, from none); out-of-band writes report none. A write whose writer held fewer events than the log had
reports, in its answer, up to a page of the events it skipped over (``skipped_over``).
"""

from __future__ import annotations

from ..errors import InBandSupersededError, LogMovedError
from ..pages import MAX_EVENTS_PAGE


def check_fence(run_id: str, seq: int, seq_in_band: int, expected: int | None) -> None:
    if seq_in_band != expected:
        raise InBandSupersededError(f"run {run_id} moved on: in-band count is {seq_in_band}, not {expected}",
                                    seq=seq, seq_in_band=seq_in_band)


def check_expected_seq(run_id: str, seq: int, expect_seq: int | None) -> None:
    if expect_seq is not None and seq != expect_seq:
        raise LogMovedError(f"run {run_id} holds {seq} events, not {expect_seq}", seq=seq)


def seq_in_band_after(in_band: bool, expected: int | None, count: int, *, creates_run: bool) -> int | None:
    """The in-band count after an accepted write of ``count`` events."""
    if not in_band:
        return None
    if creates_run:
        return count
    assert expected is not None
    return expected + count


def skipped_over(event_count: int | None, slot: int) -> int:
    """How many of the events a write that landed at ``slot`` skipped over (after its writer's ``event_count``,
    before ``slot``) its answer reports: at most a page of them (``has_more`` says the rest); 0 without a count."""
    if event_count is None or slot - 1 <= event_count:
        return 0
    return min(MAX_EVENTS_PAGE, slot - 1 - event_count)
