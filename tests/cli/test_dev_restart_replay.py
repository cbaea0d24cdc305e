"""A restart of ``awsworld dev --state`` replays its unfinished runs before it serves (``cli/dev_reload.py``): with
hundreds of them that takes a while, and it says how far it got instead of staying silent until the banner."""

from __future__ import annotations

from datetime import timedelta

import pytest

from awsworld import sleep, step, workflow
from awsworld.authoring.definitions import Registry
from awsworld.cli import dev_reload
from awsworld.testing import WorkflowTestEnv


@step
async def restart_first(n: int) -> int:
    return n + 1


@workflow
async def restart_napper(n: int) -> int:
    value = await restart_first(n)
    await sleep(timedelta(hours=1))
    return value


async def test_the_replay_of_many_unfinished_runs_says_how_far_it_got(capsys: pytest.CaptureFixture[str]) -> None:
    async with WorkflowTestEnv() as env:
        runs = [await env.client.start(restart_napper, i) for i in range(2 * dev_reload.PROGRESS_EVERY + 5)]
        await env.idle()  # every run sleeps for its hour, its step done
        verdict = await dev_reload.replay_unfinished(env.world, env.worker.registry, wake="all", tag="t",
                                                     progress=True)
        assert sorted(verdict.woken) == sorted(run.run_id for run in runs)
        assert verdict.parked == [] and len(verdict.matched) == len(runs)
    out = capsys.readouterr().out  # (run log lines too, once another test routed them to stdout)
    said = [line for line in out.splitlines() if line.startswith("  ") and "replayed so far" in line]
    assert said == ["  100 unfinished runs replayed so far...", "  200 unfinished runs replayed so far..."], said


async def test_a_replay_that_parks_many_runs_prints_a_few_lines_and_how_many_more(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A restart of dev with 600 unfinished runs whose code was gone printed a line for each above its banner (here,
    150 `is parked: no workflow named ...` and 448 `moved` lines): it prints 10 of a kind (``LINES_EACH``), then how
    many more and where they are listed."""
    count = 15
    async with WorkflowTestEnv() as env:
        runs = [await env.client.start(restart_napper, i) for i in range(count)]
        await env.idle()
        verdict = await dev_reload.replay_unfinished(env.world, Registry(), wake="all", tag="t")  # (its code gone)
        assert sorted(verdict.parked) == sorted(run.run_id for run in runs)
    out = capsys.readouterr().out
    parked = [line for line in out.splitlines() if line.startswith("run ") and " is parked: no workflow named " in line]
    assert len(parked) == 10, out
    assert ("  ... and 5 more parked run(s) (`awsworld runs --parked` lists them, `awsworld describe RUN` says why and "
            "the ways out)") in out.splitlines(), out
