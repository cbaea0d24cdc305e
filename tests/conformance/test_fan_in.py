"""Fan-in at scale: concurrent writers of one run share transactions (group commit) and keep their own answers.

Writers of one run inside one World (one process) are combined: whoever finds the run idle commits everything
queued for it that may share one transaction. Each write keeps its own conditions and its own answer (a refused
one gets its error, the others land), writes under a fence (in-band, atomic, stamped, expect_seq) commit alone,
and several Worlds racing one run (``peers``: what separate processes look like to the store) still fill its
slots densely and complete each step exactly once.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from awsworld.aws import AWSWorld
from awsworld.world import EntityConflictError, RunGoneError, StepNotFoundError

from .helpers import (
    AnyWorld,
    all_events,
    assert_dense,
    module_peers,
    module_world,
    new_run,
    on_aws,
    run_completed,
    step_completed,
    step_created,
    step_failed,
    step_started,
    wait_created,
)

module_local_aws, world = module_world()
peers = module_peers(4)
Peers = list[AnyWorld]


async def _run_with_running_steps(world: AnyWorld, count: int, prefix: str = "s") -> tuple[str, list[str]]:
    """A running run with ``count`` steps born running (declared in batches, as a flow does)."""
    run_id = await new_run(world, start=True)
    ids = [f"{prefix}{i}" for i in range(count)]
    for start in range(0, count, 20):
        pairs: list[dict[str, Any]] = []
        for step_id in ids[start:start + 20]:
            pairs += [step_created(step_id, input={"n": step_id}), step_started(step_id)]
        batch = await world.events.create_batch(run_id, pairs)
        assert all(o.ok for o in batch.results)
    return run_id, ids


async def settle(calls: list[Any]) -> list[Any]:
    return list(await asyncio.gather(*calls, return_exceptions=True))


class TransactionSpy:
    """Every TransactWriteItems an AWS World sends, as its items (how it groups writes: AWS layout)."""

    def __init__(self, world: AWSWorld) -> None:
        self.sent: list[list[dict[str, Any]]] = []
        world.clients.register_handler("before-parameter-build.dynamodb.TransactWriteItems", self._record)

    def _record(self, params: Any = None, **_: Any) -> None:
        if isinstance(params, dict):
            self.sent.append(list(params.get("TransactItems") or []))

    @staticmethod
    def fenced(items: list[dict[str, Any]]) -> bool:
        return any("#seqInBand" in (op.get("ExpressionAttributeNames") or {})
                   for item in items for op in item.values())

    @staticmethod
    def step_keys(items: list[dict[str, Any]]) -> list[str]:
        keys = [str((op.get("Key") or op.get("Item") or {}).get("sk", {}).get("S", ""))
                for item in items for op in item.values()]
        return [k.removeprefix("STEP#") for k in keys if k.startswith("STEP#")]

    def steps(self, items: list[dict[str, Any]]) -> int:
        return len(self.step_keys(items))

    def carrying(self, step_id: str) -> list[list[dict[str, Any]]]:
        """The transactions sent with an operation on this step's item."""
        return [items for items in self.sent if step_id in self.step_keys(items)]


async def test_concurrent_results_of_one_run_share_a_transaction_and_keep_their_answers(world: AnyWorld) -> None:
    run_id, ids = await _run_with_running_steps(world, 16)
    aws = on_aws(world)
    before = aws.stats.snapshot() if aws is not None else None
    results = await asyncio.gather(*(world.events.create(run_id, step_completed(s, {"r": s}), after_step_body=True)
                                     for s in ids))
    if aws is not None and before is not None:  # the AWS World groups them into few transactions
        used = aws.stats - before
        assert used.requests["dynamodb.TransactWriteItems"] < len(ids) // 4, dict(used.requests)
    for step_id, result in zip(ids, results, strict=True):
        assert result.event is not None and result.event.correlation_id == step_id
        assert result.event.event_type == "step_completed"
        assert result.step is not None and result.step.step_id == step_id
        assert result.step.status == "completed" and result.step.output == {"r": step_id}
        assert result.step.input == {"n": step_id}
    slots = [r.event.slot for r in results]  # type: ignore[union-attr]
    assert sorted(slots) == list(range(min(slots), min(slots) + len(ids)))
    # Each answer counts the open steps as its own event left them: exactly one is the last finisher.
    assert sorted(r.open_steps for r in results) == list(range(len(ids)))  # type: ignore[type-var]
    assert [r.open_steps for r in sorted(results, key=lambda r: r.event.slot)] == \
        list(range(len(ids) - 1, -1, -1))  # type: ignore[union-attr]
    events = await all_events(world, run_id)
    assert_dense(events)
    by_slot = {e.slot: e for e in events}
    for step_id, slot in zip(ids, slots, strict=True):
        assert by_slot[slot].correlation_id == step_id and by_slot[slot].event_data["result"] == {"r": step_id}
    run = await world.runs.get(run_id)
    assert run.seq == len(events)
    for step_id in ids[::5]:
        step = await world.steps.get(run_id, step_id)
        assert step.status == "completed" and step.output == {"r": step_id}


