"""A hook's own waits shown as what they are (issue 31 item 7), on the in-memory World and the emulator.

``create_hook(timeout=...)`` and ``heartbeat_timeout=`` declare durable waits; they were listed by ``describe`` as
"waits on a sleep until ..." (still so after the hook had its payload) and by ``awsworld events`` as bare
``wait_N`` rows whose deadline was a time of day only. Each such ``wait_created`` now records the hook it belongs
to (``hookId``, ``hookWait``: display only, replay never compares them); the timeline labels the row ``timeout of
hook TOKEN``, ``describe`` folds the deadlines into the hook's line, with the date and how far away, and drops
them once the hook is disposed, and the run viewer's waterfall ends their lanes with the hook's. Read here as
``awsworld events``/``describe``/the UI read them: ``Run.events()`` through the same functions."""

from __future__ import annotations

import re
import uuid

from awsworld import create_hook, sleep, workflow
from awsworld._engine.ops import HOOK_ID_FIELD, HOOK_WAIT_FIELD
from awsworld._timeline import timeline_rows
from awsworld.client.waits import describe_wait, waiting_on
from awsworld.ui.model import picture

from .conftest import BOTH, E2E, on_backends

e2e_backend = on_backends(BOTH)

A_DAY_AWAY = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC \(in (23 h 59 min|1 d)\)"


@workflow(name="deadlines.approval")
async def approval(token: str) -> str:
    async with create_hook(token=token, timeout="1d", heartbeat_timeout="1h") as hook:
        answer = await hook
    await sleep("1d", name="cool-off")
    return str(answer)


async def test_a_hooks_timeout_and_heartbeat_read_as_its_deadlines_and_go_with_it(e2e: E2E) -> None:
    token = f"approve-{uuid.uuid4().hex[:12]}"
    run = await e2e.start(approval, token)
    await e2e.hook_ready(token, run)
    await e2e.wait_for_event(run, "wait_created")
    events = await run.events()

    created = {e.correlation_id: e.event_data or {} for e in events if e.event_type == "wait_created"}
    hook_id = next(e.correlation_id for e in events if e.event_type == "hook_created")
    roles = sorted((data[HOOK_WAIT_FIELD], data[HOOK_ID_FIELD]) for data in created.values())
    assert roles == [("heartbeat", hook_id), ("timeout", hook_id)], created

    (waiting,) = waiting_on("running", await run.steps(), events)  # the hook alone: no "sleep" entries
    assert waiting["kind"] == "hook" and waiting["token"] == token
    beat = next(data for data in created.values() if data[HOOK_WAIT_FIELD] == "heartbeat")
    assert waiting["heartbeatDueAt"] == beat["resumeAt"]
    line = describe_wait(waiting)
    assert re.fullmatch(rf"hook {token} \(no payload yet\), times out {A_DAY_AWAY}, next heartbeat due by "
                        rf"(\d{{4}}-\d\d-\d\d )?\d\d:\d\d:\d\d\.\d{{3}} UTC \(in (59 min( \d+ s)?|1 h)\)", line), line

    rows = timeline_rows(events)
    timeout_row = next(r for r in rows if r.event_type == "wait_created" and "timeout of hook" in r.what)
    assert timeout_row.what.endswith(f"(timeout of hook {token})"), timeout_row.what
    assert re.fullmatch(f"until {A_DAY_AWAY}", timeout_row.detail), timeout_row.detail
    assert sum(f"(heartbeat deadline of hook {token})" in r.what for r in rows) == 1
    lanes = {lane.key: lane for lane in picture(run.run_id, events).lanes if lane.kind == "wait"}
    assert sorted(lane.label for lane in lanes.values()) == [f"heartbeat deadline of hook {token}",
                                                             f"timeout of hook {token}"]

    await e2e.client.resume_hook(token, "yes")
    await e2e.wait_for_event(run, "hook_disposed")
    for _ in range(600):  # the sleep's wait_created lands in the delivery that disposes the hook, or the next
        events = await run.events()
        if any((e.event_data or {}).get("displayName") == "cool-off" for e in events):
            break
        await e2e.sleep(0.05)
    (waiting,) = waiting_on("running", await run.steps(), events)  # the hook's deadlines went with it
    assert waiting["kind"] == "sleep" and waiting["displayName"] == "cool-off", waiting
    assert re.fullmatch(f"a sleep 'cool-off' until {A_DAY_AWAY}", describe_wait(waiting)), describe_wait(waiting)
    lanes = {lane.key: lane for lane in picture(run.run_id, events).lanes if lane.kind == "wait"}
    assert {lane.label: lane.status for lane in lanes.values() if lane.label.startswith("timeout")} == {
        f"timeout of hook {token}": "disposed"}
    assert [lane.status for lane in lanes.values() if lane.label == "cool-off"] == ["waiting"]
    await e2e.client.cancel(run.run_id)
