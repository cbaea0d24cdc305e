"""``awsworld limits`` and ``awsworld describe`` as processes, against an ``awsworld dev`` process whose module
declares a workflow limited to one run per key: runs started from the command line wait ``pending`` with their
place, ``limits`` lists holders and waiters, ``limits set`` raises the key's limit at run time (the waiting run
starts), ``pause``/``resume``/``reset`` change it and say so; bad input is a usage error (exit 2)."""

from __future__ import annotations

import json
import re
import textwrap
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from .test_cli import Dev, project_of, serving, until_found

WORKFLOWS = '''
import asyncio
import os

from awsworld import Concurrency, RateLimit, create_hook, step, workflow


@step(name="clitest.exclusive", concurrency=1)
async def exclusive(gate: str, n: int) -> int:
    while not os.path.exists(gate):  # holds its slot until the test opens the gate
        await asyncio.sleep(0.1)
    return n


@workflow(name="clitest.exclusives")
async def exclusives(gate: str) -> int:
    return sum(await asyncio.gather(exclusive(gate, 1), exclusive(gate, 2)))


@workflow(name="clitest.per_customer", concurrency=Concurrency(1, key=lambda customer, n: customer))
async def per_customer(customer: str, n: int) -> int:
    async with create_hook(token=f"cli-limits:{customer}:{n}") as hook:
        await hook
    return n


@workflow(name="clitest.named_limit",
          concurrency=Concurrency(1, key=lambda customer, n: customer, name="clitest-orders"))
async def named_limit(customer: str, n: int) -> int:
    async with create_hook(token=f"cli-named:{customer}:{n}") as hook:
        await hook
    return n


@workflow(name="clitest.export", concurrency=Concurrency(total=1, key=lambda tenant: tenant))
async def export_run(tenant: str) -> str:
    async with create_hook(token=f"cli-export:{tenant}") as hook:
        await hook
    return tenant


@workflow(name="clitest.sync", concurrency=Concurrency(1, key=lambda tenant: tenant, on_busy="skip"))
async def sync(tenant: str) -> str:
    async with create_hook(token=f"cli-sync:{tenant}") as hook:
        await hook
    return tenant


@workflow(name="clitest.keyed_unused", concurrency=Concurrency(1, key=lambda tenant: tenant))
async def keyed_unused(tenant: str) -> str:  # (no test starts it: no key of its limit is stored)
    return tenant


@step(name="clitest.rated", rate=RateLimit("10/m"))
async def rated(n: int) -> int:
    return n


@workflow(name="clitest.call_rated")
async def call_rated(n: int) -> int:
    return await rated(n)


@step(name="clitest.paced", rate=RateLimit("60/m"))
async def paced(n: int) -> int:
    return n


@workflow(name="clitest.call_paced")
async def call_paced(n: int) -> int:
    return await paced(n)


@step(name="clitest.partner", rate=RateLimit("5/s", name="clitest-partner"))
async def partner(n: int) -> int:
    return n


@workflow(name="clitest.quiet", concurrency=Concurrency(1, key=lambda customer: customer))
async def quiet(customer: str) -> str:  # (its keys go idle at once: the listing's default leaves them out)
    return customer


@step(name="clitest.trickled", rate=RateLimit("1/m"))
async def trickled(n: int) -> int:
    return n


@workflow(name="clitest.trickle")
async def trickle(n: int) -> int:
    return await trickled(n)


@step(name="clitest.plain")
async def plain(n: int) -> int:  # (no limit: `limits describe step:clitest.plain` says so)
    return n
'''
LIMIT = "workflow:clitest.per_customer"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return project_of(tmp_path_factory, "limits", WORKFLOWS)


@pytest.fixture(scope="module")
def dev(project: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dev]:
    yield from serving(project, tmp_path_factory, "limits")


