"""A webhook answers its sender as the workflow says, under ``awsworld dev`` as a process with real HTTP requests
(``httpx``): a static ``WebhookResponse``, a step's ``respond()`` (and the same answer to a repeat of the request),
and 504 once ``AWSWORLD_WEBHOOK_RESPONSE_SECONDS`` pass without an answer. The route's logic in memory:
``tests/runtime/test_webhook_respond.py``."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest

from awsworld.settings import Settings

from .test_cli import Dev, Runner, _start, project_of, until_found

WORKFLOWS = '''
from awsworld import WebhookResponse, create_webhook, respond, sleep, step, workflow


@workflow(name="clitest.static")
async def static() -> str:
    async with create_webhook(respond_with=WebhookResponse(200, {"ok": True}, {"x-from": "static"})) as webhook:
        request = await webhook
    return request["body"]


@step(name="clitest.answer")
async def answer(request: dict) -> bool:
    return await respond(request, status=201, body="hello " + request["body"], headers={"x-from": "step"})


@workflow(name="clitest.manual")
async def manual() -> bool:
    async with create_webhook(respond_with="manual") as webhook:
        return await answer(await webhook)


@workflow(name="clitest.silent")
async def silent() -> str:
    async with create_webhook(respond_with="manual") as webhook:
        await webhook
        await sleep("1h")  # never answers
    return "done"
'''
ANSWER_SECONDS = 2


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dev]:
    project = project_of(tmp_path_factory, "webhook-respond", WORKFLOWS)
    runner = Runner(tmp_path_factory.mktemp("webhook-respond-runner"))
    server = Dev(project, project / "state", [runner],
                 settings={Settings.webhook_response_seconds.env: str(ANSWER_SECONDS)})
    yield server
    server.stop()
    runner.close()


def url_of(dev: Dev, run_id: str) -> str:
    hooks = until_found(lambda: dev.json("hooks", run_id), f"run {run_id}'s webhook")
    return str(hooks[0]["url"])


def test_a_static_response_is_what_the_sender_gets(dev: Dev) -> None:
    run_id = _start(dev, "clitest.static")
    answer = httpx.post(url_of(dev, run_id), content=b"ping", headers={"content-type": "text/plain"}, timeout=30)
    assert (answer.status_code, answer.headers["x-from"], answer.json()) == (200, "static", {"ok": True})
    assert answer.headers["content-type"] == "application/json"
    assert json.loads(dev("result", run_id, "--wait", "30").out) == "ping"


def test_a_step_answers_and_a_repeat_gets_the_same_answer(dev: Dev) -> None:
    run_id = _start(dev, "clitest.manual")
    url = url_of(dev, run_id)
    headers = {"idempotency-key": f"order-{run_id}", "content-type": "text/plain"}
    answer = httpx.post(url, content=b"world", headers=headers, timeout=30)
    assert (answer.status_code, answer.headers["x-from"], answer.text) == (201, "step", "hello world")
    assert json.loads(dev("result", run_id, "--wait", "30").out) is True
    started = time.monotonic()
    again = httpx.post(url, content=b"world", headers=headers, timeout=30)  # the run has ended: read, no wait
    assert (again.status_code, again.text, again.headers["x-from"]) == (201, "hello world", "step")
    assert time.monotonic() - started < ANSWER_SECONDS


def test_no_answer_in_time_is_a_504_saying_why(dev: Dev) -> None:
    run_id = _start(dev, "clitest.silent")
    started = time.monotonic()
    answer = httpx.post(url_of(dev, run_id), content=b"{}", timeout=30)
    assert answer.status_code == 504 and answer.json()["status"] == "no-response", answer.text
    assert ANSWER_SECONDS <= time.monotonic() - started < ANSWER_SECONDS + 10
    dev("cancel", run_id)
