"""Workflow values to JSON and back, exactly.

Everything a workflow passes or returns is written to the event log and read back on replay, possibly in
another process, so a value must come back equal and of the same type. Plain JSON values (str, int, bool,
None, finite float, list, dict with str keys) are stored as they are, so the log stays readable; every other
supported type becomes an envelope ``{"$t": tag, "v": payload}`` (plus ``"c"``, a ``module:QualName`` class
path, for user classes). A user dict that itself has a ``"$t"`` key is escaped as ``{"$t": "dict", "v": ...}``.

A value that cannot be serialized raises ``SerializationError`` naming the type and where it sits inside the
value (``value['items'][3]: cannot serialize <class 'socket.socket'>``), at the call that produced it rather
than on some later replay: the runtime turns it into a FatalError instead of leaving the run stuck.
"""

from __future__ import annotations

import base64
import builtins
import contextlib
import dataclasses
import datetime as dt
import inspect
import json
import math
from collections.abc import Callable, Iterator
from decimal import Decimal
from enum import Enum
from functools import lru_cache
from typing import Any, NamedTuple, TypeAlias
from uuid import UUID
from zoneinfo import ZoneInfo

from pydantic import BaseModel

from .class_paths import ClassPathError, import_class
from .json_data import Call, JSONValue, SerializationError, as_call, is_tuple

__all__ = ["MAX_DEPTH", "Base64", "Items", "JSONPart", "JSONValue", "RestoredError", "SerializationError", "Whole",
           "dumps", "from_json_text", "json_parts", "loads", "loads_call", "to_json_text"]

TAG = "$t"
# Nesting limit of the Python value. An envelope adds up to 3 JSON levels per level, and json (like our own
# recursion) shares the interpreter's recursion limit of 1000, so this stays well below 1000 / 3.
MAX_DEPTH = 100
# Ints this large are stored as hex: decimal text is slow and capped at 4300 digits by Python itself.
_BIG_INT_BITS = 4096
_MISSING = object()

Envelope: TypeAlias = dict[str, Any]
"""A typed envelope ``{"$t": tag, "v": ...}`` as read from the log. Its fields are whatever the log holds: each
loader converts them and any shape it cannot convert raises inside ``_Loader.envelope``, which reports it as a
malformed envelope, so the loaders take them unchecked (``Any``) rather than re-checking every field's type."""


class RestoredError(Exception):
    """An exception read back whose class is not a builtin one. User exception classes are not imported from
    the log, so the original class name is kept as ``type_name`` (``module:QualName``), with the message and
    args; serializing it again writes the same record."""

    def __init__(self, type_name: str, message: str, *args: Any) -> None:
        super().__init__(*args)
        self.type_name = type_name
        self.message = message

    def __str__(self) -> str:
        return f"{self.type_name}: {self.message}"


@dataclasses.dataclass(frozen=True)
class Encoded:
    """A user codec's text or bytes (``codecs``), stored as ``{"$t": "codec", "v": text}`` (or ``"b"``: base64)."""

    data: str | bytes


