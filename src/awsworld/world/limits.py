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
from collections.abc import Mapping
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

_FEW_NODES = 16
"""How many nodes (containers, strings, scalars; a dict's keys aside) a value may have for ``json_size_over`` to
size it before its JSON is made: a value too large with so few holds a large string (a text, a file's bytes in
base64), alone or in an envelope."""
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


def _holds_a_long_string(value: object, least: int) -> bool:
    """Whether a string of more than ``least`` characters is among ``value``'s first ``_FEW_NODES`` nodes: what
    ``json_size_over`` asks first, as it is cheap (for ``{"args": [1], "kwargs": {}}`` some 450 ns, a sixth of
    what its ``encode_value`` costs); sizing the nodes costs as much as their JSON."""
    if type(value) is str:
        return len(value) > least
    if type(value) is not dict and type(value) is not list:  # (a step's result is often a number)
        return False
    pending: list[object] = [value]
    seen = 0
    while pending:
        node = pending.pop()
        if type(node) is str:
            if len(node) > least:
                return True
        elif type(node) is dict or type(node) is list:
            container = cast("dict[object, object] | list[object]", node)
            seen += len(container)
            if seen > _FEW_NODES:
                return False
            pending.extend(container.values() if isinstance(container, dict) else container)
    return False


def json_size_over(value: Any, max_bytes: int) -> int | None:
    """The size of ``value``'s compact JSON when it is over ``max_bytes`` and has at most ``_FEW_NODES`` nodes,
    found without making the JSON: a container holding a large string (a workflow's arguments, ``{"args":
    [text], ...}``; ``bytes`` in its envelope) is refused at the cost of the value alone, where JSON's encoder
    would hold the string's escaped copy and the text it joins it into. None otherwise (more nodes, within the
    bound, or anything ``value_json`` refuses or must decide: it does). A value within the bound costs only a
    look for a long string first (``_holds_a_long_string``): the strings of a value of so few nodes (and as many
    keys) are over the bound together only if one of them is longer than a ``2 * _FEW_NODES``-th of it."""
    if not _holds_a_long_string(value, max_bytes // (2 * _FEW_NODES)):
        return None
    nodes: list[object] = [value]
    strings: list[str] = []
    scalars: list[object] = []
    separators = 0
    at = 0
    while at < len(nodes):
        node = nodes[at]
        at += 1
        if type(node) is str:
            strings.append(node)
        elif type(node) is dict or type(node) is list:
            container = cast("dict[object, object] | list[object]", node)
            if len(nodes) + len(container) > _FEW_NODES:
                return None
            # its brackets, a comma before each item but the first, and for a dict a colon after each key
            separators += 2 + max(len(container) - 1, 0)
            if isinstance(container, dict):
                keys = [key for key in container if type(key) is str]
                if len(keys) < len(container):
                    return None
                strings.extend(keys)
                separators += len(container)
                nodes.extend(container.values())
            else:
                nodes.extend(container)
        else:
            scalars.append(node)
    if sum(map(len, strings)) <= max_bytes:  # at least one byte a character: not over, or not by its strings
        return None
    try:
        size = (separators + sum(utf8_size(_STRICT.encode(scalar)) for scalar in scalars)
                + sum(_string_size(string) for string in strings))
    except (TypeError, ValueError, RecursionError):  # (UnicodeEncodeError too) value_json decides: it refuses
        # the value, or escapes a lone surrogate
        return None
    return size if size > max_bytes else None


_SAMPLES = 3
"""How many items of a container ``_rough_size`` looks at: its first, middle and last."""
_ROUGH_NODES = 32
"""How many containers ``_rough_size`` looks into, at most: a value's cost when it is small."""


def _rough_size(value: Any, budget: list[int]) -> int:
    """A guess at the size of ``value``'s JSON from a few of its nodes (``_ROUGH_NODES`` containers at most, each
    as long as its largest of ``_SAMPLES`` items: first, middle, last): what tells a value that may be over a
    bound from one that is not without a pass over it. Never relied on for a refusal (``dumped_size_over``
    measures); a value it misjudges as small costs what it did before, its copy and its JSON text before the
    World refuses it. Written for a small value's sake: ``{"args": [5], "kwargs": {}}`` costs some 0.7 us."""
    kind = cast("type[object]", type(value))
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
        part = cast("type[object]", type(item))
        size = len(item) if part is str else (
            _rough_size(item, budget) if part is list or part is dict or part is tuple or part is bytes else 8)
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


def dumped_size_over(value: object, max_bytes: int) -> int | None:
    """The size of the JSON a user value is stored as (``serde.dumps`` of it, then compact JSON) when it is over
    ``max_bytes``, else None, found before that JSON or its ``dumps`` copy is made: ``serde.json_parts`` gives
    it a part at a time (small items dumped together), each part is measured and let go, so the value costs
    itself and a part. A records list's copy was 3.4 times its JSON, the JSON once more: a value of many parts
    over the bound cost 8-9 times its size before its refusal (``bench/oversized_values.py``), an
    out-of-memory kill on a Lambda of 1 GB where the typed error was due.

    A value that looks small (``_rough_size``: under a quarter of the bound, from a few of its nodes) is not
    measured: it costs a look at those nodes, never a pass. None too for a value ``dumps`` refuses or one with a
    lone surrogate (its JSON escapes it: ``encode_value``): its ``dumps`` and the World decide, as before."""
    if _rough_size(value, [_ROUGH_NODES]) <= max_bytes // 4:
        return None
    try:
        size = sum(_part_size(part) for part in serde.json_parts(value))
    except (SerializationError, ValueError, RecursionError):  # (UnicodeEncodeError is a ValueError)
        return None
    return size if size > max_bytes else None


def oversized(value: object, field: str, max_bytes: int | None) -> PayloadTooLargeError | None:
    """The ``PayloadTooLargeError`` naming ``field`` that the World would raise (``encode_value``) when the JSON
    ``value`` is stored as is over ``max_bytes`` (None: no bound known here, ``World.max_value_bytes``), else
    None: asked with a user's value before it is dumped (``dumped_size_over``), where the World asks only once
    it holds the dumped copy. Returned, not raised, for the writer to raise where its refusals are named."""
    if max_bytes is not None and (size := dumped_size_over(value, max_bytes)) is not None:
        return _too_large(field, size, max_bytes)
    return None


def _too_large(field: str, size: int, max_bytes: int) -> PayloadTooLargeError:
    return PayloadTooLargeError(f"{field} is {size} bytes of JSON; the largest value awsworld stores is "
                                f"{max_bytes} bytes ({MAX_VALUE_BYTES_ENV})", field=field)


def _escaped_json(value: Any) -> str:
    """``value``'s compact JSON with every non-ASCII character escaped: for a text with a lone surrogate, which
    UTF-8 cannot hold. Each of its characters is one byte."""
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)


