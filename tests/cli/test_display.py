"""What the CLI shows is what the run is (issue 31 item 7), each command run as a process against an ``awsworld
dev`` process, as an operator runs them:

- a hook's timeout is the hook's deadline, never "a sleep", and goes away once the hook has its payload; every
  deadline shows its date when it is not today and how far away it is (a day, not seconds);
- ``describe`` leaves out awsworld's own attributes (``awsworld.patched.*``) and steps (``awsworld.start_child``)
  unless ``--all``; ``--json`` keeps everything, under the same keys;
- ``runs`` and ``schedules list`` print a header line; a schedule's fire times are shown in its own zone too;
- a reader that stops reading (``| head``) ends any command quietly (exit 141, nothing on stderr);
- ``resume`` of a token no hook holds yet points at ``--wait``;
- dev's console is text, one line per record, unless ``--log-format json``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from .test_cli import Dev, Runner, _start, project_of, serving

WORKFLOWS = '''
from awsworld import create_hook, patched, sleep, step, workflow


@step(name="display.note")
async def note(text: str) -> str:
    return text


@step(name="display.boom", max_retries=0)
async def boom(why: str) -> None:
    raise ValueError(why)


@workflow(name="display.child")
async def child(n: int) -> int:
    return n + 1


@workflow(name="display.approval")
async def approval(key: str) -> str:
    if patched("with-note"):
        await note(key)
    n = await child(1)
    async with create_hook(token=f"approve:{key}", timeout="1d") as hook:
        answer = await hook
    await sleep("1d", name="cool-off")
    return f"{answer} {n}"


@workflow(name="display.big")
async def big(n: int) -> str:
    return "x" * n


@workflow(name="display.fail")
async def fail(why: str) -> None:
    await boom(why)


@workflow(name="display.report")
async def report(region: str) -> str:
    return region
'''

A_DAY_AWAY = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC \(in (23 h 59 min|1 d)\)"
DESCRIBE_KEYS = {"runId", "workflow", "status", "deploymentId", "createdAt", "startedAt", "completedAt", "updatedAt",
                 "attributes", "error", "errorCode", "errorDetails", "parentRunId", "children", "schedule", "steps",
                 "streams", "endedAt", "cancelReason", "waitingOn"}
EVENT_KEYS = {"eventId", "eventType", "correlationId", "createdAt", "atMs", "what", "displayName", "detail", "value",
              "error", "errorDetails"}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return project_of(tmp_path_factory, "display", WORKFLOWS)


@pytest.fixture(scope="module")
def dev(project: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dev]:
    yield from serving(project, tmp_path_factory, "display", runners=2)


def _describe_until(dev: Dev, run_id: str, ready: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        document: dict[str, Any] = dev.json("describe", run_id)
        if ready(document):
            return document
        assert time.monotonic() < deadline, f"run {run_id} did not get there: {document}"
        time.sleep(0.2)


def _waits(document: dict[str, Any]) -> list[str]:
    return [wait["kind"] for wait in document["waitingOn"]]


@pytest.fixture(scope="module")
def approval(dev: Dev) -> str:
    """A run waiting on ``approve:k1``, whose timeout is a day away (it also took a patch and started a child)."""
    run_id = _start(dev, "display.approval", '["k1"]')
    _describe_until(dev, run_id, lambda d: _waits(d) == ["hook"])
    return run_id


def test_a_hooks_timeout_is_its_deadline_with_a_date_and_goes_once_the_hook_is_resumed(dev: Dev,
                                                                                      approval: str) -> None:
    described, events, rows = dev("describe", approval), dev("events", approval), dev.json("events", approval)
    waits = [line for line in described.out.splitlines() if line.startswith("waits on")]
    assert len(waits) == 1 and re.fullmatch(rf"waits on  hook approve:k1 \(no payload yet\), times out {A_DAY_AWAY}",
                                            waits[0]), described.out
    (timeout,) = [line for line in events.out.splitlines() if "wait_created" in line]
    assert re.search(rf"wait_\d+ \(timeout of hook approve:k1\) +until {A_DAY_AWAY}$", timeout), timeout
    assert all(set(row) >= EVENT_KEYS for row in rows), "events --json keeps its keys"
    (hook,) = dev.json("describe", approval)["waitingOn"]
    assert hook["token"] == "approve:k1" and hook["timeoutAt"].endswith("Z") and hook["heartbeatDueAt"] is None

    assert dev("resume", "approve:k1", '"yes"').code == 0
    document = _describe_until(dev, approval, lambda d: _waits(d) == ["sleep"])
    assert set(document) >= DESCRIBE_KEYS, "describe --json keeps its keys"
    waits = [line for line in dev("describe", approval).out.splitlines() if line.startswith("waits on")]
    assert len(waits) == 1 and re.fullmatch(rf"waits on  a sleep 'cool-off' until {A_DAY_AWAY}", waits[0]), waits


def test_describe_leaves_out_awsworlds_own_attributes_and_steps_unless_asked(dev: Dev, approval: str) -> None:
    text, everything, document = (dev("describe", approval), dev("describe", approval, "--all"),
                                  dev.json("describe", approval))
    assert "awsworld.patched" not in text.out and "awsworld.start_child" not in text.out, text.out
    assert "steps     1 (1 completed)\n  display.note" in text.out, text.out
    assert "hidden    1 awsworld attribute(s) and 1 awsworld step(s) (--all shows them)" in text.out
    assert f"child     {approval}.step_" in text.out, "the child run itself is listed"
    assert "attribute awsworld.patched.with-note = " in everything.out and "awsworld.start_child" in everything.out
    assert "steps     2 (2 completed)" in everything.out and "hidden" not in everything.out
    assert sorted(document["attributes"]) == ["$awsworld.deployment", "awsworld.patched.with-note"], \
        "--json has them all"
    assert document["deployment"].startswith("dev-") and f"\npinned to {document['deployment']}\n" in text.out
    assert [s["name"] for s in document["steps"]["list"]] == ["display.note", "awsworld.start_child"]


def test_runs_and_schedules_list_print_a_header_and_fire_times_in_the_schedules_zone(dev: Dev) -> None:
    run_id = _start(dev, "display.report", '["eu"]', "--wait", "30")
    lines = dev("runs").out.splitlines()
    assert lines[0].split() == ["RUN", "STATUS", "WORKFLOW", "CREATED", "(UTC)", "STARTED", "BY"], lines[0]
    row = next(line for line in lines if line.startswith(run_id))
    assert row[lines[0].index("STATUS"):].startswith("completed ") and all(
        line.startswith("wrun_") for line in lines[1:])
    assert all(set(r) >= {"runId", "status", "workflow", "createdAt", "completedAt", "schedule"}
               for r in dev.json("runs")), "runs --json keeps its keys"

    created = dev.json("schedules", "create", "new-year", "display.report", "--cron", "0 12 1 1 *",
                    "--timezone", "Europe/Berlin", "--args", '["eu"]')
    assert re.fullmatch(r"\d{4}-01-01T11:00:00\.000Z", created["nextAt"]), "--json keeps UTC"
    try:
        listed = dev("schedules", "list").out.splitlines()
        assert listed[0].split() == ["SCHEDULE", "STATE", "WORKFLOW", "WHEN", "NEXT"], listed
        (line,) = [line for line in listed if line.startswith("new-year ")]
        year = created["nextAt"][:4]
        assert re.search(rf"{year}-01-01 12:00:00 Europe/Berlin, {year}-01-01 11:00:00\.000 UTC \(in \d+ d( \d+ h)?\)$",
                         line), line
        fires = [line.strip() for line in dev("schedules", "describe", "new-year").out.splitlines()
                 if line.strip().startswith("fires at")]
        berlin_noon = (r"fires at +(\d{4})-01-01 12:00:00 Europe/Berlin, \1-01-01 11:00:00\.000 UTC "
                       r"\(in \d+ d( \d+ h)?\)")
        assert fires and all(re.fullmatch(berlin_noon, f) for f in fires), fires

        # An interval reads as it was written (it read "every 900s"), and a UTC time as describe writes one.
        assert dev("schedules", "create", "quarter", "display.report", "--every", "15m", "--offset", "5m",
                   "--args", '["eu"]').code == 0
        (quarter,) = [line for line in dev("schedules", "list").out.splitlines() if line.startswith("quarter ")]
        assert re.search(r" every 15m offset 5m +(\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d\.\d{3} UTC "
                         r"\(in \d+ (min|s)( \d+ s)?\)$", quarter), quarter  # (a date only past midnight)
    finally:
        assert dev("schedules", "delete", "new-year").code == 0
        dev("schedules", "delete", "quarter")


def _closed_reader(dev: Dev, *args: str) -> subprocess.CompletedProcess[str]:
    """``awsworld ARGS`` writing into a pipe whose reader has gone (``| head`` after its lines): every write
    fails with EPIPE, deterministically."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "awsworld.cli", *args], stdout=write, stderr=subprocess.PIPE,
                              env=dev.env, cwd=dev.cwd, text=True, timeout=120, check=False)
    finally:
        os.close(write)


