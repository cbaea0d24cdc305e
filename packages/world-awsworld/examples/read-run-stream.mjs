// A run's stream read so that its reader gets an error when the read cannot go on (docs: How-to / The World over
// HTTP, "Read a run's stream"). `run.getReadable()` of the Workflow SDK (@workflow/core 5.0.0-beta.35 to beta.55)
// never passes its source's error on: when awsworld serve stays away (or any World's `streams.get` fails), the
// app's read stays pending for good. This reads the same stream through the World (`streams.get`, whose errors
// reach its reader: `stream-cut`, `unreachable`) and decodes it with the runtime's own deserializer, piped, so
// the values are what `getReadable()` gives and an error travels to the reader.
// test/world.node-test.mjs runs it against `awsworld serve`, away for good and back.
// --8<-- [start:read]
import { getDeserializeStream, getExternalRevivers } from '@workflow/core/serialization';
import { getWorld } from 'workflow/runtime';

/** The values a run wrote to its stream (`getWritable({ namespace })` in the workflow), from `startIndex`. */
export async function readRunStream(runId, { namespace, startIndex = 0 } = {}) {
  const world = await getWorld();
  let name = `${runId.replace('wrun_', 'strm_')}_user`; // the runtime's name for the run's stream
  if (namespace) name += `_${Buffer.from(namespace, 'utf-8').toString('base64url')}`;
  const bytes = await world.streams.get(runId, name, startIndex);
  const revivers = getExternalRevivers(globalThis, [], runId, undefined); // (awsworld runs unencrypted)
  return bytes.pipeThrough(getDeserializeStream(revivers, undefined));
}
// --8<-- [end:read]
