"""A parked run is a state awsworld records and clears (``_engine.parking``), on both Worlds: under the park policy a
run whose replay keeps diverging gets the ``$awsworld.parked`` mark once (in its log, through ``attr_set``; an
hourly redelivery that finds the same divergence writes nothing), the mark says where and what differs without
argument values (a value above the inline limit is never copied into it), a revert lets the next parked
redelivery replay the run, clear the mark before anything else it writes, and finish the run; and ``Client.fail``
ends a parked run as the spec's rule would have (``CORRUPTED_EVENT_LOG``), which a parent awaiting it sees.

A deploy that lost a started run's workflow (a module dropped, a rename) parks it too, instead of failing it once the
unknown-workflow window has passed (0 s here), and the deploy that brings the code back resumes it; so does a
consumer whose published names make the workflow certainly unknown (``awsworld dev`` after an edit removed it),
which fails an unstarted run at once.

Here parked runs come back every second (``AWSWORLD_PARK_SECONDS=1``): virtual time on memory, real on the emulator.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from awsworld import ChildWorkflowError, create_hook, step, workflow
from awsworld._engine.parking import MISSING, PARKED_ATTRIBUTE, Parked, parked_in_log, parked_run
from awsworld._published.model import DEV, publish
from awsworld.authoring.definitions import REGISTRY, Registry, workflow_name
from awsworld.authoring.errors import CORRUPTED_EVENT_LOG, FAILED_ON_REQUEST, UNKNOWN_WORKFLOW, WorkflowRunFailedError
from awsworld.world.errors import RunGoneError, RunNotFoundError

from .conftest import BOTH, MEMORY, deployed, on_backends, with_env

local_env = with_env({"AWSWORLD_ON_DIVERGENCE": "park", "AWSWORLD_PARK_SECONDS": "1",
                      "AWSWORLD_UNKNOWN_WORKFLOW_WINDOW_SECONDS": "0"})
e2e_backend = on_backends(BOTH)

NOTE = "n" * 20_000  # above the inline limit (16 KiB): a payload the plain-text mark must never hold


@step
async def pack(order: str, note: str) -> str:
    return f"packed {order} ({len(note)})"


@workflow
async def packs_then_waits(order: str, note: str, token: str) -> str:
    packed = await pack(order, note)
    payload = await create_hook(token=token)
    return f"{packed}: {payload}"


async def packs_other_notes(order: str, note: str, token: str) -> str:
    """A deploy that changes the step's arguments: runs that packed with the old ones diverge at step 1."""
    packed = await pack(order, note.upper())
    payload = await create_hook(token=token)
    return f"{packed}: {payload}"


@workflow
async def parent_of_parked(order: str, token: str) -> dict[str, Any]:
    try:
        await packs_then_waits(order, NOTE, token)
    except ChildWorkflowError as error:
        return {"status": error.status, "type": error.error_type, "message": str(error)}
    return {"status": "completed"}


async def parked(e2e: Any, run_id: str, timeout: float = 30.0) -> Parked:
    """The run's mark, once its flow has written it (the run diverges, recovers three times, then parks)."""
    deadline = time.monotonic() + timeout
    while True:
        view = await e2e.world.runs.get(run_id, resolve_data="none")
        mark = parked_run(view.status, view.attributes)
        if mark is not None:
            return mark
        assert view.status == "running", view.status
        assert time.monotonic() < deadline, f"run {run_id} was not parked within {timeout} s"
        await e2e.sleep(0.05)


def marks(events: list[Any]) -> list[str | None]:
    """The values the run's attr_set events gave the mark, in log order (None: cleared)."""
    return [change.get("value") for e in events if e.event_type == "attr_set"
            for change in (e.event_data or {}).get("changes") or () if change.get("key") == PARKED_ATTRIBUTE]


