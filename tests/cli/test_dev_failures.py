"""``awsworld dev``'s terminal when a run fails: the run, the failing step, the original type and message, and the
tracebacks, as plain text (dev sets ``AWSWORLD_LOG_ERRORS=full``), with a ``dev`` process of its own."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from .test_cli import WORKFLOWS, Dev, Runner, _start


def test_the_dev_terminal_says_when_a_run_fails_with_its_traceback(tmp_path_factory: pytest.TempPathFactory) -> None:
    project = tmp_path_factory.mktemp("failures")
    (project / "clitest.py").write_text(textwrap.dedent(WORKFLOWS))
    runner = Runner(tmp_path_factory.mktemp("runner"))
    server = Dev(project, project / "state", [runner])
    try:
        run_id = _start(server, "clitest.fail", '["out of filters"]', "--wait", "30")
    finally:
        out = server.stop()
        runner.close()
    head = (f"run {run_id} (clitest.fail) failed [USER_ERROR]: StepError: step 'clitest.boom' failed: "
            "ValueError: out of filters")
    assert head in out.splitlines(), out
    report = out[out.index(head):]
    assert "  step clitest.boom (step_" in report and "raised ValueError: out of filters" in report
    assert "raise ValueError(why)" in report and "await boom(why)" in report


def dev_of(tmp_path_factory: pytest.TempPathFactory, module: str, source: str,
           settings: dict[str, str] | None = None, command: Sequence[str] | None = None) -> tuple[Path, Runner, Dev]:
    """``awsworld dev MODULE`` as a process on a project of its own holding ``MODULE.py`` (``source``), with a
    runner for its commands: the caller stops both. ``settings``: variables for the dev process alone; ``command``:
    how ``awsworld`` is run (``Dev``'s, e.g. ``dev_snapshotting_every``)."""
    project = tmp_path_factory.mktemp(module)
    (project / f"{module}.py").write_text(textwrap.dedent(source))
    runner = Runner(tmp_path_factory.mktemp("runner"))
    options = {} if command is None else {"command": command}
    return project, runner, Dev(project, project / "state", [runner], module=module, settings=settings, **options)


EXITS = '''
import sys

from awsworld import step, workflow


@step(name="exits.leave")
async def leave(code: int) -> int:
    sys.exit(code)  # a library that gives up so, say


@workflow(name="exits.via_step")
async def via_step(code: int) -> int:
    return await leave(code)


@workflow(name="exits.itself")
async def itself(code: int) -> int:
    sys.exit(code)


@workflow(name="exits.fine")
async def fine(value: int) -> int:
    return value
'''


def test_sys_exit_in_a_step_or_workflow_fails_its_run_and_dev_serves_on(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """``sys.exit()`` in a body used to stop ``dev`` itself (asyncio re-raises a task's SystemExit out of its loop),
    losing every run it had not saved; now it fails that run, recorded as the SystemExit, and dev goes on."""
    _, runner, server = dev_of(tmp_path_factory, "exits", EXITS)
    try:
        via_step = _start(server, "exits.via_step", "3", "--wait", "30")
        itself = _start(server, "exits.itself", "4", "--wait", "30")
        fine = server("start", "exits.fine", "7", "--wait", "30")
        described = server.json("describe", via_step)
        described_itself = server.json("describe", itself)
    finally:
        out = server.stop()
        runner.close()
    assert fine.code == 0 and fine.out.strip().splitlines()[-1] == "7", (fine, out)
    assert described["status"] == "failed" and described["error"] == \
        "StepError: step 'exits.leave' failed: SystemExit: 3", described
    assert described["errorDetails"]["cause"]["name"] == "SystemExit"
    assert "sys.exit(code)" in described["errorDetails"]["cause"]["stack"]
    assert described_itself["status"] == "failed" and described_itself["errorDetails"]["name"] == "SystemExit"
    assert f"run {itself} (exits.itself) failed [USER_ERROR]: SystemExit: 4" in out.splitlines(), out


RERUNS = '''
import os

from awsworld import FatalError, create_hook, step, workflow


@step(name="reruns.charge")
async def charge(order: str, amount: float) -> str:
    if not os.path.exists("partner-up"):
        raise FatalError(f"partner down for {order}")
    return f"charged {order} {amount}"


@workflow(name="reruns.checkout")
async def checkout(order: str, amount: float) -> str:
    return await charge(order, amount)


@workflow(name="reruns.waits")
async def waits(order: str) -> object:
    async with create_hook(token=f"reruns:{order}") as hook:
        return await hook
'''


def test_awsworld_rerun_starts_a_failed_run_again_with_its_input(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A failed run is final: `awsworld rerun RUN` starts a new run of its workflow with its recorded input once
    the cause is fixed, `describe` names the run it reruns, and a run still running is refused in one line."""
    project, runner, server = dev_of(tmp_path_factory, "reruns", RERUNS)
    try:
        failed = _start(server, "reruns.checkout", '["A-17", 42.5]', "--wait", "30")
        (project / "partner-up").write_text("")  # the cause is fixed
        again = server("rerun", failed, "--wait", "30")
        rerun_id = again.out.splitlines()[0]
        described = server("describe", rerun_id)
        waiting = _start(server, "reruns.waits", '"B-1"')
        refused = server("rerun", waiting)
        missing = server("rerun", "wrun_01NOSUCHRUN00000000000000")
        old = server.json("describe", failed)
        source = project / "reruns.py"  # the workflow gains a parameter: the recorded input no longer fits it
        source.write_text(source.read_text().replace("async def checkout(order: str, amount: float)",
                                                     "async def checkout(order: str, amount: float, express: bool)"))
        unfit = server("rerun", failed)
    finally:
        server.stop()
        runner.close()
    line = unfit.one_line_error(1)  # (it read "unexpected TypeError ... rerun with --debug", as for a bug)
    assert line.startswith(f"awsworld rerun: run {failed}'s recorded input does not fit reruns.checkout's "
                           "parameters now: checkout() missing 1 required positional argument: 'express'; nothing "
                           "was started (hint: the workflow changed since that run started: give a parameter "
                           "added since a default"), line
    assert again.code == 0 and again.out.splitlines()[1:] == ['"charged A-17 42.5"'], again
    assert rerun_id != failed and f"rerun of  {failed}" in described.out.splitlines(), described
    assert old["status"] == "failed" and old["rerunOf"] is None
    line = refused.one_line_error(1)
    assert line.startswith(f"awsworld rerun: run {waiting} is running: only a run that ended") and \
        f"`awsworld cancel {waiting}`" in line, line
    assert missing.one_line_error(1).startswith("awsworld rerun: no such run:"), missing
