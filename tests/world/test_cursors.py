"""The listing sequence both Worlds share (``world/cursors.py``): argument checks in the contract's order, the
key a page starts after, and a page cut from what a listing found."""

from __future__ import annotations

import pytest

from awsworld.world.cursors import (
    HOOK_KEYS,
    STEP_KEYS,
    RunsQuery,
    encode_cursor,
    entities_page_after,
    first_page,
    key_cursor,
    run_cursor,
    runs_query,
)
from awsworld.world.errors import InvalidInputError
from awsworld.world.pages import MAX_ENTITIES_PAGE, MAX_RUNS_PAGE


def test_runs_query_checks_limit_then_status_then_cursor() -> None:
    with pytest.raises(InvalidInputError) as limit:
        runs_query(["bogus"], "not a cursor", MAX_RUNS_PAGE + 1)
    assert limit.value.field == "limit"
    with pytest.raises(InvalidInputError) as status:
        runs_query(["bogus"], "not a cursor", 10)
    assert status.value.field == "status"
    with pytest.raises(InvalidInputError) as cursor:
        runs_query("running", "not a cursor", 10)
    assert cursor.value.field == "cursor"


def test_runs_query_empty_status_matches_nothing_before_the_cursor_is_read() -> None:
    assert runs_query([], "not a cursor", 10) is None
    assert runs_query(None, None, 10) == RunsQuery(None, None)
    page_cursor = run_cursor(["01B", "01A"], True)
    assert runs_query("completed", page_cursor, 10) == RunsQuery(["completed"], "01A")


def test_entities_page_after_refuses_another_listings_cursor() -> None:
    assert entities_page_after(None, MAX_ENTITIES_PAGE, STEP_KEYS) is None
    hook_cursor = key_cursor([HOOK_KEYS + "h1"], True)
    assert entities_page_after(hook_cursor, 5, HOOK_KEYS) == "HOOK#h1"
    with pytest.raises(InvalidInputError) as other:
        entities_page_after(hook_cursor, 5, STEP_KEYS)
    assert other.value.field == "cursor"
    with pytest.raises(InvalidInputError) as limit:
        entities_page_after(encode_cursor({"k": "STEP#a"}), 0, STEP_KEYS)
    assert limit.value.field == "limit"


def test_first_page_cuts_at_limit_and_says_whether_more_exist() -> None:
    assert first_page(["a", "b", "c"], 2) == (["a", "b"], True)
    assert first_page(["a", "b"], 2) == (["a", "b"], False)
    assert first_page([], 3) == ([], False)
