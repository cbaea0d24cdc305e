"""Every ``awsworld`` command, run as a process the way an operator runs it: against one ``awsworld dev`` (itself a
process, with ``--state``) whose printed ``export`` lines configure the other commands. Errors included: one
line on stderr, the documented exit code, never a traceback."""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from awsworld import __version__ as awsworld_version
from awsworld.cli import build_parser
from tied import tied  # tests/tied.py (tests/ is on sys.path)

WORKFLOWS = '''
import asyncio
import os

from pydantic import BaseModel

from awsworld import (PydanticCodec, create_hook, create_webhook, get_writable, resume_hook, sleep, step,
                      step_metadata, with_name, workflow)


@step(name="clitest.slow_first")
async def slow_first(x: int) -> int:
    if step_metadata().attempt == 1:
        await asyncio.sleep(120)  # dev is stopped meanwhile
    return x


@step(name="clitest.add")
async def add(a: int, b: int) -> int:
    return a + b


@step(name="clitest.note", max_retries=0)
async def note(text: str, close: bool = False) -> None:
    log = get_writable("log")
    await log.write(text + "\\n")
    if close:
        await log.close()


@step(name="clitest.lines", max_retries=0)
async def lines(n: int) -> int:
    log = get_writable("log")
    for i in range(n):
        await log.write(f"line {i}\\n")
    return n


@workflow(name="clitest.written")
async def written(n: int) -> int:
    return await lines(n)


@workflow(name="clitest.gated_lines")
async def gated_lines(path: str, n: int) -> int:
    await gate(path)
    return await lines(n)


@step(name="clitest.boom", max_retries=0)
async def boom(why: str) -> None:
    raise ValueError(why)


@workflow(name="clitest.sum")
async def total(a: int, b: int = 0) -> int:
    return await add(a, b)


@workflow(name="clitest.echo")
async def echo(value: object) -> object:
    return value


@workflow(name="clitest.fail")
async def fail(why: str) -> None:
    await boom(why)


@workflow(name="clitest.parent")
async def parent(n: int) -> int:
    return await total(n, 1)


@workflow(name="clitest.slow")
async def slow(x: int) -> int:
    return await slow_first(x) + 1


@step(name="clitest.brief_first")
async def brief_first(x: int) -> int:
    if step_metadata().attempt == 1:  # holds until dev's stop has begun (the test releases it): ends in its grace
        while not os.path.exists(f"brief-release-{x}"):  # (dev runs in the project's root)
            await asyncio.sleep(0.05)
    return x


@workflow(name="clitest.brief")
async def brief(x: int) -> int:
    return await brief_first(x) + 1


@workflow(name="clitest.approval")
async def approval(order: dict) -> dict:
    await note("waiting")
    webhook = create_webhook()
    async with create_hook(token=f"approve:{order['id']}") as hook:
        answer = await hook
    request = await webhook
    await note("done", True)
    return {"answer": answer, "body": request["body"]}


@workflow(name="clitest.beating")
async def beating(key: str) -> object:
    async with create_hook(token=f"beat:{key}", heartbeat_timeout="1h") as hook:
        return await hook


@step(name="clitest.gate", max_retries=0)
async def gate(path: str) -> str:
    while not os.path.exists(path):  # runs until the test creates the file: a step caught running
        await asyncio.sleep(0.02)
    return "open"


@step(name="clitest.flaky", max_retries=1, retry_delay="1h")
async def flaky() -> None:
    raise RuntimeError("not yet")


TRIED: set[str] = set()


@step(name="clitest.second_try", max_retries=1, retry_delay="1s")
async def second_try(key: str) -> str:
    if key not in TRIED:
        TRIED.add(key)
        raise RuntimeError("first try refused")
    return "taken"


@workflow(name="clitest.retried")
async def retried(key: str) -> str:
    return await second_try(key)


@workflow(name="clitest.waits")
async def waits(mode: str, key: str) -> str:
    """Waits on one thing, chosen by ``mode``: a running step, a hook, a sleep, a retry or a child."""
    if mode == "step":
        return await gate(key)
    if mode == "hook":
        async with create_hook(token=f"waits:{key}") as hook:
            return str(await hook)
    if mode == "sleep":
        await sleep("1h")
    elif mode == "retry":
        await flaky()
    else:
        return await waits("hook", key)
    return mode


@workflow(name="clitest.resumes")
async def resumes(token: str) -> str:
    """Resumes another run's hook, waiting for it to exist."""
    await resume_hook(token, "from a run", wait="1h")
    return "sent"


@workflow(name="clitest.named")
async def named(key: str) -> int:
    value = await with_name("add them").call(add, 1, 2)
    async with create_hook(token=f"named:{key}", name="sign-off") as hook:
        await hook
    return value


@workflow(name="clitest.many")
async def many(n: int) -> int:
    total = 0
    for i in range(n):
        total += await add(i, 0)
    return total


@workflow(name="clitest.coded", args_codec=PydanticCodec(tuple[int, int]))
async def coded(a: int, b: int) -> int:
    return a + b


class Order(BaseModel):
    sku: str
    quantity: int


@workflow(name="clitest.ordered")
async def ordered(key: str) -> dict:
    order = await create_hook(token=f"order:{key}", codec=PydanticCodec(Order))
    return {"sku": order.sku, "quantity": order.quantity, "type": type(order).__name__}
'''


@dataclass
class Result:
    code: int
    out: str
    err: str

    def one_line_error(self, code: int) -> str:
        """The error contract: exit ``code``, nothing on stdout, one line on stderr, no traceback."""
        assert self.code == code, self
        assert "Traceback" not in self.err, self.err
        lines = self.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("awsworld "), self.err
        return lines[0]


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("AWS", "AWSWORLD"))}


