"""Hooks: unique tokens, hook_conflict, disposal, cleanup at run end, token retention, hook_received (and its
resume ids: a repeat of one on a hook records nothing)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import httpx
import pytest

from awsworld import Client
from awsworld.aws.keys import token_key
from awsworld.aws.log import entities_api
from awsworld.durable.hook_payloads import is_heartbeat
from awsworld.world import EntityConflictError, HookNotFoundError, InvalidInputError, RunGoneError
from awsworld.world.errors import HookAlreadyReceivedError, HookClosedError, HookResumedElsewhereError
from awsworld.world.events import MAX_HOOK_TOKEN_LENGTH
from awsworld.world.rules.requests import MAX_TOKEN_BYTES

from .helpers import (
    AnyWorld,
    all_events,
    another_process,
    aws_world,
    bucket_keys,
    future,
    hook_created,
    hook_disposed,
    hook_received,
    new_run,
    on_aws,
    past,
    per_test_world,
    run_cancelled,
    run_completed,
    run_failed,
    stored,
    table_items,
    types,
)

world = per_test_world()  # hook ids and tokens are global: each test on empty storage

RUN_ENDS = {"completed": run_completed, "failed": run_failed, "cancelled": run_cancelled}


def token() -> str:
    return f"tok-{uuid.uuid4().hex}"


async def test_hook_created_makes_a_hook_readable_by_id_token_and_run(world: AnyWorld) -> None:
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


async def test_a_hook_created_with_payload_codec_reads_back_so_and_others_read_as_no_codecs(world: AnyWorld) -> None:
    """``payloadCodec`` (a ``create_hook(codec=...)`` hook's mark) is kept on the hook: ``Hook.payload_codec`` by id,
    by token and in a run's list; a hook created without it (every hook before the mark existed) reads False. The
    AWS World stores the attribute only when true, so a plain hook's item does not grow."""
    run_id = await new_run(world, start=True)
    coded, plain = token(), token()
    created = await world.events.create(run_id, {**hook_created("h1", coded),
                                                 "eventData": {"token": coded, "payloadCodec": True}})
    await world.events.create(run_id, hook_created("h2", plain))
    assert created.hook is not None and created.hook.payload_codec is True
    assert (await world.hooks.get("h1")).payload_codec is True
    assert (await world.hooks.get_by_token(coded, resolve_data="none")).payload_codec is True
    assert (await world.hooks.get_by_token(plain)).payload_codec is False
    assert {h.hook_id: h.payload_codec for h in (await world.hooks.list(run_id)).data} == {"h1": True, "h2": False}
    assert (await world.hooks.get("h1")).to_wire()["payloadCodec"] is True
    if (aws := on_aws(world)) is not None:
        hooks = {item["sk"]["S"]: item for item in await table_items(aws) if item["sk"]["S"].startswith("HOOK#")}
        assert hooks["HOOK#h1"]["payloadCodec"] == {"BOOL": True}
        assert "payloadCodec" not in hooks["HOOK#h2"]


async def test_duplicate_hook_created_conflicts_and_writes_nothing(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    t = token()
    await world.events.create(run_id, hook_created("h1", t))
    before = await stored(world)
    with pytest.raises(EntityConflictError):
        await world.events.create(run_id, hook_created("h1", t))
    assert await stored(world) == before


async def test_a_token_held_by_another_run_answers_hook_conflict_naming_the_owner(world: AnyWorld) -> None:
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


async def test_hook_disposed_deletes_the_hook_and_frees_its_token_at_once(world: AnyWorld) -> None:
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


async def test_hook_disposed_frees_a_token_even_under_retention(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    other = await new_run(world, start=True)
    t = token()
    await world.events.create(run_id, hook_created("h1", t, retention_until=future(3600)))
    await world.events.create(run_id, hook_disposed("h1"))
    taken = await world.events.create(other, hook_created("h2", t))
    assert taken.event is not None and taken.event.event_type == "hook_created"


async def test_hook_disposed_of_a_missing_hook_is_not_found(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    before = await stored(world)
    with pytest.raises(HookNotFoundError) as raised:
        await world.events.create(run_id, hook_disposed("ghost"))
    assert raised.value.status == 404
    assert await stored(world) == before


async def test_a_disposed_hook_id_cannot_be_disposed_twice(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, hook_created("h1", token()))
    await world.events.create(run_id, hook_disposed("h1"))
    with pytest.raises(HookNotFoundError):
        await world.events.create(run_id, hook_disposed("h1"))


@pytest.mark.parametrize("end", RUN_ENDS)
async def test_run_end_deletes_live_hooks_and_frees_their_tokens(world: AnyWorld, end: str) -> None:
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


async def test_run_end_frees_more_tokens_than_fit_in_one_transaction(world: AnyWorld) -> None:
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


async def test_a_token_under_retention_outlives_its_run(world: AnyWorld) -> None:
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


async def test_a_token_whose_retention_has_passed_is_freed_at_run_end(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    other = await new_run(world, start=True)
    t = token()
    await world.events.create(run_id, hook_created("h1", t, retention_until=past(60)))
    await world.events.create(run_id, run_completed())
    with pytest.raises(HookNotFoundError):
        await world.hooks.get_by_token(t)
    result = await world.events.create(other, hook_created("h2", t))
    assert result.event is not None and result.event.event_type == "hook_created"


async def test_hook_created_on_a_terminal_run_is_gone_and_claims_no_token(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    other = await new_run(world, start=True)
    await world.events.create(run_id, run_completed())
    t = token()
    before = await stored(world)
    with pytest.raises(RunGoneError):
        await world.events.create(run_id, hook_created("late", t))
    assert await stored(world) == before
    result = await world.events.create(other, hook_created("h2", t))
    assert result.event is not None and result.event.event_type == "hook_created"


# ---------------------------------------------------------------- hook_received


async def test_hook_received_appends_the_payload(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, hook_created("h1", token()))
    result = await world.events.create(run_id, hook_received("h1", {"body": [1, "x"]}))
    assert result.event is not None and result.event.event_type == "hook_received"
    assert result.event.correlation_id == "h1" and result.event.event_data == {"payload": {"body": [1, "x"]}}
    again = await world.events.create(run_id, hook_received("h1", "second"))
    assert again.event is not None and again.event.slot == result.event.slot + 1


async def test_hook_received_for_a_missing_hook_is_not_found(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    before = await stored(world)
    with pytest.raises(HookNotFoundError) as raised:
        await world.events.create(run_id, hook_received("ghost", 1))
    assert raised.value.status == 404
    assert await stored(world) == before


async def test_hook_received_for_a_disposed_hook_is_not_found(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, hook_created("h1", token()))
    await world.events.create(run_id, hook_disposed("h1"))
    with pytest.raises(HookNotFoundError):
        await world.events.create(run_id, hook_received("h1", 1))


async def test_hook_received_on_a_terminal_run_is_gone(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, hook_created("h1", token(), retention_until=future(3600)))
    await world.events.create(run_id, run_completed())
    before = await stored(world)
    with pytest.raises(RunGoneError) as raised:
        await world.events.create(run_id, hook_received("h1", 1))
    assert raised.value.status == 410
    assert await stored(world) == before


async def test_a_token_that_cannot_be_a_key_is_invalid_input_and_claims_nothing(world: AnyWorld) -> None:
    """1,024 characters is the limit, but DynamoDB keys are bytes: 700 euro signs are 2,100 bytes of UTF-8."""
    run_id = await new_run(world, start=True)
    before = await stored(world)
    with pytest.raises(InvalidInputError) as raised:
        await world.events.create(run_id, hook_created("h1", "€" * 700))
    assert raised.value.field == "eventData.token"
    assert await stored(world) == before
    longest = "t" * 1024
    await world.events.create(run_id, hook_created("h2", longest))
    assert (await world.hooks.get_by_token(longest)).hook_id == "h2"


# ---------------------------------------------------------------- hook_received with a resume id


def resumed(hook_id: str, payload: object, resume_id: str) -> dict[str, object]:
    return {**hook_received(hook_id, payload), "eventData": {"payload": payload, "resumeId": resume_id}}


def resume_markers(items: list[dict[str, object]]) -> list[dict[str, object]]:
    return [i for i in items if i["sk"]["S"].startswith("RESUME#")]  # type: ignore[index]


async def test_a_repeated_resume_id_is_refused_with_the_first_event_and_writes_nothing(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, hook_created("h1", token()))
    big = "x" * (40 * 1024)  # over the inline limit: the value goes to S3 before the commit
    first = await world.events.create(run_id, resumed("h1", {"n": 1, "big": big}, "delivery-1"))
    assert first.event is not None and first.event.event_data["resumeId"] == "delivery-1"
    before, objects = await stored(world), await bucket_keys(world)
    with pytest.raises(HookAlreadyReceivedError) as raised:
        await world.events.create(run_id, resumed("h1", {"n": 2, "big": big}, "delivery-1"))
    error = raised.value
    assert isinstance(error, EntityConflictError) and error.status == 409 and error.code == "hook-already-received"
    assert error.hook_id == "h1" and error.event_id == first.event.event_id
    assert error.event is not None and error.event.event_id == first.event.event_id
    assert error.event.event_data == {"payload": {"n": 1, "big": big}, "resumeId": "delivery-1"}
    assert await stored(world) == before, "the repeat wrote nothing"
    assert await bucket_keys(world) == objects, "the repeat's value was stored, then discarded"
    assert types(await all_events(world, run_id)) == ["run_created", "run_started", "hook_created", "hook_received"]


async def test_the_resume_marker_is_tiny_and_lives_in_the_runs_partition(world: AnyWorld) -> None:
    aws = aws_world(world)
    run_id = await new_run(aws, start=True)
    await aws.events.create(run_id, hook_created("h1", token()))
    long_id = "k" * 256  # the longest resume id: the marker keeps only its SHA-256
    result = await aws.events.create(run_id, resumed("h1", "p", long_id))
    assert result.event is not None
    (marker,) = resume_markers(await table_items(aws))
    assert set(marker) == {"pk", "sk", "slot", "expiresAt"}  # expiresAt: it expires with the run
    assert marker["pk"] == {"S": f"RUN#{run_id}"} and marker["sk"]["S"].startswith("RESUME#h1#")
    assert marker["slot"] == {"N": str(result.event.slot)}
    assert len(marker["sk"]["S"]) == len("RESUME#h1#") + 64


async def test_different_resume_ids_record_one_event_each(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, hook_created("h1", token()))
    await world.events.create(run_id, hook_created("h2", token()))
    a = await world.events.create(run_id, resumed("h1", "same payload", "delivery-a"))
    b = await world.events.create(run_id, resumed("h1", "same payload", "delivery-b"))
    other_hook = await world.events.create(run_id, resumed("h2", "same payload", "delivery-a"))
    assert a.event and b.event and other_hook.event
    assert [e.slot for e in (a.event, b.event, other_hook.event)] == [5, 6, 7], "a resume id is per hook"
    received = [e for e in await all_events(world, run_id) if e.event_type == "hook_received"]
    assert [(e.correlation_id, e.event_data["resumeId"]) for e in received] == [
        ("h1", "delivery-a"), ("h1", "delivery-b"), ("h2", "delivery-a")]
    if (aws := on_aws(world)) is not None:
        assert len(resume_markers(await table_items(aws))) == 3


def resumed_once(hook_id: str, payload: object, resume_id: str) -> dict[str, object]:
    return {**hook_received(hook_id, payload),
            "eventData": {"payload": payload, "resumeId": resume_id, "resumeOnce": True}}


async def _a_resume_once_id_stays_with_its_first_hook(world: Any, *, unchanged: bool = True) -> None:
    """A ``resumeOnce`` id recorded by one hook is refused by any other, naming the first, after the first was
    disposed and another run's hook claimed its token; its repeat on the first is still the usual repeat, and a
    plain resume id (no ``resumeOnce``) is still per hook. ``unchanged``: compare the storage around the refusal
    (a World this test can read whole)."""
    t = token()
    first_run, second_run = await new_run(world, start=True), await new_run(world, start=True)
    await world.events.create(first_run, hook_created("h1", t))
    recorded = await world.events.create(first_run, resumed_once("h1", "once", "call-1"))
    assert recorded.event is not None and recorded.event.event_data["resumeOnce"] is True
    await world.events.create(first_run, hook_disposed("h1"))
    await world.events.create(second_run, hook_created("h2", t))
    before = await stored(world) if unchanged else None
    with pytest.raises(HookResumedElsewhereError) as raised:
        await world.events.create(second_run, resumed_once("h2", "once", "call-1"))
    error = raised.value
    assert isinstance(error, HookAlreadyReceivedError) and error.status == 409
    assert (error.code, error.hook_id, error.run_id) == ("hook-resumed-elsewhere", "h1", first_run)
    assert f"hook h1 of run {first_run} recorded it already" in str(error)
    assert not unchanged or await stored(world) == before, "the refused resume wrote nothing"
    with pytest.raises(HookAlreadyReceivedError) as repeat:  # the disposed first hook: a repeat, answered as such
        await world.events.create(first_run, resumed_once("h1", "once", "call-1"))
    assert not isinstance(repeat.value, HookResumedElsewhereError)
    assert repeat.value.event_id == recorded.event.event_id
    plain = await world.events.create(second_run, resumed("h2", "per hook", "call-1"))
    assert plain.event is not None, "without resumeOnce the id is per hook, as before"
    fresh = await world.events.create(second_run, resumed_once("h2", "new", "call-2"))
    assert fresh.event is not None
    assert [(e.correlation_id, e.event_data["resumeId"]) for e in await all_events(world, second_run)
            if e.event_type == "hook_received"] == [("h2", "call-1"), ("h2", "call-2")]
    # hooks.resumed_by: the World's record of each resumeOnce id names the hook that took it; a plain id has none
    assert await world.hooks.resumed_by("call-1") == (first_run, "h1")
    assert await world.hooks.resumed_by("call-2") == (second_run, "h2")
    assert await world.hooks.resumed_by("never-sent") is None
    with pytest.raises(InvalidInputError):
        await world.hooks.resumed_by("")


async def test_a_resume_once_id_is_refused_on_every_hook_but_the_one_that_recorded_it(world: AnyWorld) -> None:
    await _a_resume_once_id_stays_with_its_first_hook(world)


async def test_a_resume_once_id_is_refused_on_another_hook_over_http() -> None:
    """The same through ``awsworld serve``'s app: the field reaches the World, the refusal comes back as
    ``HookResumedElsewhereError`` with the hook and run it names."""
    from awsworld._http.app import create_app
    from awsworld._http.auth import Auth
    from awsworld._memory import MemoryWorld
    from awsworld.client.http_world import HttpWorld

    memory = MemoryWorld()
    base = "http://127.0.0.1"
    app = create_app(memory, auth=Auth("loopback"))
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base)
    async with HttpWorld(base, http=http) as world:
        await _a_resume_once_id_stays_with_its_first_hook(world, unchanged=False)
    await memory.close()


async def test_the_resume_once_marker_is_one_small_item_per_id(world: AnyWorld) -> None:
    aws = aws_world(world)
    run_id = await new_run(aws, start=True)
    await aws.events.create(run_id, hook_created("h1", token()))
    await aws.events.create(run_id, resumed_once("h1", "p", "k" * 256))
    [marker] = [i for i in await table_items(aws) if i["pk"]["S"].startswith("RESUMEONCE#")]
    assert set(marker) == {"pk", "sk", "runId", "hookId", "expiresAt"}  # expiresAt: as the run's items
    assert (marker["runId"], marker["hookId"]) == ({"S": run_id}, {"S": "h1"})
    assert len(marker["pk"]["S"]) == len("RESUMEONCE#") + 64


async def test_without_a_resume_id_every_hook_received_is_recorded_and_no_marker_is_written(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, hook_created("h1", token()))
    await world.events.create(run_id, hook_received("h1", "same"))
    await world.events.create(run_id, hook_received("h1", "same"))
    received = [e for e in await all_events(world, run_id) if e.event_type == "hook_received"]
    assert [e.event_data for e in received] == [{"payload": "same"}, {"payload": "same"}]
    if (aws := on_aws(world)) is not None:
        assert resume_markers(await table_items(aws)) == []


@pytest.mark.parametrize("resume_id", ["", "k" * 257, 17])
async def test_an_invalid_resume_id_is_refused_before_anything_is_written(world: AnyWorld, resume_id: object) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, hook_created("h1", token()))
    before = await stored(world)
    with pytest.raises(InvalidInputError) as raised:
        await world.events.create(run_id, resumed("h1", "p", resume_id))  # type: ignore[arg-type]
    assert raised.value.field is not None and "resumeId" in raised.value.field
    assert await stored(world) == before


async def test_a_repeat_is_answered_as_such_after_the_run_ended_or_the_hook_was_disposed(world: AnyWorld) -> None:
    """The retry of a recorded request must not hear 410 or 404 for what already succeeded; a new id does."""
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, hook_created("h1", token()))
    await world.events.create(run_id, hook_created("h2", token(), retention_until=future(3600)))
    await world.events.create(run_id, resumed("h1", "p", "d1"))
    await world.events.create(run_id, resumed("h2", "p", "d2"))
    await world.events.create(run_id, hook_disposed("h1"))
    with pytest.raises(HookAlreadyReceivedError):
        await world.events.create(run_id, resumed("h1", "p", "d1"))
    with pytest.raises(HookNotFoundError):
        await world.events.create(run_id, resumed("h1", "p", "d1-new"))
    await world.events.create(run_id, run_completed())
    before = await stored(world)
    with pytest.raises(HookAlreadyReceivedError) as raised:
        await world.events.create(run_id, resumed("h2", "p", "d2"))
    assert raised.value.event is not None and raised.value.event.correlation_id == "h2"
    with pytest.raises(RunGoneError):
        await world.events.create(run_id, resumed("h2", "p", "d2-new"))
    assert await stored(world) == before


async def test_concurrent_repeats_of_one_resume_id_record_exactly_one_event(world: AnyWorld) -> None:
    """Writers in other processes (each with its own clients and caches) racing with the same id: one wins,
    every other hears the typed 409 naming the winner's event."""
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, hook_created("h1", token()))
    peers = [another_process(world) for _ in range(6)]
    try:
        outcomes = await asyncio.gather(*(p.events.create(run_id, resumed("h1", {"peer": i}, "once"))
                                          for i, p in enumerate(peers)), return_exceptions=True)
    finally:
        for peer in peers:
            await peer.close()
    won = [o for o in outcomes if not isinstance(o, BaseException)]
    lost = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(won) == 1 and all(isinstance(o, HookAlreadyReceivedError) for o in lost), outcomes
    assert won[0].event is not None
    assert {o.event_id for o in lost} == {won[0].event.event_id}  # type: ignore[union-attr]
    received = [e for e in await all_events(world, run_id) if e.event_type == "hook_received"]
    assert len(received) == 1 and received[0].event_data["resumeId"] == "once"


# ---------------------------------------------------------------- reads


async def test_hooks_get_and_get_by_token_of_unknown_hooks_are_not_found(world: AnyWorld) -> None:
    with pytest.raises(HookNotFoundError):
        await world.hooks.get("ghost")
    with pytest.raises(HookNotFoundError):
        await world.hooks.get_by_token(token())


async def test_hooks_list_pages_through_a_runs_hooks(world: AnyWorld) -> None:
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


async def test_hook_reads_with_resolve_none_leave_metadata_out(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    t = token()
    await world.events.create(run_id, hook_created("h1", t, metadata={"secret": 1}))
    assert (await world.hooks.get("h1", resolve_data="none")).metadata is None
    assert (await world.hooks.get_by_token(t, resolve_data="none")).metadata is None
    assert (await world.hooks.get("h1")).metadata == {"secret": 1}


async def test_a_second_hook_of_one_run_on_a_held_token_conflicts_with_that_run(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    t = token()
    await world.events.create(run_id, hook_created("h1", t))
    result = await world.events.create(run_id, hook_created("h2", t))
    assert result.hook is None
    assert result.event is not None and result.event.event_type == "hook_conflict"
    assert result.event.event_data == {"token": t, "conflictingRunId": run_id}
    assert [h.hook_id for h in (await world.hooks.list(run_id)).data] == ["h1"]


async def test_a_retained_token_is_free_once_its_retention_passes(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    other = await new_run(world, start=True)
    t = token()
    retained = time.monotonic() + 4  # (4 s: three writes on a loaded DynamoDB Local took more than 1.5)
    await world.events.create(run_id, hook_created("h1", t, retention_until=future(4)))
    await world.events.create(run_id, run_completed())
    held = await world.events.create(other, hook_created("h2", t))
    assert held.event is not None and held.event.event_type == "hook_conflict"
    await asyncio.sleep(max(0.0, retained - time.monotonic()) + 0.2)
    taken = await world.events.create(other, hook_created("h3", t))
    assert taken.event is not None and taken.event.event_type == "hook_created"
    assert (await world.hooks.get_by_token(t)).run_id == other


async def test_a_token_must_fit_a_key_and_its_retention_30_days(world: AnyWorld) -> None:
    """The rules every World applies to hook_created (``world.rules.requests.check_hook_token``): a token as long
    as the AWS World's key allows is taken, one byte more is refused naming the field, and so is a retention
    more than 30 days ahead; a refused hook writes nothing."""
    run_id = await new_run(world, start=True)
    # 1,024 characters at most (the event's model); in UTF-8 exactly MAX_TOKEN_BYTES, and one byte more.
    longest = "é" * (MAX_TOKEN_BYTES - MAX_HOOK_TOKEN_LENGTH) + "t" * (2 * MAX_HOOK_TOKEN_LENGTH - MAX_TOKEN_BYTES)
    over = "é" * (MAX_TOKEN_BYTES - MAX_HOOK_TOKEN_LENGTH + 1) + "t" * (2 * MAX_HOOK_TOKEN_LENGTH - MAX_TOKEN_BYTES - 1)
    assert len(longest) == len(over) == MAX_HOOK_TOKEN_LENGTH
    assert len(longest.encode()) == MAX_TOKEN_BYTES == len(over.encode()) - 1
    assert (await world.events.create(run_id, hook_created("fits", longest))).hook is not None
    assert (await world.hooks.get_by_token(longest)).hook_id == "fits"
    before = len(await all_events(world, run_id))
    with pytest.raises(InvalidInputError) as too_long:
        await world.events.create(run_id, hook_created("long", over))
    assert too_long.value.field == "eventData.token"
    with pytest.raises(InvalidInputError) as too_late:
        await world.events.create(run_id, hook_created("late", token(), retention_until=future(31 * 24 * 3600)))
    assert too_late.value.field == "eventData.tokenRetentionUntil"
    assert (await world.events.create(run_id, hook_created("kept", token(),
                                                           retention_until=future(29 * 24 * 3600)))).hook
    assert len(await all_events(world, run_id)) == before + 1


@pytest.mark.parametrize("gone", ["disposed", "disposed-then-completed", *RUN_ENDS])
async def test_a_keyed_resume_repeated_after_its_hook_is_gone_answers_as_the_first(world: AnyWorld, gone: str) -> None:
    """Client.resume_hook / fail_hook with an idempotency key, repeated once the payload made the workflow dispose
    the hook (and maybe end), or once its run ended holding it (a run's end releases its live hooks without a
    hook_disposed, as when ``fail_hook`` made the workflow raise and return): the first call's event, nothing new
    stored; a new key, or none, still hears "no hook" (disposed) or that the run ended (``HookClosedError``)."""
    client = Client(world)
    run_id = await new_run(world, start=True)
    tok = token()
    await world.events.create(run_id, hook_created("h1", tok))
    first = await client.resume_hook_outcome(tok, {"big": "x" * 20_000}, idempotency_key="delivery-1")
    failed = await client.fail_hook(tok, "refused upstream", idempotency_key="delivery-2")
    assert first.recorded
    disposed = gone.startswith("disposed")
    if disposed:
        await world.events.create(run_id, hook_disposed("h1"))
    if gone != "disposed":
        await world.events.create(run_id, RUN_ENDS[gone.removeprefix("disposed-then-")]())
    before = await stored(world)
    repeat = await client.resume_hook_outcome(tok, {"big": "x" * 20_000}, idempotency_key="delivery-1")
    assert not repeat.recorded and repeat.event.event_id == first.event.event_id
    assert (await client.fail_hook(tok, "refused upstream", idempotency_key="delivery-2")).event_id == failed.event_id
    assert await client.resume_hook(tok, 1, idempotency_key="delivery-1") is not None  # another payload: same key
    for key in ("delivery-3", None):
        with pytest.raises(HookNotFoundError) as missing:
            await client.resume_hook(tok, 1, idempotency_key=key)
        if disposed:
            assert missing.value.message.startswith(
                f"no hook owns that token: the hook of run {run_id} that held it was disposed")
        else:
            assert isinstance(missing.value, HookClosedError)
            assert (missing.value.run_id, missing.value.run_status) == (run_id, gone)
    assert await stored(world) == before
    if gone == "disposed":  # a new hook claiming the token takes the key afresh
        await world.events.create(run_id, hook_created("h2", tok))
        assert (await client.resume_hook_outcome(tok, 2, idempotency_key="delivery-1")).recorded


async def test_a_dispose_between_the_lookups_two_reads_still_answers_a_keyed_repeat(
        world: AnyWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    """The AWS World finds a hook by its token in two reads (the token's item, then the hook it names). A
    ``hook_disposed`` that commits between them (the workflow, woken by the first fail_hook, disposes the hook
    while a keyed repeat looks it up) must be seen as a dispose, so the repeat gets the first call's event,
    and not as "no hook owns that token" read from the token's item as it was before the dispose."""
    aws = aws_world(world)
    client = Client(aws)
    run_id = await new_run(aws, start=True)
    tok = token()
    await aws.events.create(run_id, hook_created("h1", tok))
    first = await client.fail_hook(tok, "rejected by the reviewer", idempotency_key="k")
    read_item, disposed = entities_api.get_item, []

    async def dispose_after_the_token_read(clients: Any, key: dict[str, str], **kwargs: Any) -> Any:
        item = await read_item(clients, key, **kwargs)
        if key == token_key(tok) and not disposed:
            disposed.append(await aws.events.create(run_id, hook_disposed("h1")))
        return item

    monkeypatch.setattr(entities_api, "get_item", dispose_after_the_token_read)
    repeat = await client.fail_hook(tok, "rejected by the reviewer", idempotency_key="k")
    assert disposed and repeat.event_id == first.event_id
    with pytest.raises(HookNotFoundError) as missing:  # a new key: the hook is gone
        await client.fail_hook(tok, "rejected by the reviewer", idempotency_key="another")
    assert missing.value.disposed_hook == (run_id, "h1")


async def test_a_heartbeat_is_one_hook_received_refused_exactly_as_a_resume_is(world: AnyWorld) -> None:
    """Client.heartbeat_hook: one ``hook_received`` holding the heartbeat envelope on a live hook;
    an unknown, disposed or closed hook refuses it with resume_hook's own errors, nothing stored."""
    client = Client(world)
    run_id = await new_run(world, start=True)
    tok = token()
    await world.events.create(run_id, hook_created("h1", tok))
    before = len(await all_events(world, run_id))
    beat = await client.heartbeat_hook(tok)
    assert beat.event_type == "hook_received" and beat.correlation_id == "h1"
    events = await all_events(world, run_id)
    assert len(events) == before + 1 and events[-1].event_id == beat.event_id
    assert is_heartbeat((events[-1].event_data or {}).get("payload"))
    for refused_token, make_it in (("unknown", None), ("disposed", hook_disposed), ("ended", run_completed)):
        if make_it is hook_disposed:
            await world.events.create(run_id, hook_disposed("h1"))
        elif make_it is run_completed:
            run_id = await new_run(world, start=True)
            tok = token()
            await world.events.create(run_id, hook_created("h2", tok, retention_until=future(3600)))
            await world.events.create(run_id, run_completed())
        target = token() if refused_token == "unknown" else tok
        state = await stored(world)
        errors: list[type[BaseException]] = []
        for call in (client.heartbeat_hook(target), client.resume_hook(target, 1)):
            with pytest.raises(HookNotFoundError) as raised:  # HookClosedError is one
                await call
            errors.append(type(raised.value))
        assert errors[0] is errors[1], refused_token
        assert (errors[0] is HookClosedError) == (refused_token == "ended")
        assert await stored(world) == state
