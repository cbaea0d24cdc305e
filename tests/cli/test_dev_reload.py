"""No edit under ``awsworld dev`` destroys a run: ``dev`` as a process, with ``--state``, and the CLI as processes.

A run sleeps for a day; dev stops; the step's arguments are edited; dev starts again on the same state. The code
the run started on is gone (dev's snapshots live in its process), so dev says so, replays the run against the new
code and moves it there: it diverges, so dev prints one line (where, what the log has, what the code called, the
ways out), marks it parked and does not wake it. ``runs``, ``runs --parked``, ``describe`` and their ``--json``
show it parked. The edit is reverted while dev runs: dev reloads the module, the run replays again, is woken, and
its flow clears the mark. Edited again while dev runs, the sleeping runs keep the code they started on (one of them
finishes on it, while a run started after the edit takes the new code; ``awsworld deployments`` lists both
versions); a restart parks the first again, and ``awsworld fail`` ends it (with the one-line errors for a run that
ended and one that does not exist). A file that does not import is reported and the previous code keeps serving.
"""

from __future__ import annotations

import json
import os
import re
import site
import subprocess
import sys
import sysconfig
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from awsworld._timeline import deadline_text

from .test_cli import Dev, Result, Runner, _clean_env, awsworld

SHOP = '''
from datetime import timedelta

from awsworld import sleep, step, workflow


@step
async def charge(order_id: str, amount: float) -> str:
    return f"charged {order_id} {amount}"


@step
async def ship(order_id: str) -> str:
    return f"shipped {order_id}"


@workflow
async def order(order_id: str, amount: float) -> list[str]:
    receipt = await charge(order_id, amount)
    await sleep(timedelta(days=1))
    return [receipt, await ship(order_id)]


@workflow
async def quick(order_id: str) -> str:
    return await ship(order_id)
'''
ORIGINAL = "receipt = await charge(order_id, amount)"
EDITED = "receipt = await charge(order_id, amount * 2)"
ADDED = '''

@workflow
async def added(order_id: str) -> str:
    return await ship(order_id)
'''


class WatchedDev(Dev):
    """``awsworld dev shopdev --state DIR``, its output read on after the banner (reloads print there)."""

    def __init__(self, cwd: Path, state: Path, runners: list[Runner], module: str = "shopdev",
                 command: Sequence[str] | None = None) -> None:
        if command is None:
            super().__init__(cwd, state, runners, module=module)
        else:
            super().__init__(cwd, state, runners, module=module, command=command)
        self.follow()

    @property
    def lines(self) -> list[str]:
        """Its console after the banner so far, a line an item, without newlines."""
        return [line.rstrip("\n") for line in self.console]

    def wait_for(self, pattern: str, after: int = 0, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.lines[after:]:
                if re.search(pattern, line):
                    return line
            time.sleep(0.05)
        raise AssertionError(f"dev printed no line matching {pattern!r}:\n" + "\n".join(self.lines))

    def banner_deployment(self) -> str:
        """The deployment its banner says the code it runs is (``as deployment dev-<hash>``)."""
        found = re.search(r"as deployment (dev-[0-9a-f]{10}) ", "".join(self.banner))
        assert found is not None, self.banner
        return found.group(1)

    def stop(self) -> str:
        super().stop()
        return "\n".join(self.lines)


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runner]:
    """One for the file: each command is a fork of it with that command's own environment and directory, so the
    tests share nothing through it (a runner per test imported awsworld nine times)."""
    started = Runner(tmp_path_factory.mktemp("runner"))
    yield started
    started.close()


def until(check: Callable[[], Result], ready: Callable[[Result], bool], timeout: float = 30) -> Result:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if ready(result):
            return result
        assert time.monotonic() < deadline, result
        time.sleep(0.2)


