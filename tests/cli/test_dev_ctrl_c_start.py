"""Ctrl-C while ``awsworld dev`` is still starting: the start is undone (``cli/dev.CtrlC``, dev's handler from its
command's first line), ``stopped``, exit 130, no traceback, and the ``--state`` folder is left as a next ``dev`` can
use (its lock is the operating system's, the snapshots are copied whole or not at all: ``cli/dev_state.py``). There
is no line to wait for in most of the start, so the Ctrl-C is sent at delays after the spawn sampled over it (the
interpreter loading the command, the user's module, the emulator, the state), and once right after dev's first
line. Where the user's module marks a moment (a ``__del__`` that runs during its import, an import that never
ends), the Ctrl-C lands there every time. dev as a process, as a user runs it."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from awsworld.cli.dev import CtrlC
from tied import tied  # tests/tied.py (tests/ is on sys.path)

from .test_cli import _clean_env, awsworld, ended_within

MODULE = '''
from awsworld import step, workflow


@step(name="ctrlc.add")
async def add(n: int) -> int:
    return n + 1


@workflow(name="ctrlc.flow")
async def flow(n: int) -> int:
    return await add(n)
'''
SERVING = "serving deliveries; Ctrl-C to stop"
"""The banner's last line: a press after it is dev's way out (exit 0), one before it the start's (exit 130). Which
one a sample at a fixed delay is depends on the machine's speed (CI: a quiet machine was serving at 1.5 s)."""
ENDS_WITHIN = 30.0
"""Seconds from the Ctrl-C to the process's end: a Ctrl-C while the emulator's modules load (on a thread of
their own) waits for that import to end, a few seconds on a busy machine; a hang is what this bounds."""


def _preexec() -> Callable[[], None]:
    """What the child does before it runs Python: Ctrl-C delivered as a terminal delivers it, and tied to this
    process (``tied``, made here: it names this process as the parent). A process started in the background by a
    shell without job control (``pytest ... &`` in a script) inherits SIGINT ignored, and Python then never raises
    ``KeyboardInterrupt``: every sample would hang for a reason of the test's, not dev's."""
    tie = tied()

    def child() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if tie is not None:
            tie()

    return child


def _dev(project: Path, state: Path, module: str = "ctrlc") -> tuple[subprocess.Popen[str], list[str],
                                                                     threading.Event]:
    """``awsworld dev MODULE --state STATE`` as a process; its output lines as they come (a reader thread), and an
    event set at its first line."""
    process = subprocess.Popen([sys.executable, "-m", "awsworld.cli", "dev", module, "--state", str(state)],
                               cwd=project, env=_clean_env() | {"PYTHONFAULTHANDLER": "1"},
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, preexec_fn=_preexec())
    lines: list[str] = []
    first = threading.Event()
    assert process.stdout is not None
    stdout = process.stdout

    def read() -> None:
        for line in iter(stdout.readline, ""):
            lines.append(line)
            first.set()

    threading.Thread(target=read, daemon=True).start()
    return process, lines, first


def _interrupted(process: subprocess.Popen[str], lines: list[str], when: str) -> tuple[int, str]:
    """Ctrl-C, then the exit code and the whole output, once the process has ended (within ``ENDS_WITHIN``)."""
    process.send_signal(signal.SIGINT)
    code = ended_within(process, ENDS_WITHIN, lines, f"dev still there {ENDS_WITHIN:g} s after a Ctrl-C {when}")
    time.sleep(0.1)  # (the reader thread takes the last lines)
    return code, "".join(lines)


def _reached_awsworld(output: str) -> bool:
    """Whether a Ctrl-C came once the command's code ran: it said ``stopped``, or its traceback (a failure of this
    test) passes through the command's code (``awsworld/cli``), the first of awsworld's to run but for the
    package's ``__init__``, which imports nothing."""
    return "stopped" in output or "awsworld/cli" in output


