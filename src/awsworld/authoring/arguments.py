"""A workflow's arguments checked against its parameters where a run is started, with pydantic.

Where: ``Client.start`` and ``client.options(...).start`` (``client/client.py``), the CLI's ``start``
(``cli/runs.py``, which reads its JSON through the same types: ``from_json``), a schedule's creation, trigger and
backfill (``schedules/client.py``) and its declaration in code (``@workflow(schedule=...)``, checked when the
decorator runs), a child call in a workflow (``authoring/children.py``), and, for a start that could not check (a
client without the workflow's code, a schedule's tick), the run's first delivery before its body runs
(``_engine/execution.py``).

What: the call is bound to the signature first (Python's own ``TypeError`` for a missing, extra or repeated
argument), then every argument of an annotated parameter is validated by a pydantic ``TypeAdapter`` of its
annotation, in **strict** mode: no conversion between kinds. ``"12"`` is not a ``float``, ``1`` not a ``bool``,
``12.0`` not an ``int``, ``"red"`` not a ``Color``, a ``list`` not a ``tuple``. What strict mode lets through is
a value of the declared type, plus pydantic's two allowances: an ``int`` for a ``float`` (the numeric tower) and a
``dict`` for a pydantic model. A parameter without an annotation, annotated ``Any`` or ``object``, or with an
annotation pydantic cannot build a validator for (or that does not resolve) is not checked. A ``*args`` or
``**kwargs`` parameter's annotation is checked against each value it takes.

What is stored is what the caller passed, never the validated copy: the check is a gate, not a conversion, so the
input a run records (and every replay reads) is exactly the caller's, and a start that was valid before this
check stores the same bytes now. (The CLI is the one place that converts: its arguments are JSON text, which it
reads through the workflow's types in pydantic's strict JSON mode, so an ISO string becomes the ``datetime`` a
parameter declares and an array its ``tuple``; it then starts the run with those values, checked as above.)

Opting out: ``@workflow(validate_args=False)`` keeps the binding check and skips the types; a workflow with an
``args_codec`` is checked by its codec instead (its ``encode`` refuses what does not fit, as a ``CodecError``).

A refusal is a ``TypeError`` naming the workflow, the parameter, the type it expects and the value (its ``repr``,
cut to ``MAX_VALUE_CHARS``), with pydantic's reason and where inside the value it applies: ``workflow 'shop.order':
parameter 'amount' expects float, got '12' (str): Input should be a valid number`` (``what`` names the workflow:
``workflow 'shop.order'``).
"""

from __future__ import annotations

import inspect
import json
import reprlib
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ConfigDict, PydanticUserError, TypeAdapter, ValidationError

MAX_VALUE_CHARS = 80
"""How much of a refused value's ``repr`` a message quotes (the value may be large, or a user's payload)."""
MAX_REASONS = 3

_repr = reprlib.Repr()
_repr.maxstring = 40
_repr.maxother = 40
_repr.maxlist = _repr.maxtuple = _repr.maxset = _repr.maxdict = 5
_repr.maxlevel = 3

_UNCHECKED = (Any, object)
_ARBITRARY = ConfigDict(arbitrary_types_allowed=True)


class ArgumentTypeError(TypeError):
    """An argument that is not of the type its parameter declares: ``parameter`` (``items[2]`` in a ``*items``, the
    keyword in a ``**kwargs``) and ``expected`` (the annotation as written). A ``TypeError``, as
    Python's own for a call that does not bind."""

    def __init__(self, message: str, *, parameter: str, expected: str) -> None:
        super().__init__(message)
        self.parameter = parameter
        self.expected = expected


@dataclass(frozen=True)
class Checked:
    """One parameter's validator: ``adapter`` validates an argument, ``shown`` is the annotation as people write
    it (``list[str]``), ``kind`` the parameter's kind (a ``*args`` or ``**kwargs`` one validates each value)."""

    adapter: TypeAdapter[Any]
    shown: str
    kind: inspect._ParameterKind  # pyright: ignore[reportPrivateUsage]


