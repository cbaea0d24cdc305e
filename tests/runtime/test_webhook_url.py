"""``webhook_url(token)`` in memory (WorkflowTestEnv): a step builds the URL from ``AWSWORLD_WEBHOOK_URL``, a test
that has not set it is told what to set, and the workflow body is refused (the address is the deployment's, not
the run's). ``awsworld dev`` and the stack set the variable: ``tests/cli/test_dev_webhook_url.py``."""

from __future__ import annotations

import pytest

from awsworld import StepError, WorkflowRunFailedError, create_webhook, step, webhook_url, workflow
from awsworld.testing import WorkflowTestEnv


@step(name="webhook_url_test.hand_out", max_retries=0)
async def hand_out(token: str) -> str:
    return webhook_url(token)


@workflow(name="webhook_url_test.in_a_step")
async def in_a_step() -> list[str]:
    async with create_webhook() as webhook:
        try:
            return [await hand_out(webhook.token), webhook.token]
        except StepError as error:
            return [str(error), webhook.token]


@workflow(name="webhook_url_test.in_the_body")
async def in_the_body() -> str:
    async with create_webhook() as webhook:
        return webhook_url(webhook.token)


async def test_a_step_builds_the_url_from_the_routes_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWSWORLD_WEBHOOK_URL", "https://abc.lambda-url.eu-west-1.on.aws/")
    async with WorkflowTestEnv() as env:
        url, token = await (await env.client.start(in_a_step)).result()
    assert len(token) == 64 and url == f"https://abc.lambda-url.eu-west-1.on.aws/webhooks/{token}"


async def test_unset_it_says_which_variable_and_where_it_comes_from(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWSWORLD_WEBHOOK_URL", raising=False)
    async with WorkflowTestEnv() as env:
        said, _ = await (await env.client.start(in_a_step)).result()
    assert "AWSWORLD_WEBHOOK_URL is not set" in said and "monkeypatch.setenv" in said, said


async def test_the_workflow_body_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWSWORLD_WEBHOOK_URL", "https://hooks.example")
    async with WorkflowTestEnv() as env:
        run = await env.client.start(in_the_body)
        with pytest.raises(WorkflowRunFailedError, match="call it in the step that hands the URL out"):
            await run.result()