class _Failure(Exception):
    """Internal: carries the reason up the recursion; each level adds its path segment only on the way out,
    so the happy path never formats a path."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.segments: list[str] = []

    def error(self) -> SerializationError:
        return SerializationError("value" + "".join(reversed(self.segments)), self.reason)


def _segment(key: object, how: str) -> str:
    """``[key]`` for items, ``.name`` for attributes, or a literal marker like ``<key>``."""
    return f"[{key!r}]" if how == "[]" else f".{key}" if how == "." else str(key)


_type_of: Callable[[object], type[object]] = type
"""``type``, for the walks below: they take their values as ``Any`` (see ``_Dumper``), and ``type()`` of an ``Any``
is a class of unknown type to a checker, where this says what it is: a class."""


# --- class paths -------------------------------------------------------------------------------------------


def _import_class(path: str) -> type:
    try:
        return import_class(path)
    except ClassPathError as error:
        raise _Failure(error.reason) from error.__cause__


@lru_cache(maxsize=1024)
def _class_path(cls: type) -> str:
    """The path a class is stored under, checked at write time: a class defined inside a function or a
    generic alias like ``Model[int]`` could never be loaded back, and saying so now beats a failed replay."""
    path = f"{cls.__module__}:{cls.__qualname__}"
    try:
        found = _import_class(path)
    except _Failure as exc:
        hint = "only classes importable at module level can be stored"
        raise _Failure(f"cannot serialize {cls!r}: {exc.reason} ({hint})") from None
    if found is not cls:
        raise _Failure(f"cannot serialize {cls!r}: {path!r} names a different object")
    return path


def _load_class(path: object, kind: str, check: Callable[[type[object]], bool]) -> Any:
    if not isinstance(path, str):
        raise _Failure(f"malformed {kind!r} envelope: class path {path!r}")
    cls = _import_class(path)
    if not check(cls):
        raise _Failure(f"refusing class path {path!r}: not a {kind} class")
    return cls


# --- scalars ------------------------------------------------------------------------------------------------


def _tz_extra(value: dt.datetime | dt.time) -> dict[str, JSONValue]:
    """ISO text keeps only the UTC offset: a ZoneInfo's key is kept too, so DST-aware arithmetic behaves the
    same after replay; ``fold`` of a naive value is kept as it is not in the text."""
    tz = value.tzinfo
    if isinstance(tz, ZoneInfo) and tz.key:
        return {"tz": tz.key}
    return {"fold": 1} if value.fold and tz is None else {}


def _load_datetime(d: Envelope) -> dt.datetime:
    value = dt.datetime.fromisoformat(d["v"])
    if "tz" in d:
        return value.astimezone(ZoneInfo(d["tz"]))  # from the stored offset, so fold comes out right
    return value.replace(fold=1) if d.get("fold") else value


def _load_time(d: Envelope) -> dt.time:
    value = dt.time.fromisoformat(d["v"])
    if "tz" in d:
        return value.replace(tzinfo=ZoneInfo(d["tz"]))
    return value.replace(fold=1) if d.get("fold") else value


_FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}

# Keyed by the value's exact type (``type(value)``), so each function gets a value of its key's type: a dict's type
# cannot tie a key to its function's parameter, hence ``Any`` for the value.
_SCALAR_DUMPERS: dict[type, Callable[[Any], JSONValue]] = {
    dt.datetime: lambda v: {TAG: "datetime", "v": v.isoformat(), **_tz_extra(v)},
    dt.date: lambda v: {TAG: "date", "v": v.isoformat()},
    dt.time: lambda v: {TAG: "time", "v": v.isoformat(), **_tz_extra(v)},
    dt.timedelta: lambda v: {TAG: "timedelta", "v": [v.days, v.seconds, v.microseconds]},
    bytes: lambda v: {TAG: "bytes", "v": base64.b64encode(v).decode("ascii")},
    bytearray: lambda v: {TAG: "bytearray", "v": base64.b64encode(v).decode("ascii")},
    Decimal: lambda v: {TAG: "decimal", "v": str(v)},
    UUID: lambda v: {TAG: "uuid", "v": str(v)},
    Encoded: lambda v: {TAG: "codec", "v": v.data} if isinstance(v.data, str) else
    {TAG: "codec", "b": base64.b64encode(v.data).decode("ascii")},
}

_SCALAR_LOADERS: dict[str, Callable[[Envelope], object]] = {
    "datetime": _load_datetime,
    "date": lambda d: dt.date.fromisoformat(d["v"]),
    "time": _load_time,
    "timedelta": lambda d: dt.timedelta(days=d["v"][0], seconds=d["v"][1], microseconds=d["v"][2]),
    "bytes": lambda d: base64.b64decode(d["v"], validate=True),
    "bytearray": lambda d: bytearray(base64.b64decode(d["v"], validate=True)),
    "decimal": lambda d: Decimal(d["v"]),
    "uuid": lambda d: UUID(d["v"]),
    "float": lambda d: _FLOATS[d["v"]],
    "int": lambda d: int(d["v"], 16),
    "codec": lambda d: Encoded(d["v"]) if "v" in d else Encoded(base64.b64decode(d["b"], validate=True)),
}


def _set_order(item: JSONValue) -> str:
    """Sets are written in a canonical order: iteration order depends on the hash seed, which differs between
    processes, and a replay must write the same bytes."""
    return json.dumps(item, sort_keys=True)


# --- dumping -----------------------------------------------------------------------------------------------

_STORED = ("awsworld stores JSON's types, bytes, datetime, date, time, timedelta, Decimal, UUID, tuples, sets, "
           "enums, dataclasses, NamedTuples, pydantic models and exceptions: use one of those, or give its step, "
           "workflow or hook (create_hook) a codec= that turns it into text (docs/how-to/codecs.md)")
_BASES: tuple[type, ...] = (dict, list, tuple, set, frozenset, str, bytes, int, float)


def _what_to_change(value: object) -> str:
    """What a refused value's error says to do: a subclass of a builtin (a ``defaultdict``, a ``numpy.float64``)
    is refused because the type is matched exactly (it would come back as the builtin), so converting is the fix."""
    base = next((b for b in _BASES if isinstance(value, b)), None)
    if base is not None:
        return (f"a subclass of {base.__name__}, which would come back as a plain {base.__name__}: convert it, "
                f"{base.__name__}(value)")
    return _STORED



class _Dumper:
    """The full walk. It takes values as ``Any``: it dispatches on ``type(value)`` by identity (a subclass of
    list is not a list here), which a checker cannot narrow ``value`` through; ``dumps`` takes ``object``."""

    def __init__(self) -> None:
        self.active: set[int] = set()  # ids of containers on the current path: seeing one again is a cycle

    def child(self, value: Any, depth: int, key: object, how: str = "[]") -> JSONValue:
        try:
            return self.dump(value, depth)
        except _Failure as exc:
            exc.segments.append(_segment(key, how))
            raise

    def dump(self, value: Any, depth: int) -> JSONValue:
        t: type[object] = _type_of(value)
        if t is str or t is bool or value is None:
            return value
        if t is int:
            return value if value.bit_length() <= _BIG_INT_BITS else {TAG: "int", "v": hex(value)}
        if t is float:
            return value if math.isfinite(value) else {TAG: "float", "v": repr(value)}
        scalar = _SCALAR_DUMPERS.get(t)
        if scalar is not None:
            return scalar(value)
        if depth >= MAX_DEPTH:
            raise _Failure(f"nested deeper than {MAX_DEPTH} levels")
        ident = id(value)
        if ident in self.active:
            raise _Failure(f"cycle: this {t.__name__} contains itself")
        self.active.add(ident)
        try:
            return self.compound(value, t, depth + 1)
        finally:
            self.active.discard(ident)

    def compound(self, value: Any, t: type[object], depth: int) -> JSONValue:
        if t is list:
            return [self.child(item, depth, i) for i, item in enumerate(value)]
        if t is dict:
            return self.mapping(value, depth)
        if t is tuple:
            return {TAG: "tuple", "v": [self.child(item, depth, i) for i, item in enumerate(value)]}
        if t is set or t is frozenset:
            items = [self.child(item, depth, "<item>", how="") for item in value]
            return {TAG: t.__name__, "v": sorted(items, key=_set_order)}
        if isinstance(value, Enum):
            return {TAG: "enum", "c": _class_path(t), "v": self.child(value.value, depth, "value", how=".")}
        if isinstance(value, BaseModel):
            path = _class_path(t)
            try:
                data = value.model_dump(mode="json", by_alias=True, round_trip=True, warnings="error")
            except Exception as exc:
                raise _Failure(f"cannot serialize {t!r}: {exc}") from exc
            return {TAG: "model", "c": path, "v": self.dump(data, depth)}  # escapes any "$t" keys inside
        if isinstance(value, BaseException):
            return self.exception(value, t, depth)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            path = _class_path(t)
            fields: dict[str, JSONValue] = {}
            for field in dataclasses.fields(value):
                item = getattr(value, field.name, _MISSING)
                if item is not _MISSING:
                    fields[field.name] = self.child(item, depth, field.name, how=".")
            return {TAG: "dataclass", "c": path, "v": fields}
        if is_tuple(value) and hasattr(t, "_fields"):
            items = [self.child(item, depth, i) for i, item in enumerate(value)]
            return {TAG: "namedtuple", "c": _class_path(t), "v": items}
        if inspect.iscoroutine(value):  # the value of a step (or any async def) called without ``await``
            name = getattr(value, "__qualname__", None) or getattr(value, "__name__", "the call")
            raise _Failure(f"cannot serialize {t!r}: {name}(...) was called without `await`, so its value is the "
                           f"coroutine, not its result (write `await {name}(...)`)")
        raise _Failure(f"cannot serialize {t!r} ({_what_to_change(value)})")

    def mapping(self, value: dict[Any, Any], depth: int) -> JSONValue:
        if all(type(k) is str for k in value):
            out = {k: self.child(v, depth, k) for k, v in value.items()}
            return {TAG: "dict", "v": out} if TAG in out else out
        pairs: list[JSONValue] = []
        for k, v in value.items():
            pairs.append([self.child(k, depth, "<key>", how=""), self.child(v, depth, k)])
        return {TAG: "map", "v": pairs}

    def exception(self, value: BaseException, t: type[object], depth: int) -> dict[str, JSONValue]:
        """Exceptions record type, message and args. Args are best effort: a failure must stay reportable even
        when it carries something unserializable, so such args are dropped and the message kept."""
        if isinstance(value, RestoredError):
            type_name, message = value.type_name, value.message
        else:
            type_name = f"{t.__module__}:{t.__qualname__}"
            try:
                message = str(value)
            except Exception:
                message = f"<unprintable {t.__qualname__}>"
        out: dict[str, JSONValue] = {TAG: "error", "c": type_name, "v": message}
        with contextlib.suppress(_Failure):
            out["args"] = self.child(list(value.args), depth, "args", how=".")
        return out


_INT_BOUND = 1 << _BIG_INT_BITS  # abs(n) < this  <=>  n.bit_length() <= _BIG_INT_BITS


class _NotPlain(Exception):
    """Internal: the value is not plain JSON data; ``_Dumper`` decides it."""


_NOT_PLAIN = _NotPlain()


def _plain(value: Any, depth: int) -> JSONValue:
    """What ``_Dumper().dump(value, depth)`` returns, for a container of plain JSON values only (exactly str,
    bool, None, an int of at most ``_BIG_INT_BITS`` bits, a finite float, list, dict with str keys and no
    ``"$t"`` key, within ``MAX_DEPTH``): the same copies, with far fewer calls (a workflow serializes every step
    call's arguments this way, under the determinism guard's profile hook). Raises ``_NotPlain`` for anything
    else, having called no code of the value's."""
    if depth >= MAX_DEPTH:
        raise _NOT_PLAIN
    t: type[object] = _type_of(value)
    if t is dict:
        out: dict[str, JSONValue] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NOT_PLAIN
            ti: type[object] = _type_of(item)
            if (ti is str or ti is bool or item is None or (ti is int and -_INT_BOUND < item < _INT_BOUND)
                    or (ti is float and item - item == 0.0)):
                out[key] = item
            elif ti is dict or ti is list:
                # (an empty one, such as a step call's empty kwargs, is copied here: one call fewer for the hook)
                out[key] = _plain(item, depth + 1) if item or depth + 1 >= MAX_DEPTH else {} if ti is dict else []
            else:
                raise _NOT_PLAIN
        if TAG in out:
            raise _NOT_PLAIN
        return out
    if t is list:
        items: list[JSONValue] = []
        for item in value:
            ti: type[object] = _type_of(item)
            if (ti is str or ti is bool or item is None or (ti is int and -_INT_BOUND < item < _INT_BOUND)
                    or (ti is float and item - item == 0.0)):
                items.append(item)
            elif ti is dict or ti is list:
                items.append(_plain(item, depth + 1) if item or depth + 1 >= MAX_DEPTH else {} if ti is dict else [])
            else:
                raise _NOT_PLAIN
        return items
    raise _NOT_PLAIN


