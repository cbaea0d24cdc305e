"""``poll_until`` end to end: one step whose attempts are the polls (2N + 1 events for N polls, against 5N - 2
for a step-and-sleep loop), its back-off schedule on the log's timestamps, the timeout (``PollTimeoutError``
in the workflow), errors from the check and from the predicate, polls beside other steps (a poll is never a
queued step message), and ``LocalAWS``."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from datetime import datetime, timedelta

import pytest

from awsworld import PollTimeoutError, StepError, WorkflowRunFailedError, poll_until, sleep, step, workflow
from awsworld.local import LocalAWS
from awsworld.testing import WorkflowTestEnv
from awsworld.world import StructuredError
from awsworld.world.events import Event

CALLS: Counter[str] = Counter()


def retry_gaps(events: list[Event], step_id: str) -> list[float]:
    return [(datetime.fromisoformat(e.event_data["retryAfter"]) - e.created_at).total_seconds()
            for e in events if e.event_type == "step_retrying" and e.correlation_id == step_id and e.event_data]


def of(events: list[Event], step_id: str) -> list[str]:
    return [e.event_type for e in events if e.correlation_id == step_id]


@step
async def job_status(tag: str) -> dict[str, object]:
    CALLS[tag] += 1
    return {"polls": CALLS[tag], "done": CALLS[tag] >= 4}


@workflow
async def wait_for_job(tag: str) -> dict[str, object]:
    status = await poll_until(job_status, tag, predicate=lambda s: bool(s["done"]), interval="10s", backoff=2,
                              max_interval="30s")
    return status


async def test_n_polls_cost_2n_plus_1_events_and_back_off(awsworld_env: WorkflowTestEnv) -> None:
    tag = uuid.uuid4().hex
    run = await awsworld_env.client.start(wait_for_job, tag)
    assert await run.result() == {"polls": 4, "done": True}
    events = await run.events()
    assert of(events, "step_1") == ["step_created", "step_started", "step_retrying", "step_started", "step_retrying",
                                    "step_started", "step_retrying", "step_started", "step_completed"]
    assert len(of(events, "step_1")) == 2 * 4 + 1
    assert len(events) == 2 * 4 + 1 + 3, "plus run_created, run_started, run_completed"
    assert retry_gaps(events, "step_1") == pytest.approx([10, 20, 30], abs=0.5)
    starts = [e.created_at for e in events if e.event_type == "step_started"]
    retries = [datetime.fromisoformat(e.event_data["retryAfter"]) for e in events
               if e.event_type == "step_retrying" and e.event_data]
    assert all(start >= due for due, start in zip(retries, starts[1:], strict=True)), "no poll before its time"
    assert CALLS[tag] == 4


@workflow
async def wait_for_job_by_hand(tag: str) -> dict[str, object]:
    while True:  # what users write without poll_until
        status = await job_status(tag)
        if status["done"]:
            return status
        await sleep("10s")


async def test_a_step_and_sleep_loop_costs_5n_minus_2(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(wait_for_job_by_hand, uuid.uuid4().hex)
    assert (await run.result())["polls"] == 4
    events = await run.events()
    assert len(events) - 3 == 5 * 4 - 2, "the same 4 polls by hand: 18 events instead of 9"


# ----------------------------------------------------------------------------------------- timeout


@step
async def never_ready(tag: str) -> bool:
    CALLS[tag] += 1
    return False


@workflow
async def gives_up(tag: str) -> dict[str, object]:
    try:
        await poll_until(never_ready, tag, interval="1m", backoff=2, max_interval=None, timeout="5m")
    except PollTimeoutError as timed_out:
        return {"timed_out": True, "type": timed_out.error_type, "message": str(timed_out)}
    return {"timed_out": False}


async def test_the_timeout_ends_the_poll_with_poll_timeout_error(awsworld_env: WorkflowTestEnv) -> None:
    tag = uuid.uuid4().hex
    run = await awsworld_env.client.start(gives_up, tag)
    result = await run.result()
    assert result["timed_out"] is True and result["type"] == "PollTimeoutError"
    events = await run.events()
    # polls at 0, 1 m, 3 m and, the next one (7 m) being past the deadline, a last one at the deadline (5 m)
    assert retry_gaps(events, "step_1") == pytest.approx([60, 120, 120], abs=0.5)
    assert of(events, "step_1")[-1] == "step_failed"
    last = [e for e in events if e.event_type == "step_retrying" and e.event_data][-1]
    assert datetime.fromisoformat(last.event_data["retryAfter"]) == events[0].created_at + timedelta(minutes=5), \
        "the deadline counts from the workflow's now() at the call (run_created here), so replays agree on it"
    assert CALLS[tag] == 4
    assert "after 4 polls" in str(result["message"])


# ----------------------------------------------------------------------------------------- errors


@step
async def flaky_status(tag: str) -> int:
    CALLS[tag] += 1
    if CALLS[tag] == 2:
        raise ConnectionError("status service down")
    return CALLS[tag]


@workflow
async def through_errors(tag: str) -> int:
    return await poll_until(flaky_status, tag, predicate=lambda n: n >= 3, interval="1s")


async def test_an_error_from_the_check_counts_as_a_rejected_poll(awsworld_env: WorkflowTestEnv) -> None:
    tag = uuid.uuid4().hex
    run = await awsworld_env.client.start(through_errors, tag)
    assert await run.result() == 3
    names = [e.event_data["error"]["name"] for e in await run.events()
             if e.event_type == "step_retrying" and e.event_data]
    assert names == ["PollNotReady", "ConnectionError"]


@workflow
async def bad_predicate(tag: str) -> str | None:
    try:
        await poll_until(job_status, tag, predicate=lambda s: s["no such key"], interval="1s")
    except StepError as error:
        return error.error_type
    return None


async def test_an_error_from_the_predicate_fails_the_poll(awsworld_env: WorkflowTestEnv) -> None:
    tag = uuid.uuid4().hex
    run = await awsworld_env.client.start(bad_predicate, tag)
    assert await run.result() == "FatalError"
    assert CALLS[tag] == 1


@workflow
async def predicate_bug(tag: str) -> None:
    await poll_until(job_status, tag, predicate=lambda s: bool(s["no such key"]), interval="1s")


async def test_the_predicates_error_shows_the_users_line_not_awsworlds_runner(awsworld_env: WorkflowTestEnv) -> None:
    """Before, the stored traceback went on after the predicate's ``KeyError`` with the frames of awsworld's step
    runner (``step_runner.py``, ``_attempt``, ``_accepts``) that raised the ``FatalError`` about it."""
    run = await awsworld_env.client.start(predicate_bug, uuid.uuid4().hex)
    with pytest.raises(WorkflowRunFailedError):
        await run.result()
    [poll] = await run.steps()
    assert isinstance(poll.error, StructuredError)
    stack = poll.error.stack or ""
    assert 'predicate=lambda s: bool(s["no such key"])' in stack  # the user's line that raised
    assert "FatalError: the predicate of poll_until" in stack
    assert "awsworld/_worker" not in stack and "step_runner" not in stack, stack


# ----------------------------------------------------------------------------------------- beside other steps


@step
async def side_job(n: int) -> int:
    return n * 10


@workflow
async def poll_beside_steps(tag: str) -> list[object]:
    status, a, b = await asyncio.gather(
        poll_until(job_status, tag, predicate=lambda s: bool(s["done"]), interval="2s", backoff=1),
        side_job(1), side_job(2))
    await sleep("1m")  # the next delivery replays the poll from its recorded events
    after = await side_job(3)
    return [status["polls"], a, b, after]


async def test_a_poll_beside_other_steps_and_after_a_replay(awsworld_env: WorkflowTestEnv) -> None:
    tag = uuid.uuid4().hex
    run = await awsworld_env.client.start(poll_beside_steps, tag)
    assert await run.result() == [4, 10, 20, 30]
    assert CALLS[tag] == 4, "every poll ran once: none as a queued step message without its predicate"
    events = await run.events()
    poll_id = next(e.correlation_id for e in events if e.event_type == "step_created"
                   and e.event_data and str(e.event_data.get("stepName", "")).endswith("job_status"))
    assert poll_id is not None
    assert of(events, poll_id).count("step_retrying") == 3
    assert retry_gaps(events, poll_id) == pytest.approx([2, 2, 2], abs=0.5)


@workflow
async def poll_for_ever(tag: str) -> dict[str, object]:
    return await poll_until(job_status, tag, predicate=lambda s: False, interval="30s")


async def test_a_poll_open_when_its_run_is_cancelled_reads_cancelled_in_steps_and_describe(
        awsworld_env: WorkflowTestEnv, capsys: pytest.CaptureFixture[str]) -> None:
    """Between two checks a poll's step is ``pending`` in the World, and stays so after a cancel (nothing records
    a step's end after its run's): ``Run.steps()`` listed it ``pending`` (as if it would poll again) where
    ``describe`` said ``unfinished``, and the run viewer drew it pending to now. All read it through one rule
    (``_timeline.step_status``) and say the same."""
    from awsworld.cli.describe import _print_description, describe_document
    from awsworld.ui.model import picture

    tag = uuid.uuid4().hex
    run = await awsworld_env.client.start(poll_for_ever, tag)
    await awsworld_env.sleep("95s")  # a few checks; the step waits for its next
    [poll] = await run.steps()
    checks = CALLS[tag]
    assert (poll.status, poll.attempt) == ("pending", checks) and checks >= 2
    await run.cancel(reason="not needed")
    [poll] = await run.steps()
    assert (poll.status, poll.attempt) == ("cancelled", checks)
    document = await describe_document(awsworld_env.client, run.run_id)
    assert [s["status"] for s in document["steps"]["list"]] == ["cancelled"]
    assert document["steps"]["byStatus"] == {"cancelled": 1}
    _print_description(document)
    text = capsys.readouterr().out.splitlines()
    assert "steps     1 (1 cancelled)" in text, text
    assert any(line.split()[:2] == [poll.step_name, "cancelled"] for line in text), text
    # The run viewer's lane of the step says it too, ended where the run was (it read "pending", open to now).
    events = await run.events()
    [lane] = [lane for lane in picture(run.run_id, events).lanes if lane.kind == "step"]
    assert (lane.status, lane.ended) == ("cancelled", events[-1].created_at)
    await awsworld_env.sleep("5m")
    assert CALLS[tag] == checks, "no check after the cancel"


# ----------------------------------------------------------------------------------------- LocalAWS


@step
async def local_status(tag: str) -> int:
    CALLS[tag] += 1
    return CALLS[tag]


@workflow
async def local_poll(tag: str) -> int:
    return await poll_until(local_status, tag, predicate=lambda n: n >= 3, interval="300ms", backoff=2)


async def test_a_poll_on_local_aws(local: LocalAWS) -> None:
    assert local.client is not None
    tag = uuid.uuid4().hex
    run = await local.client.start(local_poll, tag)
    assert await run.result(timeout=30) == 3
    events = await run.events()
    assert of(events, "step_1") == ["step_created", "step_started", "step_retrying", "step_started",
                                    "step_retrying", "step_started", "step_completed"]
    assert retry_gaps(events, "step_1") == pytest.approx([0.3, 0.6], abs=0.1)
    assert CALLS[tag] == 3
