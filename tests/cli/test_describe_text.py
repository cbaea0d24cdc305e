"""``awsworld describe``'s text on runs of the memory World (``cli.describe.describe_document``, the document the CLI
reads from the stack, printed as the command prints it): a long error is whole once, on its ``error`` line, not
twice (the status line repeated a 32 KB message); a parked run whose log has nothing open waits on code, not on
"its next delivery" (a delivery replays it and parks it again); and ``skip`` of a parked run's wait says it stays
parked, where it said "the run goes on now"."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from awsworld import WorkflowRunFailedError, sleep, step, workflow
from awsworld._engine.parking import PARKED_ATTRIBUTE, parked_run
from awsworld.authoring.definitions import REGISTRY, WorkflowDef
from awsworld.cli.describe import STATUS_ERROR_CHARS, _print_description, describe_document
from awsworld.cli.skip import skipped_text
from awsworld.testing import WorkflowTestEnv

LONG = "no stock for item " + "x" * 2000


@step(name="describe_text.reserve", max_retries=0)
async def reserve() -> None:
    raise LookupError(LONG)


@workflow(name="describe_text.order")
async def order() -> None:
    await reserve()


@step(name="describe_text.label")
async def label(text: str) -> str:
    return text


@workflow(name="describe_text.sleeps")
async def sleeps(text: str) -> None:
    await label(text)
    await sleep("1h")


async def relabels(text: str) -> None:
    await label(text + "!")
    await sleep("1h")


async def test_a_long_error_is_whole_once(capsys: pytest.CaptureFixture[str]) -> None:
    async with WorkflowTestEnv() as env:
        run = await env.client.start(order)
        with pytest.raises(WorkflowRunFailedError):
            await run.result()
        _print_description(await describe_document(env.client, run.run_id))
    text = capsys.readouterr().out
    status = next(line for line in text.splitlines() if line.startswith("status "))
    assert status.endswith("… (whole below))") and len(status) < STATUS_ERROR_CHARS + 80, status
    assert f"error     LookupError: {LONG}\n" in text and text.count(LONG) == 1, "whole on its error line only"


async def test_a_parked_run_with_nothing_open_waits_on_code(capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWSWORLD_ON_DIVERGENCE", "park")
    async with WorkflowTestEnv() as env:
        run = await env.client.start(sleeps, "a")
        await env.idle()
        monkeypatch.setitem(REGISTRY.workflows, "describe_text.sleeps", WorkflowDef("describe_text.sleeps", relabels))
        await env.client.skip_wait(run.run_id)
        await env.idle()
        view = await env.world.runs.get(run.run_id, resolve_data="none")
        assert view.status == "running" and PARKED_ATTRIBUTE in view.attributes
        document = await describe_document(env.client, run.run_id)
        _print_description(document)
    text = capsys.readouterr().out
    assert document["waitingOn"] == [] and "status    parked\n" in text
    assert "waits on  code that replays its log (see parked above)\n" in text, text
    assert "next delivery" not in text


async def test_skipping_a_parked_runs_sleep_says_it_stays_parked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWSWORLD_ON_DIVERGENCE", "park")
    async with WorkflowTestEnv() as env:
        run = await env.client.start(sleeps, "a")
        await env.idle()
        monkeypatch.setitem(REGISTRY.workflows, "describe_text.sleeps", WorkflowDef("describe_text.sleeps", relabels))
        await env.client.wake(run.run_id)  # replayed against the changed code: parked, its sleep still open
        await env.idle()
        view = await env.world.runs.get(run.run_id, resolve_data="none")
        assert PARKED_ATTRIBUTE in view.attributes
        done = await env.client.skip_wait(run.run_id)
        after = await env.world.runs.get(run.run_id, resolve_data="none")  # what the command reads after the skip
        text = skipped_text(done, parked=parked_run(after.status, after.attributes) is not None)
    assert text.startswith("skipped wait wait_2: until ") and f" of run {run.run_id} (recorded as " in text, text
    assert text.endswith(f"the run is parked: it goes on once code replays its log (`awsworld describe "
                         f"{run.run_id}` says where)"), text
    assert "goes on now" not in text


@workflow(name="describe_text.child")
async def child(n: int) -> int:
    return n


@workflow(name="describe_text.parent")
async def parent() -> int:
    await label("x")
    return await child(1) + await child(2)


def _steps_listings(env: WorkflowTestEnv, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The ``resolve_data`` of each ``steps.list`` call the env's World answers from now on (filled as they come)."""
    listed: list[object] = []
    steps_list = env.world.steps.list

    async def recorded(*args: object, **kwargs: object) -> object:
        listed.append(kwargs.get("resolve_data"))
        return await steps_list(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(env.world.steps, "list", recorded)
    return listed


async def test_describe_reads_the_steps_once_without_their_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """It read them twice (its own list, then ``Run.children``'s), values and all: a 200-step fan-out's describe took
    3.2 s under dev, 1.7 s now, and a step's large result was fetched to show nothing of it."""
    async with WorkflowTestEnv() as env:
        run = await env.client.start(parent)
        assert await run.result() == 3
        listed = _steps_listings(env, monkeypatch)
        document = await describe_document(env.client, run.run_id)
    assert listed == ["none"], listed
    assert [(c["runId"], c["status"]) for c in document["children"]] == [
        (f"{run.run_id}.step_2", "completed"), (f"{run.run_id}.step_4", "completed")]
    assert [s["name"] for s in document["steps"]["list"]] == ["describe_text.label", "awsworld.start_child",
                                                              "awsworld.start_child"]


@step(name="describe_text.tick")
async def tick(n: int) -> int:
    return n


@workflow(name="describe_text.long")
async def long_history(n: int) -> int:
    total = 0
    for i in range(n):
        total += await tick(i)
    return total


async def test_describe_reads_a_long_runs_steps_in_pages_of_a_thousand(monkeypatch: pytest.MonkeyPatch) -> None:
    """``describe`` of a 3,000-step loop under ``awsworld dev`` took 16 s: it listed the steps 100 at a time
    (``steps.list``'s default), 30 Queries that moto answers by sorting the run's whole partition. It takes the
    largest page a World gives, so 1,100 steps are two reads, in call order."""
    async with WorkflowTestEnv() as env:
        run = await env.client.start(long_history, 1100)
        assert await run.result() == sum(range(1100))
        steps_api = env.client.world.steps
        listed = steps_api.list
        limits: list[int] = []

        async def counted(run_id: str, *, cursor: str | None = None, limit: int = 100,
                          resolve_data: Any = "all") -> Any:
            limits.append(limit)
            return await listed(run_id, cursor=cursor, limit=limit, resolve_data=resolve_data)

        monkeypatch.setattr(steps_api, "list", counted)
        document = await describe_document(env.client, run.run_id)
    assert document["steps"]["total"] == 1100 and document["steps"]["byStatus"] == {"completed": 1100}
    assert [s["stepId"] for s in document["steps"]["list"][:3]] == ["step_1", "step_2", "step_3"]
    assert document["steps"]["list"][-1]["stepId"] == "step_1100"
    assert limits == [1000, 1000], limits


@step(name="describe_text.book")
async def book(what: str) -> str:
    return f"booked {what}"


@step(name="describe_text.pay", max_retries=0)
async def pay(what: str) -> None:
    raise LookupError(f"card declined for {what}")


@step(name="describe_text.cancel", max_retries=0)
async def cancel_booking(booking: str) -> None:
    if "hotel" in booking:
        raise RuntimeError("cancellation refused")


@workflow(name="describe_text.trip")
async def trip() -> None:
    """A saga (docs/how-to/saga.md's ``book_trip``, small): two bookings, a payment that fails, the compensations
    newest first, and an error naming what could not be undone."""
    booked = [await book("flight"), await book("hotel")]
    try:
        await pay("trip")
    except Exception as failure:
        not_undone = []
        for booking in reversed(booked):
            try:
                await cancel_booking(booking)
            except Exception:
                not_undone.append(booking)
        raise RuntimeError(f"{failure}; not undone: {', '.join(not_undone)}") from failure


async def test_a_failed_runs_rerun_hint_names_the_steps_it_completed_which_a_rerun_repeats(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed run's hint (``describe``'s ``re-run`` line, the viewer's) sent every failed run to ``awsworld
    rerun`` once its cause is fixed: a saga's run with a booking not undone was told to book again, which
    docs/how-to/saga.md warns against. A run that completed steps is told that a rerun runs them again, by name, and
    to rerun only once what they did is undone or safe to repeat (``_timeline.rerun_hint``); a run that completed
    none keeps the plain hint. Describe still reads the steps once, without values."""
    from awsworld.ui import create_app

    async with WorkflowTestEnv() as env:
        saga = await env.client.start(trip)
        with pytest.raises(WorkflowRunFailedError, match="not undone: booked hotel"):
            await saga.result()
        plain = await env.client.start(order)
        with pytest.raises(WorkflowRunFailedError):
            await plain.result()
        listed = _steps_listings(env, monkeypatch)
        hint = (await describe_document(env.client, saga.run_id))["rerunHint"]
        assert listed == ["none"], listed
        monkeypatch.undo()
        plain_hint = (await describe_document(env.client, plain.run_id))["rerunHint"]
        transport = httpx.ASGITransport(app=create_app(env.world))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            page = (await http.get(f"/runs/{saga.run_id}")).text
    assert hint == (f"once the cause is fixed, `awsworld rerun {saga.run_id}` starts a new run of its workflow with "
                    "this input, on the newest code; every step runs again, the 3 this run completed too "
                    "(2x describe_text.book, describe_text.cancel): rerun only once what they did is undone or safe to "
                    "repeat"), hint
    assert plain_hint == (f"once the cause is fixed, `awsworld rerun {plain.run_id}` starts a new run of its workflow "
                          "with this input, on the newest code (every step runs again)"), plain_hint
    assert f"<th>re-run</th><td>{hint.replace(chr(39), '&#x27;')}</td>" in page, "the viewer says the same"
