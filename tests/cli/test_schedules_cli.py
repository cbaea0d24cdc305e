"""``awsworld schedules`` as processes, against an ``awsworld dev`` process whose module declares a schedule:
dev's ticks store it and fire it on the real clock; create, list, describe, pause, resume, trigger, backfill
and delete from the command line; ``awsworld runs`` says which schedule started a run."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from .test_cli import Dev, project_of, serving, until_found

WORKFLOWS = '''
from awsworld import Schedule, schedule_info, sleep, workflow

OFFSET = {offset}  # seconds past each minute: the first tick falls soon after dev starts (FIRST_TICK_AFTER)


@workflow(name="clitest.minutely", schedule=Schedule(id="minutely", every="1m", offset=OFFSET, args=("m",)))
async def minutely(label: str) -> dict:
    info = schedule_info()
    return {"label": label, "tick": None if info is None else info.tick.isoformat()}


@workflow(name="clitest.report")
async def report(region: str, size: int = 0) -> str:
    return f"{region}:{size}"


@workflow(name="clitest.held")
async def held() -> None:
    await sleep(3600)
'''


FIRST_TICK_AFTER = 10
"""Seconds, at least, from writing the project to the minutely schedule's first tick: about what dev's start and the
lifecycle test before the tick's test take (7 s alone, 15 s under CI's load: measured). A tick at a fixed second
past the minute kept that test waiting 0 to 60 s (30 on average) for it."""


@pytest.fixture(scope="module")
def offset() -> int:
    """The minutely schedule's offset, reckoned when the project is written (not when this module is collected):
    on one of dev's ticks (every 10 s, on :00, :10, ...), so the run starts at the tick it is due."""
    return math.ceil((time.time() + FIRST_TICK_AFTER) / 10) * 10 % 60


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, offset: int) -> Path:
    return project_of(tmp_path_factory, "schedules", WORKFLOWS.replace("{offset}", str(offset)))


@pytest.fixture(scope="module")
def dev(project: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dev]:
    yield from serving(project, tmp_path_factory, "schedules")


def _scheduled_runs(dev: Dev, schedule_id: str) -> list[dict[str, Any]]:
    return [r for r in dev.json("runs", "--limit", "100") if (r.get("schedule") or {}).get("id") == schedule_id]


