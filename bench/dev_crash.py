"""``awsworld dev`` killed with ``kill -9`` in the middle of a wide fan-out, then started again: ``python
bench/dev_crash.py [--steps 1000] [--kill-after 30]`` (about four minutes at 1,000 steps on a 2-core machine).

What a user does, as processes: a scratch app in a temporary directory (a workflow that ``asyncio.gather``s
``--steps`` steps, each appending its number and the time to a file, so every run of a body is counted), ``awsworld
dev app --state DIR``, ``awsworld start``, ``kill -9`` of ``dev`` after ``--kill-after`` seconds, ``dev`` again on
the same DIR, ``awsworld result --wait``. It prints:

* the wall time to the result, and the steps per second before the kill;
* the bodies that had run before the kill and how many of them ran again after it (their results were written
  after the last snapshot: ``docs/get-started/dev.md`` says a crash loses up to 5 s of writes);
* the attempts the log records (a step running at the kill is taken over as attempt 2);
* every pause of more than 5 s in the run's log after the restart, with the steps whose results it held: a
  pause where no step is running is time nobody asked for;
* ``awsworld describe`` and ``awsworld events`` wall times on the finished run;
* for each ``dev`` process (before the kill, after the restart), what a probe of its internals counted (``PROBE``,
  imported by the app in ``dev`` only): its deliveries by kind and outcome (a flow, a step, a step's delivery that
  went on with the run: ``step-then-...``), the events its flows read and how many of those reads began at the
  start of a log of over 100 events, the longest a write waited for its run's commit (``aws/log/group_commit.py``'s
  ``submit``), its AWS requests by operation, how often a flow ran inline a step it had queued to a message of
  its own already, and how its inline attempts ended (``running-elsewhere``: a start the World refused).

``--body-seconds S`` makes each body sleep S seconds, so more steps are running at the kill and the restart's wake
takes more of them over (``_worker/recovery.py``'s ``taken_over``).

Measured on the walk that added it (2 cores, shared, load 6-9; 1,000 steps, kill after 30 s): before the change
of ``cli/dev_state.Snapshots.interval``, 97 and 85 bodies before the kill, 96 and 62 of them run again (snapshots
up to 35 s apart under the fan-out's load); after it, 101 before and 28 again. After the restart, four runs of
five paused at the fan-out's end (23 s, 51 s, 65 s, 98 s; the fifth about 15 s): the last steps' bodies had run
(the bodies file has them within a second of the pause's start) and their results landed together at its end.
Not explained yet; without a kill the same fan-out shows no such pause. What a dump of ``dev``'s asyncio tasks
showed in one such pause (60 s, bodies all run): 23 step results queued in ``aws/log/group_commit.py``'s ``submit``
behind one commit waiting on its ``batch_get`` in ``aws/threaded.py``'s pool, which was busy with the watchdog's
shard queries (8), dedup claims (5) and releases (3), and flow deliveries reading the whole 3,000-event log (4):
the emulator's one lock at its limit, with more flow deliveries of the run after the restart than before it.

Explained (load 5-28, 1,000 steps, kill after 30 s; the probe's figures after the restart). The restart's wake
(``RESTART_WAKE``) took over every started step at every turn of its loop, the steps its own queued messages had
started meanwhile as well (``_worker/recovery.py``'s ``taken_over``): each was queued again under a fresh key, and
each duplicate that came after its step ended ran a flow (``finished-already``) that read the whole log, no kept
replay being left for most of them. Before: 1,163 deliveries, 226 of them flows (220 ``step-then-suspended``), 85
reads of the whole log and 253,656 events read by flows, 11,203 AWS requests, a write waiting 94.5 s for its commit
and a 92 s pause (151 s -> 244 s) before the last results landed. With the wake taking over only the steps started
before it was sent: 960 deliveries, 2 of them flows (the wake's and the last step's), 1 read of the whole log and
3,024 events read, 6,379 requests; an 11 s pause was left (68.7 s -> 79.8 s, a write waiting 14.2 s), while the
wake queued the 960 steps not ended (a claim and a confirmation of each key, 32 at a time) and moto's DynamoDB lock,
a ``threading.Lock``, let each marker write's thread take it back before a commit waiting for it. With the lock taken
in turn (``local/moto_server.py``'s ``FairLock``): 965 deliveries, 2 flows, 3,029 events read, 6,406 requests, the
longest wait for a commit 7.6 s and one pause of 5.5 s (54.4 s -> 59.9 s), while the wake queued the steps. One run
each, on a machine whose load the other work on it moved between 5 and 28: the pauses and waits vary with it, the
counts do not.

A restart's wake could run inline, at a later turn of its loop, a take-over it had queued to a message of its own,
if that message had not started the step yet (``flow_state.StepClaims.hand`` now keeps it the message's; the
window is an inline step that ends before the queue hands out the take-overs queued beside it, which
``tests/runtime/test_e2e_lost_messages.py`` forces by delaying them). Measured before the fix, on a shared 2-core
machine: 1,000 steps, kill after 30 s, 3 steps taken over; and 300 steps of 3 s bodies, kill after 20 s, 27 taken
over: neither met the window (0 inline runs of a queued take-over, the wake's one inline attempt completed, no
start refused; after the restart 970 and 257 deliveries, one per step left plus the wake's flow and the last
step's, 6,478 and 1,986 AWS requests). After it, 300 steps of 3 s bodies (14 taken over): 0, 282 deliveries, 2,107
requests: the same shape, one delivery per step.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

APP = '''
import asyncio, os, time
from awsworld import step, workflow

if os.environ.get("BENCH_PROBE"):
    import crashprobe  # (dev's deliveries, reads and requests, for the figures)

@step(name="crash.counted")
async def counted(n: int) -> int:
    with open(os.environ["BENCH_BODIES"], "a") as f:
        f.write(f"{n} {time.time():.3f}\\n")
    await asyncio.sleep(float(os.environ.get("BENCH_BODY_SECONDS", "0")))
    return n * 2

@workflow(name="crash.fanout")
async def fanout(n: int) -> int:
    return sum(await asyncio.gather(*[counted(i) for i in range(n)]))
'''


PROBE = '''
"""What dev did, written every second to $BENCH_PROBE.<pid> (a kill -9 keeps the last line): its deliveries by kind
and outcome, the events its flows read (and how many reads began at the log's start), the longest a write waited
for its run's commit, and its AWS requests. Hooks awsworld's internals: a bench's probe, not an API."""
import asyncio, json, os, time
from collections import Counter

from awsworld._worker import dispatch, flow_state, inline_loop
from awsworld.aws.log import group_commit
from awsworld.local import poller

FIGURES = {"deliveries": Counter(), "eventsRead": 0, "wholeLogReads": 0, "longestCommitWait": 0.0,
           "inlineQueuedAlready": 0, "inlineEnds": Counter()}
execute, load, submit, start = (dispatch.Worker._execute, flow_state.FlowLog._load, group_commit.RunTurns.submit,
                                poller.LocalPoller.start)
run_inline, step_ended = inline_loop.Flow._run_inline, inline_loop.Flow._step_ended


async def counted_run_inline(self, step):
    FIGURES["inlineQueuedAlready"] += f"{step.id}:{step.attempt}" in self.messages.queued
    return await run_inline(self, step)


async def counted_step_ended(self, step, outcome):
    FIGURES["inlineEnds"][outcome.status] += 1
    return await step_ended(self, step, outcome)


async def counted_execute(self, message, *args):
    outcome = await execute(self, message, *args)
    kind = "step" if message.step_id else f"flow ({message.wake or 'its own'})"
    FIGURES["deliveries"][f"{kind}: {outcome.status}"] += 1
    return outcome


async def counted_load(self, **kwargs):
    whole = self.cursor is None
    events = await load(self, **kwargs)
    FIGURES["eventsRead"] += len(events)
    FIGURES["wholeLogReads"] += whole and len(events) > 100
    return events


async def timed_submit(self, run_id, member):
    began = time.monotonic()
    try:
        return await submit(self, run_id, member)
    finally:
        FIGURES["longestCommitWait"] = max(FIGURES["longestCommitWait"], time.monotonic() - began)


def started(self):
    start(self)

    async def write():
        while True:
            with open(f"{os.environ['BENCH_PROBE']}.{os.getpid()}", "a") as out:
                out.write(json.dumps({**FIGURES, "requests": dict(self.world.clients.stats.requests)}) + "\\n")
            await asyncio.sleep(1)

    self.probe = asyncio.create_task(write())


dispatch.Worker._execute, flow_state.FlowLog._load = counted_execute, counted_load
inline_loop.Flow._run_inline, inline_loop.Flow._step_ended = counted_run_inline, counted_step_ended
group_commit.RunTurns.submit, poller.LocalPoller.start = timed_submit, started
'''


def start_dev(folder: Path, env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    out = log.open("wb")
    dev = subprocess.Popen([sys.executable, "-m", "awsworld", "dev", "crashapp", "--state", str(folder / "state"),
                            "--no-reload"], cwd=folder, env=env, stdout=out, stderr=subprocess.STDOUT)
    for _ in range(120):
        text = log.read_text(errors="replace")
        if "serving deliveries" in text:
            exports = dict(line[len("export "):].split("=", 1) for line in text.splitlines()
                           if line.startswith("export "))
            return dev, {**env, **exports}
        time.sleep(0.5)
    dev.kill()
    raise SystemExit(f"dev did not start:\n{log.read_text(errors='replace')}")


def cli(env: dict[str, str], folder: Path, *args: str) -> tuple[str, float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "awsworld", *args], cwd=folder, env=env, capture_output=True,
                          text=True, check=True)
    return done.stdout, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--kill-after", type=float, default=30.0)
    parser.add_argument("--body-seconds", type=float, default=0.0,
                        help="how long each step's body sleeps (more steps running at the kill: take-overs)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="awsworld-dev-crash-"))
    (folder / "crashapp.py").write_text(APP)
    (folder / "crashprobe.py").write_text(PROBE)
    bodies = folder / "bodies.txt"
    bodies.touch()
    env = {**os.environ, "BENCH_BODIES": str(bodies), "BENCH_PROBE": str(folder / "probe"),
           "BENCH_BODY_SECONDS": str(args.body_seconds),
           "PYTHONPATH": os.pathsep.join([str(folder), *filter(None, [os.environ.get("PYTHONPATH")])])}

    dev, dev_env = start_dev(folder, env, folder / "dev1.log")
    pids = [dev.pid]
    t0 = time.monotonic()
    run_id = cli(dev_env, folder, "start", "crash.fanout", json.dumps([args.steps]))[0].split()[-1]
    time.sleep(args.kill_after)
    before = len(bodies.read_text().splitlines())
    dev.send_signal(signal.SIGKILL)
    dev.wait()
    killed_at = time.time()
    dev, dev_env = start_dev(folder, env, folder / "dev2.log")
    pids.append(dev.pid)
    try:
        cli(dev_env, folder, "result", run_id, "--wait", "900")
        wall = time.monotonic() - t0
        _, describe_s = cli(dev_env, folder, "describe", run_id)
        events_text, events_s = cli(dev_env, folder, "events", run_id, "--json")
    finally:
        dev.send_signal(signal.SIGINT)
        dev.wait(60)
    lines = [line.split() for line in bodies.read_text().splitlines()]
    first = {n for n, _ in lines[:before]}
    again = sum(1 for n, at in lines[before:] if n in first and float(at) > killed_at)
    events = json.loads(events_text)
    attempts = Counter(e["detail"].split(",")[0] for e in events if e["eventType"] == "step_started")
    print(f"{args.steps} steps, kill -9 after {args.kill_after:.0f} s: result after {wall:.0f} s; "
          f"{before} bodies before the kill ({before / args.kill_after:.1f}/s), {again} of them ran again; "
          f"bodies in all {len(lines)}; attempts {dict(attempts)}")
    print(f"describe {describe_s:.1f} s, events --json {events_s:.1f} s ({len(events)} events)")
    restart = next(e["atMs"] for e in events if e["createdAt"] >= time.strftime(
        "%Y-%m-%dT%H:%M:%S", time.gmtime(killed_at)))
    previous = restart
    for event in events:
        if event["atMs"] < restart:
            continue
        if event["atMs"] - previous > 5000:
            held = [e["correlationId"] for e in events if e["atMs"] == event["atMs"] and
                    e["eventType"] == "step_completed"]
            print(f"pause {previous / 1000:.1f} s -> {event['atMs'] / 1000:.1f} s ({event['eventType']}; "
                  f"{len(held)} results landed at its end: {', '.join(held[:8])})")
        previous = event["atMs"]

    for name, pid in zip(("before the kill", "after the restart"), pids, strict=True):
        probe = probed(folder / f"probe.{pid}")
        requests = Counter(probe.get("requests", {}))
        flows = sum(n for kind, n in probe.get("deliveries", {}).items() if kind.startswith("flow")
                    or ": step-then-" in kind)
        print(f"{name}: {sum(probe.get('deliveries', {}).values())} deliveries, {flows} of them flows (a step's "
              f"delivery that went on with the run counted); {probe.get('eventsRead', 0)} events read by flows "
              f"({probe.get('wholeLogReads', 0)} reads of a log of over 100 events from its start); the longest "
              f"wait of a write for its run's commit {probe.get('longestCommitWait', 0.0):.1f} s; "
              f"{sum(requests.values())} AWS requests ({', '.join(f'{k} {n}' for k, n in requests.most_common(6))})")
        print(f"    inline runs of a step this flow had queued already: {probe.get('inlineQueuedAlready', 0)}; "
              f"inline attempts' ends: {probe.get('inlineEnds', {})}")
        for kind, n in sorted(probe.get("deliveries", {}).items(), key=lambda kv: -kv[1]):
            print(f"    {n:5d}  {kind}")


def probed(path: Path) -> dict[str, Any]:
    """The probe's last line (``PROBE``): its figures when the process stopped or was killed."""
    if not path.exists():
        return {}
    lines = path.read_text().splitlines()
    return json.loads(lines[-1]) if lines else {}


if __name__ == "__main__":
    main()
