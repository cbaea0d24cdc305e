"""Ctrl-C of an ``awsworld`` command waiting on an endpoint that took the connection and never answers: the command
says "stopped" and its process ends at once, exit 130 (``cli/__init__.py``'s ``_end_now``). It said "stopped" and
then stayed, the interpreter's exit joining the World's request thread still in botocore's read (464 s once, until
killed). ``ui`` and ``serve`` stopped during such a request end after their grace for requests under way
(``_http/listen.GRACEFUL_SECONDS``). Each command as a process, as a user runs it; the endpoint is a socket here
that accepts and reads, and never writes. And a ``cancel`` stopped while its write waits (a proxy holds it, before
or after the World has it): the run is cancelled or not, and ``cancel`` again is safe."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from awsworld import sleep, workflow
from awsworld._http.listen import GRACEFUL_SECONDS
from awsworld.aws import AWSWorld
from awsworld.client.client import Client

from .test_cli import _clean_env, ended_within
from .test_dev_ctrl_c_start import _preexec

PROMPTLY = 3.0
"""Seconds from the Ctrl-C to the process's end: it ends at once (0.01 s here); a loaded machine's scheduling is
what the rest allows for. Before, it did not end within 300 s."""


class Endpoint:
    """A TCP server on 127.0.0.1 that serves each connection on a thread of its own (``_serve``), and keeps it
    open until ``close``."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self.connections: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:  # closed
                return
            self.connections.append(connection)
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self._listener.close()
        for connection in self.connections:
            connection.close()


