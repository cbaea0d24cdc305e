"""``World.delete_run`` (a right-to-erasure request), the same on every World (moto, DynamoDB Local, memory):
``world/rules/erasure.py`` decides, ``_memory/storage.py`` and ``aws/log/erasure.py`` delete.

- An ended run goes whole: it is not found, its events, steps and hooks listings answer as for an id no run ever
  had, its streams are gone, no S3
  object is left under ``runs/<id>/``, its token resumes as one no hook holds, the ``resumeOnce`` id its hook
  recorded names nothing, and a run created with its id again is a new run. Every other run reads as before, and
  on AWS every item and object not of the run is still there, unchanged.
- A token its run released and another run's hook claimed since stays that hook's.
- A second deletion (a retry) answers False, an empty id is refused (``InvalidInputError``, ``runId``); an
  unfinished run is refused with ``EntityConflictError`` and nothing is deleted.
"""

from __future__ import annotations

from typing import Any

import pytest

from awsworld.world import (
    EntityConflictError,
    HookClosedError,
    HookNotFoundError,
    InvalidInputError,
    RunNotFoundError,
)

from .helpers import (
    AnyWorld,
    all_events,
    bucket_keys,
    hook_created,
    module_world,
    new_run,
    on_aws,
    run_completed,
    run_created,
    step_completed,
    step_created,
    step_started,
    stored,
    table_items,
    unique,
)
from .helpers import attr_set as attr_set_event

module_local_aws, world = module_world()

BIG = "x" * (20 * 1024)  # above the inline value limit (16 KiB): stored in S3 on AWS


async def _run_with_everything(world: AnyWorld) -> tuple[str, str, str]:
    """A completed run with a step whose values are in S3, attributes, a hook resumed with a ``resumeOnce`` id
    and a stream: its id, its hook's token and the resume id."""
    run_id = await new_run(world, start=True, input={"email": "someone@example.com", "pad": BIG})
    step_id, hook_id, token, resume_id = unique("step"), unique("hook"), unique("tok"), unique("resume")
    for event in (step_created(step_id, input=[BIG]), step_started(step_id), step_completed(step_id, BIG),
                  attr_set_event(customer="c-17"), hook_created(hook_id, token, metadata={"address": BIG}),
                  {"eventType": "hook_received", "correlationId": hook_id,
                   "eventData": {"payload": {"address": "1 Main St"}, "resumeId": resume_id, "resumeOnce": True}}):
        await world.events.create(run_id, event)
    await world.streams.write_multi(run_id, "default", [b"personal\n", BIG.encode()])
    await world.events.create(run_id, run_completed({"sent": BIG}))
    return run_id, token, resume_id


async def _contract_view(world: AnyWorld, run_id: str) -> dict[str, Any]:
    """What a reader of the contract sees of a run."""
    return {"run": (await world.runs.get(run_id)).model_dump(),
            "events": [e.model_dump() for e in await all_events(world, run_id)],
            "steps": [s.model_dump() for s in (await world.steps.list(run_id)).data],
            "hooks": [h.model_dump() for h in (await world.hooks.list(run_id)).data],
            "streams": await world.streams.list(run_id)}


async def _listings(world: AnyWorld, run_id: str) -> list[object]:
    """What the run's events, steps and hooks listings answer: their data, or the error they raise."""
    answers: list[object] = []
    for listing in (world.events.list, world.steps.list, world.hooks.list):
        try:
            answers.append((await listing(run_id)).data)
        except RunNotFoundError as error:
            answers.append(type(error))
    return answers


def _of_run(item: dict[str, Any], run_id: str) -> bool:
    return item["pk"]["S"] == f"RUN#{run_id}" or item.get("runId", {}).get("S") == run_id


async def test_an_ended_run_is_deleted_whole_and_nothing_else_is(world: AnyWorld) -> None:
    erased, token, resume_id = await _run_with_everything(world)
    kept, kept_token, _ = await _run_with_everything(world)
    kept_before = await _contract_view(world, kept)
    aws = on_aws(world)
    items_before = await table_items(aws) if aws else []
    keys_before = await bucket_keys(world)
    if aws:
        assert any(k.startswith(f"runs/{erased}/") for k in keys_before)  # (the test puts values in S3)

    assert await world.delete_run(erased) is True

    with pytest.raises(RunNotFoundError):
        await world.runs.get(erased)
    assert await _listings(world, erased) == await _listings(world, unique("wrun"))  # as if it never existed
    assert await world.streams.list(erased) == []
    with pytest.raises(HookNotFoundError) as refused:
        await world.hooks.get_by_token(token)
    assert refused.value.disposed_hook is None  # (no record says a hook of the run held it)
    assert await world.hooks.resumed_by(resume_id) is None
    assert await _contract_view(world, kept) == kept_before
    with pytest.raises(HookClosedError) as closed:  # the other run's released token still says whose it was
        await world.hooks.get_by_token(kept_token)
    assert closed.value.run_id == kept
    if aws:
        assert await table_items(aws) == [i for i in items_before if not _of_run(i, erased)]
        assert await bucket_keys(world) == [k for k in keys_before if not k.startswith(f"runs/{erased}/")]

    assert await world.delete_run(erased) is False  # a retry: nothing left, no error
    again = await world.events.create(erased, run_created(input={"fresh": True}))
    assert again.run is not None and again.run.run_id == erased and again.run.seq == 1
    assert (await world.runs.get(erased)).input == {"fresh": True}


async def test_a_token_another_run_claimed_since_stays_its_own(world: AnyWorld) -> None:
    first = await new_run(world, start=True)
    token = unique("tok")
    await world.events.create(first, hook_created(unique("hook"), token))
    await world.events.create(first, run_completed())  # releases the token
    second = await new_run(world, start=True)
    hook_id = unique("hook")
    await world.events.create(second, hook_created(hook_id, token))

    assert await world.delete_run(first) is True

    holder = await world.hooks.get_by_token(token)
    assert (holder.run_id, holder.hook_id) == (second, hook_id)


@pytest.mark.parametrize("status", ["pending", "running"])
async def test_an_unfinished_run_is_refused_and_nothing_is_deleted(world: AnyWorld, status: str) -> None:
    run_id = await new_run(world, start=status == "running", input={"email": "someone@example.com", "pad": BIG})
    await world.events.create(run_id, hook_created(unique("hook"), unique("tok")))
    before, keys_before = await stored(world), await bucket_keys(world)

    with pytest.raises(EntityConflictError, match=r"cancel it .* or fail it"):
        await world.delete_run(run_id)

    assert await stored(world) == before
    assert await bucket_keys(world) == keys_before
    assert (await world.runs.get(run_id)).status == status


async def test_an_unknown_run_is_no_error_and_a_bad_id_is_refused(world: AnyWorld) -> None:
    assert await world.delete_run(unique("wrun")) is False
    with pytest.raises(InvalidInputError) as refused:
        await world.delete_run("")
    assert refused.value.field == "runId"
