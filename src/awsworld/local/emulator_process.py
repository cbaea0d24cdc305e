"""The shell every child emulator process shares: DynamoDB Local and LocalStack run the same way.

Each is a program of its own (Java, another Python) started as a child bound to 127.0.0.1 and kept tied to this
process: its stdin stays an open pipe that is never written, and its launcher exits when it closes, so the
emulator dies with this process however this process ends. Its output is read by a thread into a short tail
(``OUTPUT_TAIL`` lines, logged at debug), so that an emulator that dies or never gets ready is reported with
what it printed. Subclasses say how to launch (``start``: their command, environment and way of waiting until
ready) and how to end it (``_terminate`` / ``_kill``); this class keeps the port, the process, the tail and
the stop sequence.
"""

from __future__ import annotations

import collections
import logging
import subprocess
import threading
from pathlib import Path
from typing import ClassVar, Self

HOST = "127.0.0.1"
OUTPUT_TAIL = 50
STOP_GRACE_SECONDS = 10.0


class EmulatorProcess:
    """``start()`` / ``stop()`` one child emulator; ``endpoint_url`` once started (``with`` does both)."""

    label: ClassVar[str]
    """What the emulator is called in messages (``DynamoDB Local``)."""
    error: ClassVar[type[RuntimeError]]
    """What a failure to start raises."""
    log: ClassVar[logging.Logger]

    def __init__(self, *, startup_timeout: float) -> None:
        self.startup_timeout = startup_timeout
        self._process: subprocess.Popen[str] | None = None
        self._port: int | None = None
        self._output: collections.deque[str] = collections.deque(maxlen=OUTPUT_TAIL)
        self._reader: threading.Thread | None = None
        self._command: list[str] = []

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError(f"{self.label} is not running: call start() first")
        return self._port

    @property
    def endpoint_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None and self._port is not None

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def start(self) -> Self:
        raise NotImplementedError

    def _launch(self, command: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
        """Start ``command`` with its output read into the tail. stdin stays an open pipe that is never written:
        the launcher ends the emulator when it closes."""
        self._command = command
        self._process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd,
            text=True, bufsize=1, start_new_session=True,
        )
        name = "awsworld-" + self.label.lower().replace(" ", "-")
        self._reader = threading.Thread(target=self._read_output, name=name, daemon=True)
        self._reader.start()

    def _read_output(self) -> None:
        process = self._process
        assert process is not None and process.stdout is not None
        for line in process.stdout:
            line = line.rstrip()
            self._output.append(line)
            if not self._line(line):
                self.log.debug("%s", line)
        self._ended()

    def _line(self, line: str) -> bool:
        """A subclass's look at each line of output (a readiness line, say): True when it took the line, which
        is then not logged."""
        return False

    def _ended(self) -> None:
        """The output ended (the process is gone)."""

    def _failure(self, message: str) -> RuntimeError:
        """``message`` with the command and the output tail, as ``error``. When the process has ended, its reader
        is given time to reach the end of the output first: the lines that say why it ended (an import error) come
        last, and a failure built at once under load once carried an empty tail."""
        process, reader = self._process, self._reader
        if process is not None and process.poll() is not None and reader is not None:
            reader.join(timeout=5)
        output = "\n".join(self._output)
        return self.error(f"{message}.\ncommand: {' '.join(self._command)}\noutput:\n{output}")

    def _terminate(self, process: subprocess.Popen[str]) -> None:
        process.terminate()

    def _kill(self, process: subprocess.Popen[str]) -> None:
        process.kill()

    def stop(self) -> None:
        """End the process (``_terminate``, then ``_kill`` after ``STOP_GRACE_SECONDS``), wait for the reader
        to reach the end of its output and close the pipes."""
        process, self._process = self._process, None
        self._port = None
        if process is None:
            return
        if process.poll() is None:
            self._terminate(process)
            try:
                process.wait(timeout=STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                self.log.warning("%s (pid %d) ignored SIGTERM for %.0fs: killing it", self.label, process.pid,
                                 STOP_GRACE_SECONDS)
                self._kill(process)
                process.wait(timeout=10)
        if self._reader is not None:
            self._reader.join(timeout=5)  # it reaches the end of the output now that the process is gone
            self._reader = None
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