# --- loading -----------------------------------------------------------------------------------------------


class _Loader:
    """The walk back. Its values are ``Any``: they are whatever the log says (a dataclass, a set, a user's
    class), built from data it narrows by ``type(data)`` identity as ``_Dumper`` does; ``loads`` returns
    ``object``."""

    def child(self, data: Any, key: object, how: str = "[]") -> Any:
        try:
            return self.load(data)
        except _Failure as exc:
            exc.segments.append(_segment(key, how))
            raise

    def load(self, data: Any) -> Any:
        t: type[object] = _type_of(data)
        if t is str or t is int or t is float or t is bool or data is None:
            return data
        if t is list:
            return [self.child(item, i) for i, item in enumerate(data)]
        if t is dict:
            if TAG not in data:
                return {k: self.child(v, k) for k, v in data.items()}
            return self.envelope(data)
        raise _Failure(f"not JSON data: {t!r}")

    def envelope(self, d: Envelope) -> Any:
        tag = d[TAG]
        try:
            scalar = _SCALAR_LOADERS.get(tag)
            if scalar is not None:
                return scalar(d)
            v = d["v"]
            if tag in ("tuple", "set", "frozenset"):
                items = [self.child(item, i) for i, item in enumerate(v)]
                return tuple(items) if tag == "tuple" else set(items) if tag == "set" else frozenset(items)
            if tag == "dict":
                return {k: self.child(item, k) for k, item in v.items()}
            if tag == "map":
                pairs = [(self.child(k, "<key>", how=""), self.child(item, i)) for i, (k, item) in enumerate(v)]
                return dict(pairs)
            if tag == "enum":
                cls = _load_class(d.get("c"), tag, lambda c: issubclass(c, Enum))
                return cls(self.child(v, "value", how="."))
            if tag == "model":
                cls = _load_class(d.get("c"), tag, lambda c: issubclass(c, BaseModel))
                return cls.model_validate(self.load(v))
            if tag == "dataclass":
                return self.dataclass(d, v)
            if tag == "namedtuple":
                cls = _load_class(d.get("c"), tag, lambda c: hasattr(c, "_fields") and issubclass(c, tuple))
                return cls._make(self.child(item, i) for i, item in enumerate(v))
            if tag == "error":
                return self.exception(d)
        except _Failure:
            raise
        except Exception as exc:  # malformed payloads, pydantic validation, enum lookups
            raise _Failure(f"cannot load {tag!r} envelope: {type(exc).__name__}: {exc}") from exc
        raise _Failure(f"unknown envelope tag {tag!r}")

    def dataclass(self, d: Envelope, v: dict[str, Any]) -> Any:
        """Rebuilt like pickle does, without calling ``__init__``: the fields are already the stored values,
        and running ``__post_init__`` again could transform them twice. A field added to the class since the
        value was written takes its default."""
        cls = _load_class(d.get("c"), "dataclass", dataclasses.is_dataclass)
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = set(v) - set(fields)
        if unknown:
            raise _Failure(f"{d['c']!r} has no field(s) {sorted(unknown)}")
        obj = cls.__new__(cls)
        for name, field in fields.items():
            if name in v:
                item = self.child(v[name], name, how=".")
            elif field.default is not dataclasses.MISSING:
                item = field.default
            elif field.default_factory is not dataclasses.MISSING:
                item = field.default_factory()
            else:
                raise _Failure(f"{d['c']!r}: stored value lacks required field {name!r}")
            object.__setattr__(obj, name, item)  # works for frozen and slotted dataclasses too
        return obj

    def exception(self, d: Envelope) -> BaseException:
        """Builtin exception types are rebuilt; any other class is never imported (its constructor may need
        anything) and comes back as a ``RestoredError`` keeping the original type name."""
        type_name, message = d["c"], d["v"]
        args = tuple(self.child(d["args"], "args", how=".")) if "args" in d else None
        module, _, qualname = type_name.partition(":")
        if module == "builtins" and qualname.isidentifier():
            cls = getattr(builtins, qualname, None)
            if isinstance(cls, type) and issubclass(cls, BaseException):
                try:
                    return cls(*args) if args is not None else cls(message)
                except Exception:
                    pass
        return RestoredError(type_name, message, *(args if args is not None else (message,)))