def awsworld(*args: str, env: dict[str, str], cwd: Path, timeout: float = 60) -> Result:
    done = subprocess.run([sys.executable, "-m", "awsworld.cli", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)
    return Result(done.returncode, done.stdout, done.stderr)


RUNNER = r"""
import json, os, sys, traceback
import awsworld.aws, awsworld.cli, awsworld.lambda_host.webhook, awsworld.client.replay  # imported once, here,
import awsworld.client.waits, awsworld.cli.error_view  # with what the commands import when they run
from awsworld.aws import sdk

# ... and the service models their clients load: the process's one data loader (sdk.new_session) keeps each
# service's JSON once parsed, and each child shares it; every client is still made by the command, in the child.
warm = sdk.new_session()
for service in ("dynamodb", "sqs", "s3", "kms"):
    warm.create_client(service, region_name="us-east-1", endpoint_url="http://127.0.0.1:9",
                       aws_access_key_id="warm", aws_secret_access_key="warm",
                       config=sdk.client_config(1, loopback=True))
del warm

for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            for fd, path in ((1, request["out"]), (2, request["err"])):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
            code = awsworld.cli.main(request["args"])
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else 1
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status), flush=True)
"""


class Runner:
    """Runs ``awsworld ARGS`` as child processes forked from an interpreter that has imported awsworld once:
    each child is its own process (argv, environment, stdout, stderr, exit code) without the second of
    imports a fresh interpreter spends, which would dominate this file's time, nor the botocore service models
    each command's clients loaded again (0.1 to 0.35 s of a command taking 0.15 to 0.5 s, measured). A few tests
    still start ``python -m awsworld.cli`` itself."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.process = subprocess.Popen([sys.executable, "-c", RUNNER], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, preexec_fn=tied())
        self.lock = threading.Lock()
        self.count = 0

    def __call__(self, args: tuple[str, ...], env: dict[str, str], cwd: Path) -> Result:
        with self.lock:
            self.count += 1
            out, err = self.directory / f"{self.count}.out", self.directory / f"{self.count}.err"
            assert self.process.stdin is not None and self.process.stdout is not None
            self.process.stdin.write(json.dumps({"args": list(args), "env": env, "cwd": str(cwd),
                                                 "out": str(out), "err": str(err)}) + "\n")
            self.process.stdin.flush()
            code = int(self.process.stdout.readline())
        return Result(code, out.read_text(), err.read_text())

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=10)


class Dev:
    """An ``awsworld dev`` process and the environment its ``export`` lines describe."""

    def __init__(self, cwd: Path, state: Path, runners: list[Runner], *options: str, module: str = "clitest",
                 command: Sequence[str] = (sys.executable, "-m", "awsworld.cli"),
                 settings: dict[str, str] | None = None) -> None:
        """``command``: how ``awsworld`` is run (a venv's console script, say); ``settings``: variables for the dev
        process alone (``AWSWORLD_...``)."""
        self.cwd, self.state, self.runners = cwd, state, runners
        self.process = subprocess.Popen([*command, "dev", module, "--state", str(state), *options], cwd=cwd,
                                        env=_clean_env() | (settings or {}), stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, preexec_fn=tied())
        self.banner: list[str] = []
        self.console: list[str] = []  # after the banner, a line an item, once a test follows it (``follow``)
        self._said = threading.Condition()  # a line came, or the console ended
        self._reader: threading.Thread | None = None
        self._ended = False
        self._read_to = 0  # what ``read_until`` has returned of ``console``
        assert self.process.stdout is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                raise AssertionError("awsworld dev exited:\n" + "".join(self.banner))
            self.banner.append(line)
            if line.startswith("serving deliveries"):
                break
        else:  # (not on: its commands would fail with "AWSWORLD_TABLE ... not set", the exports never read)
            self.process.terminate()  # (its way out stops the emulators it started)
            self.process.wait(timeout=30)
            raise AssertionError("awsworld dev did not serve within 60 s:\n" + "".join(self.banner))
        self.env = _clean_env()
        for line in self.banner:
            match = re.fullmatch(r"export (\w+)=(\S+)\n", line)
            if match:
                self.env[match.group(1)] = match.group(2)

    def __call__(self, *args: str) -> Result:
        """``awsworld ARGS`` in this environment, forked by a free runner."""
        runner = self.runners[0]
        for candidate in self.runners:
            if not candidate.lock.locked():
                runner = candidate
                break
        return runner(args, self.env, self.cwd)

    def json(self, *args: str) -> Any:
        """``awsworld ARGS --json``, which must succeed, parsed."""
        result = self(*args, "--json")
        assert result.code == 0, result
        return json.loads(result.out)

    def follow(self) -> list[str]:
        """Dev's console after the banner, a line an item (with its newline), appended by a thread as dev writes it
        (started at the first call: a test that never follows it gets it from ``stop``). The list grows in place,
        so a test may hold it and look again (``until_found``), or wait for a line (``read_until``)."""
        if self._reader is None:
            stdout = self.process.stdout
            assert stdout is not None

            def read() -> None:
                for line in stdout:
                    with self._said:
                        self.console.append(line)
                        self._said.notify_all()
                with self._said:
                    self._ended = True
                    self._said.notify_all()

            self._reader = threading.Thread(target=read, name="dev-console", daemon=True)
            self._reader.start()
        return self.console

    def read_until(self, wanted: Callable[[str], bool], timeout: float = 30) -> str:
        """Dev's console from after the banner (or the last read) up to the first line ``wanted`` holds for, read as
        dev writes it: for a test that waits for dev to say something, rather than sleeping and hoping it did. An
        ``AssertionError`` with what was read if dev ended or ``timeout`` seconds passed first."""
        self.follow()
        deadline = time.monotonic() + timeout
        with self._said:
            scanned = self._read_to
            while True:
                while scanned < len(self.console):
                    scanned += 1
                    if wanted(self.console[scanned - 1]):
                        read, self._read_to = "".join(self.console[self._read_to:scanned]), scanned
                        return read
                read = "".join(self.console[self._read_to:])
                if self._ended:
                    raise AssertionError(f"dev ended before it said it:\n{read}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"dev did not say it within {timeout} s:\n{read}")
                self._said.wait(remaining)

    def stop(self) -> str:
        """SIGTERM, and dev's console from after the banner (or what ``read_until`` read) to its end."""
        self.process.send_signal(signal.SIGTERM)
        return self.rest()

    def rest(self) -> str:
        """Dev's console from after the banner (or what ``read_until`` read) to its end, once it has ended."""
        if self._reader is None:
            out, _ = self.process.communicate(timeout=30)
            return out
        self.process.wait(timeout=30)
        self._reader.join(timeout=30)
        return "".join(self.console[self._read_to:])


def dev_snapshotting_every(seconds: float) -> tuple[str, ...]:
    """``Dev``'s ``command`` for an ``awsworld dev`` (as ``python -m awsworld.cli`` runs it) whose snapshots of its
    ``--state`` come every ``seconds``, not every ``dev_state.SNAPSHOT_SECONDS`` (5 s): for a test that kills dev
    once a snapshot holds what it waits for, which waited up to 5 s for each. What a snapshot holds and when it is
    made (on its own thread) are dev's own. If that setting no longer sets the interval, this dev exits at once
    (the test fails) instead of snapshotting every 5 s."""
    return (sys.executable, "-c", "import sys; from awsworld.cli import dev_state, main; "
            f"dev_state.SNAPSHOT_SECONDS = {seconds!r}; "
            f"assert dev_state.Snapshots(None, None, None).interval() == {seconds!r}, "
            "'dev_state.SNAPSHOT_SECONDS no longer sets the interval'; sys.exit(main())")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project in the src layout ``awsworld init`` builds from: ``dev``, ``replay`` and the commands reading
    AWSWORLD_MODULES import ``clitest`` from ``src/``, run from the project's root."""
    root = tmp_path_factory.mktemp("project")
    (root / "src").mkdir()
    (root / "src" / "clitest.py").write_text(textwrap.dedent(WORKFLOWS))
    return root


@pytest.fixture(scope="module")
def runners(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Runner]]:
    started = [Runner(tmp_path_factory.mktemp("runner")) for _ in range(2)]
    yield started
    for runner in started:
        runner.close()


@pytest.fixture(scope="module")
def dev(project: Path, runners: list[Runner]) -> Iterator[Dev]:
    server = Dev(project, project / "state", runners)
    yield server
    server.stop()


def project_of(tmp_path_factory: pytest.TempPathFactory, name: str, source: str) -> Path:
    """A project of its own in the src layout (``src/clitest.py`` holding ``source``), as the fixture above."""
    root = tmp_path_factory.mktemp(f"{name}-project")
    (root / "src").mkdir()
    (root / "src" / "clitest.py").write_text(textwrap.dedent(source))
    return root


def serving(project: Path, tmp_path_factory: pytest.TempPathFactory, name: str, runners: int = 1) -> Iterator[Dev]:
    """``awsworld dev`` on ``project`` with runners of its own, stopped (and its runners closed) at the end: a
    module fixture's body."""
    started = [Runner(tmp_path_factory.mktemp(f"{name}-runner")) for _ in range(runners)]
    server = Dev(project, project / "state", started)
    yield server
    server.stop()
    for runner in started:
        runner.close()


def until_found(check: Callable[[], Any], what: str, timeout: float = 30, every: float = 0.2) -> Any:
    """What ``check`` returns once it is truthy (polled ``every`` seconds); an ``AssertionError`` saying ``what`` did
    not come within ``timeout`` seconds (a ``dev`` in another process gets there in its own time)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(every)
    raise AssertionError(f"{what} within {timeout} s")


def ended_within(process: subprocess.Popen[Any], timeout: float, output: list[str], what: str) -> int:
    """``process``'s exit code once it ends within ``timeout`` seconds; else an ``AssertionError`` saying ``what``,
    with its output and where each of its threads was: started with ``PYTHONFAULTHANDLER=1``, it dumps them on
    SIGABRT into ``output`` (its lines, as a reader thread collects them)."""
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        time.sleep(0.5)  # (the reader takes the dump)
        raise AssertionError(f"{what}:\n" + "".join(output)) from None


def _start(dev: Dev, *args: str) -> str:
    result = dev("start", *args)
    assert result.code in (0, 1), result  # 1: started with --wait, and the run failed
    return result.out.strip().splitlines()[0]


def parallel(dev: Dev, *commands: tuple[str, ...]) -> list[Result]:
    """Run independent commands at once, one per runner."""
    with ThreadPoolExecutor(max_workers=len(dev.runners)) as pool:
        return list(pool.map(lambda command: dev(*command), commands))


def test_dev_prints_shell_ready_exports_and_a_webhook_url(dev: Dev) -> None:
    exports = [line for line in dev.banner if line.startswith("export ")]
    names = {line.split("=")[0].removeprefix("export ") for line in exports}
    assert {"AWS_ENDPOINT_URL", "AWSWORLD_TABLE", "AWSWORLD_BUCKET", "AWSWORLD_QUEUE_URL", "AWSWORLD_WEBHOOK_URL",
            "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWSWORLD_MODULES"} <= names
    assert dev.env["AWSWORLD_WEBHOOK_URL"].startswith("http://127.0.0.1:")
    assert "  workflow clitest.sum\n" in dev.banner


def test_dev_exports_come_with_a_warning_and_the_unset_line_that_undoes_them(dev: Dev) -> None:
    """The export lines redirect every AWS tool in the shell they are pasted into (boto3 here, as the AWS CLI and
    ``sam deploy`` would be): the banner says so before them, and its unset line puts the shell back."""
    lines = [line.rstrip("\n") for line in dev.banner]
    exports = [i for i, line in enumerate(lines) if line.startswith("export ")]
    assert exports == list(range(exports[0], exports[-1] + 1)), "one block of export lines"
    header = lines[lines.index("", 0, exports[0]) + 1:exports[0]]  # from the blank line before the block
    assert header and all(line.startswith("#") for line in header), header  # comments: harmless when pasted
    warning = " ".join(header)
    assert "WARNING" in warning and "AWS_ENDPOINT_URL" in warning and "127.0.0.1" in warning, warning
    assert "`sam deploy`" in warning and "unset" in warning, warning
    unset = next(i for i, line in enumerate(lines) if line.startswith("unset "))
    assert lines[exports[-1] + 1] == "" and lines[unset - 1].startswith("# undo"), lines[exports[-1]:unset + 1]
    exported = [lines[i].split("=", 1)[0].removeprefix("export ") for i in exports]
    assert lines[unset].split()[1:] == exported

    endpoint = "import boto3; print(boto3.client('s3', region_name='us-east-1').meta.endpoint_url)"
    names = " ".join(exported)
    script = "\n".join([*header, *(lines[i] for i in exports),
                        f"{sys.executable} -c \"{endpoint}\"", f"for n in {names}; do echo \"$n=${{!n-}}\"; done",
                        lines[unset - 1], lines[unset],
                        f"{sys.executable} -c \"{endpoint}\"", "env"])
    done = subprocess.run(["bash", "-c", script], env={**_clean_env(), "KEEP_ME": "1"}, capture_output=True,
                          text=True, timeout=60, check=True)
    out = done.stdout.splitlines()
    assert out[0] == dev.env["AWS_ENDPOINT_URL"], "a plain boto3 client in that shell talks to the emulator"
    assert out[1:1 + len(exported)] == [f"{name}={dev.env[name]}" for name in exported], "the values, as quoted"
    after = out[1 + len(exported)]
    assert after.startswith("https://") and "127.0.0.1" not in after, after
    left = {line.split("=", 1)[0] for line in out[2 + len(exported):] if "=" in line}
    assert "KEEP_ME" in left and not left & set(exported), left & set(exported)


def test_every_commands_help_reads_as_plain_text(project: Path) -> None:
    """A command's description is its module's docstring: in a terminal its code spans read `x`, not ``x``."""
    def helps(parser: argparse.ArgumentParser) -> Iterator[str]:
        yield parser.format_help()
        for action in parser._actions:  # pyright: ignore[reportPrivateUsage]
            if isinstance(action, argparse._SubParsersAction):  # pyright: ignore[reportPrivateUsage]
                for sub in action.choices.values():
                    yield from helps(sub)

    texts = list(helps(build_parser()))
    assert len(texts) > 30 and not [t.splitlines()[0] for t in texts if "``" in t]
    shown = awsworld("dev", "--help", env=_clean_env(), cwd=project)
    assert shown.code == 0 and "`awsworld dev MODULE...`" in shown.out and "``" not in shown.out, shown
    version = awsworld("--version", env=_clean_env(), cwd=project)
    assert (version.code, version.out) == (0, f"awsworld {awsworld_version}\n"), version


def test_awsworld_help_names_every_command_and_every_exit_code(project: Path) -> None:
    """``awsworld --help`` (and docs/reference/cli.md, which says the same) introduces every command by name and
    every exit code a command can end with: ``init`` and ``template`` were missing from it, and 130 and 141 (what
    ``main`` returns on Ctrl-C and when the reader of its output went away) were not said."""
    from awsworld.cli import READER_GONE
    from awsworld.cli.errors import OPERATIONAL, USAGE

    shown = awsworld("--help", env=_clean_env(), cwd=project)
    assert shown.code == 0, shown
    intro = shown.out.split("positional arguments:")[0]
    subparsers = next(a for a in build_parser()._actions if a.dest == "command")  # pyright: ignore[reportPrivateUsage]
    commands = list(getattr(subparsers, "choices", {}))
    assert len(commands) > 20 and [c for c in commands if f"`{c}`" not in intro] == []
    said = (f"exit codes: 0 ok, {OPERATIONAL} the command failed, {USAGE} a usage error, 130 stopped (Ctrl-C), "
            f"{READER_GONE} the reader of its output went away")
    assert said in " ".join(intro.split()), intro
    page = Path(__file__).resolve().parents[2] / "docs" / "reference" / "cli.md"
    assert said in " ".join(page.read_text(encoding="utf-8").split())


def test_every_option_of_every_command_says_what_it_does() -> None:
    """The reference page (docs/reference/cli.md) is made from the parser: an option without help was a row with an
    empty "what" cell there and a bare flag in ``--help`` (``runs --workflow``, ``replay --status`` and ``--limit``,
    whose default, running runs, and bound, one page of 100, a user could not learn)."""
    def bare(parser: argparse.ArgumentParser, prog: str) -> Iterator[str]:
        for action in parser._actions:  # pyright: ignore[reportPrivateUsage]
            if isinstance(action, argparse._SubParsersAction):  # pyright: ignore[reportPrivateUsage]
                for name, sub in action.choices.items():
                    yield from bare(sub, f"{prog} {name}")
            elif action.option_strings and not action.help:
                yield f"{prog} {action.option_strings[0]}"

    assert list(bare(build_parser(), "awsworld")) == []


def test_python_m_awsworld_runs_the_cli(project: Path) -> None:
    """``python -m awsworld`` is the ``awsworld`` command: the same output and the same exit codes."""
    script = str(Path(sys.executable).with_name("awsworld"))
    with ThreadPoolExecutor(max_workers=3) as pool:
        module, console, usage = pool.map(lambda argv: subprocess.run(
            argv, env=_clean_env(), cwd=project, capture_output=True, text=True, timeout=60), [
            [sys.executable, "-m", "awsworld", "template"], [script, "template"],
            [sys.executable, "-m", "awsworld", "runs"]])
    assert module.returncode == 0 and module.stdout == console.stdout and "CodeUri: src/" in module.stdout
    line = Result(usage.returncode, usage.stdout, usage.stderr).one_line_error(2)
    assert "AWSWORLD_TABLE and AWSWORLD_BUCKET not set" in line


def test_start_result_describe_runs(dev: Dev) -> None:
    run_id = _start(dev, "clitest.sum", "[2]", "--kwargs", '{"b": 3}')
    result, waited = parallel(dev, ("result", run_id, "--wait", "30"),
                              ("start", "clitest.sum", "[40, 2]", "--wait", "30"))
    assert (result.code, result.out) == (0, "5\n"), result
    assert waited.code == 0 and waited.out.splitlines()[1] == "42", waited

    as_json, described, document, listed, completed = parallel(
        dev, ("result", run_id, "--json"), ("describe", run_id), ("describe", run_id, "--json"),
        ("runs", "--workflow", "clitest.sum", "--json"), ("runs", "--status", "completed"))
    assert json.loads(as_json.out) == {"runId": run_id, "status": "completed", "output": 5}
    assert described.code == 0 and "status    completed" in described.out and "clitest.add" in described.out
    description = json.loads(document.out)
    assert description["workflow"] == "clitest.sum" and description["steps"]["byStatus"] == {"completed": 1}
    assert description["parentRunId"] is None and description["children"] == []
    runs = json.loads(listed.out)
    assert run_id in [r["runId"] for r in runs]
    # "schedule": the schedule that started a run (issue 25), None for one started by `start`; "parked": its mark
    # while it is parked (issue 31), else None; "queued": a pending run's wait for its limit's slot, else None.
    assert set(runs[0]) == {"runId", "status", "workflow", "createdAt", "startedAt", "completedAt", "error",
                            "errorCode", "schedule", "parked", "queued"}
    assert runs[0]["schedule"] is None and description["schedule"] is None
    assert runs[0]["parked"] is None and description["parked"] is None
    assert runs[0]["queued"] is None and description["queued"] is None
    assert run_id in completed.out


def test_start_with_a_run_id_another_workflows_run_holds_is_refused_and_says_so(dev: Dev) -> None:
    """The same --run-id given to another workflow used to print the id and exit 0: the second workflow never
    ran, and its `result` was the first one's value."""
    run_id = f"order-{uuid.uuid4().hex[:8]}"
    assert _start(dev, "clitest.sum", "[2, 3]", "--run-id", run_id) == run_id
    again = dev("start", "clitest.sum", "[2, 3]", "--run-id", run_id)  # the same workflow: the same run
    assert (again.code, again.out.strip()) == (0, run_id), again
    refused = dev("start", "clitest.echo", '"hello"', "--run-id", run_id)
    assert refused.code == 1 and refused.out == "", refused
    assert f"run id '{run_id}' is taken by a run of clitest.sum" in refused.err, refused
    assert "clitest.echo was not started" in refused.err and "run-id-taken" in refused.err, refused
    result = dev("result", run_id, "--wait", "30")
    assert (result.code, result.out) == (0, "5\n"), result


def test_outside_the_project_commands_go_on_without_the_code_and_say_so(dev: Dev, tmp_path: Path) -> None:
    """A new shell opens in the home folder: with dev's exports pasted there, AWSWORLD_MODULES names a module
    that cannot be imported, and the CLI warns once and goes on (a start still checked by the published names)."""
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    run_id = _start(dev, "clitest.sum", "[2]", "--kwargs", '{"b": 3}')
    result = awsworld("result", run_id, "--wait", "30", env=dev.env, cwd=elsewhere)
    assert (result.code, result.out) == (0, "5\n"), result
    [warning] = result.err.splitlines()
    assert warning.startswith("warning: AWSWORLD_MODULES names 'clitest', which cannot be imported here"), warning
    listed = awsworld("runs", "--workflow", "clitest.sum", "--json", env=dev.env, cwd=elsewhere)
    assert listed.code == 0 and run_id in [r["runId"] for r in json.loads(listed.out)], listed
    started = awsworld("start", "clitest.sum", "[40, 2]", "--wait", "30", env=dev.env, cwd=elsewhere)
    assert started.code == 0 and started.out.splitlines()[1] == "42", started
    unknown = awsworld("start", "clitest.nope", "[]", env=dev.env, cwd=elsewhere)
    assert unknown.code == 2 and "clitest.nope" in unknown.err, unknown


def test_runs_of_a_misspelt_workflow_say_so_with_the_nearest_name(dev: Dev, tmp_path: Path) -> None:
    """``runs --workflow`` with a typo lists nothing, as a workflow without runs does: a note on stderr tells them
    apart, from the CLI's modules or, outside the project, from the names dev published. Not an error: a renamed
    workflow's old runs are listed by their old name."""
    _start(dev, "clitest.sum", "[1]", "--kwargs", '{"b": 1}')
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    for listed in (dev("runs", "--workflow", "clitest.summ"),
                   awsworld("runs", "--workflow", "clitest.summ", "--json", env=dev.env, cwd=elsewhere)):
        assert listed.code == 0, listed
        assert "note: no workflow named 'clitest.summ' is registered here; did you mean 'clitest.sum'?" in listed.err
    assert "no workflow named" not in dev("runs", "--workflow", "clitest.sum").err


def test_runs_says_when_there_are_more_and_pages_on_with_the_cursor_it_prints(dev: Dev) -> None:
    """`awsworld runs` printed one page (20 by default, 100 at most) and nothing else: 130 runs listed as 20, and
    no way to reach the 101st. A page that is not the last ends with a `more runs:` line on stderr (--json too)
    holding the command for the next page, whose `--cursor` carries on where this one stopped."""
    started = {_start(dev, "clitest.sum", f"[{n}]", "--kwargs", '{"b": 0}') for n in range(3)}
    command: list[str] = ["runs", "--workflow", "clitest.sum", "--limit", "2", "--json"]
    seen: list[str] = []
    for _ in range(20):
        listed = dev(*command)
        assert listed.code == 0, listed
        seen += [r["runId"] for r in json.loads(listed.out)]
        more = [line for line in listed.err.splitlines() if line.startswith("more runs: ")]
        if not more:
            break
        words = shlex.split(more[0].removeprefix("more runs: "))
        assert words[:6] == ["awsworld", "runs", "--workflow", "clitest.sum", "--limit", "2"], more
        command = words[1:]
    assert len(seen) == len(set(seen)) >= 3 and started <= set(seen), seen
    last = dev("runs", "--workflow", "clitest.sum", "--limit", "100")
    assert last.code == 0 and "more runs" not in last.err, "the last page says nothing more"


def _describe_until(dev: Dev, run_id: str, ready: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """``describe --json`` until ``ready`` holds for it (the run has reached the state the test wants), or the
    run has ended."""
    deadline = time.monotonic() + 60
    while True:
        result = dev("describe", run_id, "--json")
        assert result.code == 0, result
        document: dict[str, Any] = json.loads(result.out)
        if ready(document) or document["endedAt"] or time.monotonic() > deadline:
            return document
        time.sleep(0.2)


def test_describe_lists_steps_in_call_order(dev: Dev) -> None:
    run_id = _start(dev, "clitest.many", "[12]", "--wait", "60")
    as_json, text = parallel(dev, ("describe", run_id, "--json"), ("describe", run_id))
    document = json.loads(as_json.out)
    ids = [step["stepId"] for step in document["steps"]["list"]]
    assert ids == [f"step_{i}" for i in range(1, 13)], ids  # step_10 after step_9, not after step_1
    assert document["status"] == "completed" and document["waitingOn"] == []
    assert document["endedAt"] == document["completedAt"] and document["cancelReason"] is None
    assert re.search(rf"\nstatus    completed at {_shown(document['completedAt'])} \([^)]+ ago\)\n", text.out), text.out
    assert re.search(rf"\ncreated   {_shown(document['createdAt'])} \([^)]+ ago\)\n", text.out), text.out
    assert "waits on" not in text.out


def test_describe_tells_a_completed_steps_earlier_failure_from_its_outcome(dev: Dev) -> None:
    """A step that completed on its second attempt keeps its first attempt's error (``--json``: ``error``); the
    text row says it is an earlier attempt's, so ``completed  RuntimeError: ...`` does not read as a failure."""
    run_id = _start(dev, "clitest.retried", '["R-1"]', "--wait", "60")
    [row] = [line for line in dev("describe", run_id).out.splitlines() if "clitest.second_try" in line]
    assert re.search(r"completed\s+attempt 2  last failed attempt: RuntimeError: first try refused$", row), row
    [step] = json.loads(dev("describe", run_id, "--json").out)["steps"]["list"]
    assert step["status"] == "completed" and "first try refused" in step["error"], step


def _shown(iso: str) -> str:
    """A stored deadline as describe shows it, as a pattern: its time of day (UTC, milliseconds), its date before
    it when it is not today."""
    at = datetime.fromisoformat(iso).astimezone(UTC)
    return rf"(\d{{4}}-\d\d-\d\d )?{at:%H:%M:%S}\.{at.microsecond // 1000:03d} UTC"


def test_describe_says_what_a_running_run_waits_on(dev: Dev, project: Path) -> None:
    gate = project / "gate-open"
    step, hook, sleeping, retrying, parent = (
        _start(dev, "clitest.waits", json.dumps([mode, str(gate) if mode == "step" else f"describe-{mode}"]))
        for mode in ("step", "hook", "sleep", "retry", "child"))

    def waiting(kind: str) -> Callable[[dict[str, Any]], bool]:
        return lambda d: [w["kind"] for w in d["waitingOn"]] == [kind]

    running = _describe_until(dev, step, waiting("step"))
    (wait,) = running["waitingOn"]
    assert (wait["name"], wait["status"], wait["attempt"]) == ("clitest.gate", "running", 1), running
    assert wait["stepId"] == "step_1" and wait["since"]
    text = dev("describe", step).out
    started = _shown(wait["since"])
    assert re.search(rf"waits on  step clitest.gate, running \(attempt 1, started {started} \([^)]+ ago\)\)",
                     text), text
    gate.write_text("")

    (on_hook,) = _describe_until(dev, hook, waiting("hook"))["waitingOn"]
    assert on_hook["token"] == "waits:describe-hook" and on_hook["received"] == 0 and on_hook["webhook"] is False
    assert "waits on  hook waits:describe-hook (no payload yet)" in dev("describe", hook).out

    asleep = _describe_until(dev, sleeping, waiting("sleep"))
    (on_sleep,) = asleep["waitingOn"]
    until = datetime.fromisoformat(on_sleep["until"])
    assert timedelta(minutes=59) < until - datetime.fromisoformat(asleep["startedAt"]) < timedelta(minutes=61)
    # The deadline for people: the time of day (the date too when not today) and how far away it is.
    described = dev("describe", sleeping).out
    assert re.search(rf"waits on  a sleep until {_shown(on_sleep['until'])} \(in (59 min|1 h)", described), described

    (on_retry,) = _describe_until(dev, retrying, waiting("retry"))["waitingOn"]
    assert (on_retry["name"], on_retry["attempt"]) == ("clitest.flaky", 2), on_retry
    assert datetime.fromisoformat(on_retry["at"]) > datetime.now(UTC) + timedelta(minutes=55)
    assert re.search(rf"waits on  a retry of step clitest.flaky at {_shown(on_retry['at'])} \(in \d+ (h|min)[^)]*\) "
                     r"\(attempt 2\)", dev("describe", retrying).out)

    on_child = _describe_until(dev, parent, waiting("child"))
    (child,) = on_child["children"]
    assert on_child["waitingOn"] == [{"kind": "child", "hookId": on_child["waitingOn"][0]["hookId"],
                                      "runId": child["runId"]}]
    assert f"waits on  child run {child['runId']}" in dev("describe", parent).out

    assert json.loads(dev("result", step, "--wait", "30").out) == "open"
    done = _describe_until(dev, step, lambda d: d["status"] == "completed")
    assert done["waitingOn"] == [] and done["steps"]["list"][0]["status"] == "completed"
    for run_id in (hook, sleeping, retrying, parent):
        assert dev("cancel", run_id, "--reason", "test over").code == 0
    cancelled, text = parallel(dev, ("describe", sleeping, "--json"), ("describe", sleeping))
    document = json.loads(cancelled.out)
    assert document["status"] == "cancelled" and document["cancelReason"] == "test over"
    assert document["waitingOn"] == [] and document["endedAt"]
    assert re.search(rf"\nstatus    cancelled at {_shown(document['endedAt'])} \([^)]+ ago\)\nreason    test over\n",
                     text.out), text.out
    assert "waits on" not in text.out


def test_describe_says_a_resume_hook_looks_for_its_hook(dev: Dev) -> None:
    """A workflow's ``resume_hook(..., wait=...)`` of a hook no run holds yet: its step's polls are not retries of a
    failure, so describe says what it looks for and when it looks again; then the hook appears and both finish."""
    sender = _start(dev, "clitest.resumes", json.dumps(["waits:describe-resume"]))
    # The text itself is waited for: between a --json describe that saw the retry and a text one, the next poll
    # may have started (describe then says the step runs), as a describe this quick once met.
    said = re.compile(r"waits on  resume_hook tries again at .+ \(attempt \d+\): the hook it resumes was not there "
                      r"yet, or the last try failed \(awsworld events RUN says which, and the token\)")
    deadline = time.monotonic() + 60
    while not said.search(text := dev("describe", sender).out) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert said.search(text), text
    assert "poll 1: no run holds the hook yet" in dev("events", sender).out
    target = _start(dev, "clitest.waits", json.dumps(["hook", "describe-resume"]))
    assert json.loads(dev("result", target, "--wait", "60").out) == "from a run"
    assert json.loads(dev("result", sender, "--wait", "60").out) == "sent"


def test_start_takes_a_json_object_as_one_argument(dev: Dev) -> None:
    as_object, as_string, as_kwargs = parallel(
        dev, ("start", "clitest.echo", '{"a": 1, "value": 2}', "--wait", "30", "--json"),  # not splatted
        ("start", "clitest.echo", '"just a string"', "--wait", "30", "--json"),
        ("start", "clitest.echo", "[]", "--kwargs", '{"value": [1, 2]}', "--wait", "30", "--json"))
    assert json.loads(as_object.out)["output"] == {"a": 1, "value": 2}, as_object
    assert json.loads(as_string.out)["output"] == "just a string"
    assert json.loads(as_kwargs.out)["output"] == [1, 2]


def test_describe_shows_parent_and_children(dev: Dev) -> None:
    parent = _start(dev, "clitest.parent", "[4]", "--wait", "30")
    document, text = parallel(dev, ("describe", parent, "--json"), ("describe", parent))
    (child,) = json.loads(document.out)["children"]
    assert child["workflow"] == "clitest.sum" and child["status"] == "completed"
    assert f"child     {child['runId']}" in text.out
    assert json.loads(dev("describe", child["runId"], "--json").out)["parentRunId"] == parent


def test_events_show_values_shortened_and_full(dev: Dev) -> None:
    long = "x" * 500
    run_id = _start(dev, "clitest.echo", json.dumps([long]), "--wait", "30")
    failed = _start(dev, "clitest.fail", '["no stock"]', "--wait", "30")
    short, full, rows, result, result_json, failed_events = parallel(
        dev, ("events", run_id), ("events", run_id, "--full"), ("events", run_id, "--json"),
        ("result", failed), ("result", failed, "--json"), ("events", failed))
    assert short.code == 0 and "run_completed" in short.out and 'output "xxx' in short.out, short
    assert long not in short.out and "…" in short.out
    assert long in full.out
    events = json.loads(rows.out)
    assert events[-1]["eventType"] == "run_completed" and events[-1]["value"] == long
    line = result.one_line_error(1)
    assert f"run {failed} (clitest.fail) failed: " in line and "no stock" in line, line  # which workflow, too
    assert json.loads(result_json.out)["status"] == "failed" and result_json.code == 1
    assert "error ValueError: no stock" in failed_events.out


def test_events_name_what_an_attr_set_set(dev: Dev) -> None:
    """Every run under dev has an ``attr_set`` second (its deployment's pin): ``events`` showed it as a bare
    ``attr_set`` row, nothing saying what was set. It says so in words (``deployment  pinned to dev-…``), and
    names the key and the value of any other attribute."""
    run_id = _start(dev, "clitest.sum", "[1, 2]", "--wait", "30")
    text, described = parallel(dev, ("events", run_id), ("describe", run_id, "--json"))
    pinned = json.loads(described.out)["deployment"]
    assert re.search(rf"^ +\d+ ms  attr_set +deployment +pinned to {pinned}$", text.out, re.M), text.out


def test_a_failed_runs_error_shows_its_step_type_message_and_traceback(dev: Dev) -> None:
    failed = _start(dev, "clitest.fail", '["no kettles"]', "--wait", "30")
    full, rows, described, document, listed = parallel(
        dev, ("events", failed, "--full"), ("events", failed, "--json"), ("describe", failed),
        ("describe", failed, "--json"), ("runs", "--workflow", "clitest.fail", "--limit", "1"))
    # runs says why a failed run failed (it said only `failed`): where, the original type and message (--json: the
    # error's summary and code, as test_start_result_describe_runs's keys say).
    header, row = listed.out.splitlines()[:2]
    assert header.endswith("  ERROR") and row.startswith(failed), listed.out
    assert "  step clitest.boom: ValueError: no kett" in row, listed.out  # (cut to the terminal's width)
    assert full.code == 0, full
    # Under the step_failed row and the run_failed row: the step's traceback, to the user's raising line.
    assert full.out.count("raise ValueError(why)") == 2 and "Traceback (most recent call last):" in full.out
    assert "step clitest.boom (step_" in full.out and "the workflow did not catch it:" in full.out
    events = json.loads(rows.out)
    step_failed = next(e for e in events if e["eventType"] == "step_failed")
    assert step_failed["errorDetails"]["type"] == "ValueError" and "raise ValueError(why)" in \
        step_failed["errorDetails"]["stack"]
    run_failed = events[-1]["errorDetails"]
    assert (run_failed["name"], run_failed["stepName"], run_failed["cause"]["message"]) == (
        "StepError", "clitest.boom", "no kettles")
    assert "failed in step clitest.boom (step_" in described.out, described.out
    assert "error     ValueError: no kettles" in described.out and "code      USER_ERROR" in described.out
    assert "traceback\n" in described.out and "raise ValueError(why)" in described.out
    # and the way on, which only errors.md said: a failed run is final, a rerun is a new run with its input
    assert described.out.splitlines()[-1] == (f"re-run    once the cause is fixed, `awsworld rerun {failed}` starts a "
                                              "new run of its workflow with this input, on the newest code (every "
                                              "step runs again)"), described.out
    details = json.loads(document.out)["errorDetails"]
    assert details["cause"]["type"] == "ValueError" and "raise ValueError(why)" in details["cause"]["stack"]
    assert json.loads(document.out)["error"] == "StepError: step 'clitest.boom' failed: ValueError: no kettles"


def test_events_and_describe_show_the_names_of_calls(dev: Dev) -> None:
    run_id = _start(dev, "clitest.named", '["k1"]')
    waiting = _describe_until(dev, run_id, lambda d: [w["kind"] for w in d["waitingOn"]] == ["hook"])
    (on_hook,) = waiting["waitingOn"]
    assert on_hook["displayName"] == "sign-off", waiting
    assert "waits on  hook 'sign-off' named:k1 (no payload yet)" in dev("describe", run_id).out
    assert dev("resume", "named:k1", '"ok"', "--wait", "30").code == 0
    assert json.loads(dev("result", run_id, "--wait", "30").out) == 3
    text, rows, described = parallel(dev, ("events", run_id), ("events", run_id, "--json"),
                                     ("describe", run_id, "--json"))
    assert [s["displayName"] for s in json.loads(described.out)["steps"]["list"]] == ["add them"]
    assert "add them (clitest.add)" in text.out and "sign-off (named:k1)" in text.out, text.out
    shown = {(row["eventType"], row["displayName"]) for row in json.loads(rows.out)}
    assert {("step_created", "add them"), ("step_completed", "add them"), ("hook_created", "sign-off")} <= shown


def test_resume_and_fail_hook_with_an_idempotency_key_deliver_once(dev: Dev) -> None:
    """A sender that runs `awsworld resume` again after a timeout, or after a crash of dev lost its answer, could
    not make the repeat safe: the command took no key (only `client.resume_hook` did), so the repeat was a second
    payload, or exit 1 once the hook was gone."""
    run_id = _start(dev, "clitest.named", '["idem"]')
    first = dev("resume", "named:idem", '"ok"', "--wait", "30", "--idempotency-key", "mail-17")
    assert first.code == 0 and first.out.startswith("delivered as "), first
    event_id = first.out.split()[2]
    assert json.loads(dev("result", run_id, "--wait", "30").out) == 3  # the run took it, disposed the hook, ended
    again = dev("resume", "named:idem", '"ok"', "--idempotency-key", "mail-17")  # the sender's repeat
    assert again.code == 0 and again.out.startswith(f"already delivered as {event_id} to run {run_id}"), again
    # A fail-hook reusing the key the resume recorded failed nothing, and said "failed as evnt_…" all the same: it
    # says what the key delivered, and exits 0 as any repeat of a key does (docs/how-to/hooks.md).
    failed = dev("fail-hook", "named:idem", "too late", "--idempotency-key", "mail-17")
    assert (failed.code, failed.out) == (0, f"already delivered as {event_id} to run {run_id}: this idempotency key "
                                            'was used before, by a resume, with the payload "ok"; nothing was '
                                            "recorded again\n"), failed
    other = dev("resume", "named:idem", '"no"', "--idempotency-key", "mail-18").one_line_error(1)
    assert "closed when its run" in other, other
    assert {h["token"]: h["received"] for h in json.loads(dev("hooks", run_id, "--json").out)} == {"named:idem": 1}


def test_hooks_streams_resume_and_the_local_webhook_route(dev: Dev) -> None:
    run_id = _start(dev, "clitest.approval", '{"id": 7}')
    resumed = dev("resume", "approve:7", '{"ok": true}', "--wait", "30")  # waits for the run to reach the hook
    assert resumed.code == 0 and run_id in resumed.out, resumed
    hooks_json, hooks_text, events, streams, chunks = parallel(
        dev, ("hooks", run_id, "--json"), ("hooks", run_id), ("events", run_id), ("streams", run_id, "--json"),
        ("streams", run_id, "log"))
    webhook = next(h for h in json.loads(hooks_json.out) if h["webhook"])
    token = str(webhook["token"])
    assert len(token) == 64 and webhook["url"] == f"{dev.env['AWSWORLD_WEBHOOK_URL']}/webhooks/{token}"
    assert token in hooks_text.out and "approve:7" in hooks_text.out and str(webhook["url"]) in hooks_text.out
    assert token in events.out  # never cut
    assert json.loads(streams.out) == [{"name": "log", "chunks": 1, "closed": False}]
    assert chunks.out == "waiting\n"
    deadline = time.monotonic() + 30  # the workflow left the hook's `async with` once it read the payload
    while {h["token"]: h["state"] for h in json.loads(dev("hooks", run_id, "--json").out)}.get("approve:7") != \
            "disposed" and time.monotonic() < deadline:
        time.sleep(0.2)
    late = dev("resume", "approve:7", '{"ok": false}').one_line_error(1)  # an answer after the fact: not a typo
    assert f"the hook of run {run_id} that held it was disposed" in late and "no more payloads" in late, late
    assert f"`awsworld hooks {run_id}` shows the hook" in late, late

    probe = urllib.request.Request(str(webhook["url"]), method="OPTIONS")  # a method the route does not take
    with pytest.raises(urllib.error.HTTPError) as refused:  # answered as on AWS (it was http.server's 501 page)
        urllib.request.urlopen(probe, timeout=30)
    assert refused.value.code == 405 and refused.value.headers["allow"] == "GET, POST, PUT, PATCH, DELETE"
    assert json.loads(refused.value.read())["status"] == "method-not-allowed"
    request = urllib.request.Request(str(webhook["url"]), data=b"hello", method="POST",
                                     headers={"content-type": "text/plain"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status == 202 and json.loads(answer.read())["status"] == "accepted"

    followed, result = parallel(dev, ("streams", run_id, "log", "--follow", "--json"),
                                ("result", run_id, "--wait", "30"))
    assert [json.loads(line) for line in followed.out.splitlines()] == [{"index": 0, "text": "waiting\n"},
                                                                        {"index": 1, "text": "done\n"}]
    assert json.loads(result.out) == {"answer": {"ok": True}, "body": "hello"}
    received = {h["token"]: h["received"] for h in json.loads(dev("hooks", run_id, "--json").out)}
    assert received == {token: 1, "approve:7": 1}
    # the sender never saw the 202 (a timeout) and retries the same request after the run ended: it was delivered,
    # so it is answered as delivered (it was 410 "gone", which a sender takes for a failed delivery), not recorded
    retry = urllib.request.Request(str(webhook["url"]), data=b"hello", method="POST",
                                   headers={"content-type": "text/plain"})
    with urllib.request.urlopen(retry, timeout=30) as answer:
        assert answer.status == 202 and json.loads(answer.read())["status"] == "already-received"
    other = urllib.request.Request(str(webhook["url"]), data=b"another", method="POST",
                                   headers={"content-type": "text/plain"})
    with pytest.raises(urllib.error.HTTPError) as refused:  # a new request still finds the run finished
        urllib.request.urlopen(other, timeout=30)
    assert refused.value.code == 410
    assert {h["token"]: h["received"] for h in json.loads(dev("hooks", run_id, "--json").out)} == received


def test_streams_from_a_negative_index_start_before_the_tail_and_print_each_chunks_own_index(dev: Dev) -> None:
    """``awsworld streams RUN NAME --from -2``: the last two chunks, with or without ``--follow``, each printed
    with its index from the head. Before, a follow printed indexes -2 and -1, and a read without it took -2 as 0
    and printed all the chunks."""
    run_id = _start(dev, "clitest.written", "[5]", "--wait", "30")
    tail, followed, text, later, before_head = parallel(
        dev, ("streams", run_id, "log", "--from", "-2", "--json"),
        ("streams", run_id, "log", "--from", "-2", "--follow", "--json"), ("streams", run_id, "log", "--from", "-1"),
        ("streams", run_id, "log", "--from", "3", "--json"), ("streams", run_id, "log", "--from", "-9", "--json"))
    last_two = [{"index": 3, "text": "line 3\n"}, {"index": 4, "text": "line 4\n"}]
    assert [json.loads(line) for line in tail.out.splitlines()] == last_two, tail
    assert [json.loads(line) for line in followed.out.splitlines()] == last_two, followed
    assert [json.loads(line) for line in later.out.splitlines()] == last_two, later
    assert text.out == "line 4\n", text
    assert [json.loads(line)["index"] for line in before_head.out.splitlines()] == [0, 1, 2, 3, 4], before_head


def test_a_follow_started_before_the_streams_first_chunk_waits_for_it_and_a_name_never_written_is_refused_at_the_end(
        dev: Dev, project: Path) -> None:
    """``awsworld streams RUN NAME --follow`` right after ``start``, before the step's first write, was refused
    (``run ... has no stream 'log'``, exit 1): a follow had to be timed after the first chunk. It now says on
    stderr that it waits for the stream, prints the chunks as they come and ends with the run; a name no step
    writes waits likewise and is refused once the run has ended."""
    gate_file = f"gate-{uuid.uuid4().hex}"  # the step writes once the test creates it (dev runs in the project)
    run_id = _start(dev, "clitest.gated_lines", json.dumps([gate_file, 2]))

    def follow(name: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "awsworld.cli", "streams", run_id, name, "--follow", "--json"],
                                env=dev.env, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=tied())

    followers = [follow("log"), follow("nope")]
    try:
        for follower, name in zip(followers, ("log", "nope"), strict=True):
            assert follower.stderr is not None
            ready, _, _ = select.select([follower.stderr], [], [], 30)
            assert ready, f"the follow of {name!r} said nothing"
            said = follower.stderr.readline()
            assert said == (f"(run {run_id} has no stream {name!r} yet (its streams so far: none): following it "
                            "from its first chunk, until it closes or the run ends)\n"), said
        (project / gate_file).touch()
        (out, err), (typo_out, typo_err) = (f.communicate(timeout=30) for f in followers)
    finally:
        for follower in followers:
            follower.kill()
    assert followers[0].returncode == 0, (out, err)
    assert [json.loads(line) for line in out.splitlines()] == [{"index": 0, "text": "line 0\n"},
                                                               {"index": 1, "text": "line 1\n"}]
    assert (followers[1].returncode, typo_out) == (1, ""), (typo_out, typo_err)
    assert typo_err.splitlines()[-1] == (f"awsworld streams: run {run_id} ended with no stream 'nope' (its streams: "
                                         f"'log') (hint: `awsworld streams {run_id}` lists its streams)"), typo_err


def test_a_quiet_follow_says_what_it_waits_for_and_ends_with_the_run(dev: Dev, project: Path) -> None:
    """``streams RUN NAME --follow`` on a run whose step wrote a chunk and whose run then waits (an hour's sleep,
    here a hook) printed the chunk and then nothing: it looked hung. After ``QUIET_SECONDS`` it says once, on
    stderr, that the stream stays open until closed or the run ends, and where to see what the run waits on; the
    run's end (a cancel) ends the follow."""
    run_id = _start(dev, "clitest.approval", '{"id": 71}')
    until_chunk = time.monotonic() + 30
    while dev("streams", run_id, "log").out != "waiting\n":
        assert time.monotonic() < until_chunk, "the step wrote no chunk"
        time.sleep(0.2)
    follow = subprocess.Popen([sys.executable, "-m", "awsworld.cli", "streams", run_id, "log", "--follow"],
                              env=dev.env, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              preexec_fn=tied())
    try:
        assert follow.stderr is not None
        ready, _, _ = select.select([follow.stderr], [], [], 30)  # the note, after QUIET_SECONDS without a chunk
        assert ready, "the follow said nothing about why it waits"
        said = follow.stderr.readline()
        assert said == (f"(no new chunk for 5 s: stream 'log' stays open until a step closes it or run {run_id} "
                        f"ends; `awsworld describe {run_id}` says what the run waits on; Ctrl-C stops following)\n")
        assert dev("cancel", run_id).code == 0
        out, err = follow.communicate(timeout=30)
    finally:
        follow.kill()
    assert (follow.returncode, out, err) == (0, "waiting\n", ""), (follow.returncode, out, err)


def test_resume_sends_a_codec_hooks_payload_as_the_codecs_text(dev: Dev) -> None:
    """The command a user types for a hook created with ``codec=PydanticCodec(Order)``, a JSON object, reaches the
    codec as its text (parsed, it would be a dict the codec refuses, failing the run): the run completes with the
    decoded model. Without a PAYLOAD (a plain hook's default is null) it is a usage error, and nothing is sent."""
    run_id, other = _start(dev, "clitest.ordered", '["1"]'), _start(dev, "clitest.ordered", '["2"]')
    resumed = dev("resume", "order:1", '{"sku": "tea", "quantity": 1}', "--wait", "30")
    assert resumed.code == 0 and run_id in resumed.out, resumed
    result = dev("result", run_id, "--wait", "30", "--json")
    assert result.code == 0 and json.loads(result.out)["output"] == {"sku": "tea", "quantity": 1, "type": "Order"}
    line = dev("resume", "order:2", "--wait", "30").one_line_error(2)
    assert "decodes its payloads with a codec" in line and "give PAYLOAD" in line, line
    assert [h["received"] for h in _hooks_of(dev, other, "order:2")] == [0]


def test_a_payload_a_codec_hook_refuses_is_a_usage_error() -> None:
    """``CodecPayloadError`` (``resume_hook``'s refusal of a codec hook's payload that is not the codec's text): one
    line, exit 2, as the command's own mistakes are."""
    from awsworld.cli.errors import describe
    from awsworld.world.errors import CodecPayloadError

    error = describe(CodecPayloadError("send the codec's text", field="payload"))
    assert (error.code, str(error)) == (2, "send the codec's text")


def test_fail_hook_makes_the_awaiting_workflow_raise(dev: Dev) -> None:
    run_id = _start(dev, "clitest.approval", '{"id": 11}')
    failed = dev("fail-hook", "approve:11", "out of stock", "--code", "NO_STOCK", "--wait", "30")
    assert failed.code == 0 and f"in run {run_id}" in failed.out, failed
    # (fail-hook's --wait waits for the hook, not for the run's end: the reads without a wait come after the one
    # with it, not beside it, where a quick one read "still running")
    result = dev("result", run_id, "--wait", "30", "--json")
    text, described = parallel(dev, ("result", run_id), ("describe", run_id))
    # describe's error line keeps the code too, and the qualified type is said once (not again as "type ...")
    assert "error     awsworld.authoring.errors.HookFailedError: out of stock [NO_STOCK]" in \
        described.out.splitlines() and "  type " not in described.out, described.out
    outcome = json.loads(result.out)
    assert result.code == 1 and outcome["status"] == "failed", result
    assert "HookFailedError" in outcome["error"] and "out of stock" in outcome["error"], outcome
    assert "out of stock [NO_STOCK]" in text.one_line_error(1)  # the sender's code is in the run's error
    gone, missing = parallel(dev, ("fail-hook", "approve:11", "again"), ("fail-hook", "approve:11"))
    # The run failed (HookFailedError) with the hook open: its end closed it, and a resume says so.
    assert f"closed when its run {run_id} ended (failed)" in gone.one_line_error(1)
    assert missing.code == 2 and "Traceback" not in missing.err  # the message is required


def test_heartbeat_hook_reaches_the_hook_and_is_refused_once_it_is_gone(dev: Dev) -> None:
    run_id = _start(dev, "clitest.beating", '["b1"]')
    beat = dev("heartbeat-hook", "beat:b1", "--wait", "30")
    assert beat.code == 0 and f"in run {run_id}" in beat.out, beat
    assert dev("heartbeat-hook", "beat:b1").code == 0
    waiting = json.loads(dev("describe", run_id, "--json").out)["waitingOn"]
    assert [(w["received"], w["heartbeats"]) for w in waiting if w["kind"] == "hook"] == [(0, 2)], waiting
    assert "(no payload yet, 2 heartbeat(s))" in dev("describe", run_id).out
    hooks = json.loads(dev("hooks", run_id, "--json").out)
    assert [(h["received"], h["heartbeats"]) for h in hooks] == [(0, 2)], hooks  # heartbeats, not payloads
    assert hooks[0]["lastHeartbeatAt"] is not None
    # The deadline moved with the last heartbeat at once (heartbeat_timeout="1h" after it), though the flow writes
    # the next heartbeat wait only when it next runs.
    [on_hook] = [w for w in json.loads(dev("describe", run_id, "--json").out)["waitingOn"] if w["kind"] == "hook"]
    due = datetime.fromisoformat(hooks[0]["lastHeartbeatAt"]) + timedelta(hours=1)
    assert datetime.fromisoformat(on_hook["heartbeatDueAt"]) == due, (on_hook, hooks)
    assert "received 0  heartbeats 2 (last " in dev("hooks", run_id).out
    assert dev("resume", "beat:b1", '"ok"').code == 0
    assert [(h["received"], h["heartbeats"]) for h in json.loads(dev("hooks", run_id, "--json").out)] == [(1, 2)]
    result = dev("result", run_id, "--wait", "30", "--json")
    assert result.code == 0 and json.loads(result.out)["output"] == "ok", result  # heartbeats are no payloads
    gone, missing = parallel(dev, ("heartbeat-hook", "beat:b1"), ("heartbeat-hook", "no-such-token"))
    assert f"closed when its run {run_id} ended (completed)" in gone.one_line_error(1)
    line = missing.one_line_error(1)
    assert "no hook holds this token" in line and "awsworld hooks RUN" in line


def _hooks_of(dev: Dev, run_id: str, token: str, timeout: float = 30) -> list[dict[str, object]]:
    """``awsworld hooks RUN --json`` once the run holds ``token``."""
    deadline = time.monotonic() + timeout
    while True:
        hooks = json.loads(dev("hooks", run_id, "--json").out)
        if any(h["token"] == token for h in hooks) or time.monotonic() > deadline:
            return hooks
        time.sleep(0.2)


def test_cancel(dev: Dev) -> None:
    run_id = _start(dev, "clitest.approval", '{"id": 8}')
    assert [h["state"] for h in _hooks_of(dev, run_id, "approve:8") if h["token"] == "approve:8"] == ["open"]
    cancelled = dev("cancel", run_id, "--reason", "customer left")
    assert cancelled.code == 0 and f"cancelled {run_id}" in cancelled.out
    result, again = parallel(dev, ("result", run_id, "--wait", "30"), ("cancel", run_id))
    line = result.one_line_error(1)
    assert "cancelled" in line and "customer left" in line
    assert "already cancelled" in again.one_line_error(1)
    # Its hooks were closed by the cancel: listed so, and a resume says the run ended, and how.
    hooks_text, hooks_json, resumed = parallel(dev, ("hooks", run_id), ("hooks", run_id, "--json"),
                                              ("resume", "approve:8", '"yes"'))
    assert "approve:8  hook    received 0  closed (run cancelled)" in hooks_text.out, hooks_text
    assert {h["token"]: h["state"] for h in json.loads(hooks_json.out)}["approve:8"] == "closed"
    line = resumed.one_line_error(1)
    assert f"closed when its run {run_id} ended (cancelled)" in line and f"awsworld describe {run_id}" in line


def test_export_and_replay(dev: Dev, project: Path) -> None:
    run_id = _start(dev, "clitest.sum", "[1, 1]", "--wait", "30")
    exported, replayed = parallel(dev, ("export", run_id, "-o", "out.jsonl"), ("replay", run_id))
    assert exported.code == 0 and (project / "out.jsonl").exists()
    assert replayed.code == 0 and "1 run(s) replayed, 0 diverged" in replayed.out, replayed
    # As docs/how-to/changing-code.md writes it, into a folder that does not exist yet (it was a FileNotFoundError).
    into = dev("export", run_id, "-o", "histories/checkout.jsonl")
    assert into.code == 0, into
    from_file = dev("replay", "--file", "histories/checkout.jsonl", "-m", "clitest")
    assert from_file.code == 0 and "1 run(s) replayed, 0 diverged" in from_file.out, from_file

    # --json, as every read command takes: one document, each run's outcome and the summary's counts; a log whose
    # step the code no longer calls (its step renamed in the file) is a divergence there too, and exits 1.
    lines = (project / "histories/checkout.jsonl").read_text().splitlines()
    renamed = [line.replace('"clitest.add"', '"clitest.renamed"') for line in lines]
    assert renamed != lines
    (project / "histories/renamed.jsonl").write_text("\n".join(renamed) + "\n")
    as_json = dev("replay", "--file", "histories/checkout.jsonl", "--file", "histories/renamed.jsonl", "-m",
                  "clitest", "--json")
    assert as_json.code == 1, as_json
    document = json.loads(as_json.out)
    assert (document["replayed"], document["divergedOrFailed"], document["pinnedNotCounted"]) == (2, 1, 0)
    same, diverged = document["runs"]
    assert same == {"runId": run_id, "workflow": "clitest.sum", "status": "ok", "events": same["events"],
                    "message": None, "position": None, "slot": None, "code": None, "change": None, "pinnedTo": None,
                    "counted": False}, same
    assert (diverged["runId"], diverged["status"], diverged["counted"]) == (run_id, "diverged", True), diverged
    assert "clitest.renamed" in diverged["message"] and isinstance(diverged["slot"], int), diverged


def test_json_a_shell_mangled_is_refused_with_what_to_type(tmp_path: Path) -> None:
    """The first ``awsworld start`` a newcomer types: a bare word for a string, Python's quotes, the JSON left
    unquoted for the shell to split. Each was refused with a hint about quoting that did not fit it (the split one
    with argparse's bare ``unrecognized arguments: [kettle]]``); each hint now gives what to type."""
    env = _clean_env()
    with ThreadPoolExecutor(max_workers=2) as pool:
        bare, python, split, other = pool.map(lambda args: awsworld(*args, env=env, cwd=tmp_path), [
            ("start", "shop.checkout", "A-17"), ("start", "shop.checkout", "['A-17', ['kettle']]"),
            ("start", "shop.checkout", "[A-17,", "[kettle]]"), ("start", "shop.checkout", "[1,")])
    assert bare.one_line_error(2).endswith(
        "(hint: a string is JSON in double quotes, inside the shell's single quotes: '\"A-17\"')"), bare
    assert python.one_line_error(2).endswith("(hint: JSON strings take double quotes: '[\"A-17\", [\"kettle\"]]')"), \
        python
    assert split.code == 2 and split.out == "", split
    assert split.err.splitlines()[-1] == (
        "awsworld: error: unrecognized arguments: [kettle]] (the shell split a JSON value at its spaces or ate its "
        "quotes: pass it as one argument in single quotes, e.g. awsworld start shop.checkout '[\"A-17\", "
        "[\"kettle\"]]')"), split
    assert other.one_line_error(2).endswith("(hint: quote it for the shell, e.g. '[\"A-17\", 3]' or '{\"id\": 1}')")


def test_replay_of_a_file_that_is_not_there_or_not_an_export_names_it(project: Path) -> None:
    """``awsworld replay --file`` with a path that does not exist (a typo, or run from another folder) said
    ``unexpected FileNotFoundError`` and pointed at ``--debug``; a file ``export`` did not write gave a pydantic
    traceback's first line the same way. Both are usage errors naming the file and how to write one."""
    (project / "notes.txt").write_text("not an export\n")
    env = _clean_env()
    with ThreadPoolExecutor(max_workers=2) as pool:
        missing, folder, other = pool.map(lambda args: awsworld(*args, env=env, cwd=project), [
            ("replay", "--file", "histories/nope.jsonl", "-m", "clitest"),
            ("replay", "--file", "src", "-m", "clitest"),
            ("replay", "--file", "notes.txt", "-m", "clitest")])
    assert missing.one_line_error(2) == (
        f"awsworld replay: --file histories/nope.jsonl: no such file (paths are read from {project}) "
        "(hint: `awsworld export RUN... -o FILE` writes one)"), missing
    assert folder.one_line_error(2).startswith("awsworld replay: --file src: a folder, not a file "), folder
    assert other.one_line_error(2).startswith(
        "awsworld replay: --file notes.txt is not a file `awsworld export` wrote: Expecting value"), other


def test_replay_of_a_workflows_runs_checks_its_status_and_limit_as_runs_does(dev: Dev) -> None:
    """``awsworld replay --workflow W --limit 101`` reached the World and came back exit 1, ``limit must be between 1
    and 100 (invalid-input)``, naming no flag, and ``--status done`` the same way; ``awsworld runs`` calls both a
    usage error naming the flag and what it takes. Now replay does too, before any read."""
    too_many, unknown = parallel(dev, ("replay", "--workflow", "clitest.sum", "--limit", "101", "-m", "clitest"),
                                 ("replay", "--workflow", "clitest.sum", "--status", "done", "-m", "clitest"))
    assert too_many.one_line_error(2) == (
        "awsworld replay: --limit must be between 1 and 100, got 101 (hint: name the runs to replay (RUN_ID...), or "
        "narrow them with --status)"), too_many
    assert unknown.one_line_error(2) == (
        "awsworld replay: unknown run status 'done' (hint: --status takes pending, running, completed, failed, "
        "cancelled; repeat it for several)"), unknown


def test_ordinary_mistakes_are_one_line_with_a_hint(dev: Dev, project: Path) -> None:
    commands = ("result", "describe", "events", "hooks", "streams", "cancel")
    unknown = parallel(dev, *((command, "wrun_nosuchrun") for command in commands))
    bad_args, bad_payload, bad_kwargs, no_workflow, no_hook, debug = parallel(
        dev, ("start", "clitest.sum", "[1,"), ("resume", "approve:7", "{oops"),
        ("start", "clitest.sum", "[1]", "--kwargs", "[2]"), ("start", "clitest.nope"), ("resume", "no-such-token"),
        ("result", "wrun_nosuchrun", "--debug"))
    [no_hook_to_fail] = parallel(dev, ("fail-hook", "no-such-token", "why"))
    for result in unknown:
        line = result.one_line_error(1)
        assert "no such run" in line and "hint:" in line, line
        assert "kept for its retention after it ends (the stack's RunRetentionDays" in line, line  # (then gone)
    assert "is not JSON" in bad_args.one_line_error(2)
    assert "is not JSON" in bad_payload.one_line_error(2)
    assert "must be a JSON object" in bad_kwargs.one_line_error(2)
    line = no_workflow.one_line_error(2)  # a usage error: the command names a workflow nothing registers
    assert "no workflow named 'clitest.nope'" in line and "hint:" in line
    assert "no hook holds this token" in no_hook.one_line_error(1)
    line = no_hook_to_fail.one_line_error(1)
    assert "no hook holds this token" in line and "awsworld hooks RUN" in line
    assert debug.code == 1 and "Traceback" in debug.err

    unreachable = {**dev.env, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
    with ThreadPoolExecutor(max_workers=3) as pool:
        far, unset, usage = pool.map(lambda env_args: awsworld(*env_args[1], env=env_args[0], cwd=project), [
            (unreachable, ("runs",)), (_clean_env(), ("runs",)), (_clean_env(), ("result",))])
    line = far.one_line_error(1)
    assert "cannot reach http://127.0.0.1:9" in line and "awsworld dev" in line
    line = unset.one_line_error(2)
    assert "AWSWORLD_TABLE and AWSWORLD_BUCKET not set" in line and "awsworld dev" in line
    assert usage.code == 2 and "Traceback" not in usage.err


def test_start_refuses_arguments_that_do_not_fit_the_workflow(dev: Dev) -> None:
    """With AWSWORLD_MODULES (``dev`` exports it) the workflow is known: a call that does not fit its parameters
    is a usage error naming them, and no run is recorded."""
    too_many, unknown_kwarg, recorded, named = parallel(
        dev, ("start", "clitest.sum", "[1, 2, 3]", "--run-id", "cli-bad-args"),
        ("start", "clitest.sum", "[1]", "--kwargs", '{"c": 2}'), ("start", "clitest.sum", "[1]", "--wait", "30"),
        ("start", "clitest.sum", '{"a": 1, "b": 2}'))
    # A newcomer's object of the parameters' names as ARGS: one dict for `a`; the refusal now says the --kwargs form.
    assert named.one_line_error(2).endswith(
        'ARGS {"a": 1, "b": 2} is one dict, the first positional argument; its keys name parameters: to pass them '
        """by name, give them to --kwargs: awsworld start clitest.sum --kwargs '{"a": 1, "b": 2}')"""), named
    line = too_many.one_line_error(2)
    assert "total() takes from 1 to 2 positional arguments but 3 were given" in line, line
    assert "hint: the workflow takes clitest.sum(a, b=0)" in line and "--kwargs" in line
    assert "total() got an unexpected keyword argument 'c'" in unknown_kwarg.one_line_error(2)
    assert "no such run" in dev("describe", "cli-bad-args").one_line_error(1), "nothing was recorded"
    assert recorded.code == 0 and recorded.out.splitlines()[1] == "1", recorded
    coded = dev("start", "clitest.coded", '[1, "two"]', "--run-id", "cli-bad-coded")  # refused by its args_codec
    line = coded.one_line_error(2)
    assert "cannot be encoded by its codec PydanticCodec" in line and "clitest.coded(a, b)" in line, line
    assert "no such run" in dev("describe", "cli-bad-coded").one_line_error(1), "nothing was recorded"
    assert dev("start", "clitest.coded", "[1, 2]", "--wait", "30").out.splitlines()[1] == "3"


def test_dev_state_keeps_runs_across_restarts(project: Path, runners: list[Runner]) -> None:
    """A second ``dev`` on its own state: a run waiting on a hook survives a restart, and finishes after it."""
    first = Dev(project, project / "state2", runners)
    run_id = _start(first, "clitest.approval", '{"id": 9}')
    # Resumed at once (once the run holds the hook): the run goes on to wait for its webhook, across the restart.
    assert first("resume", "approve:9", '"yes"', "--wait", "30").code == 0
    assert "state saved" in first.stop()

    second = Dev(project, project / "state2", runners)
    try:
        assert any("1 unfinished run(s) woken" in line for line in second.banner), second.banner
        assert second.env["AWSWORLD_TABLE"] == first.env["AWSWORLD_TABLE"]
        webhook = next(h for h in json.loads(second("hooks", run_id, "--json").out) if h["webhook"])
        with urllib.request.urlopen(urllib.request.Request(str(webhook["url"]), data=b"hi", method="POST"),
                                    timeout=30) as answer:
            assert answer.status == 202
        # (--follow: read without it, the stream could be read before the run wrote its last chunk; under load it was)
        result, streamed = parallel(second, ("result", run_id, "--wait", "30"), ("streams", run_id, "log", "--follow"))
        assert json.loads(result.out)["answer"] == "yes"
        assert streamed.out == "waiting\ndone\n"
    finally:
        second.stop()


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes")
def test_dev_state_is_readable_by_its_owner_only(project: Path, runners: list[Runner]) -> None:
    """``--state DIR`` holds the runs' payloads in the clear (here a stream's chunks, in ``objects/``, and the run's
    argument, in the table's copy): under the usual umask (022) its snapshots were 0644 in a 0755 folder, readable by
    every user of the machine. Now the folder is 0700 (one left 0755 by an older ``dev`` is tightened) and every file
    ``dev`` writes is 0600."""
    state = project / "state-private"
    state.mkdir(mode=0o755)
    os.chmod(state, 0o755)  # (as an older dev or a mkdir left it)
    previous = os.umask(0o022)
    try:
        server = Dev(project, state, runners)
    finally:
        os.umask(previous)
    try:
        run_id = _start(server, "clitest.approval", '{"id": 41}')
        assert until_found(lambda: server("streams", run_id, "log").out, "the stream's first chunk") == "waiting\n"
    finally:
        assert "state saved" in server.stop()
    files = [path for path in state.rglob("*") if path.is_file()]
    assert {path.name for path in files} >= {"state.json", "table.jsonl", "objects.json", "dev.lock"}
    assert any(path.parent.name == "objects" for path in files), "the stream's chunks were copied"
    modes = {str(path.relative_to(state)): oct(path.stat().st_mode & 0o777) for path in [state, *state.rglob("*")]}
    assert modes == {name: ("0o700" if (state / name).is_dir() else "0o600") for name in modes}, modes


def test_a_second_dev_on_a_state_in_use_is_refused_and_the_first_keeps_its_runs(
        project: Path, runners: list[Runner]) -> None:
    """Two ``dev``s on one --state would each snapshot into it every few seconds, the last writer's runs all that is
    kept: the second is refused in one line naming the first, before it starts anything; once the first has
    stopped, the state is free again."""
    state = project / "state-shared"
    first = Dev(project, state, runners)
    try:
        run_id = _start(first, "clitest.approval", '{"id": 31}')
        second = awsworld("dev", "clitest", "--state", str(state), env=_clean_env(), cwd=project)
        assert second.one_line_error(2) == (  # refused before the emulator started: nothing on stdout
            f"awsworld dev: another awsworld dev (pid {first.process.pid}) is using --state {state} "
            "(hint: stop it first, or give this one a --state of its own)")
        assert second.out == ""
        assert first("resume", "approve:31", '"yes"', "--wait", "30").code == 0  # the first goes on serving
    finally:
        assert "state saved" in first.stop()
    again = Dev(project, state, runners)
    try:
        assert json.loads(again("describe", run_id, "--json").out)["runId"] == run_id
    finally:
        again.stop()


def test_wake_sends_a_run_a_message_and_refuses_a_finished_one(dev: Dev) -> None:
    waiting = _start(dev, "clitest.approval", '{"id": 12}')
    done = _start(dev, "clitest.sum", "[2, 2]", "--wait", "30")
    woke, ended = parallel(dev, ("wake", waiting, "--json"), ("wake", done))
    assert woke.code == 0 and json.loads(woke.out)["runId"] == waiting, woke
    assert "is completed" in ended.one_line_error(1)
    assert dev("cancel", waiting).code == 0


@pytest.mark.parametrize(("workflow", "attempt"), [("clitest.slow", 2), ("clitest.brief", 1)])
def test_dev_stopped_while_a_step_runs_keeps_what_ends_in_the_grace_and_runs_the_rest_again(
        project: Path, runners: list[Runner], workflow: str, attempt: int) -> None:
    """Ctrl-C (here SIGTERM) while a step runs, then a restart with the same --state. dev says it waits for the
    delivery and saves the state after it. A step that outlasts the grace (``clitest.slow``: the issue's report)
    runs again as attempt 2 and the run ends, instead of staying "running" for good; one that ends within it
    (``clitest.brief``, released once dev says it waits) keeps its outcome and does not run again.

    The brief step holds until the stop has begun, rather than sleeping 2 s: under load a ``describe`` (a process)
    took 1 to 7 s here, so the poll below never saw a 2 s step running (the run had completed; 3 of 3 runs failed)."""
    state = project / f"state-{workflow}"
    first = Dev(project, state, runners)
    run_id = _start(first, workflow, "[4]")
    deadline = time.monotonic() + 30
    while not any(s["status"] == "running" for s in first.json("describe", run_id)["steps"]["list"]):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    first.process.send_signal(signal.SIGTERM)
    said = first.read_until(lambda line: "waiting up to" in line)
    if workflow == "clitest.brief":
        (project / "brief-release-4").touch()  # its step ends now, within the grace
    said += first.rest()
    assert "waiting up to 5 s for 1 delivery still running" in said and "state saved" in said, said
    assert said.index("waiting up to") < said.index("state saved"), "saved after the delivery ended"
    second = Dev(project, state, runners)
    try:
        result = second("result", run_id, "--wait", "30")
        assert result.code == 0 and json.loads(result.out) == 5, result
        steps = second.json("describe", run_id)["steps"]["list"]
        assert [(s["status"], s["attempt"]) for s in steps] == [("completed", attempt)], steps
    finally:
        second.stop()


def test_demo_opens_with_the_workflow(project: Path) -> None:
    result = awsworld("demo", "--storage", env=_clean_env(), cwd=project, timeout=120)
    assert result.code == 0, result
    out = result.out
    assert out.index("a durable workflow") < out.index("result: {") < out.index("storage layer")
    assert "fenced off: 412" in out and out.index("fenced off") > out.index("result: {")
    assert "until the runtime lands" not in awsworld("--help", env=_clean_env(), cwd=project).out


def test_start_arguments() -> None:
    """How ``start`` reads ARGS and --kwargs (docs/get-started/cli.md's rule), without a process."""
    from awsworld.cli.errors import CliError
    from awsworld.cli.runs import start_arguments

    assert start_arguments('["A-17", 3]', None) == (["A-17", 3], {})
    assert start_arguments('{"id": 1}', None) == ([{"id": 1}], {})
    assert start_arguments('"A-17"', '{"express": true}') == (["A-17"], {"express": True})
    with pytest.raises(CliError) as error:
        start_arguments("[1]", '"x"')
    assert error.value.code == 2


def test_a_workflow_registered_from_main_warns_once(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text("from awsworld import workflow\n\n@workflow\nasync def a() -> None: ...\n\n"
                      "@workflow\nasync def b() -> None: ...\n\n"
                      "@workflow(name='named.c')\nasync def c() -> None: ...\n")
    done = subprocess.run([sys.executable, str(script)], env=_clean_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr.count("registered from __main__") == 1, done.stderr
    assert "'__main__.a'" in done.stderr and "name=" in done.stderr


def test_runs_refuses_an_unknown_status_or_limit_as_a_usage_error_naming_the_choices(project: Path) -> None:
    """`awsworld runs --status fail` was exit 1 with `unknown run status 'fail' (invalid-input)`: the World's
    code, and no word of what the command takes. Refused before anything is read (no stack is configured here)."""
    status = awsworld("runs", "--status", "failed", "--status", "fail", env=_clean_env(), cwd=project)
    limit = awsworld("runs", "--limit", "500", env=_clean_env(), cwd=project)
    assert status.one_line_error(2) == ("awsworld runs: unknown run status 'fail' (hint: --status takes pending, "
                                        "running, completed, failed, cancelled; repeat it for several)")
    assert limit.one_line_error(2) == ("awsworld runs: --limit must be between 1 and 100, got 500 (hint: narrow "
                                       "the listing with --workflow or --status)")


def test_boto3_code_in_the_exported_shell_reaches_the_emulator(dev: Dev, project: Path) -> None:
    """dev.md: the export lines send "any boto3 code there" to the emulator (to look at the dead-letter queue, say).
    boto3 reads AWS_DEFAULT_REGION, not AWS_REGION: with only the latter exported it raised NoRegionError."""
    code = ("import boto3, os\n"
            "queues = boto3.client('sqs').list_queues()['QueueUrls']\n"
            "print(os.environ['AWSWORLD_QUEUE_URL'] in queues, any(q.endswith('-dlq') for q in queues))\n")
    done = subprocess.run([sys.executable, "-c", code], env=dev.env, cwd=project, capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout) == (0, "True True\n"), done.stderr
    assert " AWS_DEFAULT_REGION " in next(line for line in dev.banner if line.startswith("unset "))


def test_result_json_of_a_failed_run_keeps_its_details_and_a_timed_out_wait_says_so(dev: Dev) -> None:
    """`result --json` gave a failed run's one-line error only (its type, step, cause and traceback were in
    `describe --json` alone); `result --wait 1` on a run still waiting hinted `--wait SECONDS`, given already."""
    failed = _start(dev, "clitest.fail", '["no filters"]', "--wait", "30")
    waiting = _start(dev, "clitest.waits", '["hook", "result-wait"]')
    result_json, started_json, waited = parallel(
        dev, ("result", failed, "--json"), ("start", "clitest.fail", '["no bags"]', "--wait", "30", "--json"),
        ("result", waiting, "--wait", "1"))
    for document, why in ((json.loads(result_json.out), "no filters"), (json.loads(started_json.out), "no bags")):
        details = document["errorDetails"]
        assert document["status"] == "failed"
        assert (details["name"], details["stepName"]) == ("StepError", "clitest.boom")
        assert (details["cause"]["type"], details["cause"]["message"]) == ("ValueError", why), details
        assert "raise ValueError(why)" in details["cause"]["stack"]
    assert waited.one_line_error(1) == (f"awsworld result: run {waiting} is still running after 1 s: no result yet "
                                        f"(hint: `awsworld describe {waiting}` says what it waits on)")
    assert dev("cancel", waiting).code == 0


def test_describe_of_a_cancelled_run_shows_its_open_step_cancelled_not_running(dev: Dev, project: Path) -> None:
    """A step running when its run was cancelled is stopped, and nothing of it is recorded after the run's end, so
    the World keeps it `running`: describe read as if it still ran. It reads `cancelled`, in the text and in
    `--json` alike, as `Run.steps()` says (`_timeline.step_status`: one rule)."""
    gate = project / "opened-after-the-cancel"
    run_id = _start(dev, "clitest.waits", json.dumps(["step", str(gate)]))
    # (running, not only waited on: a step declared and not started yet when the cancel lands is another case)
    _describe_until(dev, run_id, lambda d: [w["kind"] for w in d["waitingOn"]] == ["step"]
                    and [s["status"] for s in d["steps"]["list"]] == ["running"])
    assert dev("cancel", run_id, "--reason", "on-call").code == 0
    text = dev("describe", run_id).out.splitlines()
    assert "steps     1 (1 cancelled)" in text, "\n".join(text)  # (whole: a list in the message is cut short)
    assert "          (cancelled: open when the run ended, stopped then; nothing of them is recorded after)" in text
    assert any(re.fullmatch(r"  clitest\.gate +cancelled +attempt 1", line) for line in text), text
    assert dev.json("describe", run_id)["steps"]["list"][0]["status"] == "cancelled"
    # The body goes on until its check finds the run ended (every AWSWORLD_STEP_CHECK_SECONDS, 5 s): the module's
    # dev, stopped next when this test runs last, waited that long in its stop's grace. Its gate ends it now.
    gate.write_text("")
