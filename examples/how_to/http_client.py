"""Start and watch a run over HTTP with ``HttpClient`` (docs: How-to / The World over HTTP).

Against ``awsworld serve --world memory http_orders`` (or ``--world emulator``, or a stack's World server)."""

import asyncio
import sys

from http_orders import checkout

from awsworld.client.http_client import HttpClient


async def main(url: str = "http://127.0.0.1:8787") -> list[bytes]:
    chunks: list[bytes] = []
    # --8<-- [start:client]
    async with HttpClient(url) as client:  # or token="..." for a token server, aws_region="..." for a Function URL
        run = await client.start(checkout, "order-17")
        print(await run.result(timeout=60))
        async for chunk in run.stream("progress"):
            print(chunk)
            # --8<-- [end:client]
            chunks.append(chunk)
    return chunks


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
