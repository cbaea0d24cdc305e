"""``bench/testing.py``'s awsworld half on small sizes, through the bench's own functions: each workload returns
the right result, the sleep + retries run really slept 30 days of virtual time and really made three attempts
of its step (the log says so, not a counter), in well under real seconds. The durable half is not run here (it
needs its own venv); the table is rendered with it skipped."""

from __future__ import annotations

import importlib.util
import sys
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest


def _load_bench() -> ModuleType:
    """bench/ is scripts, not a package: load testing.py by path (once per process: it declares workflows)."""
    name = "awsworld_bench_testing"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, Path(__file__).resolve().parents[2] / "bench" / "testing.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


bench = _load_bench()


@pytest.fixture(scope="module")
def rows() -> list[Any]:
    return bench.workloads((10,), width=8, repeat=1)


async def test_serial_and_fanout_results(rows: list[Any]) -> None:
    by_key = {workload.key: workload for workload in rows}
    serial = await bench.run_once(by_key["serial-10"])
    assert serial.result == 10
    assert sorted(s.output for s in serial.steps) == list(range(1, 11))
    assert all(s.output == s.input["args"][0] + 1 for s in serial.steps)  # each got the previous one's output
    assert sum(e.event_type == "step_completed" for e in serial.events) == 10
    assert serial.deliveries >= 1 and serial.wall > 0

    fanout = await bench.run_once(by_key["fanout-8"])
    assert fanout.result == sum(range(1, 9))
    assert sorted(s.output for s in fanout.steps) == list(range(1, 9))
    assert all(s.output == s.input["args"][0] + 1 for s in fanout.steps)
    assert fanout.deliveries >= 8 - 1  # the branches ran as queued steps, one may run inline


async def test_sleep_then_retries_skips_time_and_makes_three_attempts(rows: list[Any]) -> None:
    workload = next(w for w in rows if w.key == "sleep-retries")
    sample = await bench.run_once(workload)
    assert sample.result == {"x": 2, "attempt": 3}  # the attempt the step read from step_metadata()
    types = [event.event_type for event in sample.events]
    waits = [i for i, t in enumerate(types) if t == "wait_completed"]
    assert types.count("wait_created") == 1 and len(waits) == 1
    attempts = [e.event_data["attempt"] for e in sample.events if e.event_type == "step_started" and e.event_data]
    assert attempts == [1, 2, 3] and types.count("step_retrying") == 2 and types.count("step_completed") == 1
    assert waits[0] < types.index("step_created")  # the step began only after the sleep ended
    (flaky,) = sample.steps
    assert flaky.attempt == 3 and flaky.status == "completed"
    # The clock covered the sleep and both 60 s back-offs; the wall clock did not.
    assert sample.virtual >= bench.SLEEP + timedelta(seconds=2 * bench.RETRY_DELAY)
    assert sample.virtual >= timedelta(days=30) and sample.wall < 5
    created, completed = (e.created_at for e in sample.events if e.event_type in ("wait_created", "wait_completed"))
    assert completed - created >= timedelta(days=30)


async def test_report_marks_targets_and_skipped_durable(rows: list[Any]) -> None:
    figures = await bench.measure_awsworld(rows)
    text = bench.report(rows, figures, None)
    assert "skipped (--no-durable)" in text and "one run per workload" in text
    assert "serial 1,000 <= 1.0 ms/step: not measured" in text  # N=1,000 was not run here
    assert "sleep + retries < 1.0 s:" in text and "-> met" in text
    # A durable cell that failed says why instead of a figure.
    failed = {"workloads": {"fanout-8": {"error": "ValueError: no"}}, "versions": {}, "python": "3"}
    assert "cannot: ValueError: no" in bench.report(rows, figures, failed)