# --- API ---------------------------------------------------------------------------------------------------


def dumps(value: object) -> JSONValue:
    """A JSON-compatible structure (dict, list, str, int, float, bool, None) that ``loads`` turns back into an
    equal value of the same types. Raises ``SerializationError`` for anything else, cycles, or nesting deeper
    than ``MAX_DEPTH``."""
    t = type(value)
    if t is dict or t is list:
        try:
            return _plain(value, 0)
        except (_NotPlain, RecursionError):
            pass  # decided (copied, wrapped or refused) by the full walk
    try:
        return _Dumper().dump(value, 0)
    except _Failure as exc:
        raise exc.error() from exc.__cause__
    except RecursionError:
        raise SerializationError("value", "nested too deeply to serialize") from None


def loads(data: object) -> object:
    """The value ``dumps`` was given. Classes named in the data are imported only as ``module:QualName`` and
    only when they are of the expected kind; a missing one raises ``SerializationError``."""
    try:
        return _Loader().load(data)
    except _Failure as exc:
        raise exc.error() from exc.__cause__
    except RecursionError:
        raise SerializationError("value", "nested too deeply to deserialize") from None


def to_json_text(value: object) -> str:
    """``dumps`` as compact JSON text; nan and infinities travel in envelopes, so strict JSON is enough."""
    data = dumps(value)
    try:
        return json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (ValueError, RecursionError) as exc:
        raise SerializationError("value", f"cannot write JSON text: {exc}") from None


