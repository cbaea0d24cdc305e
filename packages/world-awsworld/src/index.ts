/**
 * world-awsworld: a Workflow SDK World that keeps its runs in awsworld.
 *
 * Every World call is one HTTP request to `awsworld serve` (the endpoints are listed in awsworld's README,
 * "Endpoints"), which runs it on any awsworld World: a deployed stack (DynamoDB, SQS, S3), the embedded emulator,
 * or memory. What stays here: the spec version this runtime speaks, the queue handler (the app's own route), the
 * wire's conventions (bytes as `{"__type": "Uint8Array", "data": base64}`, dates as ISO strings revived by key),
 * and the rebuild of each error by its name, which is how the runtime tells "already done" from "retry".
 *
 * Deliveries: `queue()` hands the message to the server with `deliverTo` (this app's base URL); awsworld's own
 * queue carries it and the server's delivery path POSTs it to `/.well-known/workflow/v1/flow` with the
 * `x-vqs-*` headers, which `createQueueHandler` below checks and answers.
 *
 * Environment: `WORLD_SERVER_URL` (required, e.g. `http://127.0.0.1:8787`), `WORLD_SERVER_AUTH` (how requests
 * authenticate: `sigv4`, `token` or `none`; see `AuthMode`), `WORLD_SERVER_TOKEN` (the server's bearer token),
 * `WORLD_SERVER_REGION` (SigV4's region when the URL does not name one; else `AWS_REGION`, `AWS_DEFAULT_REGION`),
 * `WORLD_DELIVERY_BASE_URL` (where the server reaches this app; default `http://localhost:$PORT`).
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
import { SPEC_VERSION_CURRENT } from '@workflow/world';
import type { World } from '@workflow/world';
import { Agent, fetch as undiciFetch } from 'undici';
import type { AwsCredentialsSource, Signer } from './sigv4.js';

export type { AwsCredentials, AwsCredentialsSource } from './sigv4.js';

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

export interface AwsworldWorldOptions {
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
  /** Where the server delivers this app's messages (default: `WORLD_DELIVERY_BASE_URL`, else localhost:$PORT). */
  deliveryBaseUrl?: string;
}

/** How a World authenticates, settled (and checked) once, when it is created. */
type Authentication =
  | { mode: 'none' }
  | { mode: 'token'; token: string }
  | { mode: 'sigv4'; region: string; credentials?: AwsCredentialsSource };

function authentication(base: string, options: AwsworldWorldOptions): Authentication {
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

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type AnyWorld = World & Record<string, unknown>;

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
  retryAfter?: number;
  runId?: string;
  token?: string;
  runSpecVersion?: number;
  worldSpecVersion?: number;
}

/** The `@workflow/errors` class the server named (the runtime reacts to errors by class). */
export function rebuildError(status: number, body: unknown, context: { runId?: string; token?: string } = {}): Error {
  const info: WireError =
    body && typeof body === 'object' && 'error' in body && typeof (body as { error: unknown }).error === 'object'
      ? ((body as { error: WireError }).error ?? {})
      : { message: typeof body === 'string' ? body : `HTTP ${status}` };
  const message = info.message ?? `HTTP ${status}`;
  const retryAfter = typeof info.retryAfter === 'number' ? info.retryAfter : undefined;
  switch (info.name) {
    case 'WorkflowRunNotFoundError':
      return new WorkflowRunNotFoundError(info.runId ?? context.runId ?? '');
    case 'HookNotFoundError':
      return new HookNotFoundError(info.token ?? context.token ?? '');
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
      return new RunNotSupportedError(info.runSpecVersion ?? 0, info.worldSpecVersion ?? 0);
    default:
      return new WorkflowWorldError(message, { status: info.status ?? status, code: info.code, retryAfter });
  }
}

/** Long reads (a live stream, a wait) must not be cut by undici's 300 s idle timeouts. */
const patient = new Agent({ bodyTimeout: 0, headersTimeout: 0 });

/** RFC 3986 encoding (what SigV4 signs: `encodeURIComponent` leaves `!'()*` as they are). */
function escape(text: string): string {
  return encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function path(...segments: string[]): string {
  return segments.map(escape).join('/');
}

function query(params: Record<string, string | number | undefined | null>): string {
  const parts: string[] = [];
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null) parts.push(`${escape(key)}=${escape(String(value))}`);
  }
  return parts.length ? `?${parts.join('&')}` : '';
}

