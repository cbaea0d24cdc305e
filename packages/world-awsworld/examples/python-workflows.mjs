// A Node app's calls to awsworld's Python workflows over HTTP (docs: How-to / The World over HTTP): start a run by
// its workflow's name, read it, wait for its result, read its stream, resume its hook. Against
// `awsworld serve --world memory http_orders` (run in examples/how_to, where http_orders.py defines the
// workflows): `node examples/python-workflows.mjs [url]` here, after `npm ci && npx tsc -p .`.
// test/examples.node-test.mjs runs it so, and checks what it prints.
// --8<-- [start:calls]
import { createClient, createWorld } from 'world-awsworld';

const url = process.argv[2] ?? 'http://127.0.0.1:8787'; // awsworld serve
const client = createClient({ url }); // the Client's calls: start, resumeHook, cancel, result
const world = createWorld({ url }); // the World's reads: runs, steps, events, hooks, streams

const { runId } = await client.start('http.checkout', ['order-17']);
console.log((await world.runs.get(runId)).workflowName); // http.checkout
const output = await client.result(runId, { timeout: 30 }); // its output (a failed run throws its error)
console.log('completed', JSON.stringify(output)); // completed {"order":"order-17","parcel":"parcel-order-17"}
for await (const chunk of await world.streams.get(runId, 'progress', 0)) {
  process.stdout.write(chunk); // packing order-17
}

const approval = await client.start('http.approve', ['order-17']);
// Resume its hook, waiting up to 30 s for the run to hold it (until then: HookNotFoundError):
await client.resumeHook('approve:order-17', { approved: true }, { wait: 30 });
const decided = await client.result(approval.runId, { timeout: 30 });
console.log('completed', JSON.stringify(decided)); // completed {"order":"order-17","decision":{"approved":true}}
// --8<-- [end:calls]
