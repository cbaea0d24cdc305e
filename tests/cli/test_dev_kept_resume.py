"""``awsworld dev --state``: a resume answered ``delivered`` survives a ``kill -9`` of ``dev`` right after the answer.

``dev`` kept its state in copies made every few seconds (``cli/dev_state.Snapshots``), so a crash in that window
lost the payload, while its sender, told "delivered", had no reason to send it again. A write that records a hook's
payload is now answered once a copy holds it (``local/moto_server.py``'s ``kept_first``, ``Snapshots.keep``). With
``dev`` processes of their own, the first killed with SIGKILL, as a crash does."""

from __future__ import annotations

import contextlib
import json
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from awsworld import Client, Run, create_hook, workflow
from awsworld.aws import AWSWorld
from awsworld.cli.dev_state import Snapshots
from awsworld.local import LocalAWS, MotoServer

from .test_cli import Dev, Runner, dev_snapshotting_every
from .test_dev_failures import dev_of

NEVER = 3600.0
"""The killed ``dev``'s snapshot interval (``dev_snapshotting_every``): no periodic copy falls between the answer
and the kill, so what the restart finds is what the resume's own copy saved, whatever the machine's load."""

HOOKED = '''
from awsworld import create_hook, workflow


@workflow(name="kept.approval")
async def approval(order: str) -> object:
    return await create_hook(token=f"approve:{order}")
'''


def test_a_resume_answered_delivered_survives_a_kill_of_dev_at_once(tmp_path_factory: pytest.TempPathFactory) -> None:
    project, runner, server = dev_of(tmp_path_factory, "kept", HOOKED, command=dev_snapshotting_every(NEVER))
    try:
        run_id = server("start", "kept.approval", '["A-17"]').out.strip()
        resumed = server("resume", "approve:A-17", '{"approved": true}', "--wait", "60")
        assert resumed.code == 0 and resumed.out.startswith("delivered as "), resumed
        server.process.send_signal(signal.SIGKILL)  # at once: before any other copy could be made
        server.process.wait(timeout=30)
    finally:
        runner.close()

    runner = Runner(tmp_path_factory.mktemp("runner-after"))
    server = Dev(project, project / "state", [runner], module="kept")
    try:
        result = server("result", run_id, "--wait", "60")
        assert result.code == 0 and json.loads(result.out) == {"approved": True}, result
    finally:
        server.stop()
        runner.close()


@workflow(name="kept.heartbeated")
async def heartbeated(token: str) -> object:
    return await create_hook(token=token, heartbeat_timeout="1h")


@contextlib.asynccontextmanager
async def waiting_on_a_hook(token: str, state: Path) -> AsyncIterator[tuple[Client, Run[object], Snapshots]]:
    """A run of ``heartbeated`` waiting on ``token``, on the emulator's own moto server in this process, with
    ``dev``'s ``Snapshots`` of it (one copy made) called before each answer as ``dev --state`` calls it."""
    moto = MotoServer().start()
    try:
        async with LocalAWS(moto=moto) as local:
            assert local.client is not None and isinstance(local.world, AWSWorld)
            run = await local.client.start(heartbeated, token)
            await run.wait_for_hook(token)
            snapshots = Snapshots(local.world, state, lambda: moto.changes, read_table=moto.read_table)
            assert await snapshots.save()
            moto.keep_first(snapshots.keep)
            try:
                yield local.client, run, snapshots
            finally:
                moto.keep_first(None)
    finally:
        moto.stop()


async def test_heartbeats_make_no_kept_copy_the_periodic_one_saves_them_and_a_resume_still_waits_for_its_own(
        tmp_path: Path) -> None:
    """A heartbeat (``Client.heartbeat_hook``: a ``hook_received`` marked ``heartbeat``) made ``dev --state`` copy
    the whole state before answering it, as a payload does (``local/moto_server.py``'s ``kept_first``): a run waiting
    on a hook heartbeated every second cost 3,600 copies an hour, each holding a heartbeat's answer. Its sender sends
    the next one anyway: only the periodic copy saves it now. A resume whose payload holds a heartbeat mark's words
    (``{"heartbeat": true}``) is a payload all the same: its answer waits for a copy (it did not, when the marks were
    counted by their words). The kill -9 case of a resume is the test above."""
    async with waiting_on_a_hook("beat:H-1", tmp_path) as (client, run, snapshots):
        for _ in range(5):
            await client.heartbeat_hook("beat:H-1")
        assert snapshots.copies == 1, "no copy held a heartbeat's answer"
        assert await snapshots.save(), "the periodic copy saves the heartbeats"
        await client.resume_hook("beat:H-1", {"approved": True, "heartbeat": True})
        assert snapshots.copies == 3, "the resume's answer waited for a copy holding it"
        assert await run.result(timeout=60) == {"approved": True, "heartbeat": True}


async def test_a_resume_whose_event_block_is_compressed_waits_for_its_copy_too(tmp_path: Path) -> None:
    """A payload whose event block is over ``aws/log/blocks.py``'s ``COMPRESS_OVER`` (512 bytes) is written
    compressed, where the words ``hook_received`` cannot be read: such a resume (a webhook's request, with its
    headers, mostly is one) was answered before any copy held it, so a ``kill -9`` could lose it though the sender
    was told "delivered"."""
    async with waiting_on_a_hook("big:B-1", tmp_path) as (client, run, snapshots):
        await client.resume_hook("big:B-1", {"note": "approved " * 200})
        assert snapshots.copies == 2, "the resume's answer waited for a copy holding it"
        assert await run.result(timeout=60) == {"note": "approved " * 200}
