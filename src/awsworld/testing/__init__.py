"""Testing workflows in milliseconds: an in-memory World, a virtual clock that skips, a pytest plugin.

``WorkflowTestEnv`` is the entry point; the pytest plugin (registered by the package) gives it to tests as
the ``awsworld_env`` fixture, and ``awsworld_local`` gives the AWS emulator for integration tests.
"""

from .._memory import MemoryWorld
from .._memory.clock import VirtualClock
from .driver import RunStalledError
from .env import WorkflowTestEnv

__all__ = ["MemoryWorld", "RunStalledError", "VirtualClock", "WorkflowTestEnv"]