def test_a_run_keeps_its_code_across_reloads_a_restart_parks_it_a_revert_resumes_it_and_fail_ends_it(
        tmp_path: Path, runner: Runner) -> None:
    source = tmp_path / "src" / "shopdev.py"
    source.parent.mkdir()
    source.write_text(textwrap.dedent(SHOP))
    state = tmp_path / "state"

    first = WatchedDev(tmp_path, state, [runner])
    try:
        original = first.banner_deployment()
        started = first("start", "shopdev.order", '["T-1", 42.5]')
        assert started.code == 0, started
        run_id = started.out.strip()
        until(lambda: first("describe", run_id, "--json"),
              lambda r: [w["kind"] for w in json.loads(r.out)["waitingOn"]] == ["sleep"])
    finally:
        first.stop()

    # A restart: dev's snapshots of code lived in the process that stopped, so the run's code is gone. dev says so,
    # replays the run against the code it has now and moves it there: it diverges, so it is parked, not failed.
    source.write_text(source.read_text().replace(ORIGINAL, EDITED))
    second = WatchedDev(tmp_path, state, [runner])
    try:
        banner = "".join(second.banner)
        edited = second.banner_deployment()
        assert edited != original, banner
        moved_line = (f"run {run_id} (shopdev.order) started on {original}, whose code dev no longer has (a snapshot "
                      f"lives as long as dev's process): it is replayed against {edited}'s and moved to it\n")
        parked_line = (f"run {run_id} (shopdev.order) is parked: its replay differs from its log at step 1 (event 4): "
                       "the log has charge('T-1', 42.5), the code called charge('T-1', 85.0); revert the code, or "
                       "branch the change with awsworld.patched() (docs/how-to/changing-code.md), and the run "
                       f"resumes; `awsworld fail {run_id}` ends it instead\n")
        assert moved_line + parked_line in banner, banner
        assert "0 unfinished run(s) woken, 1 parked (`awsworld runs --parked`)" in banner, banner

        listed = second("runs")
        assert re.search(rf"^{run_id}  parked +shopdev.order ", listed.out, re.M), listed
        only = second("runs", "--parked", "--json")
        document = json.loads(only.out)
        assert [(r["runId"], r["status"]) for r in document] == [(run_id, "running")], document
        mark = document[0]["parked"]
        assert (mark["position"], mark["event"], mark["change"]) == ("step 1", 4, "arguments"), mark
        assert mark["divergence"] == ("step 1 (event 4): the log has charge(…), the code called charge(…) with "
                                      "other arguments")
        described = second("describe", run_id)
        assert "status    parked\n" in described.out, described.out
        since = re.escape(deadline_text(mark["since"]).split(" (")[0])  # as describe writes every time (not ISO)
        # (how long ago: whole seconds, or under half a second its own digits, as duration_text says it: describe
        # often comes within a second of the park)
        assert re.search(rf"^parked    since {since} \(\d+(\.\d+)? m?s ago\): its replay differs from its log at "
                         rf"{re.escape(mark['divergence'])}\n", described.out, re.M), described.out
        assert "$awsworld.parked" not in described.out, "shown as parked, not as a raw attribute"
        assert json.loads(second("describe", run_id, "--json").out)["parked"] == mark
        refused = second("runs", "--parked", "--status", "running")
        assert "takes no --status" in refused.one_line_error(2)
        woken = second("wake", run_id)  # (it read "woke RUN (running)", as for a run that would now go on)
        assert woken.code == 0 and woken.out.splitlines()[0] == (
            f"woke {run_id} (parked): its delivery replays it against the code there, and it stays parked until "
            f"that code replays it (`awsworld describe {run_id}` says why it is parked)"), woken

        mark_at = len(second.lines)
        source.write_text(source.read_text().replace(EDITED, ORIGINAL))  # the revert, while dev runs
        second.wait_for(r"^reloading: src/shopdev\.py changed$", mark_at)
        second.wait_for(rf"^new runs start on {original}; runs started before stay on the code they started on "
                        r"\(`awsworld upgrade RUN` moves one to it, once it replays there: a fix for a step that "
                        r"keeps failing, say\)$",
                        mark_at)
        second.wait_for(rf"^run {run_id} \(shopdev\.order\) replays again: it was parked, and resumes$", mark_at)
        second.wait_for(r"^reloaded shopdev: 2 workflow\(s\), 2 step\(s\); 1 unfinished run\(s\) replayed against "
                        r"it: 1 match \(1 parked before: resumed\)$", mark_at)
        until(lambda: second("runs", "--parked"), lambda r: r.out == "" and "no parked runs" in r.err)
        resumed = json.loads(second("describe", run_id, "--json").out)
        assert resumed["status"] == "running" and resumed["parked"] is None, resumed
        assert [w["kind"] for w in resumed["waitingOn"]] == ["sleep"], resumed
        kept = second("start", "shopdev.order", '["T-6", 10.0]')
        assert kept.code == 0, kept
        kept_id = kept.out.strip()
        until(lambda: second("describe", kept_id, "--json"),
              lambda r: [w["kind"] for w in json.loads(r.out)["waitingOn"]] == ["sleep"])

        # Edited again while dev runs: the sleeping runs keep the code they started on; new runs take the edit.
        mark_at = len(second.lines)
        source.write_text(source.read_text().replace(ORIGINAL, EDITED))
        second.wait_for(r"^reloaded shopdev: 2 workflow\(s\), 2 step\(s\); no unfinished run to replay against it; "
                        rf"2 on {original}, whose code is kept$", mark_at)
        assert not any("is parked" in line for line in second.lines[mark_at:]), second.lines[mark_at:]
        new_run = second("start", "shopdev.order", '["T-5", 10.0]')
        assert new_run.code == 0, new_run
        until(lambda: second("describe", new_run.out.strip(), "--json"),  # (its sleep written: a skip before it
              lambda r: [w["kind"] for w in json.loads(r.out)["waitingOn"]] == ["sleep"])  # has nothing to skip)
        skipped = second("skip", new_run.out.strip())
        assert skipped.code == 0, skipped
        finished = second("result", new_run.out.strip(), "--wait", "30")
        assert json.loads(finished.out.splitlines()[-1]) == ["charged T-5 20.0", "shipped T-5"], finished
        assert second("skip", kept_id).code == 0
        old_code = second("result", kept_id, "--wait", "30")
        assert json.loads(old_code.out.splitlines()[-1]) == ["charged T-6 10.0", "shipped T-6"], \
            "the run started before the edit finished on the code it started on"
        listing = json.loads(second("deployments", "--json").out)
        statuses = {row["deploymentId"]: (row["status"], row["unfinishedRuns"]) for row in listing["deployments"]}
        assert statuses[original] == ("draining", 1) and statuses[edited] == ("live", 0), statuses

        # A workflow the edit adds is published at the reload: a client without the code (no AWSWORLD_MODULES: it
        # checks names against dev's publication only) starts it.
        unchecked = {k: v for k, v in second.env.items() if k != "AWSWORLD_MODULES"}
        mark_at = len(second.lines)
        source.write_text(source.read_text() + ADDED)
        second.wait_for(r"^reloaded shopdev: 3 workflow\(s\), 2 step\(s\)", mark_at)
        added = runner(("start", "shopdev.added", '["T-4"]', "--wait", "30"), unchecked, tmp_path)
        assert added.code == 0 and added.out.splitlines()[1] == '"shipped T-4"', added

        mark_at = len(second.lines)
        source.write_text(source.read_text() + "\ndef broken(:\n")
        failed_reload = second.wait_for(r"^reload failed, the previous code goes on serving: SyntaxError", mark_at)
        assert "shopdev.py" in failed_reload, failed_reload
        # (the CLI imports AWSWORLD_MODULES itself, to check names: this start goes without them)
        still = runner(("start", "shopdev.quick", '["T-3"]', "--wait", "30"), unchecked, tmp_path)
        assert still.code == 0 and still.out.splitlines()[1] == '"shipped T-3"', still

        mark_at = len(second.lines)
        source.write_text(source.read_text().replace("\ndef broken(:\n", ""))  # mended: still the edited charge
        second.wait_for(rf"^reloaded shopdev: 3 workflow.*; 1 on {original}, whose code is kept$", mark_at)
    finally:
        second.stop()

    third = WatchedDev(tmp_path, state, [runner])  # restarted on the edited code: T-1's code is gone again
    try:
        assert f"run {run_id} (shopdev.order) is parked" in "".join(third.banner), third.banner
        failed = third("fail", run_id, "--reason", "the old charge is gone")
        assert failed.code == 0, failed
        head, wrote = failed.out.splitlines()
        assert re.fullmatch(rf"failed {run_id} \(parked since \S+\)", head), head
        assert re.fullmatch(r"  wrote run_failed: ReplayDivergenceError: failed on request while parked \(since \S+\): "
                            r"step 1 \(event 4\): the log has charge\(…\), the code called charge\(…\) with other "
                            r"arguments: the old charge is gone \(error code CORRUPTED_EVENT_LOG\)", wrote), wrote
        again = third("fail", run_id)
        assert again.one_line_error(1) == (f"awsworld fail: run {run_id} is already failed: nothing was written "
                                           "(hint: only a pending, running or parked run can be failed)")
        assert "no such run" in third("fail", "wrun_nope").one_line_error(1)
        result = third("result", run_id, "--json")
        assert result.code == 1 and json.loads(result.out)["errorCode"] == "CORRUPTED_EVENT_LOG", result
    finally:
        out = third.stop()
    assert "state saved" in out, out


