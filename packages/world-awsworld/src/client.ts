/**
 * `createClient`: a TypeScript app's calls to awsworld's *Python* workflows, the `Client` of awsworld's Python API
 * over `awsworld serve`'s Client endpoints (`POST /v1/client/start`, `/v1/client/hooks/resume`,
 * `/v1/client/runs/{runId}/cancel`) and the World's wait (`GET /v1/runs/{runId}/wait`).
 *
 * Its requests are `createWorld`'s (http.ts's `connect`): the same options and environment, a bearer token for a
 * token server, SigV4 (service `lambda`) for the stack's Function URL, errors rebuilt as the `@workflow/errors`
 * class the server names with its `status`, `code`, `type` and `details`. Arguments, payloads and results are
 * JSON, as a Python caller's are stored (a workflow whose codec stores something else returns what it stores).
 *
 * `result` mirrors the Python `Run.result()` (src/awsworld/client/client.py): it repeats the server's long poll
 * (at most 60 s a request) until the run ends or `timeout` passes, and a run that did not complete throws the
 * Workflow SDK's own error for it: `WorkflowRunFailedError` (its `cause` the stored error: `message`, `name`,
 * `type`, `stack`, and for a step's failure `stepName`, `stepId`, `attempt`, `cause`; for a child run's
 * `childRunId`, `childWorkflowName`, `cause`), `WorkflowRunCancelledError`
 * (with the `reason` given to `cancel`), `WorkflowRunNotCompletedError` when `timeout` passed first.
 */
import { WorkflowRunCancelledError, WorkflowRunFailedError, WorkflowRunNotCompletedError } from '@workflow/errors';
import type { Event, WorkflowRun } from '@workflow/world';
import { connect, idSegment, query } from './http.js';
import type { AwsworldServerOptions } from './http.js';

/** What `resumeHook` answers: the hook_received event, and whether this call recorded it (`false`: the same
 * `idempotencyKey` had already delivered it). */
export interface HookResumed {
  event: Event;
  recorded: boolean;
}

/** A cancelled run's `result`: the Workflow SDK's `WorkflowRunCancelledError` with the reason `cancel` recorded. */
export interface RunCancelledError extends WorkflowRunCancelledError {
  reason?: string;
}

export interface AwsworldClient {
  /** Start a run of the Python workflow registered as `workflow` (its `@workflow(name=...)`), with JSON `args` and
   * `kwargs`; `runId` makes the start idempotent (the same id starts one run). A name no worker registers, or
   * arguments that do not fit, is a 400 naming the field (`details.field`: `workflow`, `args`). */
  start(
    workflow: string,
    args?: unknown[],
    kwargs?: Record<string, unknown>,
    opts?: { runId?: string },
  ): Promise<{ runId: string }>;
  /** Deliver `payload` to the hook `token`; `idempotencyKey` makes a repeated call deliver it once. A token no run
   * holds yet is a `HookNotFoundError` at once, or once `wait` seconds (at most 60) have passed without its run
   * reaching `create_hook`, as the Python `Client.resume_hook(wait=...)`. */
  resumeHook(token: string, payload: unknown, opts?: { idempotencyKey?: string; wait?: number }): Promise<HookResumed>;
  /** Cancel the run; `reason` (up to 512 characters) is what its `result` throws with. Answers the run. */
  cancel(runId: string, opts?: { reason?: string }): Promise<WorkflowRun>;
  /** The run's output once it has completed, waiting up to `timeout` seconds (default 60; `Infinity`: no end). */
  result<T = unknown>(runId: string, opts?: { timeout?: number }): Promise<T>;
}

/** The longest one wait request asks the server to hold (the server holds at most 60 s). */
const WAIT_SECONDS = 60;

export function createClient(options: AwsworldServerOptions = {}): AwsworldClient {
  const { get, post } = connect(options);

  /** The reason `cancel` recorded: its run_cancelled event holds it, the log's last (as the Python client reads it). */
  async function cancelReason(runId: string): Promise<string | undefined> {
    let reason: string | undefined;
    let cursor: string | undefined;
    for (;;) {
      const page = (await get(`/v1/runs/${idSegment('runId', runId)}/events${query({ resolveData: 'none', cursor })}`, {
        runId,
      })) as { data: { eventType: string; eventData?: { cancelReason?: unknown } }[]; cursor: string | null; hasMore: boolean };
      for (const event of page.data) {
        if (event.eventType === 'run_cancelled') {
          const given = event.eventData?.cancelReason;
          reason = typeof given === 'string' ? given : undefined;
        }
      }
      if (!page.hasMore || !page.cursor) return reason;
      cursor = page.cursor;
    }
  }

  return {
    async start(workflow, args = [], kwargs = {}, opts = {}) {
      return (await post('/v1/client/start', { workflow, args, kwargs, runId: opts.runId })) as { runId: string };
    },

    async resumeHook(token, payload, opts = {}) {
      return (await post('/v1/client/hooks/resume', { token, payload, idempotencyKey: opts.idempotencyKey,
        wait: opts.wait }, { token })) as HookResumed;
    },

    async cancel(runId, opts = {}) {
      return (await post(`/v1/client/runs/${idSegment('runId', runId)}/cancel`, { reason: opts.reason }, { runId })) as WorkflowRun;
    },

    async result<T = unknown>(runId: string, opts: { timeout?: number } = {}): Promise<T> {
      const timeout = opts.timeout ?? 60;
      if (typeof timeout !== 'number' || Number.isNaN(timeout) || timeout < 0) {
        throw new TypeError(`world-awsworld: result's timeout must be a number of seconds >= 0, not ${String(timeout)}`);
      }
      const deadline = Date.now() + timeout * 1000;
      for (;;) {
        const wait = Math.max(0, Math.min(WAIT_SECONDS, (deadline - Date.now()) / 1000));
        const run = (await get(`/v1/runs/${idSegment('runId', runId)}/wait${query({ timeout: wait })}`, { runId })) as WorkflowRun;
        if (run.status === 'completed') return run.output as T;
        if (run.status === 'failed') throw new WorkflowRunFailedError(runId, run.error, { errorCode: run.errorCode });
        if (run.status === 'cancelled') {
          const error: RunCancelledError = new WorkflowRunCancelledError(runId);
          const reason = await cancelReason(runId);
          if (reason !== undefined) {
            error.reason = reason;
            error.message = `${error.message}: ${reason}`;
          }
          throw error;
        }
        if (Date.now() >= deadline) {
          const error = new WorkflowRunNotCompletedError(runId, run.status);
          error.message = `${error.message}: still ${run.status} after ${timeout} s`;
          throw error;
        }
      }
    },
  };
}