def test_the_schedule_lifecycle_from_the_command_line(dev: Dev) -> None:
    created = dev.json("schedules", "create", "nightly-eu", "clitest.report", "--cron", "0 2 * * *",
                    "--timezone", "Europe/Berlin", "--args", '["eu"]', "--kwargs", '{"size": 3}')
    assert (created["cron"], created["timezone"], created["source"], created["overlap"]) == (
        "0 2 * * *", "Europe/Berlin", "api", "skip")
    assert (created["args"], created["kwargs"]) == (["eu"], {"size": 3}), "create shows what its runs get, too"
    refused = dev("schedules", "create", "nightly-eu", "clitest.report", "--every", "1h", "--args", "[\"us\"]")
    assert "exists already (api: clitest.report, cron '0 2 * * *' Europe/Berlin)" in refused.one_line_error(1), \
        "the refusal writes the schedule as `schedules list` does"
    bad = dev("schedules", "create", "bad", "clitest.report", "--cron", "0 25 * * *")
    assert "not valid" in bad.one_line_error(2)
    never = dev("schedules", "create", "never", "clitest.report", "--cron", "0 2 30 2 *", "--args", '["eu"]')
    assert "never fires: no month it names" in never.one_line_error(2), "February 30th"
    wrong = dev("schedules", "create", "wrong", "clitest.report", "--every", "1h", "--args", '["eu", 1, 2]')
    assert "report" in wrong.one_line_error(2), "the arguments are checked against the workflow (AWSWORLD_MODULES)"
    offset = dev("schedules", "create", "offset", "clitest.report", "--cron", "0 2 * * *", "--offset", "5m")
    assert "--offset applies to --every" in offset.one_line_error(2), "not dropped in silence"
    # ... but an offset of 0 is none: it was refused as one given (a script passing its default along, say)
    zero = dev.json("schedules", "create", "zero", "clitest.report", "--cron", "0 2 * * *", "--offset", "0",
                    "--args", '["eu"]')
    assert (zero["cron"], zero["offsetSeconds"]) == ("0 2 * * *", None), zero
    assert dev("schedules", "delete", "zero").code == 0
    every = dev("schedules", "create", "every", "clitest.report", "--every", "1h", "--args", '["eu"]',
                "--catchup", "all")
    assert "needs --overlap allow_all" in every.one_line_error(2), "only the oldest missed tick would have run"
    spaced = dev("schedules", "create", "bad id", "clitest.report", "--every", "1h", "--args", '["eu"]')
    assert "schedule id" in spaced.one_line_error(2), "a malformed id is a usage error, as a limit's input is"
    listed = [s["scheduleId"] for s in dev.json("schedules", "list")]
    assert listed == ["minutely", "nightly-eu"], "none of them was written"

    described = dev.json("schedules", "describe", "nightly-eu", "--upcoming", "3")
    first = datetime.fromisoformat(described["upcoming"][0].replace("Z", "+00:00"))
    assert first.minute == 0 and first.hour in (0, 1), "02:00 Berlin is 00:00Z or 01:00Z"
    assert len(described["upcoming"]) == 3
    assert (described["args"], described["kwargs"]) == (["eu"], {"size": 3}), "what its runs get (shown nowhere)"
    text = dev("schedules", "describe", "nightly-eu")
    assert text.code == 0 and "fires at" in text.out and "0 fired" in text.out, text
    assert '  arguments             ["eu"] {"size":3}\n' in text.out, text.out

    paused = dev.json("schedules", "pause", "nightly-eu", "--note", "freeze")
    assert paused["paused"] and paused["note"] == "freeze" and paused["nextAt"] is None
    assert "paused" in dev("schedules", "list").out
    assert dev.json("schedules", "describe", "nightly-eu")["upcoming"] == []
    resumed = dev.json("schedules", "resume", "nightly-eu")
    assert not resumed["paused"] and resumed["nextAt"] == described["upcoming"][0]

    triggered = dev.json("schedules", "trigger", "nightly-eu")
    assert triggered["outcome"] == "started"
    result = dev("result", triggered["runId"], "--wait", "30")
    assert (result.code, result.out.strip()) == (0, '"eu:3"')
    said = dev("schedules", "describe", "nightly-eu").out
    assert f"\n  last run              {triggered['runId']}\n  last tick             " in said, \
        "words for people (they were the JSON's keys: lastRunId, lastTick)"

    now = datetime.now(UTC)
    start, end = (now - timedelta(days=3)).strftime("%Y-%m-%dT%H:%MZ"), (now - timedelta(hours=1)).isoformat()
    filled = dev.json("schedules", "backfill", "nightly-eu", "--start", start, "--end", end)
    assert len(filled["runIds"]) in (2, 3)  # the nights in the range
    assert filled["started"] == filled["runIds"]
    again = dev.json("schedules", "backfill", "nightly-eu", "--start", start, "--end", end)
    assert again["runIds"] == filled["runIds"], "a tick backfilled again keeps its run"
    # ... and says so: the text printed the same as the first time, and nothing said that it started nothing.
    assert again["started"] == []
    said = dev("schedules", "backfill", "nightly-eu", "--start", start, "--end", end).out.splitlines()
    assert said[0] == (f"{len(filled['runIds'])} tick(s) in the range: 0 run(s) started, {len(filled['runIds'])} "
                       "had theirs already (a tick's run is made once)"), said
    assert said[1].startswith(f"{filled['runIds'][0]}  tick ") and "  had its run already (backfill, " in said[1]
    empty = dev("schedules", "backfill", "nightly-eu", "--start", "2026-03-01T03:00Z", "--end", "2026-03-01T04:00Z")
    assert empty.out == ("no tick in [2026-03-01T03:00:00+00:00, 2026-03-01T04:00:00+00:00): nothing started (it "
                         "fires cron '0 2 * * *' Europe/Berlin)\n"), empty
    future = dev("schedules", "backfill", "nightly-eu", "--start", start, "--end",
                 (now + timedelta(days=1)).isoformat())
    assert "after now" in future.one_line_error(1)
    for run_id in filled["runIds"]:
        assert dev("result", run_id, "--wait", "30").out.strip() == '"eu:3"'
    runs = _scheduled_runs(dev, "nightly-eu")
    assert sorted(r["schedule"]["trigger"] for r in runs) == ["backfill"] * len(filled["runIds"]) + ["manual"]
    listing = dev("runs", "--workflow", "clitest.report")
    assert listing.code == 0 and "schedule nightly-eu" in listing.out and "(backfill)" in listing.out, listing
    described_run = dev("describe", triggered["runId"])
    assert "schedule  nightly-eu" in described_run.out and "(manual)" in described_run.out, described_run

    assert dev("schedules", "delete", "nightly-eu").code == 0
    gone = dev("schedules", "describe", "nightly-eu")
    assert "no schedule" in gone.one_line_error(1)


