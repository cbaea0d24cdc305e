"""A webhook that answers its sender (docs: How-to / Hooks and approvals, "Answering the sender"): a fixed answer
for a provider that only needs an acknowledgment, and a step's answer for a sender that waits for a result."""

import asyncio
import json

from awsworld import WebhookRequest, WebhookResponse, create_webhook, respond, step, workflow


# --8<-- [start:static]
@workflow(name="answers.slack_command")
async def slack_command(channel: str) -> str:
    ack = WebhookResponse(200, {"response_type": "ephemeral", "text": "On it..."})
    async with create_webhook(respond_with=ack) as webhook:  # each request is answered `ack` once recorded
        command = await webhook
    return f"{channel}: {command['body']}"
# --8<-- [end:static]


# --8<-- [start:manual]
@step(name="answers.check_signup")
async def check_signup(request: WebhookRequest) -> bool:
    form = json.loads(request["body"] or "{}")
    ok = "@" in form.get("email", "")
    await respond(request, status=200 if ok else 422, body={"ok": ok})  # what the sender's request returns
    return ok


@workflow(name="answers.signup")
async def signup() -> bool:
    async with create_webhook(respond_with="manual") as webhook:
        return await check_signup(await webhook)  # the route waits for the step's answer
# --8<-- [end:manual]


async def main() -> None:
    from awsworld.lambda_host.webhook import RouteRequest, resume
    from awsworld.testing import WorkflowTestEnv

    async with WorkflowTestEnv() as env:
        run = await env.client.start(signup)
        await env.idle()
        [hook] = (await env.world.hooks.list(run.run_id)).data
        # What the webhook route (`awsworld dev`, the stack) does for `POST <webhook URL>`: deliver, then answer.
        request = RouteRequest(hook.token, "POST", {"content-type": "application/json"}, '{"email": "ada@x.org"}', {})
        answer = await resume(env, request)
        assert (answer.status, answer.body) == (200, b'{"ok":true}')
        assert await run.result() is True

        run = await env.client.start(slack_command, "#ops")
        await env.idle()
        [hook] = (await env.world.hooks.list(run.run_id)).data
        answer = await resume(env, RouteRequest(hook.token, "POST", {}, "deploy", {}))
        assert answer.status == 200 and b"On it" in answer.http()[2]
        assert await run.result() == "#ops: deploy"


if __name__ == "__main__":
    asyncio.run(main())
