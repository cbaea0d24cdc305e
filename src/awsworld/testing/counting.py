"""``CountingWorld``: a World that counts the calls made through it, per namespace and method.

For budgets stated in World requests (the UI's "two requests per refresh", a page's reads): a test asserts the
counts, a benchmark prints them. It wraps a real World (memory or AWS) and forwards everything; only calls on
the storage namespaces (``runs.get``, ``events.list``, ``streams.get_info``, ...) are counted.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

NAMESPACES = frozenset({"runs", "steps", "events", "hooks", "streams"})


class CountingWorld:
    """``CountingWorld(world).counts`` is a ``Counter`` of ``"events.list"``-style keys; ``counts.clear()``
    starts over. Typed loosely (``Any``): it stands in for whatever World it wraps."""

    def __init__(self, inner: Any, counts: Counter[str] | None = None, prefix: str = "") -> None:
        self._inner = inner
        self.counts: Counter[str] = counts if counts is not None else Counter[str]()
        self._prefix = prefix

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not self._prefix and name in NAMESPACES:
            return CountingWorld(value, self.counts, f"{name}.")
        if not callable(value) or not self._prefix:
            return value
        key = self._prefix + name

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.counts[key] += 1
            return value(*args, **kwargs)

        return counted