def test_dev_stores_the_declared_schedule_and_fires_it_on_the_real_clock(dev: Dev, offset: int) -> None:
    def declared() -> Any:
        return [s for s in dev.json("schedules", "list") if s["scheduleId"] == "minutely"]

    offset_text = f" offset {offset}s" if offset else ""
    assert f"  workflow clitest.minutely  schedule minutely: every 1m{offset_text}\n" in dev.banner, \
        "the banner says which schedules dev fires"
    assert "  workflow clitest.report\n" in dev.banner
    [stored] = until_found(declared, "dev's first tick, as it starts, stores the declaration", 30, every=1)
    assert (stored["source"], stored["module"], stored["everySeconds"], stored["offsetSeconds"]) == (
        "code", "clitest", 60, offset)
    refused = dev("schedules", "delete", "minutely")
    assert "declared in code" in refused.one_line_error(1)
    # The schedule's next tick (``offset`` seconds past a minute; dev's ticks run on :00, :10, ...): one run a tick
    # (on a loaded machine the next minute's may be there too by the time the listing is read).
    runs = until_found(lambda: [r for r in _scheduled_runs(dev, "minutely") if r["schedule"]["trigger"] == "tick"],
                       "a run started by the schedule's tick", 90, every=1)
    ticks = [r["schedule"]["tick"] for r in runs]
    assert len(ticks) == len(set(ticks)), f"one run a tick: {ticks}"
    run = min(runs, key=lambda r: r["schedule"]["tick"])
    tick = datetime.fromisoformat(run["schedule"]["tick"].replace("Z", "+00:00"))
    assert tick.second == offset and tick.microsecond == 0
    result = dev("result", run["runId"], "--wait", "30")
    assert json.loads(result.out) == {"label": "m", "tick": tick.isoformat()}
    paused = dev.json("schedules", "pause", "minutely")
    assert paused["paused"] and paused["fired"] >= 1


def test_a_trigger_that_starts_nothing_names_the_run_in_the_way_and_the_way_round_it(dev: Dev) -> None:
    """`schedules trigger` while the last run goes on printed "skipped (the overlap policy: the last run is still
    going)": not which run, nor how to start one anyway."""
    assert dev("schedules", "create", "held", "clitest.held", "--every", "1h").code == 0
    first = dev.json("schedules", "trigger", "held")
    assert first["outcome"] == "started", first
    skipped = dev("schedules", "trigger", "held")
    assert skipped.code == 0 and skipped.out == (
        f"skipped: {first['runId']} is still going and the overlap policy is skip; nothing started (--overlap "
        "allow_all starts one beside it, buffer_one once it ends)\n"), skipped
    buffered = dev("schedules", "trigger", "held", "--overlap", "buffer_one")
    waiting = dev.json("schedules", "describe", "held")["buffered"]
    assert buffered.out == f"buffered: {waiting} starts at the first tick after {first['runId']} ends (overlap " \
        "buffer_one)\n", buffered
    assert dev("schedules", "delete", "held").code == 0
    assert dev("cancel", first["runId"]).code == 0


