"""Values cross every boundary intact, part two (issue 21 item 1): webhook requests, error messages and stream
chunks, in every size class, on every backend (memory, moto, DynamoDB Local), compared byte for byte
(``values_support``; ``test_e2e_values.py`` has the workflow, step, child and hook values).

- Webhooks go through the Lambda webhook handler (``lambda_host.webhook.handle``: its own container, event loop and
  AWS World, as deployed) on AWS, and through the same parse-and-resume code on the in-memory World. Bodies
  are text (non-ASCII, sent as text) and binary (any bytes, base64 in the Function URL event); the route takes
  at most 128 KiB (``MAX_BODY_BYTES``) and answers 413 beyond, recording nothing.
- Error messages are kept up to 32 KiB characters (``MAX_ERROR_MESSAGE``) by design: a longer one keeps its
  head and says how much was cut. Up to the cap, a message reaches the workflow (``StepError``) and the run's
  error whole.
- Stream chunks (bytes, and text as UTF-8) reach a Client reader with their boundaries, up to the largest chunk
  the World takes (``AWSWORLD_MAX_VALUE_BYTES`` less its 4-byte frame); a larger one is refused in the step.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import uuid
from typing import Any, cast

import pytest

from awsworld import StepError, create_webhook, get_writable, step, workflow
from awsworld.authoring.errors import MAX_ERROR_MESSAGE, WorkflowRunFailedError
from awsworld.durable import serde
from awsworld.lambda_host import webhook
from awsworld.lambda_host.container import Container

from .conftest import ALL_BACKENDS, E2E, on_backends, with_env
from .values_support import INLINE, LIMIT_ENV, MAX_VALUE_BYTES, assert_same, blob, text_of

RESULT_TIMEOUT = 60.0
FRAME = 4
BODY_SIZES = {"small": 300, "over-inline": INLINE + 2048, "near-max": webhook.MAX_BODY_BYTES - 64}
CHUNK_SIZES = {"small": 300, "over-inline": INLINE + 1, "near-max": MAX_VALUE_BYTES - FRAME}
"""``near-max`` is the largest chunk the World takes: a chunk and its frame are at most the value limit."""
MESSAGE_CHARS = {"small": 200, "over-inline": INLINE, "at-cap": MAX_ERROR_MESSAGE, "over-cap": 3 * MAX_ERROR_MESSAGE}


e2e_backend = on_backends(ALL_BACKENDS)


local_env = with_env(LIMIT_ENV)


# ----------------------------------------------------------------------------------------- workflows


@workflow(name="values.webhooked")
async def webhooked() -> dict[str, Any]:
    async with create_webhook() as hook:
        return await hook


@step(name="values.fail", max_retries=0)
async def fail(message: str) -> None:
    raise ValueError(message)


@workflow(name="values.catches")
async def catches(message: str) -> dict[str, Any]:
    try:
        await fail(message)
    except StepError as error:
        return {"message": str(error), "type": error.error_type}
    return {"message": None}


@workflow(name="values.fails")
async def fails(message: str, in_step: bool) -> None:
    if in_step:
        await fail(message)
    raise ValueError(message)


def chunk(index: int, size: int) -> bytes | str:
    """Chunk ``index`` of ``size`` bytes: even ones bytes (every byte value), odd ones non-ASCII text."""
    return blob(size)[::-1] if index % 2 == 0 else text_of(size)


def as_bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8")


@step(name="values.stream", max_retries=0)
async def stream_out(name: str, sizes: list[int]) -> int:
    writer = get_writable(name)
    for i, size in enumerate(sizes):
        await writer.write(chunk(i, size))
    await writer.close()
    return len(sizes)


@step(name="values.stream-too-large", max_retries=0)
async def stream_too_large(name: str, size: int) -> str:
    writer = get_writable(name)
    await writer.write(b"before")
    try:
        await writer.write(blob(size))
        await writer.flush()
    except Exception as error:
        await writer.close()
        return type(error).__name__
    return "accepted"


@workflow(name="values.streams")
async def streams(name: str, sizes: list[int]) -> int:
    return await stream_out(name, sizes)


@workflow(name="values.stream-refused")
async def stream_refused(name: str, size: int) -> str:
    return await stream_too_large(name, size)


# ----------------------------------------------------------------------------------------- webhooks


def url_event(token: str, body: str | bytes, content_type: str) -> dict[str, Any]:
    """A Function URL request (payload format 2.0) as Lambda delivers it: a binary body base64-encoded."""
    path = f"/webhooks/{token}"
    return {
        "version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": "from=values&n=%C3%A9",
        "headers": {"content-type": content_type, "idempotency-key": uuid.uuid4().hex, "x-note": "héllo"},
        "queryStringParameters": {"from": "values", "n": "é"},
        "requestContext": {"http": {"method": "POST", "path": path}},
        "isBase64Encoded": isinstance(body, bytes),
        "body": base64.b64encode(body).decode() if isinstance(body, bytes) else body,
    }


class _RouteContainer:
    """What the webhook route reads of its container: the World and a Client on it (the memory World's)."""

    def __init__(self, e2e: E2E) -> None:
        self.world = e2e.world
        self.client = e2e.client


@pytest.fixture
async def send(e2e: E2E) -> Any:
    """``await send(event)`` -> (status, body): on AWS the Lambda handler with a container of its own (a cold
    start on the module's stack), on memory the handler's parse and resume on the test env's World."""
    container: Container | None = None
    if not e2e.memory:
        config = e2e.world.config
        from awsworld.aws import AWSWorld

        container = Container(world_factory=lambda: AWSWorld(config))

    async def go(event: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if container is not None:
            answer = await asyncio.to_thread(webhook.handle, event, None, container)
        else:
            request = webhook.parse(event)
            if isinstance(request, webhook.Response):
                response = request
            else:
                response = await webhook.resume(cast(Any, _RouteContainer(e2e)), request)
            answer = response.to_lambda()
        return answer["statusCode"], json.loads(answer["body"])

    yield go
    if container is not None:
        await asyncio.to_thread(container.reset)
        container.loop.close()


async def _webhook_token(e2e: E2E, run: Any) -> str:
    for _ in range(600):
        hooks = (await e2e.world.hooks.list(run.run_id)).data
        if hooks:
            assert hooks[0].is_webhook
            return str(hooks[0].token)
        await e2e.sleep(0.05)
    raise TimeoutError(f"run {run.run_id} holds no webhook")


@pytest.mark.parametrize("kind", ["text", "binary"])
@pytest.mark.parametrize("size", BODY_SIZES)
async def test_a_webhook_request_reaches_its_run_exactly(e2e: E2E, send: Any, size: str, kind: str) -> None:
    body: str | bytes = text_of(BODY_SIZES[size]) if kind == "text" else blob(BODY_SIZES[size])
    content_type = "text/plain; charset=utf-8" if kind == "text" else "application/octet-stream"
    run = await e2e.start(webhooked)
    token = await _webhook_token(e2e, run)
    status, answer = await send(url_event(token, body, content_type))
    assert (status, answer["status"]) == (202, "accepted"), answer
    request = await run.result(timeout=RESULT_TIMEOUT)
    assert type(request["body"]) is type(body)
    assert_same(request["body"], body)
    assert request["method"] == "POST" and request["query"] == {"from": "values", "n": "é"}
    assert request["headers"]["x-note"] == "héllo" and request["headers"]["content-type"] == content_type
    [received] = [e for e in await run.events() if e.event_type == "hook_received"]
    assert received.event_data is not None
    assert_same(serde.loads(received.event_data["payload"]), request)


async def test_a_webhook_body_over_the_route_limit_is_413_and_records_nothing(e2e: E2E, send: Any) -> None:
    run = await e2e.start(webhooked)
    token = await _webhook_token(e2e, run)
    for body in (blob(webhook.MAX_BODY_BYTES + 1), "é" * (webhook.MAX_BODY_BYTES // 2 + 1)):
        status, answer = await send(url_event(token, body, "application/octet-stream"))
        assert (status, answer["status"]) == (413, "too-large"), answer
    assert not [e for e in await run.events() if e.event_type == "hook_received"]
    assert await run.status() == "running"
    exact = blob(webhook.MAX_BODY_BYTES)
    status, _ = await send(url_event(token, exact, "application/octet-stream"))
    assert status == 202
    assert_same((await run.result(timeout=RESULT_TIMEOUT))["body"], exact)


# ----------------------------------------------------------------------------------------- errors


def _message(chars: int) -> str:
    return ("é🚀 ünïcødé " * (chars // 11 + 1))[:chars]


def _assert_kept(shown: str | None, message: str, *, prefixed: bool = False) -> None:
    """Up to the cap the message is there whole; past it, its head and how many characters were cut, counted
    from the original however often it was capped on the way (a step's message raised on as the run's).
    ``prefixed``: ``shown`` puts a prefix before the message (the run's error names the failed step), so a
    message right at the cap is cut there too; the whole of it is then kept in the error's ``cause``."""
    assert shown is not None
    if len(message) <= MAX_ERROR_MESSAGE and not (prefixed and len(message) > MAX_ERROR_MESSAGE - 200):
        assert message in shown, (len(shown), len(message))
        return
    notice = re.search(r"… \((\d+) more characters cut\)$", shown)
    start = shown.find(message[:64])
    assert notice is not None and start >= 0, shown[-80:]
    kept = shown[start:notice.start()]
    assert message.startswith(kept) and len(kept) + int(notice.group(1)) == len(message)
    assert len(kept) >= MAX_ERROR_MESSAGE - 100 and notice.end() - start <= MAX_ERROR_MESSAGE


@pytest.mark.parametrize("size", MESSAGE_CHARS)
async def test_a_step_failure_message_reaches_the_workflow(e2e: E2E, size: str) -> None:
    message = _message(MESSAGE_CHARS[size])
    run = await e2e.start(catches, message)
    caught = await run.result(timeout=RESULT_TIMEOUT)
    assert caught["type"] == "ValueError"
    _assert_kept(caught["message"], message)
    [failed] = [s for s in await run.steps() if s.step_name == "values.fail"]
    assert failed.error is not None and failed.error.name == "ValueError"
    _assert_kept(failed.error.message, message)


@pytest.mark.parametrize("in_step", [False, True], ids=["workflow-raises", "step-raises"])
@pytest.mark.parametrize("size", MESSAGE_CHARS)
async def test_a_failure_message_reaches_the_runs_error(e2e: E2E, size: str, in_step: bool) -> None:
    message = _message(MESSAGE_CHARS[size])
    run = await e2e.start(fails, message, in_step)
    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result(timeout=RESULT_TIMEOUT)
    _assert_kept(str(failed.value), message, prefixed=in_step)
    view = await run.get()
    assert view.error is not None
    _assert_kept(view.error.message, message, prefixed=in_step)
    if in_step:  # the step's own error, whole up to the cap, rides along as the run error's cause
        cause = failed.value.details["cause"]
        assert cause["type"] == "ValueError"
        _assert_kept(cause["message"], message)


# ----------------------------------------------------------------------------------------- streams


async def _read(run: Any, name: str) -> list[bytes]:
    return [c async for c in run.stream(name)]


async def test_stream_chunks_of_every_size_reach_a_reader_exactly(e2e: E2E) -> None:
    sizes = [CHUNK_SIZES["small"], CHUNK_SIZES["over-inline"], 1, CHUNK_SIZES["near-max"], CHUNK_SIZES["small"],
             CHUNK_SIZES["near-max"] - 1, CHUNK_SIZES["over-inline"]]
    expected = [as_bytes(chunk(i, n)) for i, n in enumerate(sizes)]
    assert [len(c) for c in expected] == sizes
    name = f"values-{uuid.uuid4().hex[:8]}"
    run = await e2e.start(streams, name, sizes)
    live = asyncio.ensure_future(_read(run, name))  # reading while the step writes
    assert await run.result(timeout=RESULT_TIMEOUT) == len(sizes)
    assert await asyncio.wait_for(live, RESULT_TIMEOUT) == expected
    assert await asyncio.wait_for(_read(run, name), RESULT_TIMEOUT) == expected  # and after the run's end
    tail = [c async for c in run.stream(name, start_index=3)]
    assert tail == expected[3:]


async def test_a_stream_chunk_over_the_limit_is_refused_in_the_step(e2e: E2E) -> None:
    name = f"values-{uuid.uuid4().hex[:8]}"
    run = await e2e.start(stream_refused, name, CHUNK_SIZES["near-max"] + 1)
    assert await run.result(timeout=RESULT_TIMEOUT) == "PayloadTooLargeError"
    assert await asyncio.wait_for(_read(run, name), RESULT_TIMEOUT) == [b"before"]
