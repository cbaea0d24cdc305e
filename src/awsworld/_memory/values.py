"""User values as the in-memory World keeps them: the JSON text the caller's value encodes to, once.

A value is checked and copied at the moment it is written (``store_value``): what is kept is its JSON text,
so a caller that mutates its object afterwards cannot change the log, and a value that is not JSON (NaN, an
arbitrary object) is refused with the contract's typed 400 (``world.limits``), before anything is written. Every
read decodes a fresh copy (``Value.get``), so a reader mutating what it was handed cannot change the log
either; scalars are immutable and are handed out as they are. Keeping the decoded JSON, not the caller's
object, also makes every answer JSON's (a tuple reads back as a list, an int key as a str).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from json.scanner import make_scanner
from typing import Any

from ..world.limits import encode_value, value_json

JSONValue = Any
"""A value made of dict, list, str, int, float, bool and None (JSON has no narrower Python type)."""

_SCALARS = (str, int, float, bool, type(None))
# json.dumps with any option set builds a new encoder per call: this one is built once.
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_SCAN = make_scanner(json.JSONDecoder())  # pyright: ignore[reportArgumentType] (typeshed's: a duck type of one)
"""A copy of a value from its JSON text: ``(value, end)`` (what ``JSONDecoder.scan_once`` is). ``json.loads`` is
this scan behind a check of its argument's type and a byte-order mark and two regular expressions for whitespace
around the value: 13,500 instructions for ``{"args":[5],"kwargs":{}}``, where the scan alone costs 5,300. The texts
read here are the compact JSON this World made itself (``store_value``, ``json_value``, ``data_text``): one value,
nothing around it. Every read of a run's log copies its values and its events' data holding containers this way
(``bench/testing.py --instructions``, which reads the run's events and steps once it ended: 1,682,174 instructions
per step with ``json.loads``, 1,666,004 with the scan)."""


@dataclass(slots=True)
class Value:
    """A stored value: its JSON text, and the decoded value when that is an immutable scalar."""

    text: str
    scalar: JSONValue = None
    is_scalar: bool = False

    def get(self) -> JSONValue:
        """A copy of the value the caller wrote (the caller may mutate it freely)."""
        return self.scalar if self.is_scalar else _SCAN(self.text, 0)[0]


NULL = Value("null", None, True)


def store_value(value: JSONValue, field: str, max_bytes: int | None, *, look: bool = True) -> Value:
    """Check ``value`` (JSON, and at most ``max_bytes`` of UTF-8 when a limit is set: ``world.limits``, with
    its ``look``) and keep a copy."""
    text = value_json(value, field) if max_bytes is None else encode_value(value, field, max_bytes, look=look)[0]
    if type(value) in _SCALARS:  # exactly a scalar type: subclasses (enums) read back as the JSON they encode to
        return Value(text, value, True)
    return Value(text)


def json_value(value: JSONValue) -> Value:
    """A Value of JSON data the World itself produced (a model's JSON dump): no checks needed."""
    if type(value) in _SCALARS:
        return Value(json.dumps(value), value, True)
    return Value(_COMPACT.encode(value))


def copy_json(data: dict[str, JSONValue], text: str | None) -> dict[str, JSONValue]:
    """A copy of an event's data: a shallow copy suffices when it holds no containers (``text`` is None)."""
    return _SCAN(text, 0)[0] if text is not None else dict(data)


def data_text(data: dict[str, JSONValue]) -> str | None:
    """The JSON text of event data that holds containers (copied deeply on each read), else None."""
    for v in data.values():
        if isinstance(v, (dict, list)):
            return _COMPACT.encode(data)
    return None
