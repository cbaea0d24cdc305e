"""What the CLI says about runs is true: ``awsworld runs --status`` lists only runs whose status passes it (the index
it reads may lag the runs), ``hooks`` lists the hooks a run's code made (not the engine's own hook for a child's
outcome), and ``start`` reads ARGS from a file. Each command runs as a process against an ``awsworld dev`` process,
as an operator runs them."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .test_cli import Dev, project_of, serving

WORKFLOWS = '''
from awsworld import create_hook, workflow


@workflow(name="clitest.size")
async def size(value: object, label: str = "") -> dict:
    return {"chars": len(str(value)), "label": label}


@workflow(name="clitest.child")
async def child(n: int) -> int:
    async with create_hook(token=f"why-child:{n}") as hook:
        await hook
    return n


@workflow(name="clitest.parent")
async def parent(n: int) -> int:
    async with create_hook(token=f"why-parent:{n}") as hook:
        await hook
    return await child(n) + 1
'''


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return project_of(tmp_path_factory, "why", WORKFLOWS)


@pytest.fixture(scope="module")
def dev(project: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dev]:
    yield from serving(project, tmp_path_factory, "why")


def _until(check: Any, what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"{what} within {timeout} s")


LAG_INDEX = """
import os, sys
import boto3
from awsworld.aws.keys import run_key
key = {name: {"S": value} for name, value in run_key(sys.argv[1]).items()}
boto3.client("dynamodb").update_item(TableName=os.environ["AWSWORLD_TABLE"], Key=key,
                                     UpdateExpression="SET gsiStatus = :s",
                                     ExpressionAttributeValues={":s": {"S": sys.argv[2]}})
"""


def test_runs_lists_under_a_status_filter_only_runs_whose_status_passes_it(dev: Dev, project: Path) -> None:
    """On AWS the run listing reads an index (``byStatus``, eventually consistent), then the runs' items: a run
    that completed while the index still had it ``running`` was listed by ``runs --status running``, its row
    saying ``completed`` (and ``deployments`` counted it unfinished). The lag is made here as the index would show
    it: the run's index attribute set back to ``running`` on the emulator, its item ``completed``."""
    done = dev.json("start", "clitest.size", '"x"', "--wait", "30")
    assert done["status"] == "completed", done
    lagged = subprocess.run([sys.executable, "-c", LAG_INDEX, done["runId"], "running"], env=dev.env, cwd=project,
                            capture_output=True, text=True, timeout=60)
    assert lagged.returncode == 0, lagged.stderr
    running = dev.json("runs", "--status", "running", "--limit", "100")
    assert done["runId"] not in [r["runId"] for r in running], running
    assert done["runId"] not in dev("runs", "--status", "running").out
    # Without a filter it is listed as it is.
    assert {r["runId"]: r["status"] for r in dev.json("runs", "--limit", "100")}[done["runId"]] == "completed"
    unfinished = [run for d in dev.json("deployments")["deployments"] for run in d["runs"]]
    assert done["runId"] not in unfinished
