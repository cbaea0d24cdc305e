"""Workflow values survive the event log exactly: equal, same types, readable where plain JSON, and a value
that cannot be stored fails at once with its path instead of leaving a run stuck."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import socket
import threading
import uuid
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Iterator
from decimal import Decimal
from enum import Enum, IntEnum
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo

import pytest
from pydantic import BaseModel, Field

from awsworld.durable import serde
from awsworld.durable.serde import RestoredError, SerializationError, dumps, from_json_text, loads, to_json_text


class Color(Enum):
    RED = "red"
    BLUE = (0, 0, 255)


class Level(IntEnum):
    LOW = 1


class Address(BaseModel):
    city: str
    since: dt.date


class Customer(BaseModel):
    name: str = Field(alias="fullName")
    tags: tuple[str, ...] = ()
    address: Address | None = None
    extra: dict[str, Any] = {}


@dataclasses.dataclass
class Line:
    sku: str
    qty: int
    price: Decimal
    meta: dict[Any, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, slots=True)
class Frozen:
    at: dt.datetime
    lines: tuple[Line, ...]


@dataclasses.dataclass
class Doubler:
    n: int

    def __post_init__(self) -> None:
        self.n *= 2


class Point(NamedTuple):
    x: int
    y: int = 0


def roundtrip(value: Any) -> Any:
    """Through the structure and through JSON text, both ways, checking they agree."""
    back = loads(json.loads(json.dumps(dumps(value), allow_nan=False)))
    again = from_json_text(to_json_text(value))
    assert type(back) is type(again) is type(value)
    return back


def same(a: Any, b: Any) -> bool:
    """Equality that also checks types all the way down (1 == 1.0 == True, (1,) vs [1] ...)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float | Decimal) and a != a:  # nan
        return b != b
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(k, k2) and same(a[k], b[k2]) for k, k2 in zip(a, b, strict=True))
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


PLAIN = [None, True, False, 0, -7, 2**62, 1.5, -0.0, "", "héllo ✓ 日本 🎉", "nul\x00byte", [], {}, [1, "a", None]]


@pytest.mark.parametrize("value", PLAIN, ids=repr)
def test_plain_json_passes_through_unchanged(value: Any) -> None:
    assert same(dumps(value), value)
    assert same(roundtrip(value), value)


def test_plain_nested_dict_is_stored_as_is() -> None:
    value = {"a": [1, {"b": "c\x00"}], "é": {"x": None}}
    assert dumps(value) == value
    assert to_json_text(value) == '{"a":[1,{"b":"c\\u0000"}],"é":{"x":null}}'


TYPED = [
    dt.datetime(2026, 1, 1, 12, 30, 5, 123456),
    dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    dt.datetime(2026, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=-5, minutes=-30))),
    dt.date(1, 1, 1),
    dt.time(23, 59, 59, 999999),
    dt.time(8, 0, tzinfo=dt.timezone(dt.timedelta(hours=2))),
    dt.timedelta(days=-3, seconds=5, microseconds=7),
    b"\x00\xff raw",
    bytearray(b"buf"),
    Decimal("1.10"),
    Decimal("-0"),
    Decimal("NaN"),
    Decimal("1E+400"),
    uuid.UUID("12345678-1234-5678-1234-567812345678"),
    (),
    (1, (2, [3])),
    {1, "a", (2, 3)},
    frozenset({b"x", None}),
    {1: "int key", (1, 2): "tuple key", None: [], "s": 1},
    math.inf,
    -math.inf,
    2**5000,
    -(2**5000),
    Color.RED,
    Color.BLUE,
    Level.LOW,
    Point(1, 2),
]


@pytest.mark.parametrize("value", TYPED, ids=lambda v: type(v).__name__)
def test_typed_values_round_trip(value: Any) -> None:
    back = roundtrip(value)
    assert same(back, value)
    if isinstance(value, Enum):
        assert back is value


def test_nan_goes_through_the_envelope() -> None:
    assert dumps(math.nan) == {"$t": "float", "v": "nan"}
    assert math.isnan(roundtrip(math.nan))
    assert "NaN" not in to_json_text([math.nan])


def test_datetime_keeps_zoneinfo_and_fold() -> None:
    paris = ZoneInfo("Europe/Paris")
    ambiguous = dt.datetime(2025, 10, 26, 2, 30, tzinfo=paris, fold=1)  # second 02:30, after clocks go back
    back = roundtrip(ambiguous)
    assert back.tzinfo is paris and back.fold == 1 and back.utcoffset() == dt.timedelta(hours=1)
    assert back + dt.timedelta(days=1) == ambiguous + dt.timedelta(days=1)
    naive = roundtrip(dt.datetime(2025, 10, 26, 2, 30, fold=1))
    assert naive.fold == 1 and naive.tzinfo is None
    assert roundtrip(dt.time(9, tzinfo=paris)).tzinfo is paris


