"""Deliveries pushed by HTTP: messages ``awsworld serve`` queues for an app of the Workflow SDK's TypeScript
runtime, delivered by POST to that app's route.

The TypeScript World (``packages/world-awsworld``) queues through the server (``POST /v1/queue`` with
``deliverTo``, the app's base URL). The server wraps the message in a push envelope and sends it on awsworld's
own queue (SQS on AWS and on the emulator, the in-memory queue in memory), so it travels, waits
(``delaySeconds``), deduplicates (``idempotencyKey``) and is redelivered exactly as awsworld's own messages are. The
delivery path (``_worker/delivery.py``, the Lambda flow handler's and the local poller's one copy) hands an envelope
to ``push``, which POSTs the message to the app as the suite's queue contract says:

- ``POST {deliverTo}/.well-known/workflow/v1/flow`` (``/step`` for a ``__wkf_step_`` queue) with the headers
  ``x-vqs-queue-name`` (the full queue name), ``x-vqs-message-id`` (awsworld's message id: the one ``queue``
  returned, the same on every redelivery) and ``x-vqs-message-attempt`` (1, then one more per delivery that
  reached the app), plus the headers the message was queued with; the body is the message's JSON. No timeout:
  the app may run the workflow inline for as long as its delivery lasts (the delivery's own deadline bounds it).
- ``200 {"timeoutSeconds": n}``: deliver the same message again after n seconds (``redeliver``); any other 2xx:
  done (``ack``: never delivered again); anything else (the app's 400 for a bad message, a 500 for a handler that
  threw, a connection lost mid-request): ``failed``, retried with the delivery path's back-off.
- A connection refused means the app is gone (the test that started it has ended, a service was removed): the
  POST is tried ``GONE_TRIES`` times ``GONE_PAUSE_SECONDS`` apart within this delivery (not counted as attempts),
  then the message is dead-lettered (``gone``: kept for an operator, never retried in a loop). Each message is
  its own delivery, so one whose app is gone holds no other up.

Only hosts listed in ``AWSWORLD_PUSH_HOSTS`` (default: loopback) are POSTed to, checked both when the message is
queued (a 400 to the caller) and when it is delivered (an envelope put on the queue some other way is
dead-lettered): the queue never becomes a way to make the flow function call anywhere.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from ..settings import SETTINGS
from ..world.entities import Run
from ..world.errors import InvalidInputError, SdkRunError
from ..world.queue import DEFAULT_QUEUE_PREFIX, PUSH_FIELD, Delivery, parse_queue_name

log = logging.getLogger("awsworld.push")

FLOW_ROUTE = "/.well-known/workflow/v1/flow"
STEP_ROUTE = "/.well-known/workflow/v1/step"
STEP_PREFIX_MARK = "wkf_step_"
GONE_TRIES = 5
GONE_PAUSE_SECONDS = 1.0
MAX_HEADERS = 32

Outcome = Literal["ack", "redeliver", "failed", "gone"]


@dataclass(frozen=True)
class PushResult:
    outcome: Outcome
    seconds: float = 0.0
    """``redeliver``: after how many seconds."""
    reason: str = ""


def _step_queue(queue_name: str) -> bool:
    """A Workflow SDK step queue (``__wkf_step_<id>`` or ``__<ns>_wkf_step_<id>``)."""
    head, mark, rest = queue_name.partition(STEP_PREFIX_MARK)
    return bool(mark and rest and head.startswith("__") and (head == "__" or head[2:-1].isalnum()))


def transport_queue_name(queue_name: str) -> str:
    """The awsworld queue name a pushed message travels under: the caller's own when it is a workflow queue, else
    (a step queue, or a namespace's: another consumer's prefix on the flow function's queue would be refused)
    the caller's name under the default prefix, so each caller queue keeps its own idempotency keys."""
    if not isinstance(queue_name, str) or not queue_name.startswith("__"):
        raise InvalidInputError(f"queue name {str(queue_name)[:120]!r} must start with __", field="queueName")
    if _step_queue(queue_name):
        return DEFAULT_QUEUE_PREFIX + "push" + queue_name
    prefix, _ = parse_queue_name(queue_name)
    return queue_name if prefix == DEFAULT_QUEUE_PREFIX else DEFAULT_QUEUE_PREFIX + "push" + queue_name


def check_target(base_url: object) -> str:
    """``deliverTo``: an http(s) base URL whose host ``AWSWORLD_PUSH_HOSTS`` lists; a 400 naming the field."""
    if not isinstance(base_url, str) or len(base_url) > 2048:
        raise InvalidInputError("deliverTo must be the app's base URL (http://host:port)", field="deliverTo")
    parts = urlsplit(base_url)
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host:
        raise InvalidInputError(f"deliverTo must be an http(s) URL, not {base_url[:120]!r}", field="deliverTo")
    if host not in SETTINGS.push_hosts:
        raise InvalidInputError(f"deliverTo's host {host!r} is not one deliveries may go to (AWSWORLD_PUSH_HOSTS: "
                                f"{','.join(sorted(SETTINGS.push_hosts))})", field="deliverTo")
    return base_url.rstrip("/")


def _headers(headers: object) -> dict[str, str]:
    if headers is None:
        return {}
    if not isinstance(headers, dict) or len(headers) > MAX_HEADERS or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        raise InvalidInputError(f"opts.headers must map at most {MAX_HEADERS} names to strings", field="opts.headers")
    return {k: v for k, v in headers.items() if not k.lower().startswith(("x-vqs-", "content-", "host"))}


def push_envelope(queue_name: str, message: Any, deliver_to: object, headers: object = None) -> dict[str, Any]:
    """The queue payload that pushes ``message`` to the app at ``deliver_to`` (checked: a 400 for a bad one)."""
    route = STEP_ROUTE if _step_queue(queue_name) else FLOW_ROUTE
    return {PUSH_FIELD: {"url": check_target(deliver_to) + route, "queueName": queue_name,
                         "headers": _headers(headers)}, "message": message}


def is_push(payload: Any) -> bool:
    return isinstance(payload, dict) and isinstance(payload.get(PUSH_FIELD), dict)


async def push(delivery: Delivery, *, pause: float = GONE_PAUSE_SECONDS) -> PushResult:
    """POST the envelope ``delivery`` carries to its app and say what becomes of the message."""
    import httpx  # (the flow function needs it only when it pushes)

    target = delivery.payload[PUSH_FIELD]
    url = str(target.get("url", ""))
    try:
        check_target(url)
    except InvalidInputError as refused:
        return PushResult("gone", reason=refused.message)
    headers = {**dict(target.get("headers") or {}), "content-type": "application/json",
               "x-vqs-queue-name": str(target.get("queueName", delivery.queue_name)),
               "x-vqs-message-id": delivery.message_id, "x-vqs-message-attempt": str(delivery.attempt)}
    body = json.dumps(delivery.payload.get("message"), separators=(",", ":"), allow_nan=False).encode()
    async with httpx.AsyncClient(timeout=httpx.Timeout(None, connect=10.0), trust_env=False) as http:
        for tried in range(1, GONE_TRIES + 1):
            try:
                response = await http.post(url, content=body, headers=headers)
            except httpx.ConnectError as refused:
                if tried == GONE_TRIES:
                    return PushResult("gone", reason=f"{url}: {type(refused).__name__} ({tried} tries)")
                await asyncio.sleep(pause)
                continue
            except httpx.HTTPError as lost:  # the app may have seen it: an attempt, retried with back-off
                return PushResult("failed", reason=f"{url}: {type(lost).__name__}")
            return _answer(response.status_code, response.content)
    raise AssertionError("unreachable")


def _answer(status: int, content: bytes) -> PushResult:
    if not 200 <= status < 300:
        said = _said(content)
        return PushResult("failed", reason=f"the app answered {status}" + (f": {said}" if said else ""))
    try:
        answer = json.loads(content) if content else None
    except ValueError:
        answer = None
    seconds = answer.get("timeoutSeconds") if isinstance(answer, dict) else None
    if isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds >= 0:
        return PushResult("redeliver", float(seconds))
    return PushResult("ack")


SAID_CHARS = 300
"""How much of a refusing app's answer the failure's log line keeps."""


def _said(content: bytes) -> str:
    """What the app said with a refusal, for the log line of the failed delivery: the Workflow SDK's queue handler
    answers a handler that threw with the error as a JSON string (``"Error: ..."``: nothing else shows it, the app
    logs none of it), a bad message with ``{"error": "Unhandled queue"}``. One line, at most ``SAID_CHARS``."""
    try:
        answer = json.loads(content) if content else None
    except ValueError:
        answer = content.decode("utf-8", "replace")
    if isinstance(answer, dict) and isinstance(answer.get("error"), str):
        answer = answer["error"]
    text = answer if isinstance(answer, str) else json.dumps(answer) if answer is not None else ""
    text = " ".join(text.split())
    return text if len(text) <= SAID_CHARS else text[:SAID_CHARS] + "..."


def sdk_run(run: Run) -> str | None:
    """The ``@workflow/core`` version whose TypeScript runtime runs ``run`` (its ``executionContext`` names it: the
    runtime's ``start`` writes ``workflowCoreVersion`` there), or None for a run of awsworld's own.

    Why it matters: such a run's code is its app's, reached only by the pushes its runtime queues. A flow message
    of awsworld's for it (the watchdog's wake of a run idle past the watch horizon, a restart's, an operator's) finds
    no Python workflow of its name, and the unknown-workflow path failed the run (``UNKNOWN_WORKFLOW``, 5 minutes
    into a hook's wait on a deployed stack) or parked it under ``awsworld dev``; it is acknowledged unread
    instead (``_worker/delivery.py``), and ``dev``'s restart leaves such runs to their runtime."""
    version = (run.execution_context or {}).get("workflowCoreVersion")
    return version if isinstance(version, str) and version else None



WakeAct = Literal["skip", "wake"]


def refuse_wake(run: Run, act: WakeAct) -> None:
    """Refuse (``SdkRunError``, before anything is written or queued) an operator's skip of a wait or wake of a run of
    the TypeScript runtime (``sdk_run``), saying how its app does it.

    Why: such a run moves only when its app gets a message, and the app's address travels only on the messages its
    runtime queues (``deliverTo``, ``push_envelope``); no World keeps it, and the stack's flow function knows only
    ``AWSWORLD_PUSH_HOSTS``. awsworld's own wake is a flow message of its own kind, which the delivery path
    acknowledges unread for such a run (``_worker/delivery.py``): ``awsworld wake`` said "woke", and ``awsworld
    skip`` recorded the wait's end and said "the run goes on now", while the run slept on until its own delayed
    message came (an hour's sleep: an hour). The app's runtime does both itself, through its World, whose messages
    reach it (``getRun(runId).wakeUp()``: a ``wait_completed`` per sleep, then a message)."""
    core = sdk_run(run)
    if core is None:
        return
    sleeps = f"getRun({run.run_id!r}).wakeUp() from 'workflow/api' completes the run's sleeps and sends it a message"
    if act == "skip":
        then = ("a skip recorded here would not move it before its own delayed message came. End its sleep from the "
                f"app: {sleeps} (wakeUp({{correlationIds: [waitId]}}) for one sleep; a step's retry back-off ends "
                "at its time). Nothing was recorded")
    else:
        then = (f"a wake sent from here would be acknowledged unread. Wake it from the app: {sleeps}; for a run that "
                f"sleeps on nothing, (await getWorld()).queue('__wkf_workflow_{run.workflow_name}', {{runId: "
                f"{run.run_id!r}}}) from 'workflow/runtime' sends it one. Nothing was sent")
    raise SdkRunError(
        f"run {run.run_id} is a run of the Workflow SDK's TypeScript runtime (@workflow/core {core}): it moves when "
        "its app gets a message, and only the messages its runtime queues carry the app's address, so " + then,
        field="runId", run_id=run.run_id)
