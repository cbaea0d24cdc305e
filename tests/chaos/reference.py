"""The reference workflow the crash suite runs: one of each thing a run can wait on or produce.

Every part exercises a different write path of the AWS World, so a crash at each AWS call of a clean run
lands in each of them at least once: serial inline steps, a large step result (stored in S3, referenced by
the event and the step item), a four-way gather (step messages on the queue, the last one to finish
continuing the flow), a step that fails its first attempt (a delayed retry), an at-most-once step
(``chaos.charge``: a crash after its start fails the attempt with ``StepInterruptedError`` and retries it as a
new one, never running one attempt's body twice), a durable sleep (a delayed flow message and
``wait_completed``), a webhook resumed over the webhook Lambda, a plain hook resumed by a client, and a stream
written from a step (S3 object plus index commit).

The output depends only on the label, so a trial compares it exactly with ``expected_output``. No step decides
anything from process memory: the harness runs every delivery in a fresh or reused "container" of this one
process, so a counter here is shared by all of them (and by concurrent trials). The flaky step decides from its
durable attempt number instead, so it fails exactly its first attempt, whichever container runs it. What this
module does count, by run id, is each step body that ran (``body_runs``): the side effects a user would see,
which the harness compares with what at-least-once allows, and for the at-most-once step each body run by
attempt (``charges``), which the harness holds to at most one per attempt.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from awsworld import RetryPolicy, create_hook, create_webhook, get_writable, sleep, step, step_metadata, workflow

WORKFLOW = "chaos.reference"
BLOB_BYTES = 20 * 1024  # over the default 16 KiB inline limit: the step result goes to S3
STREAM = "progress"
WEBHOOK_BODY = '{"approved": true}'
STEP_COUNT = 3 + 4 + 1 + 1 + 2
"""Serial add, add, blob; four squares; flaky; charge; report and close_stream."""
CLEAN_BODY_RUNS = STEP_COUNT + 1
"""Step bodies a clean run runs: each step once, and the flaky one's retry."""

_BODIES: Counter[tuple[str, str]] = Counter()
_BODIES_LOCK = threading.Lock()  # bodies run on the threads of the trials' containers
_CHARGES: Counter[tuple[str, str, int]] = Counter()
CHARGE_ATTEMPTS = 4
"""The at-most-once step's attempts: a trial has one fault, so one interrupted attempt, and a retry of that."""


def _ran() -> int:
    """Count this step body's run (by run and step id); the attempt number."""
    meta = step_metadata()
    with _BODIES_LOCK:
        _BODIES[(meta.run_id, meta.step_id)] += 1
    return meta.attempt


_ON_CHARGE: dict[str, Callable[[], None]] = {}


def on_charge(label: str, seen: Callable[[], None] | None) -> None:
    """Have ``seen`` called whenever the charge body of the run labelled ``label`` runs (None: stop): the harness
    notes which of its AWS calls the body ran after, to aim faults at the attempt's start and end."""
    with _BODIES_LOCK:
        if seen is None:
            _ON_CHARGE.pop(label, None)
        else:
            _ON_CHARGE[label] = seen


def charges(run_id: str) -> dict[tuple[str, int], int]:
    """How many times each attempt of an at-most-once step of ``run_id`` ran its body, by (step id, attempt)."""
    with _BODIES_LOCK:
        return {(step_id, attempt): n for (run, step_id, attempt), n in _CHARGES.items() if run == run_id}


def body_runs(run_id: str) -> dict[str, int]:
    """How many times each step body of ``run_id`` ran, by step id."""
    with _BODIES_LOCK:
        return {step_id: n for (run, step_id), n in _BODIES.items() if run == run_id}


def plain_token(label: str) -> str:
    """The plain hook's token: chosen by the workflow, so the client can resume it by name."""
    return f"chaos-approval:{label}"


@step(name="chaos.add")
async def add(x: int, y: int) -> int:
    _ran()
    return x + y


