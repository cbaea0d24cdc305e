"""``awsworld dev --state`` with a step that blocks the event loop (``time.sleep`` in an ``async def``, which users
do): the runs survive ``kill -9`` as the docs promise (``cli/dev_state.Snapshots`` copies on a thread of its own), and
dev says which line of the user's code blocked its loop, and for how long (``cli/dev_loop.LoopWatch``). With ``dev``
processes of its own."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from awsworld.cli.dev_loop import LoopWatch
from awsworld.cli.dev_state import TABLE_FILE
from tied import tied  # tests/tied.py (tests/ is on sys.path)

from .test_cli import Dev, Runner, ended_within, until_found
from .test_dev_failures import dev_of

BLOCKING = '''
import time
from pathlib import Path

from awsworld import step, step_metadata, workflow

HERE = Path(__file__).parent


@step(name="blocking.hold")
async def hold(n: int) -> int:
    (HERE / f"holding-{n}-{step_metadata().attempt}").touch()
    while not (HERE / "release").exists():
        time.sleep(0.05)  # blocks the whole event loop, as a synchronous call in an async def does
    return n + 1


@workflow(name="blocking.flow")
async def flow(n: int) -> int:
    return await hold(n)
'''


def saved_runs(state: Path) -> set[str]:
    """The runs whose head the last copy of the table holds."""
    table = state / TABLE_FILE
    if not table.exists():
        return set()
    items = (json.loads(line) for line in table.read_text(encoding="utf-8").splitlines() if line)
    return {item["pk"]["S"].removeprefix("RUN#") for item in items if item.get("sk", {}).get("S") == "RUN"}


def test_runs_started_while_a_step_blocks_the_loop_survive_kill_9_and_dev_names_the_line(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Reported by a walk: with a step that blocks the event loop, ``kill -9`` of dev lost every run. The copies of
    the state were made on the loop, so none was made while the step blocked it: the runs started meanwhile (here
    two, started from the CLI while the first run's step blocks) were in no copy, and a crash lost them, where the
    docs promise at most the last 5 s. Now the copies are made on a thread: the runs are saved while the loop is
    still blocked, and the restart finds and finishes all three. dev also says what blocked it, naming the line."""
    project, runner, server = dev_of(tmp_path_factory, "blocking", BLOCKING)
    state = project / "state"
    try:
        output = server.follow()
        first = server("start", "blocking.flow", "[1]").out.strip()
        until_found(lambda: (project / "holding-1-1").exists(), "the first run's step blocking the loop")
        others = [server("start", "blocking.flow", f"[{n}]").out.strip() for n in (2, 3)]
        until_found(lambda: saved_runs(state) >= {first, *others}, "a copy holding the three runs")
        assert not (project / "release").exists() and not (project / "holding-2-1").exists(), \
            "saved while the first step still blocked the loop"
        (project / "release").touch()
        said = until_found(lambda: [line for line in output if "blocked dev's event loop" in line],
                           "the warning")
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(timeout=30)
    finally:
        runner.close()
    [warning] = said
    assert f"{project / 'blocking.py'}:14, in hold: time.sleep(0.05)" in warning, warning
    assert "asyncio.to_thread" in warning and "await asyncio.sleep" in warning, warning

    runner = Runner(tmp_path_factory.mktemp("runner-after"))
    again = Dev(project, state, [runner], module="blocking")
    try:
        results = [again("result", run_id, "--wait", "60") for run_id in (first, *others)]
        assert [(r.code, r.out.strip()) for r in results] == [(0, "2"), (0, "3"), (0, "4")], results
    finally:
        again.stop()
        runner.close()


def _block(seconds: float) -> None:
    time.sleep(seconds)  # the line the watch names


async def test_the_watch_names_the_blocking_line_once_a_minute_and_not_dev_s_own_waits() -> None:
    """``LoopWatch`` in this process: a block of the loop by this file's code is said with its line and duration, a
    second block at the same line within the minute is only counted, and a wait that blocks nothing is not said."""
    said: list[str] = []
    watch = LoopWatch(asyncio.get_running_loop(), say=said.append)
    watch.start()
    try:
        _block(2.5)
        await asyncio.sleep(0.6)  # (the loop answers: the block has ended, and is said)
        _block(2.5)
        await asyncio.sleep(1.5)  # awaited: the loop is free
    finally:
        watch.stop()
    line = _block.__code__.co_firstlineno + 1
    assert len(said) == 1 and f"{__file__}:{line}, in _block: time.sleep(seconds)" in said[0], said
    seconds = float(said[0].split("blocked dev's event loop for ")[1].split(" s")[0])
    assert 1.0 <= seconds < 5.0, f"the first block alone, not both: {said}"  # (a loaded watch thread is late)
    assert watch.blocks == 1


SPINNING = '''
from awsworld import workflow


@workflow(name="spinning.flow")
async def flow() -> int:
    n = 0
    while True:  # the newcomer's loop without an await: it holds dev's event loop for good
        n += 1
'''


