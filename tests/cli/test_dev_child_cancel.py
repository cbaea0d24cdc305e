"""``awsworld dev --state`` stopped while a cancelled parent is cancelling its children: the restart cancels the ones
it had not reached (``cli/dev_reload.py``'s ``_cancelled_with_parent``), instead of waking them to run on for good
with no owner. With a ``dev`` process of its own, killed with SIGKILL, as a crash does."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from awsworld.cli.dev_state import TABLE_FILE

from .test_cli import Dev, Runner, dev_snapshotting_every, until_found
from .test_dev_failures import dev_of

CHILDREN = 30
"""Enough that the parent's delivery is still cancelling them when a snapshot lands: about 17 a second here, a
snapshot every ``SNAPSHOT_SECONDS`` (or five times a copy's time, a few hundredths of a second here)."""

SNAPSHOT_SECONDS = 0.2
"""How often the killed ``dev`` snapshots its state (``dev_snapshotting_every``), not ``dev_state.SNAPSHOT_SECONDS``.
At 5 s the window needed 100 children (6 s of cancelling) to be sure a snapshot fell inside it, and the test took
40-90 s starting them, cancelling them and restarting on them; what is checked (the restart cancels the children the
saved state shows not yet cancelled) does not depend on when the snapshots fall."""

ORDERS = '''
import asyncio

from awsworld import sleep, workflow


@workflow(name="orders.pack")
async def pack(n: int) -> int:
    await sleep("1h")
    return n


@workflow(name="orders.fan")
async def fan(n: int) -> list[int]:
    return list(await asyncio.gather(*(pack(i) for i in range(n))))
'''


def saved_cancels(state: Path, parent: str) -> tuple[bool, int]:
    """Whether the saved table holds the parent's ``run_cancelled``, and how many of its children's it holds."""
    parent_cancelled, children = False, set()
    for line in (state / TABLE_FILE).read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        pk = item.get("pk", {}).get("S", "")
        if "run_cancelled" not in json.dumps(item):
            continue
        if pk == f"RUN#{parent}":
            parent_cancelled = True
        elif pk.startswith(f"RUN#{parent}.step_"):
            children.add(pk)
    return parent_cancelled, len(children)


def statuses(server: Dev, parent: str) -> list[str]:
    document = server.json("describe", parent)
    return [child["status"] for child in document["children"]]


def test_a_restart_cancels_the_children_a_killed_dev_had_not_cancelled_yet(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    project, runner, server = dev_of(tmp_path_factory, "orders", ORDERS,
                                     command=dev_snapshotting_every(SNAPSHOT_SECONDS))
    state = project / "state"
    try:
        parent = server("start", "orders.fan", f"[{CHILDREN}]").out.strip()
        until_found(lambda: statuses(server, parent) == ["running"] * CHILDREN, "every child running", timeout=180,
                    every=1)
        assert server("cancel", parent).code == 0
        # Killed once a snapshot holds the parent's cancel and not yet every child's: what a crash in the middle
        # of the parent's cancelling leaves.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if saved_cancels(state, parent)[0]:  # (every child's too, if too late: checked below)
                break
            time.sleep(0.05)
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(timeout=30)
    finally:
        runner.close()
    cancelled, children = saved_cancels(state, parent)
    if not cancelled or children == CHILDREN:
        pytest.skip(f"no snapshot fell within the parent's cancelling (saved: parent cancelled {cancelled}, "
                    f"{children} of {CHILDREN} children)")

    runner = Runner(tmp_path_factory.mktemp("runner-after"))
    server = Dev(project, state, [runner], module="orders")
    try:
        until_found(lambda: statuses(server, parent) == ["cancelled"] * CHILDREN, "every child cancelled",
                    timeout=60, every=1)
        said = [line for line in server.banner if line.startswith("state in ")]
        assert said and f"{CHILDREN - children} child run(s) of a cancelled parent cancelled" in said[0], said
        runs = server.json("runs", "--workflow", "orders.pack", "--status", "running")
        assert [run["runId"] for run in runs if run["runId"].startswith(parent)] == []
    finally:
        server.stop()
        runner.close()
