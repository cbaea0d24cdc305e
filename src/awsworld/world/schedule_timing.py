"""When a schedule's ticks are: 5-field cron expressions in an IANA time zone, or fixed intervals.

Cron is CronSim's (``cronsim``: a small, maintained evaluator that follows Debian's cron, daylight-saving quirks
included) on ``zoneinfo`` time zones (the ``tzdata`` package supplies the database where the system has none,
as in Lambda's runtime). What that means around a daylight-saving change, for a schedule in a zone that has
them (docs/how-to/schedules.md):

- the clock jumps forward (02:00 -> 03:00): a job whose minute and hour are fixed and fall in the skipped hour
  (``30 2 * * *``) fires once, right after the jump (03:00 local); a job with a wildcard or a step in the minute
  or the hour (``*/20 2 * * *``, ``30 * * * *``) has no run at the local times that do not exist;
- the clock goes back (03:00 -> 02:00): a job with a fixed minute and hour in the repeated hour fires once, at
  its first pass; a job with a wildcard or a step in the minute or hour keeps its pace by the real clock (an
  hourly job runs in both passes, one hour apart).

Intervals (``every="15m"``, ``offset="5m"``) are absolute: ticks at the Unix epoch + offset + k * every, in UTC,
untouched by daylight saving. ``cronsim`` is imported by the first evaluation of a cron schedule (a tick that
has one due, a declaration's check, ``describe``), not by the flow function's import.
"""

from __future__ import annotations

import math
import os
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .schedules import MAX_TICKS_PER_CLAIM, Catchup, Due, Spec

if TYPE_CHECKING:
    from collections.abc import Iterator

SCAN_LIMIT = 10_000
"""Ticks walked at most to find the most recent due one (a cron tick is at most one a minute: a week's worth);
past that the walk starts a day back, and ``Due.passed_over`` is a lower bound."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_LOOKBACKS = (timedelta(days=1), timedelta(days=32), timedelta(days=400))


def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name`` (``Europe/Berlin``), or ``ValueError`` naming it."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        pass
    nearest = _nearest_zone(name)
    if nearest is None:
        raise ValueError(f"{name!r} is not an IANA time zone (e.g. 'Europe/Berlin', 'UTC')")
    case = " (names are case-sensitive)" if nearest.lower() == name.lower() else ""
    raise ValueError(f"{name!r} is not an IANA time zone: did you mean {nearest!r}?{case}")


def _nearest_zone(name: str) -> str | None:
    """The zone ``name`` was most likely meant as: the same name in other case (``europe/berlin``), else the
    closest spelling (``Europe/Berln``); read from the zone database only when a name is refused."""
    import difflib
    from zoneinfo import available_timezones

    known = sorted(available_timezones())
    same = [z for z in known if z.lower() == name.lower()]
    close = same or difflib.get_close_matches(name, known, n=1, cutoff=0.8)
    return close[0] if close else None


def check(spec: Spec) -> None:
    """``ValueError`` for a cron expression CronSim refuses or a time zone zoneinfo does not know. In a Lambda
    function the expression is left to the tick's first evaluation (``defer_cron_check``)."""
    tz = zone(spec.timezone)
    if spec.cron is not None and not defer_cron_check():
        _cron(spec.cron, datetime.now(tz))


def defer_cron_check() -> bool:
    """In a Lambda function (``AWS_LAMBDA_FUNCTION_NAME``) a declaration does not import CronSim to check its
    expression: the cold start stays lean, and the code was checked where it was written and tested (``dev``,
    the tests, any import outside Lambda). The tick's sync evaluates it, and a bad one is logged and skipped."""
    return bool(os.environ.get("AWS_LAMBDA_FUNCTION_NAME"))


def _cron(expression: str, start: datetime) -> Iterator[datetime]:
    from cronsim import CronSim, CronSimError  # the first cron evaluation pays its import, not every cold start

    if len(expression.split()) != 5:
        raise ValueError(f"cron {expression!r} must have 5 fields (minute hour day-of-month month day-of-week)")
    try:
        sim: Iterator[datetime] = CronSim(expression, start)
    except CronSimError as error:
        raise ValueError(_never_fires(expression, start) or f"cron {expression!r} is not valid: {error}") from None
    return sim