def from_json_text(text: str) -> object:
    """The value ``to_json_text`` was given."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise SerializationError("value", f"not JSON text: {exc}") from None
    return loads(data)


def loads_call(data: object) -> Call:
    """The arguments a serialized ``{"args": [...], "kwargs": {...}}`` holds (``None``: no arguments). Anything
    else raises ``SerializationError``, as a value that does not load does."""
    return as_call(loads(data) if data is not None else None)


# --- a value's JSON in parts -------------------------------------------------------------------------------


class Items(NamedTuple):
    """A part of a value's JSON: the items of ``data`` (a list or a dict, as ``dumps`` makes it), without its
    brackets."""

    data: JSONValue


class Whole(NamedTuple):
    """A part of a value's JSON: the JSON of ``data``, which ``dumps`` made (a text: as it is, never copied)."""

    data: JSONValue


class Base64(NamedTuple):
    """A part of a value's JSON: the base64 text of ``length`` bytes (``bytes`` in its envelope), not made."""

    length: int


JSONPart: TypeAlias = str | Items | Whole | Base64
"""What ``json_parts`` yields; a ``str`` is JSON text itself (a bracket, a comma, a key, an envelope's head)."""

_BATCH_ITEMS = 512
"""How many small items of a list or a dict ``json_parts`` gives as one ``Items``: one ``dumps`` and one JSON
text for them, each of them at most ``_SMALL_TEXT`` characters."""
_SMALL_NODES = 32
_SMALL_TEXT = 4096
"""An item is small (dumped with its neighbours, not taken apart) when it has at most ``_SMALL_NODES`` nodes and
``_SMALL_TEXT`` characters of strings, bytes and keys."""


