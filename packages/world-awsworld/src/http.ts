/**
 * The HTTP side of world-awsworld, one copy for `createWorld` (index.ts) and `createClient` (client.ts): the
 * server's URL and how each request authenticates (settled and checked once, when a World or Client is created),
 * the wire's conventions (bytes as `{"__type": "Uint8Array", "data": base64}`, dates as ISO strings revived by
 * key), and the rebuild of each `{"error": {...}}` answer as the `@workflow/errors` class it names.
 *
 * Environment: `WORLD_SERVER_URL` (required, e.g. `http://127.0.0.1:8787`), `WORLD_SERVER_AUTH` (how requests
 * authenticate: `sigv4`, `token` or `none`; see `AuthMode`), `WORLD_SERVER_TOKEN` (the server's bearer token),
 * `WORLD_SERVER_REGION` (SigV4's region when the URL does not name one; else `AWS_REGION`, `AWS_DEFAULT_REGION`).
 */
import {
  EntityConflictError,
  HookNotFoundError,
  PreconditionFailedError,
  RunExpiredError,
  RunNotSupportedError,
  ThrottleError,
  TooEarlyError,
  WorkflowRunNotFoundError,
  WorkflowWorldError,
} from '@workflow/errors';
import { Agent, fetch as undiciFetch } from 'undici';
import type { AwsCredentialsSource, Signer } from './sigv4.js';

/**
 * How each request to the server authenticates:
 * - `sigv4`: signed with AWS Signature Version 4 (service `lambda`) for the stack's Function URL (`AuthType:
 *   AWS_IAM`), with the credentials of the AWS SDK's standard provider chain (`sigv4.ts`);
 * - `token`: `Authorization: Bearer <token>` (`awsworld serve --token-file`);
 * - `none`: nothing (a server on loopback without a token).
 * Default: `WORLD_SERVER_AUTH`; else `token` when a token is given, `sigv4` for a Lambda Function URL
 * (`https://<id>.lambda-url.<region>.on.aws`), `none` otherwise.
 */
export type AuthMode = 'sigv4' | 'token' | 'none';

const AUTH_MODES: readonly AuthMode[] = ['sigv4', 'token', 'none'];
const FUNCTION_URL_HOST = /\.lambda-url\.([a-z0-9-]+)\.on\.aws$/;

/** Where the server is and how to authenticate to it: what `createWorld` and `createClient` both take. */
export interface AwsworldServerOptions {
  /** The server's base URL (default: `WORLD_SERVER_URL`). */
  url?: string;
  /** How requests authenticate (default: `WORLD_SERVER_AUTH`, else inferred: see `AuthMode`). */
  auth?: AuthMode;
  /** The server's bearer token, for `token` (default: `WORLD_SERVER_TOKEN`). */
  token?: string;
  /** SigV4's region (default: the Function URL's, else `WORLD_SERVER_REGION`, `AWS_REGION`, `AWS_DEFAULT_REGION`). */
  region?: string;
  /** SigV4's credentials (default: the AWS SDK's standard provider chain). */
  credentials?: AwsCredentialsSource;
}

/** How a World authenticates, settled (and checked) once, when it is created. */
type Authentication =
  | { mode: 'none' }
  | { mode: 'token'; token: string }
  | { mode: 'sigv4'; region: string; credentials?: AwsCredentialsSource };

function authentication(base: string, options: AwsworldServerOptions): Authentication {
  const token = options.token ?? process.env.WORLD_SERVER_TOKEN;
  const host = new URL(base).hostname;
  const named = options.auth ?? (process.env.WORLD_SERVER_AUTH || undefined);
  if (named !== undefined && !AUTH_MODES.includes(named as AuthMode)) {
    throw new Error(`world-awsworld: WORLD_SERVER_AUTH must be one of ${AUTH_MODES.join(', ')}, not ${JSON.stringify(named)}`);
  }
  const mode: AuthMode = (named as AuthMode | undefined) ?? (token ? 'token' : FUNCTION_URL_HOST.test(host) ? 'sigv4' : 'none');
  if (mode === 'token') {
    if (!token) throw new Error('world-awsworld: token authentication needs WORLD_SERVER_TOKEN (the server\'s bearer token)');
    return { mode, token };
  }
  if (mode === 'sigv4') {
    const region =
      options.region ??
      FUNCTION_URL_HOST.exec(host)?.[1] ??
      (process.env.WORLD_SERVER_REGION || process.env.AWS_REGION || process.env.AWS_DEFAULT_REGION);
    if (!region) {
      throw new Error(
        'world-awsworld: SigV4 needs a region: a Function URL names it (<id>.lambda-url.<region>.on.aws); ' +
          'else set WORLD_SERVER_REGION or AWS_REGION',
      );
    }
    return { mode, region, credentials: options.credentials };
  }
  return { mode };
}

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** The keys whose string values are dates (what the World schemas coerce). */
const DATE_KEYS = new Set([
  'createdAt',
  'updatedAt',
  'startedAt',
  'completedAt',
  'expiredAt',
  'retryAfter',
  'resumeAt',
  'occurredAt',
  'requestedAt',
]);

