// Collects items into batches of at most `maxItems`, or whatever arrived within
// `lingerMs` of the first, and hands each batch to `flush`, `concurrency` at a
// time. Each add() resolves with its own item's outcome once its batch is done.

export interface BatcherOptions<T, R> {
  /** Items in one batch at most. */
  readonly maxItems: number;
  /** How long the first item of a batch waits for company, in milliseconds. */
  readonly lingerMs: number;
  /** Batches handed to `flush` at the same time at most (default 1). */
  readonly concurrency?: number;
  /** Handles a batch; returns one outcome per item, in order. Throwing fails every item of the batch. */
  readonly flush: (items: readonly T[]) => Promise<R[]>;
}

interface Waiting<T, R> {
  readonly item: T;
  resolve(outcome: R): void;
  reject(error: unknown): void;
}

export class BatcherClosedError extends Error {
  constructor() {
    super("The batcher is closed; the item was not taken.");
  }
}

export class Batcher<T, R> {
  private buffer: Waiting<T, R>[] = [];
  private timer: NodeJS.Timeout | null = null;
  private readonly lanes: Promise<void>[];
  private nextLane = 0;
  private closed = false;

  constructor(private readonly options: BatcherOptions<T, R>) {
    this.lanes = Array.from({ length: Math.max(1, options.concurrency ?? 1) }, () => Promise.resolve());
  }

  add(item: T): Promise<R> {
    if (this.closed) return Promise.reject(new BatcherClosedError());
    return new Promise<R>((resolve, reject) => {
      this.buffer.push({ item, resolve, reject });
      if (this.buffer.length >= this.options.maxItems) this.cut();
      else this.timer ??= setTimeout(() => this.cut(), this.options.lingerMs);
    });
  }

  /** Hands what is buffered to `flush` now, without waiting for the linger. */
  flush(): void {
    this.cut();
  }

  /** Flushes what is buffered, waits for every batch in hand, and takes no more items. */
  async close(): Promise<void> {
    this.closed = true;
    this.cut();
    await Promise.all(this.lanes);
  }

  private cut(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.buffer.length === 0) return;
    const batch = this.buffer.splice(0, this.options.maxItems);
    if (this.buffer.length > 0) this.timer = setTimeout(() => this.cut(), 0);
    // Batches take turns over the lanes; within a lane each waits for the one before.
    const lane = this.nextLane;
    this.nextLane = (this.nextLane + 1) % this.lanes.length;
    this.lanes[lane] = (this.lanes[lane] as Promise<void>).then(async () => {
      try {
        const outcomes = await this.options.flush(batch.map((w) => w.item));
        batch.forEach((w, i) => w.resolve(outcomes[i] as R));
      } catch (error) {
        batch.forEach((w) => w.reject(error));
      }
    });
  }
}