def test_ctrl_c_at_any_moment_of_devs_start_stops_it_cleanly_and_leaves_its_state_usable(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    project = tmp_path_factory.mktemp("ctrlc")
    (project / "ctrlc.py").write_text(textwrap.dedent(MODULE))
    state = project / "state"
    seen: list[tuple[str, int, str]] = []
    # The first sample is the earliest moment awsworld's code can answer: 0.1 s after the spawn, then 50 ms later
    # each time the Ctrl-C came while the interpreter was still starting (``site``, before any of awsworld's code:
    # the interpreter's own traceback, which nothing of awsworld's can prevent). It lands while the command's
    # modules load (where the traceback was), or its parser is built, on a busy machine or an idle one.
    for sample in (0.1, 0.8, 1.5, None):  # None: right after dev's first line
        delay, when, code, output = sample, "", 0, ""
        for _ in range(20):
            process, lines, first = _dev(project, state)
            if delay is None:
                assert first.wait(timeout=60), "dev printed nothing within 60 s"
                when = "right after dev's first line"
            else:
                time.sleep(delay)
                when = f"{delay:g} s after the spawn"
            code, output = _interrupted(process, lines, when)
            if delay is None or _reached_awsworld(output):
                break
            delay = round(delay + 0.05, 2)
        seen.append((when, code, output))
    for when, code, output in seen[:-1]:
        assert "Traceback" not in output, f"a Ctrl-C {when}:\n{output}"
        assert output.rstrip().endswith("stopped") and output.count("stopped") == 1, f"a Ctrl-C {when}:\n{output}"
        if SERVING in output:  # the start was over before the press (a quick machine): dev's own way out
            assert code == 0 and "state saved to" in output, f"a Ctrl-C {when}: exit {code}\n{output}"
            continue
        # (not -SIGINT: the process ended itself by the signal after it said "stopped" when the KeyboardInterrupt
        # came out of code a @dataclass runs from a string as the command's modules load: ``cli.stopped``)
        assert code == 130, f"a Ctrl-C {when}: exit {code}\n{output}"
    assert any(SERVING not in output for _, _, output in seen[:-1]), "no sample came during the start"
    # dev's first line is its banner, whose last line says "Ctrl-C to stop": its stop event is taken before it
    # (``cli/dev.CtrlC.serving``), so a Ctrl-C right after it is dev's way out, the state saved, exit 0. (It
    # was set after the banner: a Ctrl-C there cut the banner short, or saved the state and said "stopped" twice.)
    when, code, output = seen[-1]
    assert "Traceback" not in output and code == 0, f"a Ctrl-C {when}: exit {code}\n{output}"
    assert SERVING in output and "state saved to" in output, output
    assert output.rstrip().endswith("stopped") and output.count("stopped") == 1, output

    # The same state folder serves again: not locked, nothing half written.
    process, lines, _ = _dev(project, state)
    try:
        deadline = time.monotonic() + 60
        while not any(line.startswith("serving deliveries") for line in lines):
            assert process.poll() is None and time.monotonic() < deadline, "dev did not serve:\n" + "".join(lines)
            time.sleep(0.05)
        env = _clean_env()
        for line in lines:
            name, _, value = line.removeprefix("export ").strip().partition("=")
            if line.startswith("export ") and value:
                env[name] = value
        done = awsworld("start", "ctrlc.flow", "[1]", "--wait", "30", env=env, cwd=project)
        assert done.code == 0 and done.out.splitlines()[-1] == "2", done
    finally:
        code, output = _interrupted(process, lines, "of the dev serving again")
    assert code == 0 and "Traceback" not in output and output.rstrip().endswith("stopped"), output


DEL_AT_IMPORT = MODULE + '''

import time


class Connection:
    """A resource whose release takes a while (a connection's goodbye), released during the import: Python runs
    ``__del__`` as its last reference goes, and a KeyboardInterrupt raised in it is printed as "Exception ignored"
    and goes no further."""

    def __del__(self) -> None:
        print("releasing", flush=True)
        time.sleep(2)


Connection()
'''


def test_a_ctrl_c_while_the_users_module_runs_a_del_at_its_import_stops_dev(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The Ctrl-C that dev lost: Python's own handler raised ``KeyboardInterrupt`` into the ``__del__`` running at
    that moment, Python printed it as "Exception ignored", and dev went on and served as if no Ctrl-C had come
    (every time here; once in 40 samples of the test above on a loaded machine, where it landed in some
    ``__del__`` or callback of the start). dev's handler only records the press: the start is undone once the
    ``__del__`` returns."""
    project = tmp_path_factory.mktemp("ctrlcdel")
    (project / "ctrlcdel.py").write_text(textwrap.dedent(DEL_AT_IMPORT))
    process, lines, _ = _dev(project, project / "state", "ctrlcdel")
    deadline = time.monotonic() + 60
    while "releasing\n" not in lines:
        assert process.poll() is None and time.monotonic() < deadline, "no __del__ ran:\n" + "".join(lines)
        time.sleep(0.01)
    code, output = _interrupted(process, lines, "during the __del__")
    assert code == 130 and "Traceback" not in output and "Exception ignored" not in output, output
    assert "serving deliveries" not in output and output.rstrip().endswith("stopped"), output
    # Said at the press: where the user's code holds dev, and that a second press stops it at once.
    where = f"{project / 'ctrlcdel.py'}:{DEL_AT_IMPORT.splitlines().index('        time.sleep(2)') + 1}, in __del__"
    assert f"stopping once your code lets dev's start go: it holds it at {where}: time.sleep(2) (Ctrl-C again to " \
        "stop at once)" in output, output


HANGS_AT_IMPORT = '''
import time

print("connecting", flush=True)
# A connection made at import that never answers, in code run from a string (as @dataclass, namedtuple and template
# engines run the code they make): a KeyboardInterrupt out of such code made ``python -m`` die of SIGINT at its end.
exec("""
while True:
    time.sleep(0.05)
""")
'''


def test_a_second_ctrl_c_stops_a_users_module_whose_import_never_ends(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The user's modules import on dev's main thread, before its loop: the first Ctrl-C says where the import
    holds dev and waits for it (as while dev serves: ``cli/dev_loop.on_ctrl_c``), the second ends it there: exit
    130, where the ``KeyboardInterrupt`` leaving code run from a string had the process end by SIGINT (-2) after it
    said "stopped" (``cli.stopped``)."""
    project = tmp_path_factory.mktemp("ctrlchang")
    (project / "ctrlchang.py").write_text(HANGS_AT_IMPORT)
    process, lines, _ = _dev(project, project / "state", "ctrlchang")
    try:
        deadline = time.monotonic() + 60
        while "connecting\n" not in lines:
            assert process.poll() is None and time.monotonic() < deadline, "the import did not run:\n" + "".join(lines)
            time.sleep(0.01)
        process.send_signal(signal.SIGINT)
        said = f"stopping once your code lets dev's start go: it holds it at {project / 'ctrlchang.py'}:"
        while not any(line.startswith(said) and "in <module>" in line for line in lines):
            assert process.poll() is None and time.monotonic() < deadline, "the first Ctrl-C:\n" + "".join(lines)
            time.sleep(0.01)
        assert process.poll() is None, "".join(lines)  # the import goes on: the first press only asked
    finally:
        code, output = _interrupted(process, lines, "the second time")
    assert code == 130 and "Traceback" not in output and output.rstrip().endswith("stopped"), output
    assert output.count("stopped") == 1, output


def test_a_start_that_swallows_the_cancellation_of_its_ctrl_c_ends_where_it_would_serve() -> None:
    """A piece of dev's start that catches the ``CancelledError`` the first Ctrl-C sends it (library code that
    catches ``BaseException``) goes on: ``CtrlC.serving``, where dev would begin to serve, ends it instead. The
    press as the handler makes it (``press``), on a loop of this test's."""
    ctrl_c = CtrlC()
    reached: list[str] = []

    async def start() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:  # swallowed
            reached.append("went on")
        ctrl_c.serving()
        reached.append("served")

    async def main() -> None:
        task = asyncio.get_running_loop().create_task(start())
        ctrl_c.start(asyncio.get_running_loop(), task)
        await asyncio.sleep(0)
        ctrl_c.press()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert reached == ["went on"] and ctrl_c.pressed


SLOW_EMULATOR = MODULE + '''

import time

from awsworld.local.moto_server import MotoServer

_start = MotoServer.start


def _slow_start(self: MotoServer) -> MotoServer:
    """The emulator's start as on a slow machine (its modules loading on a busy one took seconds): said, then
    held, so a signal lands in it every time."""
    print("emulator starting", flush=True)
    time.sleep(EMULATOR_START_SECONDS)
    return _start(self)


MotoServer.start = _slow_start  # type: ignore[method-assign]
'''
EMULATOR_START_SECONDS = 60.0
"""How long the emulator's start takes in ``SLOW_EMULATOR``: far longer than a stop may take (``STOPS_WITHIN``)."""
STOPS_WITHIN = 15.0
"""Seconds from the signal to dev's end while its emulator starts: the process's way out, not the start's rest."""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_ctrl_c_or_sigterm_while_the_emulator_starts_stops_dev_at_once_and_leaves_its_state_usable(
        tmp_path_factory: pytest.TempPathFactory, signum: signal.Signals) -> None:
    """A Ctrl-C while the emulator starts ended dev only once that start was over: the start ran on asyncio's
    executor thread, which the interpreter joins at its exit ("stopped" was said, then dev waited, 2 s on a busy
    machine). SIGTERM during dev's start ended it outright, by Python's default (exit -15, nothing said). Both are
    the start's Ctrl-C now: "stopped", exit 130, no traceback, at once, and the ``--state`` folder serves the next
    dev (its lock released, nothing half written)."""
    project = tmp_path_factory.mktemp("slowemulator")
    (project / "slowemulator.py").write_text(
        textwrap.dedent(SLOW_EMULATOR).replace("EMULATOR_START_SECONDS", repr(EMULATOR_START_SECONDS)))
    (project / "ctrlc.py").write_text(textwrap.dedent(MODULE))
    state = project / "state"
    process, lines, _ = _dev(project, state, "slowemulator")
    deadline = time.monotonic() + 60
    while "emulator starting\n" not in lines:
        assert process.poll() is None and time.monotonic() < deadline, "no emulator start:\n" + "".join(lines)
        time.sleep(0.01)
    process.send_signal(signum)
    code = ended_within(process, STOPS_WITHIN, lines,
                        f"dev still there {STOPS_WITHIN:g} s after {signum.name} while its emulator started")
    time.sleep(0.1)  # (the reader thread takes the last lines)
    output = "".join(lines)
    assert code == 130 and "Traceback" not in output, f"exit {code}\n{output}"
    assert output.rstrip().endswith("stopped") and output.count("stopped") == 1, output
    assert "serving deliveries" not in output, output

    process, lines, _ = _dev(project, state)  # the same folder serves again
    try:
        deadline = time.monotonic() + 60
        while not any(line.startswith("serving deliveries") for line in lines):
            assert process.poll() is None and time.monotonic() < deadline, "dev did not serve:\n" + "".join(lines)
            time.sleep(0.05)
    finally:
        code, output = _interrupted(process, lines, "of the dev serving again")
    assert code == 0 and "Traceback" not in output and "state saved to" in output, output


SIGTERM_AT_THE_EMULATORS_IMPORT = '''
import os, signal, sys


class SigtermAtTheEmulatorsImport:
    """SIGTERM to this process as ``moto.core`` is first imported (``import moto`` imports it): a moment of the first
    second of ``awsworld dev`` that a test can find every time."""

    def find_spec(self, name, path=None, target=None):
        if name == "moto.core":
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGTERM)
        return None


sys.meta_path.insert(0, SigtermAtTheEmulatorsImport())
sys.argv = ["awsworld", *sys.argv[1:]]
from awsworld.cli import main

sys.exit(main())
'''


def test_a_sigterm_while_dev_imports_the_emulator_is_devs_ctrl_c(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The emulator's import (moto: 0.3 to 0.9 s) came before dev's first line, in the check that it is installed
    (``cli/__init__.py``'s ``_emulator_installed``, which finds it now, without importing it): a SIGTERM then ended
    dev by Python's default, exit -15 and nothing said (it lost nothing: no state read, no lock taken, nothing
    started). dev imports it after its first line, where SIGTERM is a Ctrl-C: "stopped", exit 130, the state folder
    as it was. (awsworld.cli's import is dev's too: ``test_a_sigterm_while_awsworld_cli_loads_is_devs_ctrl_c``;
    the interpreter's own start is still Python's default, as SIGTERM is for every other command all along.)"""
    project = tmp_path_factory.mktemp("sigtermimport")
    (project / "ctrlc.py").write_text(textwrap.dedent(MODULE))
    state = project / "state"
    process = subprocess.run([sys.executable, "-c", SIGTERM_AT_THE_EMULATORS_IMPORT, "dev", "ctrlc", "--state",
                              str(state)], cwd=project, env=_clean_env(), capture_output=True, text=True,
                             timeout=120, preexec_fn=_preexec())
    assert process.returncode == 130, (process.returncode, process.stdout, process.stderr)
    assert process.stderr.rstrip().endswith("stopped") and "Traceback" not in process.stderr, process.stderr
    assert "serving deliveries" not in process.stdout, process.stdout


SIGTERM_AT_AN_IMPORT = '''
import os, signal, sys


class SigtermAtAnImport:
    """SIGTERM to this process as the module named by its first argument is first imported."""

    def find_spec(self, name, path=None, target=None):
        if name == AT:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGTERM)
        return None


AT = sys.argv[1]
sys.meta_path.insert(0, SigtermAtAnImport())
sys.argv = ["awsworld", *sys.argv[2:]]
from awsworld.cli import run

run()
'''


@pytest.mark.parametrize("module", ["argparse", "awsworld.deploy.init", "awsworld.cli.serve"])
def test_a_sigterm_while_awsworld_cli_loads_is_devs_ctrl_c(module: str, tmp_path: Path) -> None:
    """The command's own modules load for 0.1 s and more before dev's first line (``cli/dev.CtrlC.installed``): a
    SIGTERM there ended dev by Python's default, exit -15 and nothing said, where one a moment later says
    "stopped" and exits 130. The handler is in place from ``cli/__init__``'s first line now
    (``cli/early_sigterm.py``): a SIGTERM as its first imports load (``argparse``), its command groups (the deploy
    code, ``serve``'s parser) is dev's Ctrl-C."""
    (tmp_path / "ctrlc.py").write_text(textwrap.dedent(MODULE))
    process = subprocess.run([sys.executable, "-c", SIGTERM_AT_AN_IMPORT, module, "dev", "ctrlc"], cwd=tmp_path,
                             env=_clean_env(), capture_output=True, text=True, timeout=120, preexec_fn=_preexec())
    assert process.returncode == 130, (process.returncode, process.stdout, process.stderr)
    assert process.stderr == "\nstopped\n" and process.stdout == "", process


@pytest.mark.parametrize("command", ["serve", "ui"])
@pytest.mark.parametrize("module", ["argparse", "awsworld.cli.serve"])
def test_a_sigterm_while_awsworld_cli_loads_is_a_servers_ctrl_c_too(command: str, module: str,
                                                                    tmp_path: Path) -> None:
    """``serve`` and ``ui`` stop on SIGTERM as on Ctrl-C once their server runs (``_http/listen.sigterm_as_ctrl_c``);
    before it, as their modules loaded, a SIGTERM ended them by Python's default, exit -15 and nothing said. The
    early handler (``cli/early_sigterm.STOPPED_BY_SIGTERM``) covers them as it covers dev: "stopped", exit 130."""
    process = subprocess.run([sys.executable, "-c", SIGTERM_AT_AN_IMPORT, module, command], cwd=tmp_path,
                             env=_clean_env(), capture_output=True, text=True, timeout=120, preexec_fn=_preexec())
    assert process.returncode == 130, (process.returncode, process.stdout, process.stderr)
    assert process.stderr == "\nstopped\n" and process.stdout == "", process


def test_a_sigterm_while_a_failure_is_described_is_a_stop(tmp_path: Path) -> None:
    """A stop that lands after ``main``'s own ``except KeyboardInterrupt``, as it describes a failure (``serve`` with
    no stack configured: ``errors.describe`` imports ``authoring.definitions``), printed a traceback and ended the
    process by SIGINT (-2); ``run`` answers it as every other stop: "stopped", exit 130."""
    env = {k: v for k, v in _clean_env().items() if not k.startswith("AWSWORLD_")}
    process = subprocess.run([sys.executable, "-c", SIGTERM_AT_AN_IMPORT, "awsworld.authoring.definitions", "serve"],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
                             preexec_fn=_preexec())
    assert process.returncode == 130, (process.returncode, process.stdout, process.stderr)
    assert process.stderr.endswith("\nstopped\n") and "Traceback" not in process.stderr, process.stderr


def test_a_sigterm_at_any_moment_of_devs_first_tenths_of_a_second_is_devs_ctrl_c(tmp_path: Path) -> None:
    """SIGTERM at small delays after the spawn: once awsworld's CLI has begun to load (``-X importtime`` says
    ``awsworld.cli.early_sigterm`` was imported, the line before its handler is set), dev says "stopped" and
    exits 130, never -15; before that (the interpreter's own start, a few hundredths of a second) only Python's
    default can answer: -15, nothing said, nothing started."""
    (tmp_path / "ctrlc.py").write_text(textwrap.dedent(MODULE))
    answered: list[float] = []
    for delay in (0.0, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3):
        process = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "awsworld.cli", "dev", "ctrlc"],
                                   cwd=tmp_path, env=_clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, preexec_fn=_preexec())
        time.sleep(delay)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
        # (-X importtime's lines, written by whichever thread imports: one from the emulator's thread can land in
        # the middle of "stopped"'s line, between its text and its newline: CI 105)
        said = re.sub(r"import time:[^\n]*(\n|$)", "", err).splitlines()
        if not any(line.startswith("import time:") and line.endswith(" awsworld.cli.early_sigterm")
                   for line in err.splitlines()):
            assert (process.returncode, said, out) == (-signal.SIGTERM, [], ""), (delay, process.returncode, err)
            continue
        answered.append(delay)
        assert process.returncode == 130, (delay, process.returncode, out, err)
        assert said[-2:] == ["", "stopped"] and "Traceback" not in err, (delay, said)
    assert answered and answered[0] <= 0.1, answered
