// The package's examples, as the docs tell a user to run them (node's test runner: `node --test
// test/examples.node-test.mjs`, after `tsc`; `.ci/world-testing` runs it): examples/python-workflows.mjs, the
// Node calls of *How-to: The World over HTTP*, run as a process against `awsworld serve MODULE` (a real server
// process, started in examples/how_to where the module is) on the in-memory World and on the embedded emulator,
// and prints what the page says it prints: a Python run started by name, read, waited for, its stream read, and
// a second one resumed through its hook.
// The server comes from test/serving.mjs (AWSWORLD_PYTHON's venv).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { ROOT, startServe } from './serving.mjs';

/** `command args` to its end: its exit code, stdout and stderr. */
function run(command, args, options) {
  return new Promise((ok) => {
    const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (piece) => (stdout += piece));
    child.stderr.on('data', (piece) => (stderr += piece));
    child.on('exit', (code) => ok({ code, stdout, stderr }));
  });
}

for (const world of ['memory', 'emulator']) {
  describe(`examples/python-workflows.mjs against awsworld serve --world ${world} http_orders`, () => {
    let server;

    before(async () => {
      server = await startServe(() => ['--world', world, 'http_orders'], { cwd: join(ROOT, 'examples/how_to') });
    });

    after(() => server?.stop());

    test('prints what the page says: the run, its result, its stream, the resumed run', async () => {
      const result = await run(process.execPath, ['examples/python-workflows.mjs', server.url], { cwd: join(ROOT, 'packages/world-awsworld') });
      assert.equal(result.code, 0, result.stderr);
      assert.deepEqual(result.stdout.split('\n'), [
        'http.checkout',
        'completed {"order":"order-17","parcel":"parcel-order-17"}',
        'packing order-17',
        'completed {"order":"order-17","decision":{"approved":true}}',
        '',
      ]);
    });
  });
}
