"""A webhook answers its sender as the workflow says (Vercel's ``createWebhook({respondWith})``), in memory: the
route's own logic (``lambda_host.webhook.resume``) on a ``WorkflowTestEnv``'s World and client. A static
``WebhookResponse`` (and the same for a repeat), ``"manual"`` answered by ``respond()`` in a step (a repeat reads
the same answer; a second ``respond`` is refused quietly), 504 when no answer comes in time, 502 when the run ends
without one, and bad values refused where they are made. ``awsworld dev`` with real HTTP:
``tests/cli/test_dev_webhook_respond.py``; the Lambda handler on an emulator:
``tests/deploy/test_webhook_handler.py``."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any, cast

import pytest

from awsworld import (
    InvalidWebhookResponseError,
    WebhookRequest,
    WebhookResponse,
    create_webhook,
    respond,
    step,
    workflow,
)
from awsworld.authoring.webhook_requests import RespondTo
from awsworld.authoring.webhook_responses import MAX_RESPONSE_BODY_BYTES, RESPOND_TO_FIELD, RESPOND_WITH_FIELD
from awsworld.client.client import Client
from awsworld.client.replay import replay_events
from awsworld.lambda_host.webhook import Response, RouteHost, RouteRequest, resume
from awsworld.local import LocalAWS, MotoServer
from awsworld.testing import WorkflowTestEnv
from awsworld.world.protocol import World


async def deliver(env: RouteHost, token: str, body: str, *, key: str = "k-1", within: float = 10.0) -> Response:
    """What the route does for a ``POST`` to the webhook (``env`` has what it reads: a World and a client)."""
    request = RouteRequest(token, "POST", {"content-type": "application/json", "idempotency-key": key}, body, {})
    return await resume(env, request, within)


def answer_of(response: Response) -> tuple[int, dict[str, str], bytes]:
    return response.http()


ACK = WebhookResponse(200, {"text": "Got it"}, {"x-handled-by": "awsworld"})


@workflow(name="respond_test.static")
async def static() -> list[dict[str, Any]]:
    async with create_webhook(respond_with=ACK) as webhook:
        return [await webhook, await webhook]


@step(name="respond_test.answer")
async def answer(request: dict[str, Any]) -> list[bool]:
    order = json.loads(request["body"])
    first = await respond(request, status=201, body=f"order {order['id']} accepted",
                          headers={"location": f"/orders/{order['id']}"})
    second = await respond(request, status=500, body="a second answer is not sent")
    return [first, second]


@workflow(name="respond_test.manual")
async def manual() -> list[bool]:
    async with create_webhook(respond_with="manual") as webhook:
        request = await webhook
        return await answer(request)


@step(name="respond_test.linger")
async def linger(seconds: float) -> None:
    await asyncio.sleep(seconds)  # real time: the route's wait is real


@workflow(name="respond_test.never_answers")
async def never_answers(seconds: float) -> str:
    async with create_webhook(respond_with="manual") as webhook:
        await webhook
        await linger(seconds)  # then ends without respond()
        return "done"


@workflow(name="respond_test.bad_value")
async def bad_value() -> str:
    try:
        create_webhook(respond_with=cast(Any, "auto"))
    except InvalidWebhookResponseError as error:
        return str(error)
    return "accepted"


@step(name="respond_test.answer_plain", max_retries=0)
async def answer_plain(request: dict[str, Any]) -> str:
    try:
        await respond(request, body="hi")
    except InvalidWebhookResponseError as error:
        return str(error)
    return "answered"


@workflow(name="respond_test.plain")
async def plain() -> str:
    async with create_webhook() as webhook:
        return await answer_plain(await webhook)


async def test_a_static_response_is_sent_once_the_request_is_recorded_and_again_to_a_repeat(
        awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(static)
    hook = await _hook_of(awsworld_env, run.run_id)
    first = await deliver(awsworld_env, hook, '{"n": 1}')
    assert answer_of(first) == (200, {"x-handled-by": "awsworld", "content-type": "application/json"},
                                b'{"text":"Got it"}')
    assert first.delivered
    assert answer_of(await deliver(awsworld_env, hook, '{"n": 1}')) == answer_of(first)  # a repeat: the same
    await deliver(awsworld_env, hook, '{"n": 2}', key="k-2")
    requests = await run.result()
    assert [r["body"] for r in requests] == ['{"n": 1}', '{"n": 2}'], "the repeat was recorded once"
    assert all(RESPOND_TO_FIELD not in r for r in requests), "a static webhook's request names no answer stream"


async def _hook_of(env: RouteHost, run_id: str) -> str:
    for _ in range(200):
        hooks = (await env.world.hooks.list(run_id)).data
        if hooks:
            return hooks[0].token
        await asyncio.sleep(0.01)
    raise TimeoutError("no hook")


async def test_a_manual_webhook_sends_the_answer_a_step_writes(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(manual)
    token = await _hook_of(awsworld_env, run.run_id)
    response = await deliver(awsworld_env, token, '{"id": 17}')
    assert answer_of(response) == (201, {"location": "/orders/17", "content-type": "text/plain; charset=utf-8"},
                                   b"order 17 accepted")
    assert await run.result() == [True, False], "the first answer is sent; a second is refused, writing nothing"
    # A repeat of the request (its answer lost): the same answer, read from the run's stream, not a wait.
    again = await asyncio.wait_for(deliver(awsworld_env, token, '{"id": 17}'), timeout=5)
    assert answer_of(again) == answer_of(response)
    [stream] = await awsworld_env.world.streams.list(run.run_id)
    assert stream.startswith("webhook-response.")
    assert len((await awsworld_env.world.streams.get_chunks(run.run_id, stream)).data) == 1


@step(name="respond_test.answer_request")
async def answer_request(request: WebhookRequest) -> None:
    await respond(request, status=204)


@workflow(name="respond_test.manual_request")
async def manual_request() -> WebhookRequest:
    async with create_webhook(respond_with="manual") as webhook:
        request = await webhook
        await answer_request(request)
        return request


async def test_what_the_route_records_is_exactly_a_webhook_request(awsworld_env: WorkflowTestEnv) -> None:
    """``create_webhook()`` is a ``Hook[WebhookRequest]``: the route's payload has that TypedDict's keys, no other,
    with the types it names (a manual webhook's adds its optional ``respondTo``, a ``RespondTo``), so what a
    workflow's type checker is told is what arrives."""
    run = await awsworld_env.client.start(static)
    token = await _hook_of(awsworld_env, run.run_id)
    await deliver(awsworld_env, token, '{"n": 1}')
    await deliver(awsworld_env, token, "", key="k-2")
    for request in await run.result():
        assert set(request) == WebhookRequest.__required_keys__ and not WebhookRequest.__optional_keys__ & set(request)
        assert request["method"] == "POST" and request["query"] == {} and isinstance(request["body"], str)
        assert request["headers"]["content-type"] == "application/json"
    manual = await awsworld_env.client.start(manual_request)
    token = await _hook_of(awsworld_env, manual.run_id)
    assert (await deliver(awsworld_env, token, '{"n": 1}')).status == 204
    request = await manual.result()
    assert set(request) == WebhookRequest.__required_keys__ | WebhookRequest.__optional_keys__ == {
        "method", "headers", "body", "query", RESPOND_TO_FIELD}
    assert set(request[RESPOND_TO_FIELD]) == RespondTo.__required_keys__ and \
        request[RESPOND_TO_FIELD]["runId"] == manual.run_id


async def test_no_answer_in_time_is_504_and_a_run_that_ends_without_one_is_502(
        awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(never_answers, 1.5)
    token = await _hook_of(awsworld_env, run.run_id)
    timed_out = await deliver(awsworld_env, token, "{}", within=0.3)
    assert timed_out.status == 504 and cast(dict[str, str], timed_out.body)["status"] == "no-response"
    assert timed_out.delivered, "the request was recorded: the run has it"
    assert await run.result() == "done"
    ended = await asyncio.wait_for(deliver(awsworld_env, token, "{}", within=30), timeout=5)  # a repeat: no wait
    assert ended.status == 502 and "ended without answering" in cast(dict[str, str], ended.body)["detail"]


async def test_bad_values_are_refused_where_they_are_made(awsworld_env: WorkflowTestEnv) -> None:
    message = await (await awsworld_env.client.start(bad_value)).result()
    assert "takes None (answer 202), a WebhookResponse" in message and "'auto'" in message
    run = await awsworld_env.client.start(plain)
    token = await _hook_of(awsworld_env, run.run_id)
    assert (await deliver(awsworld_env, token, "{}")).status == 202
    assert "respond_with=\"manual\"" in await run.result()
    with pytest.raises(RuntimeError, match="inside a @step"):
        await respond({RESPOND_TO_FIELD: {"runId": "r", "stream": "s"}}, body="hi")


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"status": 199}, "from 200 to 599"),
    ({"status": 100}, "from 200 to 599"),
    ({"status": 600}, "from 200 to 599"),
    ({"status": True}, "from 200 to 599"),
    ({"status": 204, "body": "x"}, "status 204 has no body"),
    ({"status": 304, "body": {"a": 1}}, "status 304 has no body"),
    ({"headers": {"bad name": "x"}}, "not an HTTP header name"),
    ({"headers": {"x-a": "one\r\nset-cookie: two"}}, "one line of ASCII"),
    ({"headers": {"x-a": 1}}, "one line of ASCII"),
    ({"headers": {"Content-Length": "3"}}, "set by the server"),
    ({"headers": {"X-A": "1", "x-a": "2"}}, "given twice"),
    ({"body": "x" * (MAX_RESPONSE_BODY_BYTES + 1)}, f"the largest is {MAX_RESPONSE_BODY_BYTES}"),
    ({"body": {"when": object()}}, "JSON-able"),
    ({"body": float("nan")}, "JSON-able"),
])
def test_a_response_is_checked_where_it_is_made(kwargs: dict[str, Any], says: str) -> None:
    with pytest.raises(InvalidWebhookResponseError, match=says):
        WebhookResponse(**kwargs)


