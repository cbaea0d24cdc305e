"""What an ``awsworld`` command costs before it does its work: the start of a process of the console script.

Prints, for ``awsworld --version``, ``--help``, ``runs --help``, and ``runs`` and ``describe RUN`` against an
``awsworld dev`` this script starts (in a scratch directory, on a one-step workflow it writes there, with one run
started), the median and minimum over ``--runs`` processes of wall time (spawn to exit) and CPU time (the child's
user + system, from ``resource.getrusage``); then the largest cumulative imports (``python -X importtime``) of
the CLI's entry and of ``--version``'s whole process, and how many modules each loads.

CPU time is printed beside wall time because the machine may be shared: on an idle core the two agree, and CPU
time moves far less with load. ``uptime``'s load is printed with the figures. The commands' imports are pinned,
without timing, by tests/cli/test_cli_start.py.

Run: ``python bench/cli_start.py`` (about half a minute), ``--runs 9`` for steadier medians, ``--no-dev`` for the
commands that need no ``awsworld dev``.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

MODULE = "clistart_bench"
WORKFLOWS = '''
from awsworld import step, workflow


@step(name="clistart.add")
async def add(a: int, b: int) -> int:
    return a + b


@workflow(name="clistart.flow")
async def flow(x: int) -> int:
    return await add(x, 1)
'''


def awsworld_command() -> list[str]:
    """The console script beside this interpreter (a venv's ``bin/awsworld``), as a user runs it."""
    script = Path(sys.executable).with_name("awsworld")
    return [str(script)] if script.exists() else [sys.executable, "-m", "awsworld.cli"]


def clean_env() -> dict[str, str]:
    """This environment without AWS or awsworld settings, and with bytecode written (as an installed package has
    it: the first, untimed, process of each command writes what is missing)."""
    return {key: value for key, value in os.environ.items()
            if not key.startswith(("AWS", "AWSWORLD")) and key != "PYTHONDONTWRITEBYTECODE"}


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: Sequence[str], env: dict[str, str], cwd: Path, runs: int) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of ``runs`` processes of ``command`` (each must exit 0)."""
    walls, cpus = [], []
    subprocess.run(command, env=env, cwd=cwd, capture_output=True, check=False)  # bytecode written, files cached
    for _ in range(runs):
        cpu = _child_cpu()
        start = time.perf_counter()
        done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, check=False)
        walls.append(time.perf_counter() - start)
        cpus.append(_child_cpu() - cpu)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return walls, cpus


def import_costs(command: Sequence[str], env: dict[str, str], cwd: Path, top: int) -> tuple[int, list[str]]:
    """How many modules ``command`` imports, and its ``top`` largest cumulative imports (``-X importtime``)."""
    done = subprocess.run(command, env={**env, "PYTHONPROFILEIMPORTTIME": "1"}, cwd=cwd, capture_output=True,
                          text=True, check=False)
    rows = []
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if match:
            rows.append((int(match.group(2)), len(match.group(3)), match.group(4)))
    shown = sorted(rows, reverse=True)[:top]
    return len(rows), [f"{cumulative / 1000:7.1f} ms  {'  ' * (depth // 2)}{name}" for cumulative, depth, name in shown]


@contextmanager
def running_dev(scratch: Path, source: str = WORKFLOWS, module: str = MODULE) -> Iterator[dict[str, str]]:
    """``awsworld dev`` on ``source`` (the bench's workflow; ``bench/describe.py`` gives its own) as ``module`` in
    ``scratch``; yields the environment its ``export`` lines set."""
    (scratch / f"{module}.py").write_text(textwrap.dedent(source))
    env = clean_env()
    process = subprocess.Popen([*awsworld_command(), "dev", module, "--state", str(scratch / "state")], cwd=scratch,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    try:
        deadline = time.monotonic() + 60
        banner = []
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                raise SystemExit("awsworld dev exited:\n" + "".join(banner))
            banner.append(line)
            if line.startswith("serving deliveries"):
                break
        for line in banner:
            if match := re.fullmatch(r"export (\w+)=(\S+)\n", line):
                env[match.group(1)] = match.group(2)
        yield env
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


def report(label: str, walls: list[float], cpus: list[float]) -> None:
    print(f"  {label:<26} wall {statistics.median(walls) * 1000:6.0f} ms (min {min(walls) * 1000:4.0f})   "
          f"cpu {statistics.median(cpus) * 1000:6.0f} ms (min {min(cpus) * 1000:4.0f})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="processes per command (median and minimum)")
    parser.add_argument("--top", type=int, default=12, help="how many of the largest imports to print")
    parser.add_argument("--no-dev", dest="dev", action="store_false", help="skip runs and describe (no dev)")
    args = parser.parse_args(argv)
    awsworld = awsworld_command()
    print(f"{' '.join(awsworld)}; load {os.getloadavg()[0]:.2f}; median of {args.runs} processes")
    scratch = Path(tempfile.mkdtemp(prefix="cli-start-"))
    try:
        env = clean_env()
        for command in (["--version"], ["--help"], ["runs", "--help"]):
            report(" ".join(command), *timed([*awsworld, *command], env, scratch, args.runs))
        if args.dev:
            with running_dev(scratch) as dev_env:
                started = subprocess.run([*awsworld, "start", "clistart.flow", "[1]", "--wait", "30"], env=dev_env,
                                         cwd=scratch, capture_output=True, text=True, check=True)
                run_id = started.stdout.split()[0]
                for command in (["runs"], ["describe", run_id]):
                    report(command[0] + (" RUN" if len(command) > 1 else ""),
                           *timed([*awsworld, *command], dev_env, scratch, args.runs))
        for title, command in (("the CLI's entry (import awsworld.cli)", [sys.executable, "-c", "import awsworld.cli"]),
                               ("awsworld --version, the whole process", [*awsworld, "--version"])):
            count, lines = import_costs(command, env, scratch, args.top)
            print(f"\n{title}: {count} modules imported; the largest (cumulative):")
            print("\n".join(lines))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
