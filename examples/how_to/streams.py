"""Streams: a step writes, a client reads live (docs: How-to / Streams)."""

import asyncio

from awsworld import Client, get_writable, step, workflow


# --8<-- [start:write]
@step(name="streams.transcode")
async def transcode(video: str, parts: int) -> int:
    progress = get_writable("progress")  # the run's stream named "progress"
    for part in range(1, parts + 1):
        await progress.write(f"{video}: part {part}/{parts}\n")  # text or bytes; each write is one chunk
    await progress.close()  # readers end here (the run's end closes it too)
    return parts


@workflow(name="streams.publish")
async def publish(video: str) -> int:
    return await transcode(video, 3)
# --8<-- [end:write]


# --8<-- [start:read]
async def follow(client: Client, video: str) -> list[str]:
    run = await client.start(publish, video)
    lines = [chunk.decode() async for chunk in run.stream("progress")]  # live, until the stream closes
    await run.result()
    return lines
# --8<-- [end:read]


async def main() -> None:
    from awsworld.testing import WorkflowTestEnv

    async with WorkflowTestEnv() as env:
        assert await follow(env.client, "cat.mp4") == [f"cat.mp4: part {n}/3\n" for n in (1, 2, 3)]


if __name__ == "__main__":
    asyncio.run(main())
