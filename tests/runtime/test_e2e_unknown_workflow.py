"""A run no deployment can run: started under a name nothing registers (a typo, a module missing from
AWSWORLD_MODULES). It is retried for the unknown-workflow window, then fails naming the workflow and the modules
this process loaded; cancelled meanwhile, its messages are acknowledged at once and never retried. Every log
line about its deliveries names it. In memory (virtual hours) and on LocalAWS (a short window), through the
real delivery path."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator

import pytest

from awsworld import WorkflowRunCancelledError, WorkflowRunFailedError, batch_map, create_hook, step, workflow
from awsworld._worker.delivery import BACKOFF_ENV, UNKNOWN_WINDOW_ENV
from awsworld._worker.error_shapes import error_summary
from awsworld.authoring.definitions import Registry, WorkflowDef
from awsworld.authoring.errors import UNKNOWN_WORKFLOW
from awsworld.client.client import Client
from awsworld.local import LocalAWS
from awsworld.testing import WorkflowTestEnv
from awsworld.world.entities import ErrorBytes
from awsworld.world.errors import SdkRunError
from awsworld.world.messages import OPERATOR_WAKE, FlowMessage, queue_name_for

TYPO = "tests.runtime.orders.chekout"  # what the user meant: tests.runtime.orders.checkout; registered nowhere


@workflow
async def checkout(order: str) -> str:
    return order


@step
async def pack(item: int) -> int:
    return item


@step(name="tests.runtime.orders.hold")
async def hold(key: str) -> str:
    return key


@workflow(name="tests.runtime.orders.waits", pinned=False)
async def waits(key: str) -> object:
    await hold(key)  # step_1
    async with create_hook(token=f"unknown-test:{key}") as hook:
        return await hook


async def pack_all(count: int) -> int:
    """A workflow body (registered by hand below) calling a step its deployment's registry lacks."""
    return sum((await batch_map(pack, range(count))).values())


