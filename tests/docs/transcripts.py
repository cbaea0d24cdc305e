"""The command-line transcripts the docs show (``docs/snippets/transcripts/*.txt``), produced by running the commands.

Each transcript is made by running ``awsworld`` as a process, as a user would: ``demo`` (the demo's output),
``dev`` (the banner ``awsworld dev awsworld.examples.order`` prints), ``cli`` (a session of commands against that
``dev``: start, describe, resume, result, runs, hooks) and ``init`` (``awsworld init`` on a fresh project holding
the first workflow). ``python -m tests.docs.transcripts`` rewrites the files; ``test_transcripts.py`` runs the same
commands and compares each output with its file by *shape* (``shape``): run ids, times, durations, ports, resource
names and tokens differ from run to run, the lines and their words do not.

Paths that belong to this machine are shown as a reader's would be: the repository as ``/path/to/awsworld``, the
interpreter as ``/home/me/shop/.venv/bin/python``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRANSCRIPTS = ROOT / "docs" / "snippets" / "transcripts"
NAMES = ("demo", "dev", "cli", "init")
DEMO_MODULE = "awsworld.examples.order"
ORDER_ARGS = '["A-17", ["kettle", "mugs"], 42.5]'


def clean_env() -> dict[str, str]:
    """The environment without AWS or awsworld variables (a fresh shell's), and colourless."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS", "AWSWORLD"))}
    env["NO_COLOR"] = "1"
    return env


def awsworld(*args: str, env: dict[str, str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "awsworld.cli", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def shown(text: str) -> str:
    """Machine paths as a reader's."""
    return text.replace(sys.executable, "/home/me/shop/.venv/bin/python").replace(str(ROOT), "/path/to/awsworld")


def command_line(args: tuple[str, ...]) -> str:
    quoted = [a if re.fullmatch(r"[\w./:@=,-]+", a) else f"'{a}'" for a in args]
    return "$ awsworld " + " ".join(quoted)


# -- the transcripts ---------------------------------------------------------------------------------------------


def demo() -> str:
    with tempfile.TemporaryDirectory() as cwd:
        done = awsworld("demo", env=clean_env(), cwd=Path(cwd), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


class Dev:
    """``awsworld dev awsworld.examples.order`` as a process, and the environment its ``export`` lines describe."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.process = subprocess.Popen([sys.executable, "-m", "awsworld.cli", "dev", DEMO_MODULE], cwd=cwd,
                                        env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.banner: list[str] = []
        assert self.process.stdout is not None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                raise AssertionError("awsworld dev exited:\n" + "".join(self.banner))
            if line.startswith("serving deliveries"):
                self.banner.append(line)
                break
            self.banner.append(line)
        self.env = clean_env()
        for line in self.banner:
            match = re.fullmatch(r"export (\w+)=(\S+)\n", line)
            if match:
                self.env[match.group(1)] = match.group(2).strip("'")

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return awsworld(*args, env=self.env, cwd=self.cwd)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate()


@contextmanager
def running_dev() -> Iterator[Dev]:
    with tempfile.TemporaryDirectory() as cwd:
        server = Dev(Path(cwd))
        try:
            yield server
        finally:
            server.stop()


def dev_banner(server: Dev) -> str:
    """What ``dev`` prints up to the line that says it serves (its log lines aside)."""
    return "".join(line for line in server.banner if not line.startswith(("{", "INFO", "WARNING")))


def until(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def cli_session(server: Dev) -> str:
    """A user's first session against ``dev``: each command as typed, then what it printed."""
    out: list[str] = []

    def run(*args: str) -> str:
        done = server(*args)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        out.append(command_line(args) + "\n" + done.stdout)
        return done.stdout

    run_id = run("start", "order.process", ORDER_ARGS).strip()

    def waits_on_the_hook() -> bool:
        described = json.loads(server("describe", run_id, "--json").stdout)
        return any(w.get("kind") == "hook" for w in described.get("waitingOn", []))

    until(waits_on_the_hook, "the run to wait on its hook")
    run("describe", run_id)
    run("resume", "address:A-17", '{"address": "1 Main St"}')
    run("result", run_id, "--wait", "30")
    run("runs")
    run("hooks", run_id)
    return "\n".join(out)


def init() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "shop"
        (project / "src").mkdir(parents=True)
        shutil.copy(ROOT / "examples" / "get_started" / "checkout.py", project / "src" / "checkout.py")
        done = awsworld("init", ".", "--module", "checkout", env=clean_env(), cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    return "$ awsworld init . --module checkout\n" + done.stdout


def produce() -> dict[str, str]:
    """Every transcript, as the docs show it."""
    made = {"demo": demo(), "init": init()}
    with running_dev() as server:
        made["dev"] = dev_banner(server)
        made["cli"] = cli_session(server)
    return {name: shown(text) for name, text in made.items()}


# -- shape -------------------------------------------------------------------------------------------------------

VARYING = [
    (re.compile(r"wrun_[0-9A-HJKMNP-TV-Z]{26}"), "wrun_<id>"),
    (re.compile(r"\b[0-9a-f]{64}\b"), "<token>"),
    (re.compile(r"evnt_[0-9A-Z]+"), "evnt_<id>"),
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)?"), "<time>"),
    (re.compile(r"\b\d\d:\d\d:\d\d(\.\d+)?\b"), "<time>"),
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:<port>"),
    (re.compile(r"awsworld-local-[0-9a-f]{12}"), "awsworld-local-<id>"),
    (re.compile(r"\b\d+(\.\d+)? ?(ms|s)\b"), "<duration>"),
    (re.compile(r"\bpid \d+"), "pid <n>"),
    # How many deliveries a run took depends on which finished first (a step's result, or the flow's next look).
    (re.compile(r"(deliveries handled by the local poller:) \d+"), r"\1 <n>"),
    (re.compile(r"(/[\w.-]+)+/(awsworld-local-|queue)[\w/-]*"), "<url>"),
]


def shape(text: str) -> list[str]:
    """The output with what differs from run to run replaced, spacing collapsed, in sorted order (lines of work that
    runs concurrently may print in either order)."""
    lines = []
    for line in text.splitlines():
        for pattern, placeholder in VARYING:
            line = pattern.sub(placeholder, line)
        line = " ".join(line.split())
        if line:
            lines.append(line)
    return sorted(lines)


def path(name: str) -> Path:
    return TRANSCRIPTS / f"{name}.txt"


if __name__ == "__main__":
    TRANSCRIPTS.mkdir(parents=True, exist_ok=True)
    for name, text in produce().items():
        path(name).write_text(text, encoding="utf-8")
        print(f"{path(name).relative_to(ROOT)}: {len(text.splitlines())} lines", file=sys.stderr)
