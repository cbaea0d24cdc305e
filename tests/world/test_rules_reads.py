"""What a rule reads beyond its request (``world/rules/book.py``): the entity, the run's hooks, and which hook
token's holder, the one choice both Worlds' reads follow."""

from __future__ import annotations

from datetime import UTC, datetime

from awsworld.world.events import parse_event_request
from awsworld.world.rules import HookState
from awsworld.world.rules.book import read_token, reads

HOOK = HookState("h1", "held-token", datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC))


def test_hook_created_reads_the_token_it_claims() -> None:
    req = parse_event_request({"eventType": "hook_created", "correlationId": "h1", "eventData": {"token": "t1"}})
    assert read_token(req, None) == "t1"
    assert read_token(req, HOOK) == "t1"  # not the hook's: the one the request names
    assert reads("hook_created", "token") and not reads("hook_created", "entity")


def test_hook_disposed_reads_the_token_of_the_hook_it_disposes() -> None:
    req = parse_event_request({"eventType": "hook_disposed", "correlationId": "h1", "eventData": {}})
    assert read_token(req, HOOK) == "held-token"
    assert read_token(req, None) is None  # no hook: the rule refuses before it would look
    assert reads("hook_disposed", "entity") and reads("hook_disposed", "token")


def test_other_events_read_no_token() -> None:
    received = parse_event_request({"eventType": "hook_received", "correlationId": "h1", "eventData": {}})
    assert read_token(received, HOOK) is None
    assert not reads("hook_received", "entity")
    assert reads("run_completed", "hooks") and not reads("run_started", "hooks")
    assert reads("step_started", "entity") and not reads("step_created", "entity")
