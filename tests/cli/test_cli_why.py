"""What the CLI says about runs is true: ``awsworld runs --status`` lists only runs whose status passes it (the index
it reads may lag the runs), ``hooks`` lists the hooks a run's code made (not the engine's own hook for a child's
outcome), and ``start`` reads ARGS from a file. Each command runs as a process against an ``awsworld dev`` process,
as an operator runs them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .test_cli import Dev, project_of, serving, until_found

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


def test_hooks_of_a_parent_lists_its_own_hooks_not_the_engines_hook_for_a_childs_outcome(dev: Dev) -> None:
    """A parent awaiting a child awaits its outcome on a hook the engine made (token ``awsworld.child:<child>``):
    ``hooks PARENT`` listed it beside the code's own, ``open``, a token to resume by hand that would forge the
    child's end. As ``describe`` does with awsworld's own steps, it is hidden with a ``hidden`` line, ``--all``
    lists it (as a ``child``), and ``--json`` has every hook, ``childRunId`` telling the engine's apart."""
    parent = dev.json("start", "clitest.parent", "[4]")["runId"]
    until_found(lambda: dev("hooks", parent).out.count("why-parent:4"), "the parent holds its hook")
    assert dev("resume", "why-parent:4", '"go"', "--wait", "30").code == 0
    child = f"{parent}.step_2"
    until_found(lambda: dev("hooks", child).out.count("why-child:4"), "the child holds its hook")
    listed = dev("hooks", parent)
    assert listed.code == 0 and listed.err == "" and "awsworld.child:" not in listed.out, listed
    lines = listed.out.splitlines()
    assert lines[0].split()[0] == "why-parent:4" and len(lines) == 2, listed.out
    assert lines[1] == (f"hidden: 1 awsworld hook(s) awaiting a child run's outcome (`awsworld describe {parent}` "
                        "lists the children; --all shows the hooks)"), listed.out
    every = dev("hooks", parent, "--all").out
    assert f"awsworld.child:{child}  child   received 0  open" in every and "hidden" not in every, every
    assert [(h["token"], h["childRunId"]) for h in dev.json("hooks", parent)] == [
        ("why-parent:4", None), (f"awsworld.child:{child}", child)]
    assert dev("resume", "why-child:4", '"go"', "--wait", "30").code == 0
    assert dev.json("result", parent, "--wait", "30")["output"] == 5


def test_start_reads_args_from_a_file_and_resume_a_payload(dev: Dev, project: Path, tmp_path: Path) -> None:
    """A 50 KB JSON argument had to be pasted on the command line: ``--args-file`` (``--kwargs-file``, and ``resume
    --payload-file``) reads it from a file, or standard input with ``-``; a file that is not there or not JSON is a
    usage error naming the option and the file, without echoing it; ``@FILE`` (curl's form) says which option."""
    big = {"items": ["x" * 100] * 500}
    args_file = tmp_path / "order.json"
    args_file.write_text(json.dumps(big))
    kwargs_file = tmp_path / "kwargs.json"
    kwargs_file.write_text('{"label": "from a file"}')
    done = dev.json("start", "clitest.size", "--args-file", str(args_file), "--kwargs-file", str(kwargs_file),
                    "--wait", "30")
    assert done["output"] == {"chars": len(str(big)), "label": "from a file"}, done
    piped = subprocess.run([sys.executable, "-m", "awsworld.cli", "start", "clitest.size", "--args-file", "-",
                            "--wait", "30"], input='["from stdin"]', env=dev.env, cwd=project, capture_output=True,
                           text=True, timeout=60)
    assert piped.returncode == 0 and piped.stdout.splitlines()[1] == '{"chars":10,"label":""}', piped

    missing = dev("start", "clitest.size", "--args-file", "nope.json").one_line_error(2)
    assert f"--args-file nope.json: no such file (paths are read from {project})" in missing, missing
    broken = tmp_path / "broken.json"
    broken.write_text('{"items": [1,\n')
    bad = dev("start", "clitest.size", "--args-file", str(broken)).one_line_error(2)
    assert f"--args-file {broken} is not JSON: Expecting value at line 2 column 1" in bad, bad
    assert "both give" in dev("start", "clitest.size", '"x"', "--args-file", str(args_file)).one_line_error(2)
    curl = dev("start", "clitest.size", f"@{args_file}").one_line_error(2)
    assert f"(hint: to read ARGS from a file: --args-file {args_file})" in curl, curl

    waiting = dev.json("start", "clitest.parent", "[7]")["runId"]
    payload = tmp_path / "payload.json"
    payload.write_text('{"approved": true}')
    resumed = dev("resume", "why-parent:7", "--payload-file", str(payload), "--wait", "30")
    assert resumed.code == 0 and resumed.out.startswith("delivered as "), resumed
    assert "no such file" in dev("resume", "why-parent:7", "--payload-file", "nope.json").one_line_error(2)
    assert dev("resume", "why-child:7", '"go"', "--wait", "30").code == 0
    assert dev.json("result", waiting, "--wait", "30")["output"] == 8