class SilentEndpoint(Endpoint):
    """Accepts every connection, reads what comes, and never answers."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        super().__init__()

    def _serve(self, connection: socket.socket) -> None:
        if connection.recv(65536):
            self.requested.set()

    def all_closed_by_the_client(self, timeout: float = 5.0) -> bool:
        """Whether every connection was closed from the other end (its process gone: no thread left reading)."""
        deadline = time.monotonic() + timeout
        for connection in self.connections:
            connection.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                while connection.recv(65536):
                    pass
            except (TimeoutError, OSError):
                return False
        return True


@pytest.fixture
def silent() -> Iterator[SilentEndpoint]:
    endpoint = SilentEndpoint()
    try:
        yield endpoint
    finally:
        endpoint.close()


def _env(endpoint: SilentEndpoint) -> dict[str, str]:
    return _clean_env() | {
        "AWS_ENDPOINT_URL": endpoint.url, "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test", "AWSWORLD_TABLE": "table", "AWSWORLD_BUCKET": "bucket",
        "AWSWORLD_QUEUE_URL": f"{endpoint.url}/000000000000/queue", "PYTHONFAULTHANDLER": "1"}


def _spawn(args: list[str], env: dict[str, str], cwd: Path) -> tuple[subprocess.Popen[str], list[str]]:
    process = subprocess.Popen([sys.executable, "-m", "awsworld.cli", *args], cwd=cwd, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               preexec_fn=_preexec())
    lines: list[str] = []
    assert process.stdout is not None
    stdout = process.stdout
    threading.Thread(target=lambda: lines.extend(iter(stdout.readline, "")), daemon=True).start()
    return process, lines


def _children(pid: int) -> list[str]:
    """The processes ``pid`` started that are still there (Linux's ``/proc``)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += (task / "children").read_text().split()
    return found


def _stopped_while_blocked(process: subprocess.Popen[str], lines: list[str], silent: SilentEndpoint,
                           within: float, stop: signal.Signals = signal.SIGINT) -> tuple[int, float]:
    """SIGINT (or ``stop``) once the endpoint holds the command's request (and a moment later, so it waits in the
    read); its exit code and how long it took to end."""
    assert silent.requested.wait(60), "".join(lines)
    time.sleep(0.5)
    assert process.poll() is None, "".join(lines)
    if sys.platform.startswith("linux"):
        assert _children(process.pid) == [], "the command started a process"
    sent = time.monotonic()
    process.send_signal(stop)
    code = ended_within(process, within, lines, f"still running {within} s after Ctrl-C")
    return code, time.monotonic() - sent


@pytest.mark.parametrize("command", [["runs"], ["describe", "wrun_01K0000000000000000000000Z"],
                                     ["cancel", "wrun_01K0000000000000000000000Z"]], ids=lambda c: c[0])
def test_ctrl_c_of_a_command_waiting_on_a_silent_endpoint_ends_it_at_once(
        command: list[str], silent: SilentEndpoint, tmp_path: Path) -> None:
    process, lines = _spawn(command, _env(silent), tmp_path)
    code, took = _stopped_while_blocked(process, lines, silent, PROMPTLY)
    time.sleep(0.2)  # (the reader takes the last lines)
    output = "".join(lines)
    assert code == 130, output
    assert output.rstrip().endswith("stopped") and "Traceback" not in output, output
    assert took < PROMPTLY
    assert silent.all_closed_by_the_client(), "a connection of the command's is still open"


@pytest.mark.parametrize(("command", "path", "exit_code"), [
    (["ui"], "/api/runs", 130),
    (["serve"], "/v1/runs", 130),  # (and "stopped", as with nothing under way: tests/cli/test_server_stop.py)
], ids=["ui", "serve"])
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_of_a_server_during_a_request_to_a_silent_endpoint_ends_it_after_its_grace(
        command: list[str], path: str, exit_code: int, stop: signal.Signals, silent: SilentEndpoint,
        tmp_path: Path) -> None:
    """SIGTERM is a Ctrl-C for both servers (``_http/listen.sigterm_as_ctrl_c``): it ended them with exit -15."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process, lines = _spawn([*command, "--port", str(port)], _env(silent), tmp_path)
    answers: list[object] = []

    def ask() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                answers.append(urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=60).status)
                return
            except urllib.error.URLError as error:
                if isinstance(error.reason, ConnectionRefusedError):
                    time.sleep(0.1)
                    continue
                answers.append(error)
                return
            except OSError as error:
                answers.append(error)
                return

    threading.Thread(target=ask, daemon=True).start()
    code, took = _stopped_while_blocked(process, lines, silent, GRACEFUL_SECONDS + PROMPTLY, stop)
    time.sleep(0.2)  # (the reader takes the last lines)
    output = "".join(lines)
    assert code == exit_code, output
    assert took < GRACEFUL_SECONDS + PROMPTLY
    # One line for the request cut off, none of uvicorn's (its "Cancel 1 running task(s)" and a traceback).
    assert f"awsworld {command[0]}: stopped; 1 request(s) still under way after {GRACEFUL_SECONDS} s were cut off" \
        in output, output
    assert "Traceback" not in output and "ERROR" not in output, output
    assert silent.all_closed_by_the_client(), "a connection of the command's is still open"


EXIT_HANDLER = """
import atexit, sys
atexit.register(lambda: print("exit handlers ran", flush=True))
sys.argv = ["awsworld", *sys.argv[1:]]
from awsworld.cli import run
run()
"""


def test_a_command_that_ends_with_no_request_left_takes_the_ordinary_exit(tmp_path: Path) -> None:
    """Nothing is left running: the interpreter's own exit, with its exit handlers (a refused connection fails
    the command at once: exit 1)."""
    env = _clean_env() | {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_REGION": "us-east-1",
                          "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWSWORLD_TABLE": "table",
                          "AWSWORLD_BUCKET": "bucket", "AWSWORLD_QUEUE_URL": "http://127.0.0.1:9/q"}
    done = subprocess.run([sys.executable, "-c", EXIT_HANDLER, "runs"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1, done
    assert done.stdout.strip() == "exit handlers ran", done


def test_the_console_script_is_run() -> None:
    """The ``awsworld`` script ends its process as ``python -m awsworld.cli`` does (the tests above): by ``run``."""
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert pyproject["project"]["scripts"]["awsworld"] == "awsworld.cli:run"


WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})


class WriteHoldingProxy(Endpoint):
    """An HTTP proxy in front of ``upstream``'s DynamoDB: reads pass, a write is held and never answered;
    ``committed``: the write is passed on first (the World has it, the command never hears so)."""

    def __init__(self, upstream: str, *, committed: bool) -> None:
        self._upstream = upstream.removeprefix("http://")
        self._committed = committed
        self.held = threading.Event()
        super().__init__()

    def _serve(self, connection: socket.socket) -> None:
        import http.client

        pending = b""
        while True:
            while b"\r\n\r\n" not in pending:
                if not (chunk := connection.recv(65536)):
                    return
                pending += chunk
            head, pending = pending.split(b"\r\n\r\n", 1)
            request_line, *header_lines = head.decode("latin-1").split("\r\n")
            method, path, _ = request_line.split(" ", 2)
            headers = dict(line.split(":", 1) for line in header_lines)
            headers = {name.strip(): value.strip() for name, value in headers.items()}
            length = int(next((v for k, v in headers.items() if k.lower() == "content-length"), "0"))
            while len(pending) < length:
                if not (chunk := connection.recv(65536)):
                    return
                pending += chunk
            body, pending = pending[:length], pending[length:]
            target = next((v for k, v in headers.items() if k.lower() == "x-amz-target"), "")
            write = target.rsplit(".", 1)[-1] in WRITES
            answer = b""
            if not write or self._committed:
                upstream = http.client.HTTPConnection(self._upstream, timeout=30)
                upstream.request(method, path, body, headers)
                response = upstream.getresponse()
                data = response.read()
                kept = [(k, v) for k, v in response.getheaders()
                        if k.lower() not in ("content-length", "transfer-encoding", "connection")]
                answer = (f"HTTP/1.1 {response.status} {response.reason}\r\n"
                          + "".join(f"{k}: {v}\r\n" for k, v in kept)
                          + f"Content-Length: {len(data)}\r\n\r\n").encode("latin-1") + data
                upstream.close()
            if write:
                self.held.set()
                return  # (never answered; the connection stays open in ``connections``)
            connection.sendall(answer)


@workflow(name="ctrlcblocked.waits")
async def waits_a_day() -> None:
    await sleep("1d")


@pytest.mark.parametrize("committed", [False, True], ids=["write-not-made", "write-made-unanswered"])
async def test_a_cancel_stopped_during_its_write_leaves_the_run_whole_and_a_retry_is_safe(
        committed: bool, moto_world: AWSWorld, tmp_path: Path) -> None:
    """``awsworld cancel`` stopped while its write waits: the run is cancelled or not (as the World had the write),
    never half; ``cancel`` again cancels it, or says it is already cancelled, and the run has one
    ``run_cancelled``."""
    run = await Client(moto_world).start(waits_a_day)
    config = moto_world.config
    assert config.endpoint_url is not None and config.queue_url is not None
    proxy = WriteHoldingProxy(config.endpoint_url, committed=committed)
    env = _clean_env() | {
        "AWS_ENDPOINT_URL": config.endpoint_url, "AWS_ENDPOINT_URL_DYNAMODB": proxy.url,
        "AWS_REGION": config.region_name or "us-east-1", "AWS_ACCESS_KEY_ID": "awsworldlocal",
        "AWS_SECRET_ACCESS_KEY": "local", "AWSWORLD_TABLE": config.table_name, "AWSWORLD_BUCKET": config.bucket_name,
        "AWSWORLD_QUEUE_URL": config.queue_url, "PYTHONFAULTHANDLER": "1"}
    try:
        process, lines = _spawn(["cancel", run.run_id], env, tmp_path)
        assert await asyncio.to_thread(proxy.held.wait, 60), "".join(lines)
        await asyncio.sleep(0.3)
        sent = time.monotonic()
        process.send_signal(signal.SIGINT)
        code = await asyncio.to_thread(ended_within, process, PROMPTLY, lines, "still running after Ctrl-C")
        assert code == 130 and time.monotonic() - sent < PROMPTLY, "".join(lines)
    finally:
        proxy.close()
    status = (await moto_world.runs.get(run.run_id, resolve_data="none")).status
    assert status == "cancelled" if committed else status in ("pending", "running"), status
    again = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "awsworld.cli", "cancel", run.run_id], cwd=tmp_path,
        env=env | {"AWS_ENDPOINT_URL_DYNAMODB": config.endpoint_url}, capture_output=True, text=True, timeout=60)
    if committed:
        assert again.returncode == 1 and "already cancelled" in again.stderr, again
    else:
        assert again.returncode == 0 and f"cancelled {run.run_id}" in again.stdout, again
    assert (await moto_world.runs.get(run.run_id, resolve_data="none")).status == "cancelled"
    events = await moto_world.events.list(run.run_id)
    assert [event.event_type for event in events.data].count("run_cancelled") == 1
