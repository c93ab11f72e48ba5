// Maps an async iterator, item by item, keeping `return` direct.
//
// Not an async generator: a generator suspended in `await source.next()` cannot be
// returned until the source yields, so a subscription completed while its post is
// quiet would keep watching it. Here `return` reaches the source at once.

/**
 * `map` answers each item's value, or undefined to skip the item. When the source or
 * `map` throws, the source is returned before the error goes on: consumers such as
 * graphql-ws do not return an iterator that threw.
 */
export function mapIterator<T, R>(source: AsyncIterator<T>, map: (item: T) => R | undefined | Promise<R | undefined>): AsyncIterableIterator<R> {
  const mapped: AsyncIterableIterator<R> = {
    async next() {
      try {
        for (;;) {
          const item = await source.next();
          if (item.done) return { done: true, value: undefined };
          const value = await map(item.value);
          if (value !== undefined) return { done: false, value };
        }
      } catch (error) {
        await source.return?.();
        throw error;
      }
    },
    async return() {
      await source.return?.();
      return { done: true, value: undefined };
    },
    [Symbol.asyncIterator]() {
      return mapped;
    },
  };
  return mapped;
}