def test_a_response_defaults_its_content_type_by_body_and_never_shows_the_body() -> None:
    assert WebhookResponse(body=b"\x00\xff").headers == {"content-type": "application/octet-stream"}
    assert WebhookResponse(body=[1, "é"]).body == '[1,"é"]'.encode()
    assert WebhookResponse(204).headers == {} and WebhookResponse(204).body == b""
    custom = WebhookResponse(body="<p>ok</p>", headers={"Content-Type": "text/html"})
    assert custom.headers == {"content-type": "text/html"}
    assert "<p>" not in repr(custom) and "9 bytes" in repr(custom)
    binary = WebhookResponse(body=b"\xff\xfe")
    assert WebhookResponse.from_stored(binary.stored()) == binary


async def test_the_answer_is_recorded_on_hook_created_and_replay_never_compares_it(
        awsworld_env: WorkflowTestEnv) -> None:
    """What the route reads is the log's, not the code's: a deploy that changes ``respond_with`` replays the runs
    recorded before (their requests are answered as recorded), and a log without the field replays too."""
    run = await awsworld_env.client.start(static)
    token = await _hook_of(awsworld_env, run.run_id)
    for key in ("a", "b"):
        await deliver(awsworld_env, token, "{}", key=key)
    await run.result()
    events = await run.events()
    [created] = [e for e in events if e.event_type == "hook_created"]
    assert (created.event_data or {})[RESPOND_WITH_FIELD] == ACK.stored()
    assert replay_events(events).ok
    without = [e.model_copy(update={"event_data": {k: v for k, v in (e.event_data or {}).items()
                                                   if k != RESPOND_WITH_FIELD}}) for e in events]
    assert replay_events(without).ok


