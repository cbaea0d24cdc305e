"""The in-memory World: the contract in plain Python objects, no sockets, for tests in milliseconds."""

from .world import MemoryWorld

__all__ = ["MemoryWorld"]