def _small(value: Any) -> bool:
    """Whether ``value`` is small (``_SMALL_NODES``, ``_SMALL_TEXT``): a look at a few nodes at most."""
    pending: list[Any] = [value]
    nodes = 0
    text = 0
    while pending:
        node = pending.pop()
        t: type[object] = _type_of(node)
        nodes += 1
        if t is str or t is bytes or t is bytearray:
            text += len(node)
        elif t is dict:
            text += sum(len(key) for key in node if type(key) is str)
            pending.extend(node.values())
        elif t is list or t is tuple:
            pending.extend(node)
        if nodes > _SMALL_NODES or text > _SMALL_TEXT:
            return False
    return True


def _dumped(value: Any, depth: int) -> JSONValue:
    """``dumps(value)`` for a value ``depth`` levels inside the one ``json_parts`` takes apart (its nesting limit
    counts from there)."""
    if depth == 0:
        return dumps(value)
    try:
        try:
            return _plain(value, depth)
        except (_NotPlain, RecursionError):
            return _Dumper().dump(value, depth)
    except _Failure as exc:
        raise exc.error() from exc.__cause__
    except RecursionError:
        raise SerializationError("value", "nested too deeply to serialize") from None


def json_parts(value: object, *, data: bool = False) -> Iterator[JSONPart]:
    """``to_json_text(value)`` in parts, each made only when it is asked for and none of them large unless a
    single item is: the JSON of the parts, one after the other (a ``str`` as it is, an ``Items`` without its
    brackets, a ``Base64``'s text of its length), is the value's JSON. A list, a tuple or a dict of str keys is
    taken apart (its small items dumped ``_BATCH_ITEMS`` at a time), a ``str`` is given as it is, ``bytes`` as
    the length of its base64; anything else is dumped whole. What sizes a value before it is copied
    (``world.limits.dumped_size_over``) reads it so: the value's JSON is never held. Raises what ``dumps``
    raises, as it reaches the part that raises it.

    ``data``: ``value`` is JSON data already (what ``dumps`` made; a queue payload), and its parts are of its own
    JSON as JSON's encoder writes it: nothing is dumped, a ``"$t"`` key is no envelope, a tuple is a list; what
    is not JSON (``bytes``, a cycle) is a ``Whole`` for the encoder to refuse."""
    return _Parts(data).parts(value, 0)