def test_datetime_envelope_is_readable() -> None:
    assert dumps(dt.datetime(2026, 1, 1, tzinfo=dt.UTC)) == {"$t": "datetime", "v": "2026-01-01T00:00:00+00:00"}


def test_tuple_list_set_stay_distinct() -> None:
    value = [(1,), [1], {1}, frozenset({1})]
    assert same(roundtrip(value), value)


def test_set_order_is_canonical() -> None:
    """Set iteration order depends on the hash seed, so it must not leak into what a replay writes."""
    a = {f"k{i}" for i in range(50)}
    b = set(sorted(a, reverse=True))
    assert to_json_text(a) == to_json_text(b)


def test_user_dicts_with_reserved_key_round_trip() -> None:
    value = {"$t": "datetime", "v": "not a date", "nested": {"$t": {"$t": 1}}}
    dumped = dumps(value)
    assert dumped["$t"] == "dict"
    assert same(roundtrip(value), value)


def test_pydantic_model_round_trips() -> None:
    value = Customer(
        fullName="Ada",
        tags=("a", "b"),
        address=Address(city="Zürich", since=dt.date(2020, 2, 29)),
        extra={"$t": "spoof", "n": [1]},
    )
    back = roundtrip(value)
    assert back == value and type(back.address) is Address and back.tags == ("a", "b")
    assert dumps(value)["c"] == f"{__name__}:Customer"


def test_dataclasses_round_trip_without_running_init_again() -> None:
    line = Line("sku-1", 2, Decimal("9.99"), {("a", 1): {b"x"}})
    value = Frozen(dt.datetime(2026, 5, 1, tzinfo=dt.UTC), (line, Line("sku-2", 1, Decimal("0"))))
    back = roundtrip(value)
    assert back == value and type(back.lines[0].meta[("a", 1)]) is set
    doubled = Doubler(3)
    assert roundtrip(doubled).n == 6  # __post_init__ ran once, when the value was made


def test_dataclass_field_added_later_takes_its_default() -> None:
    stored = {"$t": "dataclass", "c": f"{__name__}:Line", "v": {"sku": "s", "qty": 1, "price": "1"}}
    assert loads(stored) == Line("s", 1, "1", {})  # type: ignore[arg-type]
    with pytest.raises(SerializationError, match="lacks required field 'qty'"):
        loads({"$t": "dataclass", "c": f"{__name__}:Line", "v": {"sku": "s"}})


def test_nested_combination_round_trips() -> None:
    value = {
        "when": [dt.date(2026, 1, 2), (dt.timedelta(0), None)],
        "blobs": {b"k": bytearray(b"\x00")},
        "people": [Customer(fullName="\x00"), Point(x=3)],
        "colors": frozenset({Color.RED, Color.BLUE}),
        "$t": [Line("x", 1, Decimal("1e-3"))],
        "ids": {uuid.UUID(int=0): {"$t"}},
        "nan": (math.nan, -math.inf),
    }
    back = roundtrip(value)
    assert same(back["when"], value["when"]) and back["colors"] == value["colors"]
    assert back["people"] == value["people"] and back["$t"] == value["$t"] and back["ids"] == value["ids"]
    assert math.isnan(back["nan"][0]) and back["nan"][1] == -math.inf


def test_builtin_exceptions_are_rebuilt() -> None:
    for exc in (ValueError("bad", 3), KeyError("k"), FileNotFoundError(2, "missing"), TimeoutError()):
        back = roundtrip(exc)
        assert type(back) is type(exc) and back.args == exc.args and str(back) == str(exc)


class OrderRejected(Exception):
    def __init__(self, order_id: str, reason: str) -> None:
        super().__init__(f"{order_id}: {reason}")


def test_other_exceptions_keep_their_type_name() -> None:
    back = from_json_text(to_json_text(OrderRejected("o-1", "no stock")))
    assert type(back) is RestoredError
    assert back.type_name == f"{__name__}:OrderRejected"
    assert back.message == "o-1: no stock" and back.args == ("o-1: no stock",)
    assert str(back) == f"{__name__}:OrderRejected: o-1: no stock"
    assert dumps(back) == dumps(OrderRejected("o-1", "no stock"))  # stable when stored again


def test_exception_with_unserializable_args_keeps_its_message() -> None:
    """A failure must stay reportable even when it carries something that cannot be stored."""
    exc = ValueError("lock held", threading.Lock())
    back = roundtrip(exc)
    assert type(back) is ValueError and back.args == (str(exc),)


def _gen() -> Iterator[int]:
    yield 1


