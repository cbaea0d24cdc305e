"""A stop of ``awsworld serve`` and ``awsworld ui`` is the Ctrl-C of any command: "stopped", exit 130
(``cli/exit_codes.STOPPED``), by Ctrl-C or SIGTERM, with nothing under way and in the moment the server starts.
``serve`` exited 0 when it cut no request off, so a script could not tell a stopped server from one that
finished; and a stop in the moment uvicorn started made it fail, ``unexpected IndexError``, exit 1 (it read its
port back from uvicorn's servers, closed by then: ``_http/listen.Listening``). Each as a process, as a user runs
it. A stop that cuts a request off: ``tests/cli/test_serve_cli.py``, ``tests/cli/test_ctrl_c_blocked.py``."""

from __future__ import annotations

import signal
import socket
import subprocess
import time

import pytest

from .test_cli import _clean_env, ended_within
from .test_ctrl_c_blocked import PROMPTLY, SilentEndpoint, _env, _spawn, silent  # noqa: F401  (a fixture)

STOPS = pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _until(lines: list[str], process: subprocess.Popen[str], text: str) -> None:
    deadline = time.monotonic() + 60
    while not any(text in line for line in lines):
        assert process.poll() is None and time.monotonic() < deadline, "".join(lines)
        time.sleep(0.02)


def _said_after_the_banner(lines: list[str]) -> list[str]:
    time.sleep(0.2)  # (the reader takes the last lines)
    return [line.rstrip("\n") for line in lines[1:]]


@STOPS
@pytest.mark.parametrize("command", [["serve", "--world", "memory"], ["ui"]], ids=["serve", "ui"])
def test_a_server_stopped_with_nothing_under_way_says_stopped_and_exits_130(
        command: list[str], stop: signal.Signals, silent: SilentEndpoint, tmp_path) -> None:  # noqa: F811
    process, lines = _spawn([*command, "--port", str(_free_port())], _env(silent), tmp_path)
    _until(lines, process, "Ctrl-C stops")
    process.send_signal(stop)
    code = ended_within(process, PROMPTLY, lines, f"still running {PROMPTLY} s after the stop")
    assert (code, _said_after_the_banner(lines)) == (130, ["", "stopped"]), "".join(lines)
    assert not silent.requested.is_set(), "no request was made: nothing was under way"


@STOPS
def test_a_stop_in_the_moment_serve_starts_is_a_stop_too(stop: signal.Signals, tmp_path) -> None:
    """The stop comes as soon as the port takes a connection (``listening`` binds it before uvicorn starts): in
    3 of 4 tries on a quiet machine, inside the start that failed with an ``IndexError``."""
    for _ in range(3):
        port = _free_port()
        process, lines = _spawn(["serve", "--world", "memory", "--port", str(port)], _clean_env(), tmp_path)
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, "".join(lines)
                time.sleep(0.005)
        process.send_signal(stop)
        code = ended_within(process, PROMPTLY, lines, f"still running {PROMPTLY} s after the stop")
        time.sleep(0.2)  # (the reader takes the last lines)
        output = "".join(lines)
        assert code == 130 and output.rstrip().endswith("stopped"), output
        assert "unexpected" not in output and "Traceback" not in output, output
