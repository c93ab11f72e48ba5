// Requests sent on a schedule, whatever the answers take: a request is due every
// 1/rate seconds and sent then, however many are still in flight, and its latency
// runs from when it was due. A slow service then shows as slow answers, not as
// fewer requests (which is what a loop that waits for each answer would measure).
import { setTimeout as sleep } from "node:timers/promises";
import type { LatencySample } from "./load.js";

export interface Paced {
  readonly samples: LatencySample[];
  /** Sends no more; resolves when every request sent has its answer. */
  stop(): Promise<void>;
}

/**
 * Calls `send` `perSecond` times a second until stopped; `send` resolves with
 * null on success or with what went wrong. `clockMs` says when (ms into the load).
 */
export function startPaced(perSecond: number, clockMs: () => number, send: () => Promise<string | null>): Paced {
  const samples: LatencySample[] = [];
  const inFlight = new Set<Promise<void>>();
  let stopping = false;
  const loop = (async () => {
    const from = clockMs();
    for (let n = 0; !stopping; n++) {
      const dueMs = from + (n * 1000) / perSecond;
      if (dueMs > clockMs()) await sleep(dueMs - clockMs());
      if (stopping) break;
      const request: Promise<void> = send()
        .catch((error: unknown) => (error as { cause?: { code?: string } }).cause?.code ?? (error as Error).name)
        .then((error) => {
          samples.push({ atMs: dueMs, ms: clockMs() - dueMs, error });
          inFlight.delete(request);
        });
      inFlight.add(request);
    }
  })();
  return {
    samples,
    async stop() {
      stopping = true;
      await loop;
      await Promise.all(inFlight);
    },
  };
}
