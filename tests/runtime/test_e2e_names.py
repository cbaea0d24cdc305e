"""Names where a person reads the log (issue 26 item 5): ``with_name(...).call`` for a step and a child call,
``child_options(name=)``, ``sleep(name=)``, ``create_hook(name=)``, map item labels (``name``/``item_name``) and
parallel branch names, recorded as ``displayName`` on the ``*_created`` events, on the in-memory World and the
emulator (moto's server), and shown by ``Run.events()``, the timeline rows (``awsworld events``), ``describe``'s
waiting list and the run viewer's lanes. A name is display only: a run recorded under one name replays on code
that uses another (or none) without diverging. A name that is too long or blank is refused where it is given,
with nothing written."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from awsworld import (
    InvalidNameError,
    child_options,
    create_hook,
    parallel,
    sleep,
    step,
    with_name,
    workflow,
)
from awsworld import map as durable_map
from awsworld._engine.ops import DISPLAY_NAME_FIELD
from awsworld._timeline import timeline_rows
from awsworld.authoring.names import MAX_NAME_LENGTH
from awsworld.client.waits import describe_wait, waiting_on
from awsworld.ui.model import picture
from awsworld.world.errors import InvalidInputError

from .conftest import BOTH, E2E, deployed, on_backends

MAX_WORKFLOW_NAME_LENGTH = 497  # a run's queue, __wkf_workflow_<name>, is at most 512 characters
MAX_STEP_NAME_LENGTH = 512  # a step_created's stepName

e2e_backend = on_backends(BOTH)


@step(name="names.charge")
async def charge(order: str, cents: int) -> str:
    return f"charged {order} {cents}"


@workflow(name="names.child")
async def refund(order: str) -> str:
    return f"refunded {order}"


@workflow(name="names.named")
async def named_calls(order: str, token: str) -> list[str]:
    out = [await with_name("charge card").call(charge, order, 500)]
    out.append(await with_name("refund first try").call(refund, order))
    handle = await child_options(name="refund again").start(refund, order)
    out.append(await handle)
    await sleep(0.2, name="cool-down")
    async with create_hook(token=token, name="manager approval") as hook:
        out.append(str(await hook))
    out.append(await charge(order, 1))  # an unnamed call records no name
    return out


async def _created(e2e: E2E, run: Any) -> dict[str, dict[str, Any]]:
    """Correlation id -> the data of its ``*_created`` event, as ``Run.events()`` returns it."""
    return {str(e.correlation_id): dict(e.event_data or {}) for e in await run.events()
            if e.event_type in ("step_created", "wait_created", "hook_created")}


async def test_per_call_names_are_recorded_and_shown(e2e: E2E) -> None:
    token = f"names-{uuid.uuid4().hex}"
    run = await e2e.start(named_calls, "o-1", token)
    await e2e.hook_ready(token, run)
    # describe's waiting list names the hook by its display name while the run waits on it.
    events = await run.events()
    (waiting,) = waiting_on("running", await run.steps(), events)
    assert waiting["kind"] == "hook" and waiting["displayName"] == "manager approval"
    assert describe_wait(waiting).startswith(f"hook 'manager approval' {token}")
    await e2e.client.resume_hook(token, "yes")
    assert await run.result(timeout=60) == ["charged o-1 500", "refunded o-1", "refunded o-1", "yes",
                                            "charged o-1 1"]
    created = await _created(e2e, run)
    names = [data.get(DISPLAY_NAME_FIELD) for data in created.values()]
    # charge, the first child's start step (+ its outcome hook), the second child's, the sleep, the hook, charge
    assert names == ["charge card", "refund first try", None, "refund again", None, "cool-down",
                     "manager approval", None]
    # The step keeps its registered name: the display name is beside it, not instead of it.
    first = next(iter(created.values()))
    assert first["stepName"] == "names.charge"
    rows = timeline_rows(await run.events())
    whats = {row.what for row in rows}
    assert "charge card (names.charge)" in whats and "cool-down" in whats
    assert f"manager approval ({token})" in whats
    assert {row.to_json()["displayName"] for row in rows if row.event_type == "step_completed"} >= {"charge card"}
    lanes = {lane.label: lane for lane in picture(run.run_id, await run.events()).lanes}
    assert lanes["charge card"].detail == "names.charge" and lanes["cool-down"].kind == "wait"
    assert lanes["refund again"].child_run_id is not None and lanes["manager approval"].kind == "hook"


@workflow(name="names.batches")
async def labelled_batches(orders: list[str]) -> dict[str, Any]:
    mapped = await durable_map(charge_one, orders, name="charge cards", item_name=lambda order, i: f"order {order}")
    numbered = await durable_map(charge_one, orders[:2], name="recharge")
    both = await parallel(charge(orders[0], 7), lambda: charge(orders[1], 8), name="pair",
                          names=["left", None])
    return {"mapped": mapped.values(), "names": [item.name for item in mapped],
            "numbered": [item.name for item in numbered], "both": both.values(),
            "branches": [item.name for item in both]}


async def charge_one(order: str) -> str:
    return await with_name("charge card").call(charge, order, 100)


async def test_map_items_and_parallel_branches_label_their_calls(e2e: E2E) -> None:
    run = await e2e.start(labelled_batches, ["a", "b", "c"])
    out = await run.result(timeout=60)
    assert out["mapped"] == ["charged a 100", "charged b 100", "charged c 100"]
    assert out["names"] == ["charge cards / order a", "charge cards / order b", "charge cards / order c"]
    assert out["numbered"] == ["recharge / #0", "recharge / #1"]
    assert out["both"] == ["charged a 7", "charged b 8"] and out["branches"] == ["pair / left", "pair / #1"]
    names = [data.get(DISPLAY_NAME_FIELD) for data in (await _created(e2e, run)).values()]
    assert names == [
        "charge cards / order a / charge card", "charge cards / order b / charge card",
        "charge cards / order c / charge card", "recharge / #0 / charge card", "recharge / #1 / charge card",
        "pair / left", "pair / #1"]


# ----------------------------------------------------------------------------------------- replay


@workflow(name="names.renamed")
async def renamed(order: str) -> str:
    first = await with_name("old name").call(charge, order, 1)
    await sleep(2, name="old sleep")
    return first + " / " + await charge(order, 2)


async def renamed_code(order: str) -> str:
    first = await charge(order, 1)  # the name dropped from the first call...
    await sleep(2)
    return first + " / " + await with_name("new name").call(charge, order, 2)  # ...and given to the last


async def test_a_changed_name_does_not_diverge_a_run_in_flight(e2e: E2E) -> None:
    token_run = await e2e.start(renamed, "r-1")
    await e2e.wait_for_event(token_run, "wait_created")
    with deployed(renamed, renamed_code):
        assert await token_run.result(timeout=60) == "charged r-1 1 / charged r-1 2"
    events = await token_run.events()
    assert not [e for e in events if e.event_type == "run_failed"]
    names = [data.get(DISPLAY_NAME_FIELD) for data in (await _created(e2e, token_run)).values()]
    assert names[:2] == ["old name", "old sleep"]  # what was recorded stays as it was recorded
    assert names[2] == "new name"  # declared after the deploy (the sleep outlasts it): the new code's name


# ----------------------------------------------------------------------------------------- bad names


@workflow(name="names.too_long")
async def too_long(length: int) -> str:
    try:
        await with_name("x" * length).call(charge, "o", 1)
    except InvalidNameError as error:
        return f"refused: {error}"
    return "accepted"


@workflow(name="names.bad_label")
async def bad_label() -> str:
    try:
        await durable_map(charge_one, ["a", "b"], item_name=lambda order, i: "" if i else order)
    except InvalidNameError as error:
        return f"refused: {error}"
    return "accepted"


async def test_a_name_over_the_limit_is_refused_where_it_is_given_and_nothing_is_written(e2e: E2E) -> None:
    run = await e2e.start(too_long, MAX_NAME_LENGTH + 1)
    out = await run.result(timeout=60)
    assert out.startswith("refused: name is 129 characters long; the limit is 128")
    assert not [e for e in await run.events() if e.event_type == "step_created"]
    assert await (await e2e.start(too_long, MAX_NAME_LENGTH)).result(timeout=60) == "accepted"
    run = await e2e.start(bad_label)
    assert (await run.result(timeout=60)).startswith("refused: item_name of item 1 must not be empty")
    assert not [e for e in await run.events() if e.event_type == "step_created"]


def test_bad_names_raise_a_typed_error_before_any_call() -> None:
    for bad in ("", "  ", "line\nbreak", "y" * (MAX_NAME_LENGTH + 1)):
        with pytest.raises(InvalidNameError):
            with_name(bad)
        with pytest.raises(InvalidNameError):
            child_options(name=bad)
    with pytest.raises(InvalidNameError, match="must be a string"):
        with_name(3)  # type: ignore[arg-type]
    assert issubclass(InvalidNameError, ValueError)


async def test_the_world_refuses_a_display_name_over_its_limit(e2e: E2E) -> None:
    """The World's own check (a writer that is not the runtime): a ``displayName`` over 512 characters is
    refused with ``InvalidInputError`` and writes nothing."""
    run = await e2e.start(too_long, 1)
    await run.result(timeout=60)
    before = len(await run.events())
    with pytest.raises(InvalidInputError):
        await e2e.world.events.create(run.run_id, {"eventType": "wait_created", "correlationId": "wait_99",
                                                   "eventData": {"resumeAt": "2030-01-01T00:00:00+00:00",
                                                                 DISPLAY_NAME_FIELD: "z" * 513}})
    assert len(await run.events()) == before


async def test_names_outside_a_workflow_are_plain_calls() -> None:
    assert await with_name("charge card").call(charge, "o", 3) == "charged o 3"
    with pytest.raises(TypeError, match="needs a @step or a @workflow"):
        await with_name("n").call(_plain, 1)  # type: ignore[arg-type]


async def _plain(x: int) -> int:
    return x



@step(name="s" * MAX_STEP_NAME_LENGTH)
async def longest_named_step(n: int) -> int:
    return n + 1


@workflow(name="w" * MAX_WORKFLOW_NAME_LENGTH)
async def longest_named(n: int) -> int:
    return await longest_named_step(n)


async def test_the_longest_workflow_and_step_names_run(e2e: E2E) -> None:
    run = await e2e.start(longest_named, 1)
    assert await run.result(timeout=60) == 2


async def test_a_workflow_or_step_name_the_world_cannot_take_is_refused_where_it_is_declared() -> None:
    """docs/operate/limits.md: ``@workflow(name=)`` of 498 characters and ``@step(name=)`` of 513 used to
    register; every start of such a workflow then failed after writing its run (``RunStartError``: its queue name
    is over 512 characters), and a run calling such a step hung, the World refusing the step's declaration at every
    redelivery. Now the decorator refuses the name, typed, naming the limit."""
    with pytest.raises(InvalidNameError, match="a workflow's name is at most 497 characters"):
        @workflow(name="n" * (MAX_WORKFLOW_NAME_LENGTH + 1))
        async def never(n: int) -> int:
            return n
    with pytest.raises(InvalidNameError, match="a step's name is at most 512 characters"):
        @step(name="n" * (MAX_STEP_NAME_LENGTH + 1))
        async def never_step(n: int) -> int:
            return n
    with pytest.raises(InvalidNameError, match="no whitespace"):
        @workflow(name="two words")
        async def spaced() -> None:
            return None
    from awsworld.authoring import definitions  # the limits the docs state

    assert (definitions.MAX_WORKFLOW_NAME_LENGTH, definitions.MAX_STEP_NAME_LENGTH) == (497, 512)
