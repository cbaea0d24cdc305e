"""The rulebook's commit-time conditions (``world/rules/conditions.py``) as DynamoDB ConditionExpressions.

A rule such as "the hook token is free" is written once, as data; the in-memory World evaluates it on its
record, and this module renders the same tree over the item's attributes, so the rule the decision was made on
and the condition DynamoDB re-checks at commit cannot drift apart. A state field is its item attribute in camel
case (``retention_until`` -> ``retentionUntil``); ``now`` is the write's time, as the ISO text items hold.
"""

from __future__ import annotations

from pydantic.alias_generators import to_camel

from ...world.rules.conditions import AllOf, AnyOf, Condition, Earlier, Equals, Missing, Not, Unset
from ..dynamodb.transactions import Expr


def render(condition: Condition, expr: Expr, now: str) -> str:
    """``condition`` as a ConditionExpression, its names and values registered on ``expr``."""
    if isinstance(condition, Missing):
        return "attribute_not_exists(pk)"
    if isinstance(condition, AllOf | AnyOf):
        joiner = " AND " if isinstance(condition, AllOf) else " OR "
        return "(" + joiner.join(render(part, expr, now) for part in condition.parts) + ")"
    if isinstance(condition, Not):
        return f"NOT {render(condition.part, expr, now)}"
    name = expr.n(to_camel(condition.field))
    if isinstance(condition, Equals):
        return f"{name} = {expr.v(condition.value)}"
    if isinstance(condition, Unset):
        return f"attribute_not_exists({name})"
    assert isinstance(condition, Earlier)
    return f"{name} < {expr.v(now)}"