def test_limits_and_describe_show_the_waiting_runs_and_a_raised_limit_starts_them(dev: Dev) -> None:
    first = dev.json("start", "clitest.per_customer", '["ann", 1]')["runId"]
    until_found(lambda: dev("hooks", first).out.count("cli-limits:ann:1"), "the first run holds its hook")
    second = dev.json("start", "clitest.per_customer", '["ann", 2]')["runId"]
    # Bob's run in Ann's line (`--concurrency-key`, as client.options(concurrency_key=)); a start queued behind its
    # key's slot says so (it once printed the run id alone; `--wait`: "still pending").
    started = dev("start", "clitest.per_customer", '["bob", 3]', "--concurrency-key", "ann", "--priority", "-1")
    third = started.out.strip()
    assert started.code == 0 and started.err == (f"pending: waits on its start: a slot of {LIMIT} key 'ann' (place 2 of"
                                                 f" 2; held by run {first}) (`awsworld describe {third}`)\n"), started

    described = dev.json("describe", second)
    assert described["status"] == "pending"
    assert described["waitingOn"][0] | {"heldBy": None} == {
        "kind": "slot", "limit": LIMIT, "key": "ann", "place": 1, "of": 2, "heldBy": None, "concurrency": 1,
        "total": None, "paused": False}
    assert described["waitingOn"][0]["heldBy"] == [f"r:{first}"]
    text = dev("describe", third).out
    assert f"waits on  its start: a slot of {LIMIT} key 'ann' (place 2 of 2; held by run {first})" in text

    listed = dev.json("limits")
    ann = next(k for entry in listed if entry["limit"] == LIMIT for k in entry["keys"] if k["key"] == "ann")
    assert [h["runId"] for h in ann["holders"]] == [first]
    assert [(w["place"], w["runId"]) for w in ann["waiters"]] == [(1, second), (2, third)]
    table = dev("limits").out
    assert "LIMIT" in table and LIMIT in table and "1/1" in table

    raised = dev.json("limits", "set", LIMIT, "--key", "ann", "--concurrency", "2")
    assert raised["keys"][0]["concurrency"] == 2 and raised["keys"][0]["overridden"]
    # The key's number set at run time reads as such under the code's; times as describe shows them.
    shown = dev("limits", "describe", LIMIT, "--key", "ann").out
    assert f"{LIMIT}  concurrency 1\n" in shown and "of 2 (set at run time; the code's 1), " in shown, shown
    since = r"(\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d\.\d{3} UTC \(\d+ s ago\)"  # (a date when it was yesterday)
    assert re.search(rf"holds  {first}  since " + since, shown), shown
    until_found(lambda: dev("hooks", second).out.count("cli-limits:ann:2"), "the second run starts at once")
    assert dev.json("describe", third)["waitingOn"][0]["place"] == 1

    paused = dev.json("limits", "pause", LIMIT, "--key", "ann")
    assert paused["keys"][0]["paused"]
    assert "paused" in dev("limits", "describe", LIMIT, "--key", "ann").out
    assert dev("resume", "cli-limits:ann:1", '"go"', "--wait", "30").code == 0
    assert dev.json("result", first, "--wait", "30")["output"] == 1

    def freed_first() -> dict[str, Any] | None:
        key = dev.json("limits", "describe", LIMIT, "--key", "ann")["keys"][0]
        return key if [h["runId"] for h in key["holders"]] == [second] else None

    # The first run's end freed its slot; paused, the key grants nothing: the third run stays first in line.
    freed = until_found(freed_first, "the first run's slot is freed")
    assert [w["runId"] for w in freed["waiters"]] == [third]
    assert dev.json("describe", third)["status"] == "pending"
    assert not dev.json("limits", "resume", LIMIT, "--key", "ann")["keys"][0]["paused"]
    until_found(lambda: dev("hooks", third).out.count("cli-limits:bob:3"), "the third run starts once resumed")

    reset = dev.json("limits", "reset", LIMIT, "--key", "ann")
    assert reset["keys"][0]["concurrency"] == 1 and not reset["keys"][0]["overridden"]
    for token, run in (("cli-limits:ann:2", second), ("cli-limits:bob:3", third)):
        assert dev("resume", token, '"go"', "--wait", "30").code == 0
        assert dev.json("result", run, "--wait", "30")["output"] in (2, 3)


def test_bad_input_is_a_usage_error_and_an_unknown_limit_says_so(dev: Dev) -> None:
    """Bad input to ``start`` and ``limits`` is a usage error (exit 2) that changes nothing. The test stores its own
    key (a run holding it) rather than count on one an earlier test stored: run alone, or on an xdist worker of
    its own, it found no key and its refusals were never asked for."""
    holder = dev.json("start", "clitest.per_customer", '["aa-bad", 1]')["runId"]
    until_found(lambda: dev("hooks", holder).out.count("cli-limits:aa-bad:1"), "the run holds its key's slot")
    too_high = dev("start", "clitest.per_customer", '["aa-bad", 9]', "--priority", "2000000").one_line_error(2)
    assert "a priority is a whole number from -1000000 to 1000000" in too_high, too_high
    assert dev("limits", "set", LIMIT, "--key", "aa-bad", "--rate", "fast").one_line_error(2)
    assert dev("limits", "set", LIMIT, "--key", "aa-bad", "--total", "3").one_line_error(2)  # it has no total
    # A run limit takes no rate (run starts take no tokens), as @workflow(rate=...) is refused: not set and ignored.
    rated = dev("limits", "set", LIMIT, "--key", "aa-bad", "--rate", "5/s")
    assert "limits runs at once: it takes a concurrency or a total, not a rate" in rated.one_line_error(2)
    assert "rate" not in dev("limits", "describe", LIMIT, "--key", "aa-bad").out
    # A keyed limit has no key "": a pause (or a set) without --key once changed nothing and said "paused".
    for change in (("pause",), ("set", "--concurrency", "0"), ("reset",)):
        refused = dev("limits", *change[:1], LIMIT, *change[1:]).one_line_error(2)
        assert f"limit '{LIMIT}' is keyed (its keys: 'aa-bad'" in refused and "--key KEY" in refused, refused
    # ... nor before any key is stored: it stored a key "" of its own, paused, that no run uses.
    unused = "workflow:clitest.keyed_unused"
    refused = dev("limits", "pause", unused).one_line_error(2)
    assert f"limit '{unused}' is keyed (its keys: none used yet): name the key" in refused, refused
    assert dev.json("limits", "describe", unused)["keys"] == []
    missing = dev("limits", "describe", "workflow:clitest.nope")
    assert "no limit 'workflow:clitest.nope'" in missing.one_line_error(1)
    assert dev("resume", "cli-limits:aa-bad:1", '"go"', "--wait", "30").code == 0
    assert dev.json("result", holder, "--wait", "30")["output"] == 1


