"""Limits across runs, as workflow code declares them: ``Concurrency`` and ``RateLimit``.

``@workflow(concurrency=Concurrency(1, key=lambda order: order.customer_id))``: at most one run per customer at a
time; the others wait (``pending``), in priority then arrival order. ``@step(concurrency=20)``,
``@step(rate="50/s")``: at most 20 attempts of the step at once across all runs, at most 50 starts a second.
A key function takes the workflow's (or the step's) arguments, as the call gave them, and returns the key (a str
or an int); without one, the whole workflow (step) is one key. ``name=`` shares a limit between several steps (one
provider, many steps): every declaration of a name must give the same numbers.

What a limit does is decided by ``world.rules.limiters`` (the pools, the waiters' order, the bucket); these types
only say what code asked for, checked where it is written (``LimitInputError``, a ``ValueError``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..world.rules.limiters import (
    ON_BUSY,
    LimitInputError,
    LimitSpec,
    OnBusy,
    Rate,
    check_key,
    check_name,
    check_spec,
    parse_rate,
)

KeyFunction = Callable[..., Any]
"""Called with the workflow's (or step's) arguments, as the call gave them; returns the key (str or int)."""


@dataclass(frozen=True)
class Concurrency:
    """At most ``limit`` at once per key (``key``: a function of the arguments; None: one key for all), and at
    most ``total`` at once across keys (its keys then take turns for it: round robin). ``on_busy`` (runs only):
    ``"wait"`` (default) queues the run; ``"skip"`` refuses a start while the key is busy (the run is recorded
    cancelled, its reason naming the holder); ``"cancel"`` cancels the running ones and starts the new one when
    they have ended (singleton: ``limit=1``). ``name``: the limit's name (default: ``workflow:<name>`` or
    ``step:<name>``)."""

    limit: int | None = None
    key: KeyFunction | None = None
    total: int | None = None
    name: str | None = None
    on_busy: OnBusy = "wait"

    def __post_init__(self) -> None:
        if self.limit is None and self.total is None:
            raise LimitInputError("Concurrency needs a limit (per key) or a total (across keys)", field="limit")
        for what, value in (("limit", self.limit), ("total", self.total)):
            if value == 0 and not isinstance(value, bool):  # (0 means "no limit" in some libraries: here it shuts)
                raise LimitInputError(
                    f"a {what} of 0 in code lets nothing start: every run or step of it would wait until `awsworld "
                    "limits set` raised it. Leave out concurrency= for no limit; to stop a key for a while, `awsworld "
                    "limits pause` it (or `limits set ... --concurrency 0`) at run time", field=what)
        if self.on_busy not in ON_BUSY:
            raise LimitInputError(f"on_busy is one of {', '.join(ON_BUSY)}, got {self.on_busy!r}", field="onBusy")
        if self.key is not None and not callable(self.key):
            raise LimitInputError(f"a limit's key is a function of the arguments, got {self.key!r:.60}", field="key")
        if self.name is not None:
            check_name(self.name)


@dataclass(frozen=True)
class RateLimit:
    """Starts at ``rate`` per key (``"50/s"``, ``"10/m"``, ``"5/10s"``), with bursts of up to ``burst`` at once
    (default: one period's worth). The burst comes on top of the rate: a period admits up to ``burst`` + the rate's
    count - 1 (``"10/m"``: 19 in a first minute), so an API that counts calls per window wants ``burst=1``. A token
    bucket: excess starts wait for their token (nothing is dropped), each coming back at the time it reserved,
    holding no container meanwhile."""

    rate: str
    burst: int | None = None
    key: KeyFunction | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        parse_rate(self.rate, burst=self.burst)
        if self.key is not None and not callable(self.key):
            raise LimitInputError(f"a limit's key is a function of the arguments, got {self.key!r:.60}", field="key")
        if self.name is not None:
            check_name(self.name)

    @property
    def parsed(self) -> Rate:
        return parse_rate(self.rate, burst=self.burst)


@dataclass(frozen=True)
class LimitDecl:
    """What one workflow or step declared: its limit's numbers (``spec``), how its key is found, and (runs) what
    a start does when the key is busy."""

    spec: LimitSpec
    key: KeyFunction | None = None
    on_busy: OnBusy = "wait"

    def key_of(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """The key of a call with these arguments ("" without a key function). A key function that raises, or
        returns something that is not a key, is a ``LimitInputError`` naming the limit."""
        if self.key is None:
            return ""
        try:
            value = self.key(*args, **kwargs)
        except Exception as error:
            raise LimitInputError(f"the key function of limit {self.spec.name!r} ({_where(self.key)}) raised "
                                  f"{type(error).__name__}: {error}", field="key") from error
        try:
            return check_key(value, self.spec.name)
        except LimitInputError as bad:  # (a key that is no key: the function's line, not the limiter's)
            raise LimitInputError(f"{bad} from its key function ({_where(self.key)})", field="key") from None


def _where(function: KeyFunction) -> str:
    """Where a key function is written (``<lambda> at /app/flows.py:12``): a key that is refused when a run
    starts, or when a step's attempt fails on it, is the user's line, and the traceback a step's failure keeps
    runs through the limiter only (a lambda that returns a dict raises nothing of its own)."""
    code = getattr(function, "__code__", None)
    name = getattr(function, "__qualname__", None) or getattr(function, "__name__", None) or repr(function)[:60]
    return f"{name} at {code.co_filename}:{code.co_firstlineno}" if code is not None else str(name)


_DECLARED: dict[str, tuple[LimitSpec, str, str]] = {}
"""Every limit this process declared, with who declared it last (its kind, ``workflow`` or ``step``, and its name),
so two declarations of one name by different workflows or steps cannot disagree (the same one declared again, by a
reloaded module, replaces its numbers)."""


def declare(kind: str, owner: str, concurrency: int | Concurrency | None,
            rate: str | RateLimit | None) -> LimitDecl | None:
    """The limit of a ``@workflow`` or ``@step`` named ``owner`` (``kind``: ``workflow`` or ``step``), from its
    ``concurrency=`` and ``rate=``; None when it declares neither. Both name one limit (a step's concurrency and
    rate share its pool): two different names, or two different key functions, are refused."""
    if concurrency is None and rate is None:
        return None
    conc = Concurrency(concurrency) if isinstance(concurrency, int) and not isinstance(concurrency, bool) \
        else concurrency
    if conc is not None and not isinstance(conc, Concurrency):
        raise LimitInputError(f"concurrency= takes a number or a Concurrency, got {concurrency!r:.60}",
                              field="concurrency")
    limited = RateLimit(rate) if isinstance(rate, str) else rate
    if limited is not None and not isinstance(limited, RateLimit):
        raise LimitInputError(f"rate= takes a text such as '50/s' or a RateLimit, got {rate!r:.60}", field="rate")
    names = {n for n in (conc.name if conc else None, limited.name if limited else None) if n is not None}
    if len(names) > 1:
        raise LimitInputError(f"{kind} {owner!r} names two limits ({', '.join(sorted(names))}): a {kind} has one "
                              "limit; give its concurrency and rate the same name", field="name")
    keys = {k for k in (conc.key if conc else None, limited.key if limited else None) if k is not None}
    if len(keys) > 1:
        raise LimitInputError(f"{kind} {owner!r} gives its concurrency and its rate different key functions: one "
                              "limit has one key", field="key")
    name = names.pop() if names else f"{kind}:{owner}"
    spec = check_spec(LimitSpec(name, conc.limit if conc else None, conc.total if conc else None,
                                limited.parsed if limited else None))
    if kind == "workflow" and spec.rate is not None:
        raise LimitInputError("a workflow takes concurrency=; rate limits are for steps", field="rate")
    known = _DECLARED.get(name)
    if known is not None and known[0] != spec and known[1:] != (kind, owner):
        raise LimitInputError(f"limit {name!r} is declared with different numbers by {known[1]} {known[2]} "
                              f"({_describe(known[0])}) and {kind} {owner} ({_describe(spec)}): every use of a named "
                              "limit gives the same", field="name")
    _DECLARED[name] = (spec, kind, owner)
    _KEYED[name] = _KEYED.get(name, False) or bool(keys)  # (keyed if any of its declarations is)
    if name != f"{kind}:{owner}":
        _NAMED[f"{kind}:{owner}"] = name
    return LimitDecl(spec, keys.pop() if keys else None, conc.on_busy if conc else "wait")


_NAMED: dict[str, str] = {}
"""The limits given a ``name=`` by their workflow or step, by the name they would have had without it
(``step:shop.charge`` -> ``payments-api``): ``awsworld limits describe step:shop.charge`` names the limit to ask for."""


_KEYED: dict[str, bool] = {}
"""Whether the limits this process declared have a key function (one without has the one key ``""``)."""


def keyed(name: str) -> bool | None:
    """Whether this process's code gives limit ``name`` a key function (None: no code here declares it)."""
    return _KEYED.get(name)


def named_as(default: str) -> str | None:
    """The ``name=`` of the limit this process's code declares where ``default`` (``step:<step>``,
    ``workflow:<workflow>``) would be its name, or None."""
    return _NAMED.get(default)


def declared_names() -> list[str]:
    """The name of every limit this process's code declares (a typo's nearest names: ``client/limits.py``)."""
    return sorted(_DECLARED)


def declared(name: str) -> LimitSpec | None:
    """The numbers this process's code declares for limit ``name`` (None: no module it imported declares it)."""
    known = _DECLARED.get(name)
    return None if known is None else known[0]


def limits_runs(name: str) -> bool:
    """Whether limit ``name`` is a workflow's (it limits runs at once: a rate means nothing to it): by its
    declaration in this process's code, else by the default name ``workflow:<name>``."""
    known = _DECLARED.get(name)
    return known[1] == "workflow" if known is not None else name.startswith("workflow:")


def _describe(spec: LimitSpec) -> str:
    parts = [f"concurrency {spec.concurrency}" if spec.concurrency is not None else "",
             f"total {spec.total}" if spec.total is not None else "",
             f"rate {spec.rate.text()}" if spec.rate is not None else ""]
    return ", ".join(p for p in parts if p)
