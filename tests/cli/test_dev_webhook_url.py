"""A workflow hands a sender its webhook's URL, as Vercel's ``webhook.url`` does: ``dev`` as a process, a sender
calling the URL the step built, the CLI as processes.

Before, a workflow had only ``hook.token``: nothing on the stack or under ``dev`` told its code the webhook route's
address, so a port of a Vercel workflow (``createWebhook()``, then hand ``webhook.url`` to a payment provider) got
stuck, and ``awsworld hooks`` with ``AWSWORLD_WEBHOOK_URL`` set to the stack's ``WebhookUrl`` output (which ends in
``webhooks/``) printed ``.../webhooks/webhooks/<token>``, a URL that answers 404."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from .test_cli import Dev, _start, project_of, serving, until_found

WORKFLOWS = '''
from pathlib import Path

from awsworld import create_webhook, step, webhook_url, workflow


@step(name="clitest.ask_payment")
async def ask_payment(order: str, token: str) -> None:
    Path(f"callback-{order}.txt").write_text(webhook_url(token))  # the payment provider gets the URL (dev's cwd)


@workflow(name="clitest.pay")
async def pay(order: str) -> dict:
    async with create_webhook(timeout="1h") as webhook:
        await ask_payment(order, webhook.token)
        request = await webhook
    return {"order": order, "body": json.loads(request["body"])}


@workflow(name="clitest.url_in_body")
async def url_in_body() -> str:
    async with create_webhook() as webhook:
        return webhook_url(webhook.token)


import json  # noqa: E402
'''


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return project_of(tmp_path_factory, "webhook-url", WORKFLOWS)


@pytest.fixture(scope="module")
def dev(project: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dev]:
    yield from serving(project, tmp_path_factory, "webhook-url")


def test_a_step_hands_out_the_webhooks_url_and_a_call_to_it_resumes_the_run(dev: Dev, project: Path) -> None:
    run_id = _start(dev, "clitest.pay", '"A-7"')
    handed = project / "callback-A-7.txt"
    url = until_found(lambda: handed.exists() and handed.read_text(), "the URL the step handed out")
    assert url.startswith(f"{dev.env['AWSWORLD_WEBHOOK_URL']}/webhooks/"), url
    request = urllib.request.Request(url, data=b'{"amount": 40}', method="POST",
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:  # the provider calls back
        assert answer.status == 202
    assert json.loads(dev("result", run_id, "--wait", "30").out) == {"order": "A-7", "body": {"amount": 40}}
    # the CLI names the same URL, whether its base is the route's root (as dev exports it) or the stack's
    # WebhookUrl output, which ends in "webhooks/"
    [listed] = dev.json("hooks", run_id)
    assert listed["url"] == url
    output_style = Dev.__new__(Dev)
    output_style.__dict__.update(dev.__dict__)
    output_style.env = dev.env | {"AWSWORLD_WEBHOOK_URL": dev.env["AWSWORLD_WEBHOOK_URL"] + "/webhooks/"}
    assert output_style.json("hooks", run_id)[0]["url"] == url


def test_the_url_in_a_workflow_body_is_refused_saying_where_it_goes(dev: Dev) -> None:
    run_id = _start(dev, "clitest.url_in_body", "--wait", "30")
    described = dev.json("describe", run_id)
    assert described["status"] == "failed", described
    assert "call it in the step that hands the URL out" in described["error"], described["error"]