def test_a_typo_in_a_limit_name_names_the_limit_meant(dev: Dev) -> None:
    """A limit name one letter off, or a workflow's name without its ``workflow:``, was answered "no limit ... is
    stored (nothing has used it yet), and no code declaring it was given", to a command that had the code
    (``AWSWORLD_MODULES``): the user read a limit nothing had used yet. It names the limit meant, and says the
    code here declares none by that name."""
    for command in (("describe", "workflow:clitest.per_custmer"),
                    ("set", "clitest.per_customer", "--key", "ann", "--concurrency", "2"),
                    ("pause", "step:clitest.rate")):
        refused = dev("limits", *command).one_line_error(1)
        assert f"no limit {command[1]!r} is stored (nothing has used it yet), and the code here declares none by " \
               "that name; did you mean " in refused, refused
        meant = "step:clitest.rated" if command[0] == "pause" else LIMIT
        assert f"did you mean {meant!r}" in refused, refused


def test_a_step_or_workflow_that_declares_no_limit_says_so(dev: Dev) -> None:
    """``limits describe step:X`` of a step whose code declares no limit answered with the nearest limits ("the code
    here declares none by that name; did you mean 'step:clitest.rated'?"), which read as a typo in a right name. It
    says the step declares none, and what declares one; the same for a workflow, and for ``limits set``."""
    for name, takes in (("step:clitest.plain", "@step(concurrency=..., rate=...)"),
                        ("workflow:clitest.call_rated", "@workflow(concurrency=...)")):
        kind, owner = name.split(":")
        for command in (("describe", name), ("set", name, "--concurrency", "2")):
            said = dev("limits", *command).one_line_error(1)
            assert f"{kind} {owner!r} declares no limit in the code here, so there is no limit {name!r} to describe " \
                   f"or change: a limit is declared in its code, {takes}" in said, said
            assert "did you mean" not in said, said
    assert name not in dev("limits", "list", "--all").out, "nothing was stored"


def test_a_change_the_code_would_not_apply_is_refused_and_a_renamed_limit_is_named(dev: Dev) -> None:
    """A step takes the slot and the token its code declares: a concurrency set on a rate-only limit, or a rate on
    a concurrency-only one, was stored, listed ("0 held of 3 (set at run time; the code's none)") and applied to
    nothing. Both are refused, saying what to change. A step whose limit has a ``name=`` is asked for by its
    default name: the error names the limit's name (it said nothing was stored, as for a limit nobody declared)."""
    assert dev("start", "clitest.call_rated", "[1]", "--wait", "30").code == 0
    slots = dev("limits", "set", "step:clitest.rated", "--concurrency", "3").one_line_error(2)
    assert "limit 'step:clitest.rated' has no concurrency in its code (a rate only)" in slots, slots
    assert "give the step concurrency= in code" in slots, slots
    tokens = dev("limits", "set", "step:clitest.exclusive", "--rate", "5/s").one_line_error(2)
    assert "limit 'step:clitest.exclusive' has no rate in its code" in tokens, tokens
    assert "held of 3" not in dev("limits", "describe", "step:clitest.rated").out
    assert "rate" not in dev("limits", "describe", "step:clitest.exclusive").out
    # An unkeyed limit has the one key "": a --key was stored as a key of its own, listed, and used by no run.
    unkeyed = dev("limits", "set", "step:clitest.rated", "--key", "x", "--rate", "20/s").one_line_error(2)
    assert "limit 'step:clitest.rated' has no key function in its code: its one key is ''" in unkeyed, unkeyed
    assert "'x'" not in dev("limits", "describe", "step:clitest.rated").out
    for command in (("describe", "step:clitest.partner"), ("set", "step:clitest.partner", "--rate", "9/s")):
        named = dev("limits", *command).one_line_error(1)
        assert "step clitest.partner's limit is named 'clitest-partner' (its name=)" in named, named


