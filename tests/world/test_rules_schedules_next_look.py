"""When a tick must next look at the schedules (``rules.schedules.next_look``): the rule the in-memory store's
``next_due`` applies (``_memory/schedules.py``), so a test environment's skipping clock stops at every moment a
tick has something to do, and at no other."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from awsworld.world.rules.schedules import BUFFER_POLL, next_look
from awsworld.world.schedules import Action, ScheduleState, Spec

NOW = datetime(2030, 1, 1, 12, tzinfo=UTC)


@dataclass(frozen=True)
class Declared:
    schedule_id: str
    spec_hash: str
    module: str = "app"

    def state(self, now: datetime) -> ScheduleState:
        return record(self.schedule_id, source="code", spec_hash=self.spec_hash)


def record(schedule_id: str, **changes: object) -> ScheduleState:
    base = ScheduleState(schedule_id=schedule_id, workflow_name="wf", spec=Spec(every=3600), input="[]",
                         created_at=NOW, updated_at=NOW, cursor=NOW, next_at=NOW + timedelta(hours=1))
    return replace(base, **changes)  # type: ignore[arg-type]


def test_the_soonest_next_tick_when_nothing_else_is_due() -> None:
    states = [record("a"), record("b", next_at=NOW + timedelta(minutes=5))]
    assert next_look(states, (), NOW, None) == NOW + timedelta(minutes=5)
    assert next_look([], (), NOW, None) is None


def test_a_paused_or_orphaned_schedule_needs_no_tick_but_a_pending_effect_does_at_once() -> None:
    assert next_look([record("a", paused=True, next_at=None)], (), NOW, None) is None
    assert next_look([record("a", orphaned=True, source="code")], (), NOW, None) is None
    pending = record("a", paused=True, pending=(Action("start", "wrun_x", NOW),))
    assert next_look([pending], (), NOW, None) == NOW


def test_a_buffered_start_looks_a_minute_after_the_last_listing() -> None:
    buffered = record("a", buffered=Action("start", "wrun_x", NOW))
    assert next_look([buffered], (), NOW, None) == NOW
    assert next_look([buffered], (), NOW, NOW - timedelta(seconds=10)) == NOW - timedelta(seconds=10) + BUFFER_POLL


def test_declarations_the_store_does_not_match_are_due_now() -> None:
    stored = record("a", source="code", spec_hash="h1")
    assert next_look([stored], [Declared("a", "h1")], NOW, None) == stored.next_at  # in line: the next tick
    assert next_look([stored], [Declared("a", "h2")], NOW, None) == NOW  # its code changed
    assert next_look([stored], [Declared("a", "h1"), Declared("b", "h3")], NOW, None) == NOW  # not stored yet
    assert next_look([stored], (), NOW, None) == NOW  # no declaration names it: the next tick orphans it
    assert next_look([record("api")], (), NOW, None) == NOW + timedelta(hours=1)  # an API schedule is not code's
