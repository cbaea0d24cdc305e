"""The JSON the log holds, typed: ``JSONValue``, the checks that narrow an ``object`` read from it (``is_dict``,
``is_sequence``, ``is_tuple``: a checker narrowing by ``isinstance`` alone sees items of unknown type), a call's
stored arguments (``Call``, ``as_call``), and ``SerializationError``, which every reader raises for data that is
not what it should be. Apart from ``serde`` so its readers (the engine, the worker, schedules) need not import the
whole value codec, and so ``serde`` stays one job: values to JSON and back."""

from __future__ import annotations

from typing import NamedTuple, TypeAlias, TypeGuard

__all__ = ["Call", "JSONValue", "SerializationError", "as_call", "is_dict", "is_sequence", "is_tuple"]

JSONValue: TypeAlias = "str | int | float | bool | list[JSONValue] | dict[str, JSONValue] | None"
"""What ``dumps`` returns and ``loads`` reads: plain JSON data (json.loads of the log's text)."""


class SerializationError(TypeError):
    """A value cannot be serialized or deserialized. ``path`` locates it inside the value (``value['a'][0]``)
    and ``reason`` says what is wrong; the runtime maps it to a FatalError (retrying would fail the same way)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def is_dict(value: object) -> TypeGuard[dict[object, object]]:
    """``isinstance(value, dict)``, saying what its keys and items are: objects (a checker narrowing an ``object``
    by isinstance sees a dict of unknown items)."""
    return isinstance(value, dict)


def is_tuple(value: object) -> TypeGuard[tuple[object, ...]]:
    """``isinstance(value, tuple)``, its items objects (as ``is_dict``)."""
    return isinstance(value, tuple)


def is_sequence(value: object) -> TypeGuard[list[object] | tuple[object, ...]]:
    """``isinstance(value, list | tuple)``, its items objects (as ``is_dict``)."""
    return isinstance(value, list | tuple)


class Call(NamedTuple):
    """A call's arguments as values: what ``{"args": [...], "kwargs": {...}}`` (a step's, a workflow's or a
    schedule's stored input) loads to. A named tuple, not a frozen dataclass: as immutable, and built with one
    call where a frozen dataclass's ``__init__`` calls ``object.__setattr__`` per field (every step loads one)."""

    args: list[object]
    kwargs: dict[str, object]


def as_call(value: object) -> Call:
    """``value`` (already loaded) as a call's arguments: a dict with a list ``args`` and a dict ``kwargs`` with
    str keys, either of which may be missing; ``None``: no arguments."""
    if value is None:
        return Call([], {})
    if not is_dict(value):
        raise SerializationError("value", f"not a call's arguments: {type(value).__name__}")
    args, kwargs = value.get("args", []), value.get("kwargs", {})
    if not is_sequence(args) or not is_dict(kwargs):
        raise SerializationError("value", "not a call's arguments: 'args' must be a list and 'kwargs' a dict")
    named: dict[str, object] = {}
    for key, item in kwargs.items():
        if not isinstance(key, str):
            raise SerializationError("value['kwargs']", f"a keyword argument's name must be str, not {key!r}")
        named[key] = item
    return Call(list(args), named)