def test_a_paused_rate_only_limit_holds_its_steps_until_it_is_resumed(dev: Dev) -> None:
    """``limits pause`` of a step limit with a rate alone: its steps take no slot, and the pause was kept only at
    the slots, so the command said ``paused`` while every step went on starting at the rate. A step of the paused
    key now waits for the resume as a slot's waiter (listed in order), and starts once it comes."""
    assert dev("start", "clitest.call_paced", "[0]", "--wait", "30").code == 0  # (the limit is in use)
    paused = dev("limits", "pause", "step:clitest.paced")
    assert paused.code == 0 and "paused" in paused.out, paused
    run = dev("start", "clitest.call_paced", "[1]").out.strip()
    until_found(lambda: dev.json("limits", "describe", "step:clitest.paced")["keys"][0]["waiters"],
                "the step waiting for the resume")
    assert dev.json("describe", run)["status"] == "running"
    said = dev("describe", run).out  # (it said "a slot of ... (paused, ...; held by nobody)": a rate has no slots)
    assert ("waits on  step clitest.paced, not started: it waits for the resume of step:clitest.paced (paused: "
            "`awsworld limits resume step:clitest.paced`; place 1 of 1)") in said, said
    assert dev("limits", "resume", "step:clitest.paced").code == 0
    assert dev.json("result", run, "--wait", "30")["output"] == 1
    [key] = dev.json("limits", "describe", "step:clitest.paced")["keys"]
    assert not key["holders"] and not key["waiters"], key  # (the resume's grant holds no slot once it came)


def test_a_key_the_code_here_has_not_used_yet_says_whose_numbers_it_keeps(dev: Dev, tmp_path: Path) -> None:
    """A deploy raised ``concurrency`` 1 to 3 (the shell's code, here a copy of the project with the new number):
    a key only the old code has used keeps its numbers until the new code uses it, and ``limits describe`` said
    ``1 held of 1`` under ``concurrency 3``, a change that read as not taken. The key's line says whose they are."""
    run = dev("start", "clitest.per_customer", '["zed", 1]').out.strip()
    until_found(lambda: dev("limits", "describe", LIMIT, "--key", "zed").out.count("holds"), "zed holding its slot")
    newer = tmp_path / "newer"
    (newer / "src").mkdir(parents=True)
    (newer / "src" / "clitest.py").write_text(textwrap.dedent(WORKFLOWS).replace(
        "Concurrency(1, key=lambda customer, n: customer)", "Concurrency(3, key=lambda customer, n: customer)"))
    here, dev.cwd = dev.cwd, newer
    try:
        text = dev("limits", "describe", LIMIT, "--key", "zed").out
        document = dev.json("limits", "describe", LIMIT, "--key", "zed")
    finally:
        dev.cwd = here
    assert text.startswith(f"{LIMIT}  concurrency 3"), text
    assert ("key 'zed': 1 held of 1 (recorded by the code that used it last; this code's 3 from its next use)"
            in text), text
    assert document["codeHere"] is True and document["concurrency"] == 3
    assert document["keys"][0]["concurrency"] == 1
    plain = dev("limits", "describe", LIMIT, "--key", "zed").out  # (the code that used it: nothing to say)
    assert "key 'zed': 1 held of 1, 0 waiting" in plain, plain
    assert dev("resume", "cli-limits:zed:1", "{}").code == 0
    assert dev.json("result", run, "--wait", "30")["output"] == 1


def test_describing_a_key_nothing_has_used_yet_names_it(dev: Dev) -> None:
    """``limits describe workflow:flow.process_order --key c7``, as How-to: Flow control types it, on a ``dev``
    that has run nothing yet printed the limit's header alone: the key asked about was not mentioned. It has its
    line, saying nothing has used it; ``--json`` lists the keys stored, so none."""
    unused = "workflow:clitest.keyed_unused"
    shown = dev("limits", "describe", unused, "--key", "t9")
    assert shown.code == 0, shown
    assert shown.out.splitlines() == [f"{unused}  concurrency 1",
                                      "  key 't9': nothing has used it yet (0 held of 1, 0 waiting)"], shown.out
    assert dev.json("limits", "describe", unused, "--key", "t9")["keys"] == []


def test_a_rate_only_limit_reads_without_a_concurrency(dev: Dev) -> None:
    """A step limited by a rate alone has no concurrency: ``limits describe`` says so rather than printing
    Python's ``None`` ("concurrency None", "0 held of None")."""
    started = dev("start", "clitest.call_rated", "[7]", "--wait", "30")
    assert started.code == 0 and started.out.splitlines()[1] == "7", started
    text = dev("limits", "describe", "step:clitest.rated").out
    assert "step:clitest.rated  no concurrency, rate 10/m burst 10" in text, text
    assert "key '': 0 held, 0 waiting" in text and "None" not in text, text
    # A rate set at run time shows beside the code's (the header keeps the code's: it once showed nothing else).
    raised = dev("limits", "set", "step:clitest.rated", "--rate", "20/s")
    assert raised.code == 0, raised
    assert "rate 20/s burst 20 (set at run time; the code's 10/m burst 10)" in raised.out, raised.out
    # Every token taken: the key's line says when the next start is free (the starts reserved are no waiters).
    slow = dev("limits", "set", "step:clitest.rated", "--rate", "1/m")
    assert slow.code == 0, slow
    for n in range(2):
        assert dev("start", "clitest.call_rated", f"[{n}]").code == 0
    # (a time on another day than today's, UTC, shows its date: near midnight the next start is tomorrow's)
    next_start = r"(\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d\.\d{3} UTC \(in \d+ (s|min)"
    # Until the second start has reserved its token: the first's alone leaves the bucket refilling from 0 ("0.002
    # token(s)", a describe a tenth of a second after it), which a quick enough describe saw.
    shown = until_found(
        lambda: re.search(r", 0 token\(s\), the next free start " + next_start,
                          text := dev("limits", "describe", "step:clitest.rated").out) and text,
        "the bucket is empty, the second start reserved")
    assert "next free" in shown, shown
    assert dev.json("limits", "describe", "step:clitest.rated")["keys"][0]["nextStart"] is not None
    assert dev("limits", "reset", "step:clitest.rated").code == 0


