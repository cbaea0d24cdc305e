"""Start a run of the demo's workflow on a deployed stack, from Python (docs: Get started / Deploy).

The stack's ``ClientEnvironment`` output gives AWSWORLD_TABLE, AWSWORLD_BUCKET and AWSWORLD_QUEUE_URL; credentials
and region come from your AWS environment or profile. The tests run it on the embedded emulator, whose deliveries
run the demo's ``order.process`` as the stack's flow function would."""

# --8<-- [start:client]
import asyncio

from awsworld import Client
from awsworld.aws import AWSWorld


async def main() -> object:
    async with AWSWorld() as world:  # AWSWORLD_TABLE, AWSWORLD_BUCKET, AWSWORLD_QUEUE_URL from the environment
        client = Client(world)
        # by name (no workflow code here: the run's result is typed Any); the same run_id starts it once
        run = await client.options(run_id="order-A-17").start("order.process", "A-17", ["kettle", "mugs"], 42.5)
        # the flow function runs the steps and a durable sleep, then waits on the hook: wait for it to exist
        await client.resume_hook("address:A-17", {"address": "1 Main St"}, wait=60)
        result = await run.result(timeout=120)
        print(result)
        return result


if __name__ == "__main__":
    asyncio.run(main())
# --8<-- [end:client]
