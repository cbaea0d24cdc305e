"""``awsworld delete RUN... --yes`` as an operator runs it: commands as processes against an ``awsworld dev`` process.
Without ``--yes`` nothing is deleted (exit 2); an ended run goes (``result`` then finds no run) while an unfinished
one beside it is refused and kept (exit 1); a second deletion of the same id is no failure; a parent's child runs
are named and kept."""

from __future__ import annotations

import json
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .test_cli import Dev, Runner, _start

ERASECLI = '''
from awsworld import create_hook, workflow


@workflow(name="erasecli.greet")
async def greet(email: str) -> str:
    return f"sent to {email}"


@workflow(name="erasecli.parent")
async def parent(email: str) -> str:
    return await greet(email)


@workflow(name="erasecli.waiting")
async def waiting(email: str) -> str:
    async with create_hook(token=f"erasecli:{email}") as hook:
        return str(await hook)
'''


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("erase-project")
    (root / "src").mkdir()
    (root / "src" / "erasecli.py").write_text(textwrap.dedent(ERASECLI))
    return root


@pytest.fixture(scope="module")
def dev(project: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dev]:
    runners = [Runner(tmp_path_factory.mktemp("erase-runner"))]
    server = Dev(project, project / "state", runners, module="erasecli")
    yield server
    server.stop()
    for runner in runners:
        runner.close()


def _ended(dev: Dev, run_id: str) -> None:
    result = dev("result", run_id, "--wait", "30")
    assert result.code == 0, result


def _running(dev: Dev, run_id: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        described = dev("describe", run_id, "--json")
        if described.code == 0 and json.loads(described.out)["status"] == "running":
            return
        time.sleep(0.1)
    raise AssertionError(f"run {run_id} is not running after {timeout} s")


def test_delete_needs_yes_deletes_ended_runs_and_refuses_unfinished_ones(dev: Dev) -> None:
    ended = _start(dev, "erasecli.greet", '["someone@example.com"]')
    _ended(dev, ended)
    unfinished = _start(dev, "erasecli.waiting", '["other@example.com"]')
    _running(dev, unfinished)

    unconfirmed = dev("delete", ended)
    assert unconfirmed.code == 2 and "add --yes" in unconfirmed.err, unconfirmed
    _ended(dev, ended)  # still there

    both = dev("delete", ended, unfinished, "--yes")
    assert both.code == 1, both
    assert f"deleted {ended}" in both.out and f"refused {unfinished}: " in both.out, both
    assert f"not deleted, still unfinished: {unfinished}" in both.err and "awsworld cancel" in both.err, both
    gone = dev("result", ended)
    assert gone.code == 1 and "not found" in gone.err, gone
    _running(dev, unfinished)  # kept, as it was

    again = dev("delete", ended, "--yes", "--json")
    assert again.code == 0, again
    assert json.loads(again.out) == {"runs": [{"runId": ended, "deleted": False, "childRuns": []}]}

    assert dev("cancel", unfinished).code == 0
    assert dev("delete", unfinished, "--yes").code == 0
    assert dev("describe", unfinished).code == 1


def test_a_parents_child_runs_are_named_and_kept(dev: Dev) -> None:
    parent = _start(dev, "erasecli.parent", '["child@example.com"]')
    _ended(dev, parent)
    deleted = dev("delete", parent, "--yes", "--json")
    assert deleted.code == 0, deleted
    [outcome] = json.loads(deleted.out)["runs"]
    assert outcome["deleted"] is True and len(outcome["childRuns"]) == 1, outcome
    child = outcome["childRuns"][0]
    kept = dev("result", child)
    assert kept.code == 0 and json.loads(kept.out) == "sent to child@example.com", kept