def test_a_restart_forgets_the_starts_its_lost_messages_had_reserved(dev: Dev, project: Path) -> None:
    """``dev --state`` does not save the queue, so a step waiting for its reserved start loses its message and
    reserves again when its run is woken. The restore drops the lost reservations from the bucket: the woken steps
    queue behind the starts that happened, not behind their own old reservations too (with 1 a minute, 4 runs, a
    restart once 3 are reserved: the next free start was 7 minutes after the first start, 3 of them lost)."""
    def next_start(server: Dev) -> datetime | None:
        keys = server.json("limits", "describe", "step:clitest.trickled")["keys"]
        return datetime.fromisoformat(keys[0]["nextStart"]) if keys and keys[0]["nextStart"] else None

    first = Dev(project, project / "state-trickle", dev.runners)
    try:
        began = datetime.now(UTC)
        for n in range(4):
            assert first("start", "clitest.trickle", f"[{n}]").code == 0
        until_found(lambda: (at := next_start(first)) and at >= began + timedelta(minutes=3.5), "4 starts reserved")
    finally:
        assert "state saved" in first.stop()
    restarted = datetime.now(UTC)
    second = Dev(project, project / "state-trickle", dev.runners)
    try:
        assert any("3 unfinished run(s) woken" in line for line in second.banner), second.banner
        # The 3 woken steps reserve 1, 2 and 3 minutes after the restore: the next start is the 4th minute's.
        at = until_found(lambda: (at := next_start(second)) and at >= restarted + timedelta(minutes=3.5) and at,
                    "the woken steps reserved again")
        time.sleep(1)
        assert next_start(second) == at, "no more reservations"
        assert at < restarted + timedelta(minutes=4.5), (at - restarted, "behind the lost reservations")
    finally:
        second.stop()


def test_a_limit_with_a_total_lists_the_totals_use_beside_each_key(dev: Dev) -> None:
    """``Concurrency(total=1, key=tenant)``: a key has no number of its own (``-``), so the row says how much of the
    total is in use, which is why a key holding nothing waits (it once read ``0/-``, "no limit", and nothing more)."""
    holder = dev.json("start", "clitest.export", '"ta"')["runId"]
    until_found(lambda: dev("hooks", holder).out.count("cli-export:ta"), "the first run holds its hook")
    waiting = dev.json("start", "clitest.export", '"tb"')["runId"]
    table = dev("limits").out.splitlines()
    rows = {line.split()[1]: line for line in table if line.startswith("workflow:clitest.export")}
    assert " 1/- (1/1 in all) " in rows["ta"] and " 0/- (1/1 in all)  1 " in rows["tb"], rows
    assert dev("resume", "cli-export:ta", '"go"', "--wait", "30").code == 0
    assert dev("resume", "cli-export:tb", '"go"', "--wait", "30").code == 0
    assert dev.json("result", waiting, "--wait", "30")["output"] == "tb"


def test_a_total_set_to_0_is_undone_by_reset_total_and_the_waiting_run_starts(dev: Dev) -> None:
    """`limits set LIMIT --total 0` shuts every key of a limit with a total, and the page says a `reset` undoes it;
    but `limits reset LIMIT` asked for a key, a key's reset left the total at 0, and only another `set` (knowing
    the code's number) opened it again; `set --total` printed a line for a key '' nothing uses. `reset --total`
    gives the code's total back, and the run that waited starts."""
    name = "workflow:clitest.export"
    shut = dev("limits", "set", name, "--total", "0")
    assert shut.code == 0 and shut.out.startswith(f"{name}  no concurrency, total 0") and "key" not in shut.out, shut
    waiting = dev.json("start", "clitest.export", '"tz"')["runId"]
    until_found(lambda: dev.json("describe", waiting)["waitingOn"], "the run waits on the total")
    # (it said "held by nobody", and nothing of why)
    assert (f"a slot of {name} key 'tz' (closed: its total is 0 until `limits set --total` raises it or `limits "
            "reset --total`, place 1 of 1; held by nobody)") in dev("describe", waiting).out
    assert dev.json("limits", "reset", name, "--key", "tz")["total"] == 0  # a key's reset leaves the total
    keyless = dev("limits", "reset", name).one_line_error(2)
    assert "a total: total=, --total" in keyless, keyless
    reset = dev("limits", "reset", name, "--total")
    assert reset.code == 0 and reset.out.startswith(f"{name}  no concurrency, total 1\n"), reset
    assert "has no total" in dev("limits", "reset", LIMIT, "--total").one_line_error(2)
    until_found(lambda: dev("hooks", waiting).out.count("cli-export:tz"), "the waiting run starts once reset")
    assert dev("resume", "cli-export:tz", '"go"', "--wait", "30").code == 0
    assert dev.json("result", waiting, "--wait", "30")["output"] == "tz"