@step(name="chaos.blob")
async def blob(seed: int) -> str:
    """A result too large to ride in the DynamoDB item."""
    _ran()
    unit = hashlib.sha256(str(seed).encode()).hexdigest()
    return (unit * (BLOB_BYTES // len(unit) + 1))[:BLOB_BYTES]


@step(name="chaos.square")
async def square(i: int) -> int:
    _ran()
    return i * i


@step(name="chaos.flaky", max_retries=2, retry_delay=1.0)
async def flaky(x: int) -> int:
    """Fails attempt 1, durably numbered: a redelivery after a crash mid-attempt sees attempt 2 and succeeds,
    so the retry happens at most once per run and never loops."""
    if _ran() == 1:
        raise ConnectionError("the first attempt of chaos.flaky fails on purpose")
    return x * 10


@step(name="chaos.charge", semantics="at_most_once",
      retry=RetryPolicy(max_attempts=CHARGE_ATTEMPTS, initial_delay=1.0))
async def charge(label: str) -> str:
    """A side effect that must never run twice in one attempt (a payment): at most once per recorded attempt."""
    attempt = _ran()
    meta = step_metadata()
    with _BODIES_LOCK:
        _CHARGES[(meta.run_id, meta.step_id, attempt)] += 1
        seen = _ON_CHARGE.get(label)
    if seen is not None:
        seen()
    return f"receipt:{label}"


def stream_group(label: str) -> list[str | bytes]:
    """What one run of ``report`` writes. A step is at-least-once: a crash after its write and before its
    completion re-runs it, so the stream holds this group one or more times, never a partial group."""
    return [f"{label}:start\n", f"{label}:done\n"]


@step(name="chaos.report")
async def report(label: str, total: int) -> str:
    """Writes the stream but does not close it: a re-run of a step that closed its stream would find it
    closed and fail, so the close is a step of its own (closing is idempotent, writing after it is not)."""
    _ran()
    await get_writable(STREAM).write_many(stream_group(label))
    return f"{label}:{total}"


@step(name="chaos.close_stream")
async def close_stream() -> None:
    _ran()
    await get_writable(STREAM).close()


@workflow(name=WORKFLOW)
async def reference(label: str) -> dict[str, Any]:
    a = await add(1, 2)
    b = await add(a, 4)
    big = await blob(b)
    squares = list(await asyncio.gather(*(square(i) for i in range(4))))
    retried = await flaky(b)
    receipt = await charge(label)
    await sleep(1)
    async with create_webhook(metadata={"purpose": "chaos"}) as webhook:
        request = await webhook
    async with create_hook(token=plain_token(label)) as hook:
        approval = await hook
    summary = await report(label, a + b + sum(squares) + retried)
    await close_stream()
    return {
        "serial": [a, b],
        "blob": [len(big), hashlib.sha256(big.encode()).hexdigest()[:16]],
        "squares": squares,
        "retried": retried,
        "receipt": receipt,
        "webhook": {"method": request["method"], "body": request["body"]},
        "approval": approval,
        "summary": summary,
    }


def expected_output(label: str) -> dict[str, Any]:
    """What ``reference(label)`` returns when the harness resumes its hooks as it does."""
    big = (hashlib.sha256(b"7").hexdigest() * (BLOB_BYTES // 64 + 1))[:BLOB_BYTES]
    return {
        "serial": [3, 7],
        "blob": [BLOB_BYTES, hashlib.sha256(big.encode()).hexdigest()[:16]],
        "squares": [0, 1, 4, 9],
        "retried": 70,
        "receipt": f"receipt:{label}",
        "webhook": {"method": "POST", "body": WEBHOOK_BODY},
        "approval": approval_payload(label),
        "summary": f"{label}:{3 + 7 + 14 + 70}",
    }


def approval_payload(label: str) -> dict[str, Any]:
    return {"approved": True, "by": f"client:{label}"}
