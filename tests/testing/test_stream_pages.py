"""The page rule every World's stream reads share (``world.streams.page_take``): at least one chunk, then more
while the page holds under the byte bound. The Worlds' pages are checked in tests/conformance/test_streams.py."""

from __future__ import annotations

from collections.abc import Iterator

from awsworld.world.pages import CHUNKS_PAGE_BYTES
from awsworld.world.streams import page_take


def test_a_page_takes_chunks_while_under_the_bound() -> None:
    assert page_take([4, 4, 4], max_bytes=10) == 3  # 8 < 10: the third joins, and the page ends over it
    assert page_take([5, 5, 5], max_bytes=10) == 2  # exactly at the bound: no more
    assert page_take([3, 3], max_bytes=10) == 2  # the lengths run out first


def test_a_page_holds_at_least_one_chunk() -> None:
    assert page_take([CHUNKS_PAGE_BYTES + 1, 1]) == 1
    assert page_take([0, 0], max_bytes=0) == 1
    assert page_take([]) == 0


def test_the_default_bound_is_the_contracts() -> None:
    assert page_take([CHUNKS_PAGE_BYTES - 1, 1, 1]) == 2
    assert page_take([CHUNKS_PAGE_BYTES - 2, 1, 1]) == 3


def test_lengths_are_read_only_as_far_as_needed() -> None:
    read: list[int] = []

    def lengths() -> Iterator[int]:
        for length in [6, 6, 6, 6]:
            read.append(length)
            yield length

    assert page_take(lengths(), max_bytes=10) == 2
    assert len(read) == 3  # the third is looked at (the bound is reached), not taken
