// Collects items into batches of at most `maxItems`, or whatever arrived within
// `lingerMs` of the first, and hands each batch to `flush` one at a time. Each
// add() resolves with its own item's outcome once the batch holding it is done.

export interface BatcherOptions<T, R> {
  /** Items in one batch at most. */
  readonly maxItems: number;
  /** How long the first item of a batch waits for company, in milliseconds. */
  readonly lingerMs: number;
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
  private running: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(private readonly options: BatcherOptions<T, R>) {}

  add(item: T): Promise<R> {
    if (this.closed) return Promise.reject(new BatcherClosedError());
    return new Promise<R>((resolve, reject) => {
      this.buffer.push({ item, resolve, reject });
      if (this.buffer.length >= this.options.maxItems) this.cut();
      else this.timer ??= setTimeout(() => this.cut(), this.options.lingerMs);
    });
  }

  /** Flushes what is buffered, waits for every batch in hand, and takes no more items. */
  async close(): Promise<void> {
    this.closed = true;
    this.cut();
    await this.running;
  }

  private cut(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.buffer.length === 0) return;
    const batch = this.buffer.splice(0, this.options.maxItems);
    if (this.buffer.length > 0) this.timer = setTimeout(() => this.cut(), 0);
    // Batches run one after another: the next waits for this one's commit.
    this.running = this.running.then(async () => {
      try {
        const outcomes = await this.options.flush(batch.map((w) => w.item));
        batch.forEach((w, i) => w.resolve(outcomes[i] as R));
      } catch (error) {
        batch.forEach((w) => w.reject(error));
      }
    });
  }
}
