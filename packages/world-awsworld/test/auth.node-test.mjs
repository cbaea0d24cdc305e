// How the package authenticates to `awsworld serve` (node's test runner: `node --test test/auth.node-test.mjs`,
// after `tsc`; `.ci/world-testing` runs it):
// - SigV4 for the stack's Function URL (AuthType AWS_IAM): the signature the package computes for a fixed request,
//   credentials and time is the one botocore's SigV4Auth computes (what awsworld's Python HttpClient sends), and
//   every request the World makes is signed, the live stream read included, as a server receives it, and so is
//   every request of the Client (`createClient`);
// - a bearer token against `awsworld serve --host 127.0.0.1 --token-file` (a real server process): a run made
//   through the package works, and the same calls without the token (or with another) get a 401 and store nothing,
//   the Client's as the World's;
// - the configuration (`WORLD_SERVER_AUTH`, the region, the server's URL) is checked when the World is created;
// - a refusal says what to do on this side: a 401 which variable holds the token, AWS's 403 before the server (a
//   Function URL's `{"Message": "Forbidden"}`) keeps AWS's words and names the IAM permission, and a server that
//   never answers names the reason (`ECONNREFUSED`), live stream reads included.
// Python comes from AWSWORLD_PYTHON (default: the repository's .venv), `awsworld` from beside it.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createServer } from 'node:http';
import { createServer as createTcpServer } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { createClient, createWorld } from '../dist/index.js';
import { createSigner } from '../dist/sigv4.js';
import { PYTHON, startServe } from './serving.mjs';

