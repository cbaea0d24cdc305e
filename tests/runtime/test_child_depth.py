"""Child runs nest at most ``AWSWORLD_MAX_CHILD_DEPTH`` deep (``_worker/child_runs.py``'s ``_child_depth``): a
workflow that calls itself as a child with no base case started runs, each billed, without end. Now the call
that would nest deeper is refused by its start step (recorded: ``ChildDepthError``, never retried), nothing is
started, and the refusal reaches every run above as that type. On the in-memory World, through the test
environment's delivery path, with a small limit; the child's depth rides in its ``run_created`` executionContext
(``durable.child_calls.run_depth``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from awsworld import ChildDepthError, ChildWorkflowError, WorkflowRunFailedError, child_options, workflow
from awsworld.client.replay import replay_run
from awsworld.durable.child_calls import START_CHILD
from awsworld.testing import WorkflowTestEnv

from .conftest import RESULT_TIMEOUT, Env

pytestmark = pytest.mark.asyncio


@workflow(name="depth.descend")
async def descend(n: int) -> int:
    if n == 10:  # a base case the limit is hit before
        return n
    return await descend(n + 1)


@workflow(name="depth.bounded")
async def bounded(n: int) -> dict[str, Any]:
    try:
        return await bounded(n + 1)
    except ChildDepthError as refused:
        assert isinstance(refused, ChildWorkflowError)
        return {"caught_at": n, "status": refused.status, "type": refused.error_type, "message": str(refused)}


@workflow(name="depth.outer")
async def outer() -> dict[str, Any]:
    try:
        return {"value": await descend(1)}
    except ChildDepthError as refused:  # a grandchild's refusal, let through by the child: the same type
        assert isinstance(refused, ChildWorkflowError)
        original = refused.original or {}
        return {"status": refused.status, "type": refused.error_type, "run": refused.run_id,
                "original": original.get("name")}


async def test_a_workflow_that_calls_itself_stops_at_the_limit_and_every_run_above_fails_with_it(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """On the memory World and on AWS (moto): the depth rides in what each World returns of the parent's run."""
    monkeypatch.setenv("AWSWORLD_MAX_CHILD_DEPTH", "3")
    run = await env.client.start(descend, 0)
    with pytest.raises(ChildDepthError) as failed:
        await asyncio.wait_for(run.result(), RESULT_TIMEOUT)
    assert isinstance(failed.value, WorkflowRunFailedError)
    chain = [run]
    while children := await chain[-1].children():
        [child] = children
        chain.append(child)
    assert len(chain) == 4  # depths 0, 1, 2, 3: the call from depth 3 started nothing (the old code: 11 runs)
    records = [await env.world.runs.get(r.run_id, resolve_data="none") for r in chain]
    assert {r.status for r in records} == {"failed"}
    assert [(r.execution_context or {}).get("depth") for r in records] == [None, 1, 2, 3]
    [start] = [s for s in await chain[-1].steps() if s.step_name == START_CHILD]
    assert start.status == "failed" and start.attempt == 1  # refused once, never retried
    assert start.error is not None and "would be nested 4 deep, and AWSWORLD_MAX_CHILD_DEPTH is 3" in str(start.error)
    monkeypatch.setenv("AWSWORLD_MAX_CHILD_DEPTH", "100")
    for each in chain:  # the refusal is in the log: every run replays the same under another limit
        assert (await replay_run(env.world, each.run_id)).ok


async def test_a_refused_call_is_caught_where_it_was_made_and_the_run_completes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWSWORLD_MAX_CHILD_DEPTH", "2")
    async with WorkflowTestEnv() as env:
        run = await env.client.start(bounded, 0)
        result = await run.result()
        assert result["caught_at"] == 2 and result["status"] == "not-started"
        assert result["type"] == "ChildDepthError"
        assert "could not be started: child workflow depth.bounded would be nested 3 deep" in result["message"]
        assert len((await env.client.list_runs()).data) == 3
        assert (await replay_run(env.world, run.run_id)).ok


async def test_a_grandchilds_refusal_reaches_the_grandparent_as_its_type(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWSWORLD_MAX_CHILD_DEPTH", "2")
    async with WorkflowTestEnv() as env:
        run = await env.client.start(outer)
        result = await run.result()
        [child] = await run.children()
        # The child failed with the ChildWorkflowError its own child's refusal raised in it (error_type: the
        # child's error's name); ``original`` is the refusal, the innermost error, whose type it is too.
        assert result == {"status": "failed", "type": "ChildWorkflowError", "run": child.run_id,
                          "original": "ChildDepthError"}
        assert len((await env.client.list_runs()).data) == 3  # outer (0), descend(1) at 1 and descend(2) at 2


@workflow(name="depth.rounds")
async def rounds(left: int, total: int, successor: bool) -> int | str:
    """Continue-as-new: each run does a round, then starts the next with the state and returns its run id."""
    total += 1
    if left == 0:
        return total
    options = child_options(successor=True) if successor else child_options(detached=True)
    return (await options.start(rounds, left - 1, total, successor)).run_id


async def test_a_chain_of_successors_runs_past_the_limit_at_its_first_runs_depth(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``child_options(successor=True)`` (the documented continue-as-new): a chain of 7 runs under a limit of 3.
    The same chain of plain detached children ends at its 4th run's call (``ChildDepthError``), as it did with the
    docs' own pattern at the 101st under the default."""
    monkeypatch.setenv("AWSWORLD_MAX_CHILD_DEPTH", "3")
    async with WorkflowTestEnv() as env:
        run = await env.client.start(rounds, 6, 0, True)
        chain = [run.run_id]
        result = await asyncio.wait_for(run.result(), RESULT_TIMEOUT)
        while isinstance(result, str):  # a run id: the run continued as that one
            chain.append(result)
            result = await asyncio.wait_for(env.client.get_run(result).result(), RESULT_TIMEOUT)
        assert result == 7 and len(chain) == 7
        records = [await env.world.runs.get(run_id, resolve_data="none") for run_id in chain]
        assert [(r.execution_context or {}).get("depth") for r in records] == [None] + [0] * 6
        assert [(r.execution_context or {}).get("detached") for r in records[1:]] == [True] * 6
        for run_id in chain:
            assert (await replay_run(env.world, run_id)).ok

        detached = await env.client.start(rounds, 6, 0, False)
        link: Any = await asyncio.wait_for(detached.result(), RESULT_TIMEOUT)
        for _ in range(2):  # depths 1 and 2 start the next
            link = await asyncio.wait_for(env.client.get_run(link).result(), RESULT_TIMEOUT)
        with pytest.raises(ChildDepthError):  # depth 3's call would be nested 4 deep
            await asyncio.wait_for(env.client.get_run(link).result(), RESULT_TIMEOUT)