def test_a_start_its_busy_key_skips_says_so(dev: Dev) -> None:
    """``on_busy="skip"``: a start while the key's run holds it is recorded cancelled at once. ``start`` says so
    (exit 1, the reason on stderr, as with ``--wait``); it printed a bare run id, exit 0, as for a run started."""
    holder = dev("start", "clitest.sync", '"s1"')
    assert holder.code == 0 and holder.err == "", holder
    until_found(lambda: dev("hooks", holder.out.strip()).out.count("cli-sync:s1"), "the first run holds its hook")
    skipped = dev("start", "clitest.sync", '"s1"')
    assert skipped.code == 1 and skipped.out.startswith("wrun_"), skipped
    assert skipped.err == (f"cancelled: skipped: workflow:clitest.sync key 's1' is busy (held by run "
                           f"{holder.out.strip()})\n"), skipped
    document = dev("start", "clitest.sync", '"s1"', "--json")
    assert document.code == 1 and json.loads(document.out)["status"] == "cancelled", document
    assert json.loads(document.out)["cancelReason"].startswith("skipped: workflow:clitest.sync key 's1' is busy")
    assert dev("resume", "cli-sync:s1", '"go"', "--wait", "30").code == 0


def test_a_key_set_to_0_reads_closed_and_a_reset_while_a_run_waits_starts_it(dev: Dev) -> None:
    """`limits set ... --concurrency 0` (meant as "no limit", say) shut the key, and `limits` still said `open`:
    the list and describe say `closed` and the way out; a reset while a run waits on the key starts that run."""
    assert dev("limits", "set", LIMIT, "--key", "zoe", "--concurrency", "0").code == 0
    waiting = dev.json("start", "clitest.per_customer", '["zoe", 1]')["runId"]
    until_found(lambda: dev.json("describe", waiting)["waitingOn"], "the run waits on the key")
    assert (f"waits on  its start: a slot of {LIMIT} key 'zoe' (closed: its concurrency is 0 until `limits set` "
            "raises it or `limits reset`, place 1 of 1; held by nobody)") in dev("describe", waiting).out
    rows = [line for line in dev("limits").out.splitlines() if line.startswith(LIMIT) and " zoe " in line]
    assert len(rows) == 1 and rows[0].split()[2:] == ["0/0", "1", "-", "closed,", "overridden"], rows
    shown = dev("limits", "describe", LIMIT, "--key", "zoe").out
    assert "0 held of 0 (set at run time; the code's 1), 1 waiting, closed: nothing starts until a `limits set` " \
        "raises it or `limits reset`" in shown, shown
    assert dev.json("limits", "reset", LIMIT, "--key", "zoe")["keys"][0]["concurrency"] == 1
    until_found(lambda: dev("hooks", waiting).out.count("cli-limits:zoe:1"), "the waiting run starts once reset")
    assert "open" in next(line for line in dev("limits").out.splitlines() if " zoe " in line)
    assert dev("resume", "cli-limits:zoe:1", '"go"', "--wait", "30").code == 0
    assert dev.json("result", waiting, "--wait", "30")["output"] == 1


