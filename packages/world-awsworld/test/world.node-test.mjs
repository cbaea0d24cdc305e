// What a TypeScript app calling the World itself (`createWorld`) sees when something goes wrong, against `awsworld
// serve --world memory` as a process (test/serving.mjs; node's test runner: `node --test test/world.node-test.mjs`,
// after `tsc`; `.ci/world-testing` runs it): a hook token refused with the server's reason, not only the Workflow
// SDK's fixed "Hook not found"; a live stream read whose server dies mid-stream ends in a `WorkflowWorldError`
// naming the stream, not undici's bare `TypeError: terminated`, and one through the runtime (`run.getReadable()`)
// goes on across a connection dropped while the server is away; a run cancelled twice, or by cancels racing,
// through the runtime's own calls (`cancelRun`, `getRun(id).cancel()`): each succeeds and the log keeps one end;
// ids `.` or `..` (a URL path drops them) refused, made or read, with the World's 400 naming the field;
// `events.listByCorrelationId` passing on its pagination and resolveData, and taking the `runId` awsworld needs in
// TypeScript too (`tsc --noEmit` on an app); and `npm pack` of a fresh checkout builds the package's dist/ (a tarball
// of README and package.json alone imported as nothing).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createServer, connect as connectTcp } from 'node:net';
import { after, before, describe, test } from 'node:test';

import { cancelRun, getRun, setWorld } from '@workflow/core/runtime';

import { hydrateRunError } from '@workflow/core/serialization'; // (installed with @workflow/world-testing, its pin)
import { HookNotFoundError, WorkflowWorldError } from '@workflow/errors';

import { createWorld } from '../dist/index.js';
import { PYTHON, startServe } from './serving.mjs';

const PACKAGE = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const bytes = (text) => new TextEncoder().encode(text);

async function startedRun(world) {
  const created = await world.events.create(null, {
    eventType: 'run_created',
    specVersion: 5,
    eventData: { deploymentId: 'd', workflowName: 'ts//walk', input: bytes('devl[]') },
  });
  const runId = created.run.runId;
  await world.events.create(runId, { eventType: 'run_started', specVersion: 5 });
  return runId;
}

