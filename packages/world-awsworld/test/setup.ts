// Node 20 lacks Promise.withResolvers (Node 22 has it); the suite's hooks test calls it in the vitest process.
type Resolvers<T> = { promise: Promise<T>; resolve: (value: T) => void; reject: (reason?: unknown) => void };
const promises = Promise as unknown as { withResolvers?: <T>() => Resolvers<T> };
promises.withResolvers ??= <T>(): Resolvers<T> => {
  let resolve!: (value: T) => void;
  let reject!: (reason?: unknown) => void;
  const promise = new Promise<T>((ok, fail) => {
    resolve = ok;
    reject = fail;
  });
  return { promise, resolve, reject };
};
