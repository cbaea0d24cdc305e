"""``awsworld dev --ui`` and ``awsworld ui`` as processes on the embedded emulator: the demo's order run, seen
through both (the second opens its own ``AWSWorld`` from dev's export lines, as an operator's shell would)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tied import tied  # tests/tied.py (tests/ is on sys.path)

pytest.importorskip("moto")

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS", "AWSWORLD"))}
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _cli(*args: str, env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "awsworld.cli", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _wait_http(url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def test_dev_ui_and_ui_show_the_demo_run(tmp_path: Path, processes: list[subprocess.Popen[str]]) -> None:
    dev_port, ui_port = _free_port(), _free_port()
    dev = subprocess.Popen([sys.executable, "-m", "awsworld.cli", "dev", "awsworld.examples.order", "--ui",
                            "--ui-port", str(dev_port)], cwd=tmp_path, env=_env(), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, preexec_fn=tied())
    processes.append(dev)
    assert dev.stdout is not None
    banner: list[str] = []
    while not any(line.startswith("ui: ") for line in banner):
        line = dev.stdout.readline()
        assert line, "awsworld dev exited:\n" + "".join(banner)
        banner.append(line)
    assert f"ui: http://127.0.0.1:{dev_port}/\n" in banner
    env = _env()
    for line in banner:
        match = re.fullmatch(r"export (\w+)=(\S+)\n", line)
        if match:
            env[match.group(1)] = match.group(2).strip("'")
    run_id = _cli("start", "order.process", '["A-17", ["kettle"], 1.5]', env=env, cwd=tmp_path).strip()
    deadline = time.monotonic() + 60
    while "delivered" not in (out := subprocess.run(
            [sys.executable, "-m", "awsworld.cli", "resume", "address:A-17", '{"address": "1 Main St"}'],
            env=env, cwd=tmp_path, capture_output=True, text=True).stdout):
        assert time.monotonic() < deadline, out
        time.sleep(0.5)
    _cli("result", run_id, "--wait", "60", env=env, cwd=tmp_path)

    ui = subprocess.Popen([sys.executable, "-m", "awsworld.cli", "ui", "--port", str(ui_port)], cwd=tmp_path, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=tied())
    processes.append(ui)
    _wait_http(f"http://127.0.0.1:{ui_port}/")
    for port in (dev_port, ui_port):
        page = httpx.get(f"http://127.0.0.1:{port}/runs/{run_id}", timeout=10)
        assert page.status_code == 200
        assert page.text.count("data-kind='step'") == 4  # reserve, charge (retried), pack, ship
        assert "payment API timed out" in page.text and "data-kind='wait'" in page.text
        assert "address:A-17" in page.text
        assert httpx.post(f"http://127.0.0.1:{port}/api/runs/{run_id}/cancel", timeout=10).status_code == 403
        # A workflow filter with a typo listed "no runs", as a workflow without runs does: it says which it is.
        typo = httpx.get(f"http://127.0.0.1:{port}/", params={"workflow": "order.proces"}, timeout=10).text
        assert "no runs (note: no workflow named &#x27;order.proces&#x27; is registered here; did you mean " \
            "&#x27;order.process&#x27;?)" in typo, typo[-600:]
