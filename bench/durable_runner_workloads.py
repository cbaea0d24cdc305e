"""The workloads of ``bench/testing.py`` on the AWS Lambda durable functions testing runner, as JSON on stdout.

This script runs inside ``bench/.venv-durable`` (``bench/testing.py`` creates it and installs
``aws-durable-execution-sdk-python-testing`` there), never in awsworld's own venv: the two SDKs are compared,
not mixed, and awsworld does not depend on the durable one. Each workload is the same logic as its awsworld
twin, written against the durable SDK's own primitives:

- serial N: ``context.step`` N times in sequence, each step returning its input + 1;
- fan-out: ``context.map`` over N items, each branch one ``context.step``, summed;
- sleep + retries: ``context.wait`` of 30 days, then a step that fails on attempts 1 and 2 (it reads its
  attempt from its ``StepContext``), retried with a fixed 60 s delay (``RetryStrategyConfig``: 4 attempts =
  3 retries, backoff 1.0, no jitter, so the delay is awsworld's ``retry_delay=60``).

Every run goes through ``DurableFunctionTestRunner`` with its default ``skip_time=True`` (a virtual clock that
jumps over armed timers) and a fresh runner per run, like a test would. The time measured is ``run_async`` to
``wait_for_result`` returning. Each run's result is checked; a workload the runner cannot do carries an
``error`` instead of figures. Run by hand: ``bench/.venv-durable/bin/python bench/durable_runner_workloads.py``.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import sys
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from importlib.metadata import version
from typing import Any

from aws_durable_execution_sdk_python.config import Duration, JitterStrategy, StepConfig
from aws_durable_execution_sdk_python.context import DurableContext, StepContext, durable_step
from aws_durable_execution_sdk_python.execution import InvocationStatus, durable_execution
from aws_durable_execution_sdk_python.retries import RetryStrategyConfig, create_retry_strategy
from aws_durable_execution_sdk_python_testing.runner import DurableFunctionTestRunner

SLEEP_DAYS = 30
RETRY_DELAY_SECONDS = 60
FAILURES = 2  # the flaky step fails on attempts 1 and 2, succeeds on 3
RETRIES = 3


@durable_step
def add(context: StepContext, value: int) -> int:
    return value + 1


@durable_step
def flaky(context: StepContext, value: int) -> dict[str, int]:
    if context.attempt <= FAILURES:
        raise RuntimeError(f"attempt {context.attempt} fails on purpose")
    return {"x": value + 1, "attempt": context.attempt}


@durable_execution
def serial(event: dict[str, int], context: DurableContext) -> int:
    value = 0
    for _ in range(event["n"]):
        value = context.step(add(value))
    return value


@durable_execution
def fanout(event: dict[str, int], context: DurableContext) -> int:
    batch = context.map(list(range(event["n"])), lambda child, item, _index, _items: child.step(add(item)))
    return sum(batch.get_results())


RETRY = StepConfig(retry_strategy=create_retry_strategy(RetryStrategyConfig(
    max_attempts=RETRIES + 1, initial_delay=Duration.from_seconds(RETRY_DELAY_SECONDS),
    max_delay=Duration.from_seconds(RETRY_DELAY_SECONDS), backoff_rate=1.0, jitter_strategy=JitterStrategy.NONE)))


@durable_execution
def sleep_then_retries(event: dict[str, int], context: DurableContext) -> dict[str, int]:
    context.wait(Duration.from_days(SLEEP_DAYS))
    return context.step(flaky(event["x"]), config=RETRY)


def _history(runner: DurableFunctionTestRunner, arn: str) -> list[Any]:
    """Every event of the run. The runner's public ``get_execution_history`` returns the first page only, so
    this pages through its executor (the same call with a marker)."""
    executor = runner._executor  # private, but the only way to page
    events: list[Any] = []
    marker: str | None = None
    while True:
        page = executor.get_execution_history(arn, marker=marker, max_items=1000)
        events.extend(page.events)
        marker = page.next_marker
        if not marker:
            return events


def run_once(handler: Callable[..., Any], payload: dict[str, int]) -> dict[str, Any]:
    """One run on a fresh runner: wall seconds from start to result, the result, and what the history says
    (handler invocations, how far the virtual clock moved, events by type)."""
    gc.collect()
    with DurableFunctionTestRunner(handler=handler) as runner:
        started = time.perf_counter()
        arn = runner.run_async(input=json.dumps(payload), execution_timeout=3600)
        result = runner.wait_for_result(arn, timeout=3600)
        wall = time.perf_counter() - started
        if result.status is not InvocationStatus.SUCCEEDED:
            raise RuntimeError(f"run ended {result.status}: {result.error}")
        events = _history(runner, arn)
    by_type: dict[str, int] = {}
    for event in events:
        by_type[event.event_type] = by_type.get(event.event_type, 0) + 1
    stamps = [event.event_timestamp for event in events]
    virtual = (max(stamps) - min(stamps)) if stamps else timedelta(0)
    return {"seconds": wall, "result": json.loads(result.result) if result.result else None,
            "invocations": by_type.get("InvocationCompleted", 0), "virtual_seconds": virtual.total_seconds(),
            "events": by_type}


def measure(handler: Callable[..., Any], payload: dict[str, int], expected: Any, repeat: int) -> dict[str, Any]:
    """Best of ``repeat`` runs, each checked against ``expected``; on any failure, the reason instead."""
    try:
        runs = [run_once(handler, payload) for _ in range(repeat)]
    except Exception as error:  # any failure: the table cell says why the runner could not do it
        return {"error": f"{type(error).__name__}: {error}", "trace": traceback.format_exc(limit=3)}
    wrong = [run["result"] for run in runs if run["result"] != expected]
    if wrong:
        return {"error": f"wrong result {wrong[0]!r}, expected {expected!r}"}
    best = min(runs, key=lambda run: run["seconds"])
    return {**best, "all_seconds": [run["seconds"] for run in runs], "repeat": repeat}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,100,1000", help="serial workload sizes, comma separated")
    parser.add_argument("--fanout", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs for the small workloads")
    parser.add_argument("--large", type=int, default=10_000, help="serial runs of at least this size run once")
    args = parser.parse_args()
    # The SDK logs every failed attempt with its traceback (the retry workload fails twice on purpose).
    logging.disable(logging.CRITICAL)

    figures: dict[str, Any] = {}
    for n in (int(size) for size in args.sizes.split(",") if size):
        figures[f"serial-{n}"] = measure(serial, {"n": n}, n, 1 if n >= args.large else args.repeat)
    figures[f"fanout-{args.fanout}"] = measure(fanout, {"n": args.fanout}, sum(range(1, args.fanout + 1)),
                                               args.repeat)
    figures["sleep-retries"] = measure(sleep_then_retries, {"x": 1}, {"x": 2, "attempt": FAILURES + 1},
                                       args.repeat)
    versions = {name: version(name) for name in
                ("aws-durable-execution-sdk-python", "aws-durable-execution-sdk-python-testing")}
    json.dump({"versions": versions, "python": sys.version.split()[0], "workloads": figures}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