def test_a_long_argument_that_is_not_json_is_shown_around_where_it_broke(project: Path) -> None:
    """A 50 KB ARGS with one bad character was echoed whole in its one-line error: it shows the part around where
    it broke, and its length."""
    text = json.dumps({"items": ["x" * 100] * 500})
    broken = text[:30000] + text[30000:].replace(", ", " ", 1)
    done = subprocess.run([sys.executable, "-m", "awsworld.cli", "start", "clitest.size", broken], cwd=project,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == "", done
    line = done.stderr.strip()
    assert len(done.stderr.splitlines()) == 1 and len(line) < 500, line[:300]
    assert "ARGS is not JSON: Expecting ',' delimiter at character " in line and '" "' in line, line
    assert f"({len(broken)} characters)" in line, line


def test_runs_waiting_says_what_each_unfinished_run_waits_on_and_its_last_write(dev: Dev) -> None:
    """An operator looking for runs stuck waiting: ``runs --waiting`` lists the pending and running runs (not the
    ended ones) with what each waits on, in ``describe``'s words, and when it last wrote; ``--json`` has
    ``describe``'s ``waitingOn`` entries and ``updatedAt``. A run whose wait ends moves to its next one."""
    parent = dev.json("start", "clitest.parent", "[11]")["runId"]
    done = dev.json("start", "clitest.size", '"y"', "--wait", "30")["runId"]
    until_found(lambda: dev("hooks", parent).out.count("why-parent:11"), "the parent holds its hook")
    listed = {r["runId"]: r for r in dev.json("runs", "--waiting", "--limit", "100")}
    assert done not in listed and listed[parent]["status"] == "running", listed
    [hook] = listed[parent]["waitingOn"]
    assert (hook["kind"], hook["token"], hook["received"]) == ("hook", "why-parent:11", 0), hook
    assert listed[parent]["updatedAt"] >= listed[parent]["startedAt"]
    text = dev("runs", "--waiting", "--limit", "100")
    header = text.out.splitlines()[0]
    assert text.code == 0 and "  LAST WRITE (UTC)  " in header and header.endswith("  WAITS ON"), text.out
    [row] = [line for line in text.out.splitlines() if line.startswith(parent)]
    assert row.endswith("hook why-parent:11 (no payload yet)"), row

    assert dev("resume", "why-parent:11", '"go"', "--wait", "30").code == 0
    child = f"{parent}.step_2"
    until_found(lambda: dev("hooks", child).out.count("why-child:11"), "the child holds its hook")
    waits = {r["runId"]: r["waitingOn"] for r in dev.json("runs", "--waiting", "--limit", "100")}
    assert [(w["kind"], w.get("runId")) for w in waits[parent]] == [("child", child)], waits[parent]
    assert [w.get("token") for w in waits[child]] == ["why-child:11"], waits[child]
    ended = dev.json("runs", "--waiting", "--status", "completed", "--limit", "100")
    assert {r["runId"]: r["waitingOn"] for r in ended}[done] == [], "an ended run waits on nothing (and is not read)"
    assert dev("resume", "why-child:11", '"go"', "--wait", "30").code == 0


def test_describe_says_when_an_unfinished_run_last_wrote_as_runs_waiting_does(dev: Dev) -> None:
    """``describe`` of a run that waits says under what it waits on when it last wrote: the text ``runs --waiting``
    has in its ``LAST WRITE (UTC)`` column (``cli.describe.last_write``, one function for both), and how long ago,
    which a stuck run's grows. It had no such line: an operator went from ``describe`` to ``runs --waiting`` to
    see whether the run moved. An ended run has none (its end time says it)."""
    waiting = dev.json("start", "clitest.child", "[12]")["runId"]
    done = dev.json("start", "clitest.size", '"z"', "--wait", "30")["runId"]
    until_found(lambda: dev("hooks", waiting).out.count("why-child:12"), "the run holds its hook")
    [row] = [line for line in dev("runs", "--waiting", "--limit", "100").out.splitlines() if line.startswith(waiting)]
    described = dev("describe", waiting)
    lines = described.out.splitlines()
    [written] = [line for line in lines if line.startswith("          last write ")]
    assert described.code == 0 and lines[lines.index(written) - 1] == "waits on  hook why-child:12 (no payload yet)", \
        described.out
    assert re.fullmatch(r" {10}last write (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC \(.+ ago\)", written), written
    assert f"  {written.split()[2]} {written.split()[3]}  " in row, (row, written)  # the column's text, the same
    assert dev("resume", "why-child:12", '"go"', "--wait", "30").code == 0
    for ended in (waiting, done):
        text = dev("describe", ended).out
        assert "status    completed at" in text and "last write" not in text, text
