// `awsworld serve` as a process for the package's node tests: started on a free port of 127.0.0.1 (its URL from
// --ready-file) and stopped with SIGTERM. Python comes from AWSWORLD_PYTHON (default: the repository's .venv),
// `awsworld` from beside it.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
export const PYTHON = process.env.AWSWORLD_PYTHON ?? join(ROOT, '.venv/bin/python');
const AWSWORLD = join(dirname(PYTHON), 'awsworld');

/** `awsworld serve ARGS --port 0` in `cwd`, once it accepts requests: `{url, stop(), process}` (`process`: to kill
 * it otherwise). `files` (name: text) are written first into a temporary folder (removed by `stop`), which
 * `args(folder)` may name, and `cwd(folder)` when `cwd` is a function (a workflow module among `files` is imported
 * from there). */
export async function startServe(args, { cwd, files = {} } = {}) {
  assert.ok(existsSync(AWSWORLD), `awsworld not found at ${AWSWORLD} (set AWSWORLD_PYTHON to the venv's python)`);
  const folder = mkdtempSync(join(tmpdir(), 'world-awsworld-serve-'));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(folder, name), text);
  const ready = join(folder, 'ready');
  const server = spawn(AWSWORLD, ['serve', ...args(folder), '--port', '0', '--ready-file', ready],
    { cwd: typeof cwd === 'function' ? cwd(folder) : cwd, stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  server.stderr.on('data', (piece) => (log += piece));
  const stop = async () => {
    if (server.exitCode === null && server.signalCode === null) { // (not already ended, by a signal either)
      const exited = new Promise((ok) => server.once('exit', ok));
      server.kill('SIGTERM');
      await exited;
    }
    rmSync(folder, { recursive: true, force: true });
  };
  const deadline = Date.now() + 120_000;
  while (!existsSync(ready)) {
    if (server.exitCode !== null || Date.now() > deadline) {
      await stop();
      assert.fail(`awsworld serve did not start: ${log}`);
    }
    await new Promise((ok) => setTimeout(ok, 50));
  }
  return { url: readFileSync(ready, 'utf8').trim(), stop, process: server };
}