_validators: dict[Callable[..., Any], dict[str, Checked]] = {}


def check_call(fn: Callable[..., Any], what: str, args: tuple[Any, ...], kwargs: dict[str, Any], *,
               types: bool = True) -> None:
    """Raise the ``TypeError`` calling ``fn`` (the body of ``what``, ``workflow 'shop.order'``) with these arguments
    would raise, and, with ``types``, one for an argument that does not fit its parameter's annotation (strict mode;
    see the module). Nothing of ``fn``'s body runs."""
    bound = bind(fn, args, kwargs)
    if not types:
        return
    checked = validators(fn)
    for parameter, value in bound.arguments.items():
        check = checked.get(parameter)
        if check is not None:
            for item in _items(parameter, check.kind, value):
                _validate(check, what, item, json_text=False)


def from_json(fn: Callable[..., Any], what: str, args: list[Any], kwargs: dict[str, Any]
              ) -> tuple[list[Any], dict[str, Any]]:
    """Arguments parsed from JSON (the CLI's), each read through its parameter's annotation in pydantic's strict
    JSON mode: the values of the declared types (``"2025-01-01T00:00:00Z"`` a ``datetime``, ``[1, 2]`` a
    ``tuple[int, int]``, ``{"id": 1}`` a dataclass), or the ``TypeError`` naming what does not fit. Parameters
    that are not checked keep their JSON values."""
    bound = bind(fn, tuple(args), kwargs)
    checked = validators(fn)
    for parameter, value in list(bound.arguments.items()):
        check = checked.get(parameter)
        if check is None:
            continue
        read = {item.key: _validate(check, what, item, json_text=True)
                for item in _items(parameter, check.kind, value)}
        if check.kind == inspect.Parameter.VAR_POSITIONAL:
            bound.arguments[parameter] = tuple(read.values())
        elif check.kind == inspect.Parameter.VAR_KEYWORD:
            bound.arguments[parameter] = read
        else:
            bound.arguments[parameter] = read[parameter]
    return list(bound.args), dict(bound.kwargs)