export function createWorld(options: AwsworldWorldOptions = {}): World {
  const base = (options.url ?? process.env.WORLD_SERVER_URL ?? '').replace(/\/+$/, '');
  if (!base) {
    throw new Error('world-awsworld: set WORLD_SERVER_URL to the URL of `awsworld serve` (e.g. http://127.0.0.1:8787)');
  }
  const auth = authentication(base, options);
  let deploymentId: Promise<string> | undefined;
  let signer: Promise<Signer> | undefined;

  /** The headers of one request: its content type, and what `auth` adds (a token, or a SigV4 signature). */
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

  async function send(
    method: 'GET' | 'POST',
    url: string,
    body?: unknown,
    context: { runId?: string; token?: string } = {},
  ): Promise<unknown> {
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
      throw new WorkflowWorldError(`awsworld server unreachable at ${base}: ${String(error)}`, {
        status: 503,
        code: 'unreachable',
        cause: error,
      });
    }
    const answer = await response.text();
    let parsed: unknown = undefined;
    try {
      parsed = answer ? JSON.parse(answer) : undefined;
    } catch {
      parsed = answer;
    }
    if (!response.ok) throw rebuildError(response.status, parsed, context);
    return decode(parsed);
  }

  const get = (url: string, context?: { runId?: string; token?: string }) => send('GET', url, undefined, context);
  const post = (url: string, body: unknown, context?: { runId?: string; token?: string }) =>
    send('POST', url, body, context);

  const deliveryBase = (): string => {
    const configured = options.deliveryBaseUrl ?? process.env.WORLD_DELIVERY_BASE_URL;
    if (configured) return configured.replace(/\/+$/, '');
    if (!process.env.PORT) {
      throw new Error('world-awsworld: set WORLD_DELIVERY_BASE_URL (or PORT) so the server can deliver to this app');
    }
    return `http://localhost:${process.env.PORT}`;
  };

  const page = (pagination?: { limit?: number; cursor?: string; sortOrder?: string }) => ({
    limit: pagination?.limit,
    cursor: pagination?.cursor,
    sortOrder: pagination?.sortOrder,
  });

  const world = {
    specVersion: SPEC_VERSION_CURRENT,

    async getDeploymentId(): Promise<string> {
      deploymentId ??= (get('/v1/deployment-id') as Promise<{ deploymentId: string }>).then((r) => r.deploymentId);
      try {
        return await deploymentId;
      } catch (error) {
        deploymentId = undefined;
        throw error;
      }
    },

    async queue(queueName: string, message: unknown, opts?: Record<string, unknown>) {
      return (await post('/v1/queue', { queueName, message, opts: opts ?? {}, deliverTo: deliveryBase() })) as {
        messageId: string | null;
      };
    },

    createQueueHandler(
      prefix: string,
      handler: (
        message: unknown,
        meta: { attempt: number; queueName: string; messageId: string },
      ) => Promise<void | { timeoutSeconds: number }>,
    ) {
      return async (req: Request): Promise<Response> => {
        const queueName = req.headers.get('x-vqs-queue-name');
        const messageId = req.headers.get('x-vqs-message-id');
        const attempt = Number(req.headers.get('x-vqs-message-attempt'));
        if (!req.body) return Response.json({ error: 'Missing request body' }, { status: 400 });
        if (!queueName || !messageId || !Number.isInteger(attempt) || attempt < 1) {
          return Response.json({ error: 'Missing required headers' }, { status: 400 });
        }
        if (!queueName.startsWith(prefix)) return Response.json({ error: 'Unhandled queue' }, { status: 400 });
        let message: unknown;
        try {
          message = decode(JSON.parse(await req.text()));
        } catch {
          return Response.json({ error: 'Missing request body' }, { status: 400 });
        }
        try {
          const result = await handler(message, { attempt, queueName, messageId });
          if (result && typeof result.timeoutSeconds === 'number') {
            return Response.json({ timeoutSeconds: result.timeoutSeconds });
          }
          return Response.json({ ok: true });
        } catch (error) {
          return Response.json(String(error), { status: 500 });
        }
      };
    },

    runs: {
      get: (runId: string, params?: { resolveData?: string }) =>
        get(`/v1/runs/${path(runId)}${query({ resolveData: params?.resolveData })}`, { runId }),
      list: (params?: {
        workflowName?: string;
        status?: string;
        pagination?: { limit?: number; cursor?: string; sortOrder?: string };
        resolveData?: string;
      }) =>
        get(
          `/v1/runs${query({
            workflowName: params?.workflowName,
            status: params?.status,
            resolveData: params?.resolveData,
            ...page(params?.pagination),
          })}`,
        ),
      experimentalSetAttributes: async (
        runId: string,
        changes: { key: string; value: string | null }[],
        options?: { allowReservedAttributes?: boolean },
      ) => {
        const result = (await post(
          `/v1/runs/${path(runId)}/attributes`,
          { changes, options: options ?? {} },
          { runId },
        )) as { run?: { attributes?: Record<string, string> } };
        return { attributes: result.run?.attributes ?? {} };
      },
    },

    steps: {
      get: (runId: string, stepId: string, params?: { resolveData?: string }) =>
        get(`/v1/runs/${path(runId, 'steps', stepId)}${query({ resolveData: params?.resolveData })}`, { runId }),
      list: (params: { runId: string; pagination?: { limit?: number; cursor?: string }; resolveData?: string }) =>
        get(
          `/v1/runs/${path(params.runId)}/steps${query({ resolveData: params.resolveData, ...page(params.pagination) })}`,
          { runId: params.runId },
        ),
    },

    events: {
      create: (runId: string | null, event: unknown, params?: { resolveData?: string }) =>
        post('/v1/events', { runId, event, params: params ?? {} }, { runId: runId ?? undefined }),
      async get(runId: string, eventId: string, params?: { resolveData?: string }) {
        let cursor: string | undefined;
        for (;;) {
          const result = (await get(
            `/v1/runs/${path(runId)}/events${query({ resolveData: params?.resolveData, cursor })}`,
            { runId },
          )) as { data: { eventId: string }[]; cursor: string | null; hasMore: boolean };
          const found = result.data.find((event) => event.eventId === eventId);
          if (found) return found;
          if (!result.hasMore || !result.cursor) break;
          cursor = result.cursor;
        }
        throw new WorkflowWorldError(`event ${eventId} not found in run ${runId}`, { status: 404, code: 'event-not-found' });
      },
      list: (params: { runId: string; pagination?: { limit?: number; cursor?: string; sortOrder?: string }; resolveData?: string }) =>
        get(
          `/v1/runs/${path(params.runId)}/events${query({ resolveData: params.resolveData, ...page(params.pagination) })}`,
          { runId: params.runId },
        ),
      async listByCorrelationId(params: { correlationId: string; runId?: string }) {
        if (!params.runId) {
          throw new WorkflowWorldError(
            'awsworld lists events by correlation id within one run (the call needs a runId)',
            { status: 400, code: 'invalid-input' },
          );
        }
        return get(`/v1/runs/${path(params.runId, 'events', 'by-correlation-id', params.correlationId)}`);
      },
    },

    hooks: {
      get: (hookId: string, params?: { resolveData?: string }) =>
        get(`/v1/hooks/${path(hookId)}${query({ resolveData: params?.resolveData })}`),
      getByToken: (hookToken: string, params?: { resolveData?: string }) =>
        get(`/v1/hooks/by-token/${path(hookToken)}${query({ resolveData: params?.resolveData })}`, { token: hookToken }),
      list: (params: { runId?: string; pagination?: { limit?: number; cursor?: string }; resolveData?: string }) =>
        get(`/v1/hooks${query({ runId: params.runId, resolveData: params.resolveData, ...page(params.pagination) })}`),
    },

    streams: {
      async write(runId: string | Promise<string>, name: string, chunk: string | Uint8Array) {
        const id = await runId;
        await post(`/v1/runs/${path(id, 'streams', name)}/chunks`, { chunks: [chunk] }, { runId: id });
      },
      async writeMulti(runId: string | Promise<string>, name: string, chunks: (string | Uint8Array)[]) {
        const id = await runId;
        if (chunks.length) await post(`/v1/runs/${path(id, 'streams', name)}/chunks`, { chunks }, { runId: id });
      },
      async close(runId: string | Promise<string>, name: string) {
        const id = await runId;
        await post(`/v1/runs/${path(id, 'streams', name)}/close`, {}, { runId: id });
      },
      async get(runId: string, name: string, startIndex?: number | null): Promise<ReadableStream<Uint8Array>> {
        const url = `${base}/v1/runs/${path(runId, 'streams', name)}${query({ startIndex: startIndex ?? undefined })}`;
        const response = await undiciFetch(url, { headers: await headers('GET', url), dispatcher: patient });
        if (!response.ok || !response.body) {
          const text = await response.text();
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            /* not JSON */
          }
          throw rebuildError(response.status, parsed, { runId });
        }
        return response.body as unknown as ReadableStream<Uint8Array>;
      },
      list: async (runId: string) =>
        ((await get(`/v1/runs/${path(runId)}/streams`, { runId })) as { streams: string[] }).streams,
      getChunks: (runId: string, name: string, options?: { limit?: number; cursor?: string }) =>
        get(`/v1/runs/${path(runId, 'streams', name)}/chunks${query({ limit: options?.limit, cursor: options?.cursor })}`, {
          runId,
        }),
      getInfo: (runId: string, name: string) => get(`/v1/runs/${path(runId, 'streams', name)}/info`, { runId }),
    },

    async close() {
      /* nothing held: each call is one request */
    },
  };
  return world as unknown as AnyWorld;
}

export default createWorld;