def test_a_reload_takes_edits_of_every_project_module_and_keeps_the_old_code_when_one_does_not_import(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``UserCode`` in the process (what ``dev``'s watcher calls): an edit of a module the named one imports (not
    named on the command line) is taken; a syntax error leaves every module, workflow and step as it was."""
    import asyncio
    import sys

    from awsworld.authoring.definitions import REGISTRY
    from awsworld.cli.dev_reload import UserCode

    package = tmp_path / "src" / "reloadpkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    steps = package / "steps.py"
    steps.write_text("from awsworld import step\n\n@step\nasync def work() -> int:\n    return 1\n")
    flows = package / "flows.py"
    flows.write_text("from awsworld import workflow\nfrom .steps import work\n\n@workflow\nasync def run() -> int:\n"
                     "    return await work()\n")
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    try:
        __import__("reloadpkg.flows")
        code = UserCode(["reloadpkg.flows"], [tmp_path])
        assert set(code.modules()) == {"reloadpkg", "reloadpkg.flows", "reloadpkg.steps"}
        assert code.changed() == []
        steps.write_text(steps.read_text().replace("return 1", "return 2"))
        assert code.changed() == [steps.resolve()]
        assert code.reload() is None and code.changed() == []
        assert asyncio.run(REGISTRY.steps["reloadpkg.steps.work"].fn()) == 2
        new_flows = sys.modules["reloadpkg.flows"]
        served = REGISTRY.workflows["reloadpkg.flows.run"]

        flows.write_text(flows.read_text() + "\ndef broken(:\n")
        problem = code.reload()
        assert problem is not None and problem.startswith("SyntaxError: ") and "flows.py" in problem, problem
        assert sys.modules["reloadpkg.flows"] is new_flows, "the previous code goes on serving"
        assert REGISTRY.workflows["reloadpkg.flows.run"] is served
        assert asyncio.run(REGISTRY.steps["reloadpkg.steps.work"].fn()) == 2
        assert code.changed() == [], "the broken file is not tried again until it changes"

        # A named module gone (moved, say) is said as such: no place in importlib's frames (<frozen ...>, line N).
        flows.unlink()
        assert code.reload() == "ModuleNotFoundError: No module named 'reloadpkg.flows'"
        assert REGISTRY.workflows["reloadpkg.flows.run"] is served
    finally:
        for name in [n for n in sys.modules if n == "reloadpkg" or n.startswith("reloadpkg.")]:
            del sys.modules[name]
        for table in (REGISTRY.workflows, REGISTRY.steps):
            for key in [k for k in table if k.startswith("reloadpkg.")]:
                del table[key]


CONSOLE_SCRIPT = """#!{python}
import sys
from awsworld.cli import main
if __name__ == "__main__":
    sys.exit(main())
"""


def project_venv(project: Path) -> Path:
    """``python3 -m venv .venv`` inside the project, as Install has the user make it, with pip's ``bin/awsworld``
    console script; awsworld and its dependencies come from this test's environment (a ``.pth`` adding its
    site-packages), not from an install. Returns the script."""
    venv = project / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    ours = [*site.getsitepackages(), sysconfig.get_paths()["purelib"]]
    lines = "".join(f"import site; site.addsitedir({path!r})\n" for path in dict.fromkeys(ours))
    (Path(purelib) / "outer_env.pth").write_text(lines)
    script = venv / "bin" / "awsworld"
    script.write_text(CONSOLE_SCRIPT.format(python=python))
    script.chmod(0o755)
    return script


def test_dev_run_from_a_venv_inside_the_project_names_unchanged_code_the_same_deployment(
        tmp_path: Path, runner: Runner) -> None:
    """The layout Install describes: the venv in the project, ``.venv/bin/awsworld dev``. The console script (a
    module too: ``__main__`` and multiprocessing's ``__mp_main__``) and the venv's files are not the user's code: a
    save that changes nothing reloads the same deployment (it was a new one, and a revert never came back to the
    first), and only the user's file is watched."""
    source = tmp_path / "src" / "shopdev.py"
    source.parent.mkdir()
    # multiprocessing, once imported, names the running script __mp_main__ too; s3transfer.compat (boto3's) imports
    # it in the releases a fresh install gets (0.19), not in the one these tests pin, so the user's module does here.
    source.write_text("import multiprocessing  # noqa: F401\n" + textwrap.dedent(SHOP))
    script = project_venv(tmp_path)

    dev = WatchedDev(tmp_path, tmp_path / ".awsworld", [runner], command=[str(script.parent / "python"), str(script)])
    try:
        first = dev.banner_deployment()
        seen = len(dev.lines)
        os.utime(source, ns=(source.stat().st_atime_ns, source.stat().st_mtime_ns + 1_000_000_000))  # saved as is
        assert dev.wait_for(r"^reloading: ", seen) == "reloading: src/shopdev.py changed"
        assert dev.wait_for(r"^the code is |^new runs start on ", seen) == f"the code is unchanged ({first})"

        seen = len(dev.lines)
        source.write_text(source.read_text().replace(ORIGINAL, EDITED))
        edited = dev.wait_for(r"^the code is |^new runs start on ", seen)
        assert edited.startswith("new runs start on dev-") and not edited.startswith(f"new runs start on {first}")
        seen = len(dev.lines)
        source.write_text(source.read_text().replace(EDITED, ORIGINAL))
        reverted = dev.wait_for(r"^the code is |^new runs start on ", seen)
        assert reverted.startswith(f"new runs start on {first};"), reverted  # the first again (retired meanwhile)
    finally:
        out = dev.stop()
    assert ".venv" not in out, out


def test_a_module_moved_from_the_root_into_src_as_init_asks_is_reloaded_from_there(tmp_path: Path,
                                                                                  runner: Runner) -> None:
    """Get started saves the first workflow at the project's root; ``awsworld init`` then asks to move it into
    ``src/`` (``mkdir -p src && mv shopdev.py src/``). ``dev``, running meanwhile, loads it from there at its next
    reload (it said ``ModuleNotFoundError`` and kept the old code until restarted), and a run starts on it."""
    source = tmp_path / "shopdev.py"
    source.write_text(textwrap.dedent(SHOP))
    dev = WatchedDev(tmp_path, tmp_path / ".awsworld", [runner])
    try:
        seen = len(dev.lines)
        (tmp_path / "src").mkdir()
        source.rename(tmp_path / "src" / "shopdev.py")
        loaded = dev.wait_for(r"^reloaded |^reload failed", seen)
        assert loaded.startswith("reloaded shopdev: 2 workflow(s), 2 step(s)"), "\n".join(dev.lines)
        started = dev("start", "shopdev.quick", '["Q-1"]')
        assert started.code == 0, started
        result = dev("result", started.out.strip(), "--wait", "30")
        assert (result.code, result.out.strip()) == (0, '"shipped Q-1"'), result
    finally:
        dev.stop()


SOLO = '''
from awsworld import create_hook, step, workflow


@step(name="solo.tag")
async def tag(order_id: str) -> str:
    return f"tagged {order_id}"


@workflow(name="solo.order", concurrency=1)
async def order(order_id: str) -> str:
    async with create_hook(token=f"go:{order_id}") as hook:
        await hook
    return await tag(order_id)
'''


def test_a_run_waiting_for_its_slot_keeps_the_code_it_was_started_on_across_a_rename(
        tmp_path: Path, runner: Runner) -> None:
    """A run its start made wait for a concurrency slot has no delivery until the slot frees. The workflow is
    renamed meanwhile (the edit a walk made): the waiting run, started on the code before the edit, gets its slot
    and finishes on that code, as a sleeping run does. It once failed at its grant with ``UNKNOWN_WORKFLOW``
    (and a parameter added meanwhile failed it with a ``TypeError``), dev holding the code it was started on."""
    source = tmp_path / "src" / "solodev.py"
    source.parent.mkdir()
    source.write_text(textwrap.dedent(SOLO))
    dev = WatchedDev(tmp_path, tmp_path / "state", [runner], module="solodev")
    try:
        holder = dev("start", "solo.order", '"A-1"')
        waiting = dev("start", "solo.order", '"A-2"')
        assert holder.code == 0 and waiting.code == 0, (holder, waiting)
        holder_id, waiting_id = holder.out.strip(), waiting.out.strip()
        until(lambda: dev("describe", waiting_id, "--json"),
              lambda r: [w["kind"] for w in json.loads(r.out)["waitingOn"]] == ["slot"])
        original = json.loads(dev("describe", waiting_id, "--json").out)["deployment"]
        assert original is not None and original.startswith("dev-"), "pinned while it waits"

        mark_at = len(dev.lines)
        source.write_text(source.read_text().replace('name="solo.order"', 'name="solo.renamed"'))
        dev.wait_for(r"^reloaded solodev: 1 workflow\(s\), 1 step\(s\); ", mark_at)
        listing = json.loads(dev("deployments", "--json").out)
        kept = {row["deploymentId"]: row["unfinishedRuns"] for row in listing["deployments"]}
        assert kept[original] == 2, listing  # the holder and the waiting run keep its code loaded

        assert dev("resume", "go:A-1", "{}").code == 0
        assert json.loads(dev("result", holder_id, "--wait", "30", "--json").out)["output"] == "tagged A-1"
        resumed = dev("resume", "go:A-2", "{}", "--wait", "30")  # its slot granted, it starts and creates the hook
        assert resumed.code == 0, resumed
        finished = dev("result", waiting_id, "--wait", "30", "--json")
        assert finished.code == 0 and json.loads(finished.out)["output"] == "tagged A-2", finished
        assert json.loads(dev("describe", waiting_id, "--json").out)["deployment"] == original
    finally:
        out = dev.stop()
    assert "UNKNOWN_WORKFLOW" not in out, out


def test_a_restart_wakes_its_runs_without_info_lines(tmp_path: Path, runner: Runner) -> None:
    """``dev`` prints warnings and errors only. A restart with unfinished runs wakes each; their deliveries came
    before the level was set (with the webhook route) and printed an INFO line each, ahead of the banner."""
    source = tmp_path / "src" / "shopdev.py"
    source.parent.mkdir()
    source.write_text(textwrap.dedent(SHOP))
    state = tmp_path / "state"
    first = WatchedDev(tmp_path, state, [runner])
    try:
        runs = [first("start", "shopdev.order", f'["I-{n}", 1.0]').out.strip() for n in range(6)]
        for run_id in runs:
            until(lambda run_id=run_id: first("describe", run_id, "--json"),
                  lambda r: [w["kind"] for w in json.loads(r.out)["waitingOn"]] == ["sleep"])
    finally:
        first.stop()
    second = WatchedDev(tmp_path, state, [runner])
    try:
        assert "6 unfinished run(s) woken" in "".join(second.banner), second.banner
        for run_id in runs:  # every wake delivered: each run back to its sleep
            until(lambda run_id=run_id: second("describe", run_id, "--json"),
                  lambda r: [w["kind"] for w in json.loads(r.out)["waitingOn"]] == ["sleep"])
    finally:
        out = "".join(second.banner) + second.stop()
    assert not re.search(r"^\d\d:\d\d:\d\d INFO ", out, re.M), out


def test_dev_under_on_divergence_fail_says_a_diverging_run_fails(tmp_path: Path, runner: Runner) -> None:
    """``dev`` parks a diverging run unless ``AWSWORLD_ON_DIVERGENCE`` says otherwise; under ``fail`` its banner
    still said "parked, not failed (AWSWORLD_ON_DIVERGENCE=fail)". It says what the setting does."""
    source = tmp_path / "src" / "shopdev.py"
    source.parent.mkdir()
    source.write_text(textwrap.dedent(SHOP))
    dev = Dev(tmp_path, tmp_path / "state", [runner], module="shopdev", settings={"AWSWORLD_ON_DIVERGENCE": "fail"})
    try:
        banner = "".join(dev.banner)
    finally:
        dev.stop()
    assert "parked, not failed" not in banner, banner
    assert ("a run whose replay diverges from its log fails at its next delivery (AWSWORLD_ON_DIVERGENCE=fail; "
            "unset it to park such a run instead); the replay of unfinished runs after an edit or a restart parks "
            "those it finds diverging\n") in banner, banner


PRICES = '''
from awsworld import step, workflow


@step(name="prices.lookup", max_retries=3, retry_delay=600)
async def lookup(sku: str) -> int:
    prices = {"kettle": 20}
    return prices[skuu]


@workflow(name="prices.price")
async def price(sku: str) -> int:
    return await lookup(sku)
'''


def test_a_failing_step_shows_in_the_console_at_its_first_attempt_and_its_fix_reaches_the_run(
        tmp_path: Path, runner: Runner) -> None:
    """A newcomer's typo in a step (a ``NameError``) is retried by the step's policy, minutes apart. ``dev``'s
    console said nothing until the last attempt had failed, and the fix, saved while the run waited for its next
    attempt, did not reach it (a run keeps the code it started on) with nothing saying how to move it. Now each
    failed attempt prints a line (the error, the line of code, the next attempt's time and how far, said as every
    duration is, ``authoring/durations.py``'s ``duration_text``; ``awsworld skip``), the
    reload says ``awsworld upgrade RUN`` moves a run to the new code, and those two commands finish the run on the
    fix."""
    source = tmp_path / "src" / "prices.py"
    source.parent.mkdir()
    source.write_text(textwrap.dedent(PRICES))
    dev = WatchedDev(tmp_path, tmp_path / "state", [runner], module="prices")
    try:
        started = dev("start", "prices.price", '"kettle"')
        assert started.code == 0, started
        run_id = started.out.strip()
        failed = dev.wait_for(rf"^run {run_id}: step prices\.lookup ", timeout=30)
        assert re.fullmatch(
            rf"run {run_id}: step prices\.lookup \(step_1\) attempt 1 of 4 failed: NameError: name 'skuu' is not "
            rf"defined \(\S+prices\.py, line 8, in lookup\); attempt 2 at \d\d:\d\d:\d\d UTC, in (10 min|9 min \d+ s) "
            rf"\(`awsworld skip {run_id}` starts it now\)", failed), failed

        mark_at = len(dev.lines)
        source.write_text(source.read_text().replace("prices[skuu]", "prices[sku]"))  # the fix, while the run waits
        said = dev.wait_for(r"^new runs start on dev-", mark_at)
        assert said.endswith("(`awsworld upgrade RUN` moves one to it, once it replays there: a fix for a step "
                             "that keeps failing, say)"), said
        dev.wait_for(r"^reloaded prices: ", mark_at)
        moved = dev("upgrade", run_id)
        assert moved.code == 0 and f"moved {run_id} (prices.price)" in moved.out, moved
        skipped = dev("skip", run_id)
        assert skipped.code == 0, skipped
        result = dev("result", run_id, "--wait", "30")
        assert (result.code, result.out.strip()) == (0, "20"), result
    finally:
        out = dev.stop()
    assert "failed [USER_ERROR]" not in out, out


def test_a_module_that_does_not_compile_is_one_line_at_start_and_leaves_the_cli_working_mid_edit(
        tmp_path: Path, runner: Runner) -> None:
    """A syntax error in the user's module: ``awsworld dev`` refused to start with ``unexpected SyntaxError``
    (pointing at ``--debug``, as for a bug of awsworld's); saved while dev ran, dev kept the old code (as it
    should) but every CLI command run from the project, which imports ``AWSWORLD_MODULES``, failed the same way.
    Now dev names the module, the error and its line, and a command warns and goes on without the code."""
    source = tmp_path / "src" / "shopdev.py"
    source.parent.mkdir()
    source.write_text(textwrap.dedent(SHOP).replace("async def quick(order_id: str) -> str:",
                                                    "async def quick(order_id: str) -> str"))
    refused = awsworld("dev", "shopdev", cwd=tmp_path, env=_clean_env())
    assert refused.one_line_error(1) == (
        "awsworld dev: cannot import 'shopdev': SyntaxError: expected ':' (shopdev.py, line 25) (hint: fix the "
        "module and run the command again (--debug shows the traceback))"), refused

    source.write_text(textwrap.dedent(SHOP))
    dev = WatchedDev(tmp_path, tmp_path / "state", [runner])
    try:
        mark_at = len(dev.lines)
        source.write_text(source.read_text() + "\ndef half_typed(:\n")  # saved mid-edit
        dev.wait_for(r"^reload failed, the previous code goes on serving: SyntaxError", mark_at)
        started = dev("start", "shopdev.quick", '"Q-1"')
        listed = dev("runs")
    finally:
        dev.stop()
    warning = ("warning: AWSWORLD_MODULES names 'shopdev', which fails to import: SyntaxError: invalid syntax "
               "(shopdev.py, line 28): going on without your code (`awsworld dev` serves the code it had before "
               "the edit)")
    assert started.code == 0 and started.err.splitlines() == [warning], started
    assert listed.code == 0 and started.out.strip() in listed.out and listed.err.splitlines() == [warning], listed


LOOSE = '''
from awsworld import create_hook, step, workflow


@step(name="loose.tag")
async def tag(order_id: str) -> str:
    return f"tagged {order_id}"


@workflow(name="loose.order", pinned=False)
async def order(order_id: str) -> str:
    first = await tag(order_id)
    async with create_hook(token=f"ok:{order_id}") as hook:
        answer = await hook
    return f"{first} {answer}"
'''


def test_a_payload_for_a_parked_run_says_the_run_is_parked_and_reaches_it_once_code_replays_it(
        tmp_path: Path, runner: Runner) -> None:
    """An unpinned run (``pinned=False``) waits on a hook; an edit changes the call before the hook, and the reload
    parks it. ``awsworld resume`` of its hook said "delivered as ... to run ..." alone, as for a run that goes on:
    it now says the run is parked and where to look. The revert resumes the run, which takes the payload."""
    source = tmp_path / "src" / "loosedev.py"
    source.parent.mkdir()
    source.write_text(textwrap.dedent(LOOSE))
    dev = WatchedDev(tmp_path, tmp_path / "state", [runner], module="loosedev")
    try:
        started = dev("start", "loose.order", '"P-1"')
        assert started.code == 0, started
        run_id = started.out.strip()
        until(lambda: dev("describe", run_id, "--json"),
              lambda r: [w["kind"] for w in json.loads(r.out)["waitingOn"]] == ["hook"])
        mark_at = len(dev.lines)
        source.write_text(source.read_text().replace("await tag(order_id)", "await tag(order_id + '!')"))
        dev.wait_for(rf"^run {run_id} \(loose\.order\) is parked: ", mark_at)

        resumed = dev("resume", "ok:P-1", '"yes"')
        assert resumed.code == 0, resumed
        assert re.fullmatch(rf"delivered as evnt_\w+ to run {run_id}; the run is parked: it goes on once code replays "
                            rf"its log \(`awsworld describe {run_id}` says where\)\n", resumed.out), resumed.out

        mark_at = len(dev.lines)
        source.write_text(source.read_text().replace("await tag(order_id + '!')", "await tag(order_id)"))
        dev.wait_for(rf"^run {run_id} \(loose\.order\) replays again: it was parked, and resumes$", mark_at)
        finished = dev("result", run_id, "--wait", "30", "--json")
        assert finished.code == 0 and json.loads(finished.out)["output"] == "tagged P-1 yes", finished
    finally:
        dev.stop()


def test_a_bad_edit_reverted_takes_the_runs_it_started_back_to_the_code_before_it(
        tmp_path: Path, runner: Runner) -> None:
    """A rollback under ``dev``: the working code, then an edit that breaks a step, a run started on the edit whose
    step fails, and the edit reverted (new runs start on the first version again). ``awsworld upgrade RUN`` moves
    the run back to the first version, and its step's next attempt (``awsworld skip``), queued by the edit's
    version, runs the first version's code."""
    source = tmp_path / "src" / "prices.py"
    source.parent.mkdir()
    working = textwrap.dedent(PRICES).replace("prices[skuu]", "prices[sku]")
    source.write_text(working)
    dev = WatchedDev(tmp_path, tmp_path / "state", [runner], module="prices")
    try:
        first = dev.banner_deployment()
        mark_at = len(dev.lines)
        source.write_text(textwrap.dedent(PRICES))  # the bad edit
        dev.wait_for(r"^reloaded prices: ", mark_at)
        run_id = dev("start", "prices.price", '"kettle"').out.strip()
        dev.wait_for(rf"^run {run_id}: step prices\.lookup \(step_1\) attempt 1 of 4 failed: NameError", timeout=30)

        mark_at = len(dev.lines)
        source.write_text(working)  # reverted: the first version again (retired at the edit: it held no run)
        dev.wait_for(rf"^new runs start on {first}; ", mark_at)
        dev.wait_for(r"^reloaded prices: ", mark_at)
        moved = dev("upgrade", run_id)
        assert moved.code == 0 and f"moved {run_id} (prices.price) from dev-" in moved.out, moved
        assert f" to {first}: " in moved.out, moved
        assert dev("skip", run_id).code == 0
        result = dev("result", run_id, "--wait", "30")
        assert (result.code, result.out.strip()) == (0, "20"), result
        assert json.loads(dev("describe", run_id, "--json").out)["deployment"] == first
    finally:
        dev.stop()
