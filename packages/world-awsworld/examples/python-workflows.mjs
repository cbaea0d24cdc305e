// A Node app's calls to awsworld's Python workflows over HTTP (docs: How-to / The World over HTTP): start a run by
// its workflow's name, read it, wait for its result, read its stream, resume its hook. Against
// `awsworld serve --world memory http_orders` (run in examples/how_to, where http_orders.py defines the
// workflows): `node examples/python-workflows.mjs [url]` here, after `npm ci && npx tsc -p .`.
// test/examples.node-test.mjs runs it so, and checks what it prints.
// --8<-- [start:calls]
import { createWorld } from 'world-awsworld';

const url = process.argv[2] ?? 'http://127.0.0.1:8787'; // awsworld serve
const world = createWorld({ url }); // the World's reads: runs, steps, events, hooks, streams
// The Client's calls (start, wait, resume, cancel) are plain JSON endpoints; an error is {"error": {...}}.
async function call(path, body) {
  const init = body === undefined ? {} : { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body) };
  const response = await fetch(`${url}${path}`, init);
  const answer = await response.json();
  if (!response.ok) throw new Error(`${path}: ${answer.error.name}: ${answer.error.message}`);
  return answer;
}

const { runId } = await call('/v1/client/start', { workflow: 'http.checkout', args: ['order-17'], kwargs: {} });
console.log((await world.runs.get(runId)).workflowName); // http.checkout
const ended = await call(`/v1/runs/${runId}/wait?timeout=30`); // the run once it ended
console.log(ended.status, JSON.stringify(ended.output)); // completed {"order":"order-17","parcel":"parcel-order-17"}
for await (const chunk of await world.streams.get(runId, 'progress', 0)) {
  process.stdout.write(chunk); // packing order-17
}

const approval = await call('/v1/client/start', { workflow: 'http.approve', args: ['order-17'], kwargs: {} });
// Resume its hook once the run holds it (until then the World answers HookNotFoundError):
while (!(await world.hooks.getByToken('approve:order-17').catch(() => null))) {
  await new Promise((resolve) => setTimeout(resolve, 100));
}
await call('/v1/client/hooks/resume', { token: 'approve:order-17', payload: { approved: true } });
const decided = await call(`/v1/runs/${approval.runId}/wait?timeout=30`);
console.log(decided.status, JSON.stringify(decided.output)); // completed {"order":"order-17","decision":{"approved":true}}
// --8<-- [end:calls]
