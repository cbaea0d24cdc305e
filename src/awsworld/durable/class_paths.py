"""Classes named by path in stored data (``module:QualName``), imported without evaluating anything from the data.

``serde`` stores a user's dataclass, pydantic model, enum or exception under its class path and imports the class
again when the value is read, possibly in another process. A path is made of identifiers and walked attribute by
attribute; dunders are refused (``__class__``, ``__globals__`` would reach arbitrary objects), so stored data can
only name classes importable at module level.

Where several versions of one module live in a process (``awsworld dev`` keeps the code a run started on when an
edit is loaded: ``cli/dev_code.py``), ``kept_modules`` names the module objects a delivery of the older code resolves
paths in, so a value it stores or reads is of its own classes, not of the edited module's."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Generator, Mapping
from contextvars import ContextVar
from types import ModuleType
from typing import Any

__all__ = ["ClassPathError", "import_class", "kept_modules", "name_ok"]


class ClassPathError(Exception):
    """A class path that is refused or does not lead to an importable class; ``reason`` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def name_ok(dotted: str, *, module: bool) -> bool:
    """Identifiers only, no dunders (``__class__``, ``__globals__`` would reach arbitrary objects); the one
    dunder module allowed is ``__main__``, where scripts define their classes."""
    if module and dotted == "__main__":
        return True
    parts = dotted.split(".")
    return all(p.isidentifier() and not (p.startswith("__") and p.endswith("__")) for p in parts)


_KEPT: ContextVar[Mapping[str, ModuleType] | None] = ContextVar("awsworld_kept_modules", default=None)


@contextlib.contextmanager
def kept_modules(modules: Mapping[str, ModuleType]) -> Generator[None]:
    """While inside (and in the tasks started inside), a path whose module is in ``modules`` resolves in that module
    object rather than in ``sys.modules``: the code of an older version loaded beside a newer one. Empty: no
    change."""
    token = _KEPT.set(modules or None)
    try:
        yield
    finally:
        _KEPT.reset(token)


_RESOLVED: ContextVar[dict[str, type] | None] = ContextVar("awsworld_resolved_classes", default=None)


@contextlib.contextmanager
def noting_classes(into: dict[str, type]) -> Generator[None]:
    """While inside (and in the tasks started inside), every path ``import_class`` resolves is noted in ``into``
    with the class it found: what a replay read its values with, so a replay kept for later can tell whether the
    names still lead to the same classes (``_worker/flow_state.py``, ``KeptReplays``)."""
    token = _RESOLVED.set(into)
    try:
        yield
    finally:
        _RESOLVED.reset(token)


def same_classes(noted: Mapping[str, type]) -> bool:
    """Whether every path in ``noted`` still resolves to the class noted for it (a reload or an edit rebinds
    names: a value read with the old class may not be readable with the new one)."""
    for path, cls in noted.items():
        try:
            if import_class(path) is not cls:
                return False
        except ClassPathError:
            return False
    return True


def import_class(path: str) -> type:
    """Resolve ``module:QualName`` by importing the module and walking attributes. Never evaluates code from
    the data: a name that is not made of identifiers, or that does not lead to a class, is refused."""
    module_name, sep, qualname = path.partition(":")
    if not sep or not name_ok(module_name, module=True) or not name_ok(qualname, module=False):
        raise ClassPathError(f"refusing class path {path!r}: expected 'module:QualName' made of identifiers")
    kept = _KEPT.get()
    try:
        obj: Any = kept[module_name] if kept is not None and module_name in kept else \
            importlib.import_module(module_name)
    except Exception as exc:
        raise ClassPathError(f"cannot load {path!r}: module {module_name!r} is not importable ({exc})") from exc
    for part in qualname.split("."):
        try:
            obj = getattr(obj, part)
        except Exception as exc:
            raise ClassPathError(f"cannot load {path!r}: {module_name!r} has no {qualname!r}") from exc
    if not isinstance(obj, type):
        raise ClassPathError(f"refusing class path {path!r}: not a class")
    noted = _RESOLVED.get()
    if noted is not None:
        noted[path] = obj
    return obj