const CREDENTIALS = { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY', sessionToken: 'session/token+=' };
const REGION = 'eu-west-1';
const FUNCTION_URL = 'https://abcdefghij0123456789.lambda-url.eu-west-1.on.aws';
const SIGNED_BY_AWS = ['authorization', 'x-amz-date', 'x-amz-security-token'];

// botocore's SigV4Auth (service lambda) for each request, its clock fixed at each request's time.
const BOTOCORE = `
import datetime, json, sys
from unittest import mock
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

spec = json.load(sys.stdin)
credentials = Credentials(spec["credentials"]["accessKeyId"], spec["credentials"]["secretAccessKey"],
                          spec["credentials"].get("sessionToken"))
answers = []
for request in spec["requests"]:
    at = datetime.datetime.strptime(request["amzDate"], "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc)
    body = request["body"].encode("utf-8") if request.get("body") is not None else None
    signed = AWSRequest(method=request["method"], url=request["url"], data=body, headers=request["headers"])
    with mock.patch("botocore.auth.get_current_datetime", return_value=at):
        SigV4Auth(credentials, "lambda", spec["region"]).add_auth(signed)
    answers.append({name.lower(): value for name, value in signed.headers.items()})
json.dump(answers, sys.stdout)
`;

/** botocore's headers for each `{method, url, headers, body, amzDate}` (the headers to sign, as sent). */
function botocore(requests) {
  const result = spawnSync(PYTHON, ['-c', BOTOCORE], {
    input: JSON.stringify({ credentials: CREDENTIALS, region: REGION, requests }),
    encoding: 'utf8',
  });
  assert.equal(result.status, 0, `botocore failed: ${result.stderr}`);
  return JSON.parse(result.stdout);
}

function pick(headers, names) {
  return Object.fromEntries(names.filter((name) => headers[name] !== undefined).map((name) => [name, headers[name]]));
}

/** Each request as a server `received` it (`{method, path, headers, body}`) carries the signature botocore computes
 * for the headers it names, its body and its time, and the session token. */
function assertSignedAsBotocore(received, url) {
  const again = botocore(
    received.map((request) => {
      const names = /SignedHeaders=([^,]+)/.exec(request.headers.authorization)[1].split(';');
      return {
        method: request.method,
        url: `${url}${request.path}`,
        headers: pick(request.headers, names.filter((name) => !SIGNED_BY_AWS.includes(name))),
        body: request.body || null,
        amzDate: request.headers['x-amz-date'],
      };
    }),
  );
  for (const [index, request] of received.entries()) {
    assert.equal(request.headers.authorization, again[index].authorization, `${request.method} ${request.path}`);
    assert.equal(request.headers['x-amz-security-token'], CREDENTIALS.sessionToken);
  }
}

/** A server on 127.0.0.1 that records each request (`{method, path, headers, body}`) and answers `answer(path)`:
 * `[status, content type, body]`. */
async function recordingServer(answer) {
  const received = [];
  const server = createServer((request, response) => {
    const pieces = [];
    request.on('data', (piece) => pieces.push(piece));
    request.on('end', () => {
      received.push({ method: request.method, path: request.url, headers: request.headers, body: Buffer.concat(pieces).toString('utf8') });
      const [status, type, body] = answer(request.url);
      response.writeHead(status, { 'content-type': type });
      response.end(body);
    });
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  return { received, url: `http://127.0.0.1:${server.address().port}`, close: () => server.close() };
}

describe('SigV4 (a Function URL with AuthType AWS_IAM)', () => {
  test("the package's signature for a fixed request, credentials and time is botocore's", async () => {
    const sign = createSigner({ region: REGION, credentials: CREDENTIALS });
    const at = new Date('2025-03-04T05:06:07Z');
    const json = { 'content-type': 'application/json' };
    const requests = [
      { method: 'GET', url: `${FUNCTION_URL}/v1/runs/wrun_01K0000000000000000000000A?resolveData=none`, headers: {} },
      {
        method: 'POST',
        url: `${FUNCTION_URL}/v1/events`,
        headers: json,
        body: JSON.stringify({ runId: null, event: { eventType: 'run_created', eventData: { note: 'ü ✓ "q"' } } }),
      },
      { method: 'GET', url: `${FUNCTION_URL}/v1/hooks/by-token/approve%3Aorder%2017%2F%C3%BC%2A%28x%29`, headers: {} },
      { method: 'GET', url: `${FUNCTION_URL}/v1/runs?workflowName=shop%20order%2A&limit=5&cursor=a%2Bb%3D`, headers: {} },
      { method: 'GET', url: `${FUNCTION_URL}/v1/runs/wrun_1/streams/strm_1?startIndex=-3`, headers: {} },
      { method: 'POST', url: 'http://127.0.0.1:8787/v1/runs/wrun_1/streams/strm_1/close', headers: json, body: '{}' },
    ];
    const ours = [];
    for (const request of requests) ours.push(await sign(request, at));
    const theirs = botocore(requests.map((request) => ({ ...request, amzDate: '20250304T050607Z' })));
    for (const [index, request] of requests.entries()) {
      assert.deepEqual(pick(ours[index], SIGNED_BY_AWS), pick(theirs[index], SIGNED_BY_AWS), `${request.method} ${request.url}`);
      assert.match(ours[index].authorization, /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/20250304\/eu-west-1\/lambda\/aws4_request, /);
    }
  });

  test('every request the World sends is signed, the live stream read included, as the server receives it', async () => {
    const { received, url, close } = await recordingServer((path) => {
      if (path.includes('/streams/strm_live')) return [200, 'application/octet-stream', 'live bytes'];
      return [200, 'application/json', path.startsWith('/v1/deployment-id') ? '{"deploymentId":"d-1"}' : '{}'];
    });
    try {
      const world = createWorld({ url, auth: 'sigv4', region: REGION, credentials: CREDENTIALS });
      await world.runs.get('wrun_1', { resolveData: 'none' });
      await world.events.create('wrun_1', { eventType: 'run_started' });
      await world.hooks.getByToken('approve:order 17/ü');
      await world.runs.list({ workflowName: "shop's order (2)*", pagination: { limit: 5 } });
      assert.equal(await world.getDeploymentId(), 'd-1');
      const stream = await world.streams.get('wrun_1', 'strm_live', 0);
      assert.equal(await new Response(stream).text(), 'live bytes');
    } finally {
      close();
    }
    assert.equal(received.length, 6);
    assertSignedAsBotocore(received, url);
    assert.deepEqual(
      received.map((request) => `${request.method} ${request.path}`),
      [
        'GET /v1/runs/wrun_1?resolveData=none',
        'POST /v1/events',
        'GET /v1/hooks/by-token/approve%3Aorder%2017%2F%C3%BC',
        'GET /v1/runs?workflowName=shop%27s%20order%20%282%29%2A&limit=5',
        'GET /v1/deployment-id',
        'GET /v1/runs/wrun_1/streams/strm_live?startIndex=0',
      ],
    );
  });

  test("every request the Client sends is signed, as the server receives it", async () => {
    const run = '{"runId":"wrun_1","status":"completed","workflowName":"py.order","specVersion":2,"output":{"ok":true}}';
    const { received, url, close } = await recordingServer((path) => {
      if (path === '/v1/client/start') return [202, 'application/json', '{"runId":"wrun_1"}'];
      if (path === '/v1/client/hooks/resume') return [200, 'application/json', '{"event":{"eventType":"hook_received"},"recorded":true}'];
      return [200, 'application/json', run];
    });
    try {
      const client = createClient({ url, auth: 'sigv4', region: REGION, credentials: CREDENTIALS });
      assert.deepEqual(await client.start('py.order', ['book ü'], { rush: true }, { runId: 'wrun_1' }), { runId: 'wrun_1' });
      assert.equal((await client.resumeHook('approve:order 17/ü', { approved: true }, { idempotencyKey: 'k-1' })).recorded, true);
      assert.equal((await client.cancel('wrun_1/ü x', { reason: "customer's (2)*" })).status, 'completed');
      assert.deepEqual(await client.result('wrun_1', { timeout: 2.5 }), { ok: true });
    } finally {
      close();
    }
    assertSignedAsBotocore(received, url);
    assert.deepEqual(
      received.map((request) => `${request.method} ${request.path} ${request.body}`),
      [
        'POST /v1/client/start {"workflow":"py.order","args":["book ü"],"kwargs":{"rush":true},"runId":"wrun_1"}',
        'POST /v1/client/hooks/resume {"token":"approve:order 17/ü","payload":{"approved":true},"idempotencyKey":"k-1"}',
        'POST /v1/client/runs/wrun_1%2F%C3%BC%20x/cancel {"reason":"customer\'s (2)*"}',
        'GET /v1/runs/wrun_1/wait?timeout=2.5 ',
      ],
    );
  });

  test('the AWS SDK is loaded only when signing is on', () => {
    // A child process whose module resolution refuses the AWS SDK: a token World works without it (its requests
    // reach nothing: port 9 refuses them), a signing World asks for it at its first request.
    const hooks = `export async function resolve(specifier, context, next) {
      if (/^@(aws-sdk|smithy|aws-crypto)\\//.test(specifier)) throw new Error('AWS SDK loaded: ' + specifier);
      return next(specifier, context);
    }`;
    const script = `
      import { register } from 'node:module';
      register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(hooks)}));
      const { createWorld } = await import(${JSON.stringify(new URL('../dist/index.js', import.meta.url).href)});
      const failure = (promise) => promise.then(() => 'answered', (error) => String(error.message));
      const token = await failure(createWorld({ url: 'http://127.0.0.1:9', token: 'x'.repeat(20) }).runs.get('wrun_1'));
      const sigv4 = await failure(createWorld({ url: 'http://127.0.0.1:9', auth: 'sigv4', region: 'eu-west-1',
        credentials: ${JSON.stringify(CREDENTIALS)} }).runs.get('wrun_1'));
      console.log(JSON.stringify({ token, sigv4 }));`;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    assert.equal(child.status, 0, child.stderr);
    const { token, sigv4 } = JSON.parse(child.stdout);
    assert.match(token, /awsworld server unreachable/);
    assert.match(sigv4, /AWS SDK loaded: @/);
  });

  test("a Function URL is signed for its own region by default; the configuration is checked at creation", () => {
    const saved = { ...process.env };
    try {
      delete process.env.WORLD_SERVER_TOKEN;
      delete process.env.WORLD_SERVER_AUTH;
      delete process.env.AWS_REGION;
      delete process.env.AWS_DEFAULT_REGION;
      delete process.env.WORLD_SERVER_REGION;
      createWorld({ url: FUNCTION_URL }); // sigv4, eu-west-1 (from the host): nothing to complain about
      assert.throws(() => createWorld({ url: 'https://world.example', auth: 'sigv4' }), /SigV4 needs a region/);
      createWorld({ url: 'https://world.example', auth: 'sigv4', region: 'us-east-2' });
      process.env.WORLD_SERVER_AUTH = 'iam';
      assert.throws(() => createWorld({ url: FUNCTION_URL }), /WORLD_SERVER_AUTH must be one of sigv4, token, none, not "iam"/);
      process.env.WORLD_SERVER_AUTH = 'token';
      assert.throws(() => createWorld({ url: 'http://127.0.0.1:8787' }), /needs WORLD_SERVER_TOKEN/);
    } finally {
      process.env = saved;
    }
  });
});

describe('what a mistake in the configuration gets', () => {
  test("a server URL that is not an http(s) URL is an error when the World is created, naming where it came from", () => {
    const saved = { ...process.env };
    try {
      delete process.env.WORLD_SERVER_TOKEN;
      delete process.env.WORLD_SERVER_AUTH;
      for (const url of ['127.0.0.1:8787', 'localhost:8787', 'ftp://127.0.0.1:8787']) {
        // (they failed at the first request, as "fetch failed" or "Invalid URL")
        assert.throws(() => createWorld({ url }), /the url option must be the http\(s\) URL of `awsworld serve`/);
        process.env.WORLD_SERVER_URL = url;
        assert.throws(() => createClient(), new RegExp(`WORLD_SERVER_URL must be the http\\(s\\) URL .* not "${url}"`));
      }
      process.env.WORLD_SERVER_URL = ' http://127.0.0.1:8787/ ';
      createWorld();
    } finally {
      process.env = saved;
    }
  });

  test('a server that does not answer is named with the reason, for every call and the live stream read', async () => {
    const closed = createTcpServer();
    await new Promise((ok) => closed.listen(0, '127.0.0.1', ok));
    const url = `http://127.0.0.1:${closed.address().port}`;
    await new Promise((ok) => closed.close(ok)); // (the port is free now: connections to it are refused)
    const world = createWorld({ url, auth: 'none' });
    const unreachable = (error) =>
      error.name === 'WorkflowWorldError' && error.status === 503 && error.code === 'unreachable' &&
      error.message.includes(`unreachable at ${url}: connect ECONNREFUSED`) && /is `awsworld serve` running there/.test(error.message);
    await assert.rejects(world.runs.list({}), unreachable);
    await assert.rejects(world.streams.get('wrun_1', 'strm_1_user', 0), unreachable); // (a bare TypeError: fetch failed)
    await assert.rejects(createClient({ url, auth: 'none' }).start('py.order'), unreachable);
  });

  test("AWS's own refusal of a Function URL request keeps AWS's words and says what to check", async () => {
    // What a Function URL with AuthType AWS_IAM answers a request IAM refuses, before any code of the server runs.
    const { url, close } = await recordingServer(() => [403, 'application/json', '{"Message":"Forbidden"}']);
    try {
      const signed = createWorld({ url, auth: 'sigv4', region: REGION, credentials: CREDENTIALS });
      await assert.rejects(signed.runs.list({}), (error) =>
        error.name === 'WorkflowWorldError' && error.status === 403 && /^HTTP 403: Forbidden; AWS refused the signed request/.test(error.message) &&
        error.message.includes('lambda:InvokeFunctionUrl') && error.message.includes(`(${REGION})`));
      await assert.rejects(signed.streams.get('wrun_1', 'strm_1_user', 0), (error) => /Forbidden; AWS refused/.test(error.message));
      const unsigned = createClient({ url, token: 'x'.repeat(20) });
      await assert.rejects(unsigned.start('py.order'), (error) => error.status === 403 && /Forbidden; .*WORLD_SERVER_AUTH=sigv4/.test(error.message));
    } finally {
      close();
    }
  });
});

describe('a bearer token (awsworld serve --host 127.0.0.1 --token-file)', () => {
  const TOKEN = 'world-awsworld-test-token-0123456789';
  let server;
  let url;

  before(async () => {
    server = await startServe((folder) => ['--world', 'memory', '--host', '127.0.0.1', '--token-file',
      join(folder, 'token')], { files: { token: `${TOKEN}\n` } });
    url = server.url;
  });

  after(() => server?.stop());

  const bytes = (text) => new TextEncoder().encode(text);

  test('a run through the package works with the token, its stream read live', async () => {
    const world = createWorld({ url, token: TOKEN }); // (auth inferred: token)
    const created = await world.events.create(null, {
      eventType: 'run_created',
      specVersion: world.specVersion,
      eventData: { workflowName: 'ts.order', deploymentId: await world.getDeploymentId(), input: bytes('["book"]') },
    });
    const runId = created.run.runId;
    await world.events.create(runId, { eventType: 'run_started', specVersion: world.specVersion });
    const started = await world.events.create(runId, {
      eventType: 'step_started',
      correlationId: 'step_1',
      specVersion: world.specVersion,
      eventData: { stepName: 'ts.pack', input: bytes('["book"]') },
    });
    assert.equal(started.stepCreated, true);

    const live = world.streams.get(runId, 'strm_1_user', 0).then((stream) => new Response(stream).arrayBuffer());
    await world.streams.write(runId, 'strm_1_user', bytes('packed '));
    await world.streams.writeMulti(runId, 'strm_1_user', [bytes('book'), '\n']);
    await world.streams.close(runId, 'strm_1_user');
    assert.equal(new TextDecoder().decode(await live), 'packed book\n');

    await world.events.create(runId, {
      eventType: 'step_completed',
      correlationId: 'step_1',
      specVersion: world.specVersion,
      eventData: { result: bytes('"boxed"') },
    });
    await world.events.create(runId, { eventType: 'run_completed', specVersion: world.specVersion, eventData: { output: bytes('"done"') } });
    const run = await world.runs.get(runId);
    assert.equal(run.status, 'completed');
    assert.ok(run.completedAt instanceof Date);
    assert.deepEqual(Buffer.from(run.output).toString(), '"done"');
    const steps = await world.steps.list({ runId });
    assert.deepEqual(steps.data.map((step) => [step.stepName, step.status]), [['ts.pack', 'completed']]);
  });

  test('without the token, or with another, every call is a 401 and nothing is stored', async () => {
    const owner = createWorld({ url, token: TOKEN });
    const before = (await owner.runs.list({})).data.length;
    for (const world of [createWorld({ url, auth: 'none' }), createWorld({ url, token: 'not-the-token-of-this-server' })]) {
      await assert.rejects(world.runs.list({}), (error) => error.name === 'WorkflowWorldError' && error.status === 401);
      await assert.rejects(
        world.events.create(null, {
          eventType: 'run_created',
          specVersion: world.specVersion,
          eventData: { workflowName: 'ts.order', deploymentId: 'd', input: bytes('[]') },
        }),
        (error) => error.status === 401 && /bearer token/.test(error.message),
      );
      await assert.rejects(world.streams.get('wrun_01K0000000000000000000000A', 'strm_1_user', 0), (error) => error.status === 401);
    }
    assert.equal((await owner.runs.list({})).data.length, before);
  });

  test("a 401 says which of this side's settings holds the token", async () => {
    const saved = { ...process.env };
    try {
      delete process.env.WORLD_SERVER_TOKEN;
      delete process.env.WORLD_SERVER_AUTH;
      process.env.WORLD_SERVER_URL = url;
      const missing = (error) => error.status === 401 && error.message.startsWith('a bearer token is required') &&
        /set WORLD_SERVER_TOKEN \(or the token option\) to the one it was started with \(its --token-file/.test(error.message);
      await assert.rejects(createWorld().runs.list({}), missing); // (the server's words only: no way to know which)
      await assert.rejects(createWorld().streams.get('wrun_01K0000000000000000000000A', 'strm_1_user', 0), missing);
      await assert.rejects(createClient().start('py.order'), missing);
      process.env.WORLD_SERVER_TOKEN = 'not-the-token-of-this-server';
      await assert.rejects(createWorld().runs.list({}), (error) => error.status === 401 &&
        /^the bearer token is not the server's .*; WORLD_SERVER_TOKEN \(or the token option\) is not the token/.test(error.message));
    } finally {
      process.env = saved;
    }
  });

  test("the Client sends the token too: without it (or with another) its calls are a 401 and nothing is stored", async () => {
    const owner = createWorld({ url, token: TOKEN });
    const before = (await owner.runs.list({})).data.length;
    const client = createClient({ url, token: TOKEN }); // (auth inferred: token)
    // Through to the server: it refuses a name nothing registers (this server runs no Python module) and a run it
    // does not hold, with its own errors.
    await assert.rejects(client.start('py.order', ['book']), (error) => error.status === 400 && error.details.field === 'workflow');
    await assert.rejects(client.cancel('wrun_01K0000000000000000000000A'), (error) => error.name === 'WorkflowRunNotFoundError');
    for (const stranger of [createClient({ url, auth: 'none' }), createClient({ url, token: 'not-the-token-of-this-server' })]) {
      await assert.rejects(stranger.start('py.order', ['book']), (error) => error.status === 401 && /bearer token/.test(error.message));
      await assert.rejects(stranger.resumeHook('approve:1', {}), (error) => error.name === 'WorkflowWorldError' && error.status === 401);
      await assert.rejects(stranger.result('wrun_01K0000000000000000000000A'), (error) => error.status === 401);
    }
    assert.equal((await owner.runs.list({})).data.length, before);
  });
});