const BYTES_TAG = 'Uint8Array';

/** A value as the wire carries it: bytes tagged, dates as ISO strings, `undefined` left out. */
export function encode(value: unknown): Json | undefined {
  if (value === undefined) return undefined;
  if (value === null || typeof value === 'boolean' || typeof value === 'string') return value;
  if (typeof value === 'number') return value;
  if (value instanceof Uint8Array) {
    return { __type: BYTES_TAG, data: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64') };
  }
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return value.map((item) => encode(item) ?? null);
  if (typeof value === 'object') {
    const out: { [key: string]: Json } = {};
    for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
      const encoded = encode(item);
      if (encoded !== undefined) out[key] = encoded;
    }
    return out;
  }
  return String(value);
}

/** A wire value back: tagged bytes as Uint8Array, date keys as Date. */
export function decode(value: unknown, key?: string): unknown {
  if (Array.isArray(value)) return value.map((item) => decode(item));
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    if (record.__type === BYTES_TAG && typeof record.data === 'string') {
      return new Uint8Array(Buffer.from(record.data, 'base64'));
    }
    const out: Record<string, unknown> = {};
    for (const [name, item] of Object.entries(record)) out[name] = decode(item, name);
    return out;
  }
  if (typeof value === 'string' && key !== undefined && DATE_KEYS.has(key)) {
    const date = new Date(value);
    return Number.isNaN(date.getTime()) ? value : date;
  }
  return value;
}

interface WireError {
  name?: string;
  message?: string;
  status?: number;
  code?: string;
  type?: string;
  details?: Record<string, unknown>;
  retryAfter?: number;
  runId?: string;
  token?: string;
  runSpecVersion?: number;
  worldSpecVersion?: number;
}

/** What every error rebuilt from the server's `{"error": {...}}` carries besides its class: the HTTP `status`,
 * awsworld's stable `code` and own class (`type`), and `details`, the error's own fields (`details.field` names
 * the field a 400 refused). */
export interface ServerErrorFields {
  status?: number;
  code?: string;
  type?: string;
  details?: Record<string, unknown>;
}

/** The `@workflow/errors` class the server named (the runtime reacts to errors by class), with the body's
 * `status`, `code`, `type` and `details` (`ServerErrorFields`). */
export function rebuildError(
  status: number,
  body: unknown,
  context: { runId?: string; token?: string } = {},
): Error & ServerErrorFields {
  const info: WireError =
    body && typeof body === 'object' && 'error' in body && typeof (body as { error: unknown }).error === 'object'
      ? ((body as { error: WireError }).error ?? {})
      : { message: foreignMessage(status, body) };
  const error: Error & ServerErrorFields = named(status, info, context);
  error.status ??= info.status ?? status;
  error.code ??= info.code;
  if (info.type !== undefined) error.type = info.type;
  if (info.details && typeof info.details === 'object') error.details = info.details;
  return error;
}

/** The message of an answer that is not awsworld's `{"error": ...}` (a proxy's page, or AWS's own refusal before
 * the server runs: a Function URL answers `{"Message": "Forbidden"}`): its text, so nothing it said is lost. */
function foreignMessage(status: number, body: unknown): string {
  if (typeof body === 'string' && body.trim()) return `HTTP ${status}: ${body.trim().slice(0, 500)}`;
  if (body && typeof body === 'object') {
    const record = body as Record<string, unknown>;
    const said = record.Message ?? record.message;
    return `HTTP ${status}: ${typeof said === 'string' ? said : JSON.stringify(body).slice(0, 500)}`;
  }
  return `HTTP ${status}`;
}

/** The server's message on an error whose `@workflow/errors` constructor writes its own (`Hook not found`): the
 * server's says which token, and why (no hook holds it, or its run ended and closed it). */
function said<T extends Error>(error: T, message: string | undefined): T {
  if (message) error.message = message;
  return error;
}

