"""Conditions a commit re-checks, written once as data that every World can evaluate.

A rule that must still hold at the moment a write lands (a hook token is free, a token is still held by the run
a hook_conflict names) is declared here as a small tree over a state's fields. The in-memory World evaluates it
on its record with ``holds``; the AWS World renders the same tree into a DynamoDB ConditionExpression over the
item's attributes (``aws/log/conditions.py``), so the rule and the condition cannot drift apart.

``now`` stands for the write's time: ``Earlier(field)`` holds when the field is set and before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class Missing:
    """There is no record at all."""


@dataclass(frozen=True, slots=True)
class Equals:
    field: str
    value: str | bool


@dataclass(frozen=True, slots=True)
class Unset:
    """The field has no value (None)."""

    field: str


@dataclass(frozen=True, slots=True)
class Earlier:
    """The field (a time) is set and before the write's time."""

    field: str


@dataclass(frozen=True, slots=True)
class AllOf:
    parts: tuple[Condition, ...]


@dataclass(frozen=True, slots=True)
class AnyOf:
    parts: tuple[Condition, ...]


@dataclass(frozen=True, slots=True)
class Not:
    part: Condition


Condition = Missing | Equals | Unset | Earlier | AllOf | AnyOf | Not


def holds(condition: Condition, record: object | None, now: datetime) -> bool:
    """Whether ``condition`` holds for ``record`` (a state dataclass, or None when there is none) at ``now``."""
    if isinstance(condition, Missing):
        return record is None
    if isinstance(condition, AllOf):
        return all(holds(part, record, now) for part in condition.parts)
    if isinstance(condition, AnyOf):
        return any(holds(part, record, now) for part in condition.parts)
    if isinstance(condition, Not):
        return not holds(condition.part, record, now)
    if record is None:  # a field of a record that does not exist: DynamoDB compares it as absent
        return isinstance(condition, Unset)
    value: object = getattr(record, condition.field)
    if isinstance(condition, Equals):
        return value == condition.value
    if isinstance(condition, Unset):
        return value is None
    return isinstance(value, datetime) and value < now