class _Parts:
    """``json_parts``' walk: the containers it is inside (a cycle is dumped whole, for ``dumps`` to refuse)."""

    def __init__(self, data: bool) -> None:
        self.active: set[int] = set()
        self.data = data

    def whole(self, value: Any, depth: int) -> JSONValue:
        return value if self.data else _dumped(value, depth)

    def parts(self, value: Any, depth: int) -> Iterator[JSONPart]:
        t: type[object] = _type_of(value)
        if t is str:
            yield Whole(value)
            return
        if (t is bytes or t is bytearray) and not self.data:
            yield f'{{"{TAG}":"{t.__name__}","v":"'
            yield Base64(len(value))
            yield '"}'
            return
        taken_apart = (t is list or t is tuple or (t is dict and all(type(key) is str for key in value)))
        if not taken_apart or depth >= MAX_DEPTH or id(value) in self.active:
            yield Whole(self.whole(value, depth))
            return
        self.active.add(id(value))
        try:
            envelope = None if self.data else "dict" if t is dict and TAG in value else "tuple" if t is tuple \
                else None
            if envelope is not None:
                yield f'{{"{TAG}":"{envelope}","v":'
            yield from self.mapping(value, depth) if t is dict else self.sequence(value, depth)
            if envelope is not None:
                yield "}"
        finally:
            self.active.discard(id(value))

    def sequence(self, value: list[Any] | tuple[Any, ...], depth: int) -> Iterator[JSONPart]:
        """A list's JSON (a tuple's in its envelope) at ``depth``."""
        return self.entries(((None, item) for item in value), depth, "[]")

    def mapping(self, value: dict[str, Any], depth: int) -> Iterator[JSONPart]:
        """A dict's JSON at ``depth`` (its keys are str)."""
        return self.entries(iter(value.items()), depth, "{}")

    def entries(self, entries: Iterator[tuple[str | None, Any]], depth: int, brackets: str) -> Iterator[JSONPart]:
        """The JSON of a list's items (``key`` None) or a dict's, in ``brackets``: runs of small items as
        ``Items``, any other item taken apart; a dict's key ``"$t"`` alone (a run holding it would be escaped as
        a dict of its own)."""
        yield brackets[0]
        comma = ""
        batch: list[tuple[str | None, Any]] = []
        for key, item in entries:
            small = key != TAG and _small(item)
            if small:
                batch.append((key, item))
                if len(batch) < _BATCH_ITEMS:
                    continue
            if batch:
                yield comma
                yield Items(self.whole(self.run_of(batch, brackets), depth))
                comma, batch = ",", []
            if small:
                continue
            yield comma if key is None else comma + json.dumps(key, ensure_ascii=False) + ":"
            yield from self.parts(item, depth + 1)
            comma = ","
        if batch:
            yield comma
            yield Items(self.whole(self.run_of(batch, brackets), depth))
        yield brackets[1]

    @staticmethod
    def run_of(batch: list[tuple[str | None, Any]], brackets: str) -> list[Any] | dict[str, Any]:
        """A run of small items as the list or the dict they are items of."""
        if brackets == "[]":
            return [item for _, item in batch]
        return {str(key): item for key, item in batch}
