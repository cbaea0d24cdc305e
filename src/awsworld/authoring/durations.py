"""One parser for every duration awsworld takes (``sleep``, ``retry_after``, retry policies, timeouts, polls).

A duration is seconds (``int``/``float``), a ``timedelta``, or a string of one or more ``<number><unit>`` parts
with units ``ms``, ``s``, ``m``, ``h``, ``d`` (``"500ms"``, ``"10s"``, ``"1h30m"``, ``"1.5d"``). Where a point in
time makes sense (``sleep``, ``retry_after``) an aware ``datetime`` is accepted too. One parser, so the same
spelling means the same thing everywhere, and a mistake (a negative value, a naive datetime, an unknown unit)
is the same clear error wherever it is made, at the call that made it.

Relative durations in a workflow are measured from the workflow's ``now()`` (``resolve``), never the wall clock,
so a replay computes the same point in time.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta

Duration = int | float | timedelta | str
"""A relative duration: seconds, a timedelta, or a string such as ``"500ms"``, ``"10s"``, ``"5m"``, ``"1h30m"``."""

When = Duration | datetime
"""A duration, or an aware datetime: the point in time itself."""

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"\s*(\d+(?:\.\d+)?|\.\d+)\s*(ms|s|m|h|d)", re.IGNORECASE)


def parse_duration(value: Duration, *, what: str = "duration") -> timedelta:
    """A relative duration as a ``timedelta``; ``what`` names the argument in the error. Checked at run time
    too: the caller may be untyped, and a wrong value should fail here, not as a stuck run."""
    raw = _unchecked(value)
    if isinstance(raw, bool):  # an int subclass: True would silently mean one second
        raise TypeError(f"{what} must be seconds, a timedelta or a string like '10s', got {raw!r}")
    if isinstance(raw, timedelta):
        delta = raw
    elif isinstance(raw, int | float):
        if not math.isfinite(raw):
            raise ValueError(f"{what} must be a finite number of seconds, got {raw!r}")
        if raw < 0:
            raise ValueError(f"{what} must not be negative, got {raw!r}")
        try:
            return timedelta(seconds=raw)
        except OverflowError:
            raise ValueError(f"{what} of {raw!r} seconds is longer than a timedelta holds (999999999 days): "
                             "a wait that long never ends") from None
    elif isinstance(raw, str):
        delta = _parse_string(raw, what)
    elif isinstance(raw, datetime):
        raise TypeError(f"{what} must be relative here (seconds, a timedelta or a string like '10s'), "
                        f"not a point in time ({raw!r})")
    else:
        raise TypeError(f"{what} must be seconds, a timedelta or a string like '10s', got {type(raw).__name__}")
    if delta < timedelta(0):
        raise ValueError(f"{what} must not be negative, got {value!r}")
    return delta


def duration_text(seconds: float) -> str:
    """A span of time for people, to the second under an hour and to the minute past it: ``42 s``, ``5 min 3 s``,
    ``23 h 59 min``, ``365 d``, ``1 d 12 h``; under half a second, in milliseconds (``250 ms``, ``0.4 ms``: never
    an exponent). The one formatter of every message and view that says how long (``_timeline.how_far`` says it as
    a distance, ``in``/``ago``); a day counted as a fraction (``0.000497685 days``) reads as nothing."""
    left = round(abs(seconds))
    if left == 0 and seconds:
        millis = abs(seconds) * 1000
        return f"{round(millis)} ms" if millis >= 1 else f"{millis:.3f}".rstrip("0").rstrip(".") + " ms"
    days, rest = divmod(left, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d" + (f" {hours} h" if hours else "")
    if hours:
        return f"{hours} h" + (f" {minutes} min" if minutes else "")
    if minutes:
        return f"{minutes} min" + (f" {secs} s" if secs else "")
    return f"{secs} s"


def seconds(value: Duration, *, what: str = "duration") -> float:
    """``parse_duration`` in seconds."""
    return parse_duration(value, what=what).total_seconds()


def resolve(value: When, now: datetime, *, what: str = "duration") -> datetime:
    """The point in time ``value`` names: an aware datetime as is, a relative duration from ``now`` (in a
    workflow, its replay-stable ``now()``)."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
            raise ValueError(f"{what} needs a timezone-aware datetime, got naive {value!r} (add tzinfo=UTC)")
        return value
    if isinstance(value, str):
        _refuse_timestamp_text(value, what)
    delta = parse_duration(value, what=what)
    try:
        return now + delta
    except OverflowError:  # (it said only "date value out of range", naming neither the call nor the value)
        raise ValueError(f"{what} of {value!r} ends after the year 9999, the last a datetime holds: a wait that long "
                         "never ends") from None


def _refuse_timestamp_text(text: str, what: str) -> None:
    """A point in time written as text (``"2030-01-01T00:00:00Z"``, a Step Functions ``Wait`` state's
    ``Timestamp``, a date from a request) is refused with what to pass instead: read as a duration it only
    failed at its first character, which did not say a datetime is taken here."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        return
    zone = "" if moment.tzinfo is not None else " and give it a timezone (it has none)"
    raise ValueError(f"{what}: {text!r} is a point in time written as text, not a duration: pass the datetime "
                     f"itself (datetime.fromisoformat({text.strip()!r})){zone}")


def _unchecked(value: object) -> object:
    """``value`` as the run-time checks see it: anything an untyped caller may pass."""
    return value


_WORDS = re.compile(r"(\d+(?:\.\d+)?|\.\d+)\s*(milliseconds?|msecs?|seconds?|secs?|minutes?|mins?|hours?|hrs?|days?)\b",
                    re.IGNORECASE)

def _unit_of(word: str) -> str:
    """The unit a duration's word means (``minutes``: ``m``)."""
    word = word.lower()
    return "ms" if word.startswith(("mil", "ms")) else "m" if word.startswith("min") else word[0]


def _instead(text: str) -> str:
    """What to write for a duration in words (``"5 minutes"``: ``'5m'``) or a number in a string (``"5"``), said
    with the refusal: the refusal alone pointed at ``'inutes'``."""
    try:
        number = float(text)
    except ValueError:
        pass
    else:
        return f"; a number of seconds is a number, not text: {number:g}, or {f'{number:g}s'!r}"
    written = _WORDS.sub(lambda m: m.group(1) + _unit_of(m.group(2)), text).replace(" ", "")
    changed = written != text.replace(" ", "")
    return f"; write {written!r}" if changed and re.fullmatch(f"(?:{_PART.pattern})+", written, re.IGNORECASE) else ""


def _parse_string(text: str, what: str) -> timedelta:
    total = 0.0
    position = 0
    stripped = text.strip()
    if not stripped:
        raise ValueError(f"{what}: an empty string is not a duration (try '10s', '5m', '1h30m')")
    while position < len(stripped):
        match = _PART.match(stripped, position)
        if match is None:
            rest = stripped[position:]
            raise ValueError(f"{what}: cannot read {text!r} as a duration at {rest!r}: use <number><unit> parts "
                             f"with units {', '.join(_UNITS)} (e.g. '500ms', '10s', '5m', '2h', '1d', '1h30m')"
                             f"{_instead(stripped)}")
        total += float(match.group(1)) * _UNITS[match.group(2).lower()]
        position = match.end()
    return timedelta(seconds=total)
