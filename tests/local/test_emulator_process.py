"""What the emulator-process shell (``local/emulator_process.py``) says when a child emulator fails: DynamoDB Local
that never prints its ready line, LocalStack whose process ends before it is ready. Both errors name the command
and show the tail of what the process printed, and leave nothing running."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from awsworld.local import DynamoDBLocal, DynamoDBLocalError, LocalStack, LocalStackError


def test_dynamodb_local_that_never_gets_ready_is_reported_with_its_output() -> None:
    # DynamoDB Local refuses an option it does not know: it prints why and exits without its READY line.
    server = DynamoDBLocal(extra_args=("-notAnOption",), startup_timeout=60)
    with pytest.raises(DynamoDBLocalError) as raised:
        server.start()
    message = str(raised.value)
    assert message.startswith("DynamoDB Local did not start within 60s.\ncommand: ")
    assert "-notAnOption" in message.split("\noutput:\n")[0]  # the command, as run
    tail = message.split("\noutput:\n", 1)[1]
    assert "notAnOption" in tail, "the output tail names what DynamoDB Local refused"
    assert not server.running and server.pid is None


def test_localstack_whose_process_ends_before_it_is_ready_is_reported_with_its_output(tmp_path: Path) -> None:
    # An interpreter without localstack-core: the launcher starts, cannot import LocalStack and exits with 1.
    server = LocalStack(python=Path(sys.executable), startup_timeout=60)
    with pytest.raises(LocalStackError) as raised:
        server.start()
    message = str(raised.value)
    assert message.startswith("LocalStack exited with status 1 before it was ready.\ncommand: "
                              f"{sys.executable} ")
    assert "No module named 'localstack'" in message.split("\noutput:\n", 1)[1]
    assert not server.running and server.pid is None


class SlowReader(LocalStack):
    """LocalStack whose output reader lags behind the process (as a loaded machine's thread may)."""

    def _line(self, line: str) -> bool:
        time.sleep(0.2)
        return super()._line(line)


def test_a_process_that_ended_is_reported_with_its_whole_output_however_far_behind_its_reader_is() -> None:
    # The ended process is seen before its reader reached the end of its output: the failure still names the error.
    server = SlowReader(python=Path(sys.executable), startup_timeout=60)
    with pytest.raises(LocalStackError) as raised:
        server.start()
    assert "No module named 'localstack'" in str(raised.value).split("\noutput:\n", 1)[1]
