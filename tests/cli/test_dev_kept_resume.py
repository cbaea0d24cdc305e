"""``awsworld dev --state``: a resume answered ``delivered`` survives a ``kill -9`` of ``dev`` right after the answer.

``dev`` kept its state in copies made every few seconds (``cli/dev_state.Snapshots``), so a crash in that window
lost the payload, while its sender, told "delivered", had no reason to send it again. A write that records a hook's
payload is now answered once a copy holds it (``local/moto_server.py``'s ``kept_first``, ``Snapshots.keep``). With
``dev`` processes of their own, the first killed with SIGKILL, as a crash does."""

from __future__ import annotations

import json
import signal

import pytest

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
