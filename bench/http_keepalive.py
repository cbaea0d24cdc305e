"""Does ``awsworld serve`` keep connections alive for the TypeScript World? ``python bench/http_keepalive.py``
(about twenty seconds; needs node and ``packages/world-awsworld`` built: ``npm ci && npx tsc -p .`` there).

The server is ``awsworld serve``'s own: the app of ``_http/app.py`` on uvicorn as ``_http/listen.py`` runs it,
here on the in-memory World, behind a TCP relay on 127.0.0.1 that counts the connections it accepts. A node
process then makes ``SAMPLE`` World calls (``runs.get``, the call the Workflow SDK's runtime makes most) through
``createWorld`` (world-awsworld's undici Agent), one at a time and then ``CONCURRENCY`` at a time, and the same
number of requests through undici with ``reset: true`` (the connection closed after each request: what a server
that closes every connection costs). Printed: requests per second and connections opened, per scenario.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path

from awsworld._http.app import create_app
from awsworld._http.auth import Auth
from awsworld._http.listen import listening
from awsworld._memory import MemoryWorld

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "packages" / "world-awsworld"
SAMPLE = 2000
CONCURRENCY = 8
RUN_CREATED = {"eventType": "run_created", "specVersion": 5,
               "eventData": {"workflowName": "bench", "deploymentId": "d", "input": {"__type": "Uint8Array",
                                                                                      "data": "ZGV2bFtd"}}}

NODE = """
import { createWorld } from '%(dist)s';
import { Agent, request } from 'undici';
const [url, runId, sample, concurrency] = [process.argv[1], process.argv[2], +process.argv[3], +process.argv[4]];
const world = createWorld({ url, auth: 'none' });
async function timed(name, total, width, call) {
  let next = 0;
  const start = performance.now();
  await Promise.all(Array.from({ length: width }, async () => { while (next++ < total) await call(); }));
  const seconds = (performance.now() - start) / 1000;
  console.log(JSON.stringify({ name, seconds, perSecond: total / seconds }));
  await new Promise((ok) => process.stdin.once('data', ok));  // (the relay reads its count between scenarios)
}
await timed('createWorld runs.get, one at a time', sample, 1, () => world.runs.get(runId));
await timed(`createWorld runs.get, ${concurrency} at a time`, sample, concurrency, () => world.runs.get(runId));
const closing = new Agent();
await timed('a new connection per request (undici reset: true)', sample, 1, async () => {
  const answer = await request(`${url}/v1/runs/${runId}`, { dispatcher: closing, reset: true });
  await answer.body.text();
});
process.exit(0);
"""


class Relay:
    """A TCP relay to the server that counts the connections clients open (each is one accepted socket here)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.accepted = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.port)

        async def pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while piece := await source.read(65536):
                    sink.write(piece)
                    await sink.drain()
            except ConnectionError:
                pass
            finally:
                sink.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))


async def main() -> int:
    node = shutil.which("node")
    dist = PACKAGE / "dist" / "index.js"
    if node is None or not dist.exists() or not (PACKAGE / "node_modules").exists():
        print(f"needs node and {dist} (cd {PACKAGE} && npm ci && npx tsc -p .)", file=sys.stderr)
        return 2
    world = MemoryWorld()
    app = create_app(world, auth=Auth.for_host("127.0.0.1", None))
    async with listening(app) as running:
        created = await world.events.create(None, RUN_CREATED)
        assert created.run is not None
        relay = Relay(running.port)
        server = await asyncio.start_server(relay.handle, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        script = NODE % {"dist": dist.as_uri()}
        process = await asyncio.create_subprocess_exec(
            node, "--input-type=module", "-e", script, url, created.run.run_id, str(SAMPLE), str(CONCURRENCY),
            cwd=PACKAGE, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        assert process.stdout is not None and process.stdin is not None
        print(f"{SAMPLE} requests per scenario to awsworld serve's app (in-memory World), node {node}")
        before = 0
        for _ in range(3):
            line = await process.stdout.readline()
            if not line:
                break
            result = json.loads(line)
            opened, before = relay.accepted - before, relay.accepted
            print(f"  {result['name']:<52} {result['perSecond']:7.0f} requests/s  {opened:5d} connections")
            process.stdin.write(b"\n")
            await process.stdin.drain()
        await process.wait()
        server.close()
    await world.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
