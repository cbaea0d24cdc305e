"""The embedded emulator from Python (docs: How-to / Run on the emulator)."""

import asyncio

from awsworld import step, workflow
from awsworld.local import LocalAWS


@step(name="local.greet")
async def greet(name: str) -> str:
    return f"hello {name}"


@workflow(name="local.hello")
async def hello(name: str) -> str:
    return await greet(name)


async def main() -> str:
    # --8<-- [start:local]
    async with LocalAWS() as local:  # moto's server, in-process, on a free loopback port
        world = local.world  # an AWSWorld on a freshly provisioned table/bucket/queue
        other = await local.new_world()  # another, isolated one on the same server
        assert local.client is not None  # a Client on `world`; deliveries run in this process
        run = await local.client.start(hello, "emulator")
        result = await run.result()
    # --8<-- [end:local]
    assert world is not other and result == "hello emulator"
    return result


if __name__ == "__main__":
    asyncio.run(main())