describe('createWorld against awsworld serve --world memory: errors a TypeScript app sees', () => {
  let server;
  let world;

  before(async () => {
    server = await startServe(() => ['--world', 'memory']);
    world = createWorld({ url: server.url });
  });

  after(async () => {
    await server?.stop();
  });

  test("a run cancelled twice, or by cancels racing, is cancelled once: the SDK's cancels all succeed", async () => {
    // awsworld answers a repeated run_cancelled with the run and no event, writing nothing
    // (src/awsworld/world/rules/runs.py): the runtime's cancelRun and Run.cancel discard the answer, so neither
    // throws (a 409 there, as the SDK's Vercel World gives, made cancelRun throw), and the log keeps one end.
    const cancels = async (runId) => (await world.events.list({ runId, resolveData: 'all' })).data
      .filter((event) => event.eventType === 'run_cancelled')
      .map((event) => event.eventData?.cancelReason);
    setWorld(world);
    try {
      const runId = await startedRun(world);
      await cancelRun(world, runId, { cancelReason: 'first' });
      await cancelRun(world, runId, { cancelReason: 'second' });
      await getRun(runId).cancel({ cancelReason: 'third' });
      const again = await world.events.create(runId, { eventType: 'run_cancelled', specVersion: 5 });
      assert.equal(again.run.status, 'cancelled');
      assert.equal(again.event, undefined);
      const events = (await world.events.list({ runId, resolveData: 'none' })).data;
      assert.equal(events.at(-1).eventType, 'run_cancelled');
      assert.deepEqual(await cancels(runId), ['first']);
      const raced = await startedRun(world);
      await Promise.all([cancelRun(world, raced), getRun(raced).cancel(), cancelRun(world, raced)]);
      assert.equal(await getRun(raced).status, 'cancelled');
      assert.equal((await cancels(raced)).length, 1);
    } finally {
      setWorld(undefined);
    }
  });

  test('a hook token refused says why, as the server did', async () => {
    const runId = await startedRun(world);
    const token = `walk:${runId}`;
    await world.events.create(runId, {
      eventType: 'hook_created',
      specVersion: 5,
      correlationId: 'hook_1',
      eventData: { token },
    });
    assert.equal((await world.hooks.getByToken(token)).runId, runId);
    await world.events.create(runId, { eventType: 'run_completed', specVersion: 5, eventData: { output: bytes('devl[1]') } });

    const closed = await world.hooks.getByToken(token).then(() => assert.fail('a closed hook was found'), (e) => e);
    assert.ok(HookNotFoundError.is(closed), String(closed));
    assert.equal(closed.token, token);
    assert.match(closed.message, new RegExp(`closed when its run ${runId} ended \\(completed\\)`));
    assert.equal(closed.code, 'hook-closed');

    const unknown = await world.hooks.getByToken('walk:nobody').then(() => assert.fail('found'), (e) => e);
    assert.ok(HookNotFoundError.is(unknown), String(unknown));
    assert.match(unknown.message, /no hook owns that token/);
  });

  test('a hook token "." or ".." is found (a URL path drops such a segment: the token goes in the query)', async () => {
    // `/v1/hooks/by-token/..` reached `/v1/hooks` (its 400 about runId), `/v1/hooks/by-token/.` no hook.
    const runId = await startedRun(world);
    for (const [n, token] of ['.', '..'].entries()) {
      await world.events.create(runId, {
        eventType: 'hook_created', specVersion: 5, correlationId: `hook_dot_${n}`, eventData: { token },
      });
      const hook = await world.hooks.getByToken(token);
      assert.equal(hook.token, token);
      assert.equal(hook.runId, runId);
    }
  });

  test("a stream name with '/' or a '.' or '..' name is the World's 400 naming streamName", async () => {
    // A '/' (sent as %2F) split the server's path: a 404 "no endpoint". A '.' or '..' segment was dropped: a 405,
    // or, for getChunks of '.', a live read of a stream named "chunks" that never ended.
    const runId = await startedRun(world);
    const refusal = (promise) => promise.then(() => assert.fail('accepted'), (e) => e);
    for (const name of ['a/b', '../x', '.', '..']) {
      for (const call of [
        () => world.streams.write(runId, name, 'x'),
        () => world.streams.getChunks(runId, name),
        () => world.streams.getInfo(runId, name),
        () => world.streams.get(runId, name),
        () => world.streams.close(runId, name),
      ]) {
        const refused = await refusal(call());
        assert.ok(WorkflowWorldError.is(refused), String(refused));
        assert.equal(refused.status, 400, `${name}: ${refused.message}`);
        assert.match(refused.message, /^streamName /, name);
      }
    }
    await world.streams.write(runId, 'a..b', 'x'); // (dots inside a name are no segment of their own)
    assert.equal((await world.streams.getChunks(runId, 'a..b')).data.length, 1);
  });

  test("a run, step, hook or wait id '.' or '..' is the World's 400 naming the field, made or read", async () => {
    // fetch drops a '.' or '..' segment (%2e too): such a run or step could be made (its id travels in the body),
    // then not reached. `steps.get(run, '.')` answered the run's list of steps as if it were the step, and
    // `runs.get('.')` the list of runs; `runs.get('..')` and `hooks.get('.')` other endpoints' refusals.
    const runId = await startedRun(world);
    const refusal = (promise) => promise.then((r) => assert.fail(`accepted: ${JSON.stringify(r)}`), (e) => e);
    const refused = (error, field, what) => {
      assert.ok(WorkflowWorldError.is(error), `${what}: ${error?.constructor?.name}: ${error?.message}`);
      assert.equal(error.status, 400, `${what}: ${error.message}`);
      assert.equal(error.details?.field, field, `${what}: ${error.message}`);
      assert.equal(error.type, 'InvalidInputError', what);
    };
    for (const id of ['.', '..']) {
      const made = [
        ['runId', () => world.events.create(id, {
          eventType: 'run_created', specVersion: 5,
          eventData: { deploymentId: 'd', workflowName: 'ts//walk', input: bytes('devl[]') },
        })],
        ['runId', () => world.events.create(id, {
          eventType: 'run_started', specVersion: 5,
          eventData: { deploymentId: 'd', workflowName: 'ts//walk', input: bytes('devl[]') },
        })],
        ['correlationId', () => world.events.create(runId, {
          eventType: 'step_created', specVersion: 5, correlationId: id, eventData: { stepName: 's', input: bytes('devl[]') },
        })],
        ['correlationId', () => world.events.create(runId, {
          eventType: 'step_started', specVersion: 5, correlationId: id, eventData: { stepName: 's', input: bytes('devl[]') },
        })],
        ['correlationId', () => world.events.create(runId, {
          eventType: 'hook_created', specVersion: 5, correlationId: id, eventData: { token: `dots-${id.length}` },
        })],
        ['correlationId', () => world.events.create(runId, {
          eventType: 'wait_created', specVersion: 5, correlationId: id, eventData: { resumeAt: new Date(Date.now() + 60_000) },
        })],
      ];
      for (const [field, call] of made) refused(await refusal(call()), field, `${call} with ${JSON.stringify(id)}`);
      const read = [
        ['runId', () => world.runs.get(id)],
        ['stepId', () => world.steps.get(runId, id)],
        ['runId', () => world.steps.list({ runId: id })],
        ['runId', () => world.events.list({ runId: id })],
        ['correlationId', () => world.events.listByCorrelationId({ runId, correlationId: id })],
        ['hookId', () => world.hooks.get(id)],
        ['runId', () => world.streams.list(id)],
      ];
      for (const [field, call] of read) refused(await refusal(call()), field, `${call} of ${JSON.stringify(id)}`);
    }
    const steps = await world.steps.list({ runId });
    assert.deepEqual(steps.data, [], 'a refused step was made');
    const events = await world.events.list({ runId });
    assert.deepEqual(events.data.map((e) => e.eventType), ['run_created', 'run_started']);
  });
});

