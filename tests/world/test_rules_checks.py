"""What each check means over the state a commit finds (``world/rules/checks.py``): the one reading both Worlds
use, and the ``Failed`` it hands ``refusal`` (status, resume slot, token holder)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from awsworld.world.errors import EntityConflictError, HookAlreadyReceivedError, HookNotFoundError, RunGoneError
from awsworld.world.events import parse_event_request
from awsworld.world.rules import Check, Decision, NewEvent, TokenState, refusal
from awsworld.world.rules.book import RULES
from awsworld.world.rules.checks import Found, failed
from awsworld.world.rules.decision import NOTHING_FAILED
from awsworld.world.rules.state import RunState, StepState, View

NOW = datetime(2026, 1, 1, tzinfo=UTC)
CREATE = Decision("hook_created", "h1", checks=(Check.RUN_ALIVE, Check.ABSENT, Check.TOKEN_FREE, Check.HOOK_ID_FREE),
                  token=TokenState("tok", "r1", "h1"))
RECEIVE = Decision("hook_received", "h1", checks=(Check.RESUME_NEW, Check.RUN_ALIVE, Check.EXISTS), resume_id="k")
CONFLICT = Decision("hook_created", "h2", [NewEvent("hook_conflict", "h2", {"token": "tok"})],
                    (Check.RUN_ALIVE, Check.TOKEN_HELD), token_holder="r9")
DISPOSE = Decision("hook_disposed", "h1", checks=(Check.AS_READ, Check.TOKEN_OWNED),
                   token=TokenState("tok", "r1", "h1", released=True))


def check_holds(check: Check, decision: Decision, found: Found, now: datetime) -> bool:
    """Whether ``check`` alone holds for ``decision`` (as if it were the decision's only check)."""
    return check not in failed(replace(decision, checks=(check,)), found, now).checks


def test_what_a_live_run_with_free_names_finds_fails_nothing() -> None:
    assert failed(CREATE, Found("running"), NOW) is NOTHING_FAILED
    assert failed(RECEIVE, Found("running", entity=True), NOW) is NOTHING_FAILED


def test_each_check_over_the_found_state() -> None:
    assert not check_holds(Check.RUN_ALIVE, CREATE, Found("completed"), NOW)
    assert not check_holds(Check.ABSENT, CREATE, Found("running", entity=True), NOW)
    assert not check_holds(Check.EXISTS, RECEIVE, Found("running"), NOW)
    assert not check_holds(Check.AS_READ, DISPOSE, Found(entity_as_read=False), NOW)
    assert not check_holds(Check.RUN_AS_READ, DISPOSE, Found(run_as_read=False), NOW)
    assert not check_holds(Check.RESUME_NEW, RECEIVE, Found(resumed=True), NOW)
    assert not check_holds(Check.HOOK_ID_FREE, CREATE, Found(hook_id_taken=True), NOW)
    held = TokenState("tok", "r9", "h7")
    assert not check_holds(Check.TOKEN_FREE, CREATE, Found(token=held), NOW)
    reserved = TokenState("tok", "r9", "h7", NOW + timedelta(hours=1), released=True, end_status="completed")
    assert not check_holds(Check.TOKEN_FREE, CREATE, Found(token=reserved), NOW)
    lapsed = TokenState("tok", "r9", "h7", NOW - timedelta(hours=1), released=True, end_status="completed")
    assert check_holds(Check.TOKEN_FREE, CREATE, Found(token=lapsed), NOW)
    assert check_holds(Check.TOKEN_HELD, CONFLICT, Found(token=held), NOW)
    assert not check_holds(Check.TOKEN_HELD, CONFLICT, Found(token=lapsed), NOW)
    assert not check_holds(Check.TOKEN_HELD, CONFLICT, Found(), NOW)  # the record is gone
    assert check_holds(Check.TOKEN_OWNED, DISPOSE, Found(token=TokenState("tok", "r1", "h1")), NOW)
    assert not check_holds(Check.TOKEN_OWNED, DISPOSE, Found(token=held), NOW)


def test_failed_carries_what_the_refusal_reads() -> None:
    got = failed(RECEIVE, Found("completed", entity=True, resumed=True, resume_slot=7), NOW)
    assert got.checks == {Check.RESUME_NEW, Check.RUN_ALIVE} and got.resume_slot == 7
    error = refusal(RECEIVE, "r1", got)
    assert isinstance(error, HookAlreadyReceivedError) and error.event_id is not None
    ended = failed(RECEIVE, Found("cancelled", entity=True), NOW)
    assert ended.resume_slot is None
    assert isinstance(refusal(RECEIVE, "r1", ended), RunGoneError)
    assert isinstance(refusal(RECEIVE, "r1", failed(RECEIVE, Found("running"), NOW)), HookNotFoundError)
    mine = failed(CREATE, Found("running", token=TokenState("tok", "r1", "h1")), NOW)
    assert mine.token == TokenState("tok", "r1", "h1")
    assert isinstance(refusal(CREATE, "r1", mine), EntityConflictError)
    other = failed(CREATE, Found("running", token=TokenState("tok", "r9", "h7")), NOW)
    assert refusal(CREATE, "r1", other) is None  # held by another hook: decide again (a hook_conflict)


def test_examined_limits_the_checks_to_what_a_world_could_see() -> None:
    # A cancellation that names only the resume marker says nothing about the hook: EXISTS held.
    got = failed(RECEIVE, Found(resumed=True, resume_slot=3), NOW, examined=(Check.RESUME_NEW,))
    assert got.checks == {Check.RESUME_NEW}
    assert failed(RECEIVE, Found(), NOW, examined=()) is NOTHING_FAILED


def test_checked_token_is_the_claimed_released_or_conflicting_one() -> None:
    assert CREATE.checked_token == "tok"
    assert DISPOSE.checked_token == "tok"
    assert CONFLICT.checked_token == "tok"
    assert RECEIVE.checked_token is None


def test_an_interrupted_attempts_end_is_decided_on_a_live_run_and_its_commit_rechecks_it() -> None:
    """The end of an attempt the runtime found cut off (``interruptedAttempt``) carries ``RUN_ALIVE``: a cancel
    that lands between the decision and its commit refuses it as gone. A body's real outcome does not: it may
    still land after the run's end (the fence is on starting, not on finishing)."""
    step = StepState("s", "charge", "running", NOW, NOW, attempt=1)
    view = View("r1", NOW, RunState("r1", "running"), step=step)
    error = {"message": "cut off", "name": "StepInterruptedError"}
    cut_off = parse_event_request({"eventType": "step_failed", "correlationId": "s",
                                   "eventData": {"error": error, "interruptedAttempt": 1}})
    real = parse_event_request({"eventType": "step_failed", "correlationId": "s", "eventData": {"error": error}})
    decided = RULES["step_failed"].decide(cut_off, view)
    assert Check.RUN_ALIVE in decided.checks
    gone = refusal(decided, "r1", failed(decided, Found("cancelled", entity=True), NOW))
    assert isinstance(gone, RunGoneError)
    assert Check.RUN_ALIVE not in RULES["step_failed"].decide(real, view).checks