ANSWERS = 4
"""How many ``respond()`` calls race for one request."""
ROUNDS = 20
"""How many requests they race for: a round on moto lost the race in about one in five before the fix (in 6 test
runs of 8 rounds, 4 failed), so 20 rounds find it in all but about 1 run in 100."""


@step(name="respond_test.answer_at_once")
async def answer_at_once(request: dict[str, Any]) -> list[bool]:
    return list(await asyncio.gather(*(respond(request, body=f"answer {n}") for n in range(ANSWERS))))


@workflow(name="respond_test.at_once")
async def at_once() -> list[list[bool]]:
    async with create_webhook(respond_with="manual") as webhook:
        return [await answer_at_once(await webhook) for _ in range(ROUNDS)]


@dataclasses.dataclass(frozen=True)
class _Host:
    world: World
    client: Client


async def test_of_answers_written_at_once_only_the_one_sent_returns_true() -> None:
    """``respond()`` calls at once may all find the stream empty and write (the World has no write-if-empty): on
    moto, whose reads and writes interleave, more than one returned True while the sender got one of them."""
    moto = MotoServer().start()
    try:
        async with LocalAWS(moto=moto) as local:
            assert local.client is not None
            host = _Host(local.world, local.client)
            run = await local.client.start(at_once)
            token = await _hook_of(host, run.run_id)
            sent = [(await deliver(host, token, "{}", key=f"k-{n}")).http()[2] for n in range(ROUNDS)]
            said = await run.result(timeout=60)
            assert [round.count(True) for round in said] == [1] * ROUNDS, said
            assert sent == [f"answer {round.index(True)}".encode() for round in said], "True: the answer sent"
    finally:
        moto.stop()
