"""A write's answer as both Worlds assemble it: a batch's outcomes in request order (``requests.in_request_order``)
and how many skipped-over events a write reports (``log.skipped_over``)."""

from __future__ import annotations

from awsworld.world.errors import EntityConflictError
from awsworld.world.events import BatchEventOutcome, EventResult
from awsworld.world.pages import MAX_EVENTS_PAGE
from awsworld.world.rules.log import skipped_over
from awsworld.world.rules.requests import failed_outcome, in_request_order


def test_a_born_running_pair_answers_twice_its_step_created_first() -> None:
    single, pair_started, pair_created = (BatchEventOutcome(result=EventResult(seq_in_band=n)) for n in (1, 2, 3))
    refused = failed_outcome(EntityConflictError("step s already exists"))
    units = [["a"], ["b", "c"], ["d", "e"]]
    got = in_request_order(units, [single, pair_started, refused], {1: pair_created})
    assert got == [single, pair_created, pair_started, refused, refused]  # a pair refused whole: twice


def test_skipped_over_reports_at_most_a_page_of_what_the_writer_had_not_seen() -> None:
    assert skipped_over(None, 10) == 0
    assert skipped_over(9, 10) == 0  # the writer had seen every event before its own
    assert skipped_over(12, 10) == 0
    assert skipped_over(5, 10) == 4  # slots 6..9
    assert skipped_over(0, MAX_EVENTS_PAGE + 50) == MAX_EVENTS_PAGE
