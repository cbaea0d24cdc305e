"""A value's stored size is found before its copy is made, and it is the size its JSON has.

``world/limits.py``'s ``dumped_size_over`` measures the JSON ``serde.dumps`` would make of a user's value, a part
at a time (``serde.json_parts``), so a value of many parts over the bound is refused without its copy
(``bench/oversized_values.py`` prints what that saves). These pin the part that a refusal's message relies on:
the size is the UTF-8 bytes of ``serde.to_json_text``, to the byte, for every shape the format has (envelopes,
escaped ``"$t"`` keys, non-ASCII text, bytes as base64, tuples, small items dumped together and large ones taken
apart); a value at the bound is not over it; and a value ``dumps`` refuses, or one it cannot measure so, is left
to ``dumps`` and the World (None), never refused with a wrong size.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from decimal import Decimal
from typing import Any
from uuid import UUID

import pytest

from awsworld.durable import serde
from awsworld.world.errors import PayloadTooLargeError
from awsworld.world.limits import dumped_size_over, json_size_over, oversized, oversized_call, oversized_nested_call

BOUND = 64 * 1024
RECORD = {"id": 0, "name": "a record — ünïcode 日本", "tags": ["alpha", "beta"], "score": 0.5, "ok": None}


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    label: str


def records(count: int) -> list[dict[str, Any]]:
    return [{**RECORD, "id": i} for i in range(count)]


SHAPES: dict[str, Any] = {
    "records": records(2000),
    "records as arguments": {"args": [records(2000)], "kwargs": {}},
    "a tuple of records": tuple(records(2000)),
    "keys with an envelope's key": {"$t": "mine", **{f"key {i} é": i for i in range(6000)}},
    "a dict inside one with the envelope's key": {"outer": {"$t": [1, {"$t": 2}], **{f"k{i}": "v" for i in
                                                                                      range(9000)}}},
    "bytes": bytes(range(256)) * 300,
    "many small bytes": [bytes([i % 256]) * 37 for i in range(3000)],
    "one large text among small items": [*records(10), "\"escaped\"\n\\ ☃ " * 6000, *records(10)],
    "non-ASCII texts": ["日本語🚀é" * 3 for _ in range(8000)],
    "typed values in envelopes": [{"when": dt.datetime(2024, 2, 29, 23, 59, tzinfo=dt.UTC), "amount": Decimal(
        "12.50"), "id": UUID(int=i), "point": Point(i, "p"), "pair": (i, "two"), "set": {1, 2}, "big": 2 ** 5000,
        "nan": float("nan"), "map": {1: "one"}} for i in range(300)],
    "nested lists": [[[i, [i, "x" * 40]] for i in range(300)] for _ in range(12)],
}


def json_size(value: Any) -> int:
    return len(serde.to_json_text(value).encode("utf-8"))


@pytest.mark.parametrize("shape", SHAPES)
def test_the_size_is_the_stored_jsons_to_the_byte(shape: str) -> None:
    value = SHAPES[shape]
    size = json_size(value)
    assert size > BOUND
    assert dumped_size_over(value, 1) == size
    if shape == "typed values in envelopes":  # (its look counts an object as a few bytes: judged small at its
        return  # size, it is refused by the World, from its JSON)
    assert dumped_size_over(value, size - 1) == size
    assert dumped_size_over(value, size) is None  # at the bound: not over it
    refusal = oversized(value, "eventData.result", size - 1)
    assert isinstance(refusal, PayloadTooLargeError)
    assert refusal.message == (f"eventData.result is {size} bytes of JSON; the largest value awsworld stores is "
                               f"{size - 1} bytes (AWSWORLD_MAX_VALUE_BYTES)")
    assert oversized(value, "eventData.result", None) is None  # no bound known here (a World served elsewhere)


def refused_size(refusal: PayloadTooLargeError | None) -> int | None:
    return None if refusal is None else int((refusal.message or "").split(" is ")[1].split(" bytes")[0])


@pytest.mark.parametrize("shape", SHAPES)
def test_a_calls_arguments_are_measured_as_stored_and_a_childs_as_dumped_twice(shape: str) -> None:
    """A step's arguments (``oversized_call``) and a child workflow's inside its start step's, the child's
    dumped among them and dumped again (``oversized_nested_call``: each dict with a ``"$t"`` key the second dump
    wraps), measured before either copy: the size of the JSON the World is given, to the byte."""
    value = SHAPES[shape]
    size = json_size({"args": [value], "kwargs": {"n": 1}})
    assert refused_size(oversized_call((value,), {"n": 1}, "eventData.input", 1)) == size
    assert oversized_call((value,), {"n": 1}, "eventData.input", size) is None
    outer = ("awsworld.child", None, False)
    nested = json_size({"args": ["awsworld.child", serde.dumps({"args": [value], "kwargs": {"n": 1}}), False],
                        "kwargs": {"priority": 2}})
    assert refused_size(oversized_nested_call((value,), {"n": 1}, outer, {"priority": 2}, "eventData.input",
                                              1)) == nested
    assert oversized_nested_call((value,), {"n": 1}, outer, {"priority": 2}, "eventData.input", nested) is None


def test_a_small_call_is_not_measured() -> None:
    """A call of numbers and short texts costs a type check or a ``len`` an argument: never measured."""
    assert oversized_call((5, 2.5, True, None, "x" * (BOUND // 4)), {"k": 1}, "eventData.input", BOUND) is None
    assert oversized_call(("x" * (BOUND + 1),), {}, "eventData.input", BOUND) is not None
    assert oversized_call((), {"k": "x" * (BOUND + 1)}, "eventData.input", None) is None  # no bound known


@pytest.mark.parametrize("shape", SHAPES)
def test_json_data_is_measured_as_its_own_json(shape: str) -> None:
    """What a World is given (the dumped value; a queue payload) is measured as the JSON it is: an envelope's
    ``"$t"`` key is not escaped again, a tuple is JSON's list (``json_size_over``, ``encode_value``'s look)."""
    data = serde.dumps(SHAPES[shape])
    size = len(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    assert json_size_over(data, 1) == size
    assert json_size_over(data, size) is None
    as_tuples = [tuple(item) if isinstance(item, list) else item for item in data] if isinstance(data, list) \
        else data
    assert json_size_over(as_tuples, 1) == size


@pytest.mark.parametrize("shape", SHAPES)
def test_the_parts_are_the_jsons(shape: str) -> None:
    """``serde.json_parts``' parts, each written as its kind says, are ``to_json_text`` (base64 made here)."""
    value = SHAPES[shape]
    raw = [item for item in value if type(item) is bytes] if type(value) is list else [value] \
        if type(value) is bytes else []
    written: list[str] = []
    for part in serde.json_parts(value):
        if isinstance(part, str):
            written.append(part)
        elif isinstance(part, serde.Base64):
            data = raw.pop(0)
            assert len(data) == part.length
            written.append(serde.to_json_text(data)[len('{"$t":"bytes","v":"'):-2])
        else:
            text = json.dumps(part.data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
            written.append(text[1:-1] if isinstance(part, serde.Items) else text)
    assert "".join(written) == serde.to_json_text(value)


def test_a_value_that_looks_small_is_not_measured() -> None:
    """Only a value that may be over a quarter of the bound is measured: a small one costs a look at a few nodes.
    (A value judged small that is over the bound is still refused, by the World, from its JSON.)"""
    assert dumped_size_over({"args": [5], "kwargs": {}}, BOUND) is None
    assert dumped_size_over(records(10), BOUND) is None
    assert dumped_size_over("x" * (BOUND + 1), BOUND) == BOUND + 3


def test_a_value_dumps_refuses_is_left_to_dumps() -> None:
    """A cycle, nesting past ``serde.MAX_DEPTH``, an object serde does not store, a lone surrogate (its JSON
    escapes it): None, so ``dumps`` (or the World) raises what it always raised."""
    cycle: list[Any] = [*records(3000)]
    cycle.append(cycle)
    deep: list[Any] = ["x" * BOUND]
    for _ in range(serde.MAX_DEPTH + 5):
        deep = [deep, *records(5)]
    for value in (cycle, deep, [*records(3000), object()], [*records(3000), "\ud800" * 10]):
        assert dumped_size_over(value, BOUND) is None
        with pytest.raises((serde.SerializationError, UnicodeEncodeError)):
            serde.to_json_text(value).encode("utf-8")


def test_a_tuple_in_json_data_counts_its_bytes_not_its_characters() -> None:
    """``json_size_over`` (JSON data of a few nodes: a queue payload, a dumped value) measured a node it does not
    walk (a tuple, which JSON writes as a list) by its characters: a refusal said fewer bytes than there were."""
    value = ["x" * (BOUND + 1), ("日本語" * 5,)]
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    assert json_size_over(value, BOUND) == size
