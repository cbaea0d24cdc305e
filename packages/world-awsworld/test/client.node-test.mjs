// The package's Client for Python workflows (`createClient`; node's test runner: `node --test
// test/client.node-test.mjs`, after `tsc`; `.ci/world-testing` runs it), against `awsworld serve MODULE` (a real
// server process running the Python workflows of CLIENT_FLOWS) on the in-memory World and on the embedded
// emulator: a run started by name with arguments above the inline value limit, its result; an idempotent start by
// run id; a failed run's result as the Workflow SDK's WorkflowRunFailedError carrying the stored error; a hook
// resumed (once per idempotency key); a cancelled run's result carrying the reason; a wait that runs out; and the
// server's 400s (an unknown name, arguments that do not fit, a reason too long) as thrown errors naming the field,
// with nothing stored. How its requests authenticate (SigV4, a token) is in test/auth.node-test.mjs.
// The server comes from test/serving.mjs (AWSWORLD_PYTHON's venv).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { HookNotFoundError, WorkflowRunCancelledError, WorkflowRunFailedError, WorkflowRunNotCompletedError, WorkflowRunNotFoundError, WorkflowWorldError } from '@workflow/errors';

import { createClient, createWorld } from '../dist/index.js';
import { startServe } from './serving.mjs';

const CLIENT_FLOWS = `
from awsworld import create_hook, step, workflow


@step(name="ts.echo")
async def echo(text: str) -> str:
    return text


@workflow(name="ts.greet")
async def greet(name: str, *, note: str = "") -> dict[str, str]:
    return {"greeting": f"hello {name}", "note": await echo(note)}


class Declined(Exception):
    pass


@workflow(name="ts.decline")
async def decline(order: str) -> None:
    raise Declined(f"order {order} declined")


@workflow(name="ts.approve")
async def approve(order: str) -> dict[str, object]:
    async with create_hook(token=f"ts-approve:{order}") as hook:
        decision = await hook
    return {"order": order, "decision": decision}
`;

/** Well above the World's inline value limit (16 KiB): stored apart from the run's record. */
const NOTE = 'ü✓'.repeat(50_000);