async def test_a_diverging_run_is_parked_once_shown_without_values_and_a_revert_resumes_it(
        e2e, caplog: pytest.LogCaptureFixture) -> None:
    order, token = f"P-{uuid.uuid4().hex[:6]}", f"pack-{uuid.uuid4().hex}"
    run = await e2e.start(packs_then_waits, order, NOTE, token)
    await e2e.hook_ready(token, run)
    await e2e.idle()
    seen = len(e2e.poller.results)
    with deployed(packs_then_waits, packs_other_notes):  # reverted when the block ends
        await e2e.client.resume_hook(token, "yes")
        mark = await parked(e2e, run.run_id)
        while sum(r.status == "parked" for r in e2e.poller.results[seen:]) < 3:  # two redeliveries after the first
            await e2e.sleep(0.2)
        statuses = [r.status for r in e2e.poller.results[seen:]]
        assert statuses[:4] == ["diverged"] * 3 + ["parked"], statuses
        events = await run.events()
        created = next(e for e in events if e.event_type == "step_created")
        assert (mark.position, mark.event, mark.change) == ("step 1", created.slot, "arguments")
        assert mark.divergence == (f"step 1 (event {created.slot}): the log has pack(…), the code called pack(…) "
                                   "with other arguments")
        view = await e2e.world.runs.get(run.run_id, resolve_data="none")
        assert view.status == "running" and NOTE[:20] not in view.attributes[PARKED_ATTRIBUTE]
        assert len(marks(events)) == 1, "the redeliveries that found the same divergence wrote nothing"
        assert parked_in_log(events) == mark
        said = [r.getMessage().rsplit("; ", 1)[1] for r in caplog.records
                if r.getMessage().startswith(f"replay of run {run.run_id} diverged from its log at step 1 ")]
        # (the fourth read "recovery 4", though it parked the run rather than recover it)
        assert said[:5] == ["recovery 1 of 3", "recovery 2 of 3", "recovery 3 of 3", "the run is parked",
                            "it stays parked"], said
    assert await run.result(timeout=30) == f"packed {order} (20000): yes"
    events = await run.events()
    assert marks(events)[1:] == [None], "cleared once, by the replay that matched"
    kinds = [e.event_type for e in events]
    assert kinds[-4:] == ["hook_received", "attr_set", "attr_set", "run_completed"], kinds  # parked, cleared, on
    view = await e2e.world.runs.get(run.run_id, resolve_data="none")
    assert PARKED_ATTRIBUTE not in view.attributes


async def test_fail_ends_a_parked_run_as_the_spec_would_and_its_parent_sees_it(e2e) -> None:
    order, token = f"F-{uuid.uuid4().hex[:6]}", f"pack-{uuid.uuid4().hex}"
    parent = await e2e.start(parent_of_parked, order, token)
    child = None
    deadline = time.monotonic() + 30
    while child is None:  # the child (its id derives from the parent's) holds the hook
        try:
            hook = await e2e.world.hooks.get_by_token(token, resolve_data="none")
            child = e2e.client.get_run(hook.run_id)
        except Exception:
            assert time.monotonic() < deadline
            await e2e.sleep(0.05)
    with deployed(packs_then_waits, packs_other_notes):
        await e2e.client.resume_hook(token, "yes")
        mark = await parked(e2e, child.run_id)
        failed = await e2e.client.fail(child.run_id, reason="the old pack code is gone")
    assert failed.status == "failed" and failed.error_code == CORRUPTED_EVENT_LOG
    assert failed.error is not None and failed.error.name == "ReplayDivergenceError"
    assert failed.error.message == (f"failed on request while parked (since {mark.since.isoformat(timespec='seconds')})"
                                    f": {mark.divergence}: the old pack code is gone")
    with pytest.raises(WorkflowRunFailedError) as raised:
        await child.result(timeout=30)
    assert raised.value.code == CORRUPTED_EVENT_LOG
    seen = await parent.result(timeout=30)
    assert seen["status"] == "failed" and seen["type"] == "ReplayDivergenceError", seen
    assert "failed on request while parked" in seen["message"]
    with pytest.raises(RunGoneError, match="is failed: only a pending or running run can be failed"):
        await e2e.client.fail(child.run_id)
    with pytest.raises(RunNotFoundError):
        await e2e.client.fail(f"wrun_{uuid.uuid4().hex[:26].upper()}")


async def test_fail_ends_a_running_run_that_is_not_parked(e2e) -> None:
    token = f"pack-{uuid.uuid4().hex}"
    run = await e2e.start(packs_then_waits, "R-1", "short", token)
    await e2e.hook_ready(token, run)
    failed = await e2e.client.fail(run.run_id)
    assert (failed.error_code, failed.error.name if failed.error else None) == (FAILED_ON_REQUEST, "FailedOnRequest")
    with pytest.raises(WorkflowRunFailedError, match="failed on request"):
        await run.result(timeout=30)
    with pytest.raises(ValueError, match="at most 512"):
        await e2e.client.fail(run.run_id, reason="x" * 513)


@contextmanager
def lost(workflow_fn: Any) -> Iterator[None]:
    """Inside the block, this deployment lacks the workflow (its module was dropped); after it, it has it again."""
    name = workflow_name(workflow_fn)
    original = REGISTRY.workflows.pop(name)
    try:
        yield
    finally:
        REGISTRY.workflows[name] = original


async def test_a_started_run_whose_workflow_a_deploy_lost_is_parked_not_failed_and_comes_back(e2e) -> None:
    order, token = f"M-{uuid.uuid4().hex[:6]}", f"pack-{uuid.uuid4().hex}"
    run = await e2e.start(packs_then_waits, order, "short", token)
    await e2e.hook_ready(token, run)
    await e2e.idle()
    seen = len(e2e.poller.results)
    with lost(packs_then_waits):
        await e2e.client.resume_hook(token, "yes")
        mark = await parked(e2e, run.run_id)
        while sum(r.status == "parked" for r in e2e.poller.results[seen:]) < 3:  # it keeps coming back
            await e2e.sleep(0.2)
        assert mark.change == MISSING and mark.position is None
        assert mark.divergence.startswith(f"no workflow named '{workflow_name(packs_then_waits)}' is registered here")
        assert (await run.status()) == "running"
        assert len(marks(await run.events())) == 1
    assert await run.result(timeout=30) == f"packed {order} (5): yes"
    assert marks(await run.events())[1:] == [None]


