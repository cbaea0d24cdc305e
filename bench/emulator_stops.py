"""How long the local emulators take to stop: ``python bench/emulator_stops.py [--times 8] [--localstack]``.

What the test suite (and a user's Ctrl-C) pays at every stop, as processes and objects a user starts:

* ``MotoServer().start()`` then ``stop()``, in this process: the server thread looks for its ``shutdown()`` every
  ``_http/loopback.py``'s ``SHUTDOWN_POLL_SECONDS`` (socketserver's default was 0.5 s);
* ``awsworld dev`` (a one-workflow module, ``--state``) as a process: SIGTERM to exit, and its start to "serving
  deliveries" for scale (each test of ``tests/cli`` starting a ``dev`` pays both);
* with ``--localstack``, ``LocalStack().start()``, a queue sent to and received from, then ``stop()``: the
  launcher (``local/localstack_launch.py``) ends the process once LocalStack has shut down, without the
  interpreter's finalization, which took 3 to over 10 s of garbage collection (killed after
  ``local/emulator_process.py``'s ``STOP_GRACE_SECONDS``).

Measured on the walk that added it (2 cores shared with three other suites, load 11-15), 8 times each:
``MotoServer.stop()`` 0.27 s mean (0.14-0.42) before the poll change, 0.02 s (0.00-0.05) after; ``dev`` SIGTERM to
exit 0.67-2.63 s (mean 1.7) before, 0.24-1.26 s (mean 0.6) after; LocalStack's stop after use 4.1-10.1 s
before (10.1: killed), 0.1-0.2 s after.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODULE = '''
from awsworld import workflow


@workflow(name="stops.echo")
async def echo(n: int) -> int:
    return n
'''


def summary(label: str, seconds: list[float]) -> str:
    return (f"{label}: mean {statistics.mean(seconds):.2f} s, min {min(seconds):.2f}, max {max(seconds):.2f} "
            f"({len(seconds)} times)")


def moto_stops(times: int) -> list[float]:
    from awsworld.local import MotoServer

    stops = []
    for _ in range(times):
        server = MotoServer().start()
        time.sleep(0.2)
        started = time.monotonic()
        server.stop()
        stops.append(time.monotonic() - started)
    return stops


def dev_stops(times: int) -> tuple[list[float], list[float]]:
    ups, stops = [], []
    with tempfile.TemporaryDirectory(prefix="awsworld-stops-") as scratch:
        root = Path(scratch)
        (root / "stops.py").write_text(MODULE)
        for index in range(times):
            started = time.monotonic()
            dev = subprocess.Popen([sys.executable, "-m", "awsworld.cli", "dev", "stops", "--state",
                                    str(root / f"state-{index}")], cwd=root, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
            assert dev.stdout is not None
            for line in dev.stdout:
                if line.startswith("serving deliveries"):
                    break
            else:
                raise SystemExit(f"awsworld dev exited with {dev.wait()}")
            ups.append(time.monotonic() - started)
            time.sleep(0.5)
            stopping = time.monotonic()
            dev.send_signal(signal.SIGTERM)
            dev.communicate(timeout=60)
            stops.append(time.monotonic() - stopping)
    return ups, stops


def localstack_stops(times: int) -> list[float]:
    import boto3

    from awsworld.local import LocalStack

    stops = []
    for _ in range(times):
        server = LocalStack().start()
        sqs = boto3.client("sqs", endpoint_url=server.endpoint_url, region_name="us-east-1",
                           aws_access_key_id="bench", aws_secret_access_key="bench")
        queue = sqs.create_queue(QueueName="stops")["QueueUrl"]
        sqs.send_message(QueueUrl=queue, MessageBody="x")
        sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=1)
        started = time.monotonic()
        server.stop()
        stops.append(time.monotonic() - started)
    return stops


def main() -> None:
    parser = argparse.ArgumentParser(description="How long the local emulators take to stop.")
    parser.add_argument("--times", type=int, default=8)
    parser.add_argument("--localstack", action="store_true", help="LocalStack's stop too (about 10 s a start)")
    args = parser.parse_args()
    print(summary("MotoServer.stop()", moto_stops(args.times)))
    ups, stops = dev_stops(args.times)
    print(summary("awsworld dev: start to 'serving deliveries'", ups))
    print(summary("awsworld dev: SIGTERM to exit", stops))
    if args.localstack:
        print(summary("LocalStack.stop() after a queue's use", localstack_stops(max(1, args.times // 4))))


if __name__ == "__main__":
    main()
