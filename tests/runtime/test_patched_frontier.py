"""``patched()`` is True at the frontier of a new run wherever the call is (the body's first statement, after a
step, after a sleep, a child's first statement) and False only while replaying history recorded before the
change; on both Worlds (in memory and on LocalAWS), through the real delivery path."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from awsworld import create_hook, patched, sleep, step, workflow
from awsworld._engine.execution import PATCH_MARKER_PREFIX
from awsworld.client.replay import read_run, replay_events

from .conftest import BOTH, deployed

pytestmark = pytest.mark.parametrize("e2e_backend", BOTH)


@step
async def note(text: str) -> str:
    return text


@step
async def shout(text: str) -> str:
    return text.upper()


@workflow
async def patched_child(tag: str) -> bool:
    return patched("pf-child")  # a child run's first statement


@workflow
async def patched_everywhere(tag: str) -> dict[str, Any]:
    first = patched("pf-first")  # the body's first statement
    await note(tag)
    after_step = patched("pf-after-step")
    await sleep(1)
    after_sleep = patched("pf-after-sleep")
    in_child = await patched_child(tag)
    return {"first": first, "after_step": after_step, "after_sleep": after_sleep, "in_child": in_child,
            "first_again": patched("pf-first")}  # the same id asked again: the answer it got first


def markers(log: list[Any]) -> list[str]:
    return [change["key"].removeprefix(PATCH_MARKER_PREFIX)
            for event in log if event.event_type == "attr_set"
            for change in (event.event_data or {}).get("changes") or []
            if change["key"].startswith(PATCH_MARKER_PREFIX)]


async def test_a_new_run_is_at_the_frontier_wherever_it_asks(e2e) -> None:
    run = await e2e.start(patched_everywhere, uuid.uuid4().hex[:8])
    assert await run.result(timeout=30) == {"first": True, "after_step": True, "after_sleep": True,
                                            "in_child": True, "first_again": True}
    log = await read_run(e2e.world, run.run_id)
    assert sorted(markers(log)) == ["pf-after-sleep", "pf-after-step", "pf-first"], "one marker per change id"
    assert replay_events(log).ok, "the recorded answers replay (the sleep's delivery replayed them already)"
    [child] = await run.children()
    child_log = await read_run(e2e.world, child.run_id)
    assert markers(child_log) == ["pf-child"]
    first_marker = next(i for i, e in enumerate(log) if e.event_type == "attr_set")
    assert [e.event_type for e in log[:first_marker]] == ["run_created", "run_started"], \
        "the first statement's answer is recorded before anything the workflow does"


@workflow
async def greeting(tag: str) -> str:
    """The code as first deployed: its first call is a step."""
    hello = await note(f"hello {tag}")
    async with create_hook(token=f"pf-greet:{tag}") as hook:
        await hook
    return hello


async def greeting_v2(tag: str) -> str:
    """The change, asked as the body's first statement."""
    if patched("pf-shout"):
        hello = await shout(f"hello {tag}")
    else:
        hello = await note(f"hello {tag}")
    async with create_hook(token=f"pf-greet:{tag}") as hook:
        await hook
    return hello


async def test_history_recorded_before_the_change_replays_the_old_branch(e2e) -> None:
    old_tag, new_tag = f"old-{uuid.uuid4().hex[:6]}", f"new-{uuid.uuid4().hex[:6]}"
    old = await e2e.start(greeting, old_tag)
    await e2e.hook_ready(f"pf-greet:{old_tag}", old)  # its first step ran on the old code
    with deployed(greeting, greeting_v2):
        new = await e2e.start(greeting, new_tag)
        await e2e.hook_ready(f"pf-greet:{new_tag}", new)
        await e2e.client.resume_hook(f"pf-greet:{old_tag}", "go")
        await e2e.client.resume_hook(f"pf-greet:{new_tag}", "go")
        assert await old.result(timeout=30) == f"hello {old_tag}", "replaying old history: False"
        assert await new.result(timeout=30) == f"hello {new_tag}".upper(), "a new run's first statement: True"
        old_log, new_log = await read_run(e2e.world, old.run_id), await read_run(e2e.world, new.run_id)
        assert replay_events(old_log).ok and replay_events(new_log).ok
    assert markers(old_log) == [] and markers(new_log) == ["pf-shout"]
    assert replay_events(old_log).ok, "the old run still replays on the old code: nothing was added to it"
