/**
 * world-awsworld: a Workflow SDK World that keeps its runs in awsworld, and a Client for awsworld's Python
 * workflows (`createClient`, client.ts).
 *
 * Every World call is one HTTP request to `awsworld serve` (the endpoints are listed in *How-to: The World over
 * HTTP*, "Endpoints"), which runs it on any awsworld World: a deployed stack (DynamoDB, SQS, S3), the embedded
 * emulator, or memory. What stays here: the spec version this runtime speaks and the queue handler (the app's own
 * route). The requests themselves (authentication, the wire's conventions, the rebuild of each error by its name,
 * which is how the runtime tells "already done" from "retry") are http.ts's, shared with `createClient`.
 *
 * Deliveries: `queue()` hands the message to the server with `deliverTo` (this app's base URL); awsworld's own
 * queue carries it and the server's delivery path POSTs it to `/.well-known/workflow/v1/flow` with the
 * `x-vqs-*` headers, which `createQueueHandler` below checks and answers.
 *
 * Environment: the server's (`WORLD_SERVER_URL`, `WORLD_SERVER_AUTH`, `WORLD_SERVER_TOKEN`, `WORLD_SERVER_REGION`:
 * see http.ts) and `WORLD_DELIVERY_BASE_URL` (where the server reaches this app; default
 * `http://localhost:$PORT`).
 */
import { WorkflowWorldError } from '@workflow/errors';
import { SPEC_VERSION_CURRENT } from '@workflow/world';
import type { Event, ListEventsByCorrelationIdParams, PaginatedResponse, World } from '@workflow/world';
import { DOT_SEGMENTS, connect, decode, idSegment, path, query } from './http.js';
import type { AwsworldServerOptions } from './http.js';

/** `RUN/streams/NAME` for a stream's endpoints (`idSegment`: a run id or name `.` or `..` is the World's 400). */
function streamPath(runId: string, name: string): string {
  return `${idSegment('runId', runId)}/streams/${idSegment('streamName', name)}`;
}

export { createClient } from './client.js';
export type { AwsworldClient, HookResumed, RunCancelledError } from './client.js';
export { decode, encode, rebuildError } from './http.js';
export type { AuthMode, AwsworldServerOptions, ServerErrorFields } from './http.js';
export type { AwsCredentials, AwsCredentialsSource } from './sigv4.js';

export interface AwsworldWorldOptions extends AwsworldServerOptions {
  /** Where the server delivers this app's messages (default: `WORLD_DELIVERY_BASE_URL`, else localhost:$PORT). */
  deliveryBaseUrl?: string;
}

/** The World `createWorld` makes: the Workflow SDK's `World`, whose `events.listByCorrelationId` also takes the
 * `runId` awsworld needs (it lists a correlation id's events within one run: without `runId` the call is a 400).
 * The SDK's params have no `runId`, so with a plain `World` a TypeScript caller could not pass it. */
export interface AwsworldWorld extends World {
  events: World['events'] & {
    listByCorrelationId(
      params: ListEventsByCorrelationIdParams & { runId?: string },
    ): Promise<PaginatedResponse<Event>>;
  };
}

