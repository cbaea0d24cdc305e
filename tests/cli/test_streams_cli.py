"""``awsworld streams RUN NAME`` on a long stream, counted: the command in this process (as
``tests/deploy/test_iam_trace.py`` runs the operator's commands), every World it opens counting its requests,
against a stream on the embedded emulator. The printing itself is ``test_cli.py``'s, on ``awsworld dev``."""

from __future__ import annotations

import asyncio
import contextlib
import io

import pytest

from awsworld import aws as aws_package
from awsworld.aws import AWSConfig, AWSWorld, RequestStats
from awsworld.cli import main as awsworld_cli
from awsworld.cli.dev import environment
from awsworld.local import LocalAWS

CHUNKS = 2500


async def _printed(*argv: str) -> str:
    """``awsworld ARGV``'s stdout (on a thread: a command runs its own event loop)."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")  # (streams writes bytes to .buffer)

    def run() -> int:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            return awsworld_cli(list(argv))

    assert await asyncio.to_thread(run) == 0
    out.flush()
    return out.buffer.getvalue().decode()  # type: ignore[attr-defined]


async def test_a_long_stream_is_read_in_pages_of_a_thousand_chunks_from_the_index_asked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """2,500 chunks print in 3 pages (one S3 read each), not 25: the command asked for pages of 100 chunks, so
    10,000 took 100 pages and 300 requests. ``--from`` 2,400 and ``--from -100`` read the one page from there;
    before, the command read every page from the head and dropped the chunks before the index."""
    stats = RequestStats()

    class Counted(AWSWorld):  # the World the command opens (cli.output.remote), counting into `stats`
        def __init__(self, config: AWSConfig | None = None) -> None:
            super().__init__(config)
            self.clients.stats = stats

    async with LocalAWS() as local:
        created = await local.world.events.create(None, {"eventType": "run_created",
                                                         "eventData": {"workflowName": "streams.long"}})
        assert created.run is not None
        run_id = created.run.run_id
        lines = [f"line {i}\n" for i in range(CHUNKS)]
        await local.world.streams.write_multi(run_id, "log", lines)
        for name, value in environment(local.config, "http://127.0.0.1:1/webhooks/").items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("AWSWORLD_MODULES", raising=False)
        monkeypatch.setattr(aws_package, "AWSWorld", Counted)

        assert await _printed("streams", run_id, "log") == "".join(lines)
        assert stats.requests["s3.GetObject"] == 3
        for start in ("2400", "-100"):
            stats.reset()
            assert await _printed("streams", run_id, "log", "--from", start) == "".join(lines[2400:]), start
            assert stats.requests["s3.GetObject"] == 1, (start, stats.requests)
