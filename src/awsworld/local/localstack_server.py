"""LocalStack's own SQS, S3 and KMS providers, started as a child process bound to 127.0.0.1.

LocalStack (the PyPI package ``localstack-core``) is a second, independent emulator of SQS and S3: its providers
are its own code, not moto's, so running the AWS World on it as well catches what one emulator gets wrong. It
runs here in host mode (no Docker, no account) and needs Python 3.13 in a virtual environment of its own, with
the pins in ``localstack-requirements.txt`` beside this file; ``.ci/run`` makes ``.venv-localstack`` from it.

LocalStack reads its settings from the environment, and several defaults are wrong for a sandboxed test
machine, so the child gets them set explicitly (``environment()``): it must believe it is *not* in a container
(a Docker marker file makes it bind every interface, write under system directories and probe Docker bridge
addresses), serve on loopback only through hypercorn (the default server ignores the host), resolve no DNS,
send no analytics and download nothing. ``localstack_launch.py`` runs it and exits when this process's pipe
to its stdin closes, so a LocalStack never outlives the process that started it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from ..settings import SETTINGS, Settings
from .emulator_process import HOST, EmulatorProcess

log = logging.getLogger("awsworld.local.localstack")

ENV_PYTHON = Settings.localstack_python.env
VENV = ".venv-localstack"
SERVICES = ("sqs", "s3", "kms")
REQUIREMENTS = Path(__file__).with_name("localstack-requirements.txt")
LAUNCHER = Path(__file__).with_name("localstack_launch.py")

INSTALL_HINT = (
    f"LocalStack was not found. It needs Python 3.13 in a virtual environment of its own: "
    f"`python3.13 -m venv {VENV} && {VENV}/bin/pip install -r {REQUIREMENTS}` at the repository root "
    f"(`bash .ci/run` does this), or set {ENV_PYTHON} to the python of a venv that has it."
)


class LocalStackError(RuntimeError):
    pass


def _has_localstack(python: Path) -> bool:
    return python.is_file() and any((python.parent.parent / "lib").glob("python3*/site-packages/localstack"))


def find_python(start: Path | None = None) -> Path:
    """The interpreter of the venv holding ``localstack-core``: ``$AWSWORLD_LOCALSTACK_PYTHON``, else the nearest
    ``.venv-localstack/bin/python`` above ``start`` (default: the working directory) or above this package."""
    configured = SETTINGS.localstack_python
    if configured is not None:
        python = configured
        if not python.is_file():
            raise LocalStackError(f"{ENV_PYTHON}={configured} is not a file")
        return python
    roots = [Path(start) if start else Path.cwd(), Path(__file__).resolve().parent]
    for root in roots:
        for directory in [root.resolve(), *root.resolve().parents]:
            python = directory / VENV / "bin" / "python"
            if _has_localstack(python):
                return python
    raise LocalStackError(INSTALL_HINT)


def free_port() -> int:
    """A port nothing listens on now (LocalStack takes its port as a setting, so it is chosen before)."""
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def environment(port: int, root: Path, services: tuple[str, ...] = SERVICES) -> dict[str, str]:
    """The settings LocalStack runs with: loopback only, its files under ``root``, nothing sent off the
    machine. Never start it without ``OVERRIDE_IN_DOCKER=0`` and ``DOCKER_BRIDGE_IP``: see the module doc."""
    listen = f"{HOST}:{port}"
    return {
        "OVERRIDE_IN_DOCKER": "0",
        "DOCKER_BRIDGE_IP": HOST,
        "GATEWAY_SERVER": "hypercorn",
        "GATEWAY_LISTEN": listen,
        "LOCALSTACK_HOST": listen,  # the host in the queue URLs it returns
        "SERVICES": ",".join(services),
        "EAGER_SERVICE_LOADING": "1",  # providers start before ready, not on a test's first request
        "DNS_ADDRESS": "0",
        "SQS_ENDPOINT_STRATEGY": "path",
        "DISABLE_EVENTS": "1",
        "SKIP_SSL_CERT_DOWNLOAD": "1",
        "FILESYSTEM_ROOT": str(root),
        "LS_LOG": "warn",
    }


class LocalStack(EmulatorProcess):
    """``start()`` / ``stop()`` one LocalStack with SQS, S3 and KMS; ``endpoint_url`` once started."""

    label = "LocalStack"
    error = LocalStackError
    log = log

    def __init__(self, python: Path | None = None, *, startup_timeout: float = 90.0,
                 services: tuple[str, ...] = SERVICES) -> None:
        super().__init__(startup_timeout=startup_timeout)
        self._python = python
        self.services = services
        self._root: tempfile.TemporaryDirectory[str] | None = None

    def start(self) -> LocalStack:
        if self._process is not None:
            return self
        python = self._python or find_python()
        self._root = tempfile.TemporaryDirectory(prefix="awsworld-localstack-")
        root = Path(self._root.name)
        port = free_port()
        env = {**os.environ, **environment(port, root, self.services)}
        self._launch([str(python), str(LAUNCHER)], env=env, cwd=root)
        try:
            self._wait_ready(port)
        except LocalStackError:
            self.stop()
            raise
        self._port = port
        return self

    def _wait_ready(self, port: int) -> None:
        """Until ``/_localstack/health`` says every service runs; a clear error if the process ends first or
        the time runs out."""
        deadline = time.monotonic() + self.startup_timeout
        url = f"http://{HOST}:{port}/_localstack/health"
        process = self._process
        assert process is not None
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise self._failure(f"LocalStack exited with status {process.returncode} before it was ready")
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    states = json.loads(response.read()).get("services", {})
                if all(states.get(service) == "running" for service in self.services):
                    return
            except (OSError, ValueError, urllib.error.URLError):
                pass
            time.sleep(0.1)
        raise self._failure(f"LocalStack did not start within {self.startup_timeout:.0f}s")

    # LocalStack runs in its own process group (a new session): SIGTERM and SIGKILL go to the whole group.
    def _terminate(self, process: subprocess.Popen[str]) -> None:
        _signal_group(process.pid, signal.SIGTERM)

    def _kill(self, process: subprocess.Popen[str]) -> None:
        _signal_group(process.pid, signal.SIGKILL)

    def stop(self) -> None:
        """SIGTERM to LocalStack's process group, SIGKILL after ``STOP_GRACE_SECONDS``; then its temporary root
        is removed."""
        super().stop()
        root, self._root = self._root, None
        if root is not None:
            shutil.rmtree(root.name, ignore_errors=True)
            root.cleanup()


def _signal_group(pid: int, sig: signal.Signals) -> None:
    """Signal the group led by ``pid`` (the child this module started), or the child alone if it has none."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        return
    except PermissionError:
        os.kill(pid, sig)
