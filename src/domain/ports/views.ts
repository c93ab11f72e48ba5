// Views counted in Redis, flushed from each API process's memory.
import type { Target } from "../model/index.js";

/** Views counted in Redis, or the need to load the post first. */
export type CountedViews = { readonly kind: "counted"; readonly views: number } | { readonly kind: "unloaded" };

export interface ViewStore {
  /**
   * Adds `count` views to the post's counter and appends them to the outbox, in one
   * step, unless the post already took flush `flush.seq` or a later one from
   * `flush.sender`: a retry of the same flush (after a timeout that may have reached
   * Redis) counts once, and a stale one arriving after a newer flush counts nothing.
   * The post remembers a sender's last flush for ten minutes after it.
   */
  add(target: Target, count: number, flush: ViewFlush): Promise<CountedViews>;
}

/** Who sent a flush of views (one id per process) and its number, growing with each flush of that sender. */
export interface ViewFlush {
  readonly sender: string;
  readonly seq: number;
}
