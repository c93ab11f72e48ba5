// Whether this process can serve: every dependency answers within a bound.
// Load balancers poll it, so a stalled store must show here within the bound
// rather than hold the probe for as long as the stall lasts.
import { setTimeout as sleep } from "node:timers/promises";

/** Resolves when the dependency answered, rejects with what went wrong. */
export type Probe = () => Promise<unknown>;

export interface ReadinessReport {
  readonly ready: boolean;
  /** Per dependency: "ok", or why not. */
  readonly checks: Readonly<Record<string, string>>;
}

export type Readiness = () => Promise<ReadinessReport>;

export function createReadiness(probes: Readonly<Record<string, Probe>>, timeoutMs: number): Readiness {
  const within = async (probe: Probe): Promise<string> => {
    const abandon = new AbortController();
    try {
      const timedOut = sleep(timeoutMs, undefined, { signal: abandon.signal }).then(() => {
        throw new Error(`no answer within ${timeoutMs} ms`);
      });
      await Promise.race([probe(), timedOut]);
      return "ok";
    } catch (error) {
      return error instanceof Error ? error.message : String(error);
    } finally {
      abandon.abort();
    }
  };
  return async () => {
    const results = await Promise.all(Object.entries(probes).map(async ([name, probe]) => [name, await within(probe)] as const));
    return { ready: results.every(([, result]) => result === "ok"), checks: Object.fromEntries(results) };
  };
}