def test_a_schedule_no_longer_declared_shows_no_next_fire_time(dev: Dev, project: Path) -> None:
    """Found by a walk: a schedule whose declaration was removed from the code while dev ran is ``orphaned`` and
    fires nothing, but ``schedules list`` gave it a NEXT fire time ("2026-12-31 09:00:00 Europe/Paris ... (in 23 d
    22 h)"), as did ``describe``'s first line and ``--json``'s ``nextAt``. Last in this module: it edits the code."""
    source = project / "src" / "clitest.py"
    source.write_text(source.read_text().replace(
        'schedule=Schedule(id="minutely", every="1m", offset=OFFSET, args=("m",))', ""))

    def orphaned() -> Any:
        return [s for s in dev.json("schedules", "list") if s["scheduleId"] == "minutely" and s["orphaned"]]

    [listed] = until_found(orphaned, "dev's reload and its next tick marking the schedule orphaned", 60, every=1)
    assert listed["nextAt"] is None
    described = dev.json("schedules", "describe", "minutely")
    assert (described["nextAt"], described["upcoming"]) == (None, [])
    [row] = [line for line in dev("schedules", "list").out.splitlines() if line.startswith("minutely ")]
    assert row.split()[1] == "orphaned" and row.endswith(" -"), row
    first = dev("schedules", "describe", "minutely").out.splitlines()[0]
    assert first.startswith("minutely  orphaned clitest.minutely  every 1m") and first.endswith("  next -"), first


def test_catchup_all_without_allow_all_is_refused_in_the_clis_own_flags(tmp_path: Path) -> None:
    """``awsworld schedules create ... --catchup all`` (the default ``--overlap skip``) was refused in the Python
    spelling, ``catchup='all' ... needs overlap='allow_all'``: the refusal now names the flags the command takes.
    Refused before any World is reached (none runs here), nothing written."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "awsworld.cli", "schedules", "create", "hourly", "some.flow",
                           "--every", "1h", "--catchup", "all", "--overlap", "buffer_one"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, ""), done
    assert done.stderr.strip() == (
        "awsworld schedules: --catchup all starts every missed tick at once, which needs --overlap allow_all (they "
        "run side by side); with --overlap buffer_one the first missed tick's run would turn the others away, and "
        "only the oldest would run. Give --overlap allow_all, or --catchup latest (the default: the most recent "
        "missed tick only) (hint: see `awsworld schedules create --help`)"), done.stderr


@pytest.mark.parametrize(("flags", "said"), [
    (["--every", "15m", "--catchup-window", "10s"], "--catchup-window must be at least 60 s (a tick may be noticed "
                                                    "up to a minute late), got 10 s"),
    (["--every", "15m", "--timezone", "Europe/Berlin"], "--every is absolute (UTC): for local wall-clock times use "
                                                        "a cron expression (--cron) with --timezone"),
    (["--every", "15m", "--offset", "1.5s"], "--offset must be whole seconds, got 1.5 s"),
])
def test_schedule_refusals_name_the_clis_flags(tmp_path: Path, flags: list[str], said: str) -> None:
    """``Schedule``'s other refusals spoke Python from ``awsworld schedules create`` too (``catchup_window must be
    at least 60 s`` where the flag is ``--catchup-window``): its rules (schedules/model.py, ``spec_of``,
    ``window_of``) are spelled by their caller, as ``catchup_refusal`` is. ``Schedule(...)`` keeps its keywords."""
    import subprocess
    import sys

    from awsworld import Schedule

    done = subprocess.run([sys.executable, "-m", "awsworld.cli", "schedules", "create", "s1", "some.flow", *flags],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, ""), done
    assert done.stderr.strip() == f"awsworld schedules: {said} (hint: see `awsworld schedules create --help`)", \
        done.stderr
    with pytest.raises(ValueError, match=r"^catchup_window must be at least 60 s"):
        Schedule(every="15m", catchup_window="10s")
