"""Run the first workflow in memory, from a script (docs: Get started / Your first workflow)."""

# --8<-- [start:run]
import asyncio

from checkout import checkout

from awsworld.testing import WorkflowTestEnv


async def main() -> dict[str, object]:
    async with WorkflowTestEnv() as env:  # in memory; the hour's sleep is skipped, not waited out
        run = await env.client.start(checkout, "A-17", ["kettle", "mugs"])  # a Run[dict[str, object]]
        await run.wait_for_hook("approve:A-17")  # runs until the hook exists
        await env.client.resume_hook("approve:A-17", {"approved": True})
        result = await run.result()
        print(result)
        return result


if __name__ == "__main__":
    asyncio.run(main())
# --8<-- [end:run]