def bind(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> inspect.BoundArguments:
    """The arguments bound to ``fn``'s parameters, or the ``TypeError`` Python raises for the call, with its own
    message (``add() missing 1 required positional argument: 'b'``). For an ``async def`` the message comes from
    calling it: that binds the arguments and makes a coroutine without running any of its body, which is closed
    unrun."""
    code = getattr(fn, "__code__", None)
    if code is not None and code.co_flags & inspect.CO_COROUTINE:
        fn(*args, **kwargs).close()  # raises Python's TypeError for a call that does not bind
    try:
        return inspect.signature(fn, follow_wrapped=False).bind(*args, **kwargs)
    except TypeError as error:
        raise TypeError(f"{getattr(fn, '__qualname__', fn)}() {error}") from None


def validators(fn: Callable[..., Any]) -> dict[str, Checked]:
    """Parameter name -> its validator, for the parameters that are checked; built once per function."""
    found = _validators.get(fn)
    if found is None:
        found = _validators[fn] = _build(fn)
    return found


def _build(fn: Callable[..., Any]) -> dict[str, Checked]:
    signature = inspect.signature(fn, follow_wrapped=False)
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:  # one annotation that does not resolve (a name imported under TYPE_CHECKING): each alone
        hints = _each_hint(fn, signature)
    found: dict[str, Checked] = {}
    for parameter in signature.parameters.values():
        annotation = hints.get(parameter.name, inspect.Parameter.empty)
        if annotation is inspect.Parameter.empty or any(annotation is unchecked for unchecked in _UNCHECKED):
            continue
        adapter = _adapter(annotation)
        if adapter is not None:
            found[parameter.name] = Checked(adapter, _shown(annotation), parameter.kind)
    return found


def _each_hint(fn: Callable[..., Any], signature: inspect.Signature) -> dict[str, Any]:
    """The annotations that resolve, one by one (the rest are not checked)."""
    found: dict[str, Any] = {}
    for parameter in signature.parameters.values():

        def one() -> None:  # (the function's namespace, as ``typing.get_type_hints`` would use)
            pass

        one.__annotations__ = {"value": parameter.annotation}
        one.__module__ = getattr(fn, "__module__", one.__module__)
        try:
            hint = typing.get_type_hints(one, globalns=getattr(fn, "__globals__", None), include_extras=True)
        except Exception:
            continue
        if "value" in hint:
            found[parameter.name] = hint["value"]
    return found


def _adapter(annotation: Any) -> TypeAdapter[Any] | None:
    """A validator of ``annotation`` (arbitrary classes checked with ``isinstance``), or None when pydantic cannot
    build one: such a parameter is not checked rather than refused."""
    try:
        return TypeAdapter(annotation, config=_ARBITRARY)
    except PydanticUserError:  # a model, dataclass or TypedDict carries its own config
        pass
    except Exception:
        return None
    try:
        return TypeAdapter(annotation)
    except Exception:
        return None


@dataclass(frozen=True)
class _Item:
    """One value a parameter's annotation applies to: ``name`` (``amount``, ``counts[1]`` in a ``*counts``, the
    keyword ``b`` in a ``**labels``), ``shown`` (how a message names it), ``key`` (where it goes back)."""

    name: str
    shown: str
    key: Any
    value: Any


def _items(parameter: str, kind: inspect._ParameterKind,  # pyright: ignore[reportPrivateUsage]
           value: Any) -> list[_Item]:
    """What a parameter's annotation applies to: the value, or each value a ``*args``/``**kwargs`` took."""
    if kind == inspect.Parameter.VAR_POSITIONAL:
        return [_Item(f"{parameter}[{i}]", repr(f"{parameter}[{i}]"), i, item) for i, item in enumerate(value)]
    if kind == inspect.Parameter.VAR_KEYWORD:
        return [_Item(key, f"{key!r} (**{parameter})", key, item) for key, item in value.items()]
    return [_Item(parameter, repr(parameter), parameter, value)]


def _validate(check: Checked, what: str, item: _Item, *, json_text: bool) -> Any:
    try:
        if json_text:
            return check.adapter.validate_json(json.dumps(item.value), strict=True)
        return check.adapter.validate_python(item.value, strict=True)
    except ValidationError as error:
        raise ArgumentTypeError(refusal(what, item.shown, check.shown, item.value, error), parameter=item.name,
                                expected=check.shown) from None


def refusal(what: str, parameter: str, expected: str, value: Any, error: ValidationError) -> str:
    """``workflow 'w': parameter 'p' expects T, got V (type): reason[; at [i]: reason...]`` (``parameter``: as
    shown, quoted)."""
    got = _repr.repr(value)
    if len(got) > MAX_VALUE_CHARS:
        got = got[:MAX_VALUE_CHARS - 3] + "..."
    reasons = []
    for detail in error.errors(include_url=False)[:MAX_REASONS]:
        at = "".join(f"[{part!r}]" if isinstance(part, str) else f"[{part}]" for part in detail["loc"])
        reasons.append((f"at {at}: " if at else "") + detail["msg"])
    more = error.error_count() - MAX_REASONS
    if more > 0:
        reasons.append(f"and {more} more")
    return (f"{what}: parameter {parameter} expects {expected}, got {got} ({type(value).__name__}): "
            f"{'; '.join(reasons)}")


def _shown(annotation: Any) -> str:
    """An annotation as it is written: ``float``, ``list[str]``, ``Order``, ``int | None``."""
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__qualname__
    return repr(annotation).replace("typing.", "")


__all__ = ["ArgumentTypeError", "Checked", "bind", "check_call", "from_json", "refusal", "validators"]