function named(status: number, info: WireError, context: { runId?: string; token?: string }): Error {
  const message = info.message ?? `HTTP ${status}`;
  const retryAfter = typeof info.retryAfter === 'number' ? info.retryAfter : undefined;
  switch (info.name) {
    case 'WorkflowRunNotFoundError':
      return said(new WorkflowRunNotFoundError(info.runId ?? context.runId ?? ''), info.message);
    case 'HookNotFoundError':
      return said(new HookNotFoundError(info.token ?? context.token ?? ''), info.message);
    case 'EntityConflictError':
      return new EntityConflictError(message);
    case 'RunExpiredError':
      return new RunExpiredError(message);
    case 'TooEarlyError':
      return new TooEarlyError(message, { retryAfter });
    case 'ThrottleError':
      return new ThrottleError(message, { retryAfter });
    case 'PreconditionFailedError':
      return new PreconditionFailedError(message, { retryAfter });
    case 'RunNotSupportedError':
      return said(new RunNotSupportedError(info.runSpecVersion ?? 0, info.worldSpecVersion ?? 0), info.message);
    default:
      return new WorkflowWorldError(message, { status: info.status ?? status, code: info.code, retryAfter });
  }
}

/** Long reads (a live stream, a wait) must not be cut by undici's 300 s idle timeouts. */
export const patient = new Agent({ bodyTimeout: 0, headersTimeout: 0 });

/** RFC 3986 encoding (what SigV4 signs: `encodeURIComponent` leaves `!'()*` as they are). */
function escape(text: string): string {
  return encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

export function path(...segments: string[]): string {
  return segments.map(escape).join('/');
}

/** Path segments a URL cannot carry: `fetch`'s URL parser drops a `.` or `..` segment, `%2e` as well. */
export const DOT_SEGMENTS = new Set(['.', '..']);

/** An id as one segment of a request's path, refused with the World's 400 naming `field` when it is `.` or `..`:
 * sent, its segment was dropped and the request reached another endpoint (`steps.get(run, '.')` answered the
 * run's list of steps, `streams.getChunks(run, '.')` became a live read of a stream named `chunks` that never
 * ended). awsworld's Worlds make no run, step, hook, wait or stream of such an id (`world/ids.py`,
 * `check_path_id`), so nothing exists there to reach. An id with a `/` travels encoded (`%2F`), and the server
 * answers the World's 400. */
export function idSegment(field: string, id: string): string {
  if (DOT_SEGMENTS.has(id)) {
    // (the server's 400 for a bad field, as rebuildError makes it: `type` and `details.field` included)
    const error: WorkflowWorldError & ServerErrorFields = new WorkflowWorldError(
      `${field} cannot be '${id}': a URL path drops a '.' or '..' segment, so the World over HTTP could not reach ` +
        'it (awsworld makes no entity of such an id)',
      { status: 400, code: 'invalid-input' },
    );
    error.type = 'InvalidInputError';
    error.details = { field };
    throw error;
  }
  return path(id);
}

export function query(params: Record<string, string | number | undefined | null>): string {
  const parts: string[] = [];
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null) parts.push(`${escape(key)}=${escape(String(value))}`);
  }
  return parts.length ? `?${parts.join('&')}` : '';
}

/** Who a request is about: a 404 rebuilds as the SDK's error for this run or hook token; `stream` names the
 * stream a live read is of, for the error of a read cut off. */
export interface RequestContext {
  runId?: string;
  token?: string;
  stream?: string;
}

/** One server, as a World or a Client reaches it: its base URL and the requests, authenticated as `options` say. */
export interface Connection {
  /** The server's base URL, without a trailing slash. */
  readonly base: string;
  /** The headers of one request to `url` (the full URL): its content type, and what the authentication adds. */
  headers(method: string, url: string, body?: string): Promise<Record<string, string>>;
  /** A JSON request to `url` (the path and query under `base`): its answer decoded, or its error rebuilt. */
  send(method: 'GET' | 'POST', url: string, body?: unknown, context?: RequestContext): Promise<unknown>;
  get(url: string, context?: RequestContext): Promise<unknown>;
  post(url: string, body: unknown, context?: RequestContext): Promise<unknown>;
  /** A byte stream from `url` (a live stream read): its body, or its error rebuilt. */
  stream(url: string, context?: RequestContext): Promise<ReadableStream<Uint8Array>>;
}

/** The server's base URL, checked when a World or Client is created: an http(s) URL (a host and port alone, or a
 * typo, would otherwise fail at the first request as a bare `fetch failed`). */
