"""The command-line transcripts the docs show (``docs/snippets/transcripts/*.txt``), produced by running the commands.

Each transcript is made by running ``awsworld`` as a process, as a user would: ``demo`` (the demo's output),
``dev`` (the banner ``awsworld dev checkout --state .awsworld`` prints in a project holding Get started's first
workflow), ``cli`` (a session of commands against that ``dev``: start, skip, describe, resume, result, runs, hooks)
and ``init`` (``awsworld init`` on such a project), ``init-upgrade-edited`` (``awsworld init --upgrade`` there after
an edit of its template.yaml, refused, then with ``--force``). ``python -m tests.docs.transcripts`` rewrites the files;
``test_transcripts.py`` runs the same commands and compares each output with its file by *shape* (``shape``): run
ids, times, durations, ports, resource names and tokens differ from run to run, the lines and their words do not.

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
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

try:
    from tied import tied  # tests/tied.py (tests/ is on sys.path under pytest)
except ImportError:  # python -m tests.docs.transcripts, from the repository's root
    from tests.tied import tied

ROOT = Path(__file__).resolve().parents[2]
TRANSCRIPTS = ROOT / "docs" / "snippets" / "transcripts"
NAMES = ("demo", "dev", "dev-reload", "cli", "init", "init-upgrade-edited")
DEMO_MODULE = "awsworld.examples.order"
FIRST_WORKFLOW = ROOT / "examples" / "get_started" / "checkout.py"
CHECKOUT_ARGS = '["A-17", ["kettle", "mugs"]]'
DEV_OPTIONS = ("--state", ".awsworld")
"""As Get started's dev page types it: ``awsworld dev checkout --state .awsworld``."""


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
    """``awsworld dev MODULE`` as a process (in ``cwd``), the environment its ``export`` lines describe, and every
    line it prints (read by a thread, so its output never fills the pipe)."""

    def __init__(self, cwd: Path, module: str = DEMO_MODULE, *options: str) -> None:
        self.cwd = cwd
        self.process = subprocess.Popen([sys.executable, "-m", "awsworld.cli", "dev", module, *options], cwd=cwd,
                                        env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        preexec_fn=tied())
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        serving = self.wait_for(r"^serving deliveries")
        self.banner = self.lines[:serving + 1]
        self.env = clean_env()
        for line in self.banner:
            match = re.fullmatch(r"export (\w+)=(\S+)", line)
            if match:
                self.env[match.group(1)] = match.group(2).strip("'")

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, pattern: str, after: int = 0, timeout: float = 120) -> int:
        """The index of the first line from ``after`` on that matches ``pattern``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for index in range(after, len(self.lines)):
                if re.search(pattern, self.lines[index]):
                    return index
            if self.process.poll() is not None and not self.reader.is_alive():
                break
            time.sleep(0.05)
        raise AssertionError(f"awsworld dev printed no line matching {pattern!r}:\n" + "\n".join(self.lines))

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return awsworld(*args, env=self.env, cwd=self.cwd)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.reader.join(timeout=10)


@contextmanager
def running_dev(cwd: Path | None = None, module: str = DEMO_MODULE, *options: str) -> Iterator[Dev]:
    with tempfile.TemporaryDirectory() as tmp:
        server = Dev(cwd or Path(tmp), module, *options)
        try:
            yield server
        finally:
            server.stop()


def dev_banner(server: Dev) -> str:
    """What ``dev`` prints up to the line that says it serves."""
    return "".join(f"{line}\n" for line in server.banner)


def until(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def first_workflow_project(root: Path) -> Path:
    """A project as Get started has the reader make it: the first workflow (``checkout``, whose workflow is
    ``shop.checkout``) in its ``src/``, where ``dev`` imports from and ``awsworld init`` builds from."""
    project = root / "shop"
    (project / "src").mkdir(parents=True)
    shutil.copy(FIRST_WORKFLOW, project / "src" / "checkout.py")
    return project


def cli_session(server: Dev) -> str:
    """The reader's first session against ``awsworld dev checkout`` (Get started: The CLI): each command as typed,
    then what it printed. The hour's sleep is skipped (``awsworld skip``), the approval hook resumed."""
    out: list[str] = []

    def run(*args: str) -> str:
        done = server(*args)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        out.append(command_line(args) + "\n" + done.stdout)
        return done.stdout

    run_id = run("start", "shop.checkout", CHECKOUT_ARGS).strip()

    def waits_on(kind: str) -> Callable[[], bool]:
        def check() -> bool:
            described = json.loads(server("describe", run_id, "--json").stdout)
            return [w.get("kind") for w in described.get("waitingOn", [])] == [kind]
        return check

    until(waits_on("sleep"), "the run to sleep")
    run("skip", run_id)
    until(waits_on("hook"), "the run to wait on its hook")
    run("describe", run_id)
    run("resume", "approve:A-17", '{"approved": true}')
    run("result", run_id, "--wait", "30")
    run("runs")
    run("hooks", run_id)
    return "\n".join(out)


SHOP = """\
from datetime import timedelta

from awsworld import sleep, step, workflow


@step(name="shop.charge")
async def charge(order_id: str, amount: float) -> str:
    return f"charged {order_id} {amount}"


@workflow(name="shop.order")
async def order(order_id: str, amount: float) -> str:
    receipt = await charge(order_id, amount)
    await sleep(timedelta(days=1))
    return receipt
"""
ORIGINAL, EDITED = "charge(order_id, amount)", "charge(order_id, amount * 1.2)"


