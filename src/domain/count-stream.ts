// One subscription's stream of counts: the newest counts of each of its posts not
// yet taken, sent at most once an interval per post after the first change
// (live-counts.ts feeds it).
import { performance } from "node:perf_hooks";
import type { Counts } from "./model/index.js";

export interface PostCountsUpdate {
  readonly postId: bigint;
  readonly counts: Counts;
}

/** What one subscription receives; `return()` (or a `for await` left) stops watching. */
export type CountStream = AsyncIterableIterator<PostCountsUpdate>;

/** A monotonic clock: a wall clock stepped back would hold every read and message for as long as the step. */
const now = () => performance.now();

/** One subscription: the newest counts of each of its posts not yet taken, and when each post was last sent. */
export class Stream implements CountStream {
  private readonly waiting = new Map<bigint, Counts>();
  private readonly sentAt = new Map<bigint, number>();
  /** Per post, the number of the newest read offered: an older read that ends later is dropped. */
  private readonly offeredRead = new Map<bigint, number>();
  private wake: (() => void) | null = null;
  private timer: NodeJS.Timeout | null = null;
  closed = false;

  constructor(
    readonly postIds: readonly bigint[],
    private readonly intervalMs: number,
    private readonly onClose: (stream: Stream) => void,
  ) {}

  /** Offers what read number `read` found; counts of an older read than one offered already are not sent. */
  offer(postId: bigint, counts: Counts, read: number): void {
    if (this.closed || read < (this.offeredRead.get(postId) ?? 0)) return;
    this.offeredRead.set(postId, read);
    this.waiting.set(postId, counts);
    this.wake?.();
  }

  /** The next post whose interval since it was last sent has passed, or how long until one's has. */
  private take(now: number): PostCountsUpdate | number {
    let soonest = Infinity;
    for (const [postId, counts] of this.waiting) {
      const sent = this.sentAt.get(postId);
      const readyAt = (sent ?? -Infinity) + this.intervalMs;
      if (readyAt <= now) {
        this.waiting.delete(postId);
        // The first message, the counts as they stood at subscribing, starts no interval: a like
        // made right after it is sent at once, not an interval later. The interval runs from the second.
        this.sentAt.set(postId, sent === undefined ? -Infinity : now);
        return { postId, counts };
      }
      soonest = Math.min(soonest, readyAt - now);
    }
    return soonest;
  }

  async next(): Promise<IteratorResult<PostCountsUpdate>> {
    while (!this.closed) {
      const taken = this.take(now());
      if (typeof taken !== "number") return { value: taken, done: false };
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        if (taken !== Infinity) this.timer = setTimeout(resolve, taken);
      });
      this.wake = null;
      if (this.timer) clearTimeout(this.timer);
      this.timer = null;
    }
    return { value: undefined, done: true };
  }

  async return(): Promise<IteratorResult<PostCountsUpdate>> {
    this.end();
    return { value: undefined, done: true };
  }

  end(): void {
    if (this.closed) return;
    this.closed = true;
    this.waiting.clear();
    this.wake?.();
    this.onClose(this);
  }

  [Symbol.asyncIterator](): this {
    return this;
  }
}
