"""``awsworld deployments`` and ``awsworld upgrade`` as processes, against ``awsworld dev`` as a process.

Runs sleep on the first version of the code; an edit that changes only a step's body makes a second version, which
dev loads while the first keeps its runs. ``deployments`` lists both (``draining`` with its runs, ``live``);
``retire`` refuses the one that holds runs and the newest, and writes nothing; ``upgrade --to`` a version whose
code is not the code on the operator's machine is refused; ``upgrade --deployment`` replays each run against the
code on the machine (the second version's) and moves it; the runs then finish on the new step body; the drained
version is retired (``retire``), and ``prune`` has nothing left to do. An edit the runs cannot replay (a step's
arguments changed) is refused by ``upgrade`` run by run: exit 1, the run stays where it is. A ``pinned=False`` run
is replayed and woken by ``upgrade`` but not pinned.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

from .test_cli import Runner
from .test_dev_reload import WatchedDev, runner, until

__all__ = ["runner"]

SHOP = '''
from datetime import timedelta

from awsworld import sleep, step, workflow


@step
async def wrap(order_id: str) -> str:
    return f"v1 wrapped {order_id}"


@step
async def price(order_id: str, amount: float) -> float:
    return amount


@workflow
async def order(order_id: str, amount: float) -> list[object]:
    charged = await price(order_id, amount)
    await sleep(timedelta(days=1))
    return [charged, await wrap(order_id)]


@workflow(pinned=False)
async def nap(order_id: str) -> str:
    await sleep(timedelta(days=1))
    return await wrap(order_id)
'''
BODY_ONLY = ('return f"v1 wrapped {order_id}"', 'return f"v2 wrapped {order_id}"')
ARGUMENTS = ("charged = await price(order_id, amount)", "charged = await price(order_id, amount + 1)")


def _sleeping(dev: WatchedDev, run_id: str) -> None:
    until(lambda: dev("describe", run_id, "--json"),
          lambda r: [w["kind"] for w in json.loads(r.out)["waitingOn"]] == ["sleep"])


def test_upgrade_moves_runs_after_a_replay_and_a_drained_deployment_is_retired(tmp_path: Path,
                                                                              runner: Runner) -> None:
    source = tmp_path / "src" / "shopdep.py"
    source.parent.mkdir()
    source.write_text(textwrap.dedent(SHOP))
    dev = WatchedDev(tmp_path, tmp_path / "state", [runner], module="shopdep")
    try:
        v1 = dev.banner_deployment()
        runs = [dev("start", "shopdep.order", json.dumps([f"A-{i}", 10.0 + i])).out.strip() for i in range(2)]
        napping = dev("start", "shopdep.nap", '["N-1"]').out.strip()  # pinned=False
        for run_id in [*runs, napping]:
            _sleeping(dev, run_id)

        mark_at = len(dev.lines)
        source.write_text(source.read_text().replace(*BODY_ONLY))
        second = dev.wait_for(r"^new runs start on (dev-[0-9a-f]{10});", mark_at)
        v2 = second.split()[4].rstrip(";")
        dev.wait_for(rf"; 2 on {v1}, whose code is kept$", mark_at)

        listed = dev("deployments")
        assert listed.code == 0, listed
        table = {line.split()[0]: line.split()[1:3] for line in listed.out.splitlines()[1:]}
        assert table[v1][0] == "draining" and table[v2][0] == "live", listed.out
        document = json.loads(dev("deployments", "--json").out)
        rows = {row["deploymentId"]: row for row in document["deployments"]}
        assert rows[v1]["unfinishedRuns"] == 2 and sorted(rows[v1]["runs"]) == sorted(runs), rows

        held = dev("deployments", "retire", v1)
        assert held.one_line_error(1).startswith(f"awsworld deployments: deployment {v1!r} still holds 2 unfinished "
                                                 f"run(s)"), held
        assert "nothing was written" in held.err
        newest = dev("deployments", "retire", v2)
        assert f"deployment {v2!r} is the newest" in newest.one_line_error(1)
        mismatch = dev("upgrade", runs[0], "--to", v1)
        assert mismatch.code == 1 and "are not deployment" in mismatch.err and "nothing was written" in mismatch.err

        typo = dev("upgrade", "--deployment", v1[:-1])  # it said "0 of 0 run(s) moved to ..." and exited 0
        assert typo.one_line_error(1) == (f"awsworld upgrade: no deployment {v1[:-1]!r} is registered (registered: "
                                          f"{v1}, {v2}), and no unfinished run is pinned to it: nothing was moved "
                                          "(hint: `awsworld deployments` lists them, with the runs each holds)"), typo
        moved = dev("upgrade", "--deployment", v1)
        assert moved.code == 0, moved
        lines = moved.out.splitlines()
        assert lines[-1] == f"2 of 2 run(s) moved to {v2}", moved.out
        assert all(re.fullmatch(rf"moved wrun_\w+ \(shopdep\.order\) from {v1} to {v2}: replayed, and woken there",
                                line) for line in lines[:-1]), moved.out
        # A pinned=False run is replayed and woken, and stays unpinned: it once was pinned to v2 and stayed there.
        unpinned = dev("upgrade", napping)
        assert unpinned.code == 0, unpinned
        assert unpinned.out.splitlines() == [
            f"{napping} (shopdep.nap) replays on {v2}'s code and was woken; not moved: it is pinned to no deployment "
            "(pinned=False, started on latest, or before pinning): it runs on the newest code and stays unpinned",
            f"0 of 1 run(s) moved to {v2}; 1 unpinned run(s) replayed and woken, left unpinned"], unpinned.out
        assert json.loads(dev("describe", napping, "--json").out)["deployment"] is None
        assert json.loads(dev("deployments", "--json").out)["unpinnedRuns"] == 1
        for index, run_id in enumerate(runs):
            assert dev("skip", run_id).code == 0
            done = dev("result", run_id, "--wait", "30")
            assert json.loads(done.out.splitlines()[-1]) == [10.0 + index, f"v2 wrapped A-{index}"], done

        retired = dev("deployments", "retire", v1)
        assert retired.code == 0 and retired.out.strip() == f"retired {v1}", retired
        after = {row["deploymentId"]: row["status"] for row in json.loads(dev("deployments", "--json").out)[
            "deployments"]}
        assert after == {v1: "retired", v2: "live"}, after
        pruned = dev("deployments", "prune", "--keep", "1")
        assert pruned.code == 0 and pruned.out.strip().endswith("0 drained deployment(s) retired; the newest 1 kept")

        # An edit the runs cannot replay: the upgrade refuses it run by run and moves nothing.
        stuck = dev("start", "shopdep.order", '["A-9", 1.0]').out.strip()
        _sleeping(dev, stuck)
        mark_at = len(dev.lines)
        source.write_text(source.read_text().replace(*ARGUMENTS))
        dev.wait_for(r"^new runs start on ", mark_at)
        refused = dev("upgrade", stuck)
        assert refused.code == 1, refused
        assert f"{stuck} (shopdep.order) stays on {v2}: its replay differs against " in refused.out, refused.out
        assert "the log has price('A-9', 1.0), the code called price('A-9', 2.0)" in refused.out, refused.out
        assert refused.out.splitlines()[-2].startswith("0 of 1 run(s) moved to dev-"), refused.out
        # ... and what to do about it (it said where the replay differs, and stopped there).
        assert refused.out.splitlines()[-1].startswith("a run that stays goes on, on the code it is pinned to; to "
                                                       "move it, branch the calls the new code changed with patched()")
        assert refused.out.splitlines()[-1].endswith("(a value the code cannot read, an input its parameters do not "
                                                     "take), change that; then upgrade again"), refused.out
        pin = json.loads(dev("describe", stuck, "--json").out)
        assert pin["deployment"] == v2, pin
    finally:
        dev.stop()


def _statuses(dev: WatchedDev) -> dict[str, str]:
    listed = dev("deployments", "--json")
    assert listed.code == 0, listed
    return {row["deploymentId"]: row["status"] for row in json.loads(listed.out)["deployments"]}


def test_the_code_dev_runs_reads_live_after_a_revert_and_after_a_restart(tmp_path: Path, runner: Runner) -> None:
    """The newest registration is ``live`` (and where a limited start is pinned), and a version registered before
    kept its first record: an edit reverted while the edit held a run, or a restart on ``--state`` with the code of
    an older version, showed the code dev runs as ``draining`` and the other ``live``."""
    source = tmp_path / "src" / "shopdep.py"
    source.parent.mkdir()
    source.write_text(textwrap.dedent(SHOP))
    dev = WatchedDev(tmp_path, tmp_path / "state", [runner], module="shopdep")
    try:
        v1 = dev.banner_deployment()
        _sleeping(dev, dev("start", "shopdep.order", '["A-1", 1.0]').out.strip())
        mark_at = len(dev.lines)
        source.write_text(source.read_text().replace(*BODY_ONLY))
        v2 = dev.wait_for(r"^new runs start on (dev-[0-9a-f]{10});", mark_at).split()[4].rstrip(";")
        _sleeping(dev, dev("start", "shopdep.order", '["A-2", 2.0]').out.strip())
        mark_at = len(dev.lines)
        source.write_text(source.read_text().replace(BODY_ONLY[1], BODY_ONLY[0]))
        dev.wait_for(rf"^the code is {v1} again", mark_at)
        assert _statuses(dev) == {v1: "live", v2: "draining"}
    finally:
        dev.stop()
    source.write_text(source.read_text().replace(*BODY_ONLY))
    restarted = WatchedDev(tmp_path, tmp_path / "state", [runner], module="shopdep")
    try:
        assert f"as deployment {v2} " in "".join(restarted.banner), restarted.banner
        assert _statuses(restarted)[v2] == "live"
        assert _statuses(restarted)[v1] != "live"
    finally:
        restarted.stop()