def test_a_reader_that_stops_reading_ends_every_command_quietly(dev: Dev, approval: str) -> None:
    big = _start(dev, "display.big", "[300000]", "--wait", "30")  # a value far above the inline limit
    commands = [("describe", approval), ("events", big, "--full"), ("runs",), ("hooks", approval), ("result", big)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = list(pool.map(lambda command: _closed_reader(dev, *command), commands))
    for command, result in zip(commands, done, strict=True):
        assert (result.returncode, result.stderr) == (141, ""), (command, result)
    # As typed: 300 KB into `head -c 100`, which leaves once it has its bytes.
    script = f"{sys.executable} -m awsworld.cli events {big} --full | head -c 100; echo \" ${{PIPESTATUS[0]}}\""
    piped = subprocess.run(["bash", "-c", script], env=dev.env, cwd=dev.cwd, capture_output=True, text=True,
                           timeout=120, check=False)
    assert piped.stdout.startswith(f"timeline of {big}") and piped.stdout.endswith(" 141\n"), piped.stdout[-200:]
    assert piped.stderr == "", piped.stderr


def test_resume_of_a_token_no_hook_holds_says_wait_can_wait_for_it(dev: Dev) -> None:
    line = dev("resume", "approve:not-yet", '"yes"').one_line_error(1)
    assert "no hook holds this token" in line and "add --wait SECONDS to wait for it" in line, line


def test_a_token_no_hook_took_within_wait_says_it_waited_and_where_to_look(dev: Dev) -> None:
    """With ``--wait`` given, the error's hint said to add ``--wait``: the newcomer who had (a mistyped token)
    was sent round in a circle. It says how long it waited, and where the run's real tokens and waits are."""
    waited = "either no run has reached create_hook with it yet, or the run that held it ended and was deleted once " \
        "its retention passed (looked for 1 s) (hint: check it against the tokens `awsworld hooks RUN` lists, " \
        "whole; `awsworld describe RUN` says what the run waits on)"
    for command in (("resume", "approve:typo", '"yes"'), ("fail-hook", "approve:typo", "why"),
                    ("heartbeat-hook", "approve:typo")):
        line = dev(*command, "--wait", "1").one_line_error(1)
        assert line == f"awsworld {command[0]}: no hook holds this token: {waited}", line


def _dev_console(project: Path, state: Path, runner: Runner, *options: str) -> tuple[str, bool]:
    """A dev of its own (``options`` added): a run that fails and, where start accepts it, a run of a workflow no
    module registers; then stopped. Its console after the banner, and whether the unknown run was started."""
    server = Dev(project, state, [runner], *options)
    try:
        _start(server, "display.fail", '["out of filters"]', "--wait", "30")
        env = {k: v for k, v in server.env.items() if k != "AWSWORLD_MODULES"}  # the CLI cannot check the name
        unknown = runner(("start", "display.nope", "[]"), env, project).code == 0
        said = server.read_until(_the_unknown_runs_record) if unknown else ""  # its first delivery, logged
    finally:
        out = server.stop()
    return said + out, unknown


def _the_unknown_runs_record(line: str) -> bool:
    """The console's record of the unknown run's first delivery (either format)."""
    return "display.nope" in line and re.search(r"ERROR|WARNING", line) is not None


def test_the_dev_console_is_text_by_default_and_json_on_request(project: Path,
                                                                tmp_path_factory: pytest.TempPathFactory) -> None:
    runners = [Runner(tmp_path_factory.mktemp("console-runner")) for _ in range(2)]
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            (text, text_unknown), (as_json, json_unknown) = pool.map(
                lambda args: _dev_console(project, project / args[0], args[1], *args[2:]),
                [("state-text", runners[0]), ("state-json", runners[1], "--log-format", "json")])
    finally:
        for runner in runners:
            runner.close()
    console = text.splitlines()
    assert not [line for line in console if line.startswith("{")], "no JSON line in the text console"
    assert any(re.match(r"run wrun_\S+ \(display\.fail\) failed \[USER_ERROR\]: ", line) for line in console), text
    if text_unknown:  # the delivery's record, as one text line with its ids
        assert any(re.match(r"\d\d:\d\d:\d\d (ERROR|WARNING) +run wrun_\S+: .*display\.nope", line)
                   for line in console), text
    records = [json.loads(line) for line in as_json.splitlines() if line.startswith("{")]
    assert any(r["level"] == "WARNING" and "(display.fail) failed" in r["message"] for r in records), as_json
    if json_unknown:
        assert any("display.nope" in r["message"] for r in records), as_json