export function createWorld(options: AwsworldWorldOptions = {}): AwsworldWorld {
  const { get, post, stream } = connect(options);
  let deploymentId: Promise<string> | undefined;

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
      get: async (runId: string, params?: { resolveData?: string }) =>
        get(`/v1/runs/${idSegment('runId', runId)}${query({ resolveData: params?.resolveData })}`, { runId }),
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
          `/v1/runs/${idSegment('runId', runId)}/attributes`,
          { changes, options: options ?? {} },
          { runId },
        )) as { run?: { attributes?: Record<string, string> } };
        return { attributes: result.run?.attributes ?? {} };
      },
    },

    steps: {
      get: async (runId: string, stepId: string, params?: { resolveData?: string }) =>
        get(
          `/v1/runs/${idSegment('runId', runId)}/steps/${idSegment('stepId', stepId)}${query({
            resolveData: params?.resolveData,
          })}`,
          { runId },
        ),
      list: async (params: { runId: string; pagination?: { limit?: number; cursor?: string }; resolveData?: string }) =>
        get(
          `/v1/runs/${idSegment('runId', params.runId)}/steps${query({ resolveData: params.resolveData, ...page(params.pagination) })}`,
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
            `/v1/runs/${idSegment('runId', runId)}/events${query({ resolveData: params?.resolveData, cursor })}`,
            { runId },
          )) as { data: { eventId: string }[]; cursor: string | null; hasMore: boolean };
          const found = result.data.find((event) => event.eventId === eventId);
          if (found) return found;
          if (!result.hasMore || !result.cursor) break;
          cursor = result.cursor;
        }
        throw new WorkflowWorldError(`event ${eventId} not found in run ${runId}`, { status: 404, code: 'event-not-found' });
      },
      list: async (params: { runId: string; pagination?: { limit?: number; cursor?: string; sortOrder?: string }; resolveData?: string }) =>
        get(
          `/v1/runs/${idSegment('runId', params.runId)}/events${query({
            resolveData: params.resolveData,
            ...page(params.pagination),
          })}`,
          { runId: params.runId },
        ),
      async listByCorrelationId(params: {
        correlationId: string;
        runId?: string;
        pagination?: { limit?: number; cursor?: string; sortOrder?: string };
        resolveData?: string;
      }) {
        if (!params.runId) {
          throw new WorkflowWorldError(
            'awsworld lists events by correlation id within one run (the call needs a runId)',
            { status: 400, code: 'invalid-input' },
          );
        }
        return get(
          `/v1/runs/${idSegment('runId', params.runId)}/events/by-correlation-id/${idSegment(
            'correlationId',
            params.correlationId,
          )}${query({
            resolveData: params.resolveData,
            ...page(params.pagination),
          })}`,
          { runId: params.runId },
        );
      },
    },

    hooks: {
      get: async (hookId: string, params?: { resolveData?: string }) =>
        get(`/v1/hooks/${idSegment('hookId', hookId)}${query({ resolveData: params?.resolveData })}`),
      getByToken: (hookToken: string, params?: { resolveData?: string }) =>
        get(
          DOT_SEGMENTS.has(hookToken) // (a path drops a "." or ".." segment, %2e too: the query carries it)
            ? `/v1/hooks/by-token${query({ token: hookToken, resolveData: params?.resolveData })}`
            : `/v1/hooks/by-token/${path(hookToken)}${query({ resolveData: params?.resolveData })}`,
          { token: hookToken },
        ),
      list: (params: { runId?: string; pagination?: { limit?: number; cursor?: string }; resolveData?: string }) =>
        get(`/v1/hooks${query({ runId: params.runId, resolveData: params.resolveData, ...page(params.pagination) })}`),
    },

    streams: {
      async write(runId: string | Promise<string>, name: string, chunk: string | Uint8Array) {
        const id = await runId;
        await post(`/v1/runs/${streamPath(id, name)}/chunks`, { chunks: [chunk] }, { runId: id });
      },
      async writeMulti(runId: string | Promise<string>, name: string, chunks: (string | Uint8Array)[]) {
        const id = await runId;
        if (chunks.length) await post(`/v1/runs/${streamPath(id, name)}/chunks`, { chunks }, { runId: id });
      },
      async close(runId: string | Promise<string>, name: string) {
        const id = await runId;
        await post(`/v1/runs/${streamPath(id, name)}/close`, {}, { runId: id });
      },
      get: async (runId: string, name: string, startIndex?: number | null): Promise<ReadableStream<Uint8Array>> =>
        stream(`/v1/runs/${streamPath(runId, name)}${query({ startIndex: startIndex ?? undefined })}`, {
          runId,
          stream: name,
        }),
      list: async (runId: string) =>
        ((await get(`/v1/runs/${idSegment('runId', runId)}/streams`, { runId })) as { streams: string[] }).streams,
      getChunks: async (runId: string, name: string, options?: { limit?: number; cursor?: string }) =>
        get(`/v1/runs/${streamPath(runId, name)}/chunks${query({ limit: options?.limit, cursor: options?.cursor })}`, {
          runId,
        }),
      getInfo: async (runId: string, name: string) => get(`/v1/runs/${streamPath(runId, name)}/info`, { runId }),
    },

    async close() {
      /* nothing held: each call is one request */
    },
  };
  return world as unknown as AwsworldWorld;
}

export default createWorld;
