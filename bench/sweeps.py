"""The sweeps ``.ci/run`` samples, run whole: before a release, and after a change to what they cover.

``.ci/run`` must end within CI's budget on two cores, so it runs a sample of each long sweep; this runs all of
them, one after the other (each wants the machine to itself: the time-bounded trials strand runs on a busy one):

1. ``pytest -m sweep``: the cases marked ``sweep`` (``@pytest.mark.sweep_on(...)``, ``tests/conftest.py``), e.g.
   the limits' 200-call and 145-run cases on moto, which ``.ci/run`` runs in memory and on DynamoDB Local only;
2. ``bench/chaos.py``: a fault at every AWS call of the reference run, in each mode (``tests/chaos/test_chaos.py``
   samples it), then ``--loss``, the message-lost sweep at every point, and ``--handed``, a run pinned to an
   older version whose every delivery is handed over to it;
3. ``bench/chaos_limits.py``: the same on limits across runs (``tests/chaos/test_chaos_limits.py`` samples it),
   then its 100-run case (``--runs 100 --middle``), then one run whose step limit is paused from the fault and
   whose crashed step messages are sent again (``--runs 1 --pause-on-fault --resend-on-fault``: the second
   messages and slot waits six runs make now and then, at every call).

Each prints its own figures; the last lines name each part's exit status, and the exit code is 1 when any part
failed. About two hours here. Run: ``python bench/sweeps.py`` (``--only tests|chaos|limits`` for one part).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).absolute().parents[1]
PARTS: dict[str, list[list[str]]] = {
    "tests": [[sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadfile", "-p", "no:cacheprovider",
               "-m", "sweep"]],
    "chaos": [[sys.executable, "bench/chaos.py"], [sys.executable, "bench/chaos.py", "--loss"],
              [sys.executable, "bench/chaos.py", "--handed"]],
    "limits": [[sys.executable, "bench/chaos_limits.py"],
               [sys.executable, "bench/chaos_limits.py", "--runs", "100", "--middle"],
               [sys.executable, "bench/chaos_limits.py", "--runs", "1", "--pause-on-fault", "--resend-on-fault"]],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--only", choices=sorted(PARTS), action="append", help="only this part (repeatable)")
    args = parser.parse_args()
    results: list[tuple[str, int, float]] = []
    for part in args.only or list(PARTS):
        for command in PARTS[part]:
            shown = " ".join(Path(c).name if c == sys.executable else c for c in command)
            print(f"\n>>> {shown}", flush=True)
            started = time.monotonic()
            status = subprocess.run(command, cwd=ROOT, check=False).returncode
            results.append((shown, status, time.monotonic() - started))
    print()
    for shown, status, seconds in results:
        print(f"{'ok    ' if status == 0 else f'FAILED ({status})'} {seconds:7.0f} s  {shown}")
    return 1 if any(status for _, status, _ in results) else 0


if __name__ == "__main__":
    sys.exit(main())
