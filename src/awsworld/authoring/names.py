"""Names a person reads in the log: a per-call name for a step, child call, sleep or hook, and the label of
the map item or parallel branch a call was made in.

A name is display only. It is recorded on the call's ``*_created`` event as ``displayName`` and shown by
``awsworld events``/``describe``, the run viewer and ``Run.events()``; replay never compares it (a call is still
matched by its position, its step name and its arguments' digest), so renaming a call in new code never makes an
in-flight run diverge. That is also why a name is not an id: two calls may carry the same one.

What is recorded is the call's *display name*: the labels of the batches it runs in (outermost first), then its
own name, joined by `` / `` (``"charge cards / order 17 / charge card"``). A call with no name in no named batch
records nothing (no bytes).

Cost: the name's UTF-8 bytes plus about 16 for the key, on the ``*_created`` event only (never repeated on the
step's later events). DynamoDB bills a transactional write per started KB of each item, so a name changes a
write's price only when it pushes the event over a KB boundary. The caps keep that bounded: a name or label of at
most ``MAX_NAME_LENGTH`` characters, a display name of at most ``MAX_DISPLAY_NAME_LENGTH``; longer ones are
refused where they are given (``InvalidNameError``), never cut.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ..world.events import MAX_DISPLAY_NAME_LENGTH  # the World refuses a longer ``displayName`` too

MAX_NAME_LENGTH = 128
"""The longest name or batch label, in characters."""
SEPARATOR = " / "

_labels: ContextVar[tuple[str, ...]] = ContextVar("awsworld_batch_labels", default=())


class InvalidNameError(ValueError):
    """A name that cannot be recorded: not a string, empty or blank, with a control character, or too long.
    Raised where the name is given, before anything is written."""


def check_name(name: object, *, what: str = "name") -> str:
    """``name`` when it can be recorded, else ``InvalidNameError`` saying why."""
    if not isinstance(name, str):
        raise InvalidNameError(f"{what} must be a string, got {type(name).__name__}")
    if not name.strip():
        raise InvalidNameError(f"{what} must not be empty or blank")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise InvalidNameError(f"{what} must not contain control characters (newlines, tabs): {name[:40]!r}")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidNameError(f"{what} is {len(name)} characters long; the limit is {MAX_NAME_LENGTH} "
                               f"(it is recorded in the log): {name[:40]!r}...")
    return name


def display_name(name: str | None) -> str | None:
    """What a call declared here with ``name`` records: the enclosing batches' labels and the name, or None."""
    parts = (*_labels.get(), *(() if name is None else (check_name(name),)))
    if not parts:
        return None
    shown = SEPARATOR.join(parts)
    if len(shown) > MAX_DISPLAY_NAME_LENGTH:
        raise InvalidNameError(f"the display name {shown[:60]!r}... is {len(shown)} characters long (nested "
                               f"batch labels and the call's name); the limit is {MAX_DISPLAY_NAME_LENGTH}")
    return shown


@contextmanager
def labelled(label: str | None) -> Iterator[None]:
    """Calls made inside carry ``label`` (a map item's, a parallel branch's) in their display names. Set inside
    the item's own task, so it reaches exactly the calls that item makes."""
    if label is None:
        yield
        return
    token = _labels.set((*_labels.get(), label))
    try:
        yield
    finally:
        _labels.reset(token)


__all__ = ["MAX_DISPLAY_NAME_LENGTH", "MAX_NAME_LENGTH", "InvalidNameError", "check_name", "display_name",
           "labelled"]
