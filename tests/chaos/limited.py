"""The crash suite's limited workflow: runs limited to ``RUN_LIMIT`` at once, each calling a step limited to
``STEP_LIMIT`` attempts at once across all runs (issue 35).

What the limits promise is measured by the bodies themselves, by trial label: ``enter`` puts the run in the set
of runs inside their slot and ``leave`` takes it out (a run holds its slot from before ``enter`` to after
``leave``), and ``work`` puts its (run, step) in the set of bodies running while it runs. Sets, so a body run
again after a crash (at least once) is the same member, never a second one; the peaks are what may never pass
the limits. Bodies of crashed containers are cancelled with them, so a member leaves when its body stops."""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict

from awsworld import Concurrency, step, step_metadata, workflow

RUN_LIMIT = 3
STEP_LIMIT = 2
RUN_LIMIT_NAME = "workflow:chaos.limited"
STEP_LIMIT_NAME = "chaos-limited-work"
WORK_STEP = "chaos.limited_work"

_LOCK = threading.Lock()  # bodies run on the threads of the trials' containers
_RUNS: dict[str, set[str]] = defaultdict(set)
_STEPS: dict[str, set[tuple[str, str]]] = defaultdict(set)
RUN_PEAK: dict[str, int] = defaultdict(int)
STEP_PEAK: dict[str, int] = defaultdict(int)


@step(name="chaos.limited_enter")
async def enter(label: str) -> None:
    run_id = step_metadata().run_id
    with _LOCK:
        _RUNS[label].add(run_id)
        RUN_PEAK[label] = max(RUN_PEAK[label], len(_RUNS[label]))


@step(name="chaos.limited_leave")
async def leave(label: str) -> None:
    with _LOCK:
        _RUNS[label].discard(step_metadata().run_id)


@step(name=WORK_STEP, concurrency=Concurrency(STEP_LIMIT, name=STEP_LIMIT_NAME))
async def work(label: str, n: int, i: int) -> int:
    meta = step_metadata()
    member = (meta.run_id, meta.step_id)
    with _LOCK:
        _STEPS[label].add(member)
        STEP_PEAK[label] = max(STEP_PEAK[label], len(_STEPS[label]))
    try:
        await asyncio.sleep(0.05)  # long enough for other containers' bodies to overlap it, were the limit broken
    finally:
        with _LOCK:
            _STEPS[label].discard(member)
    return n * i


@workflow(name="chaos.limited", concurrency=RUN_LIMIT)
async def limited(label: str, n: int) -> int:
    await enter(label)
    parts = await asyncio.gather(work(label, n, 1), work(label, n, 2))
    await leave(label)
    return sum(parts)


def forget(label: str) -> None:
    with _LOCK:
        for table in (_RUNS, _STEPS, RUN_PEAK, STEP_PEAK):
            table.pop(label, None)