def dev_reload() -> str:
    """An edit under ``dev`` that would diverge a sleeping run: the run keeps the code it started on while new runs
    take the edit (dev keeps both versions); then the revert (the first version is live again, the edited one, which
    no run needs, is retired)."""
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "shop"
        source = project / "src" / "shop.py"
        source.parent.mkdir(parents=True)
        source.write_text(SHOP)
        out: list[str] = []
        with running_dev(project, "shop") as server:
            started = server("start", "shop.order", '["A-17", 42.5]')
            assert started.returncode == 0, started.stdout + started.stderr
            run_id = started.stdout.strip()

            def sleeping() -> bool:
                described = json.loads(server("describe", run_id, "--json").stdout)
                return [w.get("kind") for w in described.get("waitingOn", [])] == ["sleep"]

            until(sleeping, "the run to sleep")
            for change, text in ((f"edit src/shop.py: {ORIGINAL} becomes {EDITED}", SHOP.replace(ORIGINAL, EDITED)),
                                 ("revert the edit", SHOP)):
                mark = len(server.lines)
                source.write_text(text)
                first = server.wait_for(r"^reloading", after=mark)
                last = server.wait_for(r"^reloaded ", after=first)
                out.append(f"# {change}\n" + "".join(f"{line}\n" for line in server.lines[first:last + 1]))
        return "\n".join(out)


def init() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        project = first_workflow_project(Path(tmp))
        done = awsworld("init", ".", "--module", "checkout", env=clean_env(), cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    return "$ awsworld init . --module checkout\n" + done.stdout


def init_upgrade_edited() -> str:
    """``awsworld init --upgrade`` in an app whose ``template.yaml`` its user edited since init wrote it: the
    refusal (stderr, exit 1), then ``--upgrade --force``, which saves the edited copy and rewrites it."""
    with tempfile.TemporaryDirectory() as tmp:
        project = first_workflow_project(Path(tmp))
        env = clean_env()
        done = awsworld("init", ".", "--module", "checkout", env=env, cwd=project)
        assert done.returncode == 0, done.stdout + done.stderr
        template = project / "template.yaml"
        template.write_text(template.read_text() + "# the reports step reads s3://acme-reports (added by hand)\n")
        refused = awsworld("init", "--upgrade", env=env, cwd=project)
        forced = awsworld("init", "--upgrade", "--force", env=env, cwd=project)
    assert refused.returncode == 1 and not refused.stdout, refused.stdout + refused.stderr
    assert forced.returncode == 0, forced.stdout + forced.stderr
    return ("$ awsworld init --upgrade\n" + refused.stderr + "$ awsworld init --upgrade --force\n" + forced.stdout)


def dev_session() -> dict[str, str]:
    """``dev``'s banner and the CLI session against it."""
    with tempfile.TemporaryDirectory() as tmp, \
            running_dev(first_workflow_project(Path(tmp)), "checkout", *DEV_OPTIONS) as server:
        return {"dev": dev_banner(server), "cli": cli_session(server)}


def produce() -> dict[str, str]:
    """Every transcript, as the docs show it. The commands run at once, each in its own directory and process with
    its own ports: they spend their time waiting on their processes, and one after another took 33 s of CI."""
    with ThreadPoolExecutor(4) as pool:
        demo_text, init_text, reload_text, session = (pool.submit(demo), pool.submit(init), pool.submit(dev_reload),
                                                      pool.submit(dev_session))
        upgrade_text = pool.submit(init_upgrade_edited)
        made = {"demo": demo_text.result(), "init": init_text.result(), "dev-reload": reload_text.result(),
                "init-upgrade-edited": upgrade_text.result(), **session.result()}
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
    (re.compile(r"\bdev-[0-9a-f]{10}\b"), "dev-<code>"),
    # How far a deadline is (``(in 59 min 58 s)``, ``(in 1 h)``, ``(3 s ago)``, ``(350 ms ago)``): the seconds since
    # it was set vary.
    (re.compile(r"\((in )?\d+(\.\d+)? (d|h|min|s|ms)( \d+ (h|min|s))?( ago)?\)"), "(<how far>)"),
    (re.compile(r"\b\d+(\.\d+)? ?(ms|s)\b"), "<duration>"),
    (re.compile(r"\bpid \d+"), "pid <n>"),
    # How many deliveries a run took depends on which finished first (a step's result, or the flow's next look).
    (re.compile(r"(deliveries handled by the local poller:) \d+"), r"\1 <n>"),
    (re.compile(r"(/[\w.-]+)+/(awsworld-local-|queue)[\w/-]*"), "<url>"),
]


VALUE_ROW = re.compile(r"(input|output|payload|result|error) [\[{\"]")
"""A timeline's value row (``output {...}``): its width is what the columns before it leave, and the ``at`` column
is as wide as the run was long, so a slower machine cuts the same value shorter (``…``)."""
VALUE_ROW_KEPT = 40


def shape(text: str) -> list[str]:
    """The output with what differs from run to run replaced, spacing collapsed, in sorted order (lines of work that
    runs concurrently may print in either order)."""
    lines = []
    for line in text.splitlines():
        for pattern, placeholder in VARYING:
            line = pattern.sub(placeholder, line)
        line = " ".join(line.split())
        if VALUE_ROW.match(line):  # a timeline's value row: cut to the width a slower run leaves it
            line = line[:VALUE_ROW_KEPT].removesuffix("…")
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
