"""Hooks: unique tokens, hook_conflict, disposal, cleanup at run end, token retention, hook_received."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from awsworld.aws import AWSWorld
from awsworld.world import EntityConflictError, HookNotFoundError, RunGoneError

from .helpers import (
    all_events,
    future,
    hook_created,
    hook_disposed,
    hook_received,
    new_run,
    past,
    run_cancelled,
    run_completed,
    run_failed,
    table_items,
    types,
)

RUN_ENDS = {"completed": run_completed, "failed": run_failed, "cancelled": run_cancelled}


def token() -> str:
    return f"tok-{uuid.uuid4().hex}"


async def test_hook_created_makes_a_hook_readable_by_id_token_and_run(world: AWSWorld) -> None:
    run_id = await new_run(world, start=True)
    t = token()
    result = await world.events.create(run_id, hook_created("h1", t, metadata={"m": 1}))
    assert result.event is not None and result.event.event_type == "hook_created" and result.event.slot == 3
    assert result.hook is not None
    assert (result.hook.hook_id, result.hook.run_id, result.hook.token, result.hook.metadata) == (
        "h1", run_id, t, {"m": 1})
    by_id = await world.hooks.get("h1")
    by_token = await world.hooks.get_by_token(t)
    listed = (await world.hooks.list(run_id)).data
    assert by_id.token == by_token.token == t and by_token.run_id == run_id
    assert by_id.metadata == {"m": 1}
    assert [h.hook_id for h in listed] == ["h1"]


async def test_duplicate_hook_created_conflicts_and_writes_nothing(world: AWSWorld) -> None:
    run_id = await new_run(world, start=True)
    t = token()
    await world.events.create(run_id, hook_created("h1", t))
    before = await table_items(world)
    with pytest.raises(EntityConflictError):
        await world.events.create(run_id, hook_created("h1", t))
    assert await table_items(world) == before


async def test_a_token_held_by_another_run_answers_hook_conflict_naming_the_owner(world: AWSWorld) -> None:
    owner = await new_run(world, start=True)
    other = await new_run(world, start=True)
    t = token()
    await world.events.create(owner, hook_created("h-owner", t))
    result = await world.events.create(other, hook_created("h-other", t))
    assert result.hook is None
    assert result.event is not None and result.event.event_type == "hook_conflict"
    assert result.event.correlation_id == "h-other"
    assert result.event.event_data == {"token": t, "conflictingRunId": owner}
    assert types(await all_events(world, other)) == ["run_created", "run_started", "hook_conflict"]
    assert (await world.hooks.list(other)).data == []
    with pytest.raises(HookNotFoundError):
        await world.hooks.get("h-other")
    assert (await world.hooks.get_by_token(t)).run_id == owner


async def test_hook_disposed_deletes_the_hook_and_frees_its_token_at_once(world: AWSWorld) -> None:
    run_id = await new_run(world, start=True)
    other = await new_run(world, start=True)
    t = token()
    await world.events.create(run_id, hook_created("h1", t))
    result = await world.events.create(run_id, hook_disposed("h1"))
    assert result.event is not None and result.event.event_type == "hook_disposed"
    with pytest.raises(HookNotFoundError):
        await world.hooks.get("h1")
    with pytest.raises(HookNotFoundError):
        await world.hooks.get_by_token(t)
    assert (await world.hooks.list(run_id)).data == []
    taken = await world.events.create(other, hook_created("h2", t))
    assert taken.hook is not None and taken.event is not None and taken.event.event_type == "hook_created"
    assert (await world.hooks.get_by_token(t)).run_id == other


async def test_hook_disposed_frees_a_token_even_under_retention(world: AWSWorld) -> None:
    run_id = await new_run(world, start=True)
    other = await new_run(world, start=True)
    t = token()
    await world.events.create(run_id, hook_created("h1", t, retention_until=future(3600)))
    await world.events.create(run_id, hook_disposed("h1"))
    taken = await world.events.create(other, hook_created("h2", t))
    assert taken.event is not None and taken.event.event_type == "hook_created"


async def test_hook_disposed_of_a_missing_hook_is_not_found(world: AWSWorld) -> None:
    run_id = await new_run(world, start=True)
    before = await table_items(world)
    with pytest.raises(HookNotFoundError) as raised:
        await world.events.create(run_id, hook_disposed("ghost"))
    assert raised.value.status == 404
    assert await table_items(world) == before


async def test_a_disposed_hook_id_cannot_be_disposed_twice(world: AWSWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, hook_created("h1", token()))
    await world.events.create(run_id, hook_disposed("h1"))
    with pytest.raises(HookNotFoundError):
        await world.events.create(run_id, hook_disposed("h1"))


@pytest.mark.parametrize("end", RUN_ENDS)
async def test_run_end_deletes_live_hooks_and_frees_their_tokens(world: AWSWorld, end: str) -> None:
    run_id = await new_run(world, start=True)
    other = await new_run(world, start=True)
    tokens = [token(), token()]
    for i, t in enumerate(tokens):
        await world.events.create(run_id, hook_created(f"h{i}", t))
    await world.events.create(run_id, RUN_ENDS[end]())
    assert (await world.hooks.list(run_id)).data == []
    for i, t in enumerate(tokens):
        with pytest.raises(HookNotFoundError):
            await world.hooks.get_by_token(t)
        with pytest.raises(HookNotFoundError):
            await world.hooks.get(f"h{i}")
        taken = await world.events.create(other, hook_created(f"new{i}", t))
        assert taken.event is not None and taken.event.event_type == "hook_created"


async def test_run_end_frees_more_tokens_than_fit_in_one_transaction(world: AWSWorld) -> None:
    run_id = await new_run(world, start=True)
    other = await new_run(world, start=True)
    tokens = [token() for _ in range(34)]  # the commit releases 30; the rest are released right after it
    for i, t in enumerate(tokens):
        await world.events.create(run_id, hook_created(f"h{i}", t))
    await world.events.create(run_id, run_completed())
    assert (await world.hooks.list(run_id, limit=100)).data == []
    for t in (tokens[0], tokens[-1]):
        with pytest.raises(HookNotFoundError):
            await world.hooks.get_by_token(t)
    taken = await world.events.create(other, hook_created("late", tokens[-1]))
    assert taken.event is not None and taken.event.event_type == "hook_created"


async def test_a_token_under_retention_outlives_its_run(world: AWSWorld) -> None:
    run_id = await new_run(world, start=True)
    other = await new_run(world, start=True)
    t = token()
    await world.events.create(run_id, hook_created("h1", t, retention_until=future(3600)))
    await world.events.create(run_id, run_completed())
    held = await world.hooks.get_by_token(t)
    assert (held.run_id, held.hook_id) == (run_id, "h1")
    result = await world.events.create(other, hook_created("h2", t))
    assert result.hook is None
    assert result.event is not None and result.event.event_type == "hook_conflict"
    assert result.event.event_data == {"token": t, "conflictingRunId": run_id}


async def test_a_token_whose_retention_has_passed_is_freed_at_run_end(world: AWSWorld) -> None:
    run_id = await new_run(world, start=True)
    other = await new_run(world, start=True)
    t = token()
    await world.events.create(run_id, hook_created("h1", t, retention_until=past(60)))
    await world.events.create(run_id, run_completed())
    with pytest.raises(HookNotFoundError):
        await world.hooks.get_by_token(t)
    result = await world.events.create(other, hook_created("h2", t))
    assert result.event is not None and result.event.event_type == "hook_created"


async def test_hook_created_on_a_terminal_run_is_gone_and_claims_no_token(world: AWSWorld) -> None:
    run_id = await new_run(world, start=True)
    other = await new_run(world, start=True)
    await world.events.create(run_id, run_completed())
    t = token()
    before = await table_items(world)
    with pytest.raises(RunGoneError):
        await world.events.create(run_id, hook_created("late", t))
    assert await table_items(world) == before
    result = await world.events.create(other, hook_created("h2", t))
    assert result.event is not None and result.event.event_type == "hook_created"


# ---------------------------------------------------------------- hook_received


async def test_hook_received_appends_the_payload(world: AWSWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, hook_created("h1", token()))
    result = await world.events.create(run_id, hook_received("h1", {"body": [1, "x"]}))
    assert result.event is not None and result.event.event_type == "hook_received"
    assert result.event.correlation_id == "h1" and result.event.event_data == {"payload": {"body": [1, "x"]}}
    again = await world.events.create(run_id, hook_received("h1", "second"))
    assert again.event is not None and again.event.slot == result.event.slot + 1


async def test_hook_received_for_a_missing_hook_is_not_found(world: AWSWorld) -> None:
    run_id = await new_run(world, start=True)
    before = await table_items(world)
    with pytest.raises(HookNotFoundError) as raised:
        await world.events.create(run_id, hook_received("ghost", 1))
    assert raised.value.status == 404
    assert await table_items(world) == before


async def test_hook_received_for_a_disposed_hook_is_not_found(world: AWSWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, hook_created("h1", token()))
    await world.events.create(run_id, hook_disposed("h1"))
    with pytest.raises(HookNotFoundError):
        await world.events.create(run_id, hook_received("h1", 1))


async def test_hook_received_on_a_terminal_run_is_gone(world: AWSWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, hook_created("h1", token(), retention_until=future(3600)))
    await world.events.create(run_id, run_completed())
    before = await table_items(world)
    with pytest.raises(RunGoneError) as raised:
        await world.events.create(run_id, hook_received("h1", 1))
    assert raised.value.status == 410
    assert await table_items(world) == before


# ---------------------------------------------------------------- reads


async def test_hooks_get_and_get_by_token_of_unknown_hooks_are_not_found(world: AWSWorld) -> None:
    with pytest.raises(HookNotFoundError):
        await world.hooks.get("ghost")
    with pytest.raises(HookNotFoundError):
        await world.hooks.get_by_token(token())


async def test_hooks_list_pages_through_a_runs_hooks(world: AWSWorld) -> None:
    run_id = await new_run(world, start=True)
    for i in range(5):
        await world.events.create(run_id, hook_created(f"h{i}", token()))
    seen: list[str] = []
    cursor = None
    while True:
        page = await world.hooks.list(run_id, limit=2, cursor=cursor)
        seen.extend(h.hook_id for h in page.data)
        if not page.has_more:
            break
        cursor = page.cursor
    assert sorted(seen) == [f"h{i}" for i in range(5)]


async def test_hook_reads_with_resolve_none_leave_metadata_out(world: AWSWorld) -> None:
    run_id = await new_run(world, start=True)
    t = token()
    await world.events.create(run_id, hook_created("h1", t, metadata={"secret": 1}))
    assert (await world.hooks.get("h1", resolve_data="none")).metadata is None
    assert (await world.hooks.get_by_token(t, resolve_data="none")).metadata is None
    assert (await world.hooks.get("h1")).metadata == {"secret": 1}


async def test_a_second_hook_of_one_run_on_a_held_token_conflicts_with_that_run(world: AWSWorld) -> None:
    run_id = await new_run(world, start=True)
    t = token()
    await world.events.create(run_id, hook_created("h1", t))
    result = await world.events.create(run_id, hook_created("h2", t))
    assert result.hook is None
    assert result.event is not None and result.event.event_type == "hook_conflict"
    assert result.event.event_data == {"token": t, "conflictingRunId": run_id}
    assert [h.hook_id for h in (await world.hooks.list(run_id)).data] == ["h1"]


async def test_a_retained_token_is_free_once_its_retention_passes(world: AWSWorld) -> None:
    run_id = await new_run(world, start=True)
    other = await new_run(world, start=True)
    t = token()
    await world.events.create(run_id, hook_created("h1", t, retention_until=future(1.5)))
    await world.events.create(run_id, run_completed())
    held = await world.events.create(other, hook_created("h2", t))
    assert held.event is not None and held.event.event_type == "hook_conflict"
    await asyncio.sleep(1.6)
    taken = await world.events.create(other, hook_created("h3", t))
    assert taken.event is not None and taken.event.event_type == "hook_created"
    assert (await world.hooks.get_by_token(t)).run_id == other