def test_runs_and_describe_say_a_pending_run_is_queued_behind_its_limit_and_for_which(dev: Dev) -> None:
    """A run waiting for its workflow's slot listed as a plain ``pending``, as a run nothing will ever start does:
    ``runs`` has a QUEUED FOR column (``--json``: ``queued``, the status stays ``pending``), and ``describe``'s status
    line says it too, with the key, the slots held of the limit and the run's place. A pending run that holds its
    slot (granted, its first delivery on the way) is not queued."""
    holder = dev.json("start", "clitest.per_customer", '["kim", 1]')["runId"]
    until_found(lambda: dev("hooks", holder).out.count("cli-limits:kim:1"), "the first run holds its hook")
    first, second = (dev.json("start", "clitest.per_customer", f'["kim", {n}]')["runId"] for n in (2, 3))
    listed = {r["runId"]: r for r in dev.json("runs", "--workflow", "clitest.per_customer", "--limit", "100")}
    assert listed[holder]["status"] == "running" and listed[holder]["queued"] is None
    for run, place in ((first, 1), (second, 2)):
        assert listed[run]["status"] == "pending", listed[run]
        assert listed[run]["queued"] == {"limit": LIMIT, "key": "kim", "place": place, "of": 2, "held": 1,
                                         "concurrency": 1, "heldInAll": None, "total": None, "paused": False}
    table = dev("runs", "--workflow", "clitest.per_customer", "--limit", "100").out.splitlines()
    assert table[0].split()[-2:] == ["QUEUED", "FOR"], table[0]
    row = next(line for line in table if line.startswith(second))
    assert row.split(None, 2)[1] == "pending" and row.endswith(f"{LIMIT} key 'kim' (1/1 held, place 2 of 2)"), row
    assert next(line for line in table if line.startswith(holder)).split()[1] == "running"

    described = dev.json("describe", first)
    assert described["status"] == "pending" and described["queued"] == listed[first]["queued"]
    # (its deployment once read null here beside a filled "deployment": both name the code it is pinned to)
    assert described["deploymentId"] == described["deployment"] and described["deploymentId"].startswith("dev-")
    text = dev("describe", first).out
    assert f"status    pending: queued for a slot of {LIMIT} key 'kim' (1/1 held, place 1 of 2)\n" in text, text
    early = dev("result", second).one_line_error(1)
    assert f"run {second} is still pending, queued for a slot of {LIMIT} key 'kim' (1/1 held, place 2 of 2): no " \
        "result yet" in early, early

    # A limit with a total: the total's use is what keeps a key with no holder of its own waiting.
    exporter = dev.json("start", "clitest.export", '"tq1"')["runId"]
    until_found(lambda: dev("hooks", exporter).out.count("cli-export:tq1"), "the export holds the total")
    waiting = dev.json("start", "clitest.export", '"tq2"')["runId"]
    assert dev.json("describe", waiting)["queued"] == {
        "limit": "workflow:clitest.export", "key": "tq2", "place": 1, "of": 1, "held": 0, "concurrency": None,
        "heldInAll": 1, "total": 1, "paused": False}
    assert "queued for a slot of workflow:clitest.export key 'tq2' (1/1 in all, place 1 of 1)" in \
        dev("describe", waiting).out
    for token in ("cli-export:tq1", "cli-export:tq2", "cli-limits:kim:1", "cli-limits:kim:2", "cli-limits:kim:3"):
        assert dev("resume", token, '"go"', "--wait", "30").code == 0
    assert dev.json("result", second, "--wait", "30")["output"] == 3
    assert dev.json("describe", second)["queued"] is None


def test_limits_describe_names_step_holders_and_waiters_as_describe_does(dev: Dev, tmp_path: Path) -> None:
    """A step limit's holders and waiters were printed by their stored ids (``s:wrun_…:step_1``), which no command
    takes; ``describe`` says ``step step_1 of run wrun_…``: ``limits describe`` says it so too, and its JSON gives the
    run and step of each (a step holder's ``runId`` was null)."""
    gate = tmp_path / "gate"
    run = dev.json("start", "clitest.exclusives", json.dumps(str(gate)))["runId"]
    shown = until_found(
        lambda: (text := dev("limits", "describe", "step:clitest.exclusive").out).count("  1.  ") and text,
        "one step holds the slot, the other waits")
    assert re.search(rf"\n    holds  step step_\d+ of run {run}  since ", shown), shown
    assert re.search(rf"\n       1\.  step step_\d+ of run {run}  priority 0, since ", shown), shown
    assert "s:wrun_" not in shown, shown
    [key] = dev.json("limits", "describe", "step:clitest.exclusive")["keys"]
    [holder], [waiter] = key["holders"], key["waiters"]
    assert (holder["runId"], waiter["runId"]) == (run, run)
    assert holder["holder"] == f"s:{run}:{holder['stepId']}" and waiter["holder"] == f"s:{run}:{waiter['stepId']}"
    assert holder["stepId"] != waiter["stepId"]
    gate.write_text("open")
    assert dev.json("result", run, "--wait", "30")["output"] == 3


def _queued_from_outside(dev: Dev, tmp_path: Path, workflow: str, token_prefix: str
                         ) -> tuple[str, str, Callable[..., Any]]:
    """A run of ``workflow`` (one at a time per key) holds key ``una`` on its hook ``<token_prefix>:una:1``, and a
    second is started from where the code is not (the CLI outside the project: no ``AWSWORLD_MODULES``): the
    holder's id, the second's, and the CLI run from outside."""
    holder = dev.json("start", workflow, '["una", 1]')["runId"]
    until_found(lambda: dev("hooks", holder).out.count(f"{token_prefix}:una:1"), "the first run holds its hook")
    bare = {k: v for k, v in dev.env.items() if k != "AWSWORLD_MODULES"}

    def outside(*args: str) -> Any:
        return dev.runners[0](args, bare, tmp_path)

    started = outside("start", workflow, '["una", 2]', "--json")
    assert started.code == 0, started
    return holder, json.loads(started.out)["runId"], outside


