"""Vercel Workflow's webhook example (create a webhook, hand its URL to a payment provider, wait for the provider's
request), ported (docs: Coming from Vercel Workflow). The URL is ``webhook_url(token)``, built in the step that hands
it out: the address is the deployment's (``AWSWORLD_WEBHOOK_URL``, which the stack and ``awsworld dev`` set)."""

import asyncio
import json
import os
from unittest.mock import patch

from awsworld import WebhookRequest, create_webhook, step, webhook_url, workflow

SENT: list[str] = []  # what the payment provider was asked to call, for the example


# --8<-- [start:webhook]
@step(name="vercel.request_payment")
async def request_payment(order_id: str, token: str) -> None:
    url = webhook_url(token)  # Vercel: webhook.url, e.g. https://<id>.lambda-url.<region>.on.aws/webhooks/<token>
    SENT.append(url)  # here: the payment provider's API, with the URL to call back


@step(name="vercel.fulfil")
async def fulfil(order_id: str, amount: int) -> str:
    return f"{order_id} paid {amount}"


@workflow(name="vercel.process_order")
async def process_order(order_id: str) -> str:
    async with create_webhook(timeout="1d") as webhook:  # Vercel: using webhook = createWebhook()
        await request_payment(order_id, webhook.token)
        request = await webhook  # a WebhookRequest: {"method", "headers", "body", "query"}, not a Request object
    payment = json.loads(request["body"] or "{}")  # Vercel: await request.json() (body: text, bytes, or None)
    return await fulfil(order_id, payment["amount"])
# --8<-- [end:webhook]


async def main() -> None:
    from awsworld.testing import WorkflowTestEnv

    # The stack or `awsworld dev` sets it; a test sets it itself (restored after, here).
    base = os.environ.get("AWSWORLD_WEBHOOK_URL", "https://hooks.example")
    with patch.dict(os.environ, {"AWSWORLD_WEBHOOK_URL": base}):
        async with WorkflowTestEnv() as env:
            run = await env.client.start(process_order, "A-9")
            await env.idle()
            [url] = SENT
            token = url.rsplit("/", 1)[1]
            assert url == f"{base}/webhooks/{token}"
            # what the webhook route delivers for `POST <url>` with a JSON body (awsworld dev, or the stack)
            request = WebhookRequest(method="POST", headers={"content-type": "application/json"},
                                     body='{"amount": 40}', query={})
            await env.client.resume_hook(token, request)
            assert await run.result() == "A-9 paid 40"


if __name__ == "__main__":
    asyncio.run(main())
