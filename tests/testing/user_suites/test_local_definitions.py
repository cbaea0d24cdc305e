"""A user's test file (run by tests/testing/test_user_suites.py with pytest in a fresh process): two tests that each
define a workflow of their own under one name collide in the process registry; the second one's error names both
definitions and says why, instead of a bare "pass name= to one of them" (they both had one); a test's stand-in under
a module's step name is told to patch what the step calls instead."""

import pytest

from awsworld import step, workflow

pytestmark = pytest.mark.asyncio


async def test_one_version(awsworld_env) -> None:
    @workflow(name="user.local")
    async def local() -> int:
        return 1

    assert await (await awsworld_env.client.start(local)).result() == 1


async def test_another_version_under_the_same_name(awsworld_env) -> None:
    with pytest.raises(ValueError) as info:
        @workflow(name="user.local")
        async def local() -> int:
            return 2

    assert str(info.value) == (
        "two different workflows are named 'user.local' (test_local_definitions.test_one_version.<locals>.local and "
        "test_local_definitions.test_another_version_under_the_same_name.<locals>.local): pass name= to one of them "
        "(both are defined inside functions, tests perhaps, and one process registry holds both: give each its own "
        "name=)")


async def test_the_same_definition_run_again_replaces_itself(awsworld_env) -> None:
    for expected in (1, 2):
        @workflow(name="user.again")
        async def again(n: int) -> int:
            return n

        assert await (await awsworld_env.client.start(again, expected)).result() == expected


async def test_a_stand_in_for_a_modules_step_says_to_patch_what_it_calls() -> None:
    import awsworld.examples.order  # noqa: F401  (a module's steps, order.charge among them)

    with pytest.raises(ValueError, match=r"a test cannot replace a step by defining another under its name \(the "
                                         r"workflow calls the one it imported\)\. Patch what the step's body calls "
                                         r"instead, with pytest's monkeypatch"):
        @step(name="order.charge")
        async def fake_charge(order_id: str) -> str:
            return "charged"
