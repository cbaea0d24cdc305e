"""Streams: a step writes, a client reads live (docs: How-to / Streams)."""

import asyncio
from collections.abc import AsyncIterator

from awsworld import Client, Run, get_writable, step, step_metadata, workflow


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


# --8<-- [start:resume]
async def read_on(run: Run[int], seen: list[bytes]) -> list[bytes]:
    """Go on reading where a reader stopped (its connection lost, its process restarted): from the first chunk
    it did not get. Each chunk keeps its index, so the count of those received is where to start."""
    async for chunk in run.stream("progress", start_index=len(seen)):
        seen.append(chunk)
    return seen


async def from_the_newest(run: Run[int]) -> list[str]:
    """The newest chunk so far, then the new ones until the stream closes: a negative start_index counts from
    the tail as it is when the reader starts (-1: the last chunk)."""
    return [chunk.decode() async for chunk in run.stream("progress", start_index=-1)]
# --8<-- [end:resume]


CUT_OFF: list[str] = []
"""Prompts whose first attempt is cut off half-way (a crash, a timeout), as ``main`` below asks."""


async def generate(prompt: str) -> AsyncIterator[str]:  # a model's tokens, as its client yields them
    for n, token in enumerate(["The", " answer", " is", " 42."]):
        if n == 2 and prompt in CUT_OFF and step_metadata().attempt == 1:
            raise ConnectionError("the model's connection dropped")  # after two tokens were written
        yield token


# --8<-- [start:restart]
RESTART = b"\x00restart"  # a chunk no token can be


@step(name="streams.answer")
async def answer(prompt: str) -> str:
    out = get_writable("tokens")
    if step_metadata().attempt > 1:  # an earlier attempt was cut off: the chunks it wrote stay in the stream
        await out.write(RESTART)
    tokens: list[str] = []
    async for token in generate(prompt):
        tokens.append(token)
        await out.write(token)
    await out.close()
    return "".join(tokens)


async def read_answer(run: Run[str]) -> str:
    parts: list[bytes] = []
    async for chunk in run.stream("tokens"):
        if chunk == RESTART:
            parts.clear()  # the step started over: drop what the attempt before wrote
        else:
            parts.append(chunk)
    return b"".join(parts).decode()
# --8<-- [end:restart]


@workflow(name="streams.ask")
async def ask(prompt: str) -> str:
    return await answer(prompt)


async def main() -> None:
    from awsworld.testing import WorkflowTestEnv

    async with WorkflowTestEnv() as env:
        assert await follow(env.client, "cat.mp4") == [f"cat.mp4: part {n}/3\n" for n in (1, 2, 3)]
        run = await env.client.start(publish, "dog.mp4")
        first: list[bytes] = []
        async for chunk in run.stream("progress"):  # a reader that stops after one chunk
            first.append(chunk)
            break
        assert [c.decode() for c in await read_on(run, first)] == [f"dog.mp4: part {n}/3\n" for n in (1, 2, 3)]
        assert await from_the_newest(run) == ["dog.mp4: part 3/3\n"]
        CUT_OFF.append("why?")
        run = await env.client.start(ask, "why?")
        assert [chunk async for chunk in run.stream("tokens")] == [b"The", b" answer", RESTART, b"The", b" answer",
                                                                    b" is", b" 42."]
        assert await read_answer(run) == await run.result() == "The answer is 42."


if __name__ == "__main__":
    asyncio.run(main())