def test_a_run_started_without_the_code_reads_queued_once_its_first_delivery_queued_it(dev: Dev,
                                                                                       tmp_path: Path) -> None:
    """A start from where the workflow's code is not (a script's ``Client(AWSWorld())``, the CLI outside the
    project) records no slot: its first delivery computes the key and queues the run, writing nothing on it. Such a
    run read a plain ``pending`` in ``runs`` and ``describe`` said it waited for ``its first delivery``: both find
    it among the waiters of its workflow's limit."""
    holder, waiting, outside = _queued_from_outside(dev, tmp_path, "clitest.per_customer", "cli-limits")
    queued = until_found(lambda: {r["runId"]: r for r in dev.json("runs", "--workflow", "clitest.per_customer",
                                                              "--limit", "100")}[waiting]["queued"],
                    "its first delivery queues it")
    assert queued == {"limit": LIMIT, "key": "una", "place": 1, "of": 1, "held": 1, "concurrency": 1,
                      "heldInAll": None, "total": None, "paused": False}
    shown = outside("describe", waiting).out
    assert f"status    pending: queued for a slot of {LIMIT} key 'una' (1/1 held, place 1 of 1)" in shown, shown
    assert f"waits on  its start: a slot of {LIMIT} key 'una' (place 1 of 1; held by run {holder})" in shown, shown
    assert "first delivery" not in shown, shown
    for n in (1, 2):
        assert dev("resume", f"cli-limits:una:{n}", '"go"', "--wait", "30").code == 0
    assert dev.json("result", waiting, "--wait", "30")["output"] == 2


def test_a_run_started_without_the_code_reads_queued_under_a_limit_with_another_name(dev: Dev,
                                                                                   tmp_path: Path) -> None:
    """The same under a limit named otherwise (``Concurrency(name="clitest-orders")``): the start without the code
    knows no name either, and the run was looked for among the waiters of ``workflow:clitest.named_limit`` only,
    so it read a plain ``pending`` and ``describe`` said it waited for its first delivery."""
    holder, waiting, outside = _queued_from_outside(dev, tmp_path, "clitest.named_limit", "cli-named")
    queued = until_found(lambda: {r["runId"]: r for r in dev.json("runs", "--workflow", "clitest.named_limit",
                                                              "--limit", "100")}[waiting]["queued"],
                         "its first delivery queues it")
    assert queued == {"limit": "clitest-orders", "key": "una", "place": 1, "of": 1, "held": 1, "concurrency": 1,
                      "heldInAll": None, "total": None, "paused": False}
    listed = outside("runs", "--workflow", "clitest.named_limit").out
    assert "QUEUED FOR" in listed and "clitest-orders key 'una' (1/1 held, place 1 of 1)" in listed, listed
    shown = outside("describe", waiting).out
    assert "status    pending: queued for a slot of clitest-orders key 'una' (1/1 held, place 1 of 1)" in shown, shown
    assert f"waits on  its start: a slot of clitest-orders key 'una' (place 1 of 1; held by run {holder})" in shown, \
        shown
    assert "first delivery" not in shown, shown
    for n in (1, 2):
        assert dev("resume", f"cli-named:una:{n}", '"go"', "--wait", "30").code == 0
    assert dev.json("result", waiting, "--wait", "30")["output"] == 2


def test_limits_lists_busy_keys_and_counts_the_idle_ones(dev: Dev) -> None:
    """A pool stays stored 30 days after its last use, so ``awsworld limits`` listed every key used in that time:
    with a key per customer, thousands of ``0/1 open`` lines around the few that hold or wait. It lists the keys that
    hold, wait, are paused, set or shut, or have no token to give, and says how many idle ones it left out;
    ``--all`` lists them too (``--json``: ``idleKeysHidden``)."""
    quiet = "workflow:clitest.quiet"
    for customer in ("q1", "q2", "q3"):
        assert dev("start", "clitest.quiet", f'"{customer}"', "--wait", "30").code == 0
    holder = dev.json("start", "clitest.per_customer", '["busy-q", 1]')["runId"]
    until_found(lambda: dev("hooks", holder).out.count("cli-limits:busy-q:1"), "the run holds its key's slot")
    table = dev("limits").out.splitlines()
    rows = [line.split() for line in table if line.startswith(quiet)]
    assert rows == [[quiet, "-", "0", "0", "-", "idle", "(3", "keys)"]], table
    assert any(line.startswith(LIMIT) and " busy-q " in line for line in table), table
    footer = table[-1]
    assert re.fullmatch(r"\d+ idle keys? not listed \(nothing holds, waits, is paused or set there\): `awsworld "
                        r"limits --all` lists them, `awsworld limits describe LIMIT` one limit's", footer), footer
    assert int(footer.split()[0]) >= 3
    every = dev("limits", "--all").out.splitlines()
    assert sorted(line.split()[1] for line in every if line.startswith(quiet)) == ["q1", "q2", "q3"], every
    assert not any("not listed" in line for line in every), every
    assert dev("limits", "list", "--all").out.splitlines() == every
    [document] = [d for d in dev.json("limits") if d["limit"] == quiet]
    assert document["keys"] == [] and document["idleKeysHidden"] == 3, document
    [document] = [d for d in dev.json("limits", "--all") if d["limit"] == quiet]
    assert sorted(k["key"] for k in document["keys"]) == ["q1", "q2", "q3"] and document["idleKeysHidden"] == 0
    assert dev("resume", "cli-limits:busy-q:1", '"go"', "--wait", "30").code == 0