def _never_fires(expression: str, start: datetime) -> str | None:
    """What to say of a day-of-month no month of the expression has (``0 2 30 2 *``, February 30th): CronSim calls
    it a "Bad day-of-month", as it does 32, which left the user looking for what is wrong with 30. None when the
    expression is refused for another reason (it is, with every month allowed)."""
    from cronsim import CronSim, CronSimError

    minute, hour, day, month, weekday = expression.split()
    try:
        CronSim(" ".join((minute, hour, day, "*", weekday)), start)
    except CronSimError:
        return None
    return (f"cron {expression!r} never fires: no month it names (month field {month!r}) has day {day!r}; for the "
            f"last day of each month write L ('{minute} {hour} L {month} {weekday}')")


def _iterate(spec: Spec, after: datetime) -> Iterator[datetime]:
    """The spec's ticks strictly after ``after``, in order, as UTC datetimes."""
    if spec.cron is not None:
        for moment in _cron(spec.cron, after.astimezone(zone(spec.timezone))):
            yield moment.astimezone(UTC)
        return
    every, offset = _interval(spec)
    k = math.floor((after - _EPOCH - offset) / every) + 1
    while True:
        yield _EPOCH + offset + k * every
        k += 1


def _interval(spec: Spec) -> tuple[timedelta, timedelta]:
    assert spec.every is not None, "a spec is a cron expression or an interval"
    return timedelta(seconds=spec.every), timedelta(seconds=spec.offset)


def next_after(spec: Spec, moment: datetime) -> datetime | None:
    """The first tick strictly after ``moment``; None when there is none (CronSim looks 50 years ahead)."""
    return next(_iterate(spec, moment), None)


def upcoming(spec: Spec, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` ticks after ``after`` (``describe``)."""
    found: list[datetime] = []
    for moment in _iterate(spec, after):
        found.append(moment)
        if len(found) >= count:
            break
    return found


def between(spec: Spec, after: datetime, until: datetime, limit: int) -> list[datetime]:
    """The ticks in ``(after, until]``, in order, at most ``limit``."""
    found: list[datetime] = []
    if until <= after:
        return found
    for moment in _iterate(spec, after):
        if moment > until or len(found) >= limit:
            break
        found.append(moment)
    return found


def due(spec: Spec, cursor: datetime, now: datetime, catchup: Catchup) -> Due:
    """The ticks a claim looks at (``world.rules.schedules.claim``): with ``"all"`` the first
    ``MAX_TICKS_PER_CLAIM`` after the cursor (the next claim takes the rest), with ``"latest"`` the most recent
    one, and how many before it are passed over."""
    if catchup == "all":
        return Due(tuple(between(spec, cursor, now, MAX_TICKS_PER_CLAIM)))
    if spec.cron is None:
        return _latest_interval(spec, cursor, now)
    ticks = between(spec, cursor, now, SCAN_LIMIT)
    if len(ticks) < SCAN_LIMIT:
        return Due(tuple(ticks[-1:]), max(0, len(ticks) - 1))
    for back in _LOOKBACKS:  # dense and long overdue: the most recent tick is near now
        recent = between(spec, max(cursor, now - back), now, SCAN_LIMIT)
        if recent and len(recent) < SCAN_LIMIT:
            return Due((recent[-1],), SCAN_LIMIT + len(recent) - 1)
    return Due((ticks[-1],), SCAN_LIMIT - 1)


def _latest_interval(spec: Spec, cursor: datetime, now: datetime) -> Due:
    every, offset = _interval(spec)
    last = math.floor((now - _EPOCH - offset) / every)
    first = math.floor((cursor - _EPOCH - offset) / every) + 1
    if last < first:
        return Due()
    return Due((_EPOCH + offset + last * every,), last - first)


def as_utc(moment: Any, what: str) -> datetime:
    """An aware datetime as UTC, or ``ValueError`` (naive times are ambiguous)."""
    if not isinstance(moment, datetime):
        raise TypeError(f"{what} must be a datetime, got {type(moment).__name__}")
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{what} needs a timezone-aware datetime, got naive {moment!r} (add tzinfo=UTC)")
    return moment.astimezone(UTC)
