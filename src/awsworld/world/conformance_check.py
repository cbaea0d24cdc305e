"""A static check, read by pyright and never run: both Worlds are assigned to the ``World`` protocol, so a
method missing from either, or one whose signature drifted from the contract, is a type error in CI rather than
an ``AttributeError`` in a user's test or a production delivery.

The imports sit under ``TYPE_CHECKING``: the contract must not import its implementations when it runs (the
AWS World pulls in botocore lazily, the in-memory World is a test tool)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._memory.world import MemoryWorld
    from ..aws.world import AWSWorld
    from .protocol import World

    def aws_world_is_a_world(world: AWSWorld) -> World:
        return world

    def memory_world_is_a_world(world: MemoryWorld) -> World:
        return world
