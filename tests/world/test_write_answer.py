"""A write's answer as both Worlds assemble it: a batch's outcomes in request order (``requests.in_request_order``),
how many skipped-over events a write reports (``log.skipped_over``), what a run shows of its end, a created run's
id."""

from __future__ import annotations

import pytest

from awsworld.world.entities import run_end_shown, step_lease_shown
from awsworld.world.errors import EntityConflictError, InvalidInputError
from awsworld.world.events import BatchEventOutcome, EventResult
from awsworld.world.pages import MAX_EVENTS_PAGE
from awsworld.world.rules.log import skipped_over
from awsworld.world.rules.requests import failed_outcome, in_request_order
from awsworld.world.rules.runs import created_run_id


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


def test_a_run_shows_its_end_value_by_status() -> None:
    assert run_end_shown("completed", "all") == "output"
    assert run_end_shown("completed", "none") is None
    assert run_end_shown("failed", "none") == "error"  # errors always show
    assert run_end_shown("cancelled", "all") is None
    assert run_end_shown("running", "all") is None
    assert step_lease_shown("running") and not step_lease_shown("completed")


def test_run_created_takes_the_clients_id_checked_or_a_new_one() -> None:
    assert created_run_id("r-1") == "r-1"
    made = created_run_id(None)
    assert made and made != created_run_id(None)
    with pytest.raises(InvalidInputError):
        created_run_id("bad id/with slash")