def test_ctrl_c_stops_dev_while_a_workflow_spins_on_its_loop(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Found by a newcomer's walk: a workflow body looping without an await holds dev's one event loop for good, and
    Ctrl-C did nothing (dev's handler was the loop's, which runs only when the loop turns): only ``kill -9`` ended
    it. Now the first Ctrl-C says which line of the user's code holds the loop, and the second ends dev (exit 130).

    And ends it by its way out: the second press's ``KeyboardInterrupt`` came out of ``asyncio.run`` with ``dev``'s
    way out undone (the state not saved, a page of "Task was destroyed but it is pending!"), its tasks' ``finally``
    blocks left to the interpreter's ending, where one could wait for good for a thread already stopped: CI saw
    ``dev`` still there 60 s after the second press. Should it hang again, the dev's threads are dumped here."""
    project, runner, server = dev_of(tmp_path_factory, "spinning", SPINNING, settings={"PYTHONFAULTHANDLER": "1"})
    try:
        output = server.follow()
        run_id = server("start", "spinning.flow").out.strip()
        until_found(lambda: server.json("describe", run_id, "--json")["status"] == "running", "the run spinning")
        server.process.send_signal(signal.SIGINT)
        said = until_found(lambda: [line for line in output if "stopping once your code" in line], "the first answer")
        assert server.process.poll() is None, "still there: the loop is still held"
        server.process.send_signal(signal.SIGINT)
        code = ended_within(server.process, 60, output, "dev still there 60 s after the second Ctrl-C")
    finally:
        if server.process.poll() is None:
            server.process.kill()
        runner.close()
    assert code == 130, (code, output[-20:])
    after = "".join(output[output.index(said[0]):])
    assert "state saved to" in after and after.rstrip().endswith("stopped"), after
    assert "Traceback" not in after and "Task was destroyed" not in after, after
    assert said == [f"stopping once your code lets dev's event loop go: it holds it at {project / 'spinning.py'}:9, "
                    "in flow: n += 1 (Ctrl-C again to stop at once)\n"] or \
        said == [f"stopping once your code lets dev's event loop go: it holds it at {project / 'spinning.py'}:8, "
                 "in flow: while True:  # the newcomer's loop without an await: it holds dev's event loop for good "
                 "(Ctrl-C again to stop at once)\n"], said



IDLE = '''
from awsworld import workflow


@workflow(name="idle.flow")
async def flow() -> int:
    return 1
'''


def test_ctrl_c_on_dev_started_by_its_console_script_blames_no_code_of_the_users(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Found by a walk (schedules): every Ctrl-C of an idle ``awsworld dev`` started as users start it, by the venv's
    ``awsworld`` script, said "stopping once your code lets dev's event loop go: it holds it at .venv/bin/awsworld:10,
    in <module>: sys.exit(main())". That script is in none of the folders ``users_frame`` leaves out (it is the
    ``scripts`` path, not a package's), so the outermost frame of every stack looked like the user's (the tests ran
    ``python -m awsworld.cli``, whose frames are Python's). Now the process's ``__main__`` is never the user's."""
    script = Path(sys.executable).with_name("awsworld")
    assert script.exists(), script
    _, runner, server = dev_of(tmp_path_factory, "idle", IDLE, command=(str(script),))
    try:
        output = server.follow()
        server.process.send_signal(signal.SIGINT)
        code = ended_within(server.process, 60, output, "dev still there 60 s after Ctrl-C")
    finally:
        if server.process.poll() is None:
            server.process.kill()
        runner.close()
    said = "".join(output)
    assert code == 0 and said.rstrip().endswith("stopped"), (code, said)
    assert "your code" not in said, said

HANGS_AT_THE_END = '''
import os, signal, sys, threading, time

from awsworld.cli.dev_loop import on_ctrl_c


class HangsAtTheEnd:
    def __del__(self) -> None:  # run by the interpreter's ending, when it clears this module
        threading.Event().wait()


keep = HangsAtTheEnd()
signal.signal(signal.SIGINT, on_ctrl_c(lambda: None, force_after=1.0, backstop_after=1.0))
os.kill(os.getpid(), signal.SIGINT)
try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)
except KeyboardInterrupt:
    time.sleep(0.3)  # (dev's way out takes longer: the timer's thread has armed the watchdog by then)
sys.exit(0)
'''


def test_the_second_ctrl_c_ends_dev_even_when_the_interpreters_own_ending_hangs(tmp_path: Path) -> None:
    """The timer the second Ctrl-C arms is a Python thread: once the interpreter has begun to end, it stops every
    thread but the main one, and a hang there (a ``finally`` or ``__del__`` waiting for a thread already stopped,
    the way ``dev`` hung in CI) kept the process for good. The watchdog of C (``faulthandler``) ends it, saying where
    each thread was."""
    script = tmp_path / "hangs.py"
    script.write_text(HANGS_AT_THE_END)
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, preexec_fn=tied())
    try:
        out, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 1, (process.returncode, out)
    assert "Timeout (0:00:02)!" in out and "in __del__" in out, out
