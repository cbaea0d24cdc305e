// The package's examples, as the docs tell a user to run them (node's test runner: `node --test
// test/examples.node-test.mjs`, after `tsc`; `.ci/world-testing` runs it): examples/python-workflows.mjs, the
// Node calls of *How-to: The World over HTTP*, run as a process against `awsworld serve MODULE` (a real server
// process, started in examples/how_to where the module is) on the in-memory World and on the embedded emulator,
// and prints what the page says it prints: a Python run started by name, read, waited for, its stream read, and
// a second one resumed through its hook.
// Python comes from AWSWORLD_PYTHON (default: the repository's .venv), `awsworld` from beside it.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '../../..');
const PYTHON = process.env.AWSWORLD_PYTHON ?? join(ROOT, '.venv/bin/python');
const AWSWORLD = join(dirname(PYTHON), 'awsworld');

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
    let folder;
    let server;
    let url;

    before(async () => {
      assert.ok(existsSync(AWSWORLD), `awsworld not found at ${AWSWORLD} (set AWSWORLD_PYTHON to the venv's python)`);
      folder = mkdtempSync(join(tmpdir(), 'world-awsworld-examples-'));
      const ready = join(folder, 'ready');
      server = spawn(AWSWORLD, ['serve', '--world', world, '--port', '0', '--ready-file', ready, 'http_orders'],
        { cwd: join(ROOT, 'examples/how_to'), stdio: ['ignore', 'ignore', 'pipe'] });
      let log = '';
      server.stderr.on('data', (piece) => (log += piece));
      const deadline = Date.now() + 120_000;
      while (!existsSync(ready)) {
        assert.ok(server.exitCode === null, `awsworld serve exited: ${log}`);
        assert.ok(Date.now() < deadline, `awsworld serve did not start within 120 s: ${log}`);
        await new Promise((ok) => setTimeout(ok, 50));
      }
      url = readFileSync(ready, 'utf8').trim();
    });

    after(async () => {
      if (server && server.exitCode === null) {
        const exited = new Promise((ok) => server.once('exit', ok));
        server.kill('SIGTERM');
        await exited;
      }
      if (folder) rmSync(folder, { recursive: true, force: true });
    });

    test('prints what the page says: the run, its result, its stream, the resumed run', async () => {
      const result = await run(process.execPath, ['examples/python-workflows.mjs', url], { cwd: resolve(HERE, '..') });
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