describe('a run of the TypeScript runtime failed by awsworld (`awsworld fail`, `Client.fail`)', () => {
  // Its error was stored as awsworld's structured JSON, which the runtime's `run.returnValue` cannot hydrate
  // (error payloads are bytes): it now stores the bytes the runtime writes for an Error.
  const FAIL = [
    'import asyncio, sys',
    'from awsworld.client.http_client import HttpClient',
    'async def main():',
    '    async with HttpClient(sys.argv[1]) as client:',
    '        await client.fail(sys.argv[2], reason="stuck")',
    'asyncio.run(main())',
  ].join('\n');

  test("stores an error the runtime's hydrateRunError reads as an Error", async () => {
    const server = await startServe(() => ['--world', 'memory']);
    try {
      const world = createWorld({ url: server.url });
      const created = await world.events.create(null, {
        eventType: 'run_created',
        specVersion: 5,
        eventData: {
          deploymentId: 'd', workflowName: 'ts//walk', input: bytes('devl[]'),
          executionContext: { traceCarrier: {}, workflowCoreVersion: '5.0.0-beta.35', features: { encryption: false } },
        },
      });
      const runId = created.run.runId;
      await world.events.create(runId, { eventType: 'run_started', specVersion: 5 });
      execFileSync(PYTHON, ['-c', FAIL, server.url, runId], { stdio: ['ignore', 'ignore', 'inherit'] });
      const run = await world.runs.get(runId);
      assert.equal(run.status, 'failed');
      assert.equal(run.errorCode, 'FAILED_ON_REQUEST');
      assert.ok(run.error instanceof Uint8Array, `error stored as ${JSON.stringify(run.error)}`);
      const error = await hydrateRunError(run.error, runId, undefined);
      assert.ok(error instanceof Error, String(error));
      assert.equal(error.name, 'FailedOnRequest');
      assert.equal(error.message, 'failed on request: stuck');
    } finally {
      await server.stop();
    }
  });
});

describe('a live stream read whose server dies mid-stream', () => {
  test('ends in a WorkflowWorldError naming the stream and the server, after the chunks that came', async () => {
    const server = await startServe(() => ['--world', 'memory']);
    try {
      const world = createWorld({ url: server.url });
      const runId = await startedRun(world);
      await world.streams.write(runId, 'progress', 'first ');
      const reader = (await world.streams.get(runId, 'progress')).getReader();
      assert.equal(new TextDecoder().decode((await reader.read()).value), 'first ');
      const exited = new Promise((ok) => server.process.once('exit', ok));
      server.process.kill('SIGKILL');
      await exited;
      const cut = await reader.read().then((r) => assert.fail(`the read went on: ${JSON.stringify(r)}`), (e) => e);
      assert.ok(WorkflowWorldError.is(cut), `${cut?.constructor?.name}: ${cut?.message}`);
      assert.equal(cut.code, 'stream-cut');
      assert.equal(cut.status, 503);
      assert.match(cut.message, new RegExp(`stream 'progress' of run ${runId} from awsworld serve at ${server.url}`));
      assert.match(cut.message, /after 6 bytes/);
    } finally {
      await server.stop();
    }
  });
});

/** A TCP relay to `target` (a `host:port` URL) on a port of its own, which `cut()` breaks off (every connection
 * dropped, no new one taken: a server restarting, a network gone) until `mend()`. */