async def test_fail_ends_a_run_parked_for_missing_code_as_unknown_workflow(e2e) -> None:
    token = f"pack-{uuid.uuid4().hex}"
    run = await e2e.start(packs_then_waits, "M-2", "short", token)
    await e2e.hook_ready(token, run)
    with lost(packs_then_waits):
        await e2e.client.resume_hook(token, "yes")
        await parked(e2e, run.run_id)
        failed = await e2e.client.fail(run.run_id)
    assert (failed.error_code, failed.error.name if failed.error else None) == (UNKNOWN_WORKFLOW,
                                                                                 "UnknownWorkflowError")


@pytest.mark.parametrize("e2e_backend", [MEMORY])
async def test_a_started_run_whose_workflow_an_edit_under_dev_removed_is_parked_though_the_name_is_certainly_unknown(
        e2e) -> None:
    """``awsworld dev`` publishes its names ahead of its deliveries, so after an edit that removed a workflow its name
    is certainly unknown: a delivery for a run that has not started fails it at once (a mistyped start), but a run
    that had started was failed too, by the first delivery after its reload parked it (its hook resumed, its hourly
    parked redelivery), though the docs promise it stays parked until the code comes back."""
    token = f"pack-{uuid.uuid4().hex}"
    run = await e2e.start(packs_then_waits, "M-3", "short", token)
    await e2e.hook_ready(token, run)
    await e2e.idle()
    with lost(packs_then_waits):
        without = Registry()
        for definition in REGISTRY.workflows.values():
            without.add_workflow(definition)
        await publish(e2e.world, without, host="awsworld dev", ahead=True, key=DEV)
        await e2e.client.resume_hook(token, "yes")
        mark = await parked(e2e, run.run_id)
        assert mark.change == MISSING and (await run.status()) == "running"
        seen = len(e2e.poller.results)
        while sum(r.status == "parked" for r in e2e.poller.results[seen:]) < 2:  # its parked redeliveries too
            await e2e.sleep(0.5)
        assert (await run.status()) == "running"
    assert await run.result(timeout=30) == "packed M-3 (5): yes"


@pytest.mark.parametrize("e2e_backend", [MEMORY])
async def test_a_started_run_whose_code_is_missing_inside_the_window_says_it_will_be_parked_not_failed(
        e2e, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside the unknown-code window a delivery is backed off, and what it found is recorded for ``describe`` with
    what comes after the window: for a run that has started under the park policy that is parking, but it said
    "then the run fails with UNKNOWN_WORKFLOW" (and each backed-off receive logged so: under ``awsworld dev``,
    a line per queued step of a fan-out whose step an edit renamed)."""
    monkeypatch.setenv("AWSWORLD_UNKNOWN_WORKFLOW_WINDOW_SECONDS", "900")
    token = f"pack-{uuid.uuid4().hex}"
    run = await e2e.start(packs_then_waits, "M-5", "short", token)
    await e2e.hook_ready(token, run)
    await e2e.idle()
    with lost(packs_then_waits):
        await e2e.client.resume_hook(token, "yes")
        await e2e.sleep(1)  # its delivery, backed off
        view = await run.get()
        found = view.attributes["awsworld.delivery"]
        assert found.startswith(f"no workflow named '{workflow_name(packs_then_waits)}' is registered here"), found
        assert found.endswith("then the run is parked (AWSWORLD_ON_DIVERGENCE=park)"), found
        assert view.status == "running"
    assert await run.result(timeout=30) == "packed M-5 (5): yes"


@pytest.mark.parametrize("e2e_backend", [MEMORY])
async def test_a_run_parked_for_missing_code_is_ended_at_its_lifetime(e2e, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run parked because its deployment lacks its code never reaches a flow (nothing to replay), so its hourly
    redelivery (every second here) ends it at its lifetime's end (``world/rules/lifetime.py``: 10 s here, virtual),
    before its items expire; before, it stayed parked past it."""
    monkeypatch.setenv("AWSWORLD_MAX_RUN_DAYS", repr(10 / 86400))
    token = f"pack-{uuid.uuid4().hex}"
    run = await e2e.start(packs_then_waits, "M-L", "short", token)
    await e2e.hook_ready(token, run)
    with lost(packs_then_waits):
        await e2e.client.resume_hook(token, "yes")
        await parked(e2e, run.run_id)
        await e2e.sleep(12)
        view = await e2e.world.runs.get(run.run_id, resolve_data="none")
    assert (view.status, view.error_code) == ("failed", "RUN_LIFETIME_EXCEEDED"), view
    assert view.error is not None and "was still running at the end of its lifetime" in view.error.message