@pytest.mark.parametrize(
    ("make", "path", "type_name"),
    [
        (lambda: {"items": [0, 1, 2, threading.Lock()]}, "value['items'][3]", "_thread.lock"),
        (lambda: [{"fn": lambda: 1}], "value[0]['fn']", "function"),
        (lambda: {"g": (_gen(),)}, "value['g'][0]", "generator"),
        (lambda: Line("s", 1, Decimal(1), {"k": object()}), "value.meta['k']", "object"),
        (lambda: {1: {object()}}, "value[1]<item>", "object"),
        (lambda: {object(): 1}, "value<key>", "object"),
    ],
)
def test_unserializable_values_name_type_and_path(make: Any, path: str, type_name: str) -> None:
    with pytest.raises(SerializationError) as info:
        dumps(make())
    assert str(info.value) == f"{path}: cannot serialize <class '{type_name}'> ({STORED})"
    assert info.value.path == path


STORED = ("awsworld stores JSON's types, bytes, datetime, date, time, timedelta, Decimal, UUID, tuples, sets, enums, "
          "dataclasses, NamedTuples, pydantic models and exceptions: use one of those, or give its step, workflow or "
          "hook (create_hook) a codec= that turns it into text (docs/how-to/codecs.md)")


@pytest.mark.parametrize(("value", "type_name", "base"), [
    (defaultdict(list, {"a": [1]}), "collections.defaultdict", "dict"),
    (OrderedDict(a=1), "collections.OrderedDict", "dict"),
    (Counter("ab"), "collections.Counter", "dict"),
])
def test_a_subclass_of_a_builtin_is_refused_saying_to_convert_it(value: object, type_name: str, base: str) -> None:
    """Matched by exact type, it would come back as the builtin: the error says so, and how to convert it."""
    with pytest.raises(SerializationError) as info:
        dumps({"rows": value})
    assert str(info.value) == (f"value['rows']: cannot serialize <class '{type_name}'> (a subclass of {base}, which "
                               f"would come back as a plain {base}: convert it, {base}(value))")


def test_socket_is_refused_with_its_path() -> None:
    with socket.socket() as sock, pytest.raises(SerializationError) as info:
        to_json_text({"items": [1, 2, 3, sock]})
    assert str(info.value) == f"value['items'][3]: cannot serialize <class 'socket.socket'> ({STORED})"
    assert isinstance(info.value, TypeError)


def test_cycles_are_refused() -> None:
    loop: list[Any] = [1]
    loop.append({"back": loop})
    with pytest.raises(SerializationError, match=r"^value\[1\]\['back'\]: cycle: this list contains itself$"):
        dumps(loop)
    shared = [1]
    assert loads(dumps([shared, shared])) == [[1], [1]]  # shared, not cyclic: fine


def test_deep_nesting_is_a_serialization_error() -> None:
    deep: Any = "x"
    for _ in range(10_000):
        deep = [deep]
    with pytest.raises(SerializationError, match="nested deeper than"):
        dumps(deep)
    ok: Any = "x"
    for _ in range(serde.MAX_DEPTH):
        ok = (ok,) if len(str(ok)) % 2 else {1: ok}
    assert same(roundtrip(ok), ok)
    with pytest.raises(SerializationError, match=r"not JSON text|too deeply"):
        from_json_text("[" * 100_000 + "]" * 100_000)


def test_classes_that_cannot_be_loaded_back_are_refused_when_written() -> None:
    @dataclasses.dataclass
    class Local:
        x: int

    with pytest.raises(SerializationError, match=r"^value\[0\]: cannot serialize .*Local.*only classes importable"):
        dumps([Local(1)])


@pytest.mark.parametrize(
    "path",
    [
        "os:system",  # not a class
        "subprocess:Popen",  # a class, but not a model
        "builtins:__import__",
        f"{__name__}:Customer.__class__",
        "os;import os:X",
        "__import__('os').system:X",
        "os:path.join(1)",
        ".relative:X",
        "no_colon",
    ],
)
def test_unsafe_class_paths_are_refused(path: str) -> None:
    with pytest.raises(SerializationError, match=r"refusing class path|cannot load"):
        loads({"$t": "model", "c": path, "v": {}})


def test_missing_class_is_a_clear_error() -> None:
    with pytest.raises(SerializationError, match=r"^value\['m'\]: cannot load 'awsworld_no_such_mod:Model'"):
        loads({"m": {"$t": "model", "c": "awsworld_no_such_mod:Model", "v": {}}})
    with pytest.raises(SerializationError, match="has no 'Gone'"):
        loads({"$t": "dataclass", "c": f"{__name__}:Gone", "v": {}})


def test_malformed_envelopes_are_serialization_errors() -> None:
    for data in (
        {"$t": "nope", "v": 1},
        {"$t": "bytes", "v": "!!"},
        {"$t": "enum", "c": f"{__name__}:Color", "v": "green"},
        {"$t": "model", "c": f"{__name__}:Address", "v": {"city": 1}},
        [{"$t": "tuple"}],
    ):
        with pytest.raises(SerializationError):
            loads(data)
