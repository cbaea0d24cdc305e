"""A step's (or a child run's) recorded error raised in the workflow as the type it was: ``except KeyError`` works.

A step runs elsewhere (another delivery, another process), so its exception reaches the workflow only as the
log recorded it: name, qualified type, message, traceback. The workflow sees a ``StepError`` (a child call: a
``ChildWorkflowError``) that is *also* an instance of the recorded type wherever that type can be found again.
The class is made once per (awsworld error, original type) pair, in effect ``class StepError(StepError,
KeyError)``, and keeps the awsworld error's name, module and qualname, so everything that prints or stores the
type (``run_failed``'s ``name``, tracebacks, the CLI) says what it always said.

*Found again* means: a builtin exception (``KeyError``), or a class importable under the qualified name the log
holds (``myapp.errors.Declined``: the module is imported, then the class is looked up by its qualname), that
derives from ``Exception`` (``SystemExit`` or ``CancelledError`` would escape a workflow's ``except Exception``),
is not an exception group, and combines with the awsworld error (no instance-layout or metaclass conflict, an
``__init_subclass__`` that accepts the subclass, no attribute of its that refuses the awsworld error's own).
Anything else comes back as the plain awsworld error: a class defined inside a function, one in ``__main__``
(the log has no module for it), one renamed or removed since the failure was recorded.

The instance is built without the original class's ``__new__`` or ``__init__`` (they may want other arguments,
or do things): it carries the awsworld error's attributes and ``args``, not the ones the original's ``__init__``
would have set; read ``message`` for the original message.

Replay-stable: the answer depends on the recorded type and the deployed code only (the module is imported when
the class is looked up, never taken from whatever this process imported before), and is cached per process, so
a replay raises the same type at the same await every time.
"""

from __future__ import annotations

import builtins
import importlib
import types
from collections.abc import Callable
from functools import lru_cache
from typing import Any, TypeVar, cast

from ..durable.class_paths import name_ok
from .errors import DeterminismError

E = TypeVar("E", bound=Exception)


def recorded_type(qualified: str | None, name: str | None = None) -> type[Exception] | None:
    """The exception class a stored error names (``type``, the qualified name; else ``name`` for a builtin),
    or None when it cannot be rebuilt (see the module's doc)."""
    dotted = qualified or name
    if not isinstance(dotted, str):
        return None
    try:
        return _lookup(dotted)
    except _Refused:  # (not cached: looked up again where the guard is off, it may well import)
        return None


def rebuilt_type(base: type[E], qualified: str | None, name: str | None = None) -> type[E]:
    """``base`` combined with the recorded type (a subclass of both), or ``base`` itself when the type cannot
    be rebuilt or ``base`` is an instance of it already (``Exception``, a ``StepError`` subclass)."""
    original = recorded_type(qualified, name)
    if original is None:
        return base
    combined = _combined(base, original)  # (a subclass of base: made from it)
    return cast("type[E]", combined) if combined is not None else base


def rebuild(base: type[E], make: Callable[[type[E]], E], qualified: str | None, name: str | None = None) -> E:
    """``make(kind)`` with ``kind`` the class ``rebuilt_type`` gives; ``make(base)`` if building the combined
    instance fails (an attribute of the original's refuses the awsworld error's own): the same on every replay,
    since it depends on the classes only."""
    kind = rebuilt_type(base, qualified, name)
    if kind is not base:
        try:
            return make(kind)
        except Exception:
            pass
    return make(base)


class _Refused(Exception):
    """The class's module, imported for the first time inside workflow code, did something the determinism guard
    refuses (``os.urandom`` at import time, say)."""


@lru_cache(maxsize=1024)
def _lookup(dotted: str) -> type[Exception] | None:
    if not name_ok(dotted, module=False):  # identifiers, no dunders: the walk reaches classes only
        return None
    parts = dotted.split(".")
    found = getattr(builtins, parts[0], None) if len(parts) == 1 else _import(parts)
    if not isinstance(found, type) or not issubclass(found, Exception) or issubclass(found, BaseExceptionGroup):
        return None
    return found


def _import(parts: list[str]) -> object:
    """The object ``a.b.C.D`` names: the longest importable module prefix, then attributes."""
    for cut in range(len(parts) - 1, 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except DeterminismError as refused:
            raise _Refused(str(refused)) from refused
        except Exception:  # not a module (a class path further down), or a module that fails to import
            continue
        for part in parts[cut:]:
            found = getattr(found, part, None)
            if found is None:
                return None
        return found
    return None


@lru_cache(maxsize=1024)
def _combined(base: type[Exception], original: type[Exception]) -> type[Any] | None:
    if issubclass(base, original) or issubclass(original, base):
        return None  # an instance of both already (Exception), or an awsworld error of its own kind
    new = _builtin_new(original)
    namespace = {"__module__": base.__module__, "__qualname__": base.__qualname__, "__doc__": base.__doc__,
                 "__new__": lambda cls, *args, **kwargs: new(cls),  # never the original's own __new__
                 # the awsworld error's text, never the original's: its __repr__/__str__ may read attributes its
                 # __init__ set, which never ran here (a WorldError's repr read ``message``: AttributeError)
                 "__repr__": _own(base, "__repr__"), "__str__": _own(base, "__str__")}
    try:
        kind = types.new_class(base.__name__, (base, original), exec_body=lambda ns: ns.update(namespace))
        new(kind)  # a C base whose __new__ is not the builtin one refuses here, once
    except Exception:  # layout or metaclass conflicts, a refusing __init_subclass__
        return None
    return kind


def _own(base: type[Exception], name: str) -> Callable[..., str]:
    """``base``'s own method ``name`` (``BaseException``'s when no class of its defines one)."""
    klass = next(k for k in base.__mro__ if name in vars(k))
    return cast("Callable[..., str]", vars(klass)[name])


def _builtin_new(original: type[Exception]) -> Callable[[type[Any]], Any]:
    """The ``__new__`` of the nearest builtin class in ``original``'s MRO (``OSError``'s, else
    ``BaseException``'s): it makes an instance of the right layout without running any user code."""
    for klass in original.__mro__:
        if klass.__module__ == "builtins" and "__new__" in vars(klass):
            return cast("Callable[[type[Any]], Any]", vars(klass)["__new__"])
    return cast("Callable[[type[Any]], Any]", BaseException.__new__)  # (unreachable: BaseException is in every MRO)