async def test_a_group_mixes_event_types_and_batches(world: AnyWorld) -> None:
    run_id, ids = await _run_with_running_steps(world, 6)
    aws = on_aws(world)
    before = aws.stats.snapshot() if aws is not None else None
    outcomes = await settle([
        *(world.events.create(run_id, step_completed(s)) for s in ids[:3]),
        world.events.create(run_id, step_failed(ids[3])),
        world.events.create(run_id, wait_created("w1")),
        world.events.create_batch(run_id, [step_created("n1"), step_created("n2")]),
        world.events.create(run_id, step_created("n3")),
    ])
    assert not [o for o in outcomes if isinstance(o, BaseException)], outcomes
    if aws is not None and before is not None:
        used = aws.stats - before
        assert used.requests["dynamodb.TransactWriteItems"] < 7, dict(used.requests)
    batch = outcomes[5]
    slots = [o.result.event.slot for o in batch.results]
    assert slots[1] == slots[0] + 1, "a batch in a group stays contiguous"
    assert outcomes[3].step.status == "failed"
    assert outcomes[4].wait.wait_id == "w1"
    events = await all_events(world, run_id)
    assert_dense(events)
    kinds = Counter(e.event_type for e in events)
    assert (kinds["step_completed"], kinds["step_failed"], kinds["wait_created"], kinds["step_created"]) == \
        (3, 1, 1, 6 + 3)


async def test_a_refused_write_in_a_group_gets_its_own_error_and_the_others_land(world: AnyWorld,
                                                                                peers: Peers) -> None:
    run_id, ids = await _run_with_running_steps(world, 6)
    # Another process finishes s2 first: this World's copy of s2 still says running, so the group's commit is
    # refused on s2's version (and on the run's seq); s2 is read again and refused alone.
    await peers[0].events.create(run_id, step_completed("s2", "theirs"))
    aws = on_aws(world)
    spy = TransactionSpy(aws) if aws is not None else None
    outcomes = await settle([
        *(world.events.create(run_id, step_completed(s, s)) for s in ids),
        world.events.create(run_id, step_started("missing")),
    ])
    assert isinstance(outcomes[2], EntityConflictError), outcomes[2]
    assert isinstance(outcomes[-1], StepNotFoundError), outcomes[-1]
    landed = [o for i, o in enumerate(outcomes[:-1]) if i != 2]
    assert all(not isinstance(o, BaseException) for o in landed), landed
    assert [o.step.output for o in landed] == [s for i, s in enumerate(ids) if i != 2]
    if spy is not None:
        assert max(spy.steps(items) for items in spy.sent) > 1, "the results were committed together"
    events = await all_events(world, run_id)
    assert_dense(events)
    done = Counter(e.correlation_id for e in events if e.event_type == "step_completed")
    assert done == Counter(ids)
    assert (await world.steps.get(run_id, "s2")).output == "theirs"


async def test_a_write_the_run_refuses_fails_alone(world: AnyWorld, peers: Peers) -> None:
    run_id, ids = await _run_with_running_steps(world, 2)
    await world.events.create(run_id, step_created("later"))
    await peers[0].events.create(run_id, run_completed("done"))  # this World still believes the run is running
    outcomes = await settle([world.events.create(run_id, step_completed(ids[0])),
                             world.events.create(run_id, step_started("later")),
                             world.events.create(run_id, step_completed(ids[1]))])
    assert isinstance(outcomes[1], RunGoneError), outcomes
    assert outcomes[0].step.status == "completed" and outcomes[2].step.status == "completed"
    events = await all_events(world, run_id)
    assert_dense(events)
    assert [e.event_type for e in events[-2:]] == ["step_completed", "step_completed"]


