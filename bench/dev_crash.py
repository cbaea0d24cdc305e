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
* ``awsworld describe`` and ``awsworld events`` wall times on the finished run.

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

APP = '''
import asyncio, os, time
from awsworld import step, workflow

@step(name="crash.counted")
async def counted(n: int) -> int:
    with open(os.environ["BENCH_BODIES"], "a") as f:
        f.write(f"{n} {time.time():.3f}\\n")
    return n * 2

@workflow(name="crash.fanout")
async def fanout(n: int) -> int:
    return sum(await asyncio.gather(*[counted(i) for i in range(n)]))
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
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="awsworld-dev-crash-"))
    (folder / "crashapp.py").write_text(APP)
    bodies = folder / "bodies.txt"
    bodies.touch()
    env = {**os.environ, "BENCH_BODIES": str(bodies),
           "PYTHONPATH": os.pathsep.join([str(folder), *filter(None, [os.environ.get("PYTHONPATH")])])}

    dev, dev_env = start_dev(folder, env, folder / "dev1.log")
    t0 = time.monotonic()
    run_id = cli(dev_env, folder, "start", "crash.fanout", json.dumps([args.steps]))[0].split()[-1]
    time.sleep(args.kill_after)
    before = len(bodies.read_text().splitlines())
    dev.send_signal(signal.SIGKILL)
    dev.wait()
    killed_at = time.time()
    dev, dev_env = start_dev(folder, env, folder / "dev2.log")
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


if __name__ == "__main__":
    main()