class Lines(logging.Handler):
    """What the delivery path and its host logged (a handler of their own: a test never depends on how the
    root logger is configured)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def about_deliveries(self) -> list[str]:
        return [r.getMessage() for r in self.records if r.name in ("awsworld.delivery", "awsworld.local")]


@pytest.fixture
def lines() -> Iterator[Lines]:
    handler = Lines()
    loggers = [logging.getLogger(name) for name in ("awsworld.delivery", "awsworld.local")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    yield handler
    for logger, level in zip(loggers, levels, strict=True):
        logger.removeHandler(handler)
        logger.setLevel(level)


def this_module_only() -> Registry:
    """A deployment whose modules register one workflow (this module's ``checkout``)."""
    registry = Registry()
    registry.add_workflow(WorkflowDef("tests.runtime.orders.checkout", checkout))
    return registry


def assert_every_line_names(lines: Lines, run_id: str) -> None:
    about = lines.about_deliveries()
    assert about, "the deliveries were logged"
    assert all(f"run {run_id}" in line for line in about), about


# ----------------------------------------------------------------------------------------- in memory
async def test_a_workflow_calling_a_step_its_deployment_lacks_fails_its_run_after_the_window(lines: Lines) -> None:
    """A deployment whose registry missed a step's module (``Registry.capture`` around an import that found the
    steps' module imported already): the run's flow meets the step when the workflow calls it. It is code this
    deployment lacks, as a step message's unknown step is: retried for the window, then the run fails saying which
    workflow calls which step. It was a plain failure of the record: retried until the queue dead-lettered the
    message, the run left running, 48 lines an hour."""
    registry = this_module_only()
    registry.add_workflow(WorkflowDef("tests.runtime.orders.pack_all", pack_all))
    async with WorkflowTestEnv(registry=registry) as env:
        run = await Client(env.world).start("tests.runtime.orders.pack_all", 20)
        await env.sleep(3600)
        with pytest.raises(WorkflowRunFailedError) as failed:
            await run.result(timeout=5)
        assert failed.value.code == UNKNOWN_WORKFLOW
        assert f"workflow 'tests.runtime.orders.pack_all' calls step {pack.__module__ + '.pack'!r}, which is not " \
               "registered here" in str(failed.value)
        assert env.deliveries <= 12 and not env.world.memory_queue.dead_letters, env.deliveries
    assert_every_line_names(lines, run.run_id)




async def test_a_cancelled_run_of_an_unknown_workflow_is_delivered_at_most_once_more(lines: Lines) -> None:
    async with WorkflowTestEnv(registry=this_module_only()) as env:
        client = Client(env.world)  # a client of a deployed stack: it has no workflow code to check names with
        run = await client.start(TYPO, "A-17")
        await env.sleep(60)  # deliveries at 0, 10 and 30 s, each failed and backed off
        before = env.deliveries
        assert before == 3 and await run.status() == "pending"
        assert [r.status for r in env.driver.results] == ["error"] * before
        await client.cancel(run.run_id, reason="started under a typo")
        await env.sleep(2 * 3600)
        assert env.deliveries - before <= 1, "a cancelled run is not retried"
        assert [r.status for r in env.driver.results[before:]] == ["gone"], \
            "the message still backing off is delivered once more, and acknowledged"
        assert env.world.memory_queue.pending_count() == 0 and not env.world.memory_queue.dead_letters, \
            "nothing left to retry, nothing dead-lettered"
        with pytest.raises(WorkflowRunCancelledError, match="started under a typo"):
            await run.result(timeout=5)
        # A step message of the ended run, for a step this deployment lacks: acknowledged at once too.
        step_message = FlowMessage(run.run_id, TYPO, "step_1", "nowhere.step")
        await env.world.queue(queue_name_for(TYPO), step_message.to_payload())
        await env.sleep(3600)
        assert [r.status for r in env.driver.results[before + 1:]] == ["run-ended"]
    assert_every_line_names(lines, run.run_id)


async def test_an_unknown_workflow_fails_its_run_after_the_window_naming_what_was_loaded(lines: Lines) -> None:
    async with WorkflowTestEnv(registry=this_module_only()) as env:
        client = Client(env.world)
        run = await client.start(TYPO, "A-17")
        await env.sleep(3600)  # the clock skips through the back-offs
        with pytest.raises(WorkflowRunFailedError) as failed:
            await run.result(timeout=5)
        error = failed.value
        assert error.code == UNKNOWN_WORKFLOW and error.error_type == "UnknownWorkflowError"
        assert f"no workflow named {TYPO!r}" in str(error)
        assert f"(workflows from {checkout.__module__})" in str(error), \
            "the modules that were loaded are named, so a typo shows next to the real name"
        view = await run.get()
        assert view.completed_at is not None
        waited = (view.completed_at - view.created_at).total_seconds()
        assert 900 <= waited < 900 + 600, "failed after the 15-minute window, not before, not much after"
        statuses = [r.status for r in env.driver.results]
        wakes = statuses.count("unknown-workflow-wake")
        # 7 back-off deliveries fit in the window and 1 ends the run (a loop made 23); where the window's end falls
        # between two back-offs can let one more in (seen once on a loaded CI machine): 9 at most.
        assert env.deliveries - wakes <= 9, "backed off, not retried in a loop"
        assert wakes <= 2, "the watchdog's wakes within the window are acknowledged, each once, ever more rarely"
        assert env.world.memory_queue.pending_count() == 0
    assert_every_line_names(lines, run.run_id)


async def typescript_run(env: WorkflowTestEnv) -> str:
    """A started run as the Workflow SDK's TypeScript runtime creates it through ``awsworld serve``: its
    ``executionContext`` names ``workflowCoreVersion``, its input is that runtime's bytes."""
    context = {"traceCarrier": {}, "workflowCoreVersion": "5.0.0-beta.35", "features": {"encryption": False}}
    created = await env.world.events.create(None, {
        "eventType": "run_created", "specVersion": 5,
        "eventData": {"deploymentId": "app", "workflowName": "workflow//./src/approvals//approve",
                      "input": {"__type": "Uint8Array", "data": "ZGV2bFtd"}, "executionContext": context}})
    assert created.run is not None
    await env.world.events.create(created.run.run_id, {"eventType": "run_started", "specVersion": 5})
    return created.run.run_id


async def test_a_run_of_the_typescript_runtime_is_left_to_its_app_by_wakes_and_the_watchdog(lines: Lines) -> None:
    """A run the Workflow SDK's TypeScript runtime created through ``awsworld serve`` (its ``executionContext``
    names ``workflowCoreVersion``), waiting on a hook: its code is its app's, reached by the pushes its runtime
    queues. An operator's wake, and the watchdog's once it had been idle past the watch horizon (5 minutes), found
    no Python workflow of its name and failed it with UNKNOWN_WORKFLOW (parked it under ``dev``): a TypeScript
    run waiting for a person died 5 minutes in on a deployed stack. They are acknowledged unread, writing nothing.
    (``Client.wake`` now refuses such a run, sending nothing: an operator's wake queued otherwise, by an older
    client, is the message sent here by hand.)"""
    async with WorkflowTestEnv(registry=this_module_only()) as env:
        run_id = await typescript_run(env)
        await env.world.events.create(run_id, {"eventType": "hook_created", "specVersion": 5,
                                               "correlationId": "hook_1", "eventData": {"token": "approve:A-1"}})
        with pytest.raises(SdkRunError, match=r"wakeUp\(\)"):
            await Client(env.world).wake(run_id)
        assert env.world.memory_queue.pending_count() == 0, "the refused wake sent nothing"
        run = await env.world.runs.get(run_id)
        await env.world.queue(queue_name_for(run.workflow_name),
                              FlowMessage(run_id, run.workflow_name, wake=OPERATOR_WAKE).to_payload())
        await env.sleep(2 * 3600)  # the watchdog's wakes, well past the unknown-workflow window
        run = await env.world.runs.get(run_id)
        assert run.status == "running" and run.attributes == {}, run
        logged = [event.event_type for event in (await env.world.events.list(run_id)).data]
        assert logged == ["run_created", "run_started", "hook_created"]
        statuses = [r.status for r in env.driver.results]
        assert statuses[0] == "sdk-run" and set(statuses) == {"sdk-run"} and len(statuses) >= 2, statuses
    assert any("run of the Workflow SDK's TypeScript runtime (@workflow/core 5.0.0-beta.35)" in line
               for line in lines.about_deliveries())


async def test_a_run_of_the_typescript_runtime_failed_on_request_stores_an_error_its_runtime_reads() -> None:
    """``Client.fail`` (``awsworld fail``) on a run of the TypeScript runtime stores its error as that runtime's
    bytes for an ``Error`` (its error payloads are bytes; awsworld's structured JSON is no ``Uint8Array`` and its
    ``run.returnValue`` could not hydrate it: packages/world-awsworld/test/world.node-test.mjs hydrates it there),
    and awsworld still says what it is."""
    async with WorkflowTestEnv(registry=this_module_only()) as env:
        run_id = await typescript_run(env)
        failed = await Client(env.world).fail(run_id, reason="stuck")
        assert failed.status == "failed" and failed.error_code == "FAILED_ON_REQUEST"
        assert isinstance(failed.error, ErrorBytes), failed.error
        assert failed.error.to_bytes().startswith(b"devl[")
        assert error_summary(failed.error) == "FailedOnRequest: failed on request: stuck"
        stored = await env.world.runs.get(run_id)
        assert stored.error == failed.error


async def test_deliveries_that_find_the_same_missing_step_say_it_once_a_minute(lines: Lines) -> None:
    """A fan-out's queued steps after a deploy that lacks their step (renamed, say): one message per step, each
    backing off through the unknown-code window. Each delivery once logged its own line (20 messages, 3
    deliveries each in a minute: 60 lines); the same finding about the same run is said once a minute, with how
    many deliveries found it since (``RepeatedFindings``)."""
    async with WorkflowTestEnv(deployment="v1") as env:
        run = await env.client.start(waits, "A-1")
        await env.idle()  # at its hook, step_1 done
        v2 = Registry()
        with v2.capture():
            @workflow(name="tests.runtime.orders.waits", pinned=False)
            async def waits_v2(key: str) -> object:  # the step's module is not reloaded here: v2 lacks it
                async with create_hook(token=f"unknown-test:{key}") as hook:
                    return await hook
        await env.deploy("v2", v2)
        for _ in range(20):
            message = FlowMessage(run.run_id, "tests.runtime.orders.waits", "step_1", "tests.runtime.orders.hold")
            await env.world.queue(queue_name_for("tests.runtime.orders.waits"), message.to_payload())
        await env.sleep(60)
        failed = [r.status for r in env.driver.results].count("error")
        assert failed >= 40, failed  # every message backed off more than once
    said = [line for line in lines.about_deliveries() if "no step named 'tests.runtime.orders.hold'" in line]
    assert len(said) == 1, said


# ----------------------------------------------------------------------------------------- on LocalAWS


async def until(predicate, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not await predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_on_local_aws_a_cancelled_run_of_an_unknown_workflow_is_delivered_at_most_once_more(
        local: LocalAWS, lines: Lines, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(UNKNOWN_WINDOW_ENV, "120")
    monkeypatch.setenv(BACKOFF_ENV, "1")  # back-offs of 1, 2, 4 s
    poller = local.poller
    assert poller is not None
    client = Client(local.world)
    start = poller.deliveries

    run = await client.start(TYPO, "A-17")

    async def retried() -> bool:
        return poller.deliveries - start >= 2

    await until(retried)
    await client.cancel(run.run_id)
    before = poller.deliveries
    await asyncio.sleep(6)  # past the longest back-off the run's message could be waiting out
    after = [r.status for r in poller.results[len(poller.results) - (poller.deliveries - before):]] \
        if poller.deliveries > before else []
    assert poller.deliveries - before <= 1 and all(s == "gone" for s in after), after
    with pytest.raises(WorkflowRunCancelledError):
        await run.result(timeout=5)
    assert_every_line_names(lines, run.run_id)


async def test_on_local_aws_an_unknown_workflow_fails_its_run_after_the_window(
        local: LocalAWS, lines: Lines, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(UNKNOWN_WINDOW_ENV, "2")
    monkeypatch.setenv(BACKOFF_ENV, "1")
    client = Client(local.world)
    run = await client.start(TYPO, "A-17")
    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result(timeout=30)
    assert failed.value.code == UNKNOWN_WORKFLOW
    assert f"no workflow named {TYPO!r}" in str(failed.value) and "workflows from " in str(failed.value)
    assert_every_line_names(lines, run.run_id)