for (const backend of ['memory', 'emulator']) {
  describe(`createClient against awsworld serve --world ${backend} (Python workflows)`, () => {
    let server;
    let client;
    let world;

    before(async () => {
      server = await startServe(() => ['--world', backend, 'client_flows'], {
        cwd: (folder) => folder,
        files: { 'client_flows.py': CLIENT_FLOWS },
      });
      client = createClient({ url: server.url });
      world = createWorld({ url: server.url });
    });

    after(() => server?.stop());

    /** Until the run holds its hook `token` (before, resuming it is a HookNotFoundError). */
    async function heldHook(token) {
      while (!(await world.hooks.getByToken(token).catch(() => null))) await new Promise((ok) => setTimeout(ok, 50));
    }

    test('start by name with args and kwargs above the inline limit; result is its output; a run id starts one run', async () => {
      const { runId } = await client.start('ts.greet', ['ada'], { note: NOTE });
      assert.match(runId, /^wrun_/);
      assert.deepEqual(await client.result(runId, { timeout: 60 }), { greeting: 'hello ada', note: NOTE });
      assert.equal((await world.runs.get(runId)).workflowName, 'ts.greet');

      const chosen = `wrun_ts_client_${backend}`;
      assert.deepEqual(await client.start('ts.greet', ['bo'], {}, { runId: chosen }), { runId: chosen });
      assert.deepEqual(await client.start('ts.greet', ['bo'], {}, { runId: chosen }), { runId: chosen });
      assert.deepEqual(await client.result(chosen), { greeting: 'hello bo', note: '' });
      const greets = await world.runs.list({ workflowName: 'ts.greet' });
      assert.equal(greets.data.length, 2);
    });

    test("a failed run's result throws WorkflowRunFailedError carrying the stored error", async () => {
      const { runId } = await client.start('ts.decline', ['o-9']);
      const error = await client.result(runId).then(() => assert.fail('the run completed'), (thrown) => thrown);
      assert.ok(error instanceof WorkflowRunFailedError, String(error));
      assert.ok(WorkflowRunFailedError.is(error));
      assert.equal(error.runId, runId);
      assert.match(error.message, /failed: order o-9 declined/);
      assert.equal(error.cause.message, 'order o-9 declined');
      assert.equal(error.cause.name, 'Declined');
      assert.equal(error.cause.type, 'client_flows.Declined');
      assert.match(error.cause.stack, /raise Declined/);
      assert.equal(error.errorCode, (await world.runs.get(runId)).errorCode);
    });

    test('resumeHook waits for the hook when asked and delivers the payload once per idempotency key; an unheld token is a HookNotFoundError', async () => {
      await assert.rejects(client.resumeHook('ts-approve:nobody', { approved: true }), (error) =>
        error instanceof HookNotFoundError && error.token === 'ts-approve:nobody' && error.status === 404);
      const { runId } = await client.start('ts.approve', ['o-1']);
      // Sent as the run starts: `wait` holds it until the run reaches create_hook.
      const first = await client.resumeHook('ts-approve:o-1', { approved: true, by: 'ops' },
        { idempotencyKey: 'decision-1', wait: 30 });
      assert.equal(first.recorded, true);
      assert.equal(first.event.eventType, 'hook_received');
      assert.ok(first.event.createdAt instanceof Date);
      const again = await client.resumeHook('ts-approve:o-1', { approved: false }, { idempotencyKey: 'decision-1' });
      assert.equal(again.recorded, false);
      assert.equal(again.event.eventId, first.event.eventId);
      assert.deepEqual(await client.result(runId), { order: 'o-1', decision: { approved: true, by: 'ops' } });
    });

    test("a wait that runs out throws WorkflowRunNotCompletedError; cancel's reason comes back with the result", async () => {
      const { runId } = await client.start('ts.approve', ['o-2']);
      await heldHook('ts-approve:o-2');
      await assert.rejects(client.result(runId, { timeout: -1 }), /timeout must be a number of seconds >= 0, not -1/);
      await assert.rejects(client.result(runId, { timeout: 0 }), (error) =>
        error instanceof WorkflowRunNotCompletedError && error.runId === runId && error.status === 'running');
      const cancelled = await client.cancel(runId, { reason: 'customer left' });
      assert.equal(cancelled.runId, runId);
      assert.equal(cancelled.status, 'cancelled');
      const error = await client.result(runId).then(() => assert.fail('the run completed'), (thrown) => thrown);
      assert.ok(error instanceof WorkflowRunCancelledError, String(error));
      assert.equal(error.runId, runId);
      assert.equal(error.reason, 'customer left');
      assert.match(error.message, /cancelled: customer left$/);
      await assert.rejects(client.cancel('wrun_missing'), (error) => error instanceof WorkflowRunNotFoundError && error.status === 404);
    });

    test("the server's 400s are thrown with their field (details.field), and store nothing", async () => {
      const runs = async () => (await world.runs.list({})).data.length;
      const before = await runs();
      const refused = async (promise) => promise.then(() => assert.fail('the server took it'), (error) => error);

      const unknown = await refused(client.start('ts.greeet', ['ada']));
      assert.ok(unknown instanceof WorkflowWorldError, String(unknown));
      assert.equal(unknown.status, 400);
      assert.equal(unknown.code, 'invalid-input');
      assert.equal(unknown.details.field, 'workflow');
      assert.match(unknown.message, /ts\.greeet/);

      const misfit = await refused(client.start('ts.greet', [], { name: 'ada', nickname: 'a' }));
      assert.equal(misfit.status, 400);
      assert.equal(misfit.details.field, 'args');
      assert.match(misfit.message, /nickname/);
      assert.equal(await runs(), before);

      const { runId } = await client.start('ts.approve', ['o-3']);
      const long = await refused(client.cancel(runId, { reason: 'x'.repeat(513) }));
      assert.equal(long.status, 400);
      assert.equal(long.details.field, 'reason');
      assert.notEqual((await world.runs.get(runId)).status, 'cancelled');
      await client.cancel(runId);
    });
  });
}