async function relay(target) {
  const { hostname, port } = new URL(target);
  const sockets = new Set();
  const server = createServer((client) => {
    const upstream = connectTcp(Number(port), hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => sockets.delete(socket));
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  const own = server.address().port;
  return {
    url: `http://127.0.0.1:${own}`,
    cut: async () => {
      await new Promise((ok) => {
        server.close(ok);
        for (const socket of sockets) socket.destroy();
      });
    },
    mend: () => new Promise((ok) => server.listen(own, '127.0.0.1', ok)),
  };
}

/** One chunk as the Workflow SDK's runtime writes a value to a run's stream: a 4-byte big-endian length, then
 * `devl` and the value in devalue's text (a string `s` is `["s"]`). */
function frame(text) {
  const payload = bytes(`devl${JSON.stringify([text])}`);
  const out = new Uint8Array(4 + payload.length);
  new DataView(out.buffer).setUint32(0, payload.length, false);
  out.set(payload, 4);
  return out;
}

describe("a run's stream read the documented way (examples/read-run-stream.mjs) while the server stays away", () => {
  test('errors in the reader where run.getReadable() stays pending, and reads the values whole otherwise', async () => {
    // @workflow/core's flushablePipe never passes its source's error on (on the SDK's own local World too: a
    // streams.get that rejects, or a stream that errors, leaves getReadable()'s read pending), so with the server
    // away past CUT_PATIENCE_SECONDS the runtime's read stayed pending for good. The documented way reads through
    // streams.get, whose reader gets the error.
    const { readRunStream } = await import('../examples/read-run-stream.mjs');
    const server = await startServe(() => ['--world', 'memory']);
    const away = await relay(server.url);
    const timer = { id: undefined };
    try {
      const direct = createWorld({ url: server.url });
      const runId = await startedRun(direct);
      const name = `strm_${runId.slice('wrun_'.length)}_user`;
      await direct.streams.write(runId, name, frame('first'));
      await direct.streams.write(runId, name, frame('x'.repeat(100_000)));
      await direct.streams.close(runId, name);
      setWorld(direct);
      const whole = [];
      for await (const value of await readRunStream(runId)) whole.push(value);
      assert.deepEqual(whole, ['first', 'x'.repeat(100_000)]);

      setWorld(createWorld({ url: away.url }));
      await away.cut(); // (away for good: never mended)
      const documented = readRunStream(runId).then((stream) => stream.getReader().read());
      const runtime = getRun(runId).getReadable().getReader().read();
      const late = new Promise((ok) => {
        timer.id = setTimeout(() => ok('still pending'), 5_000);
      });
      const error = await Promise.race([documented.then(() => 'read a value', (e) => e), late]);
      assert.ok(error instanceof WorkflowWorldError, String(error));
      assert.equal(error.code, 'unreachable');
      assert.equal(await Promise.race([runtime.then(() => 'settled', () => 'settled'), late]), 'still pending');
    } finally {
      clearTimeout(timer.id);
      setWorld(undefined);
      await away.cut();
      await server.stop();
    }
  });
});

describe("a run's stream read through the Workflow SDK's runtime (`run.getReadable()`) while the server is away", () => {
  test('goes on where it was cut once the server answers again, instead of staying pending for good', async () => {
    // The runtime's reconnecting reader asked again at once, 50 times, each refused; its error never reached the
    // app's reader (@workflow/core's flushablePipe), whose read stayed pending: a Node process exited with it.
    const server = await startServe(() => ['--world', 'memory']);
    const away = await relay(server.url);
    const timer = { id: undefined };
    try {
      const direct = createWorld({ url: server.url });
      setWorld(createWorld({ url: away.url }));
      const runId = await startedRun(direct);
      const name = `strm_${runId.slice('wrun_'.length)}_user`;
      await direct.streams.write(runId, name, frame('first'));
      const reader = getRun(runId).getReadable().getReader();
      assert.deepEqual(await reader.read(), { value: 'first', done: false });

      await away.cut();
      const pending = reader.read();
      await new Promise((ok) => setTimeout(ok, 1500)); // (the server away for 1.5 s)
      await direct.streams.write(runId, name, frame('second'));
      await direct.streams.close(runId, name);
      await away.mend();
      const stuck = new Promise((_, fail) => {
        timer.id = setTimeout(() => fail(new Error('the read was still pending 20 s after the server came back')), 20_000);
      });
      assert.deepEqual(await Promise.race([pending, stuck]), { value: 'second', done: false });
      assert.deepEqual(await Promise.race([reader.read(), stuck]), { value: undefined, done: true });
    } finally {
      clearTimeout(timer.id);
      setWorld(undefined);
      await away.cut();
      await server.stop();
    }
  });
});

describe('events.listByCorrelationId, which awsworld answers within one run', () => {
  test('forwards pagination and resolveData to the server', async () => {
    const server = await startServe(() => ['--world', 'memory']);
    try {
      const world = createWorld({ url: server.url });
      const runId = await startedRun(world);
      const step = { specVersion: 5, correlationId: 'step_1' };
      await world.events.create(runId, { ...step, eventType: 'step_created', eventData: { stepName: 's', input: bytes('devl[1]') } });
      await world.events.create(runId, { ...step, eventType: 'step_started' });
      await world.events.create(runId, { ...step, eventType: 'step_completed', eventData: { result: bytes('devl[2]') } });

      const all = await world.events.listByCorrelationId({ correlationId: 'step_1', runId });
      assert.deepEqual(all.data.map((e) => e.eventType), ['step_created', 'step_started', 'step_completed']);
      assert.ok(all.data[0].eventData.input instanceof Uint8Array);

      const first = await world.events.listByCorrelationId({ correlationId: 'step_1', runId, pagination: { limit: 1 } });
      assert.deepEqual(first.data.map((e) => e.eventType), ['step_created']);
      assert.equal(first.hasMore, true);
      const rest = await world.events.listByCorrelationId({
        correlationId: 'step_1',
        runId,
        pagination: { limit: 5, cursor: first.cursor },
      });
      assert.deepEqual(rest.data.map((e) => e.eventType), ['step_started', 'step_completed']);

      const bare = await world.events.listByCorrelationId({ correlationId: 'step_1', runId, resolveData: 'none' });
      assert.equal(bare.data[0].eventData?.input, undefined);
    } finally {
      await server.stop();
    }
  });

  test("takes runId in TypeScript: createWorld's type says so (tsc --noEmit on an app that passes it)", () => {
    const app = mkdtempSync(join(tmpdir(), 'world-awsworld-types-'));
    try {
      symlinkSync(join(PACKAGE, 'node_modules'), join(app, 'node_modules'), 'dir');
      writeFileSync(
        join(app, 'app.ts'),
        [
          "import { createWorld } from 'world-awsworld';",
          "const world = createWorld({ url: 'http://127.0.0.1:8787' });",
          "export const page = world.events.listByCorrelationId({ correlationId: 'step_1', runId: 'wrun_1' });",
          'export const run = world.runs.get(\'wrun_1\');',
          '',
        ].join('\n'),
      );
      writeFileSync(
        join(app, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: {
            strict: true,
            noEmit: true,
            skipLibCheck: true,
            target: 'ES2022',
            module: 'ESNext',
            moduleResolution: 'Bundler',
            lib: ['ES2023', 'DOM'],
            types: ['node'],
            paths: { 'world-awsworld': [join(PACKAGE, 'dist/index.d.ts')] },
          },
          files: ['app.ts'],
        }),
      );
      try {
        execFileSync(process.execPath, [join(PACKAGE, 'node_modules/typescript/bin/tsc'), '-p', app], {
          encoding: 'utf8',
          stdio: ['ignore', 'pipe', 'pipe'],
        });
      } catch (error) {
        assert.fail(`tsc refused the app: ${error.stdout}${error.stderr}`);
      }
    } finally {
      rmSync(app, { recursive: true, force: true });
    }
  });
});

test('npm pack of a checkout without dist/ builds it into the tarball', () => {
  const copy = mkdtempSync(join(tmpdir(), 'world-awsworld-pack-'));
  try {
    for (const name of ['package.json', 'tsconfig.json', 'README.md', 'src']) {
      cpSync(join(PACKAGE, name), join(copy, name), { recursive: true });
    }
    symlinkSync(join(PACKAGE, 'node_modules'), join(copy, 'node_modules'), 'dir');
    const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts=false'], {
      cwd: copy,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const files = JSON.parse(out)[0].files.map((file) => file.path);
    for (const needed of ['dist/index.js', 'dist/index.d.ts', 'dist/http.js', 'dist/client.js']) {
      assert.ok(files.includes(needed), `${needed} not packed: ${files.join(', ')}`);
    }
  } finally {
    rmSync(copy, { recursive: true, force: true });
  }
});
