"""Every member the runtime uses of a World is declared in the ``World`` protocol (``world/protocol.py``), and both
Worlds have each of them: the runtime reads ``world.clock``, ``world.watch``, ``world.schedules``,
``world.published``, ``world.deployments``, ``world.limiters`` and ``world.max_value_bytes`` as it reads
``world.runs``, never by looking for them (``getattr(world, ...)``), so a World that lacked one would fail its
type check and this test, not skip the watchdog or the schedules quietly."""

from __future__ import annotations

import re
from pathlib import Path

from awsworld._memory import MemoryWorld
from awsworld.aws import AWSWorld
from awsworld.aws.config import AWSConfig
from awsworld.client.http_world import HttpWorld
from awsworld.world.clock import SYSTEM_CLOCK
from awsworld.world.protocol import World

SRC = Path(__file__).resolve().parents[2] / "src" / "awsworld"
DISCOVERY = re.compile(r"\b(?:get|has)attr\((?:self\.)?world\b")
RUNTIME_MEMBERS = ("clock", "watch", "schedules", "published", "deployments", "limiters", "streams", "runs",
                   "steps", "events", "hooks", "queue", "queue_batch", "get_deployment_id", "capabilities",
                   "spec_version", "close", "max_value_bytes", "delete_run")


def test_the_protocol_declares_what_the_runtime_reads() -> None:
    declared = {name for name in dir(World) if not name.startswith("_")}
    assert set(RUNTIME_MEMBERS) <= declared


async def test_both_worlds_have_every_declared_member() -> None:
    memory = MemoryWorld()
    aws = AWSWorld(AWSConfig(table_name="t", bucket_name="b", region_name="us-east-1"))  # no request is made
    try:
        for world in (memory, aws):
            assert isinstance(world, World), type(world).__name__  # runtime_checkable: every member is there
            for name in RUNTIME_MEMBERS:
                assert getattr(world, name) is not None, f"{type(world).__name__}.{name}"
        assert aws.clock is SYSTEM_CLOCK and memory.clock is memory.storage.clock
        assert memory.schedules.next_due() is None  # the in-memory store is the World's own (_memory/schedules.py)
    finally:
        await memory.close()
        await aws.close()


async def test_a_world_without_an_extension_declares_it_absent() -> None:
    """A client's view of a World served over HTTP has no watch index, schedules, deployments or limits (the
    server serves none of them): it says so with None (the protocol's optional extensions); it reads the served World's
    publications and keeps the system clock."""
    async with HttpWorld("http://127.0.0.1:9") as http:  # nothing is requested
        assert isinstance(http, World)
        assert http.clock is SYSTEM_CLOCK
        assert (http.watch, http.schedules, http.deployments, http.limiters) == (None,) * 4
        assert http.max_value_bytes is None  # the server's bound: it refuses a larger value itself
        assert http.published is not None


def test_no_code_discovers_a_world_member() -> None:
    found = [f"{path.relative_to(SRC)}:{number}: {line.strip()}" for path in sorted(SRC.rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if DISCOVERY.search(line)]
    assert found == []