def looks_first(event_type: str) -> bool:
    """Whether a value of ``event_type`` is looked at for a long string before its JSON is made
    (``encode_value``'s ``look``): every value but a step's input, which every step call carries: the look
    costs about 0.5 us a value, 0.6% of a serial step's instructions in ``bench/testing.py --instructions``.
    A step's input over the bound is refused in the workflow all the same, at the cost of its JSON text."""
    return event_type != "step_created"


def encode_value(value: Any, field: str, max_bytes: int | None, *, look: bool = True) -> tuple[str, bytes]:
    """A user value as every World stores it: its JSON text and UTF-8 bytes (a lone surrogate, which is not
    UTF-8, escaped as JSON's \\uXXXX so it still round-trips exactly), at most ``max_bytes`` of them (None: no
    bound) or ``PayloadTooLargeError``.

    A value over the bound costs its JSON text and no other copy before the error: a text that may be over
    (more than a quarter of the bound in characters, as a character is at most 4 bytes of UTF-8) is sized
    before its bytes are made (``utf8_size``), and every text is let go before the raise, since a traceback
    keeps this frame alive while its caller handles the error (a step's refused result is recorded as the
    step's failure from within the handler: ``_worker/step_runner.py``). Before that, with ``look``, a value of
    a few nodes over the bound is sized without its JSON (``json_size_over``): it costs itself alone. A value
    within a quarter of the bound costs what it always did, one encode and one ``len``, and that look.
    ``bench/oversized_values.py`` measures it."""
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
