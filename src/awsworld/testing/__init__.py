"""Testing workflows in milliseconds: an in-memory World, a virtual clock that skips, a pytest plugin.

``WorkflowTestEnv`` is the entry point; the pytest plugin (registered by the package) gives it to tests as
the ``awsworld_env`` fixture, and ``awsworld_local`` gives the AWS emulator for integration tests. ``Registry`` is
here for ``WorkflowTestEnv.deploy``: a second version of a workflow is defined inside ``with Registry().capture():``
(docs/how-to/changing-code.md, "In tests").
"""

from .._memory import MemoryWorld
from .._memory.clock import VirtualClock
from ..authoring.definitions import Registry
from .driver import RunStalledError
from .env import WorkflowTestEnv

__all__ = ["MemoryWorld", "Registry", "RunStalledError", "VirtualClock", "WorkflowTestEnv"]
