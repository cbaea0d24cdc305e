"""Mistakes refused where they are made: ``Client.start`` and ``client.options(...).start`` bind the arguments to
the workflow's parameters when the workflow is known (a ``@workflow``, or a name in the client's registry) and
raise the ``TypeError`` Python gives, before anything is written; and a start whose message could not be queued
(``RunStartError``) names the CLI command that finishes it, which works as a process. In memory and on LocalAWS.
"""

from __future__ import annotations

import asyncio
import shlex
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from awsworld import RunStartError, workflow
from awsworld.cli.dev import environment
from awsworld.local import LocalAWS
from awsworld.world.errors import RunNotFoundError

from .conftest import BOTH

NAME = "startargs.add"


@workflow(name=NAME)
async def add(a: int, b: int, *, scale: int = 1) -> int:
    return (a + b) * scale


# Each call and the TypeError Python raises for it (the message is Python's own, not awsworld's).
MISTAKES: list[tuple[tuple[Any, ...], dict[str, Any], str]] = [
    ((1, 2), {"no_such_param": 3}, "add() got an unexpected keyword argument 'no_such_param'"),
    ((1,), {}, "add() missing 1 required positional argument: 'b'"),
    ((1, 2, 3), {}, "add() takes 2 positional arguments but 3 were given"),
    ((1,), {"a": 2, "b": 3}, "add() got multiple values for argument 'a'"),
]


@pytest.mark.parametrize("e2e_backend", BOTH)
@pytest.mark.parametrize("by_name", [False, True], ids=["function", "name"])
async def test_arguments_that_do_not_fit_are_refused_before_anything_is_written(e2e, by_name: bool) -> None:
    target: Any = NAME if by_name else add  # a name: checked against the client's registry
    await e2e.idle()
    deliveries = e2e.poller.deliveries
    for args, kwargs, message in MISTAKES:
        run_id = f"startargs-{uuid.uuid4().hex}"
        with pytest.raises(TypeError) as refused:
            await e2e.client.options(run_id=run_id).start(target, *args, **kwargs)
        assert str(refused.value) == message
        with pytest.raises(TypeError, match=r"^add\(\) "):
            await e2e.client.start(target, *args, **kwargs)
        with pytest.raises(RunNotFoundError):
            await e2e.world.runs.get(run_id)
    await e2e.idle()
    assert await e2e.queue_depth() == 0, "no message was queued"
    assert e2e.poller.deliveries == deliveries, "nothing was delivered"
    listed = await e2e.world.runs.list(workflow_name=NAME, status="pending")
    assert listed.data == [], "no run was recorded"
    run = await e2e.client.start(target, 2, b=3, scale=10)  # what fits still starts, and runs
    assert await run.result(timeout=30) == 50


async def test_a_start_whose_message_was_not_queued_is_finished_without_its_arguments(awsworld_env: Any,
                                                                                      monkeypatch) -> None:
    env = awsworld_env
    real = env.world.queue

    async def refuse(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("the queue is unreachable")

    monkeypatch.setattr(env.world, "queue", refuse)
    with pytest.raises(RunStartError) as refused:
        await env.client.start(add, 2, 3)
    monkeypatch.setattr(env.world, "queue", real)
    error = refused.value
    assert error.command == f"awsworld start {NAME} --run-id {error.run_id}"
    assert f"`{error.command}`" in str(error) and "ConnectionError" in str(error)
    assert await env.client.get_run(error.run_id).status() == "pending"
    run = await env.client.options(run_id=error.run_id).start(add)  # no arguments: the recorded ones are kept
    assert run.run_id == error.run_id and await run.result(timeout=30) == 5
    with pytest.raises(TypeError, match="missing 1 required positional argument"):
        await env.client.options(run_id=f"startargs-{uuid.uuid4().hex}").start(add, 2)  # a new id: checked


APP = f'''
from awsworld import workflow


@workflow(name="{NAME}")
async def add(a: int, b: int, *, scale: int = 1) -> int:
    return (a + b) * scale
'''


async def cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``awsworld ARGS`` as a process, off the event loop (the LocalAWS poller runs on it meanwhile)."""
    return await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "awsworld.cli", *args], env=env,
                                   cwd=cwd, capture_output=True, text=True, timeout=120)


async def test_on_local_aws_the_cli_command_in_a_run_start_error_finishes_the_start(
        local: LocalAWS, tmp_path: Path) -> None:
    assert local.client is not None
    sqs = await local.world.clients.sqs()

    def refuse(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "InternalError", "Message": "injected"}}, "SendMessage")

    sqs.meta.events.register("before-call.sqs.SendMessage", refuse)
    try:
        with pytest.raises(RunStartError) as refused:
            await local.client.start(add, 2, 3)
    finally:
        sqs.meta.events.unregister("before-call.sqs.SendMessage", refuse)
    error = refused.value
    assert await local.client.get_run(error.run_id).status() == "pending"

    (tmp_path / "startargs_app.py").write_text(textwrap.dedent(APP))
    env = {**environment(local.config, "http://127.0.0.1:9"), "AWSWORLD_MODULES": "startargs_app",
           "PATH": "/usr/bin:/bin"}
    command = shlex.split(error.command)
    assert command[:2] == ["awsworld", "start"]
    finished = await cli([*command[1:], "--wait", "30"], env, tmp_path)
    assert finished.returncode == 0, finished
    assert finished.stdout.splitlines() == [error.run_id, "5"], finished

    mistake = await cli(["start", NAME, "[1, 2, 3]", "--run-id", f"startargs-{uuid.uuid4().hex}"], env, tmp_path)
    assert mistake.returncode == 2 and not mistake.stdout and "Traceback" not in mistake.stderr, mistake
    [line] = mistake.stderr.strip().splitlines()
    assert line.startswith("awsworld start: add() takes 2 positional arguments but 3 were given (hint: ")
    assert f"{NAME}(a, b, *, scale=1)" in line and "--kwargs" in line