function serverUrl(options: AwsworldServerOptions): string {
  const given = options.url ?? process.env.WORLD_SERVER_URL ?? '';
  const source = options.url !== undefined ? 'the url option' : 'WORLD_SERVER_URL';
  const base = given.trim().replace(/\/+$/, '');
  if (!base) {
    throw new Error('world-awsworld: set WORLD_SERVER_URL to the URL of `awsworld serve` (e.g. http://127.0.0.1:8787)');
  }
  let protocol: string | undefined;
  try {
    protocol = new URL(base).protocol;
  } catch {
    /* not a URL */
  }
  if (protocol !== 'http:' && protocol !== 'https:') {
    throw new Error(
      `world-awsworld: ${source} must be the http(s) URL of \`awsworld serve\` (e.g. http://127.0.0.1:8787, or the ` +
        `stack's WorldServerUrl output), not ${JSON.stringify(given)}`,
    );
  }
  return base;
}

/** What to do about a refusal by authentication, for this World's way of authenticating (the server's message
 * says what it refused; only this side knows which variable sets the token or turns signing on). */
function authHint(status: number, auth: Authentication): string | undefined {
  if (status === 401) {
    return auth.mode === 'token'
      ? "WORLD_SERVER_TOKEN (or the token option) is not the token the server was started with (its --token-file or " +
          'AWSWORLD_SERVE_TOKEN)'
      : auth.mode === 'none'
        ? 'this server requires a bearer token: set WORLD_SERVER_TOKEN (or the token option) to the one it was started ' +
          'with (its --token-file or AWSWORLD_SERVE_TOKEN)'
        : 'this server requires a bearer token, not SigV4: set WORLD_SERVER_AUTH=token and WORLD_SERVER_TOKEN';
  }
  if (status === 403) {
    return auth.mode === 'sigv4'
      ? 'AWS refused the signed request: the credentials (the AWS SDK\'s provider chain, or the credentials option) ' +
          "need lambda:InvokeFunctionUrl on the stack's WorldServerFunction, in its account, and the region signed " +
          `for (${auth.region}) must be the Function URL's`
      : 'a Function URL with AuthType AWS_IAM takes requests signed with SigV4: set WORLD_SERVER_AUTH=sigv4 (the ' +
          'default for a *.lambda-url.<region>.on.aws URL without WORLD_SERVER_TOKEN)';
  }
  return undefined;
}

/** A request that never got an answer: the reason undici keeps in `cause` (`ECONNREFUSED`, a TLS error, ...),
 * which its own message (`fetch failed`) leaves out. */
function unreachable(base: string, error: unknown): WorkflowWorldError {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } } | undefined)?.cause;
  const said = typeof cause?.message === 'string' ? cause.message.trim().split('\n')[0] : undefined;
  const code = typeof cause?.code === 'string' ? cause.code : undefined;
  const why = said && code && !said.includes(code) ? `${code}: ${said}` : (said ?? code);
  return new WorkflowWorldError(
    `awsworld server unreachable at ${base}: ${why || String(error)} (is \`awsworld serve\` running there? ` +
      'WORLD_SERVER_URL or the url option says where)',
    { status: 503, code: 'unreachable', cause: error },
  );
}

/** How long after a live read of a stream was cut a new read of that stream waits for an unreachable server
 * (a restart of `awsworld serve`, a dropped network) instead of failing at once: the Workflow SDK's runtime reads
 * a run's stream (`run.getReadable()`) through a reconnecting reader that asks again at once, 50 times in a row,
 * and whose final error never reaches the app's reader (@workflow/core's `flushablePipe` does not pass a source's
 * error on), so without the wait a restart left that read pending for good: a Node process exited with it
 * unsettled. Retried every 250 ms to 2 s; past this, the read fails `unreachable` as any request does. */
export const CUT_PATIENCE_SECONDS = 30;

/** A live read's body whose connection breaking off before the stream ended (the server stopped, restarted or
 * crashed; the network dropped) is a `WorkflowWorldError` naming the stream, the server and how much had arrived,
 * instead of undici's bare `TypeError: terminated`. Still an error, never an end: a reader (the runtime's
 * reconnecting one included) must not take a cut read for a closed stream. */