async def test_fenced_writes_are_never_grouped(world: AnyWorld) -> None:
    run_id, ids = await _run_with_running_steps(world, 8)
    aws = on_aws(world)
    spy = TransactionSpy(aws) if aws is not None else None
    seq_in_band = (await world.events.list(run_id)).snapshot.seq_in_band  # type: ignore[union-attr]
    outcomes = await settle([
        *(world.events.create(run_id, step_completed(s)) for s in ids[:3]),
        world.events.create_batch(run_id, [step_completed(ids[3]), step_created("next")], in_band=True,
                                  expected_seq_in_band=seq_in_band, atomic=True),
        *(world.events.create(run_id, step_completed(s)) for s in ids[4:6]),
        world.events.create_batch(run_id, [step_completed(ids[6])], atomic=True),
        world.events.create(run_id, step_completed(ids[7])),
    ])
    assert not [o for o in outcomes if isinstance(o, BaseException)], outcomes
    if spy is not None:  # how the AWS World groups its transactions
        fenced = [items for items in spy.sent if spy.fenced(items)]
        assert len(fenced) == 1 and sorted(spy.step_keys(fenced[0])) == sorted([ids[3], "next"]), \
            "the in-band batch committed alone"
        assert [spy.step_keys(items) for items in spy.carrying(ids[6])] == [[ids[6]]], \
            "the atomic batch committed alone"
        plain = [items for items in spy.sent if not spy.fenced(items) and ids[6] not in spy.step_keys(items)]
        assert len(plain) < 6, "the plain results were grouped"
    assert outcomes[3].seq_in_band == seq_in_band + 2
    events = await all_events(world, run_id)
    assert_dense(events)
    assert len([e for e in events if e.event_type == "step_completed"]) == 8


async def test_writes_of_one_step_are_never_in_one_group(world: AnyWorld) -> None:
    run_id, ids = await _run_with_running_steps(world, 1)
    outcomes = await settle([world.events.create(run_id, step_completed(ids[0], i) if i % 2 else
                                                 step_failed(ids[0], str(i))) for i in range(6)])
    won = [o for o in outcomes if not isinstance(o, BaseException)]
    assert len(won) == 1
    assert all(isinstance(o, EntityConflictError) for o in outcomes if isinstance(o, BaseException))
    events = await all_events(world, run_id)
    assert_dense(events)
    assert len([e for e in events if e.event_type in ("step_completed", "step_failed")]) == 1


async def test_worlds_racing_one_run_keep_slots_dense_and_complete_each_step_once(world: AnyWorld,
                                                                                 peers: Peers) -> None:
    run_id, ids = await _run_with_running_steps(world, 32)
    aws_peers = [p for p in peers if isinstance(p, AWSWorld)]
    before = [p.stats.snapshot() for p in aws_peers]
    # Every step is finished by two Worlds at once (a duplicated step message): one result lands, one is refused.
    calls = [p.events.create(run_id, step_completed(s, f"{k}"), after_step_body=True)
             for i, s in enumerate(ids) for k, p in enumerate((peers[i % 4], peers[(i + 1) % 4]))]
    outcomes = await settle(calls)
    won = [o for o in outcomes if not isinstance(o, BaseException)]
    lost = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(won) == len(ids) and all(isinstance(e, EntityConflictError) for e in lost), lost[:3]
    assert sorted(o.step.step_id for o in won) == sorted(ids)
    assert [o.open_steps for o in won].count(0) <= 1, "at most one write is the last finisher"
    events = await all_events(world, run_id)
    assert_dense(events)
    assert Counter(e.correlation_id for e in events if e.event_type == "step_completed") == Counter(ids)
    assert {e.slot for e in events if e.event_type == "step_completed"} == {o.event.slot for o in won}
    run = await world.runs.get(run_id)
    assert run.seq == len(events)
    if aws_peers:
        transactions = sum((p.stats - b).requests["dynamodb.TransactWriteItems"]
                           for p, b in zip(aws_peers, before, strict=True))
        assert transactions < len(calls), "results racing from several Worlds still share transactions"
