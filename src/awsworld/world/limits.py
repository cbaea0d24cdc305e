"""The largest user value a World takes, the same on every World: ``AWSWORLD_MAX_VALUE_BYTES``.

A value (a run's input or output, a step's input or result, hook metadata or a payload, a queue payload, a
stream chunk with its 4-byte frame) is measured as the UTF-8 bytes of its compact JSON (a chunk: its bytes).
The AWS World keeps a large value in S3, so its bound is a choice, not DynamoDB's 400 KB; the in-memory World
applies the same bound, so a value a test passes is one the deployed stack takes, and a value it refuses is
refused there too, with the same ``PayloadTooLargeError``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, cast

from ..durable import serde
from ..durable.json_data import SerializationError
from ..settings import DEFAULT_MAX_VALUE_BYTES as DEFAULT_MAX_VALUE_BYTES  # re-exported
from ..settings import SETTINGS, Settings
from .errors import InvalidInputError, PayloadTooLargeError

MAX_VALUE_BYTES_ENV = Settings.max_value_bytes.env


def max_value_bytes(environ: Mapping[str, str] | None = None) -> int:
    """The bound this process is configured with (``AWSWORLD_MAX_VALUE_BYTES``, default 64 MiB; ``ValueError``
    for a value that is not a positive number of bytes)."""
    return (SETTINGS if environ is None else Settings(environ)).max_value_bytes


# json.dumps with any option set builds a new encoder per call: this one is built once (same output, same errors).
_STRICT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def value_json(value: Any, field: str) -> str:
    """``value``'s compact JSON, or the 400 naming ``field`` when it is not a JSON value (NaN, an object).

    A value that is exactly an int, a finite float, a bool or None is written here as JSON's encoder writes it
    (an int's and a float's ``repr``, the C encoder's own), without the encoder: ``JSONEncoder.encode`` sets up
    an encoder on each call, 10,000 instructions for ``5``, where this costs a tenth of that; a step's result is
    often a number (``bench/testing.py --instructions``). Anything else (a str, a container, a subclass such as an
    ``IntEnum``, NaN, an int too long for ``repr``) takes the encoder, and its errors."""
    kind = cast("type[object]", type(value))
    try:
        if kind is int:
            return int.__repr__(value)
        if kind is bool:
            return "true" if value else "false"
        if value is None:
            return "null"
        if kind is float and math.isfinite(value):
            return float.__repr__(value)
        return _STRICT.encode(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInputError(f"{field} is not JSON-serializable: {exc}", field=field) from None


def size_text(message: str | None) -> str:
    """A size refusal's message (``encode_value``) without the wire field it starts with: ``eventData.input is
    300025 bytes of JSON; the largest ...`` -> ``300025 bytes of JSON; the largest ...``. For an error that names
    the value in its user's words (the arguments of a workflow, the input of a step) instead of the field."""
    return re.sub(r"^[A-Za-z_.\[\]0-9]+ is (?=\d+ bytes)", "", message or "")


def too_large_text(what: str, refusal: str | None, *, plural: bool = False) -> str:
    """The one wording of a value the World refused as too large, named in its writer's words (``what``: "the
    arguments of workflow 'x'", "the result of step 'x' (step_3)") with the refusal's size against the bound
    (``size_text``). Every error of a refused value is worded here: a workflow's arguments or return value, a
    step's input, result or error, a hook's payload or metadata, a child's input."""
    return f"{what} {'are' if plural else 'is'} too large to record: {size_text(refusal)}"


_SIZE_SLICE = 1 << 20
"""How much of a non-ASCII text ``utf8_size`` encodes at a time: the copy it makes to count."""


def utf8_size(text: str, errors: str = "strict") -> int:
    """The bytes of ``text`` in UTF-8 (``str.encode``'s ``errors``: a lone surrogate raises
    ``UnicodeEncodeError`` unless ``"surrogatepass"``), without a copy of its size: an ASCII text's length is
    its size (known to CPython without a scan), any other is encoded ``_SIZE_SLICE`` characters at a time and
    only counted. So a value over the bound is refused at the cost of its JSON text, not of its bytes too."""
    if text.isascii():
        return len(text)
    return sum(len(text[at:at + _SIZE_SLICE].encode("utf-8", errors)) for at in range(0, len(text), _SIZE_SLICE))



def text_size_over(text: str, max_bytes: int, errors: str = "strict") -> int | None:
    """``text``'s UTF-8 size when it is over ``max_bytes``, else None, without its bytes (``utf8_size``): a text of
    at most a quarter of the bound in characters cannot be over it (a character is at most 4 bytes) and is not
    measured. The one check of a text over a bound before it is encoded: a stream chunk's, a queue payload's."""
    if len(text) <= max_bytes // 4:
        return None
    size = utf8_size(text, errors)
    return size if size > max_bytes else None

_ESCAPED = re.compile(r'[\x00-\x1f\\"]')
"""The characters compact JSON (``ensure_ascii=False``) writes escaped: those of ``json.encoder.ESCAPE``."""


def _string_size(text: str) -> int:
    """The UTF-8 bytes of ``text`` as a JSON string, without its JSON: the usual text needs no escape (its size
    and two quotes); one that does is escaped ``_SIZE_SLICE`` characters at a time (JSON escapes character by
    character, so the slices' sizes add up). ``UnicodeEncodeError`` for a lone surrogate."""
    if _ESCAPED.search(text) is None:
        return utf8_size(text) + 2
    return 2 + sum(utf8_size(_STRICT.encode(text[at:at + _SIZE_SLICE])) - 2
                   for at in range(0, len(text), _SIZE_SLICE))


_type_of: Callable[[object], type[object]] = type
"""``type``, for ``_rough_size``'s values (``Any``: a checker sees the class of one as unknown), without
``cast``'s call."""
_SAMPLES = 3
"""How many items of a container ``_rough_size`` looks at: its first, middle and last."""
_ROUGH_NODES = 32
"""How many containers ``_rough_size`` looks into, at most: a value's cost when it is small."""


def _rough_size(value: Any, budget: list[int]) -> int:
    """A guess at the size of ``value``'s JSON from a few of its nodes (``_ROUGH_NODES`` containers at most, each
    as long as its largest of ``_SAMPLES`` items: first, middle, last): what tells a value that may be over a
    bound from one that is not without a pass over it. Never relied on for a refusal (``_size_over`` measures);
    a value it misjudges as small (a dataclass, say, counts as a few bytes) costs what it did before, its copy
    and its JSON text before the World refuses it. A number, the usual step result, is a type check."""
    kind = _type_of(value)
    if kind is str or kind is bytes or kind is bytearray:
        return len(value) * 4 // 3 if kind is not str else len(value)
    if kind is not list and kind is not tuple and kind is not dict:
        return 8
    length = len(value)
    if length == 0 or budget[0] <= 0:
        return 2 * length
    budget[0] -= 1
    if kind is dict:
        keys = value if length <= _SAMPLES else (next(iter(value)), next(reversed(value)))
        items = [value[key] for key in keys]
        largest = max(len(key) if type(key) is str else 8 for key in keys) + 3
    else:
        items = value if length <= _SAMPLES else (value[0], value[length // 2], value[-1])
        largest = 0
    most = 0
    for item in items:
        part = _type_of(item)
        size = len(item) if part is str else (
            _rough_size(item, budget) if part is list or part is dict or part is tuple or part is bytes
            or part is bytearray else 8)
        most = size if size > most else most
    return length * (largest + most + 1)


def _part_size(part: serde.JSONPart) -> int:
    """The UTF-8 bytes of one part of a value's JSON (``serde.json_parts``): a text's without its JSON copy
    (``_string_size``), a base64 text's from its length, anything else its compact JSON's."""
    if isinstance(part, str):
        return utf8_size(part)
    if isinstance(part, serde.Base64):
        return 4 * ((part.length + 2) // 3)
    if isinstance(part, serde.Whole) and type(part.data) is str:
        return _string_size(part.data)
    size = utf8_size(_STRICT.encode(part.data))
    return size - 2 if isinstance(part, serde.Items) else size


def json_size_over(value: Any, max_bytes: int) -> int | None:
    """The size of JSON data's compact JSON (a value as a World is given it, a queue payload) when it is over
    ``max_bytes``, else None, found without making that JSON: measured a part at a time (``serde.json_parts``),
    a text without a copy (``_string_size``), so a value over the bound costs itself and a part, where JSON's
    encoder would hold its text and the chunks it joins it from. A value that looks small (``_rough_size``)
    costs a look at a few of its nodes; None too for anything ``value_json`` refuses or must decide (a lone
    surrogate): it does."""
    return _size_over(value, max_bytes, data=True)


def dumped_size_over(value: object, max_bytes: int) -> int | None:
    """``json_size_over`` for a user's value, before ``serde.dumps`` copies it: the size of the JSON it is stored
    as (its envelopes, bytes as base64, its ``"$t"`` keys escaped). A records list's copy was 3.4 times its JSON,
    the JSON once more: a value of many parts over the bound cost 8-9 times its size before its refusal
    (``bench/oversized_values.py``), an out-of-memory kill on a Lambda of 1 GB where the typed error was due.
    None for a value ``dumps`` refuses: its ``dumps`` and the World decide, as before."""
    return _size_over(value, max_bytes, data=False)


def _size_over(value: object, max_bytes: int, *, data: bool) -> int | None:
    """The size of ``value``'s JSON (``data``: as JSON data; else as ``serde.dumps`` stores it) when over
    ``max_bytes``, measured a part at a time when ``_rough_size`` says it may be over a quarter of the bound."""
    if _rough_size(value, [_ROUGH_NODES]) <= max_bytes // 4:
        return None
    return _measured_over(value, max_bytes, data=data)


def _measured_over(value: object, max_bytes: int, *, data: bool) -> int | None:
    """``_size_over`` without its guess: ``value``'s JSON measured a part at a time."""
    try:
        size = sum(_part_size(part) for part in serde.json_parts(value, data=data))
    except (SerializationError, TypeError, ValueError, RecursionError):  # (UnicodeEncodeError is a ValueError)
        return None
    return size if size > max_bytes else None


def oversized(value: object, field: str, max_bytes: int | None) -> PayloadTooLargeError | None:
    """The ``PayloadTooLargeError`` naming ``field`` that the World would raise (``encode_value``) when the JSON
    ``value`` is stored as is over ``max_bytes`` (None: no bound known here, ``World.max_value_bytes``), else
    None: asked with a user's value before it is dumped (``dumped_size_over``), where the World asks only once
    it holds the dumped copy. Returned, not raised, for the writer to raise where its refusals are named."""
    kind = type(value)
    if max_bytes is None or kind is int or kind is float or kind is bool or value is None:
        return None  # (a step's result is often a number: ``bench/testing.py --instructions``)
    if (size := dumped_size_over(value, max_bytes)) is not None:
        return _too_large(field, size, max_bytes)
    return None


NUMBERS: frozenset[type[object]] = frozenset({int, float, bool, type(None)})
"""The classes of a value whose JSON is a few bytes (None's too): an argument of one is never measured."""


def _may_be_over(args: tuple[object, ...], kwargs: Mapping[str, object], max_bytes: int) -> bool:
    """Whether a call's arguments may be over a quarter of ``max_bytes`` (``_rough_size``): a number costs a type
    check, a text a ``len``, a container a look at a few of its nodes."""
    budget, rough, quarter = [_ROUGH_NODES], 0, max_bytes // 4
    values: tuple[Any, ...] = (*args, *kwargs.values())
    for value in values:
        kind = _type_of(value)
        if kind not in NUMBERS:
            rough += len(value) if kind is str else _rough_size(value, budget)
            if rough > quarter:
                return True
    return False


def oversized_call(args: tuple[object, ...], kwargs: Mapping[str, object], field: str,
                   max_bytes: int | None) -> PayloadTooLargeError | None:
    """``oversized`` for a call's arguments as ``codecs.store_call`` stores them without a codec
    (``{"args": [...], "kwargs": {...}}``): a step's input, asked by the workflow at a step call before the
    arguments are dumped (``_engine/execution.py``, ``declare_step``, which asks only when an argument is not one
    of ``NUMBERS``: a call of numbers costs a type check an argument). One of texts costs a ``len`` each
    (``_may_be_over``); only one that may be over a quarter of the bound is measured, its arguments' container
    made then (``bench/testing.py --instructions``)."""
    if max_bytes is None or not _may_be_over(args, kwargs, max_bytes):
        return None
    size = _measured_over({"args": list(args), "kwargs": dict(kwargs)}, max_bytes, data=False)
    return None if size is None else _too_large(field, size, max_bytes)


_ENVELOPED = len('{"$t":"dict","v":}')
"""What ``serde.dumps`` adds around a dict of JSON data that has a ``"$t"`` key (an envelope, dumped again)."""


def oversized_nested_call(args: tuple[object, ...], kwargs: Mapping[str, object], outer_args: tuple[object, ...],
                          outer_kwargs: Mapping[str, object], field: str,
                          max_bytes: int | None) -> PayloadTooLargeError | None:
    """``oversized_call`` for a call's arguments stored dumped among another call's (``outer_args``, where they
    stand as None): a child workflow's, inside its start step's input (``_engine/children.py``), dumped twice.
    Measured without either copy: their JSON a part at a time, and ``_ENVELOPED`` for each dict the second dump
    wraps, one with a ``"$t"`` key (every envelope the first made, and a user's dict with that key)."""
    if max_bytes is None or not _may_be_over(args, kwargs, max_bytes):
        return None
    try:
        outer = utf8_size(value_json(serde.dumps({"args": list(outer_args), "kwargs": dict(outer_kwargs)}), field))
        size = outer - len("null")
        for part in serde.json_parts({"args": list(args), "kwargs": dict(kwargs)}):
            size += _part_size(part) + _ENVELOPED * _tagged(part)
    except (SerializationError, InvalidInputError, TypeError, ValueError, RecursionError):
        return None  # (what ``dumps`` refuses: its call decides, as before)
    return _too_large(field, size, max_bytes) if size > max_bytes else None


def _tagged(part: serde.JSONPart) -> int:
    """How many dicts with a ``"$t"`` key a part of a value's JSON (``serde.json_parts``) holds: an envelope's head
    or the key itself (its text), or the dicts of the JSON data it is."""
    if isinstance(part, str):
        return 1 if part.startswith(f'{{"{serde.TAG}":') or part in (f'"{serde.TAG}":', f',"{serde.TAG}":') else 0
    if isinstance(part, serde.Base64):
        return 0
    count, pending = 0, cast("list[Any]", [part.data])  # (JSON data: walked by exact type, as ``_rough_size``)
    while pending:
        node = pending.pop()
        kind = _type_of(node)
        if kind is dict:
            count += serde.TAG in node
            pending.extend(node.values())
        elif kind is list:
            pending.extend(node)
    return count


def _too_large(field: str, size: int, max_bytes: int) -> PayloadTooLargeError:
    return PayloadTooLargeError(f"{field} is {size} bytes of JSON; the largest value awsworld stores is "
                                f"{max_bytes} bytes ({MAX_VALUE_BYTES_ENV})", field=field)


def _escaped_json(value: Any) -> str:
    """``value``'s compact JSON with every non-ASCII character escaped: for a text with a lone surrogate, which
    UTF-8 cannot hold. Each of its characters is one byte."""
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)


def looks_first(event_type: str) -> bool:
    """Whether a value of ``event_type`` is looked at (``json_size_over``) before its JSON is made
    (``encode_value``'s ``look``): every value but a step's input, which every step call carries: a look
    costs about 0.5 us a value, 0.6% of a serial step's instructions in ``bench/testing.py --instructions``.
    A step's input over the bound is refused by the workflow before it is dumped (``oversized_call``), or, where
    the World's bound is not known there (``HttpWorld``), here, at the cost of its JSON text."""
    return event_type != "step_created"


def encode_value(value: Any, field: str, max_bytes: int | None, *, look: bool = True) -> tuple[str, bytes]:
    """A user value as every World stores it: its JSON text and UTF-8 bytes (a lone surrogate, which is not
    UTF-8, escaped as JSON's \\uXXXX so it still round-trips exactly), at most ``max_bytes`` of them (None: no
    bound) or ``PayloadTooLargeError``.

    A value over the bound costs its JSON text and no other copy before the error: a text that may be over
    (more than a quarter of the bound in characters, as a character is at most 4 bytes of UTF-8) is sized
    before its bytes are made (``utf8_size``), and every text is let go before the raise, since a traceback
    keeps this frame alive while its caller handles the error (a step's refused result is recorded as the
    step's failure from within the handler: ``_worker/step_runner.py``). Before that, with ``look``, a value
    that may be over the bound is sized a part at a time without its JSON (``json_size_over``): it costs itself
    and a part. A value that looks small costs what it always did, one encode and one ``len``, and that look.
    ``bench/oversized_values.py`` measures it. (A user's value is asked so before it is dumped, by its writer:
    ``oversized``.)"""
    if look and max_bytes is not None and (size := json_size_over(value, max_bytes)) is not None:
        raise _too_large(field, size, max_bytes)
    text = value_json(value, field)
    if max_bytes is not None and len(text) > max_bytes // 4:
        try:
            size = utf8_size(text)
        except UnicodeEncodeError:
            text = _escaped_json(value)
            size = len(text)
        if size > max_bytes:
            del text
            raise _too_large(field, size, max_bytes)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        text = _escaped_json(value)
        data = text.encode("ascii")
    if max_bytes is not None and len(data) > max_bytes:  # a short text escaped: 6 or 12 bytes for a character
        size = len(data)
        del text, data
        raise _too_large(field, size, max_bytes)
    return text, data