function guarded(
  body: ReadableStream<Uint8Array>,
  base: string,
  context: RequestContext,
  onCut: () => void,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let received = 0;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      let result: ReadableStreamReadResult<Uint8Array>;
      try {
        result = await reader.read();
      } catch (error) {
        const cause = (error as { cause?: { code?: unknown; message?: unknown } } | undefined)?.cause;
        const why = [error instanceof Error ? error.message : String(error), cause?.code ?? cause?.message]
          .filter((part) => typeof part === 'string' && part)
          .join(': ');
        const what = `${context.stream !== undefined ? `stream '${context.stream}'` : 'the stream'}` +
          `${context.runId !== undefined ? ` of run ${context.runId}` : ''}`;
        onCut();
        controller.error(
          new WorkflowWorldError(
            `the live read of ${what} from awsworld serve at ${base} was cut off after ${received} bytes, before ` +
              `the stream ended (${why}): the server stopped or the connection dropped; read it again (streams.get ` +
              `with the startIndex after the chunks you have): for ${CUT_PATIENCE_SECONDS} s that read waits for ` +
              'the server to answer again',
            { status: 503, code: 'stream-cut', cause: error },
          ),
        );
        return;
      }
      if (result.done) {
        controller.close();
      } else {
        received += result.value.byteLength;
        controller.enqueue(result.value);
      }
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
}

export function connect(options: AwsworldServerOptions): Connection {
  const base = serverUrl(options);
  const auth = authentication(base, options);
  let signer: Promise<Signer> | undefined;

  async function headers(method: string, url: string, body?: string): Promise<Record<string, string>> {
    const own: Record<string, string> = body === undefined ? {} : { 'content-type': 'application/json' };
    if (auth.mode === 'token') return { ...own, authorization: `Bearer ${auth.token}` };
    if (auth.mode === 'none') return own;
    signer ??= import('./sigv4.js').then((sigv4) =>
      sigv4.createSigner({ region: auth.region, credentials: auth.credentials }),
    );
    const signed = await (await signer)({ method, url, headers: own, body });
    delete signed.host; // (undici sends the URL's own host, which is what was signed)
    return signed;
  }

  async function send(method: 'GET' | 'POST', url: string, body?: unknown, context: RequestContext = {}): Promise<unknown> {
    let response;
    const text = body === undefined ? undefined : JSON.stringify(encode(body));
    const sent = await headers(method, `${base}${url}`, text); // (no credentials to sign with: that error, as it is)
    try {
      response = await undiciFetch(`${base}${url}`, {
        method,
        headers: sent,
        body: text,
        dispatcher: patient,
      });
    } catch (error) {
      throw unreachable(base, error);
    }
    const answer = await response.text();
    let parsed: unknown = undefined;
    try {
      parsed = answer ? JSON.parse(answer) : undefined;
    } catch {
      parsed = answer;
    }
    if (!response.ok) throw refused(response.status, parsed, context);
    return decode(parsed);
  }

  function refused(status: number, body: unknown, context: RequestContext = {}): Error & ServerErrorFields {
    const error = rebuildError(status, body, context);
    const hint = authHint(status, auth);
    if (hint) error.message = `${error.message}; ${hint}`;
    return error;
  }

  /** The streams whose live read was cut (`run id NUL name`), with when a new read of one stops waiting for the
   * server (`CUT_PATIENCE_SECONDS`). */
  const cuts = new Map<string, number>();

  async function stream(url: string, context: RequestContext = {}): Promise<ReadableStream<Uint8Array>> {
    const full = `${base}${url}`;
    const key = `${context.runId ?? ''}\u0000${context.stream ?? url}`;
    let pause = 250;
    let response;
    for (;;) {
      const sent = await headers('GET', full); // (signed anew each time: a SigV4 signature's time must be now)
      try {
        response = await undiciFetch(full, { headers: sent, dispatcher: patient });
        break;
      } catch (error) {
        const until = cuts.get(key);
        if (until === undefined || Date.now() + pause > until) {
          cuts.delete(key);
          throw unreachable(base, error);
        }
        await new Promise((resume) => setTimeout(resume, pause));
        pause = Math.min(pause * 2, 2000);
      }
    }
    cuts.delete(key);
    if (!response.ok || !response.body) {
      const text = await response.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        /* not JSON */
      }
      throw refused(response.status, parsed, context);
    }
    return guarded(response.body as unknown as ReadableStream<Uint8Array>, base, context, () =>
      cuts.set(key, Date.now() + CUT_PATIENCE_SECONDS * 1000),
    );
  }

  return {
    base,
    headers,
    send,
    stream,
    get: (url, context) => send('GET', url, undefined, context),
    post: (url, body, context) => send('POST', url, body, context),
  };
}
